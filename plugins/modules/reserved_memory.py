#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: reserved_memory
short_description: Compute and validate the kubelet Memory Manager reservation
version_added: "0.1.0"
description:
  - With the C(Static) memory manager policy, kubelet starts only when, for C(memory) and every
    C(hugepages-<size>) type, the C(reservedMemory) limits of all NUMA nodes add up exactly to
    systemReserved + kubeReserved + the hard eviction threshold C(memory.available).
  - This module computes that total the way kubelet does (quantities in every Kubernetes form,
    percentages of C(memory.available) resolved against the node's memory, each distribution's
    default eviction thresholds, the EKS kube-reserved formula) and then either lays out a
    C(reservedMemory) that meets it exactly or checks the one given.
  - A layout kubelet would refuse fails the task with kubelet's own error text, the sum found, the
    sum required and where each part of it comes from, and how to fix it. The module never changes
    the node.
  - Settings that reserve no memory at all are refused too, because the C(Static) policy does not
    start without a reservation (C([memorymanager] you should specify the system reserved memory)).
  - The verdicts, totals and error texts are tested against kubelet's own code (the differential
    tests in C(tests/differential)).
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.node_memory
options:
  numa_nodes:
    description:
      - Ids of the NUMA nodes present on the node. Required unless O(numa_node_memory) is given.
    type: list
    elements: int
  kube_reserved:
    description:
      - kubeReserved, resource name to quantity (C(cpu), C(memory), C(ephemeral-storage), C(pid)).
      - With O(distribution=eks), the EKS formula fills C(memory) (from O(eks_max_pods)),
        C(cpu) (from O(cpu_count)) and C(ephemeral-storage); keys given here win.
    type: dict
    default: {}
  system_reserved:
    description:
      - systemReserved, resource name to quantity.
    type: dict
    default: {}
  eviction_hard:
    description:
      - evictionHard, signal to threshold (quantity or percentage). Only C(memory.available)
        adds to the memory reservation.
      - When omitted, the distribution's default is used (kubeadm and EKS C(100Mi); RKE2 and k3s set
        no C(memory.available)). When given, signals not listed are not set, as in kubelet, unless
        O(merge_default_eviction_settings) is true.
    type: dict
  merge_default_eviction_settings:
    description:
      - Mirror of kubelet's C(mergeDefaultEvictionSettings). Adds kubelet's default thresholds for
        the signals O(eviction_hard) does not name.
    type: bool
    default: false
  distribution:
    description:
      - Kubernetes distribution of the node; decides default eviction thresholds and, for C(eks),
        the kube-reserved formula.
    type: str
    choices: [kubeadm, rke2, k3s, eks]
    default: kubeadm
  eks_max_pods:
    description:
      - EKS only. maxPods of the node (1 to 2147483647, kubelet's int32); kubeReserved memory = 11 *
        maxPods + 255 MiB.
    type: int
  cpu_count:
    description:
      - EKS only. Number of CPUs (1 to 8192), for the EKS kubeReserved CPU formula (reported, not
        part of the memory sum).
    type: int
  reserved_memory:
    description:
      - A C(reservedMemory) list to validate, in KubeletConfiguration form - a list of entries
        with C(numaNode) and C(limits), for example C(numaNode=0) with C(limits) C(memory=1Gi).
        When omitted, one is computed.
    type: list
    elements: dict
  placement:
    description:
      - How a computed reservation is placed. C(spread) shares it across the nodes with memory in
        proportion to their memory (evenly when O(numa_node_memory) is not given), in whole MiB
        where possible; C(single) puts all of it on one node. The total is always exact.
    type: str
    choices: [spread, single]
    default: spread
  placement_node:
    description:
      - With O(placement=single), the node that holds the reservation. Defaults to the lowest node
        with memory.
    type: int
  current_reserved_memory:
    description:
      - The C(reservedMemory) in force on the node. When O(reserved_memory) is omitted and this
        layout still meets every rule for the computed total and has the O(placement) asked for
        (C(single) - one node; C(spread) - every node with memory), it is kept unchanged
        (RV(mode=kept)) instead of computing a new one. Per-node memory moves by a MiB or so
        between boots, and a new layout would make kubelet's Memory Manager state stale for nothing.
    type: list
    elements: dict
attributes:
  check_mode:
    support: full
    description: Nothing is written in check mode; the results are those a real run would give.
  diff_mode:
    support: none
    description: The module changes nothing, so there is nothing to show.
notes:
  - kubelet accepts only C(cpu), C(memory), C(ephemeral-storage) and C(pid) in kubeReserved and
    systemReserved, so the total it demands for any C(hugepages-<size>) type is always 0; a huge
    page entry in C(reservedMemory) is therefore refused, with that explanation.
  - kubelet refuses to start until C(/var/lib/kubelet/memory_manager_state) is removed after any
    change of the reservation; M(numa.kube.kubelet_config) reports when that is needed.
seealso:
  - module: numa.kube.topology_facts
  - module: numa.kube.kubelet_config
  - name: Kubernetes Memory Manager
    description: Reserved memory flag and its rules.
    link: https://kubernetes.io/docs/tasks/administer-cluster/memory-manager/
"""

EXAMPLES = r"""
- name: Read the topology
  numa.kube.topology_facts:

- name: Compute a reservation spread over the NUMA nodes (kubeadm defaults, eviction 100Mi)
  numa.kube.reserved_memory:
    numa_node_memory: "{{ numa_topology.numa_node_memory }}"
    kube_reserved:
      cpu: 500m
      memory: 1Gi
    system_reserved:
      memory: 512Mi
  register: reservation

- name: Check a hand-written reservation on an RKE2 node (no memory.available by default)
  numa.kube.reserved_memory:
    distribution: rke2
    numa_nodes: [0, 1]
    kube_reserved: {memory: 1Gi}
    reserved_memory:
      - numaNode: 0
        limits: {memory: 512Mi}
      - numaNode: 1
        limits: {memory: 512Mi}

- name: EKS m5.xlarge (58 pods), all on node 0
  numa.kube.reserved_memory:
    distribution: eks
    eks_max_pods: 58
    numa_nodes: "{{ numa_topology.node_ids }}"
    placement: single
"""

RETURN = r"""
mode:
  description: Whether the reservation was C(computed), C(validated), or C(kept) from O(current_reserved_memory).
  returned: success
  type: str
  sample: computed
reserved_memory:
  description: The reservation in KubeletConfiguration form, quantities in canonical form.
  returned: success
  type: list
  elements: dict
  sample: [{numaNode: 0, limits: {memory: 812Mi}}, {numaNode: 1, limits: {memory: 812Mi}}]
reserved_memory_flag:
  description: The same as a C(--reserved-memory) flag value.
  returned: success
  type: str
  sample: "0:memory=812Mi;1:memory=812Mi"
required:
  description: Per memory type, the total kubelet demands (canonical quantity).
  returned: success
  type: dict
  sample: {memory: 1624Mi}
required_bytes:
  description: The same totals in bytes.
  returned: success
  type: dict
  sample: {memory: 1702887424}
explanation:
  description: Per type, how the required total is made up.
  returned: success
  type: list
  elements: str
  sample: ["1624Mi = systemReserved 512Mi + kubeReserved 1Gi + evictionHard memory.available 100Mi [kubeadm default]"]
kube_reserved:
  description: The kubeReserved in effect (after the EKS formula, if any).
  returned: success
  type: dict
  sample: {cpu: 500m, memory: 1Gi}
system_reserved:
  description: The systemReserved in effect.
  returned: success
  type: dict
  sample: {memory: 512Mi}
eviction_hard:
  description: The evictionHard in effect (the distribution's default when none was given).
  returned: success
  type: dict
  sample: {memory.available: 100Mi, nodefs.available: 10%}
numa_nodes:
  description: The NUMA node ids the reservation was checked against.
  returned: success
  type: list
  elements: int
  sample: [0, 1]
problems:
  description: On failure, every problem found, one per item.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils.quantity import QuantityError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import (
    DISTRIBUTIONS,
    MAX_NUMA_NODES,
    ReservationError,
    plan,
)
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import MAX_CPUS


def input_problems(params):
    """What is wrong with the machine described to the module, before any arithmetic."""
    problems = []
    if params["cpu_count"] is not None and not 1 <= params["cpu_count"] <= MAX_CPUS:
        problems.append("cpu_count %d is not a number of CPUs (1 to %d)" % (params["cpu_count"], MAX_CPUS))
    for what, nodes in (("numa_nodes", params["numa_nodes"] or []), ("placement_node", [params["placement_node"]])):
        for node in nodes:
            if node is not None and not 0 <= node < MAX_NUMA_NODES:
                problems.append("%s: %d is not a NUMA node id (0 to %d)" % (what, node, MAX_NUMA_NODES - 1))
    return problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            numa_nodes=dict(type="list", elements="int"),
            numa_node_memory=dict(type="dict"),
            memory_capacity=dict(type="raw"),
            kube_reserved=dict(type="dict", default={}),
            system_reserved=dict(type="dict", default={}),
            eviction_hard=dict(type="dict"),
            merge_default_eviction_settings=dict(type="bool", default=False),
            distribution=dict(type="str", default="kubeadm", choices=list(DISTRIBUTIONS)),
            eks_max_pods=dict(type="int"),
            cpu_count=dict(type="int"),
            reserved_memory=dict(type="list", elements="dict"),
            placement=dict(type="str", default="spread", choices=["spread", "single"]),
            placement_node=dict(type="int"),
            current_reserved_memory=dict(type="list", elements="dict"),
        ),
        required_one_of=[["numa_nodes", "numa_node_memory"]],
        supports_check_mode=True,
    )
    params = dict((k, v) for k, v in module.params.items())
    problems = input_problems(params)
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    try:
        result = plan(**params)
    except (ReservationError, QuantityError) as exc:
        problems = getattr(exc, "problems", [str(exc)])
        module.fail_json(msg="kubelet would refuse this reservation: " + " | ".join(problems), problems=problems)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
