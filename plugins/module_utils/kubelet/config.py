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
import os
import re

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
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


# --- the way back out: what numa.kube changed, and how it is undone --------------------------------

RECORD_NAME = "kubelet.json"
# What ``absent`` removes from a merged file when there is no record (a node changed by a release
# that kept none): the NUMA managers' policies, their options and the memory reservation, where
# they differ from kubelet's defaults. The reservations (kubeReserved, systemReserved,
# reservedSystemCPUs, evictionHard) stay: they may be the node's own, and kubelet runs its default
# policies with them.
FALLBACK_FIELDS = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy", "reservedMemory",
                   "topologyManagerPolicy", "topologyManagerPolicyOptions", "topologyManagerScope")
_ENVELOPE = ("apiVersion", "kind")
_MISSING = object()

# 'absent' removes the record once the part is out, except where a file kubelet reads still holds
# such a field with a value of the node's own (one the record put back, or one numa.kube never
# changed): there it leaves an empty record (no files), so that a second 'absent' knows numa.kube
# has nothing left on the node and leaves that value alone instead of falling back.
EMPTY_RECORD = {"files": {}}


def _own_numa_fields(document):
    """The FALLBACK_FIELDS of a configuration document that differ from kubelet's defaults."""
    return [f for f in FALLBACK_FIELDS if f in document and document[f] not in (None, "", {}, [], DEFAULTS.get(f))]


def _field_list(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def check_record(record, where, own_files=None, own_flag_files=None):
    """Refuse a kubelet record (applied_record.load's dict, or None) whose fields this release cannot
    undo from, or that names a file this run does not own; returns it.

    Version 1 holds ``files`` (path -> ``{"kind": "owned"}`` for a file numa.kube wrote whole, or
    ``{"kind": "merged", "before": {field: value}, "missing": [field], "after": {field: value},
    "after_missing": [field]}``: the value each field numa.kube changed had before it first changed
    it, or that it had none, and the value numa.kube last wrote, or that it removed the field;
    ``after`` and ``after_missing`` are absent in records of earlier builds) and, when numa.kube
    edited kubelet's flag file, ``flag_file`` (``path``; previous ``text`` and ``mode``, null when
    the file did not exist; ``after``, the text numa.kube wrote, and ``config_dir``, the folder it
    added as ``--config-dir=``; the last two absent in records of earlier builds).

    ``own_files`` (the module's ``path`` and ``base_path``) and ``own_flag_files`` (its
    ``flag_file``, or the files kubelet's extra flags live in): when given, a record naming any
    other file is refused, so that a record cannot point 'absent' at a file numa.kube never
    changed."""
    if record is None:
        return None
    applied_record.check_fields(record, where, {"files": dict})
    problems = []
    fix = ("numa.kube writes this file itself: put back the copy the last run saved, or remove the file to let "
           "'absent' use its fallback")
    for path, entry in sorted(record["files"].items()):
        if not isinstance(entry, dict) or entry.get("kind") not in ("owned", "merged"):
            problems.append("record %s: files[%r] is %s, not {\"kind\": \"owned\"} or {\"kind\": \"merged\", ...}"
                            % (where, path, json.dumps(entry)[:80]))
            continue
        if not path.startswith("/"):
            problems.append("record %s: files[%r] is not an absolute path" % (where, path))
        elif own_files is not None and path not in own_files:
            problems.append("record %s names %s, which is not a file this run changes (%s): numa.kube acts only on "
                            "the kubelet configuration it is given. Run with the kubelet_config_path/"
                            "kubelet_config_dir/kubelet_kubeadm_config_dir the change was made with, or take that "
                            "file's change out by hand and remove the record"
                            % (where, path, ", ".join(own_files) or "none"))
        if entry["kind"] == "merged":
            if not isinstance(entry.get("before"), dict):
                problems.append("record %s: files[%r].before is not an object of field values" % (where, path))
            if not _field_list(entry.get("missing")):
                problems.append("record %s: files[%r].missing is not a list of field names" % (where, path))
            if "after" in entry and not isinstance(entry["after"], dict):
                problems.append("record %s: files[%r].after is not an object of field values" % (where, path))
            if "after_missing" in entry and not _field_list(entry["after_missing"]):
                problems.append("record %s: files[%r].after_missing is not a list of field names" % (where, path))
    flag = record.get("flag_file")
    if flag is not None:
        if not isinstance(flag, dict) or not isinstance(flag.get("path"), str) or not flag["path"].startswith("/") \
                or not isinstance(flag.get("text"), (str, type(None))) \
                or not isinstance(flag.get("mode"), (str, type(None))) \
                or not isinstance(flag.get("after"), (str, type(None))) \
                or not isinstance(flag.get("config_dir"), (str, type(None))) \
                or not (flag.get("config_dir") or "/").startswith("/"):
            problems.append("record %s: flag_file is %s, not {\"path\": absolute path, \"text\": string or null, "
                            "\"mode\": string or null, \"after\": string, \"config_dir\": absolute path}"
                            % (where, json.dumps(flag)[:120]))
        elif own_flag_files is not None and flag["path"] not in own_flag_files:
            problems.append("record %s says numa.kube edited %s, which is not one of kubelet's flag files (%s): "
                            "numa.kube only ever adds --config-dir to one of those. Take that change out by hand and "
                            "remove the record" % (where, flag["path"], ", ".join(own_flag_files)))
    if problems:
        raise applied_record.RecordError(problems + [fix])
    return record


def record_present(record, path, mode, before, after, created=False, flag=None):
    """The record after a ``present`` change, or ``record`` itself when it gains nothing.

    ``before``/``after`` are the documents of the file at ``path`` (not the effective
    configuration). A drop-in, or a merge file numa.kube ``created``, is recorded as numa.kube's
    own; a merge records, for each top-level field it changes, the value the file had or that it
    had none - only the first time, so the original survives later changes - and the value it
    writes (``after``) or that it removes the field (``after_missing``), each time. ``flag`` is
    ``(path, text, mode)`` of kubelet's flag file before numa.kube edits it, or ``(path, text,
    mode, written_text, config_dir)``: taken each time numa.kube edits the file, so that the
    previous bytes kept are always the written text without numa.kube's --config-dir."""
    result = copy.deepcopy(record) if record else {"files": {}}
    result.pop("version", None)
    entry = result["files"].get(path)
    if mode == "dropin" or created:
        if entry is None:
            result["files"][path] = {"kind": "owned"}
    else:
        if entry is None:
            entry = result["files"][path] = {"kind": "merged", "before": {}, "missing": [], "after": {},
                                             "after_missing": []}
        if entry["kind"] == "merged":
            known = set(entry["before"]) | set(entry["missing"])
            written, removed = entry.setdefault("after", {}), entry.setdefault("after_missing", [])
            for field in sorted(set(before) | set(after)):
                if field in _ENVELOPE or before.get(field, _MISSING) == after.get(field, _MISSING):
                    continue
                if field not in known:
                    if field in before:
                        entry["before"][field] = copy.deepcopy(before[field])
                    else:
                        entry["missing"].append(field)
                written.pop(field, None)
                if field in removed:
                    removed.remove(field)
                if field in after:
                    written[field] = copy.deepcopy(after[field])
                else:
                    removed.append(field)
            entry["missing"].sort()
            removed.sort()
    if flag is not None:
        entry = {"path": flag[0], "text": flag[1], "mode": flag[2]}
        if len(flag) > 3:
            entry.update(after=flag[3], config_dir=flag[4])
        result["flag_file"] = entry
    if record:
        comparable = dict(record)
        comparable.pop("version", None)
        if comparable == result:
            return record
    return result


def _restored(document, entry):
    """(document with the fields of a merged ``entry`` put back, fields left as they are because they
    changed since numa.kube wrote them, fields put back without knowing what numa.kube wrote)."""
    restored = copy.deepcopy(document)
    written, removed = entry.get("after"), entry.get("after_missing")
    left, unknown = [], []
    targets = sorted(entry["before"].items()) + [(field, _MISSING) for field in sorted(entry["missing"])]
    for field, value in targets:
        now = document.get(field, _MISSING)
        if now == value:
            continue  # as it was already
        if written is not None and field in written:
            ours = now == written[field]
        elif removed is not None and field in removed:
            ours = now is _MISSING
        else:
            ours = True
            unknown.append(field)
        if not ours:
            left.append(field)
        elif value is _MISSING:
            restored.pop(field, None)
        else:
            restored[field] = copy.deepcopy(value)
    return restored, left, unknown


_EXTRA_ARGS_LINE = re.compile(r"""^(\s*KUBELET_EXTRA_ARGS\s*=\s*)(?:"([^"]*)"|'([^']*)'|(\S*))(\s*)$""")


def without_config_dir(text, config_dir):
    """``text`` (kubelet's environment file) with the ``--config-dir=<config_dir>`` numa.kube added
    to KUBELET_EXTRA_ARGS taken out, every other line and argument kept; None when no
    KUBELET_EXTRA_ARGS line holds that exact argument."""
    flag = re.compile(r"(?:^|\s+)--config-dir=%s(?=\s|$)" % re.escape(config_dir))
    lines = (text or "").splitlines(True)
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _EXTRA_ARGS_LINE.match(body)
        if not match:
            continue
        quote = '"' if match.group(2) is not None else "'" if match.group(3) is not None else ""
        value = next(group for group in match.groups()[1:4] if group is not None)
        if not flag.search(value):
            continue
        value = flag.sub("", value, count=1).strip()
        lines[index] = "%s%s%s%s%s%s" % (match.group(1), quote, value, quote, match.group(5), line[len(body):])
        return "".join(lines)
    return None


def _settings_only(config):
    return dict((k, v) for k, v in config.items() if k not in _ENVELOPE)


def plan_withdraw(path, mode, texts, record, fmt="auto", base_paths=(), check=True, numa_node_count=None,
                  online_cpus=None, machine=None):
    """Work out how to take numa.kube's kubelet change back out, without touching anything.

    ``texts`` maps every file involved to its text (None when missing): ``path``, ``base_paths``,
    each file of the record and its flag file. Drop-in mode removes the drop-in at ``path`` (its
    name is numa.kube's), with or without a record; every file the record holds is put back:
    numa.kube's own files removed, merged fields restored (those that were missing removed), and
    the flag file given its previous bytes. In merge mode without any record, FALLBACK_FIELDS are
    removed from ``path`` unless they hold kubelet's default already (``none``, empty options);
    with a record that has no entry for ``path``, it is left alone.

    Returns ``writes`` (path -> new text, None to remove; only files that change), ``flag_mode``
    (the mode to give a restored flag file), ``before`` and ``config`` (the effective
    configuration kubelet reads, before and after), ``restart_required``, the state files that
    must go, ``fallback`` (the fields the fallback removes, or []), ``keep_empty_record`` (a file
    kubelet reads keeps NUMA manager values of its own, see EMPTY_RECORD) and ``notes`` (what is
    done, in words).
    """
    if mode not in ("merge", "dropin"):
        raise KubeletConfigError("mode %r is not one of merge, dropin" % (mode,))
    files = dict((record or {}).get("files") or {})
    writes, notes, fallback = {}, [], []

    def parse(where):
        text = texts.get(where)
        if text is None:
            return None
        file_format = fmt if fmt != "auto" and where == path else detect_format(where, text)
        try:
            document = load_text(text, file_format)
        except Exception as exc:  # yaml's errors do not derive from ValueError
            raise KubeletConfigError("%s could not be parsed as %s: %s" % (where, file_format.upper(), exc))
        if not isinstance(document, dict):
            raise KubeletConfigError("%s does not hold a KubeletConfiguration mapping" % where)
        return document, file_format

    warnings = []

    def merged_file(where, entry, what):
        parsed = parse(where)
        if parsed is None:
            notes.append("%s does not exist: nothing to restore in it" % where)
            return
        document, file_format = parsed
        restored, left, unknown = _restored(document, entry)
        if restored != document:
            writes[where] = dump_text(restored, file_format)
            done = [f for f in sorted(entry["before"]) + sorted(entry["missing"]) if f not in left
                    and restored.get(f, _MISSING) != document.get(f, _MISSING)]
            notes.append("%s: %s (%s)" % (where, what, ", ".join(done)))
        if left:
            warnings.append("%s: %s changed since numa.kube set %s, so %s left as %s (put back by hand what "
                            "should be there)" % (where, ", ".join(left), "it" if len(left) == 1 else "them",
                                                  "it is" if len(left) == 1 else "they are",
                                                  "it is" if len(left) == 1 else "they are"))
        if unknown and entry is not None and "kind" in entry:
            notes.append("%s: the record (from an earlier build) does not say what numa.kube wrote in %s, so %s put "
                         "back whatever %s now" % (where, ", ".join(unknown), "it is" if len(unknown) == 1
                                                   else "they are", "it holds" if len(unknown) == 1 else "they hold"))

    if mode == "dropin":
        files.setdefault(path, {"kind": "owned"})
    for where, entry in sorted(files.items()):
        if entry["kind"] == "owned":
            if texts.get(where) is not None:
                writes[where] = None
                notes.append("%s removed (numa.kube wrote it)" % where)
        elif entry["before"] or entry["missing"]:
            merged_file(where, entry, "fields put back as they were before numa.kube")
    if mode == "merge" and record is None:
        parsed = parse(path)
        present_fields = _own_numa_fields(parsed[0]) if parsed is not None else []
        if present_fields:
            fallback = present_fields
            merged_file(path, {"before": {}, "missing": present_fields},
                        "no record of what numa.kube changed: its NUMA manager fields removed, so kubelet runs its "
                        "defaults")
    elif mode == "merge" and path not in files:
        notes.append("%s: the record holds no change of numa.kube there; left alone" % path)
    flag = (record or {}).get("flag_file")
    flag_mode = None
    if flag is not None:
        where, now, before_text = flag["path"], texts.get(flag["path"]), flag["text"]
        config_dir = flag.get("config_dir") or (os.path.dirname(path) if mode == "dropin" else None)
        token = "--config-dir=%s" % config_dir
        if now == before_text:
            pass  # as it was before numa.kube already
        elif flag.get("after") is not None and now == flag["after"]:
            # still byte for byte what numa.kube wrote: the previous bytes back, or the file it created goes
            writes[where] = before_text
            flag_mode = flag["mode"]
            notes.append("%s %s" % (where, "put back as it was before numa.kube added %s" % token
                                    if before_text is not None else "removed (numa.kube created it)"))
        elif now is None:
            notes.append("%s is gone: no %s left to take out" % (where, token))
        else:
            edited = without_config_dir(now, config_dir) if config_dir else None
            if edited is None:
                warnings.append("%s no longer holds %s in KUBELET_EXTRA_ARGS (changed since numa.kube added it): "
                                "left as it is; check kubelet's --config-dir yourself" % (where, token))
            else:
                # changed by hand since: only numa.kube's argument comes out, the rest stays
                writes[where] = edited
                notes.append("%s: %s taken out of KUBELET_EXTRA_ARGS; the rest of the file, changed since numa.kube "
                             "edited it, left as it is" % (where, token))
        if flag.get("after") is None and where in writes:
            notes.append("%s: the record (from an earlier build) does not hold the text numa.kube wrote, so only "
                         "%s is taken out" % (where, token))

    def effective(contents):
        result = {}
        for where in list(base_paths) + [path]:
            text = contents.get(where)
            if text:
                document = load_text(text, detect_format(where, text) if where != path or fmt == "auto" else fmt)
                result = merge_patch(result, document if isinstance(document, dict) else {})
        return result

    after_texts = dict(texts)
    after_texts.update(writes)
    try:
        before, after = effective(texts), effective(after_texts)
        kept = []  # what a later fallback could take for numa.kube's: NUMA values left in the files kubelet reads
        for where in sorted(set([path] + list(base_paths) + [w for w, e in files.items() if e["kind"] == "merged"])):
            text = after_texts.get(where)
            document = {}
            if text:
                document = load_text(text, fmt if where == path and fmt != "auto" else detect_format(where, text))
            own = _own_numa_fields(document if isinstance(document, dict) else {})
            kept.extend("%s in %s" % (field, where) for field in own)
    except Exception as exc:  # yaml's errors do not derive from ValueError
        raise KubeletConfigError("a kubelet configuration file could not be parsed: %s" % exc)
    if check:
        validate(after, numa_node_count=numa_node_count, online_cpus=online_cpus, machine=machine)
    effective_changed = _settings_only(before) != _settings_only(after)
    result = {
        "writes": writes,
        "flag_mode": flag_mode,
        "before": before,
        "config": after,
        "restart_required": effective_changed or (flag is not None and flag["path"] in writes),
        "fallback": fallback,
        "keep_empty_record": bool(kept),
        "notes": notes + warnings + (["the node's own %s stay; an empty record says numa.kube has nothing left here"
                                      % ", ".join(kept)] if kept and record is not None else []),
        "warnings": warnings,
    }
    result.update(state_changes(before, after) if effective_changed else
                  {"remove_cpu_manager_state": False, "remove_memory_manager_state": False})
    return result
