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
  - Before writing, validates the resulting configuration - field names (with a suggestion for a
    misspelling), the case-sensitive policy names (C(none)/C(static) for the CPU manager,
    C(None)/C(Static) for the memory manager), topology manager policy, scope and options
    (C(max-allowable-numa-nodes) a whole number >= 8), the static CPU policy's need for reserved
    CPU, C(reservedSystemCPUs) not combined with reserved cgroups, and the shape of
    C(reservedMemory).
  - Reports whether kubelet must restart and whether C(cpu_manager_state) or
    C(memory_manager_state) must be removed before it can start. The module itself never restarts
    kubelet nor removes state.
author:
  - numa.kube contributors (@numa-kube)
options:
  path:
    description:
      - The kubelet configuration file to change; with O(dropin=true), the drop-in file to write,
        which must end in C(.conf).
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
      - Number of NUMA nodes of the machine, to refuse a topology policy kubelet would refuse on
        machines with more than 8 nodes.
    type: int
  online_cpus:
    description:
      - Online CPUs of the machine as a list string (C(0-15)), to check C(reservedSystemCPUs).
    type: str
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils import file_update
from ansible_collections.numa.kube.plugins.module_utils.kubelet_config import KubeletConfigError, plan_change
from ansible_collections.numa.kube.plugins.module_utils.topology import parse_cpu_list


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
            numa_node_memory=dict(type="dict"),
            memory_capacity=dict(type="raw"),
            eviction_distribution=dict(type="str", default="kubeadm", choices=["kubeadm", "rke2", "k3s", "eks"]),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    current = file_update.read_text(path)
    mode = "dropin" if params["dropin"] else "merge"
    if current is None and mode == "merge" and not params["create"]:
        module.fail_json(msg="%s does not exist; point path at the kubelet configuration in use, or set "
                             "create=true to start a new one" % path)
    bases = []
    for base_path in params["base_path"] or []:
        base_text = file_update.read_text(base_path)
        if base_text is None:
            module.fail_json(msg="base_path %s does not exist" % base_path)
        bases.append((base_path, base_text))
    try:
        online = parse_cpu_list(params["online_cpus"]) if params["online_cpus"] else None
        plan = plan_change(path, current, params["settings"], mode, params["format"],
                           numa_node_count=params["numa_node_count"], online_cpus=online, bases=bases,
                           check=params["validate"],
                           machine=dict(numa_node_memory=params["numa_node_memory"],
                                        memory_capacity=params["memory_capacity"],
                                        distribution=params["eviction_distribution"]))
    except KubeletConfigError as exc:
        module.fail_json(msg="kubelet would refuse this configuration: " + " | ".join(exc.problems),
                         problems=exc.problems)
    except ValueError as exc:
        module.fail_json(msg="online_cpus %r is not a CPU list such as 0-15: %s" % (params["online_cpus"], exc))
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
