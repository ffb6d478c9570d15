# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each Kubernetes distribution keeps kubelet's configuration, and how numa.kube changes it.

kubeadm merges into /var/lib/kubelet/config.yaml (or writes a --config-dir drop-in when kubelet
runs with one); EKS AL2 merges into kubelet-config.json; EKS AL2023 (nodeadm), RKE2 and k3s run
kubelet with a --config-dir, so numa.kube adds a drop-in there that sorts after theirs. The state
files of the CPU and Memory Managers live in /var/lib/kubelet on all of them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import FLAGS
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import detect_format, load_text, merge_patch
from ansible_collections.numa.kube.plugins.module_utils.kubelet.rke2 import config_files
from ansible_collections.numa.kube.plugins.module_utils.node.distribution import MARKERS, detect_distribution

DROPIN_NAME = "50-numa-kube.conf"
STATE_DIR = "/var/lib/kubelet"
HEALTH_URL = "http://127.0.0.1:10248/healthz"

# distribution -> how its kubelet is configured. ``services`` in order of preference;
# ``eviction`` is the distribution name numa.kube.reserved_memory knows.
LAYOUTS = {
    "kubeadm": {
        "services": ["kubelet"],
        "config": "/var/lib/kubelet/config.yaml",
        "config_dir": None,
        "eviction": "kubeadm",
        "flag_files": ["/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet"],
        # where users add kubelet flags and kubeadm never writes (KUBELET_EXTRA_ARGS): Debian's, RHEL's
        "extra_args_files": ["/etc/default/kubelet", "/etc/sysconfig/kubelet"],
    },
    "eks-al2": {
        "services": ["kubelet"],
        "config": "/etc/kubernetes/kubelet/kubelet-config.json",
        "config_dir": None,
        "eviction": "eks",
        "flag_files": ["/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf"],
    },
    "eks-al2023": {
        "services": ["kubelet"],
        "config": "/etc/kubernetes/kubelet/config.json",
        "config_dir": "/etc/kubernetes/kubelet/config.json.d",
        "eviction": "eks",
        "flag_files": ["/etc/eks/kubelet/environment"],
    },
    "rke2": {
        "services": ["rke2-agent", "rke2-server"],
        "config": None,
        "config_dir": "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d",
        "eviction": "rke2",
        "launcher_config": "/etc/rancher/rke2/config.yaml",
        # rke2 runs kubelet as a child process that logs to its own file, and restarts it on a
        # crash without the unit's main process changing
        "kubelet_process": "kubelet",
        "kubelet_log": "/var/lib/rancher/rke2/agent/logs/kubelet.log",
    },
    "k3s": {
        "services": ["k3s-agent", "k3s"],
        "config": None,
        "config_dir": "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d",
        "eviction": "k3s",
        "launcher_config": "/etc/rancher/k3s/config.yaml",
        # k3s runs kubelet inside its own process, which logs to the unit's journal
    },
}

_CONFIG_DIR_FLAG = re.compile(r"--config-dir[= ]+[\"']?([^\s\"']+)")


# What shows that a node runs the control plane, per distribution: kubeadm's static pod manifest
# for the API server, or the server flavour of the RKE2/k3s service.
_CONTROL_PLANE_MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"
_SERVER_SERVICES = ("rke2-server", "k3s")


def control_plane_evidence(distribution, service, exists):
    """Why the node counts as a control-plane node, or '' when it does not."""
    if distribution == "kubeadm" and exists(_CONTROL_PLANE_MANIFEST):
        return "static pod manifest %s" % _CONTROL_PLANE_MANIFEST
    if service in _SERVER_SERVICES:
        return "kubelet runs under the %s service" % service
    return ""


class KubeletNodeError(ProblemsError):
    """The node's kubelet set-up cannot be worked out or would fight numa.kube's change."""


def config_dir_from_flags(texts):
    """The --config-dir kubelet is started with, from flag files (env files, systemd drop-ins) in the
    order their flags reach kubelet's command line: the last one wins, as on the command line."""
    found = None
    for text in texts:
        for match in _CONFIG_DIR_FLAG.finditer(text or ""):
            found = match.group(1)
    return found


# kubelet reads --config-dir drop-ins without a feature gate from 1.30 on (beta, on by default)
CONFIG_DIR_SINCE = (1, 30)
_EXTRA_ARGS = re.compile(r"""^(\s*KUBELET_EXTRA_ARGS\s*=\s*)(?:"([^"]*)"|'([^']*)'|(\S*))\s*$""")


def parse_kubelet_version(text):
    """``Kubernetes v1.36.3`` (kubelet --version) -> (1, 36, 3), or None."""
    match = re.search(r"\bv?(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(part) for part in match.groups()) if match else None


def with_config_dir(text, config_dir):
    """An environment file (``/etc/default/kubelet``) whose KUBELET_EXTRA_ARGS also carries
    ``--config-dir``; every other line and argument kept."""
    lines = (text or "").splitlines()
    flag = "--config-dir=" + config_dir
    for index, line in enumerate(lines):
        if not re.match(r"^\s*KUBELET_EXTRA_ARGS\s*=", line):
            continue
        match = _EXTRA_ARGS.match(line)
        if not match:
            # a second assignment would silently replace the user's flags: let them add it
            raise KubeletNodeError(
                "cannot add %s to line %d of the kubelet flags file (%r): numa.kube only edits a "
                "KUBELET_EXTRA_ARGS value that is quoted or a single word. Add %s to it yourself, or set "
                "kubelet_kubeadm_config_dir to \"\" to merge into config.yaml instead" % (flag, index + 1, line, flag))
        value = next((group for group in match.groups()[1:] if group is not None), "")
        lines[index] = '%s"%s"' % (match.group(1), (value + " " + flag).strip())
        break
    else:
        lines.append('KUBELET_EXTRA_ARGS="%s"' % flag)
    return "\n".join(lines) + "\n"


def launcher_kubelet_args(documents):
    """kubelet-arg entries from RKE2/k3s config.yaml and config.yaml.d files, in load order.

    ``documents`` is a list of (path, parsed YAML). ``kubelet-arg`` replaces what came before,
    ``kubelet-arg+`` appends, as RKE2 and k3s merge their config files.
    """
    args = []
    for _path, document in documents:
        if not isinstance(document, dict):
            continue
        for key, value in document.items():  # in the file's order, as RKE2 and k3s read it
            if key not in ("kubelet-arg", "kubelet-arg+") or value is None:
                continue
            values = value if isinstance(value, list) else [value]
            args = (args if key.endswith("+") else []) + [str(v) for v in values]
    return args


def flag_conflicts(kubelet_args, settings):
    """Flags that would override fields numa.kube writes: [(arg, field)].

    kubelet lets command-line flags win over its configuration files, so such a flag silently
    undoes the change.
    """
    # A field with no flag cannot be overridden by one, and an unknown field is the configuration
    # check's to report (with a suggestion), so neither is looked up here.
    ours = dict((FLAGS[field], field) for field in settings if FLAGS.get(field))
    found = []
    for arg in kubelet_args:
        name = arg.lstrip("-").split("=", 1)[0]
        if name in ours:
            found.append((arg, ours[name]))
    return found


# Flags whose values change the reservation kubelet demands; kubelet reads them over its files.
_RESERVATION_FLAGS = {"kube-reserved": ("kubeReserved", "="), "system-reserved": ("systemReserved", "="),
                      "eviction-hard": ("evictionHard", "<")}


def split_argv(argv):
    """``--name=value``, ``--name value`` and ``name=value`` (kubelet-arg) in an argument list, as
    normalised ``--name=value`` strings; a bare ``--name`` stays as it is."""
    args = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if not arg.startswith("-"):
            if "=" in arg:
                args.append("--" + arg)
            continue
        if "=" not in arg and index < len(argv) and not argv[index].startswith("-"):
            arg = "%s=%s" % (arg, argv[index])
            index += 1
        args.append("--" + arg.lstrip("-"))
    return args


def flag_settings(args):
    """The reservation inputs set by flags, in KubeletConfiguration form (later flags win)."""
    result = {}
    for arg in args:
        name, _sep, value = arg.lstrip("-").partition("=")
        if name not in _RESERVATION_FLAGS or not value:
            continue
        field, separator = _RESERVATION_FLAGS[name]
        values = result.setdefault(field, {})
        for item in value.split(","):
            key, found, amount = item.partition(separator)
            if found:
                values[key.strip()] = amount.strip()
    return result


def flag_file_args(path, text):
    """[(--flag[=value], "PATH line N")] from an environment file or systemd drop-in."""
    found = []
    for number, line in enumerate((text or "").splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for arg in re.findall(r"--[a-z0-9-]+(?:=[^\s\"']*)?", line):
            found.append((arg, "%s line %d" % (path, number)))
    return found


def plan_layout(distribution, exists, read_text, listdir, overrides=None):
    """Which files to change for ``distribution`` and which files kubelet reads before ours.

    Returns a dict: ``mode`` (merge or dropin), ``path`` (the file numa.kube writes), ``base_paths``
    (files kubelet merges before it, for a drop-in), ``config_dir``, ``services`` and ``eviction``.
    ``overrides`` may set ``config_path`` and ``config_dir``; and ``durable_dir`` with
    ``kubelet_version``: on a kubeadm node whose kubelet (1.30 or newer) has no --config-dir yet,
    the settings go into a drop-in there, which ``kubeadm upgrade`` leaves alone (it renders
    config.yaml again from the kubelet-config ConfigMap), and ``flag_file``/``flag_file_text`` say
    how KUBELET_EXTRA_ARGS gains --config-dir.
    """
    if distribution not in LAYOUTS:
        raise KubeletNodeError("distribution %r is not one of %s" % (distribution, ", ".join(sorted(LAYOUTS))))
    overrides = overrides or {}
    layout = LAYOUTS[distribution]
    config = overrides.get("config_path") or layout["config"]
    config_dir = overrides.get("config_dir") or layout["config_dir"]
    if not config_dir and layout.get("flag_files"):
        config_dir = config_dir_from_flags([read_text(p) for p in layout["flag_files"]])
    result = {
        "distribution": distribution,
        "services": list(layout["services"]),
        "eviction": layout["eviction"],
        "config_dir": config_dir,
        "base_paths": [],
        "later_paths": [],
        "flag_file": None,
        "flag_file_text": None,
    }
    durable = overrides.get("durable_dir")
    version = overrides.get("kubelet_version")
    if not config_dir and durable and layout.get("extra_args_files") and version and version[:2] >= CONFIG_DIR_SINCE:
        files = layout["extra_args_files"]
        flag_file = next((path for path in files if exists(path)),
                         files[0] if exists("/etc/debian_version") else files[-1])
        config_dir = result["config_dir"] = durable
        result["flag_file"] = flag_file
        result["flag_file_text"] = with_config_dir(read_text(flag_file), durable)
    if config_dir:
        result["mode"] = "dropin"
        result["path"] = os.path.join(config_dir, DROPIN_NAME)
        if config and exists(config):
            result["base_paths"].append(config)
        others = sorted(n for n in (listdir(config_dir) or []) if n.endswith(".conf") and n != DROPIN_NAME)
        result["later_paths"] = [os.path.join(config_dir, n) for n in others if n > DROPIN_NAME]
        others = [n for n in others if n < DROPIN_NAME]
        result["base_paths"].extend(os.path.join(config_dir, n) for n in others)
    else:
        if not config:
            raise KubeletNodeError("distribution %s has no kubelet configuration file to merge into" % distribution)
        if not exists(config):
            raise KubeletNodeError(
                "kubelet configuration %s does not exist; is this a %s node? Set kubelet_distribution or "
                "kubelet_config_path" % (config, distribution))
        result["mode"] = "merge"
        result["path"] = config
    return result


def later_dropin_conflicts(settings, later_documents):
    """Fields numa.kube sets that a drop-in read after its own sets too (that file would win)."""
    problems = []
    for path, document in later_documents:
        clash = sorted(set(settings) & set(document or {}))
        if clash:
            problems.append("%s sets %s too and kubelet reads it after numa.kube's %s, so it would win; remove "
                            "those fields from it or rename it to sort before %s"
                            % (path, ", ".join(clash), DROPIN_NAME, DROPIN_NAME))
    return problems


def pick_service(candidates, states):
    """The first candidate unit that is active, else the first that exists; ``states`` maps name ->
    systemd ActiveState ('' when the unit does not exist)."""
    for name in candidates:
        if states.get(name) in ("active", "activating", "reloading"):
            return name
    for name in candidates:
        if states.get(name):
            return name
    return None


def running_process(name="kubelet", proc_root="/proc"):
    """(pid, argv) of the oldest process called ``name``, or None (k3s runs kubelet inside its
    own process, so none is called kubelet there)."""
    try:
        pids = sorted(int(n) for n in os.listdir(proc_root) if n.isdigit())
    except OSError:
        return None
    for pid in pids:
        try:
            with open(os.path.join(proc_root, str(pid), "comm")) as handle:
                if handle.read().strip() != name:
                    continue
            with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
        except (IOError, OSError):
            continue  # the process ended while it was read
        if argv:
            return pid, argv
    return None


class NodeFiles:
    """File access below a root folder (``/`` on a node, a recorded tree in tests)."""

    def __init__(self, root="/"):
        self.root = root

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def exists(self, path):
        return os.path.exists(self.path(path))

    def read_text(self, path):
        try:
            with open(self.path(path)) as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    def listdir(self, path):
        try:
            return os.listdir(self.path(path))
        except OSError:
            return []


def _unique(pairs):
    seen = set()
    result = []
    for pair in pairs:
        if pair[0] not in seen:
            seen.add(pair[0])
            result.append(pair)
    return result


def _load(path, text):
    if text is None:
        return {}
    try:
        return load_text(text, detect_format(path, text)) or {}
    except Exception as exc:  # yaml and json raise different types
        raise KubeletNodeError("%s could not be parsed: %s" % (path, exc))


def read_node(files, distribution="auto", overrides=None, settings=None, service_states=None, running=None):
    """Everything the kubelet role needs to know about one node's kubelet, read without changing it.

    ``service_states(names)`` returns name -> systemd ActiveState; ``running`` is (pid, argv) of the
    kubelet process when one runs. Flags come from the distribution's flag files, RKE2/k3s
    ``kubelet-arg`` and the running kubelet's command line: one that sets a field of ``settings`` is
    refused (flags win over files, so numa.kube's value would be ignored), and the reservation
    inputs they set (kube-reserved, system-reserved, eviction-hard) are part of the effective
    configuration returned. Raises KubeletNodeError listing every problem: an unknown
    distribution, such flags, later drop-ins that would undo ``settings``.
    """
    if distribution in (None, "", "auto"):
        distribution = detect_distribution(files.exists)
        if distribution is None:
            raise KubeletNodeError(
                "no kubelet found: none of %s exists; set kubelet_distribution (one of %s) and the paths"
                % (", ".join(m for _d, m in MARKERS), ", ".join(sorted(LAYOUTS))))
    layout = plan_layout(distribution, files.exists, files.read_text, files.listdir, overrides)
    settings = settings or {}
    problems = []
    effective = {}
    for path in layout["base_paths"] + [layout["path"]]:
        effective = merge_patch(effective, _load(path, files.read_text(path)))
    later = [(path, _load(path, files.read_text(path))) for path in layout["later_paths"]]
    for _path, document in later:
        effective = merge_patch(effective, document)
    problems.extend(later_dropin_conflicts(settings, later))

    launcher = LAYOUTS[distribution].get("launcher_config")
    sources = []  # (--flag[=value], where it is set)
    if launcher:
        folder = launcher + ".d"
        names = config_files(launcher, files.listdir(folder))
        documents = [(path, _load(path, files.read_text(path))) for path in names]
        where = "kubelet-arg in %s or %s/*.yaml" % (launcher, folder)
        sources += [(arg, where) for arg in split_argv(launcher_kubelet_args(documents))]
    else:
        for path in LAYOUTS[distribution].get("flag_files", []):
            sources += flag_file_args(path, files.read_text(path))
    if running:
        pid, argv = running
        where = "the running kubelet's command line (pid %s)" % pid
        sources += [(arg, where) for arg in split_argv(list(argv)[1:])]
    for arg, where in _unique(sources):
        for _arg, field in flag_conflicts([arg], settings):
            problems.append("%s is set in %s; command-line flags win over kubelet's configuration files, so "
                            "numa.kube's %s would be ignored: remove that flag and let numa.kube manage %s"
                            % (arg, where, field, field))
    if problems:
        raise KubeletNodeError(problems)
    # flags win over the files: what they set is what kubelet runs with and demands
    effective = merge_patch(effective, flag_settings([arg for arg, _where in sources]))

    states = service_states(layout["services"]) if service_states else {}
    service = pick_service(layout["services"], states) or layout["services"][0]
    state_files = [name for name in ("cpu_manager_state", "memory_manager_state")
                   if files.exists(os.path.join(STATE_DIR, name))]
    max_pods = effective.get("maxPods")
    evidence = control_plane_evidence(distribution, service, files.exists)
    return {
        "control_plane": bool(evidence),
        "control_plane_evidence": evidence,
        "distribution": distribution,
        "eviction_distribution": layout["eviction"],
        "service": service,
        "service_state": states.get(service, "unknown"),
        "mode": layout["mode"],
        "path": layout["path"],
        "base_paths": layout["base_paths"],
        "config_dir": layout["config_dir"],
        "flag_file": layout["flag_file"],
        "flag_file_text": layout["flag_file_text"],
        "config": effective,
        "max_pods": int(max_pods) if max_pods is not None else None,
        "state_dir": STATE_DIR,
        "state_files": state_files,
        "health_url": HEALTH_URL,
        "health_process": LAYOUTS[distribution].get("kubelet_process", ""),
        "log_file": LAYOUTS[distribution].get("kubelet_log", ""),
    }


def listed_paths(root, entries):
    """The paths of ``entries`` on the node under ``root``: a path as given, a glob pattern (``*``,
    ``?``, ``[``) as the paths it matches there, sorted (none when nothing matches)."""
    found = []
    for entry in entries:
        if not any(char in entry for char in "*?["):
            found.append(entry)
            continue
        base = os.path.join(root, "")
        for match in sorted(glob.glob(os.path.join(root, entry.lstrip("/")))):
            found.append("/" + match[len(base):] if match.startswith(base) else match)
    return found
