# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Laying out a reservedMemory that meets kubelet's sum exactly: spread over the nodes with memory in
proportion to it, or on one node; and keeping the layout in force while it is still right.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    QuantityError,
    bytes_quantity,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_check import (
    check_reserved_memory,
    kubelet_spelling,
    parse_reserved_memory,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_rules import (
    HUGEPAGES_PREFIX,
    MIB,
    ReservationError,
    hugepage_size,
)


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
                layout[node][name] = kubelet_spelling(bytes_quantity(share * unit))
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
