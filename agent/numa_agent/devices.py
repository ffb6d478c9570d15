# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin's devices: names, and which to hand out (no gRPC here, so it tests alone)."""


def device_ids(node, capacity):
    """``numa-<node>-<index>``, the index zero-padded to one width so the names sort as numbers."""
    width = len(str(capacity - 1))
    return ["numa-%d-%0*d" % (node, width, index) for index in range(capacity)]


def preferred(available, must_include, size):
    """The devices to hand out: those kubelet must include, then the lowest-numbered others.

    Every device of one resource sits on the same NUMA node and is interchangeable, so the only
    sensible preference is a stable one: it keeps allocations compact and easy to read in logs.
    """
    chosen = list(must_include)[:size]
    for device in sorted(available):
        if len(chosen) >= size:
            break
        if device not in chosen:
            chosen.append(device)
    return chosen
