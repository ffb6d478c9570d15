# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel parameters numa.kube refuses to add, change or remove unless they are allowed by name
(kernel_args.check_dangerous), each with why. The role's README shows the same table; a unit test
holds the two together."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Parameters that can keep a node from booting, from reaching its network, or from running
# kubelet, each with why: the kernel's own, dracut's, and those of systemd's kernel-command-line(7)
# that change what boots, where, as whom, when or with what environment. Adding, changing or removing one needs its name in the allow list.
# Deliberately not here: isolcpus, nohz_full, rcu_nocbs, irqaffinity, hugepages (NUMA tuning this
# collection exists for), console (where boot messages go: a wrong one loses a log, not the node).
_ROOT = ("names the root file system or how the initramfs assembles it; a wrong or missing value stops the boot "
         "before anything runs, SSH included")
_PID1 = ("replaces the first program the kernel starts (systemd); a wrong one leaves the node without kubelet, "
         "SSH or any way back but its console")
_CPUS = ("limits the CPUs the kernel brings up; the node comes back with fewer CPUs than kubelet's CPU Manager "
         "state and reservations were planned for, and kubelet refuses to start on that state")
_MEMORY = ("limits or reshapes the memory the kernel uses; a wrong value leaves too little for kubelet's "
           "reservations and pods, or for the boot itself")
_RESCUE = ("boots into a rescue or emergency mode (or stops in the initramfs) instead of the normal target: no "
           "kubelet and usually no network")
_DRIVERS = ("keeps kernel modules from loading; a storage or network driver on the list leaves the node without "
            "its disk or its network")
_UNITS = ("masks a systemd unit or pulls another one into the boot: kubelet, containerd, the network or SSH masked, "
          "or a rescue, shutdown or unit of someone's choosing started, and the node comes up without kubelet or a "
          "way in")
_RUN = ("boots into a command given on the command line instead of the normal target, and by default powers the "
        "node off once that command ends")
_VOLATILE = ("keeps the root file system or /var in memory: the node boots without its state (kubelet's and "
             "containerd's data, its certificates) and loses whatever it writes at every boot")
_NETWORK = ("changes how the network interfaces are named or configured at boot; the node's network configuration "
            "no longer matches its interfaces and it comes up without its address")
_CGROUPS = ("changes which cgroup controllers or which cgroup version the node runs; kubelet and containerd, set up "
            "for the current ones (cgroup driver, memory and cpuset controllers), fail to start or stop enforcing "
            "the pods' limits")
_SHELL = "gives anyone at a console a root shell without a password"
_CONSOLE = ("makes systemd ask at the console before it starts each unit: the boot waits for someone there, "
            "without kubelet or SSH meanwhile")
_RESUME = ("resumes a hibernated system from the device named: a wrong or stale one brings back an old memory "
           "image over the node's disks, or stops the boot")
_IDENTITY = ("changes who the node is at boot (its host name or machine ID, or runs its first-boot set-up "
             "again): kubelet registers under another name or identity and the cluster no longer knows the node")
_CLOCK = ("sets the clock at boot to the value given: certificates (kubelet's, the API server's) are then "
          "read as not yet valid or expired, and the node cannot join")
_TIMEOUT = ("changes how long systemd waits for a unit to start: a short value has it give up on kubelet, "
            "containerd or the network at boot")
_SWAP = ("adds swap at boot: kubelet refuses to start where swap is on unless it was set up for it (failSwapOn), "
         "and a node with swap no longer holds its pods' memory limits as planned")
_CREDENTIALS = ("hands systemd credentials to the boot, which can add mounts, files and settings of someone's "
                "choosing (fstab.extra, tmpfiles.extra) before anything else runs")
_WAIT = ("makes the boot wait: for a device, for a timeout, or for someone at the console to answer (rd.cmdline=ask), "
         "without kubelet or SSH meanwhile")
_READONLY = ("makes block devices read-only at boot: the root file system, containerd's and kubelet's state cannot "
             "be written and the node does not come up")
_NUMA_LAYOUT = ("changes the NUMA or CPU layout the kernel shows (numa=off or fake nodes, SMT off): kubelet's CPU and "
                "Memory Manager state and the reservations were planned for the layout the node has, and kubelet "
                "refuses to start on that state")
_SECURITY = ("changes the kernel's security modules or their mode (SELinux, AppArmor, the LSM list): container "
             "runtimes and their policies are set up for the current ones, and pods fail to start or run unconfined")
_ENVIRONMENT = ("sets environment variables for every service systemd starts, kubelet and containerd included "
                "(a proxy, a library path), changing how they run")
_PLATFORM = ("turns off the firmware tables or interrupt controllers the kernel finds CPUs, NUMA nodes and devices "
             "with (ACPI, the local and I/O APICs, x2APIC): the node boots with fewer CPUs or NUMA nodes than "
             "kubelet's state holds, without its devices, or not at all")
_NETROOT = ("mounts the root file system over the network or through multipath: a wrong or missing value stops the "
            "boot before anything runs, SSH included")
_SIGNED = ("changes which code and files the kernel accepts (module signatures, IMA appraisal, lockdown): a driver "
           "or a file the node needs that is not signed as asked for is refused at boot")
_AFFINITY = ("pins every service systemd starts, kubelet and containerd included, to the CPUs named: a wrong list "
             "starves them; numa.kube's CPU partitioning sets CPUAffinity in a systemd drop-in instead")
DANGEROUS = {
    "acpi": _PLATFORM,
    "pci": _PLATFORM,
    "noefi": _PLATFORM,
    "movable_node": _MEMORY,
    "cma": _MEMORY,
    "rd.iscsi.ibft": _NETROOT,
    "rd.nvmf.discover": _NETROOT,
    "team": _NETWORK,
    "ima_appraise_tcb": _SIGNED,
    "loadpin.enforce": _SIGNED,
    "ipe.enforce": _SIGNED,
    "ipv6.disable_ipv6": _NETWORK,
    "noapic": _PLATFORM,
    "nolapic": _PLATFORM,
    "nox2apic": _PLATFORM,
    "rd.multipath": _NETROOT,
    "netroot": _NETROOT,
    "nfsroot": _NETROOT,
    "nfsaddrs": _NETROOT,
    "rd.iscsi.initiator": _NETROOT,
    "rd.iscsi.firmware": _NETROOT,
    "module.sig_enforce": _SIGNED,
    "ima_appraise": _SIGNED,
    "ima_policy": _SIGNED,
    "lockdown": _SIGNED,
    "ipv6.disable": _NETWORK,
    "kernelcore": _MEMORY,
    "movablecore": _MEMORY,
    "systemd.cpu_affinity": _AFFINITY,
    "init": _PID1,
    "rdinit": _PID1,
    "root": _ROOT,
    "rootflags": _ROOT,
    "rootfstype": _ROOT,
    "initrd": _ROOT,
    "noinitrd": _ROOT,
    "rd.lvm": _ROOT,
    "rd.lvm.lv": _ROOT,
    "rd.lvm.vg": _ROOT,
    "rd.luks": _ROOT,
    "rd.luks.uuid": _ROOT,
    "rd.luks.name": _ROOT,
    "rd.md": _ROOT,
    "rd.md.uuid": _ROOT,
    "rd.dm": _ROOT,
    "rd.dm.uuid": _ROOT,
    "mem": _MEMORY,
    "memmap": _MEMORY,
    "maxcpus": _CPUS,
    "nr_cpus": _CPUS,
    "possible_cpus": _CPUS,
    "nosmp": _CPUS,
    "panic": ("decides whether the node restarts by itself after a kernel panic (0 waits forever); changing it "
              "changes whether a node that fails comes back without someone at its console"),
    "module_blacklist": _DRIVERS,
    "modprobe.blacklist": _DRIVERS,
    "rd.driver.blacklist": _DRIVERS,
    "systemd.unit": _RESCUE,
    "rd.systemd.unit": _RESCUE,
    "rd.break": _RESCUE,
    "rd.emergency": _RESCUE,
    "rd.rescue": _RESCUE,
    "single": _RESCUE,
    "s": _RESCUE,
    "S": _RESCUE,
    "1": _RESCUE,
    "emergency": _RESCUE,
    "rescue": _RESCUE,
    "systemd.mask": _UNITS,
    "rd.systemd.mask": _UNITS,
    "systemd.wants": _UNITS,
    "rd.systemd.wants": _UNITS,
    "systemd.run": _RUN,
    "systemd.run_success_action": _RUN,
    "systemd.run_failure_action": _RUN,
    "systemd.confirm_spawn": _CONSOLE,
    "systemd.crash_shell": _SHELL,
    "systemd.setenv": _ENVIRONMENT,
    "systemd.mount_extra": _VOLATILE,
    "rd.systemd.mount_extra": _VOLATILE,
    "systemd.swap_extra": _SWAP,
    "rd.systemd.swap_extra": _SWAP,
    "systemd.set_credential": _CREDENTIALS,
    "systemd.set_credential_binary": _CREDENTIALS,
    "systemd.default_device_timeout_sec": _WAIT,
    "rd.timeout": _WAIT,
    "rd.cmdline": _WAIT,
    "rd.shell": _SHELL,
    "udev.blockdev_read_only": _READONLY,
    "rd.udev.blockdev_read_only": _READONLY,
    "luks.data": _ROOT,
    "rd.luks.data": _ROOT,
    "usrhash": _ROOT,
    "systemd.verity_usr_data": _ROOT,
    "systemd.verity_usr_hash": _ROOT,
    "systemd.verity_usr_options": _ROOT,
    "initcall_blacklist": _DRIVERS,
    "numa": _NUMA_LAYOUT,
    "nosmt": _NUMA_LAYOUT,
    "crashkernel": _MEMORY,
    "selinux": _SECURITY,
    "enforcing": _SECURITY,
    "security": _SECURITY,
    "lsm": _SECURITY,
    "apparmor": _SECURITY,
    "bond": _NETWORK,
    "vlan": _NETWORK,
    "bridge": _NETWORK,
    "nameserver": _NETWORK,
    "rd.route": _NETWORK,
    "rd.neednet": _NETWORK,
    "systemd.default_timeout_start_sec": _TIMEOUT,
    "systemd.hostname": _IDENTITY,
    "systemd.machine_id": _IDENTITY,
    "systemd.condition_first_boot": _IDENTITY,
    "systemd.clock_usec": _CLOCK,
    "resume": _RESUME,
    "resumeflags": _RESUME,
    "fstab": _ROOT,
    "rd.fstab": _ROOT,
    "mount.usr": _ROOT,
    "mount.usrfstype": _ROOT,
    "mount.usrflags": _ROOT,
    "roothash": _ROOT,
    "systemd.verity": _ROOT,
    "rd.systemd.verity": _ROOT,
    "systemd.verity_root_data": _ROOT,
    "systemd.verity_root_hash": _ROOT,
    "systemd.verity.root_options": _ROOT,
    "systemd.gpt_auto": _ROOT,
    "rd.systemd.gpt_auto": _ROOT,
    "luks": _ROOT,
    "luks.crypttab": _ROOT,
    "rd.luks.crypttab": _ROOT,
    "luks.name": _ROOT,
    "luks.uuid": _ROOT,
    "luks.options": _ROOT,
    "rd.luks.options": _ROOT,
    "luks.key": _ROOT,
    "rd.luks.key": _ROOT,
    "systemd.volatile": _VOLATILE,
    "net.ifnames": _NETWORK,
    "net.naming_scheme": _NETWORK,
    "biosdevname": _NETWORK,
    "ifname": _NETWORK,
    "ip": _NETWORK,
    "cgroup_disable": _CGROUPS,
    "cgroup_no_v1": _CGROUPS,
    "systemd.unified_cgroup_hierarchy": _CGROUPS,
    "systemd.legacy_systemd_cgroup_controller": _CGROUPS,
    "systemd.debug_shell": _SHELL,
    "rd.systemd.debug_shell": _SHELL,
}
