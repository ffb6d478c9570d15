# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge NUMA settings into a KubeletConfiguration and decide what the change demands of the node.

Merging follows JSON merge patch (RFC 7386), as kubelet merges its --config-dir drop-ins: mappings
merge key by key, lists and scalars replace, and a null value removes the key. Validation refuses
what kubelet refuses when it starts on the file: unknown field names, values kubelet cannot decode
or its validation refuses (kubelet_rules), reservations and eviction settings it cannot parse, and
the CPU, Memory and Topology Managers it cannot create on the machine; so a typo is caught before
any node is drained.

The way back out: record_present says what a change must record so that it can be undone (a
drop-in is numa.kube's; a merged field's value before numa.kube's first change), plan_withdraw
how 'absent' undoes it, with the same plan (effective configuration, restart, stale state files).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import difflib
import json
import math
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import FLAGS, TYPES
from ansible_collections.numa.kube.plugins.module_utils.kubelet.rules import (
    decode_problems,
    feature_gates,
    settings_problems,
)
from ansible_collections.numa.kube.plugins.module_utils.quantity import Quantity, QuantityError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import (
    ReservationError,
    check_without_machine,
    eviction_problems,
    parse_reserved_memory,
    parse_resource_map,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import plan as reservation_plan
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import MAX_CPUS

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"

# Top-level fields of KubeletConfiguration (kubelet.config.k8s.io/v1beta1), from kubelet itself.
KNOWN_FIELDS = frozenset(["apiVersion", "kind"] + list(FLAGS))

CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CPU_POLICY_OPTIONS = ("full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket",
                      "distribute-cpus-across-cores", "strict-cpu-reservation",
                      "prefer-align-cpus-by-uncorecache")
# kubelet 1.36: the options that need a feature gate (the others are stable)
CPU_OPTION_GATES = {
    "align-by-socket": "CPUManagerPolicyAlphaOptions",
    "distribute-cpus-across-cores": "CPUManagerPolicyAlphaOptions",
    "distribute-cpus-across-numa": "CPUManagerPolicyBetaOptions",
}
# pairs of CPU Manager options kubelet refuses together when both are true
CPU_OPTION_CONFLICTS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)
TOPOLOGY_POLICY_OPTIONS = ("prefer-closest-numa-nodes", "max-allowable-numa-nodes")
DEFAULT_MAX_NUMA_NODES = 8
# Go's strconv.ParseBool, which kubelet reads option values with
GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
            "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_GO_ATOI = re.compile(r"^[+-]?[0-9]+\Z")
# strconv.Atoi's range on a 64-bit machine
_GO_INT = (-2 ** 63, 2 ** 63 - 1)


def parse_kubelet_cpuset(text):
    """A CPU list read as kubelet reads reservedSystemCPUs (k8s.io/utils/cpuset.Parse): ``0-3,8``,
    no spaces, no empty elements, ranges not backwards, numbers within Go's int. Ids from MAX_CPUS
    on are refused before anything is expanded: no machine has them online, so kubelet would
    refuse them too, after walking the range one CPU at a time. Returns a set; raises ValueError."""
    spans = []
    if text == "":
        return set()
    for part in text.split(","):
        bounds = part.split("-", 1)
        for bound in bounds:
            if not _GO_ATOI.match(bound):
                raise ValueError("%r is not a whole number" % bound)
            if len(bound) > 25 or not _GO_INT[0] <= int(bound) <= _GO_INT[1]:
                raise ValueError("%r is out of range (strconv.Atoi: value out of range)" % bound)
        numbers = [int(bound) for bound in bounds]
        start, end = numbers[0], numbers[-1]
        if start > end:
            raise ValueError("invalid range %r (%d > %d)" % (part, start, end))
        if end >= MAX_CPUS:
            raise ValueError("%r names CPU %d, but CPU ids stop at %d: no machine has it online"
                             % (part, end, MAX_CPUS - 1))
        spans.append((start, end))
    result = set()
    for start, end in spans:  # a "-" always splits a range: no bound is negative
        result.update(range(start, end + 1))
    return result


# Defaults kubelet applies when a field is absent.
DEFAULTS = {
    "cpuManagerPolicy": "none",
    "memoryManagerPolicy": "None",
    "topologyManagerPolicy": "none",
    "topologyManagerScope": "container",
}

# Fields whose change, under the static CPU policy, invalidates cpu_manager_state.
_CPU_STATE_FIELDS = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs")


class KubeletConfigError(ProblemsError):
    """A setting kubelet would refuse."""


def merge_patch(target, patch):
    """Apply a JSON merge patch; returns a new object and leaves both inputs alone."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _suggest(name):
    lowered = dict((f.lower(), f) for f in KNOWN_FIELDS)
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name, sorted(KNOWN_FIELDS), n=1, cutoff=0.75)
    return close[0] if close else None


def _choice(problems, settings, field, allowed):
    if field not in settings:
        return
    value = settings[field]
    if value in allowed or value == "":  # empty: kubelet's default
        return
    fix = ""
    for option in allowed:
        if isinstance(value, str) and option.lower() == value.lower():
            fix = " Values are case-sensitive: write %r." % option
            break
    problems.append("%s: %r is not one of %s.%s" % (field, value, ", ".join(allowed), fix))


def _string_options(problems, settings, field, allowed):
    options = settings.get(field)
    if options is None:
        return {}
    if not isinstance(options, dict):
        problems.append("%s: expected a mapping of option name to string value, got %r" % (field, options))
        return {}
    for name, value in sorted(options.items()):
        if allowed is not None and name not in allowed:
            problems.append("%s.%s: unknown option; kubelet knows %s" % (field, name, ", ".join(allowed)))
        if not isinstance(value, str):
            problems.append("%s.%s: %r must be a string (kubelet reads option values as strings): write "
                            "\"%s\"" % (field, name, value, str(value).lower() if isinstance(value, bool) else value))
    return options


def validate(config, numa_node_count=None, online_cpus=None, machine=None):
    """Check an effective KubeletConfiguration (after merging) for what kubelet refuses when it starts.

    Every field: its name, its value against the field's Go type, and ValidateKubeletConfiguration's
    rules on the values kubelet sees after defaulting, feature gates included (kubelet_rules); the
    reservations, eviction thresholds and the CPU, Topology and Memory Managers as kubelet creates
    them. ``numa_node_count`` and ``online_cpus`` (ids), or ``machine["cpus"]`` (the CPUs as
    numa.kube.topology_facts reports them: id, core, socket, numa_node) add what depends on the
    machine. With ``machine["numa_node_memory"]`` (and optionally ``memory_capacity`` and the
    eviction ``distribution``) a Static memory manager's reservedMemory is checked against the
    reservations of this very configuration and the machine's nodes, whatever set them: the
    role's variables, extra settings or the node's own file; without it, against the sums alone.
    """
    problems = []
    if not isinstance(config, dict):
        raise KubeletConfigError("the kubelet configuration must be a mapping, got %r" % (config,))
    for name in sorted(config, key=str):
        if name not in KNOWN_FIELDS:
            guess = _suggest(str(name))
            problems.append("%r is not a KubeletConfiguration field%s" % (
                name, "; did you mean %r?" % guess if guess else ""))
    decoding, undecodable = decode_problems(config)
    problems.extend(decoding)
    # what kubelet holds once the file is loaded: known fields whose value decodes
    usable = dict((k, v) for k, v in config.items() if k in TYPES and k not in undecodable and v is not None)
    gates = feature_gates(usable.get("featureGates"), problems)
    problems.extend(settings_problems(usable, gates))
    cpus = _Machine(machine, online_cpus)
    _managers(problems, usable, gates, numa_node_count, cpus)
    _reservations(problems, usable, machine)
    if problems:
        raise KubeletConfigError(problems)


class _Machine(object):
    """The CPUs kubelet's CPU Manager sees: online ids, and where known their cores, sockets and nodes."""

    def __init__(self, machine, online_cpus):
        details = (machine or {}).get("cpus") or []
        self.details = [c for c in details if isinstance(c, dict) and "id" in c]
        self.online = list(online_cpus) if online_cpus is not None else (
            [c["id"] for c in self.details] if self.details else None)

    def known(self):
        return bool(self.details)

    def sockets(self):
        return len(set(c.get("socket", 0) for c in self.details))

    def nodes(self):
        """CPUs per NUMA node, for the nodes that have CPUs."""
        result = {}
        for cpu in self.details:
            result[cpu.get("numa_node") or 0] = result.get(cpu.get("numa_node") or 0, 0) + 1
        return result


def _managers(problems, config, gates, numa_node_count, machine):
    """The CPU, Topology and Memory Managers' settings as kubelet creates the managers."""
    _choice(problems, config, "cpuManagerPolicy", CPU_POLICIES)
    _choice(problems, config, "memoryManagerPolicy", MEMORY_POLICIES)
    _choice(problems, config, "topologyManagerPolicy", TOPOLOGY_POLICIES)
    _choice(problems, config, "topologyManagerScope", TOPOLOGY_SCOPES)
    cpu_options = _string_options(problems, config, "cpuManagerPolicyOptions", CPU_POLICY_OPTIONS)
    # kubelet decodes the Topology Manager's options always (strings), but reads them only for a
    # policy other than none
    reads_options = config.get("topologyManagerPolicy") not in (None, "", "none")
    topo_options = _string_options(problems, config, "topologyManagerPolicyOptions",
                                   TOPOLOGY_POLICY_OPTIONS if reads_options else None)
    if not reads_options:
        topo_options = {}
    for name in ("prefer-closest-numa-nodes",):
        if name in topo_options and topo_options[name] not in GO_BOOLS:
            problems.append("topologyManagerPolicyOptions.%s: %r must be \"true\" or \"false\"" % (name, topo_options[name]))
    chosen = set()
    for name, value in sorted(cpu_options.items()):
        if name not in CPU_POLICY_OPTIONS:
            continue
        gate = CPU_OPTION_GATES.get(name)
        if gate and not gates.enabled(gate):
            problems.append("cpuManagerPolicyOptions.%s needs the feature gate %s (kubelet: 'not enabled, but option "
                            "\"%s\" provided'); set featureGates.%s: true or leave the option out"
                            % (name, gate, name, gate))
        if isinstance(value, str) and value not in GO_BOOLS:
            problems.append("cpuManagerPolicyOptions.%s: %r must be \"true\" or \"false\"" % (name, value))
        elif GO_BOOLS.get(value):
            chosen.add(name)
    for first, second in CPU_OPTION_CONFLICTS:
        if first in chosen and second in chosen:
            problems.append("cpuManagerPolicyOptions: %s and %s cannot be used at the same time; kubelet refuses "
                            "the pair" % (first, second))
    cpu_policy = config.get("cpuManagerPolicy") or DEFAULTS["cpuManagerPolicy"]
    if cpu_options and cpu_policy == "none":
        problems.append("cpuManagerPolicyOptions are set but cpuManagerPolicy is none, which takes no options "
                        "(kubelet: 'None policy: received unsupported options'); set cpuManagerPolicy static or "
                        "remove the options")

    limit = DEFAULT_MAX_NUMA_NODES
    if "max-allowable-numa-nodes" in topo_options:
        raw = topo_options["max-allowable-numa-nodes"]
        limit = int(raw) if isinstance(raw, str) and _GO_ATOI.match(raw) and len(raw) < 25 else None
        if limit is not None and not _GO_INT[0] <= limit <= _GO_INT[1]:
            problems.append("topologyManagerPolicyOptions.max-allowable-numa-nodes: %r is out of range: kubelet reads "
                            "it as a 64-bit whole number (strconv.Atoi: 'value out of range'); use a number of NUMA "
                            "nodes such as 16" % (raw,))
            limit = DEFAULT_MAX_NUMA_NODES
        elif limit is None or limit < DEFAULT_MAX_NUMA_NODES:
            problems.append("topologyManagerPolicyOptions.max-allowable-numa-nodes: %r must be a whole number "
                            ">= %d" % (raw, DEFAULT_MAX_NUMA_NODES))
            limit = DEFAULT_MAX_NUMA_NODES
    topology_policy = config.get("topologyManagerPolicy") or DEFAULTS["topologyManagerPolicy"]
    if numa_node_count and topology_policy != "none" and numa_node_count > limit:
        problems.append("topologyManagerPolicy %s: this machine has %d NUMA nodes and kubelet refuses more than "
                        "%d unless topologyManagerPolicyOptions.max-allowable-numa-nodes is raised to at least %d"
                        % (topology_policy, numa_node_count, limit, numa_node_count))
    if "align-by-socket" in chosen and topology_policy == "single-numa-node":
        problems.append("cpuManagerPolicyOptions.align-by-socket cannot be combined with topologyManagerPolicy "
                        "single-numa-node; kubelet refuses the pair")
    if cpu_policy == "static" and "align-by-socket" in chosen and machine.known():
        sockets, nodes = machine.sockets(), len(machine.nodes())
        if sockets > nodes:
            problems.append("cpuManagerPolicyOptions.align-by-socket: this machine has %d sockets and %d NUMA nodes "
                            "with CPUs; kubelet refuses the option where sockets outnumber NUMA nodes ('Align by "
                            "socket is not compatible with hardware where number of sockets are more than number of "
                            "NUMA'); leave it out" % (sockets, nodes))

    reserved_cpus = config.get("reservedSystemCPUs")
    if reserved_cpus not in (None, ""):
        try:
            cpus = parse_kubelet_cpuset(str(reserved_cpus))
        except ValueError as exc:
            cpus = None
            problems.append("reservedSystemCPUs: %r is not a CPU list such as 0-1,8 (%s; kubelet takes no spaces "
                            "and no empty elements)" % (reserved_cpus, exc))
        if cpus is not None and machine.online is not None:
            missing = sorted(set(cpus) - set(machine.online))
            if missing:
                problems.append("reservedSystemCPUs: CPU(s) %s are not online on this machine (online: %s)"
                                % (_cpu_text(missing), _cpu_text(machine.online)))
        for cgroup in ("systemReservedCgroup", "kubeReservedCgroup"):
            if config.get(cgroup):
                problems.append("reservedSystemCPUs cannot be combined with %s (kubelet refuses it; on EKS "
                                "AL2023 nodeadm always sets the cgroups): reserve CPU with kubeReserved.cpu or "
                                "systemReserved.cpu instead" % cgroup)
    elif cpu_policy == "static":
        _static_cpus(problems, config, machine)


def _cpu_text(cpus):
    cpus = sorted(cpus)
    ranges = []
    for cpu in cpus:
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


def _static_cpus(problems, config, machine):
    """The static policy without reservedSystemCPUs: it takes ceil(kubeReserved.cpu + systemReserved.cpu)
    CPUs for the system, which must be more than none and no more than the machine can give."""
    reserved = 0
    for section in ("kubeReserved", "systemReserved"):
        raw = (config.get(section) or {}).get("cpu")
        if raw is not None:
            try:
                quantity = Quantity.parse(raw)
            except QuantityError:
                return  # reported with the reservations
            if quantity.value < 0:
                return
            reserved += quantity.value
    # kubelet rounds the sum up to a millicore, then up to whole CPUs
    count = int(math.ceil(reserved))
    if reserved <= 0:
        problems.append("cpuManagerPolicy static: kubelet fails with '[cpumanager] the static policy requires "
                        "systemreserved.cpu + kubereserved.cpu to be greater than zero'; set kubeReserved.cpu "
                        "or systemReserved.cpu, or reservedSystemCPUs")
        return
    if machine.online is None:
        return
    online = len(machine.online)
    if count > online:
        # however it picks them (packed, by socket, spread over NUMA nodes: it falls back to packing
        # when it cannot spread), kubelet cannot take more CPUs than there are
        problems.append("cpuManagerPolicy static: kubeReserved.cpu + systemReserved.cpu reserve %d CPUs, more than "
                        "this machine's %d online CPUs; kubelet fails with '[cpumanager] unable to reserve the "
                        "required amount of CPUs'. Reserve fewer, or name them in reservedSystemCPUs"
                        % (count, online))


def _reservations(problems, config, machine):
    """kubeReserved and systemReserved as kubelet parses them, every eviction setting, and a Static
    memory manager's reservedMemory against the sum kubelet demands."""
    kube = dict(config.get("kubeReserved") or {})
    system = dict(config.get("systemReserved") or {})
    try:
        reserved_cpus = parse_kubelet_cpuset(str(config.get("reservedSystemCPUs") or ""))
    except ValueError:
        reserved_cpus = set()
    if reserved_cpus:
        # kubelet replaces the cpu of both by the number of reserved CPUs before it reads them
        kube.pop("cpu", None)
        system["cpu"] = str(len(reserved_cpus))
    found = []
    for section, values in (("kubeReserved", kube), ("systemReserved", system)):
        try:
            parse_resource_map(values, section)
        except ReservationError as exc:
            found.extend(exc.problems)
    found.extend(eviction_problems(config.get("evictionHard"), config.get("evictionSoft"),
                                   config.get("evictionSoftGracePeriod"), config.get("evictionMinimumReclaim")))
    problems.extend(found)
    static = config.get("memoryManagerPolicy") == "Static"
    settings = dict(
        distribution=(machine or {}).get("distribution") or "kubeadm",
        kube_reserved=config.get("kubeReserved"), system_reserved=config.get("systemReserved"),
        eviction_hard=config.get("evictionHard"),
        merge_default_eviction_settings=bool(config.get("mergeDefaultEvictionSettings")))
    try:
        if static and found:
            parse_reserved_memory(config.get("reservedMemory") or [])
        elif static and machine and machine.get("numa_node_memory"):
            reservation_plan(numa_node_memory=machine["numa_node_memory"], memory_capacity=machine.get("memory_capacity"),
                             reserved_memory=config.get("reservedMemory") or [], **settings)
        elif static:
            check_without_machine(config.get("reservedMemory") or [], **settings)
        elif config.get("reservedMemory"):
            parse_reserved_memory(config["reservedMemory"])
    except ReservationError as exc:
        problems.extend(exc.problems)


def _normal_reservation(entries):
    try:
        parsed = parse_reserved_memory(entries or [])
    except ReservationError:
        return json.dumps(entries, sort_keys=True, default=str)
    merged = {}
    for node, values in parsed:
        for name, quantity in values.items():
            merged[(node, name)] = quantity.value
    return sorted((k, str(v)) for k, v in merged.items())


def state_changes(before, after):
    """Which kubelet state files a change from ``before`` to ``after`` makes stale.

    cpu_manager_state: a change of cpuManagerPolicy, or, while the policy is static, of its
    options or reserved CPUs. memory_manager_state: a change of memoryManagerPolicy, or, under
    Static, of reservedMemory (compared by value, so 1Gi and 1024Mi are the same).
    """
    def get(config, field):
        return config.get(field, DEFAULTS.get(field))

    cpu = get(before, "cpuManagerPolicy") != get(after, "cpuManagerPolicy")
    if not cpu and get(after, "cpuManagerPolicy") == "static":
        cpu = any(before.get(f) != after.get(f) for f in _CPU_STATE_FIELDS[1:])
        cpu = cpu or _cpu_reserve(before) != _cpu_reserve(after)
    memory = get(before, "memoryManagerPolicy") != get(after, "memoryManagerPolicy")
    if not memory and get(after, "memoryManagerPolicy") == "Static":
        memory = _normal_reservation(before.get("reservedMemory")) != _normal_reservation(after.get("reservedMemory"))
    return {"remove_cpu_manager_state": cpu, "remove_memory_manager_state": memory}


def _cpu_reserve(config):
    values = []
    for section in ("kubeReserved", "systemReserved"):
        values.append(str((config.get(section) or {}).get("cpu")))
    return values


def dropin_document(settings):
    """A --config-dir drop-in: apiVersion and kind, then the settings (null values dropped)."""
    document = {"apiVersion": API_VERSION, "kind": KIND}
    document.update(merge_patch({}, settings))
    return document


def load_text(text, fmt):
    """Parse a kubelet configuration file's text (``yaml`` or ``json``); empty text is {}."""
    if not text or not text.strip():
        return {}
    if fmt == "json":
        return json.loads(text)
    import yaml  # imported here: a JSON-only caller does not need PyYAML

    return yaml.safe_load(text) or {}


# plain scalars kubelet's YAML reader (go-yaml) takes as booleans or null rather than strings
_GO_YAML_WORDS = frozenset("""y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF
                              null Null NULL ~""".split())


def go_yaml_retypes(text):
    """True when go-yaml would read ``text``, written unquoted, as something other than a string.

    PyYAML writes ``230e6``, ``1_000`` or ``0x10`` unquoted because YAML 1.1 as it reads it has no
    such numbers, but go-yaml parses them as numbers: kubelet then stops with "cannot unmarshal
    number into Go struct field ... of type string". Quoting too much is harmless, so every string
    Python reads as a number (underscores dropped) is quoted too.
    """
    if text in _GO_YAML_WORDS or text == "":
        return True
    if text[:1] not in "+-.0123456789":
        return False
    plain = text.replace("_", "")
    for parse in (lambda t: int(t, 0), float):
        try:
            parse(plain)
            return True
        except ValueError:
            pass
    return False


def dump_text(data, fmt):
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    class _Dumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """SafeDumper that quotes the strings go-yaml would take for numbers or booleans."""

    def _string(dumper, value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'" if go_yaml_retypes(value) else None)

    _Dumper.add_representer(str, _string)
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False)


def detect_format(path, text):
    if path.endswith(".json"):
        return "json"
    if path.endswith((".yaml", ".yml")):
        return "yaml"
    return "json" if (text or "").lstrip().startswith("{") else "yaml"


def plan_change(path, current_text, settings, mode="merge", fmt="auto", base_text=None, base_path=None,
                numa_node_count=None, online_cpus=None, bases=None, check=True, machine=None):
    """Work out a kubelet configuration change without touching anything.

    ``mode=merge`` merges ``settings`` into the file at ``path`` (``current_text``, None when it
    does not exist); ``mode=dropin`` makes ``path`` a --config-dir drop-in holding ``settings``, and
    the effective configuration is the base file (``base_text``, or every (path, text) pair of
    ``bases`` merged in order) with the drop-in on top. ``check=False`` skips validation (tests
    that must get a configuration kubelet refuses onto a node use it).
    Returns a dict with the new text, whether it changed, the effective configurations before and
    after, and which state files must go.
    """
    if not isinstance(settings, dict):
        raise KubeletConfigError("settings must be a mapping of KubeletConfiguration fields, got %r" % (settings,))
    if mode not in ("merge", "dropin"):
        raise KubeletConfigError("mode %r is not one of merge, dropin" % (mode,))
    if mode == "dropin" and not path.endswith(".conf"):
        raise KubeletConfigError("drop-in %s: kubelet reads only files ending in .conf from --config-dir; "
                                 "rename it, e.g. 50-numa.conf" % path)
    file_format = fmt if fmt != "auto" else detect_format(path, current_text)
    if mode == "dropin" and fmt == "auto":
        file_format = "json" if (current_text or "").lstrip().startswith("{") else "yaml"
    try:
        current = load_text(current_text, file_format)
        base = load_text(base_text, detect_format(base_path or "", base_text)) if base_text else {}
        for extra_path, extra_text in bases or []:
            extra = load_text(extra_text, detect_format(extra_path, extra_text)) if extra_text else {}
            base = merge_patch(base, extra if isinstance(extra, dict) else {})
    except ValueError as exc:
        raise KubeletConfigError("%s is not valid %s: %s" % (path, file_format.upper(), exc))
    except Exception as exc:  # yaml's errors do not derive from ValueError
        raise KubeletConfigError("%s could not be parsed: %s" % (path, exc))
    if not isinstance(current, dict) or not isinstance(base, dict):
        raise KubeletConfigError("%s does not hold a KubeletConfiguration mapping" % path)
    for field in ("apiVersion", "kind"):
        if field in settings:
            raise KubeletConfigError("settings.%s: the module sets apiVersion and kind itself; remove it" % field)
    if mode == "merge":
        before = current
        new_document = merge_patch(current, settings)
        if not new_document.get("apiVersion") and current_text is None:
            new_document = merge_patch({"apiVersion": API_VERSION, "kind": KIND}, new_document)
        after = new_document
    else:
        before = merge_patch(base, current)
        new_document = dropin_document(settings)
        after = merge_patch(base, new_document)
    if check:
        validate(after, numa_node_count=numa_node_count, online_cpus=online_cpus, machine=machine)
    changed = current_text is None or new_document != current
    new_text = dump_text(new_document, file_format) if changed else current_text
    effective_changed = {k: v for k, v in before.items() if k not in ("apiVersion", "kind")} != \
        {k: v for k, v in after.items() if k not in ("apiVersion", "kind")}
    result = {
        "changed": changed,
        "format": file_format,
        "text": new_text,
        "before": before,
        "config": after,
        "restart_required": effective_changed,
    }
    result.update(state_changes(before, after) if effective_changed else
                  {"remove_cpu_manager_state": False, "remove_memory_manager_state": False})
    return result
