#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_config
short_description: Merge NUMA settings into a kubelet configuration, or write a drop-in
version_added: "0.1.0"
description:
  - Merges KubeletConfiguration settings into an existing kubelet configuration file (YAML, such
    as kubeadm's C(/var/lib/kubelet/config.yaml), or JSON, such as EKS's C(kubelet-config.json)),
    keeping every other key; or writes a drop-in file for kubelet's C(--config-dir).
  - Merging follows JSON merge patch, as kubelet does for drop-ins - mappings merge key by key,
    lists and scalars replace, and a null value removes a key.
  - Before writing, validates the resulting configuration as kubelet does when it starts - field
    names (with a suggestion for a misspelling); every value against its field's type (C(maxPods)
    is an int32, durations are Go durations); feature gates (known, not locked, dependencies
    enabled) and the values that depend on them (C(memoryReservationPolicy), graceful shutdown,
    swap...); kubelet's range and consistency rules (ports, image GC thresholds,
    C(enforceNodeAllocatable)...); C(kubeReserved) and C(systemReserved) (no negative amounts); every
    hard and soft eviction threshold, grace period and minimum reclaim; the case-sensitive policy
    names (C(none)/C(static) for the CPU manager, C(None)/C(Static) for the memory manager), the
    Topology Manager's policy, scope and options (C(max-allowable-numa-nodes) a whole number >= 8),
    the CPU Manager's options and the gates they need, the static CPU policy's reserved CPUs,
    C(reservedSystemCPUs), and C(reservedMemory) against the sums kubelet demands.
  - Reports whether kubelet must restart and whether C(cpu_manager_state) or
    C(memory_manager_state) must be removed before it can start. The module itself never restarts
    kubelet nor removes state.
author:
  - numa.kube contributors (@numa-kube)
options:
  path:
    description:
      - The kubelet configuration file to change; with O(dropin=true), the drop-in file to write,
        which must end in C(.conf). An absolute path; a directory, a device or a pipe is refused.
    type: path
    required: true
  settings:
    description:
      - KubeletConfiguration fields to set, e.g. C(cpuManagerPolicy), C(topologyManagerPolicy),
        C(memoryManagerPolicy), C(reservedMemory). A null value removes the field.
    type: dict
    required: true
  dropin:
    description:
      - False merges O(settings) into O(path), keeping every other key. True makes O(path) a
        C(--config-dir) drop-in holding exactly O(settings) with C(apiVersion) and C(kind).
    type: bool
    default: false
  format:
    description:
      - File format. C(auto) decides by the file name, then by the content.
    type: str
    choices: [auto, yaml, json]
    default: auto
  base_path:
    description:
      - With O(dropin=true), the files kubelet reads before the drop-in (the main configuration,
        then earlier drop-ins), merged in the order given; read to validate the effective
        configuration and to tell which state files become stale.
    type: list
    elements: path
  validate:
    description:
      - Check the resulting configuration against kubelet's rules before writing. Turn off only to
        put a configuration kubelet refuses onto a test node on purpose.
    type: bool
    default: true
  create:
    description:
      - Without O(dropin), create O(path) when it does not exist instead of failing.
    type: bool
    default: false
  backup:
    description:
      - Keep a timestamped copy of the previous file next to it.
    type: bool
    default: false
  numa_node_count:
    description:
      - Number of NUMA nodes of the machine (1 to 1024), to refuse a topology policy kubelet would
        refuse on machines with more than 8 nodes.
    type: int
  online_cpus:
    description:
      - Online CPUs of the machine as a list string (C(0-15)), to check C(reservedSystemCPUs) and
        the number of CPUs the static CPU policy reserves. CPU ids stop at 8191.
    type: str
  cpus:
    description:
      - The machine's CPUs as M(numa.kube.topology_facts) reports them (C(numa_topology.cpus) - each
        with C(id), C(core), C(socket), C(numa_node)), to check what kubelet's CPU Manager refuses
        on this machine only - C(align-by-socket) where sockets outnumber the NUMA nodes with CPUs,
        and more reserved CPUs than the machine has. Without O(online_cpus), the online CPUs are
        these.
    type: list
    elements: dict
  eviction_distribution:
    description:
      - Whose default hard eviction thresholds apply when the configuration sets none
        (C(kubelet_node.eviction_distribution) from M(numa.kube.kubelet_facts)).
      - With O(numa_node_memory), a C(Static) memory manager's C(reservedMemory) in the resulting
        configuration is checked as M(numa.kube.reserved_memory) checks it, against the
        C(kubeReserved), C(systemReserved) and C(evictionHard) of that same configuration, however
        they got there (settings, extra settings, the node's own file).
    type: str
    default: kubeadm
    choices: [kubeadm, rke2, k3s, eks]
extends_documentation_fragment:
  - ansible.builtin.files
  - numa.kube.node_memory
attributes:
  check_mode:
    support: full
    description: Nothing is written in check mode; the results are those a real run would give.
  diff_mode:
    support: full
    description: Shows the file before and after, in the file's own format.
seealso:
  - module: numa.kube.reserved_memory
  - name: KubeletConfiguration reference
    description: Every field and its meaning.
    link: https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/
"""

EXAMPLES = r"""
- name: Static CPU and memory managers on a kubeadm node
  numa.kube.kubelet_config:
    path: /var/lib/kubelet/config.yaml
    backup: true
    settings:
      cpuManagerPolicy: static
      topologyManagerPolicy: single-numa-node
      topologyManagerScope: pod
      memoryManagerPolicy: Static
      kubeReserved: {cpu: 500m, memory: 1Gi}
      reservedMemory: "{{ reservation.reserved_memory }}"
  register: kubelet_change

- name: The same as a drop-in for kubelet --config-dir
  numa.kube.kubelet_config:
    dropin: true
    path: /etc/kubernetes/kubelet.conf.d/50-numa.conf
    base_path: /var/lib/kubelet/config.yaml
    settings:
      cpuManagerPolicy: static
      kubeReserved: {cpu: 500m}

- name: EKS AL2 - keep everything else in kubelet-config.json, drop reservedSystemCPUs
  numa.kube.kubelet_config:
    path: /etc/kubernetes/kubelet/kubelet-config.json
    settings:
      topologyManagerPolicy: restricted
      reservedSystemCPUs: null
"""

RETURN = r"""
config:
  description: The effective configuration after the change (base plus drop-in in drop-in mode).
  returned: success
  type: dict
  sample: {cpuManagerPolicy: static, memoryManagerPolicy: Static}
format:
  description: The format the file was read and written in.
  returned: success
  type: str
  sample: yaml
differs:
  description:
    - Whether the file differs from what was asked for, so a real run writes it. Unlike
      C(changed) it survives C(changed_when), for a check-mode preflight.
  returned: success
  type: bool
  sample: true
restart_required:
  description: Whether the effective configuration changed, so kubelet must restart to use it.
  returned: success
  type: bool
  sample: true
remove_cpu_manager_state:
  description:
    - Whether C(/var/lib/kubelet/cpu_manager_state) must be removed (drain first) before kubelet
      starts - the CPU manager policy changed, or under the static policy its options or reserved
      CPUs did.
  returned: success
  type: bool
  sample: true
remove_memory_manager_state:
  description:
    - Whether C(/var/lib/kubelet/memory_manager_state) must be removed - the memory manager policy
      changed, or under C(Static) the reservation did.
  returned: success
  type: bool
  sample: false
backup_file:
  description: The copy made of the previous file.
  returned: changed and backup is true and the file existed
  type: str
  sample: /var/lib/kubelet/config.yaml.12345.2026-11-22@10:00:00~
problems:
  description: On failure, every problem found, one per item.
  returned: failure
  type: list
  elements: str
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils import file_update
from ansible_collections.numa.kube.plugins.module_utils.kubelet_config import KubeletConfigError, plan_change
from ansible_collections.numa.kube.plugins.module_utils.topology import MAX_CPUS, parse_cpu_list


# Linux's MAX_NUMNODES at its largest (NODES_SHIFT 10)
MAX_NUMA_NODES = 1024


def path_problem(what, path, must_exist=False):
    """Why ``path`` cannot be the kubelet configuration file to read or write, or None."""
    if not path:
        return "%s is empty: give the absolute path of the kubelet configuration file" % what
    if not os.path.isabs(path):
        return ("%s %r is relative: give an absolute path (a relative one would depend on the directory the module "
                "runs in)" % (what, path))
    if os.path.isdir(path):
        return ("%s %s is a directory: point it at the kubelet configuration file itself (for a drop-in, a file "
                "ending in .conf inside kubelet's --config-dir)" % (what, path))
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        return "%s %s is not a regular file (a device, socket or pipe): point it at the kubelet configuration file" % (
            what, path)
    if must_exist and not os.path.exists(path):
        return "%s %s does not exist" % (what, path)
    return None


def read(module, what, path):
    try:
        return file_update.read_text(path)
    except (IOError, OSError, UnicodeError) as exc:
        module.fail_json(msg="%s %s cannot be read: %s" % (what, path, exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            settings=dict(type="dict", required=True),
            dropin=dict(type="bool", default=False),
            format=dict(type="str", default="auto", choices=["auto", "yaml", "json"]),
            base_path=dict(type="list", elements="path"),
            validate=dict(type="bool", default=True),
            create=dict(type="bool", default=False),
            backup=dict(type="bool", default=False),
            numa_node_count=dict(type="int"),
            online_cpus=dict(type="str"),
            cpus=dict(type="list", elements="dict"),
            numa_node_memory=dict(type="dict"),
            memory_capacity=dict(type="raw"),
            eviction_distribution=dict(type="str", default="kubeadm", choices=["kubeadm", "rke2", "k3s", "eks"]),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    problems = [p for p in [path_problem("path", path)] + [
        path_problem("base_path", base, must_exist=True) for base in params["base_path"] or []] if p]
    if params["numa_node_count"] is not None and not 1 <= params["numa_node_count"] <= MAX_NUMA_NODES:
        problems.append("numa_node_count %d is not a number of NUMA nodes (1 to %d)"
                        % (params["numa_node_count"], MAX_NUMA_NODES))
    online = None
    if params["online_cpus"]:
        try:
            online = parse_cpu_list(params["online_cpus"])
        except ValueError as exc:
            problems.append("online_cpus %r is not a CPU list such as 0-15: %s" % (params["online_cpus"], exc))
    for index, cpu in enumerate(params["cpus"] or []):
        number = cpu.get("id")
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < MAX_CPUS:
            problems.append("cpus[%d]: id %r is not a CPU id (0 to %d); pass numa_topology.cpus from "
                            "numa.kube.topology_facts" % (index, number, MAX_CPUS - 1))
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    current = read(module, "path", path)
    mode = "dropin" if params["dropin"] else "merge"
    if current is None and mode == "merge" and not params["create"]:
        module.fail_json(msg="%s does not exist; point path at the kubelet configuration in use, or set "
                             "create=true to start a new one" % path)
    bases = [(base, read(module, "base_path", base)) for base in params["base_path"] or []]
    try:
        plan = plan_change(path, current, params["settings"], mode, params["format"],
                           numa_node_count=params["numa_node_count"], online_cpus=online, bases=bases,
                           check=params["validate"],
                           machine=dict(numa_node_memory=params["numa_node_memory"],
                                        memory_capacity=params["memory_capacity"],
                                        distribution=params["eviction_distribution"], cpus=params["cpus"]))
    except KubeletConfigError as exc:
        module.fail_json(msg="kubelet would refuse this configuration: " + " | ".join(exc.problems),
                         problems=exc.problems)
    result = dict(
        changed=plan["changed"],
        differs=plan["changed"],
        config=plan["config"],
        format=plan["format"],
        restart_required=plan["restart_required"],
        remove_cpu_manager_state=plan["remove_cpu_manager_state"],
        remove_memory_manager_state=plan["remove_memory_manager_state"],
    )
    if module._diff:
        result["diff"] = file_update.diff(path, current, plan["text"])
    # a drop-in may be the first file of its folder (kubelet's --config-dir on a kubeadm node)
    result["changed"] = file_update.apply(module, path, current, plan["text"], plan["changed"], result,
                                          backup=params["backup"], make_dirs=params["dropin"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
