# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a reservedMemory meets kubelet's rules: its shape as kubelet validates it, then its sums
against the reservation kubelet demands, in the order kubelet checks them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    Quantity,
    QuantityError,
    bytes_quantity,
    parse_quantity,
    total,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_rules import (
    HUGEPAGES_PREFIX,
    MEMORY,
    ReservationError,
    hugepage_size,
)


def parse_reserved_memory(entries, late=None):
    """Check the shape of a reservedMemory list; return [(numa_node, {type: Quantity})].

    Applies kubelet's configuration validation: allowed types only, no zero values, no duplicate
    (node, type) pairs; and refuses negative values and malformed entries. A value that is not a
    whole number of bytes fails in kubelet only after the totals were checked: with a ``late``
    list, that problem goes there and the value is kept, so that the caller can check the totals
    first, as kubelet does.
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
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node <= 2 ** 31 - 1:
            problems.append("%s.numaNode: %r is not a NUMA node id (a whole number from 0 to 2147483647: kubelet "
                            "reads it as an int32)" % (where, node))
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
                problem = ("%s: %s is negative; kubelet does not check this, but no NUMA node can hold back "
                           "less than nothing" % (label, limits[name]))
                if late is None:
                    problems.append(problem)
                    continue
                late.append(problem)
            if quantity.kubelet_int64() is None:
                what = "is not a whole number of bytes" if not quantity.is_integer() else (
                    "is a whole number of bytes, but not in a form kubelet reads as one (a decimal point, or "
                    "a suffix below one)")
                problem = ("%s: %s %s; kubelet fails with 'could not covert a variable of type Quantity to "
                           "int64'. Write it as bytes or with a binary suffix, such as %s"
                           % (label, limits[name], what, bytes_quantity(quantity.ceil()).canonical()))
                if late is None:
                    problems.append(problem)
                    continue
                late.append(problem)
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
    if not problems and total([totals[MEMORY]] if MEMORY in totals else []).is_zero():
        problems.append(
            "nothing is reserved for memory, and kubelet's Static Memory Manager refuses to start without it "
            "('[memorymanager] you should specify the system reserved memory'). Fix: reserve memory through "
            "kube_reserved or system_reserved, or keep the memory.available hard eviction threshold, and "
            "spread the same amount in reservedMemory.")
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


def reserved_memory_flag(entries):
    """The --reserved-memory flag value for a reservedMemory list: ``0:memory=1Gi;1:memory=2Gi``."""
    parts = []
    for entry in entries:
        limits = ",".join("%s=%s" % (name, entry["limits"][name]) for name in sorted(entry["limits"]))
        parts.append("%d:%s" % (entry["numaNode"], limits))
    return ";".join(parts)


def kubelet_spelling(quantity):
    """A whole number of bytes written as kubelet prints it (1Gi, 1536Mi), or as plain bytes where
    kubelet could not convert that spelling back to a whole number (huge: 23622320472Mi)."""
    text = quantity.canonical()
    if not quantity.is_integer() or parse_quantity(text).kubelet_int64() is not None:
        return text
    return str(quantity.as_int())


def canonical_entries(parsed):
    """A parsed reservedMemory in KubeletConfiguration form with canonical quantities."""
    return [{"numaNode": node, "limits": dict((name, kubelet_spelling(q)) for name, q in sorted(values.items()))}
            for node, values in parsed]
