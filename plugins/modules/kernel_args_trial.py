#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_args_trial
short_description: Plan, read and check a kernel command line booted once on trial through grub
version_added: "0.1.0"
description:
  - The P(numa.kube.kernel_args#role) role boots a new kernel command line once, from a grub menu entry of
    its own, before it makes it the default; this module tells the role what to write and what happened.
    It only reads the node; the role writes the entry, runs C(update-grub) and C(grub-reboot), reboots
    and keeps or undoes the change inside the rollout envelope.
  - O(state=plan) copies the entry grub boots by default (the first of grub.cfg) into a trial entry
    whose C(linux) line carries the command line asked for (O(present) ensured, O(absent) removed, as
    the grub defaults will have it), plus C(panic=) (so a kernel, or Debian's initramfs, that panics
    reboots), systemd's runtime watchdog (C(systemd.watchdog_sec=), with C(modules-load=softdog) where the
    node has no watchdog device, so a hang reboots) and the marker C(numa_kube.trial=1). C(grub-reboot)
    boots it once; grub clears the one-time choice as it boots it, so any later boot is the default again.
  - It refuses where that cannot hold - C(/boot/grub) on LVM, another disk filter (md-RAID) or an
    encrypted disk, or on a file system grub cannot write (btrfs, ZFS), as C(grub-probe) tells, where
    grub cannot clear the one-time choice at boot; a default that is not the first entry; a one-time
    boot already set; a menu with no entry to copy (BLS).
  - It also refuses a node that does not run what grub boots by default (a fall back would boot a
    command line it never ran), and a grub.cfg made from other grub defaults than the node has.
  - O(state=booted) reads C(/proc/cmdline) and the boot id and says whether the node runs the trial or
    came back on its previous command line. O(state=staged) checks grub.cfg regenerated with the trial
    entry (the default unchanged, the trial entry booting O(trial)). O(state=committed) checks that
    grub.cfg, regenerated after the change was kept, boots O(wanted) by default and holds no trial entry.
author:
  - numa.kube contributors (@numa-kube)
options:
  state:
    description: What to read (see the description).
    type: str
    choices: [plan, booted, staged, committed]
    default: plan
  present:
    description: Parameters the new command line has (C(name) or C(name=value)), as M(numa.kube.kernel_args) takes them.
    type: list
    elements: str
    default: []
  absent:
    description: Parameters it does not have (C(name) removes any value, C(name=value) only that one).
    type: list
    elements: str
    default: []
  wanted:
    description: With O(state=committed), the command line the default entry must boot (RV(wanted) of the plan).
    type: list
    elements: str
    default: []
  previous:
    description: With O(state=staged), the command line the default entry must still boot (RV(previous) of the plan).
    type: list
    elements: str
    default: []
  trial:
    description: With O(state=staged), the command line the trial entry must boot (RV(trial) of the plan).
    type: list
    elements: str
    default: []
  method:
    description:
      - How the node's kernel parameters are changed (M(numa.kube.kernel_args)' RV(numa.kube.kernel_args#module:method)).
        The trial is built for C(grub_default); C(grubby) is refused by O(state=plan).
    type: str
    choices: [grub_default, grubby]
    default: grub_default
  grub_default_path:
    description: The grub defaults, whose O(variable) the change edits (the trial entry puts it where update-grub will).
    type: path
    default: /etc/default/grub
  variable:
    description: The grub defaults variable the change edits.
    type: str
    default: GRUB_CMDLINE_LINUX
  panic_seconds:
    description: The trial's C(panic=), seconds before a panicking kernel or initramfs reboots (1 to 3600).
    type: int
    default: 10
  watchdog_seconds:
    description:
      - The trial's C(systemd.watchdog_sec=), seconds without a ping from systemd before the watchdog reboots the node
        (0 to 3600); 0 arms no watchdog. The role puts back the node's own once the change is kept.
    type: int
    default: 120
  grub_cfg_path:
    description: The grub.cfg grub boots from; empty takes C(/boot/grub/grub.cfg) or C(/boot/grub2/grub.cfg), whichever exists.
    type: path
    default: ""
  entry_path:
    description: The grub.d script that prints the trial entry.
    type: path
    default: /etc/grub.d/45_numa_kube_trial
  grubenv_path:
    description:
      - grub's environment block that C(grub-reboot) writes; empty takes C(/boot/grub/grubenv), or
        C(/boot/grub2/grubenv) with C(grub2-reboot).
    type: path
    default: ""
  grub_reboot:
    description: The command that sets grub's one-time choice; empty takes C(grub-reboot) or C(grub2-reboot), whichever is installed.
    type: path
    default: ""
  probe:
    description: Ask C(grub-probe) whether grub can write its environment block at boot (false for tests on recorded trees).
    type: bool
    default: true
  proc_cmdline_path:
    description: The running kernel's command line.
    type: path
    default: /proc/cmdline
  watchdog_sysfs:
    description: Where the kernel lists the node's watchdog devices.
    type: path
    default: /sys/class/watchdog
attributes:
  check_mode:
    support: full
    description: The module never changes the node; check mode runs it the same.
  diff_mode:
    support: none
    description: The module changes nothing.
notes:
  - Made for grub menus that C(update-grub) or C(grub-mkconfig) write (Debian, Ubuntu). Nodes booted
    through grubby's BLS entries (RHEL, Fedora, Amazon Linux 2023) are refused by O(state=plan); the
    role's C(kernel_args_trial=false) changes their default entry directly.
seealso:
  - module: numa.kube.kernel_args
  - name: grub's environment block
    description: How grub keeps next_entry and where it cannot write it at boot.
    link: https://www.gnu.org/software/grub/manual/grub/html_node/Environment-block.html
"""

EXAMPLES = r"""
- name: Plan the trial
  numa.kube.kernel_args_trial:
    present:
      - isolcpus=managed_irq,2-7
      - nohz_full=2-7
  register: trial

- name: Write the trial entry
  ansible.builtin.copy:
    dest: "{{ trial.entry_path }}"
    content: "{{ trial.entry_text }}"
    mode: "0755"

- name: After update-grub, grub-reboot and the reboot, see what the node runs
  numa.kube.kernel_args_trial:
    state: booted
  register: now

- name: Once the change is kept and grub.cfg regenerated, check its default entry
  numa.kube.kernel_args_trial:
    state: committed
    wanted: "{{ trial.wanted }}"
"""

RETURN = r"""
previous:
  description: The command line of grub's default entry before the change.
  returned: state is plan
  type: list
  elements: str
  sample: [root=UUID=0b3c-41, ro, console=ttyS0]
wanted:
  description: The command line the change makes the default once the trial proves healthy.
  returned: state is plan
  type: list
  elements: str
  sample: [root=UUID=0b3c-41, ro, console=ttyS0, nohz_full=2-7]
trial:
  description: The trial entry's command line (RV(wanted) and the trial's own parameters).
  returned: state is plan
  type: list
  elements: str
  sample: [root=UUID=0b3c-41, ro, console=ttyS0, nohz_full=2-7, panic=10, systemd.watchdog_sec=120,
           modules-load=softdog, numa_kube.trial=1]
entry_path:
  description: Where the trial entry's grub.d script goes (O(entry_path)).
  returned: state is plan
  type: str
  sample: /etc/grub.d/45_numa_kube_trial
entry_text:
  description: The grub.d script, executable, that prints the trial entry.
  returned: state is plan
  type: str
entry_id:
  description: The trial entry's menu id, which C(grub-reboot) takes.
  returned: state is plan
  type: str
  sample: numa-kube-trial
reboot_command:
  description: The command that boots the trial once (C(grub-reboot) or C(grub2-reboot) and the entry id).
  returned: state is plan
  type: list
  elements: str
  sample: [/usr/sbin/grub-reboot, numa-kube-trial]
softdog:
  description: Whether the trial loads softdog, the node having no watchdog device of its own.
  returned: state is plan
  type: bool
grub_cfg:
  description: The grub.cfg read.
  returned: state is plan, staged or committed
  type: str
  sample: /boot/grub/grub.cfg
grubenv:
  description: grub's environment block beside it, where C(grub-reboot) writes the one-time choice.
  returned: state is plan
  type: str
  sample: /boot/grub/grubenv
booted:
  description: C(trial) when the node runs the trial's command line, C(previous) when it came back on another.
  returned: state is booted
  type: str
  sample: trial
running:
  description: The running kernel's command line, without grub's C(BOOT_IMAGE=) and the trial's marker.
  returned: state is booted
  type: str
boot_id:
  description: The running boot's id (C(/proc/sys/kernel/random/boot_id)), which tells a later reboot.
  returned: state is booted
  type: str
default:
  description: The command line grub.cfg's default entry boots.
  returned: state is committed
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.errors import fail_from
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import KernelCmdlineError
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args_trial import KernelTrialError, run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["plan", "booted", "staged", "committed"], default="plan"),
            present=dict(type="list", elements="str", default=[]),
            absent=dict(type="list", elements="str", default=[]),
            wanted=dict(type="list", elements="str", default=[]),
            previous=dict(type="list", elements="str", default=[]),
            trial=dict(type="list", elements="str", default=[]),
            method=dict(type="str", choices=["grub_default", "grubby"], default="grub_default"),
            grub_default_path=dict(type="path", default="/etc/default/grub"),
            variable=dict(type="str", default="GRUB_CMDLINE_LINUX"),
            grubenv_path=dict(type="path", default=""),
            panic_seconds=dict(type="int", default=10),
            watchdog_seconds=dict(type="int", default=120),
            grub_cfg_path=dict(type="path", default=""),
            entry_path=dict(type="path", default="/etc/grub.d/45_numa_kube_trial"),
            grub_reboot=dict(type="path", default=""),
            probe=dict(type="bool", default=True),
            proc_cmdline_path=dict(type="path", default="/proc/cmdline"),
            watchdog_sysfs=dict(type="path", default="/sys/class/watchdog"),
        ),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (KernelTrialError, KernelCmdlineError) as exc:
        fail_from(module, exc)


if __name__ == "__main__":
    main()
