# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge NUMA settings into a KubeletConfiguration and decide what the change demands of the node.

Merging follows JSON merge patch (RFC 7386), as kubelet merges its --config-dir drop-ins: mappings
merge key by key, lists and scalars replace, and a null value removes the key. Validation covers
the field names and the values kubelet refuses at start-up for the CPU, Memory and Topology
Managers, so a typo is caught before any node is touched.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import difflib
import json
import math
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet_fields import FEATURE_GATES, FLAGS
from ansible_collections.numa.kube.plugins.module_utils.quantity import Quantity, QuantityError
from ansible_collections.numa.kube.plugins.module_utils.reservation import (
    ReservationError,
    parse_reserved_memory,
)
from ansible_collections.numa.kube.plugins.module_utils.reservation import plan as reservation_plan

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
# a CPU range wider than this is larger than any machine (kubelet would walk it one by one)
_CPU_RANGE_LIMIT = 65536


def parse_kubelet_cpuset(text):
    """A CPU list read as kubelet reads reservedSystemCPUs (k8s.io/utils/cpuset.Parse): ``0-3,8``,
    no spaces, no empty elements, ranges not backwards. Returns a set; raises ValueError."""
    result = set()
    if text == "":
        return result
    for part in text.split(","):
        bounds = part.split("-", 1)
        for bound in bounds:
            if not _GO_ATOI.match(bound):
                raise ValueError("%r is not a whole number" % bound)
        numbers = [int(bound) for bound in bounds]
        if len(numbers) == 1:
            result.add(numbers[0])
            continue
        start, end = numbers
        if start > end:
            raise ValueError("invalid range %r (%d > %d)" % (part, start, end))
        if end - start > _CPU_RANGE_LIMIT:
            raise ValueError("range %r is wider than any machine" % part)
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


def _feature_gates(problems, gates):
    """Check featureGates against kubelet's own gates; returns {name: enabled} of those set."""
    if gates is None:
        return {}
    if not isinstance(gates, dict):
        problems.append("featureGates: expected a mapping of gate name to true or false, got %r" % (gates,))
        return {}
    result = {}
    for name, value in sorted(gates.items()):
        if name not in FEATURE_GATES:
            problems.append("featureGates.%s: kubelet does not know this feature gate and stops on it ('unrecognized "
                            "feature gate: %s')" % (name, name))
            continue
        if not isinstance(value, bool):
            problems.append("featureGates.%s: %r must be true or false" % (name, value))
            continue
        default, locked = FEATURE_GATES[name]
        if locked and value != default:
            problems.append("featureGates.%s: the gate is locked to %s in this kubelet; remove it"
                            % (name, str(default).lower()))
            continue
        result[name] = value
    return result


def _quantity(problems, where, value):
    try:
        return Quantity.parse(value)
    except QuantityError as exc:
        problems.append("%s: %s" % (where, exc))
        return None


def validate(config, numa_node_count=None, online_cpus=None, machine=None):
    """Check an effective KubeletConfiguration (after merging) for what kubelet refuses.

    With ``machine`` (``numa_node_memory``, and optionally ``memory_capacity`` and the eviction
    ``distribution``) a Static memory manager's reservedMemory is also checked against the
    reservations of this very configuration, whatever set them: the role's variables, extra settings
    or the node's own file.
    """
    problems = []
    if not isinstance(config, dict):
        raise KubeletConfigError("the kubelet configuration must be a mapping, got %r" % (config,))
    for name in sorted(config):
        if name not in KNOWN_FIELDS:
            guess = _suggest(name)
            problems.append("%r is not a KubeletConfiguration field%s" % (
                name, "; did you mean %r?" % guess if guess else ""))
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

    gates = _feature_gates(problems, config.get("featureGates"))
    for name in ("prefer-closest-numa-nodes",):
        if name in topo_options and topo_options[name] not in GO_BOOLS:
            problems.append("topologyManagerPolicyOptions.%s: %r must be \"true\" or \"false\"" % (name, topo_options[name]))
    chosen = set()
    for name, value in sorted(cpu_options.items()):
        if name not in CPU_POLICY_OPTIONS:
            continue
        gate = CPU_OPTION_GATES.get(name)
        if gate and not gates.get(gate, FEATURE_GATES.get(gate, (False, False))[0]):
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
    if cpu_options and (config.get("cpuManagerPolicy") or DEFAULTS["cpuManagerPolicy"]) == "none":
        problems.append("cpuManagerPolicyOptions are set but cpuManagerPolicy is none, which takes no options "
                        "(kubelet: 'None policy: received unsupported options'); set cpuManagerPolicy static or "
                        "remove the options")

    limit = DEFAULT_MAX_NUMA_NODES
    if "max-allowable-numa-nodes" in topo_options:
        raw = topo_options["max-allowable-numa-nodes"]
        limit = int(raw) if isinstance(raw, str) and _GO_ATOI.match(raw) else None
        if limit is None or limit < DEFAULT_MAX_NUMA_NODES:
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

    reserved_cpus = config.get("reservedSystemCPUs")
    if reserved_cpus not in (None, ""):
        try:
            cpus = parse_kubelet_cpuset(str(reserved_cpus))
        except ValueError as exc:
            cpus = None
            problems.append("reservedSystemCPUs: %r is not a CPU list such as 0-1,8 (%s; kubelet takes no spaces "
                            "and no empty elements)" % (reserved_cpus, exc))
        if cpus is not None and online_cpus is not None:
            missing = sorted(set(cpus) - set(online_cpus))
            if missing:
                problems.append("reservedSystemCPUs: CPU(s) %s are not online on this machine" % missing)
        for cgroup in ("systemReservedCgroup", "kubeReservedCgroup"):
            if config.get(cgroup):
                problems.append("reservedSystemCPUs cannot be combined with %s (kubelet refuses it; on EKS "
                                "AL2023 nodeadm always sets the cgroups): reserve CPU with kubeReserved.cpu or "
                                "systemReserved.cpu instead" % cgroup)
    elif config.get("cpuManagerPolicy") == "static":
        reserved = 0
        for section in ("kubeReserved", "systemReserved"):
            raw = (config.get(section) or {}).get("cpu")
            if raw is not None:
                quantity = _quantity(problems, "%s.cpu" % section, raw)
                if quantity is not None:
                    reserved += quantity.value
        if math.ceil(reserved) <= 0:
            problems.append("cpuManagerPolicy static: kubelet fails with '[cpumanager] the static policy requires "
                            "systemreserved.cpu + kubereserved.cpu to be greater than zero'; set kubeReserved.cpu "
                            "or systemReserved.cpu, or reservedSystemCPUs")
    if machine and machine.get("numa_node_memory") and config.get("memoryManagerPolicy") == "Static":
        try:
            reservation_plan(
                numa_node_memory=machine["numa_node_memory"], memory_capacity=machine.get("memory_capacity"),
                distribution=machine.get("distribution") or "kubeadm",
                kube_reserved=config.get("kubeReserved"), system_reserved=config.get("systemReserved"),
                eviction_hard=config.get("evictionHard"),
                merge_default_eviction_settings=bool(config.get("mergeDefaultEvictionSettings")),
                reserved_memory=config.get("reservedMemory") or [])
        except ReservationError as exc:
            problems.extend(exc.problems)
    elif config.get("reservedMemory"):
        try:
            parse_reserved_memory(config["reservedMemory"])
        except ReservationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise KubeletConfigError(problems)


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
