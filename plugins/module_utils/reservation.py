# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet Memory Manager reservation: what kubelet demands, and whether a layout meets it.

kubelet (Static memory manager) starts only when, for ``memory`` and every ``hugepages-<size>``
type, the per-NUMA-node ``reservedMemory`` limits add up exactly to the Node Allocatable
reservation of that type: systemReserved + kubeReserved + the hard eviction threshold (which
only ever adds ``memory``, through ``memory.available``). The functions here compute that
reservation from the same inputs kubelet reads, check a proposed ``reservedMemory`` against every
rule kubelet applies (and a few it does not, but that users trip on), and lay out a new one that
meets the sum exactly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    BINARY_SI,
    Quantity,
    QuantityError,
    bytes_quantity,
    parse_quantity,
    total,
)

MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
MIB = 2 ** 20

DISTRIBUTIONS = ("kubeadm", "rke2", "k3s", "eks")

# Resources kubelet accepts in kubeReserved / systemReserved (pkg/kubelet parseResourceList).
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")

# Eviction signals kubelet knows (pkg/kubelet/eviction signalToResource).
EVICTION_SIGNALS = (
    "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
    "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available",
    "allocatableMemory.available",
)

# The evictionHard each distribution runs with when the user sets none.
#  kubeadm: kubelet's built-in default; EKS: the kubelet-config.json of the EKS AMIs;
#  RKE2 and k3s: the eviction-hard flag they pass (no memory.available at all).
DEFAULT_EVICTION_HARD = {
    "kubeadm": {"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%",
                "nodefs.inodesFree": "5%", "imagefs.inodesFree": "5%"},
    "eks": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
    "rke2": {"imagefs.available": "5%", "nodefs.available": "5%"},
    "k3s": {"imagefs.available": "5%", "nodefs.available": "5%"},
}
KUBELET_DEFAULT_EVICTION_HARD = DEFAULT_EVICTION_HARD["kubeadm"]

_HUGEPAGE_NAME = re.compile(r"^hugepages-(.+)$")


class ReservationError(ProblemsError):
    """A reservation input or layout that kubelet would refuse."""


def is_memory_type(name):
    return name == MEMORY or name.startswith(HUGEPAGES_PREFIX)


def hugepage_size(name):
    """The page size in bytes of a ``hugepages-<size>`` type, or None when it is not one."""
    match = _HUGEPAGE_NAME.match(name)
    if not match:
        return None
    try:
        size = Quantity.parse(match.group(1))
    except QuantityError:
        return None
    return size.as_int() if size.value > 0 else None


def _float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def eks_kube_reserved_memory(max_pods):
    """EKS AMIs: kubeReserved.memory = 11 MiB per pod + 255 MiB."""
    return bytes_quantity((11 * int(max_pods) + 255) * MIB)


def eks_kube_reserved_cpu(cpu_count):
    """EKS AMIs: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest.

    Computed per range in whole millicores, as nodeadm does.
    """
    total_milli = int(cpu_count) * 1000
    bounds = (0, 1000, 2000, 4000, max(total_milli, 4000))
    per_ten_thousand = (600, 100, 50, 25)
    reserved = 0
    for index, share in enumerate(per_ten_thousand):
        start, end = bounds[index], bounds[index + 1]
        if total_milli <= start:
            continue
        reserved += (min(total_milli, end) - start) * share // 10000
    return Quantity.parse("%dm" % reserved)


def parse_resource_map(values, what):
    """Parse kubeReserved / systemReserved as kubelet does; return {name: Quantity}."""
    result = {}
    problems = []
    for name, raw in sorted((values or {}).items()):
        if name not in RESERVABLE:
            hint = ""
            if name.startswith(HUGEPAGES_PREFIX):
                hint = (" kubelet cannot reserve huge pages through %s, so a hugepages entry in "
                        "reservedMemory can never match; reserve huge pages by not allocating "
                        "them to the node instead." % what)
            problems.append("%s.%s: kubelet refuses it with 'cannot reserve \"%s\" resource'; "
                            "only %s may be reserved.%s" % (what, name, name, ", ".join(RESERVABLE), hint))
            continue
        try:
            quantity = parse_quantity(raw, "%s.%s" % (what, name))
        except QuantityError as exc:
            problems.append("%s; write it as a Kubernetes quantity such as 1Gi or 500Mi" % exc)
            continue
        if quantity.value < 0:
            problems.append("%s.%s: %r is negative; kubelet refuses negative reservations "
                            "('resource quantity for \"%s\" cannot be negative')" % (what, name, raw, name))
            continue
        result[name] = quantity
    if problems:
        raise ReservationError(problems)
    return result


def eviction_memory(value, memory_capacity, where):
    """The bytes a ``memory.available`` hard threshold reserves, or None when it is ignored.

    A percentage is resolved against the machine's memory capacity the way kubelet does: the
    number is parsed as float32 and divided by 100 in float32, then multiplied in float64 and
    truncated. ``0%`` and ``100%`` switch the threshold off.
    """
    if isinstance(value, str) and value.endswith("%"):
        if value in ("0%", "100%"):
            return None
        try:
            number = float(value.rstrip("%"))
        except ValueError:
            raise ReservationError("%s: %r is not a percentage; write it like 5%%" % (where, value))
        if number < 0 or number > 100:
            raise ReservationError("%s: %r is outside 0%%..100%%; kubelet refuses it" % (where, value))
        if memory_capacity is None:
            raise ReservationError(
                "%s: %r is a percentage of the node's memory, which is unknown here; pass "
                "numa_node_memory (from numa.kube.topology_facts) or memory_capacity" % (where, value))
        fraction = _float32(_float32(number) / 100.0)
        return Quantity(int(float(memory_capacity) * fraction), BINARY_SI)
    try:
        quantity = parse_quantity(value, where)
    except QuantityError as exc:
        raise ReservationError("%s; write it as a quantity such as 100Mi or a percentage such as 5%%" % exc)
    if quantity.value <= 0:
        raise ReservationError("%s: %r must be positive (kubelet: 'eviction threshold memory.available "
                               "must be positive'); use 0%% to switch the threshold off" % (where, value))
    return quantity


def effective_settings(distribution="kubeadm", kube_reserved=None, system_reserved=None,
                       eviction_hard=None, merge_default_eviction_settings=False,
                       eks_max_pods=None, cpu_count=None):
    """Resolve the kubeReserved, systemReserved and evictionHard kubelet will run with.

    Returns (kube_reserved, system_reserved, eviction_hard, eviction_source) as plain dicts of
    strings, plus where the eviction settings came from.
    """
    if distribution not in DISTRIBUTIONS:
        raise ReservationError("distribution %r is not one of %s" % (distribution, ", ".join(DISTRIBUTIONS)))
    kube = {}
    if distribution == "eks":
        if eks_max_pods is not None:
            if isinstance(eks_max_pods, bool) or int(eks_max_pods) < 1:
                raise ReservationError("eks_max_pods %r must be a positive whole number (the "
                                       "instance type's max pods)" % (eks_max_pods,))
            kube[MEMORY] = eks_kube_reserved_memory(eks_max_pods).canonical()
        if cpu_count:
            kube["cpu"] = eks_kube_reserved_cpu(cpu_count).canonical()
        kube["ephemeral-storage"] = "1Gi"
        if MEMORY not in (kube_reserved or {}) and MEMORY not in kube:
            raise ReservationError(
                "distribution eks: kubeReserved.memory comes from the instance type's max pods "
                "(11 * maxPods + 255 MiB); set eks_max_pods, or set kube_reserved.memory yourself")
    elif eks_max_pods is not None:
        raise ReservationError("eks_max_pods is only used with distribution eks, not %r" % distribution)
    kube.update(_stringify(kube_reserved))
    system = _stringify(system_reserved)
    defaults = DEFAULT_EVICTION_HARD[distribution]
    if eviction_hard is None:
        eviction = dict(defaults)
        source = "%s default" % distribution
    else:
        eviction = _stringify(eviction_hard)
        source = "eviction_hard"
        if merge_default_eviction_settings:
            merged = dict(KUBELET_DEFAULT_EVICTION_HARD)
            merged.update(eviction)
            eviction = merged
            source = "eviction_hard merged with kubelet defaults"
    for signal in sorted(eviction):
        if signal not in EVICTION_SIGNALS:
            raise ReservationError("eviction_hard.%s: kubelet does not know this signal; use one of %s"
                                   % (signal, ", ".join(EVICTION_SIGNALS)))
    return kube, system, eviction, source


def _stringify(values):
    """Copy a settings mapping with string keys, refusing booleans (YAML's yes/no) as values."""
    result = {}
    for key, value in (values or {}).items():
        if isinstance(value, bool):
            raise ReservationError("%s: %r is a boolean, not a quantity; quote it" % (key, value))
        result[str(key)] = value
    return result


class Requirement(object):
    """What kubelet demands per memory type, with where each part comes from."""

    def __init__(self, required, parts):
        self.required = required  # {type: Quantity}
        self.parts = parts  # {type: [(label, Quantity, note or None)]}

    def explain(self, name):
        parts = self.parts.get(name) or []
        if not parts:
            return "0 (nothing reserves %s)" % name
        return "%s = %s" % (self.required.get(name, Quantity()).canonical(), " + ".join(
            "%s %s%s" % (label, q.canonical(), " (%s)" % note if note else "") for label, q, note in parts))


def node_allocatable_reservation(kube_reserved, system_reserved, eviction_hard, memory_capacity=None,
                                 eviction_source="evictionHard"):
    """kubelet's GetNodeAllocatableReservation, restricted to memory types."""
    problems = []
    kube = system = {}
    try:
        kube = parse_resource_map(kube_reserved, "kubeReserved")
    except ReservationError as exc:
        problems.extend(exc.problems)
    try:
        system = parse_resource_map(system_reserved, "systemReserved")
    except ReservationError as exc:
        problems.extend(exc.problems)
    eviction = None
    if "memory.available" in (eviction_hard or {}):
        try:
            eviction = eviction_memory(eviction_hard["memory.available"], memory_capacity,
                                       "evictionHard.memory.available")
        except ReservationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ReservationError(problems)
    names = set(name for name in list(kube) + list(system) if is_memory_type(name))
    names.add(MEMORY)
    required, parts = {}, {}
    for name in sorted(names):
        items = []
        if name in system:
            items.append(("systemReserved", system[name], None))
        if name in kube:
            items.append(("kubeReserved", kube[name], None))
        if name == MEMORY and eviction is not None:
            raw = eviction_hard["memory.available"]
            note = eviction_source
            if isinstance(raw, str) and raw.endswith("%"):
                note = "%s of %d bytes, %s" % (raw, memory_capacity, eviction_source)
            items.append(("evictionHard memory.available", eviction, note))
        amount = total(item[1] for item in items)
        if not amount.is_zero():
            required[name] = amount
            parts[name] = [item for item in items if not item[1].is_zero()]
    return Requirement(required, parts)


def parse_reserved_memory(entries):
    """Check the shape of a reservedMemory list; return [(numa_node, {type: Quantity})].

    Applies kubelet's configuration validation: allowed types only, no zero values, no duplicate
    (node, type) pairs; and refuses negative values and malformed entries.
    """
    problems = []
    parsed = []
    seen = set()
    if not isinstance(entries, list):
        raise ReservationError("reserved_memory must be a list of {numaNode, limits}, got %r" % (entries,))
    for index, entry in enumerate(entries):
        where = "reserved_memory[%d]" % index
        if not isinstance(entry, dict):
            problems.append("%s: %r is not a mapping with numaNode and limits" % (where, entry))
            continue
        unknown = sorted(set(entry) - set(("numaNode", "limits")))
        if unknown:
            problems.append("%s: unknown key(s) %s; an entry has only numaNode and limits"
                            % (where, ", ".join(unknown)))
        node = entry.get("numaNode")
        if isinstance(node, bool) or not isinstance(node, int) or node < 0:
            problems.append("%s.numaNode: %r is not a NUMA node id (a whole number >= 0)" % (where, node))
            continue
        limits = entry.get("limits")
        if not isinstance(limits, dict) or not limits:
            problems.append("%s.limits: expected a mapping such as {memory: 1Gi}, got %r" % (where, limits))
            continue
        values = {}
        for name in sorted(limits):
            label = "%s.limits.%s" % (where, name)
            if not (name == MEMORY or name.startswith(HUGEPAGES_PREFIX)):
                problems.append("%s: type %r is not allowed; kubelet accepts only memory and "
                                "hugepages-<size>" % (label, name))
                continue
            if name.startswith(HUGEPAGES_PREFIX) and hugepage_size(name) is None:
                problems.append("%s: %r does not name a page size (e.g. hugepages-2Mi)" % (label, name))
                continue
            try:
                quantity = parse_quantity(limits[name], label)
            except QuantityError as exc:
                problems.append(str(exc))
                continue
            if quantity.is_zero():
                problems.append("%s: zero is refused by kubelet ('reserved memory may not be zero for "
                                "NUMA node %d and resource \"%s\"'); leave the type out instead"
                                % (label, node, name))
                continue
            if quantity.value < 0:
                problems.append("%s: %s is negative" % (label, limits[name]))
                continue
            if not quantity.is_integer():
                problems.append("%s: %s is not a whole number of bytes; kubelet fails with 'could not "
                                "covert a variable of type Quantity to int64'" % (label, limits[name]))
                continue
            if (node, name) in seen:
                problems.append("%s: invalid configuration: the reserved memory has a duplicate value for "
                                "NUMA node %d and resource \"%s\"; merge the entries" % (label, node, name))
                continue
            seen.add((node, name))
            values[name] = quantity
        parsed.append((node, values))
    if problems:
        raise ReservationError(problems)
    return parsed


def check_reserved_memory(parsed, numa_nodes, requirement, node_memory=None):
    """Check a parsed reservedMemory against the machine and kubelet's required totals."""
    problems = []
    known = set(numa_nodes)
    for node, dummy in parsed:
        if node not in known:
            problems.append("the reserved memory configuration references a NUMA node %d that does not "
                            "exist on this machine (nodes: %s); reserve memory only on those nodes"
                            % (node, ", ".join(str(n) for n in sorted(known))))
    totals = {}
    found = {}
    for node, values in parsed:
        for name, quantity in values.items():
            current = Quantity(quantity.value, quantity.format)
            if name in totals:
                current.add(totals[name])
            totals[name] = current
            found.setdefault(name, []).append((node, quantity))
    for name in sorted(set(totals) | set(requirement.required), key=lambda n: (n != MEMORY, n)):
        reserved = total([totals[name]] if name in totals else [])
        wanted = total([requirement.required[name]] if name in requirement.required else [])
        if reserved == wanted:
            continue
        layout = ", ".join("node %d: %s" % (n, q.canonical()) for n, q in found.get(name, [])) or "nothing"
        hint = ""
        if name.startswith(HUGEPAGES_PREFIX) and wanted.is_zero():
            hint = (" kubelet cannot reserve huge pages through kubeReserved or systemReserved, so the "
                    "total it demands for %s is always 0: remove %s from reservedMemory." % (name, name))
        else:
            hint = " Fix: make the per-node %s limits add up to %s." % (name, wanted.canonical())
        problems.append(
            "the total amount \"%s\" of type \"%s\" is not equal to the value \"%s\" determined by Node "
            "Allocatable feature. Found %s (%s). Required %s.%s"
            % (reserved.canonical(), name, wanted.canonical(), reserved.canonical(), layout,
               requirement.explain(name), hint))
    if node_memory:
        for node, values in parsed:
            capacity = node_memory.get(node)
            if capacity is None or node not in known:
                continue
            amount = sum((q.value for q in values.values()), 0)
            if amount > capacity:
                problems.append(
                    "NUMA node %d: reserves %s but the node has only %s of memory; kubelet does not check "
                    "this, but no container could get memory there. Move the reservation to nodes with "
                    "memory." % (node, bytes_quantity(int(amount)).canonical(), bytes_quantity(capacity).canonical()))
    if problems:
        raise ReservationError(problems)


def _unit_for(name, amount):
    if name.startswith(HUGEPAGES_PREFIX):
        size = hugepage_size(name)
        if amount % size:
            raise ReservationError("%s: %d bytes is not a whole number of %s pages" % (name, amount, name[10:]))
        return size
    for unit in (MIB, 1024, 1):
        if amount % unit == 0:
            return unit
    return 1


def _split(units, weights):
    """Split ``units`` in proportion to ``weights`` (largest remainder); the parts sum exactly."""
    weight_sum = sum(weights)
    shares = [units * w // weight_sum for w in weights]
    remainders = sorted(range(len(weights)), key=lambda i: (-(units * weights[i] % weight_sum), i))
    for index in remainders[:units - sum(shares)]:
        shares[index] += 1
    return shares


def layout_reserved_memory(requirement, numa_nodes, node_memory=None, placement="spread", placement_node=None):
    """Lay out a reservedMemory list whose totals equal ``requirement`` exactly.

    ``single`` puts every type on one node (``placement_node``, default the lowest node with
    memory); ``spread`` shares each type across the nodes with memory in proportion to their
    memory (evenly when node sizes are unknown), in whole MiB where the total allows it.
    """
    nodes = sorted(numa_nodes)
    if node_memory:
        with_memory = [n for n in nodes if node_memory.get(n, 0) > 0]
    else:
        with_memory = list(nodes)
    if not with_memory:
        raise ReservationError("no NUMA node has memory to hold the reservation")
    if placement == "single":
        if placement_node is None:
            placement_node = with_memory[0]
        if placement_node not in nodes:
            raise ReservationError("placement_node %r is not a NUMA node of this machine (nodes: %s)"
                                   % (placement_node, ", ".join(str(n) for n in nodes)))
        targets, weights = [placement_node], [1]
    elif placement == "spread":
        targets = with_memory
        weights = [node_memory[n] for n in targets] if node_memory else [1] * len(targets)
    else:
        raise ReservationError("placement %r is not one of single, spread" % (placement,))
    layout = dict((n, {}) for n in targets)
    for name in sorted(requirement.required):
        amount = requirement.required[name].as_int()
        if amount is None or amount < 0:
            raise ReservationError("the %s reservation %s is not a whole number of bytes; kubelet cannot "
                                   "split it over NUMA nodes" % (name, requirement.required[name].canonical()))
        unit = _unit_for(name, amount)
        for node, share in zip(targets, _split(amount // unit, weights)):
            if share:
                layout[node][name] = bytes_quantity(share * unit).canonical()
    return [{"numaNode": n, "limits": layout[n]} for n in targets if layout[n]]


def keep_current(current, requirement, numa_nodes, node_memory=None, placement="spread", placement_node=None):
    """The parsed layout in force when it can stay, else None.

    It can stay when kubelet would accept it for ``requirement`` on this machine and it has the
    placement asked for: ``single`` on one node (``placement_node`` when given), ``spread`` over
    exactly the nodes that have memory.
    """
    try:
        parsed = parse_reserved_memory(current)
        check_reserved_memory(parsed, numa_nodes, requirement, node_memory)
    except (ReservationError, QuantityError, TypeError, ValueError, KeyError):
        return None
    used = set(node for node, _values in parsed)
    if placement == "single":
        return parsed if len(used) == 1 and (placement_node is None or used == set([placement_node])) else None
    with_memory = set(n for n in numa_nodes if not node_memory or node_memory.get(n, 0) > 0)
    return parsed if used == with_memory else None


def reserved_memory_flag(entries):
    """The --reserved-memory flag value for a reservedMemory list: ``0:memory=1Gi;1:memory=2Gi``."""
    parts = []
    for entry in entries:
        limits = ",".join("%s=%s" % (name, entry["limits"][name]) for name in sorted(entry["limits"]))
        parts.append("%d:%s" % (entry["numaNode"], limits))
    return ";".join(parts)


def canonical_entries(parsed):
    """A parsed reservedMemory in KubeletConfiguration form with canonical quantities."""
    return [{"numaNode": node, "limits": dict((name, q.canonical()) for name, q in sorted(values.items()))}
            for node, values in parsed]


def _node_memory_map(numa_node_memory):
    result = {}
    problems = []
    for key, raw in (numa_node_memory or {}).items():
        try:
            node = int(key)
        except (TypeError, ValueError):
            problems.append("numa_node_memory: key %r is not a NUMA node id" % (key,))
            continue
        try:
            amount = parse_quantity(raw, "numa_node_memory.%s" % key)
        except QuantityError as exc:
            problems.append(str(exc))
            continue
        if amount.value < 0:
            problems.append("numa_node_memory.%s: %r is negative" % (key, raw))
            continue
        result[node] = amount.ceil()
    if problems:
        raise ReservationError(problems)
    return result


def plan(numa_nodes=None, numa_node_memory=None, memory_capacity=None, kube_reserved=None,
         system_reserved=None, eviction_hard=None, merge_default_eviction_settings=False,
         distribution="kubeadm", eks_max_pods=None, cpu_count=None, reserved_memory=None,
         placement="spread", placement_node=None, current_reserved_memory=None):
    """Everything the reserved_memory module does: resolve, compute or check, and describe.

    With no ``reserved_memory`` given, a ``current_reserved_memory`` (the layout in force) that still
    meets every rule and has the placement asked for is kept as it is, so that per-node memory
    moving between boots does not change the plan.

    Raises ReservationError listing every problem found; returns the module's result otherwise.
    """
    node_memory = _node_memory_map(numa_node_memory)
    nodes = sorted(set(int(n) for n in (numa_nodes or [])))
    if node_memory:
        if nodes and set(nodes) != set(node_memory):
            raise ReservationError("numa_nodes %s and the nodes of numa_node_memory %s differ; pass the same "
                                   "nodes to both (or only numa_node_memory)" % (nodes, sorted(node_memory)))
        nodes = sorted(node_memory)
    if not nodes:
        raise ReservationError("no NUMA nodes given: pass numa_nodes or numa_node_memory "
                               "(both come from numa.kube.topology_facts)")
    capacity = None
    if memory_capacity is not None:
        capacity = parse_quantity(memory_capacity, "memory_capacity").ceil()
    elif node_memory:
        capacity = sum(node_memory.values())
    kube, system, eviction, source = effective_settings(
        distribution, kube_reserved, system_reserved, eviction_hard, merge_default_eviction_settings,
        eks_max_pods, cpu_count)
    requirement = node_allocatable_reservation(kube, system, eviction, capacity, source)
    kept = None
    if reserved_memory is None and current_reserved_memory:
        kept = keep_current(current_reserved_memory, requirement, nodes, node_memory, placement, placement_node)
    if kept is not None:
        parsed, entries, mode = kept, [dict(e) for e in current_reserved_memory], "kept"
    elif reserved_memory is None:
        entries = layout_reserved_memory(requirement, nodes, node_memory, placement, placement_node)
        parsed = parse_reserved_memory(entries)
        mode = "computed"
    else:
        parsed = parse_reserved_memory(reserved_memory)
        entries = canonical_entries(parsed)
        mode = "validated"
    check_reserved_memory(parsed, nodes, requirement, node_memory)
    return {
        "mode": mode,
        "reserved_memory": entries,
        "reserved_memory_flag": reserved_memory_flag(entries),
        "required": dict((name, q.canonical()) for name, q in requirement.required.items()),
        "required_bytes": dict((name, q.ceil()) for name, q in requirement.required.items()),
        "explanation": [requirement.explain(name) for name in sorted(requirement.required)],
        "kube_reserved": _canonical_map(kube),
        "system_reserved": _canonical_map(system),
        "eviction_hard": dict((k, str(v)) for k, v in eviction.items()),
        "numa_nodes": nodes,
    }


def _canonical_map(values):
    return dict((k, v if isinstance(v, str) else parse_quantity(v, k).canonical()) for k, v in values.items())
