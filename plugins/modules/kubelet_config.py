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
    as it is, with a warning (records of earlier builds do not hold the value written, so every field
    is then put back, and a note says so); the flag file it gave C(--config-dir) (O(flag_file))
    gets back its previous bytes while it is still byte for byte what numa.kube wrote (and is
    removed when numa.kube created it), otherwise only the C(--config-dir=<folder>) numa.kube added
    is taken out of C(KUBELET_EXTRA_ARGS), every flag added since kept.
  - A record is refused before anything changes when it names a file other than O(path), a
    O(base_path) or the flag file (see O(flag_file)), or when its folder or file could have been
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

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node import file_update
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import (
    EMPTY_RECORD,
    RECORD_NAME,
    KubeletConfigError,
    check_record,
    plan_change,
    plan_withdraw,
    record_present,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import (
    LAYOUTS,
    KubeletNodeError,
    config_dir_from_flags,
    with_config_dir,
)
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import MAX_CPUS, parse_cpu_list


# Linux's MAX_NUMNODES at its largest (NODES_SHIFT 10)
MAX_NUMA_NODES = 1024
# where the record goes when O(record) is not given (tests point it elsewhere)
RECORD = applied_record.record_path(applied_record.DEFAULT_DIR, RECORD_NAME)
NEW_FLAG_FILE_MODE = 0o600


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


def own_flag_files(params):
    """The flag files a record may name: the module's flag_file, or else every file kubelet's extra
    flags live in (KUBELET_EXTRA_ARGS, the only place numa.kube adds --config-dir)."""
    if params["flag_file"]:
        return [params["flag_file"]]
    return sorted(set(name for layout in LAYOUTS.values() for name in layout.get("extra_args_files", [])))


def load_record(module, path):
    """The kubelet record at ``path`` (None when there is none or records are off); a damaged one,
    one in a folder others could write, or one naming files this run does not own stops the module
    before anything changes."""
    if not path:
        return None
    params = module.params
    try:
        return check_record(applied_record.load(path), path, own_files=[params["path"]] + list(params["base_path"] or []),
                            own_flag_files=own_flag_files(params))
    except applied_record.RecordError as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)


def flag_config_dir(params):
    """The folder the flag file's new text gives kubelet as --config-dir: the drop-in's."""
    if params["dropin"]:
        return os.path.dirname(params["path"])
    return config_dir_from_flags([params["flag_file_text"]])


def completed_flag_record(record, path, dropin):
    """A record of an earlier build names no text numa.kube wrote in the flag file: work it out from
    the previous text, as numa.kube wrote it then (previous text with --config-dir added). Returns
    (record, note or None)."""
    flag = (record or {}).get("flag_file")
    if not flag or flag.get("after") is not None:
        return record, None
    config_dir = flag.get("config_dir") or (os.path.dirname(path) if dropin else None)
    if not config_dir:
        return record, None
    try:
        written = with_config_dir(flag["text"], config_dir)
    except KubeletNodeError:
        return record, None
    record = dict(record, flag_file=dict(flag, after=written, config_dir=config_dir))
    return record, ("%s: the record (from an earlier build) holds not the text numa.kube wrote; taken as the previous "
                    "text with --config-dir=%s added" % (flag["path"], config_dir))


def replace_file(module, path, text, mode=None, backup=False, result=None):
    """Write ``text`` to ``path`` through a temporary file in its folder; an existing file keeps its
    owner, mode and context, a new one gets ``mode``."""
    if backup and os.path.exists(path) and result is not None:
        result.setdefault("backup_files", []).append(module.backup_local(path))
    folder = os.path.dirname(path)
    temp = os.path.join(folder, ".%s.numa-kube.tmp" % os.path.basename(path))
    with open(temp, "wb") as handle:
        handle.write(to_bytes(text))
    existed = os.path.exists(path)
    module.atomic_move(temp, path, unsafe_writes=module.params.get("unsafe_writes", False))
    if mode is not None or not existed:
        os.chmod(path, int(mode, 8) if mode else NEW_FLAG_FILE_MODE)


def remove_file(module, path, backup=False, result=None):
    if not os.path.lexists(path):
        return
    if backup and result is not None:
        result.setdefault("backup_files", []).append(module.backup_local(path))
    os.unlink(path)


def removal_diff(path, before):
    return dict(before=before or "", after="", before_header=path, after_header="/dev/null")


def check_inputs(module):
    params = module.params
    problems = [p for p in [path_problem("path", params["path"])] + [
        path_problem("base_path", base, must_exist=True) for base in params["base_path"] or []] if p]
    if params["state"] == "present" and params["settings"] is None:
        problems.append("settings is required with state=present: give the KubeletConfiguration fields to set")
    if params["state"] == "present" and (params["flag_file"] is None) != (params["flag_file_text"] is None):
        problems.append("flag_file and flag_file_text go together with state=present: give both (the flag file and "
                        "what it must hold, from numa.kube.kubelet_facts) or neither")
    if params["flag_file"] is not None and params["state"] == "present":
        problem = path_problem("flag_file", params["flag_file"])
        if problem:
            problems.append(problem.replace("the kubelet configuration file", "kubelet's environment file"))
    if params["record"] and not os.path.isabs(params["record"]):
        problems.append("record %r is relative: give an absolute path, or \"\" to keep no record" % params["record"])
    elif params["record"] and os.path.isdir(params["record"]):
        problems.append("record %s is a directory: give the path of the record file (%s)"
                        % (params["record"], os.path.join(params["record"], RECORD_NAME)))
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
    if params["extra_files"] and params["state"] == "absent":
        problems.append("extra_files goes with state=present only: leave it out, or list the files in remove_files "
                        "to take them out")
    problems.extend(file_update.side_file_problems(params["extra_files"], params["remove_files"]))
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    return online


def found_at(path):
    """What is at ``path``, as file_update.plan_side_files asks: None, or (kind, text, mode bits)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", None, None)
    if stat.S_ISDIR(info.st_mode):
        return ("directory", None, None)
    if not stat.S_ISREG(info.st_mode):
        return ("device, socket or pipe", None, None)
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeError:
        text = None
    return ("file", text, stat.S_IMODE(info.st_mode))


def plan_side_files(module):
    """The writes and removals of O(extra_files) and O(remove_files); a path that cannot be written
    or removed stops the module before anything changes."""
    params = module.params
    writes, removals, problems = file_update.plan_side_files(params["extra_files"], params["remove_files"], found_at)
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    return writes, removals


def side_files(module, result, side):
    """Write O(extra_files) and remove O(remove_files) as planned (not in check mode), and say so in
    ``result``: changed, differs, files, diff, extra_written, removed."""
    writes, removals = side
    result["extra_written"] = [path for path, _before, _text, _mode in writes]
    result["removed"] = [path for path, _before in removals]
    done = result["removed"] + result["extra_written"]
    if done:
        result["changed"] = result["differs"] = True
        result["files"] = result["files"] + [path for path in done if path not in result["files"]]
    if module._diff and done:
        diffs = result.get("diff")
        diffs = [] if diffs is None else (list(diffs) if isinstance(diffs, list) else [diffs])
        diffs.extend(removal_diff(path, before) for path, before in removals)
        diffs.extend(file_update.diff(path, before, text) for path, before, text, _mode in writes)
        result["diff"] = diffs if len(diffs) > 1 else diffs[0]
    if module.check_mode:
        return
    for path, _before in removals:
        remove_file(module, path)
    for path, _before, text, mode in writes:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        replace_file(module, path, text, mode="%04o" % mode)


def machine_of(params):
    return dict(numa_node_memory=params["numa_node_memory"], memory_capacity=params["memory_capacity"],
                distribution=params["eviction_distribution"], cpus=params["cpus"])


def refused(module, exc):
    module.fail_json(msg="kubelet would refuse this configuration: " + " | ".join(exc.problems),
                     problems=exc.problems)


def present(module, online, record_file, record, side):
    params = module.params
    path = params["path"]
    current = read(module, "path", path)
    mode = "dropin" if params["dropin"] else "merge"
    if current is None and mode == "merge" and not params["create"]:
        module.fail_json(msg="%s does not exist; point path at the kubelet configuration in use, or set "
                             "create=true to start a new one" % path)
    bases = [(base, read(module, "base_path", base)) for base in params["base_path"] or []]
    try:
        plan = plan_change(path, current, params["settings"], mode, params["format"],
                           numa_node_count=params["numa_node_count"], online_cpus=online, bases=bases,
                           check=params["validate"], machine=machine_of(params))
    except KubeletConfigError as exc:
        refused(module, exc)
    flag_file = params["flag_file"]
    flag_before = read(module, "flag_file", flag_file) if flag_file else None
    flag_changes = bool(flag_file) and flag_before != params["flag_file_text"]
    new_record = record
    if record_file and (plan["changed"] or flag_changes):
        flag = None
        if flag_changes:
            flag_mode = "%04o" % stat.S_IMODE(os.stat(flag_file).st_mode) if flag_before is not None else None
            flag = (flag_file, flag_before, flag_mode, params["flag_file_text"], flag_config_dir(params))
        new_record = record_present(record, path, mode, plan["before"] if mode == "merge" else {},
                                    plan["config"] if mode == "merge" else {},
                                    created=current is None, flag=flag)
    record_text = read(module, "record", record_file) if record_file else None
    record_changes = new_record is not record and applied_record.render(new_record) != record_text
    result = dict(
        changed=plan["changed"] or flag_changes or record_changes,
        differs=plan["changed"] or flag_changes or record_changes,
        config=plan["config"],
        format=plan["format"],
        restart_required=plan["restart_required"] or flag_changes,
        remove_cpu_manager_state=plan["remove_cpu_manager_state"],
        remove_memory_manager_state=plan["remove_memory_manager_state"],
        files=[p for p, changes in ((path, plan["changed"]), (flag_file, flag_changes),
                                    (record_file, record_changes)) if changes],
        notes=[], fallback=[], record=new_record,
    )
    if module._diff:
        diffs = [file_update.diff(path, current, plan["text"])]
        if flag_changes:
            diffs.append(file_update.diff(flag_file, flag_before, params["flag_file_text"]))
        result["diff"] = diffs if len(diffs) > 1 else diffs[0]
    if not module.check_mode:
        # the record first: it never lags behind what it lets 'absent' undo
        if record_changes:
            applied_record.write(record_file, new_record)
        if flag_changes:
            replace_file(module, flag_file, params["flag_file_text"], backup=params["backup"], result=result)
    # a drop-in may be the first file of its folder (kubelet's --config-dir on a kubeadm node)
    written = file_update.apply(module, path, current, plan["text"], plan["changed"], result,
                                backup=params["backup"], make_dirs=params["dropin"])
    result["changed"] = written or flag_changes or record_changes
    if result["record"] is not None:
        result["record"] = dict(result["record"], version=applied_record.VERSION)
    side_files(module, result, side)
    module.exit_json(**result)


def absent(module, online, record_file, record, side):
    params = module.params
    path = params["path"]
    mode = "dropin" if params["dropin"] else "merge"
    record, record_note = completed_flag_record(record, path, params["dropin"])
    involved = [path] + list(params["base_path"] or []) + sorted((record or {}).get("files", {}))
    if record and record.get("flag_file"):
        involved.append(record["flag_file"]["path"])
    texts = {}
    for where in involved:
        problem = path_problem("file", where)
        if problem and where != path:
            module.fail_json(msg="cannot take numa.kube's change back out of %s: %s" % (where, problem))
        texts[where] = read(module, "file", where)
    try:
        plan = plan_withdraw(path, mode, texts, record, params["format"], params["base_path"] or [],
                             check=params["validate"], numa_node_count=params["numa_node_count"],
                             online_cpus=online, machine=machine_of(params))
    except KubeletConfigError as exc:
        refused(module, exc)
    record_text = read(module, "record", record_file) if record_file else None
    # a record there was goes, or is emptied where the node keeps NUMA values of its own (see
    # EMPTY_RECORD); none is made where there was none
    keep = record is not None and plan["keep_empty_record"]
    record_changes = record is not None and (applied_record.render(EMPTY_RECORD) != record_text if keep else True)
    writes = plan["writes"]
    files = sorted(writes) + ([record_file] if record_changes else [])
    result = dict(
        changed=bool(files), differs=bool(files),
        config=plan["config"],
        restart_required=plan["restart_required"],
        remove_cpu_manager_state=plan["remove_cpu_manager_state"],
        remove_memory_manager_state=plan["remove_memory_manager_state"],
        files=files, notes=plan["notes"], fallback=plan["fallback"],
        record=dict(EMPTY_RECORD, version=applied_record.VERSION) if keep else None,
    )
    if record is None and record_file:
        why = "the drop-in is numa.kube's by its name" if mode == "dropin" else "fallback for merged files"
        result["notes"] = ["no record at %s: %s" % (record_file, why)] + result["notes"]
    if record_note:
        result["notes"] = [record_note] + result["notes"]
    for warning in plan["warnings"]:
        module.warn(warning)
    if module._diff:
        diffs = [removal_diff(where, texts[where]) if text is None else file_update.diff(where, texts[where], text)
                 for where, text in sorted(writes.items())]
        if len(diffs) == 1:
            result["diff"] = diffs[0]
        elif diffs:
            result["diff"] = diffs
    if not module.check_mode:
        flag_path = (record or {}).get("flag_file", {}) or {}
        for where, text in sorted(writes.items()):
            if text is None:
                remove_file(module, where, backup=params["backup"], result=result)
            else:
                replace_file(module, where, text, mode=plan["flag_mode"] if where == flag_path.get("path") else None,
                             backup=params["backup"], result=result)
        # the record last: a run cut short before here still knows what to undo
        if record_changes and keep:
            applied_record.write(record_file, EMPTY_RECORD)
        elif record_changes:
            applied_record.remove(record_file)
    side_files(module, result, side)
    module.exit_json(**result)


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
