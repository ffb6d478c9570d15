# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet Memory Manager reservation: what kubelet demands, and whether a layout meets it.

kubelet (Static memory manager) starts only when, for ``memory`` and every ``hugepages-<size>``
type, the per-NUMA-node ``reservedMemory`` limits add up exactly to the Node Allocatable
reservation of that type: systemReserved + kubeReserved + the hard eviction threshold (which
only ever adds ``memory``, through ``memory.available``). ``plan`` is what the reserved_memory
module does; the jobs live apart: reservation_rules computes that reservation from the same inputs
kubelet reads, reservation_check holds a proposed ``reservedMemory`` to every rule kubelet applies
(and a few it does not, but that users trip on), reservation_layout lays out one that meets the
sum exactly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    QuantityError,
    parse_quantity,
)

# the parts, by job; the names other modules take from here are re-exported
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_check import (  # noqa: F401 pylint: disable=unused-import
    canonical_entries,
    check_reserved_memory,
    parse_reserved_memory,
    reserved_memory_flag,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_layout import (  # noqa: F401 pylint: disable=unused-import
    keep_current,
    layout_reserved_memory,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_rules import (  # noqa: F401 pylint: disable=unused-import
    DISTRIBUTIONS,
    MEMORY,
    MIB,
    Requirement,
    ReservationError,
    effective_settings,
    eks_kube_reserved_cpu,
    eks_kube_reserved_memory,
    eviction_memory,
    eviction_problems,
    eviction_threshold,
    hugepage_size,
    node_allocatable_reservation,
    parse_resource_map,
)
from ansible_collections.numa.kube.plugins.module_utils.quantity import total


# Linux numbers NUMA nodes below MAX_NUMNODES, 1024 at most (NODES_SHIFT 10)
MAX_NUMA_NODES = 1024


def _node_memory_map(numa_node_memory):
    result = {}
    problems = []
    for key, raw in (numa_node_memory or {}).items():
        try:
            node = int(key) if len(str(key)) < 8 else -1
        except (TypeError, ValueError):
            node = -1
        if isinstance(key, bool) or not 0 <= node < MAX_NUMA_NODES:
            problems.append("numa_node_memory: key %r is not a NUMA node id (0 to %d)" % (key, MAX_NUMA_NODES - 1))
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
        late = []
        parsed = parse_reserved_memory(reserved_memory, late)
        entries = canonical_entries(parsed)
        mode = "validated"
        if late:
            try:
                check_reserved_memory(parsed, nodes, requirement, node_memory)
            except ReservationError as exc:
                late = exc.problems + late
            raise ReservationError(late)
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


def check_without_machine(reserved_memory, distribution="kubeadm", kube_reserved=None, system_reserved=None,
                          eviction_hard=None, merge_default_eviction_settings=False):
    """A Static memory manager's reservedMemory against what kubelet demands on any machine.

    Without the machine, the node ids and each node's memory go unchecked, but the sums do not
    depend on it: per memory type, reservedMemory must add up to kubeReserved + systemReserved (+
    the ``memory.available`` hard eviction threshold), and memory must be reserved at all. A
    percentage threshold depends on the node's memory: then the memory total is only required to
    be more than nothing. Raises ReservationError with every problem found.
    """
    kube, system, eviction, source = effective_settings(
        distribution, kube_reserved, system_reserved, eviction_hard, merge_default_eviction_settings)
    late = []
    parsed = parse_reserved_memory(reserved_memory, late)
    threshold = str(eviction.get("memory.available", ""))
    percentage = threshold.endswith("%") and threshold not in ("0%", "100%")
    if percentage:
        # its amount depends on the machine, but not whether kubelet can read it ("10 %" it cannot)
        try:
            eviction_threshold("memory.available", threshold, "evictionHard.memory.available")
        except ReservationError as exc:
            late.extend(exc.problems)
        eviction = dict((k, v) for k, v in eviction.items() if k != "memory.available")
    requirement = node_allocatable_reservation(kube, system, eviction, None, source)
    if percentage:
        reserved = total(values[MEMORY] for dummy, values in parsed if MEMORY in values)
        if reserved.value > 0:
            requirement.required[MEMORY] = reserved  # unknown here: whatever is reserved
    problems = []
    try:
        check_reserved_memory(parsed, sorted(set(node for node, dummy in parsed)), requirement)
    except ReservationError as exc:
        problems.extend(exc.problems)
    if problems or late:
        raise ReservationError(problems + late)


def _canonical_map(values):
    return dict((k, v if isinstance(v, str) else parse_quantity(v, k).canonical()) for k, v in values.items())
