#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Ensure kernel command-line parameters are present or absent for the next boot
version_added: "0.1.0"
description:
  - Ensures kernel parameters such as C(mem_sampling_on) and C(numa_icon=enable) (openEuler NUMA-Fast)
    are present, or absent, on the kernel command line of future boots.
  - With grubby (RHEL family, openEuler, Fedora) every installed kernel is updated through
    C(grubby --update-kernel=ALL), which also carries to kernels installed later.
  - Elsewhere (Debian, Ubuntu) the C(GRUB_CMDLINE_LINUX) line of C(/etc/default/grub) is edited,
    keeping the rest of the file; the caller then regenerates grub.cfg (C(grub_update_required)).
    grub.cfg itself is never edited.
  - Compares with C(/proc/cmdline) and reports whether a reboot is needed for the running kernel to
    have the wanted state. Never reboots.
  - Refuses, before anything is read or written, a parameter outside a strict grammar (the grub
    defaults file is shell), and any parameter that can take a node away - C(init), C(rdinit),
    C(root), C(noinitrd) and the options that find the root file system (C(rd.lvm), C(rd.luks),
    C(rd.md), C(rd.dm) and theirs), C(mem), C(memmap), C(maxcpus), C(nr_cpus), C(possible_cpus),
    C(nosmp), C(panic), module blacklists, rescue and emergency targets, C(systemd.mask),
    C(systemd.wants), C(systemd.run), C(systemd.volatile), interface naming and boot-time network
    (C(net.ifnames), C(biosdevname), C(ifname), C(ip)), the cgroup layout (C(cgroup_disable),
    C(cgroup_no_v1), C(systemd.unified_cgroup_hierarchy)), C(systemd.debug_shell) and
    C(rd.systemd.debug_shell) - whether it is to be set or removed, unless its name is in O(allow).
    Names are compared as the kernel and systemd compare them - exactly and case-sensitively, with
    C(-) and C(_) alike (C(nr-cpus) is C(nr_cpus)).
  - Refuses to replace or remove a name that occurs more than once on the current command line
    (C(hugepagesz=1G hugepages=16 hugepagesz=2M hugepages=512), read in order by the kernel), and a
    name given more than once with different values in O(present); such parameters are edited by
    hand.
  - Returns in RV(files) every file the change writes (in check mode too), so that a caller can
    record them before the change and put them back after a failure; grub.cfg, which the caller
    regenerates, is not among them for O(method=grub_default).
  - Keeps in O(record) what numa.kube changed - the parameters it added (not on the command line
    before) and those it removed (in the form they had) - merged with the record of earlier runs. A
    parameter the node had already is never recorded as added; one numa.kube adds and later removes
    again is forgotten. The record is written with the boot configuration, only when that changes.
  - O(state=absent) takes numa.kube back out as the record says - removes each parameter it added,
    only while it still has the form numa.kube set, and puts back each one it removed, unless the
    command line has that name again - then removes the record. Whatever has changed since is left
    as it is, with a warning. Without a record there is nothing to take out; nothing is read or
    written then, and RV(record_found) is false.
  - A damaged record (not JSON, another version, fields of the wrong kind), one made for another
    place than O(method), O(grub_default_path) and O(variable) say, or one whose folder or file
    another user than root could have written (a symbolic link, group- or world-writable, or not
    owned by root when the module runs as root) is refused before anything is written, naming the
    file, what is wrong and what to do.
author:
  - numa.kube contributors (@numa-kube)
options:
  state:
    description:
      - C(present) ensures O(present) and O(absent). C(absent) takes out what numa.kube set, as
        O(record) says, and takes neither list.
    type: str
    choices: [present, absent]
    default: present
  present:
    description: Parameters that must be on the command line (C(name) or C(name=value)).
    type: list
    elements: str
    default: []
  absent:
    description:
      - Parameters that must not be. C(name) removes it with any value; C(name=value) only that pair.
    type: list
    elements: str
    default: []
  record:
    description:
      - The JSON file that keeps what numa.kube added and removed (C(version) 1, C(method), C(path)
        and C(variable) of the grub defaults, C(added), C(removed)). Its folder is created with mode
        0700 when missing.
    type: path
    default: /var/lib/numa-kube/applied/kernel.json
  allow:
    description:
      - Names of parameters that can take a node away (see the description) which this change may set
        or remove anyway, such as C(maxcpus). Names only, without C(=value); C(-) and C(_) are alike.
      - C(isolcpus), C(nohz_full), C(rcu_nocbs), C(hugepages) and C(console) need no allowing.
    type: list
    elements: str
    default: []
  method:
    description: C(grubby) or C(grub_default); C(auto) uses grubby where it is installed.
    type: str
    choices: [auto, grubby, grub_default]
    default: auto
  grub_default_path:
    description:
      - The grub defaults file, for O(method=grub_default). An absolute path without C(.) or C(..)
        parts; when it exists, a regular file (not a symbolic link, which the atomic replacement
        would turn into a copy).
    type: path
    default: /etc/default/grub
  variable:
    description:
      - The variable of the grub defaults file that holds the parameters. A shell variable name that
        starts with C(GRUB_CMDLINE_) (the file is sourced as shell by grub's tools).
    type: str
    default: GRUB_CMDLINE_LINUX
  proc_cmdline_path:
    description: Where to read the running kernel's command line.
    type: path
    default: /proc/cmdline
  backup:
    description: Keep a timestamped copy of the grub defaults file before changing it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
    description: Nothing is written and grubby is only asked for information in check mode.
  diff_mode:
    support: full
    description: Shows the grub defaults file, or the kernels' arguments, before and after.
seealso:
  - name: linux-system-roles bootloader
    description: A role that manages boot entries with grubby.
    link: https://github.com/linux-system-roles/bootloader
"""

EXAMPLES = r"""
- name: openEuler NUMA-Fast parameters
  numa.kube.kernel_cmdline:
    present: [mem_sampling_on, numa_icon=enable]
  register: cmdline

- name: Regenerate grub.cfg on Debian
  ansible.builtin.command: update-grub
  when: cmdline.grub_update_required
  changed_when: true

- name: Take a parameter away again
  numa.kube.kernel_cmdline:
    absent: [numa_icon]

- name: Limit the CPUs the kernel brings up, which is refused unless allowed
  numa.kube.kernel_cmdline:
    present: [maxcpus=16]
    allow: [maxcpus]

- name: Take out what numa.kube set, and put back what it removed
  numa.kube.kernel_cmdline:
    state: absent
  register: withdrawn   # withdrawn.removed, withdrawn.restored, withdrawn.left

- name: List the files a change would write, to record them first
  numa.kube.kernel_cmdline:
    present: [numa_balancing=disable]
  check_mode: true
  register: plan   # plan.files
"""

RETURN = r"""
method:
  description: How the parameters were changed.
  returned: success
  type: str
  sample: grub_default
params:
  description: For grub_default, the parameters of the variable after the change.
  returned: success
  type: list
  elements: str
  sample: [quiet, mem_sampling_on, numa_icon=enable]
files:
  description:
    - The files the change writes (real paths, symbolic links followed), also in check mode. For
      grub_default the grub defaults file; for grubby the BLS entries, C(/etc/kernel/cmdline), grub's
      environment block and defaults, and a grub.cfg, as present on the host (C(/etc/kernel/cmdline),
      C(/boot/grub2/grubenv), C(/boot/grub2/grub.cfg) and C(/etc/default/grub) are listed whether they
      exist or not).
  returned: success
  type: list
  elements: str
  sample: [/etc/default/grub]
kernels:
  description: For grubby, each kernel with its arguments after the change.
  returned: when method is grubby
  type: list
  elements: dict
  sample: [{kernel: /boot/vmlinuz-6.6.0, args: [ro, mem_sampling_on]}]
grub_update_required:
  description: Whether grub.cfg must be regenerated (update-grub or grub2-mkconfig) - grub_default only.
  returned: success
  type: bool
  sample: true
active:
  description: Whether the running kernel's command line already has the wanted state.
  returned: success
  type: bool
  sample: false
differs:
  description:
    - Whether the boot configuration differs from the wanted one, that is whether a run writes (also
      in check mode, and unaffected by a task's C(changed_when)).
  returned: success
  type: bool
  sample: true
reboot_required:
  description: Whether a reboot is needed for the running kernel to have the wanted state.
  returned: success
  type: bool
  sample: true
record:
  description: The record file (O(record)).
  returned: success
  type: str
  sample: /var/lib/numa-kube/applied/kernel.json
record_found:
  description: Whether the record existed when the module started.
  returned: success
  type: bool
  sample: true
added:
  description: The parameters numa.kube has added, as the record keeps them after this run (empty with O(state=absent)).
  returned: success
  type: list
  elements: str
  sample: [mem_sampling_on, numa_icon=enable]
removed:
  description:
    - With O(state=present), the parameters numa.kube has removed, in their previous form, as the record
      keeps them after this run. With O(state=absent), the parameters this run takes out.
  returned: success
  type: list
  elements: str
  sample: [numa_icon=enable]
restored:
  description: With O(state=absent), the parameters this run puts back.
  returned: success
  type: list
  elements: str
  sample: [numa_balancing=enable]
left:
  description: With O(state=absent), each parameter left as it is, with why (also given as warnings).
  returned: success
  type: list
  elements: str
msg:
  description: What was done, in a sentence.
  returned: success
  type: str
problems:
  description: On failure, every problem found (each names the value, the rule and the fix).
  returned: failure
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.errors import fail_with_problems as fail

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node import file_update
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_cmdline import (
    KernelCmdlineError,
    apply_params,
    change_of,
    check_allow,
    check_dangerous,
    check_grub_default_path,
    check_params,
    check_record,
    check_record_where,
    check_repeated_wanted,
    check_variable,
    grubby_files,
    merge_record,
    parse_grubby_info,
    plan_grub_default,
    plan_withdraw,
    read_grub_variable,
    satisfied,
    where_of,
)

RECORD = "/var/lib/numa-kube/applied/kernel.json"


def _grubby_kernels(module):
    grubby = module.get_bin_path("grubby", required=True)
    rc, out, err = module.run_command([grubby, "--info=ALL"])
    if rc != 0:
        module.fail_json(msg="grubby --info=ALL failed: %s" % (err or out))
    kernels = parse_grubby_info(out)
    if not kernels:
        module.fail_json(msg="grubby lists no kernels; is this host booted through a grubby-managed loader?")
    return grubby, kernels


def _grubby(module, present, absent, result, kernels=None):
    """Ensure ``present`` and ``absent`` on every kernel grubby knows; returns (changed, before, after)
    with the arguments of each kernel."""
    grubby, found = _grubby_kernels(module)
    kernels = kernels or found
    try:
        after = [dict(kernel=k["kernel"], args=apply_params(k["args"], present, absent,
                                                            where="the arguments grubby keeps for %s" % k["kernel"]))
                 for k in kernels]
    except KernelCmdlineError as exc:
        fail(module, exc.problems)
    changed = any(a["args"] != k["args"] for a, k in zip(after, kernels))
    if module._diff:
        result["diff"] = dict(before="".join("%s: %s\n" % (k["kernel"], " ".join(k["args"])) for k in kernels),
                              after="".join("%s: %s\n" % (k["kernel"], " ".join(k["args"])) for k in after))
    if changed and not module.check_mode:
        command = [grubby, "--update-kernel=ALL"]
        if present:
            command.append("--args=%s" % " ".join(present))
        if absent:
            command.append("--remove-args=%s" % " ".join(absent))
        rc, out, err = module.run_command(command)
        if rc != 0:
            module.fail_json(msg="%s failed: %s" % (" ".join(command), err or out))
    result.update(kernels=after, params=after[0]["args"], grub_update_required=False, files=grubby_files(),
                  differs=changed)
    return changed, [k["args"] for k in kernels], [a["args"] for a in after]


def _grub_default(module, present, absent, result):
    """Ensure ``present`` and ``absent`` in the grub defaults; returns (changed, before, after)."""
    params = module.params
    path = params["grub_default_path"]
    current = _grub_text(module)
    try:
        new_text, old_params, new_params = plan_grub_default(current, params["variable"], present, absent,
                                                             where="%s in %s" % (params["variable"], path))
    except KernelCmdlineError as exc:
        fail(module, exc.problems)
    changed = new_text != current
    if module._diff:
        result["diff"] = file_update.diff(path, current, new_text)
    changed = file_update.apply(module, path, current, new_text, changed, result, backup=params["backup"])
    result.update(params=new_params, grub_update_required=new_text != current, files=[path],
                  differs=new_text != current)
    return changed, [old_params], [new_params]


def _grub_text(module):
    path = module.params["grub_default_path"]
    current = file_update.read_text(path)
    if current is None:
        module.fail_json(msg="%s does not exist; is grub installed? Set method or grub_default_path" % path)
    return current


def present(module, method, where, result):
    params = module.params
    # a record made for another boot configuration (grub defaults or grubby) is refused too
    checks = [check_record] + ([lambda found, path: check_record_where(found, where, path)] if where is not None else [])
    record = applied_record.load_checked(module, params["record"], *checks)
    present_params, absent_params = params["present"], params["absent"]
    if method == "grubby":
        changed, before, after = _grubby(module, present_params, absent_params, result)
    else:
        changed, before, after = _grub_default(module, present_params, absent_params, result)
    added, removed = list((record or {}).get("added", [])), list((record or {}).get("removed", []))
    if result["differs"]:
        added, removed = merge_record(record, *change_of(before, after))
        kept = dict(where, added=added, removed=removed) if added or removed else None
        applied_record.save_for(module, module.params["record"], kept)
    result.update(record_found=record is not None, added=added, removed=removed,
                  msg="the boot configuration %s" % ("changed" if result["differs"] else "is as wanted already"))
    running = (file_update.read_text(params["proc_cmdline_path"]) or "").split()
    result["active"] = satisfied(running, present_params, absent_params)
    return changed


def absent(module, method, where, result):
    params = module.params
    record = applied_record.load_checked(module, module.params["record"], check_record)
    result.update(record_found=record is not None, added=[], removed=[], restored=[], left=[], differs=False,
                  grub_update_required=False, active=True, files=[], params=[])
    if record is None:
        result["msg"] = ("%s does not exist: numa.kube has no kernel parameters of its own on this node to take out "
                         "(none were set, or an older release set them without a record); nothing was changed"
                         % params["record"])
        return False
    problems = check_record_where(record, where, params["record"])
    if problems:
        fail(module, problems)
    if method == "grubby":
        kernels = _grubby_kernels(module)[1]
        currents = [k["args"] for k in kernels]
    else:
        kernels = None
        try:
            currents = [read_grub_variable(_grub_text(module), params["variable"])[1]]
        except KernelCmdlineError as exc:
            fail(module, exc.problems)
    remove, restore, left = plan_withdraw(currents, record["added"], record["removed"])
    problems = check_dangerous(restore, remove, params["allow"])
    if problems:
        fail(module, problems)
    if method == "grubby":
        changed = _grubby(module, restore, remove, result, kernels)[0]
    else:
        changed = _grub_default(module, restore, remove, result)[0]
    for note in left:
        module.warn(note)
    changed = applied_record.save_for(module, module.params["record"], None) or changed
    result.update(removed=remove, restored=restore, left=left,
                  msg="took out %s, put back %s%s" % (" ".join(remove) or "nothing", " ".join(restore) or "nothing",
                                                      "; left as they are: %s" % "; ".join(left) if left else ""))
    running = (file_update.read_text(params["proc_cmdline_path"]) or "").split()
    result["active"] = satisfied(running, restore, remove)
    return changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            present=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            allow=dict(type="list", elements="str", default=[]),
            method=dict(type="str", default="auto", choices=["auto", "grubby", "grub_default"]),
            grub_default_path=dict(type="path", default="/etc/default/grub"),
            variable=dict(type="str", default="GRUB_CMDLINE_LINUX"),
            proc_cmdline_path=dict(type="path", default="/proc/cmdline"),
            backup=dict(type="bool", default=False),
            record=dict(type="path", default=RECORD),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    present_params, absent_params = params["present"], params["absent"]
    problems = check_params(present_params, "present") + check_params(absent_params, "absent")
    problems += check_allow(params["allow"])
    if params["state"] == "absent" and (present_params or absent_params):
        problems.append("present and absent are for state=present; state=absent takes out what %s says numa.kube "
                        "set: leave both lists out" % params["record"])
    clash = sorted(set(present_params) & set(absent_params))
    if clash:
        problems.append("%s cannot be both present and absent" % ", ".join(clash))
    problems += check_dangerous(present_params, absent_params, params["allow"]) + check_repeated_wanted(present_params)
    method = params["method"]
    if method == "auto":
        method = "grubby" if module.get_bin_path("grubby") else "grub_default"
    problems += check_variable(params["variable"])
    # the file's type matters only where it is written; its path's form always
    problems += check_grub_default_path(params["grub_default_path"],
                                        lstat=os.lstat if method == "grub_default" else None)
    if problems:
        fail(module, problems)
    result = dict(method=method, record=params["record"])
    where = where_of(method, params["grub_default_path"], params["variable"])
    if params["state"] == "present":
        changed = present(module, method, where, result)
    else:
        changed = absent(module, method, where, result)
    result["reboot_required"] = not result["active"]
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
