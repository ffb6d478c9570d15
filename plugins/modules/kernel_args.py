#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_args
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
    C(rd.systemd.debug_shell), and the switches of systemd's kernel-command-line(7) that change what
    boots, from where, as whom, when or with what (C(rd.rescue), C(systemd.confirm_spawn),
    C(systemd.crash_shell), C(fstab), C(mount.usr), C(roothash), C(luks), C(resume),
    C(systemd.hostname), C(systemd.machine_id), C(systemd.clock-usec), C(systemd.setenv),
    C(systemd.default_timeout_start_sec) and their kin; the kernel_args role's README lists them all)
    - whether it is to be set or removed, unless its name is in O(allow).
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
  numa.kube.kernel_args:
    present: [mem_sampling_on, numa_icon=enable]
  register: cmdline

- name: Regenerate grub.cfg on Debian
  ansible.builtin.command: update-grub
  when: cmdline.grub_update_required
  changed_when: true

- name: Take a parameter away again
  numa.kube.kernel_args:
    absent: [numa_icon]

- name: Limit the CPUs the kernel brings up, which is refused unless allowed
  numa.kube.kernel_args:
    present: [maxcpus=16]
    allow: [maxcpus]

- name: Take out what numa.kube set, and put back what it removed
  numa.kube.kernel_args:
    state: absent
  register: withdrawn   # withdrawn.removed, withdrawn.restored, withdrawn.left

- name: List the files a change would write, to record them first
  numa.kube.kernel_args:
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args_apply import absent, check_inputs, present

# where the record goes when O(record) is not given (tests point it elsewhere)
RECORD = applied_record.record_path(applied_record.DEFAULT_DIR, "kernel.json")


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
    applied_record.run_change(module, present, absent, [check_inputs])


if __name__ == "__main__":
    main()
