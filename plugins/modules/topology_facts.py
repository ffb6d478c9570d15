#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: topology_facts
short_description: Read a node's NUMA topology from sysfs
version_added: "0.1.0"
description:
  - Reads NUMA nodes, their CPUs, memory, huge pages and distances, the socket and core of every
    online CPU, and the PCI devices (network interfaces with their SR-IOV relation, GPUs, NVMe)
    with the NUMA node each sits on. Returns everything as the fact C(numa_topology).
  - Node ids may have gaps. Nodes with memory and no CPUs (CXL, memory-only nodes) and nodes with
    CPUs and no memory are reported as such.
  - A kernel without NUMA support has no C(/sys/devices/system/node); the machine is then reported
    as one node C(0) holding every online CPU and all memory, with C(numa_enabled=false).
  - Reads only; never changes the node.
author:
  - numa.kube contributors (@numa-kube)
options:
  sysfs_root:
    description:
      - Folder to read sysfs from. Point it at a recorded tree to inspect another machine's topology.
    type: path
    default: /sys
  procfs_root:
    description:
      - Folder to read C(meminfo) from, for the machine's total memory.
    type: path
    default: /proc
  include_pci:
    description:
      - Whether to list PCI devices (network, GPU, NVMe, accelerators) and their NUMA nodes.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Nothing is written in check mode; the results are those a real run would give.
  diff_mode:
    support: none
    description: The module changes nothing, so there is nothing to show.
  facts:
    support: full
    description: Returns the fact C(numa_topology).
notes:
  - A PCI device whose C(numa_node) is C(-1) in sysfs has no NUMA affinity; it is reported with
    C(numa_node=null). Devices that sit on another node than a pod's CPUs are what make the
    C(single-numa-node) Topology Manager policy reject pods.
seealso:
  - module: numa.kube.reserved_memory
"""

EXAMPLES = r"""
- name: Read the NUMA topology
  numa.kube.topology_facts:

- name: Show the CPUs of each NUMA node
  ansible.builtin.debug:
    msg: "node {{ item.id }}: CPUs {{ item.cpu_list }}, {{ item.memory_total_bytes | human_readable }}"
  loop: "{{ numa_topology.nodes }}"

- name: Read a topology recorded from another machine, without PCI devices
  numa.kube.topology_facts:
    sysfs_root: /tmp/recorded/sys
    procfs_root: /tmp/recorded/proc
    include_pci: false
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to the host's facts.
  returned: always
  type: dict
  contains:
    numa_topology:
      description: The node's NUMA topology.
      returned: always
      type: dict
      contains:
        numa_enabled:
          description: Whether the kernel exposes NUMA nodes (false means one synthetic node 0).
          type: bool
          sample: true
        node_count:
          description: Number of NUMA nodes.
          type: int
          sample: 2
        node_ids:
          description: Ids of the NUMA nodes, ascending; may have gaps.
          type: list
          elements: int
          sample: [0, 1]
        nodes:
          description:
            - One entry per NUMA node with C(id), C(cpus) (sorted online CPU ids), C(cpu_list),
              C(has_cpu), C(has_memory), C(memory_total_bytes), C(memory_free_bytes),
              C(memory_used_bytes), C(hugepages) (per resource name such as C(hugepages-2Mi), its
              C(page_size_bytes), C(total) and C(free)) and C(distances) (node id to distance).
          type: list
          elements: dict
          sample:
            - id: 0
              cpus: [0, 1]
              cpu_list: "0-1"
              has_cpu: true
              has_memory: true
              memory_total_bytes: 2097152000
              memory_free_bytes: 1800000000
              memory_used_bytes: 297152000
              hugepages:
                hugepages-2Mi: {page_size_bytes: 2097152, total: 0, free: 0}
              distances: {"0": 10, "1": 21}
        nodes_with_cpus:
          description: Ids of nodes that have online CPUs.
          type: list
          elements: int
          sample: [0, 1]
        nodes_with_memory:
          description: Ids of nodes that have memory.
          type: list
          elements: int
          sample: [0, 1, 2]
        numa_node_memory:
          description: Node id (as a string) to total memory in bytes; feeds M(numa.kube.reserved_memory).
          type: dict
          sample: {"0": 2097152000, "1": 2097152000}
        cpus:
          description:
            - One entry per online CPU with C(id), C(numa_node), C(socket), C(core), C(die) and
              C(thread_siblings) (the hyperthreads sharing its core).
          type: list
          elements: dict
          sample:
            - {id: 0, numa_node: 0, socket: 0, core: 0, die: 0, thread_siblings: [0, 8]}
        cpu_count:
          description: Number of online CPUs.
          type: int
          sample: 4
        sockets:
          description: Socket (physical package) ids.
          type: list
          elements: int
          sample: [0, 1]
        hyperthreading:
          description: Whether any core runs more than one online hardware thread.
          type: bool
          sample: false
        memory_total_bytes:
          description: The machine's MemTotal from meminfo (what kubelet reports as memory capacity).
          type: int
          sample: 4194304000
        hugepage_sizes:
          description: Huge page resource names the machine supports, smallest first.
          type: list
          elements: str
          sample: [hugepages-2Mi, hugepages-1Gi]
        pci_devices:
          description:
            - PCI devices that matter to NUMA alignment, with C(address), C(kind) (network, gpu,
              nvme, accelerator, infiniband), C(class), C(vendor), C(device), C(numa_node) (null
              when the device has no affinity), C(driver), C(interfaces) (e.g. eth0, nvme0) and,
              for SR-IOV, C(sriov) (C(role=pf) with C(total_vfs), C(num_vfs), C(vfs); or
              C(role=vf) with C(pf)).
          returned: when include_pci is true
          type: list
          elements: dict
          sample:
            - address: "0000:3b:00.0"
              kind: network
              class: "0x020000"
              vendor: "0x8086"
              device: "0x158b"
              numa_node: 0
              driver: i40e
              interfaces: [ens1f0]
              sriov: {role: pf, total_vfs: 64, num_vfs: 2, vfs: ["0000:3b:02.0", "0000:3b:02.1"]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader, SysfsError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            include_pci=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    reader = SysfsReader(module.params["sysfs_root"], module.params["procfs_root"])
    try:
        facts = reader.read(include_pci=module.params["include_pci"])
    except (SysfsError, ValueError, OSError) as exc:
        module.fail_json(msg="could not read the NUMA topology under %s: %s" % (module.params["sysfs_root"], exc))
    module.exit_json(changed=False, ansible_facts={"numa_topology": facts})


if __name__ == "__main__":
    main()
