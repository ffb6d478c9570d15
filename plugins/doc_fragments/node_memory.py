# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The machine's memory, as the modules that check a Memory Manager reservation take it."""

    DOCUMENTATION = r"""
options:
  numa_node_memory:
    description:
      - NUMA node id to that node's memory (bytes or a quantity), e.g. C(numa_topology.numa_node_memory)
        from M(numa.kube.topology_facts).
      - Used to lay out or check the reservation per node (a node must not reserve more than it
        has), to refuse nodes that do not exist, and to resolve a percentage C(memory.available).
    type: dict
  memory_capacity:
    description:
      - The node's memory capacity as kubelet sees it (MemTotal, C(numa_topology.memory_total_bytes)),
        for a percentage C(memory.available). Defaults to the sum of O(numa_node_memory).
    type: raw
"""
