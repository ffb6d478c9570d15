#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_profile
short_description: Plan a node's performance profile (reserved and isolated CPUs, huge pages per NUMA node) from its topology
version_added: "0.1.0"
description:
  - Splits the node's online CPUs into reserved ones, which keep the system (services, kubelet,
    containerd, interrupts, kernel threads), and isolated ones, left to pods, and plans what follows
    from the split, read from the node's own topology; huge pages are planned per size and NUMA node.
  - "The plan holds the kubelet fields (the static CPU Manager with C(reservedSystemCPUs),
    C(full-pcpus-only), C(strict-cpu-reservation) where the kubelet version takes it without a feature gate,
    C(max-allowable-numa-nodes) above 8 NUMA nodes), the kernel parameters (C(isolcpus=managed_irq,...),
    C(nohz_full), C(rcu_nocbs), C(irqaffinity); C(hugepagesz) and C(hugepages) in the per-node form for
    1 GiB pages), irqbalance's banned CPUs and systemd's C(CPUAffinity)."
  - Refuses, with every problem at once and before anything changes, a profile that kubelet or the
    kernel would refuse in the field - reserved and isolated CPUs that overlap, leave an online CPU
    out or name an offline one; no reserved or no isolated CPU; a core whose SMT siblings are split
    while C(full_pcpus_only) is on; CPU 0 isolated (the kernel keeps its timekeeping tick); CPUs
    present but offline; reserved CPUs that a planned C(nosmt) (or a mitigation turning SMT off)
    takes offline at the next boot; a kernel built without the options the parameters need; huge
    pages of a size the node does not offer, on a kernel without NUMA nodes, or leaving less than a
    tenth of a NUMA node's memory beside the system's reservation.
  - Reads only; never changes the node. Point O(sysfs_root) and O(procfs_root) at a recorded tree to
    plan for a machine the controller cannot reach.
author:
  - numa.kube contributors (@numa-kube)
options:
  profile:
    description:
      - The profile as declared for a group of nodes.
    type: dict
    required: true
    suboptions:
      reserved:
        description:
          - The reserved CPUs as a list in kubelet's form (C(0-1,8-9)). Exclusive with O(profile.reserved_per_node).
        type: str
      reserved_per_node:
        description:
          - The number of reserved CPUs on each NUMA node of O(profile.reserved_nodes), taken core by
            core (a core's threads together) from the lowest-numbered core up; with
            O(profile.full_pcpus_only=false) the last core taken may be split.
        type: int
      reserved_nodes:
        description:
          - The NUMA nodes that hold reserved CPUs with O(profile.reserved_per_node). Default every
            NUMA node with CPUs, so the system is spread rather than packed on node 0.
        type: list
        elements: int
      isolated:
        description:
          - The isolated CPUs as a list in kubelet's form, or C(rest) for every online CPU not reserved.
        type: str
        default: rest
      full_pcpus_only:
        description:
          - Give pods whole cores (kubelet's C(full-pcpus-only)); reserved CPUs must then be whole cores too.
        type: bool
        default: true
      strict_cpu_reservation:
        description:
          - Keep the pods of the shared pool off the reserved CPUs (kubelet's C(strict-cpu-reservation)).
            Unset, it is asked for where O(kubelet_version) is known and takes it without a feature
            gate (1.33 and newer); V(false) with O(profile.balance_isolated=false) is required, as
            the shared pool would otherwise run only on CPUs the scheduler does not balance.
        type: bool
      balance_isolated:
        description:
          - Whether the kernel's scheduler still balances load across the isolated CPUs. V(false) adds
            C(isolcpus)' C(domain) flag.
        type: bool
        default: true
      hugepages:
        description:
          - Huge pages per size and NUMA node. 2 MiB pages are allocated at runtime, before kubelet
            starts; 1 GiB pages on the kernel command line (their runtime allocation needs contiguous
            free memory and often fails on a node that has run a while).
        type: list
        elements: dict
        default: []
        suboptions:
          size:
            description: The page size, C(2Mi) or C(1Gi) (C(2M), C(2048kB) and C(1G) are read the same).
            type: str
            required: true
          node:
            description: The NUMA node.
            type: int
            required: true
          count:
            description: The number of pages.
            type: int
            required: true
      hugepages_seconds:
        description:
          - How long each runtime page unit tries to allocate its pages (compacting memory between
            tries) before it names the shortfall in the journal and fails, which holds kubelet back.
          - From 1 to 3600. A node with much memory in use may need longer to free contiguous pages.
        type: int
        default: 60
  kubelet_version:
    description:
      - The node's kubelet version (C(1.36.3), C(v1.36.3) or C(Kubernetes v1.36.3)). Decides
        C(strict-cpu-reservation) and C(max-allowable-numa-nodes). Unknown, C(max-allowable-numa-nodes)
        is still planned (every kubelet numa.kube supports has it), C(strict-cpu-reservation) only where
        O(profile.strict_cpu_reservation) asks for it.
    type: str
  kernel_release:
    description:
      - The kernel release the profile boots (C(6.1.0-28-amd64)). Default the running one, from
        O(procfs_root)C(/sys/kernel/osrelease).
    type: str
  kernel_config:
    description:
      - The build configuration of the kernel the profile boots. Default C(/boot/config-<release>) of
        O(kernel_release) (or the running kernel). A kernel built without C(CONFIG_CPU_ISOLATION),
        C(CONFIG_NO_HZ_FULL) or C(CONFIG_RCU_NOCB_CPU) ignores the profile's parameters, and the profile
        is refused there; where the file cannot be read, this is not checked.
    type: path
  kernel_args:
    description:
      - The kernel parameters the same run sets, in the form C(name=value). A C(nosmt) among them
        takes every core's second threads offline at the next boot, and the reserved CPUs must then
        be threads that stay online.
    type: list
    elements: str
    default: []
  reserved_memory:
    description:
      - Memory kubelet reserves for the system on each NUMA node (its C(reservedMemory)), as a mapping
        of NUMA node to quantity; huge pages must fit beside it.
    type: dict
    default: {}
  kubelet_service:
    description:
      - The systemd service kubelet runs under (C(kubelet), C(rke2-agent), C(rke2-server), C(k3s-agent),
        C(k3s)), which the huge page units hold back on a shortfall (RV(files)).
    type: str
    default: kubelet
  sysfs_root:
    description:
      - Folder to read sysfs from. Point it at a recorded tree to plan for another machine.
    type: path
    default: /sys
  procfs_root:
    description:
      - Folder to read C(meminfo), C(cpuinfo) and the kernel release from.
    type: path
    default: /proc
attributes:
  check_mode:
    support: full
    description: Nothing is written in check mode; the plan is the one a real run returns.
  diff_mode:
    support: none
    description: The module changes nothing, so there is nothing to show.
notes:
  - Which thread of a core stays online with SMT off is read from C(/proc/cpuinfo)'s APIC ids (the
    lowest of a core's siblings); where the node shows none, a profile planned together with a
    C(nosmt) is refused, to be planned after the reboot that turns SMT off.
seealso:
  - module: numa.kube.topology_facts
  - module: numa.kube.kubelet_config
  - module: numa.kube.kernel_args
"""

EXAMPLES = r"""
- name: Two reserved CPUs on each NUMA node, the rest isolated, 2 MiB pages on node 1
  numa.kube.node_profile:
    profile:
      reserved_per_node: 2
      hugepages:
        - {size: 2Mi, node: 1, count: 512}
  register: profile

- name: Show what the profile sets
  ansible.builtin.debug:
    msg: >-
      reserved {{ profile.reserved }}, isolated {{ profile.isolated }},
      kernel {{ profile.kernel_args | join(' ') }}

- name: Plan for a machine recorded elsewhere, with its kubelet's version
  numa.kube.node_profile:
    profile:
      reserved: "0,64"
      full_pcpus_only: false
    kubelet_version: v1.32.4
    sysfs_root: /tmp/recorded/sys
    procfs_root: /tmp/recorded/proc
  delegate_to: localhost
"""

RETURN = r"""
reserved:
  description: The reserved CPUs, in kubelet's list form.
  returned: success
  type: str
  sample: "0-1,8-9"
isolated:
  description: The isolated CPUs, in kubelet's list form.
  returned: success
  type: str
  sample: "2-7,10-15"
reserved_by_node:
  description: The reserved CPUs of each NUMA node that holds some (node id as a string).
  returned: success
  type: dict
  sample: {"0": "0,8", "1": "1,9"}
kubelet:
  description: The KubeletConfiguration fields the profile sets.
  returned: success
  type: dict
  sample:
    cpuManagerPolicy: static
    reservedSystemCPUs: "0-1,8-9"
    cpuManagerPolicyOptions: {full-pcpus-only: "true", strict-cpu-reservation: "true"}
kernel_args:
  description: The kernel parameters the profile sets.
  returned: success
  type: list
  elements: str
  sample: ["isolcpus=managed_irq,2-7,10-15", "nohz_full=2-7,10-15", "rcu_nocbs=2-7,10-15", "irqaffinity=0-1,8-9"]
irqbalance_banned_cpus:
  description: The CPUs irqbalance must leave alone (its C(IRQBALANCE_BANNED_CPULIST)).
  returned: success
  type: str
  sample: "2-7,10-15"
cpu_affinity:
  description: The CPUs systemd runs services on (its C(CPUAffinity=)).
  returned: success
  type: str
  sample: "0-1,8-9"
hugepages:
  description:
    - One entry per size and NUMA node with C(node), C(size), C(size_kb), C(count), C(at)
      (C(runtime) or C(boot)) and C(before), the pages of that size the node held there when planned
      (which a rollback puts back).
  returned: success
  type: list
  elements: dict
  sample: [{node: 1, size: 2Mi, size_kb: 2048, count: 512, at: runtime, before: 0}]
hugepages_seconds:
  description: How long each runtime page unit tries before it fails (O(profile.hugepages_seconds)).
  returned: success
  type: int
  sample: 60
irqbalance_active:
  description: Whether irqbalance runs on the node, which then restarts on its drop-in.
  returned: success
  type: bool
  sample: true
files:
  description:
    - Every file the profile puts on the node, each with C(path), C(content) and C(mode), which the
      kubelet role writes with kubelet's configuration inside the rollout envelope.
    - Huge pages, where the profile has some - the allocator script
      C(/usr/local/libexec/numa-kube/hugepages); one oneshot unit
      C(numa-kube-hugepages-node<N>-<size>kB.service) per size and NUMA node that allocates the pages
      (or, for pages the kernel command line allocates at boot, checks them) and fails on a shortfall;
      and a drop-in of O(kubelet_service) that C(Requires=) those units, so kubelet does not start
      short of its pages.
    - systemd's C(CPUAffinity=) (C(/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf)), which
      systemd takes when it reads its configuration again, for itself and the services it starts from
      then on.
    - Where irqbalance's unit is loaded (not masked; asked of the node itself, not for a recorded tree
      under O(sysfs_root)), a drop-in of its service that bans the isolated CPUs
      (C(IRQBALANCE_BANNED_CPULIST) from irqbalance 1.8, else the mask C(IRQBALANCE_BANNED_CPUS)); an
      environment file of irqbalance (C(/etc/default/irqbalance), C(/etc/sysconfig/irqbalance)) that
      sets either itself is refused, as systemd would let it win over the drop-in.
  returned: success
  type: list
  elements: dict
  sample:
    - path: /etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf
      content: "[Manager]\nCPUAffinity=0-1,8-9\n"
      mode: "0644"
smt:
  description: Whether a core runs more than one online thread, and the threads C(nosmt) would keep (null where unknown).
  returned: success
  type: dict
  sample: {"on": true, "primary_threads": "0-7"}
kernel_release:
  description: The kernel release the plan was made for.
  returned: success
  type: str
  sample: 6.1.0-28-amd64
problems:
  description: Every rule the profile breaks on this node, each naming the value, the rule and the fix.
  returned: failure
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils.errors import fail_from
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsError
from ansible_collections.numa.kube.plugins.module_utils.profile.node import irqbalance_on_node, run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="dict", required=True, options=dict(
                reserved=dict(type="str"),
                reserved_per_node=dict(type="int"),
                reserved_nodes=dict(type="list", elements="int"),
                isolated=dict(type="str", default="rest"),
                full_pcpus_only=dict(type="bool", default=True),
                strict_cpu_reservation=dict(type="bool"),
                balance_isolated=dict(type="bool", default=True),
                hugepages=dict(type="list", elements="dict", default=[], options=dict(
                    size=dict(type="str", required=True),
                    node=dict(type="int", required=True),
                    count=dict(type="int", required=True),
                )),
                hugepages_seconds=dict(type="int", default=60),
            )),
            kubelet_version=dict(type="str"),
            kernel_release=dict(type="str"),
            kernel_config=dict(type="path"),
            kernel_args=dict(type="list", elements="str", default=[]),
            reserved_memory=dict(type="dict", default={}),
            kubelet_service=dict(type="str", default="kubelet"),
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    # irqbalance is asked about on the node itself only, not for a recorded tree
    live = os.path.realpath(params["sysfs_root"]) == "/sys"
    params["irqbalance"] = irqbalance_on_node(module.run_command, module.get_bin_path) if live else None
    try:
        result, error = run(params)
    except (SysfsError, ValueError, OSError) as exc:
        module.fail_json(msg="could not read the NUMA topology under %s: %s" % (module.params["sysfs_root"], exc))
    if error is not None:
        fail_from(module, error)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
