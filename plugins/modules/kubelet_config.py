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
    kubelet, and removes state only when asked to (O(remove_files), once kubelet is stopped).
  - Keeps a record of what it changed (O(record)), so that O(state=absent) takes back out only
    that - a drop-in it wrote is removed; in a merged file, each top-level field it changed gets
    back the value it had before numa.kube first changed it (or is removed when it had none), but
    only while it still holds the value numa.kube last wrote there - a field changed since is left
    as it is, with a warning; a file it created (O(create)) loses numa.kube's fields the same way
    and is removed only when nothing else is left in it (records of earlier builds do not hold the
    value written, so every field is then put back, and a note says so); the flag file it gave C(--config-dir) (O(flag_file))
    gets back its previous bytes while it is still byte for byte what numa.kube wrote (and is
    removed when numa.kube created it), otherwise only the C(--config-dir=<folder>) numa.kube added
    is taken out of C(KUBELET_EXTRA_ARGS), every flag added since kept.
  - A record is refused before anything changes when it names a file other than O(path), a
    O(base_path) (with O(dropin=true), not even a O(base_path), which is then only read) or the
    flag file (see O(flag_file)), when it names the drop-in as anything but numa.kube's own file,
    when the flag file's mode it keeps is not three or four octal digits within C(0775), or when
    its folder or file could have been
    written by another user than root (a symbolic link, group- or world-writable, or not owned by
    root when the module runs as root). Without a
    record (a node changed by a release that kept none), O(state=absent) removes the drop-in (its
    name is numa.kube's) or, in a merged file, the NUMA manager fields that differ from kubelet's
    defaults (C(cpuManagerPolicy), C(cpuManagerPolicyOptions), C(memoryManagerPolicy),
    C(reservedMemory), C(topologyManagerPolicy), C(topologyManagerPolicyOptions),
    C(topologyManagerScope)), so that kubelet runs its defaults; the reservations stay.
  - O(state=absent) validates and reports the result as O(state=present) does, then removes the
    record - except where a file kubelet reads keeps NUMA manager values of the node's own (put
    back from the record, or never changed by numa.kube); there it leaves an empty record, so that
    a second O(state=absent) leaves them alone instead of falling back. It creates no record where
    there was none.
author:
  - numa.kube contributors (@numa-kube)
options:
  path:
    description:
      - The kubelet configuration file to change; with O(dropin=true), the drop-in file to write,
        which must end in C(.conf). An absolute path; a directory, a device or a pipe is refused.
    type: path
    required: true
  state:
    description:
      - C(present) writes O(settings); C(absent) takes back out what numa.kube changed (see the
        description), O(settings) is then not used.
    type: str
    choices: [present, absent]
    default: present
  settings:
    description:
      - KubeletConfiguration fields to set, e.g. C(cpuManagerPolicy), C(topologyManagerPolicy),
        C(memoryManagerPolicy), C(reservedMemory). A null value removes the field.
      - Required with O(state=present).
    type: dict
  record:
    description:
      - The file where the module keeps what it changed, for O(state=absent) (JSON, mode 0600, in
        a folder of mode 0700 created when missing). The default is
        C(/var/lib/numa-kube/applied/kubelet.json). An empty string keeps no record (and
        O(state=absent) then uses its fallback).
      - A damaged record, or one of another version, is refused before anything changes.
    type: path
  flag_file:
    description:
      - With O(state=present), kubelet's environment file (C(/etc/default/kubelet)) to write as
        O(flag_file_text) - the C(flag_file) and C(flag_file_text) that M(numa.kube.kubelet_facts)
        returns when kubelet must gain C(--config-dir). Its previous bytes (or that it did not
        exist), the text written and the folder added go into the record, so that O(state=absent)
        takes the C(--config-dir) back out. A new file gets mode 0600, an existing one keeps its
        mode.
      - The only flag file a record may name. When not given, a record may name only
        C(/etc/default/kubelet) or C(/etc/sysconfig/kubelet), where kubeadm nodes keep
        C(KUBELET_EXTRA_ARGS); a record naming another file is refused.
    type: path
  flag_file_text:
    description: What O(flag_file) must hold. Required with O(flag_file) and O(state=present), not used with O(state=absent).
    type: str
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
  extra_files:
    description:
      - With O(state=present), other files that go with the change, written in the same run after
        the configuration when their text or mode differs (a missing folder is made, mode 0755) -
        such as the kubelet role's boot guard (a script and the systemd drop-in that runs it). The
        module does not read them otherwise; a directory or device at a path is refused.
      - Each written file is in RV(files) and RV(extra_written), and in the diff.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file's absolute path.
        type: path
        required: true
      content:
        description: What the file must hold.
        type: str
        required: true
      mode:
        description: Its permissions, an octal text such as C("0700").
        type: str
        required: true
  remove_files:
    description:
      - Files to remove in the same run (not in check mode) - the state files kubelet would refuse
        (RV(remove_cpu_manager_state), RV(remove_memory_manager_state) of a check-mode run) once
        kubelet is stopped and their bytes are saved elsewhere, or, with O(state=absent), a file
        that goes with the change being taken out. A missing file is fine; a directory is refused.
      - Each file there is in RV(files) and RV(removed), and in the diff.
    type: list
    elements: path
    default: []
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
    description:
      - Shows each file before and after - the configuration, and the flag file when it changes
        too (then a list of diffs). The record's own changes are not shown.
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

- name: A kubeadm node whose kubelet gains --config-dir (kubelet_facts said so)
  numa.kube.kubelet_config:
    dropin: true
    path: /etc/kubernetes/kubelet.conf.d/50-numa-kube.conf
    base_path: /var/lib/kubelet/config.yaml
    flag_file: "{{ kubelet_node.flag_file }}"
    flag_file_text: "{{ kubelet_node.flag_file_text }}"
    settings:
      cpuManagerPolicy: static
      kubeReserved: {cpu: 500m}

- name: Take numa.kube's settings back out of config.yaml (see what would change first)
  numa.kube.kubelet_config:
    path: /var/lib/kubelet/config.yaml
    state: absent
  check_mode: true
  diff: true
  register: withdraw

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
    - Whether the file differs from what was asked for (or an O(extra_files) or O(remove_files)
      entry is to be written or removed), so a real run writes it. Unlike C(changed) it survives
      C(changed_when), for a check-mode preflight.
  returned: success
  type: bool
  sample: true
restart_required:
  description:
    - Whether the effective configuration or kubelet's flag file changed, so kubelet must restart
      to use it.
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
files:
  description:
    - Every file the change writes or removes (configuration, flag file, record, O(extra_files),
      O(remove_files)), for the rollout envelope to save first.
  returned: success
  type: list
  elements: str
  sample: [/var/lib/kubelet/config.yaml, /var/lib/numa-kube/applied/kubelet.json]
extra_written:
  description: The O(extra_files) written (in check mode, that would be).
  returned: success
  type: list
  elements: str
  sample: [/usr/local/sbin/numa-kube-clear-stale-memory-state]
removed:
  description: The O(remove_files) that were there and are removed (in check mode, would be).
  returned: success
  type: list
  elements: str
  sample: [/var/lib/kubelet/memory_manager_state]
notes:
  description: With O(state=absent), what is taken back out and what is left, in words.
  returned: success
  type: list
  elements: str
  sample: ["/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf removed (numa.kube wrote it)"]
fallback:
  description:
    - With O(state=absent), the fields removed from a merged file because no record says what
      numa.kube changed there (empty when the record was used or nothing was to remove).
  returned: success
  type: list
  elements: str
  sample: [cpuManagerPolicy, topologyManagerPolicy]
record:
  description:
    - The record as it is after the run; null when there is none (after O(state=absent), an
      empty record where the node keeps NUMA manager values of its own).
  returned: success
  type: dict
  sample: {version: 1, files: {/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf: {kind: owned}}}
backup_files:
  description: The copies made of the flag file or of files O(state=absent) changed or removed.
  returned: changed and backup is true and such a file existed
  type: list
  elements: str
  sample: [/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf.12345.2026-11-22@10:00:00~]
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
from ansible_collections.numa.kube.plugins.module_utils.kubelet.apply import (
    absent,
    check_inputs,
    load_record,
    plan_side_files,
    present,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.withdraw import RECORD_NAME
from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record


# where the record goes when O(record) is not given (tests point it elsewhere)
RECORD = applied_record.record_path(applied_record.DEFAULT_DIR, RECORD_NAME)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            settings=dict(type="dict"),
            dropin=dict(type="bool", default=False),
            format=dict(type="str", default="auto", choices=["auto", "yaml", "json"]),
            base_path=dict(type="list", elements="path"),
            validate=dict(type="bool", default=True),
            create=dict(type="bool", default=False),
            backup=dict(type="bool", default=False),
            record=dict(type="path"),
            flag_file=dict(type="path"),
            flag_file_text=dict(type="str"),
            numa_node_count=dict(type="int"),
            online_cpus=dict(type="str"),
            cpus=dict(type="list", elements="dict"),
            numa_node_memory=dict(type="dict"),
            memory_capacity=dict(type="raw"),
            eviction_distribution=dict(type="str", default="kubeadm", choices=["kubeadm", "rke2", "k3s", "eks"]),
            extra_files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", required=True),
                mode=dict(type="str", required=True),
            )),
            remove_files=dict(type="list", elements="path", default=[]),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    online = check_inputs(module)
    record_file = RECORD if module.params["record"] is None else module.params["record"]
    record = load_record(module, record_file)
    side = plan_side_files(module)
    if module.params["state"] == "absent":
        absent(module, online, record_file, record, side)
    present(module, online, record_file, record, side)


if __name__ == "__main__":
    main()
