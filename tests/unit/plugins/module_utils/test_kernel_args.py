# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import (
    DANGEROUS,
    PREFIX_MATCHED,
    KernelCmdlineError,
    apply_params,
    check_allow,
    check_dangerous,
    check_grub_default_path,
    check_params,
    check_repeated,
    check_repeated_wanted,
    check_variable,
    grubby_files,
    parse_grubby_info,
    plan_grub_default,
    satisfied,
)

DEBIAN = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Debian} ) 2>/dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX="console=ttyS0 numa_icon=disable"
"""

NUMA_FAST = ["mem_sampling_on", "numa_icon=enable"]


@pytest.mark.parametrize("current,present,absent,expected", [
    ([], NUMA_FAST, [], NUMA_FAST),
    (["quiet", "numa_icon=disable"], NUMA_FAST, [], ["quiet", "numa_icon=enable", "mem_sampling_on"]),
    (["a=1", "b"], ["a=3"], [], ["a=3", "b"]),
    (["mem_sampling_on", "numa_icon=enable"], [], ["numa_icon"], ["mem_sampling_on"]),
    (["x=1", "x=2"], [], ["x=3"], ["x=1", "x=2"]),
    (["x", "x"], ["x"], [], ["x", "x"]),
    (["quiet"], ["quiet"], [], ["quiet"]),
])
def test_apply_params(current, present, absent, expected):
    assert apply_params(current, present, absent) == expected


HUGE_PAGES = ["hugepagesz=1G", "hugepages=16", "hugepagesz=2M", "hugepages=512"]


@pytest.mark.parametrize("present,absent,name", [
    (["hugepages=32"], [], "hugepages"), ([], ["hugepages"], "hugepages"), ([], ["hugepages=512"], "hugepages"),
    (["hugepagesz=1G"], [], "hugepagesz"),
])
def test_a_repeated_name_is_neither_replaced_nor_removed(present, absent, name):
    """The review's case: replacing hugepages used to collapse both pools into one, the 2M pool lost."""
    with pytest.raises(KernelCmdlineError) as caught:
        apply_params(HUGE_PAGES, present, absent, where="GRUB_CMDLINE_LINUX in /etc/default/grub")
    problem, = caught.value.problems
    param = (present or absent)[0]
    assert problem.startswith("%s: %r is refused: %s occurs 2 times in GRUB_CMDLINE_LINUX in /etc/default/grub"
                              % ("present" if present else "absent", param, name)), problem
    assert " ".join(p for p in HUGE_PAGES if p.split("=", 1)[0] == name) in problem, "the occurrences are named"
    assert "Edit GRUB_CMDLINE_LINUX in /etc/default/grub by hand" in problem


def test_a_repeated_name_the_change_does_not_touch_is_kept():
    assert apply_params(HUGE_PAGES, ["numa_balancing=disable"], ["hugepages=64"]) == HUGE_PAGES + [
        "numa_balancing=disable"], "an absent pair that is not there, and other names, change nothing repeated"
    assert apply_params(HUGE_PAGES, ["hugepages"], []) == HUGE_PAGES + ["hugepages"], "a bare flag only adds itself"
    assert check_repeated(["hugepages=16"], ["hugepages=32"]) == [], "once: replaced as before"


def test_plan_grub_default_refuses_a_repeated_name_and_writes_nothing():
    text = 'GRUB_CMDLINE_LINUX="%s"\n' % " ".join(HUGE_PAGES)
    with pytest.raises(KernelCmdlineError, match="hugepages occurs 2 times in GRUB_CMDLINE_LINUX in the grub"):
        plan_grub_default(text, "GRUB_CMDLINE_LINUX", ["hugepages=32"])


def test_one_name_with_two_values_in_present_is_refused():
    problems = check_repeated_wanted(HUGE_PAGES + ["quiet", "quiet", "a=1", "a=1"])
    assert len(problems) == 2, problems
    assert problems[0].startswith("present: hugepages is given 2 times (hugepages=16, hugepages=512)")
    assert problems[1].startswith("present: hugepagesz is given 2 times (hugepagesz=1G, hugepagesz=2M)")
    with pytest.raises(KernelCmdlineError, match="keeps one value per name"):
        plan_grub_default("", "GRUB_CMDLINE_LINUX", HUGE_PAGES)


def test_satisfied():
    assert satisfied(["BOOT_IMAGE=/vmlinuz", "mem_sampling_on", "numa_icon=enable"], NUMA_FAST)
    assert not satisfied(["numa_icon=disable", "mem_sampling_on"], NUMA_FAST)
    assert not satisfied(["numa_icon=enable"], [], ["numa_icon"])
    assert satisfied(["numa_icon=enable"], [], ["numa_icon=disable"])


def test_plan_grub_default_edits_only_the_variable():
    new, old, params = plan_grub_default(DEBIAN, "GRUB_CMDLINE_LINUX", NUMA_FAST)
    assert old == ["console=ttyS0", "numa_icon=disable"]
    assert params == ["console=ttyS0", "numa_icon=enable", "mem_sampling_on"]
    assert new == DEBIAN.replace('GRUB_CMDLINE_LINUX="console=ttyS0 numa_icon=disable"',
                                 'GRUB_CMDLINE_LINUX="console=ttyS0 numa_icon=enable mem_sampling_on"')
    again = plan_grub_default(new, "GRUB_CMDLINE_LINUX", NUMA_FAST)
    assert again[0] == new


def test_plan_grub_default_adds_a_missing_variable_and_reads_single_quotes():
    new, old, dummy = plan_grub_default("GRUB_TIMEOUT=5\n", "GRUB_CMDLINE_LINUX", ["a=1"])
    assert old == [] and new == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="a=1"\n'
    new, old, dummy = plan_grub_default("export GRUB_CMDLINE_LINUX='quiet splash'\n", "GRUB_CMDLINE_LINUX", ["b"])
    assert old == ["quiet", "splash"] and new == 'export GRUB_CMDLINE_LINUX="quiet splash b"\n'


@pytest.mark.parametrize("text,message", [
    ('GRUB_CMDLINE_LINUX="$EXTRA quiet"\n', "refers to other variables"),
    ('GRUB_CMDLINE_LINUX="quiet\n', "cannot be read"),
    ('GRUB_CMDLINE_LINUX=quiet splash\n', "not one quoted value"),
])
def test_plan_grub_default_refusals(text, message):
    with pytest.raises(KernelCmdlineError, match=message):
        plan_grub_default(text, "GRUB_CMDLINE_LINUX", ["x"])


def test_bad_params():
    assert check_params(["ok=1", "fine"], "present") == []
    assert len(check_params(["has space", "=x", "q\"uote", 5], "present")) == 4
    with pytest.raises(KernelCmdlineError):
        plan_grub_default(DEBIAN, "GRUB_CMDLINE_LINUX", ["a b"])


def test_parse_grubby_info():
    text = ('index=0\nkernel="/boot/vmlinuz-5.10.0-182.oe2203sp4.aarch64"\nargs="ro crashkernel=1024M,high '
            'mem_sampling_on"\nroot="/dev/mapper/openeuler-root"\ntitle="openEuler"\n'
            'index=1\nkernel="/boot/vmlinuz-0-rescue"\nargs="ro"\nindex=2\nnon linux entry\n')
    entries = parse_grubby_info(text)
    assert [e["kernel"] for e in entries] == ["/boot/vmlinuz-5.10.0-182.oe2203sp4.aarch64", "/boot/vmlinuz-0-rescue"]
    assert entries[0]["args"] == ["ro", "crashkernel=1024M,high", "mem_sampling_on"]


# the grammar: nothing that a shell sourcing /etc/default/grub could act on --------------------------

@pytest.mark.parametrize("param", [
    "a=`reboot`", "a=$(reboot)", "a=${HOME}", "a;reboot", "a=1;reboot", 'a=\\"', 'a="', "a='x'", "a=x|y",
    "a=x&y", "a=<x", "a=>x", "a=(x)", "a={x}", "a=*", "a=?", "a=x y", "a=x\ty", "a=x\n", "a=\\", "-a", ".a",
    "=a", "", "a=é", "a=x!y", "a=~x", "a=#x", "a=x\x00",
])
def test_every_shell_metacharacter_class_is_refused(param):
    problems = check_params([param], "present")
    assert len(problems) == 1, param
    assert repr(param) in problems[0] and "letters, digits" in problems[0]


@pytest.mark.parametrize("param", [
    "mem_sampling_on", "numa_icon=enable", "isolcpus=managed_irq,domain,2-5", "console=ttyS0,115200n8",
    "root=UUID=0b6f3d2e-1c1a-4c55-9a3f-2f1c7e8d9a10", "rd.lvm.lv=vg0/root", "hugepagesz=1G", "nohz_full=2-7",
    "systemd.unit=multi-user.target", "crashkernel=512M@16M", "a=b+c", "dyndbg=%x",
])
def test_real_parameters_pass(param):
    assert check_params([param], "present") == []


def test_a_very_long_parameter_is_refused():
    assert "at most 1024" in check_params(["a=" + "b" * 2000], "present")[0]


def test_existing_quoted_parameters_are_not_rewritten():
    text = 'GRUB_CMDLINE_LINUX="a=\\"x y\\" b"\n'
    with pytest.raises(KernelCmdlineError, match="quotes or backslashes"):
        plan_grub_default(text, "GRUB_CMDLINE_LINUX", ["c"])


# the variable: a shell name, one of grub's command-line variables -----------------------------------

@pytest.mark.parametrize("variable", ["$(touch${IFS}/tmp/x)", "GRUB_CMDLINE_LINUX;id", "1GRUB", "", "GRUB CMDLINE",
                                      "GRUB_CMDLINE_LINUX\nX", "`id`", "GRUB-CMDLINE", None])
def test_a_variable_that_is_not_a_shell_name_is_refused(variable):
    problems = check_variable(variable)
    assert len(problems) == 1 and "must be a shell variable name" in problems[0] and repr(variable) in problems[0]


def test_only_grubs_command_line_variables_are_edited():
    assert check_variable("GRUB_CMDLINE_LINUX") == [] and check_variable("GRUB_CMDLINE_LINUX_DEFAULT") == []
    problems = check_variable("GRUB_DEFAULT")
    assert "only grub's kernel command-line variables" in problems[0] and "GRUB_CMDLINE_LINUX" in problems[0]


def test_plan_grub_default_refuses_an_injected_variable_and_writes_nothing():
    with pytest.raises(KernelCmdlineError, match="must be a shell variable name"):
        plan_grub_default(DEBIAN, "$(touch${IFS}/tmp/x)", ["a=1"])


# the grub defaults file's path --------------------------------------------------------------------------

@pytest.mark.parametrize("path,message", [
    ("", "give the absolute path"), ("etc/default/grub", "give the absolute path"),
    ("/etc/default/../passwd", "without . or .. parts"), ("/etc/default//grub", "without . or .. parts"),
])
def test_grub_default_path_form(path, message):
    problems = check_grub_default_path(path, lstat=None)
    assert len(problems) == 1 and message in problems[0] and repr(path) in problems[0]


def test_grub_default_path_must_be_a_regular_file_or_absent(tmp_path):
    grub = tmp_path / "grub"
    grub.write_text("GRUB_TIMEOUT=5\n")
    assert check_grub_default_path(str(grub)) == []
    assert check_grub_default_path(str(tmp_path / "missing")) == []
    assert "not a regular file" in check_grub_default_path(str(tmp_path))[0]
    link = tmp_path / "link"
    link.symlink_to(grub)
    assert "symbolic link" in check_grub_default_path(str(link))[0]
    assert check_grub_default_path(str(link), lstat=None) == [], "grubby hosts: the form only"


# parameters that can take a node away -------------------------------------------------------------------

@pytest.mark.parametrize("param,why", [
    ("init=/bin/sh", "first program the kernel starts"), ("rdinit=/bin/sh", "first program the kernel starts"),
    ("root=/dev/sdz9", "root file system"), ("rootflags=ro", "root file system"), ("rootfstype=xfs", "root file system"),
    ("rd.lvm.lv=vg/root", "root file system"), ("mem=512M", "memory"), ("memmap=1G@4G", "memory"),
    ("maxcpus=1", "CPU Manager state"), ("nr_cpus=1", "CPU Manager state"), ("possible_cpus=1", "CPU Manager"),
    ("nosmp", "CPU Manager"), ("panic=0", "kernel panic"), ("module_blacklist=virtio_net", "network"),
    ("modprobe.blacklist=nvme", "disk"), ("systemd.unit=rescue.target", "rescue or emergency"),
    ("rd.break", "rescue or emergency"), ("single", "rescue or emergency"), ("S", "rescue or emergency"),
    ("1", "rescue or emergency"), ("emergency", "rescue or emergency"), ("rescue", "rescue or emergency"),
    ("systemd.debug_shell", "root shell"),
])
def test_parameters_that_can_take_a_node_away_are_refused(param, why):
    problems = check_dangerous([param], [])
    assert len(problems) == 1, problems
    name = param.split("=", 1)[0]
    assert repr(param) in problems[0] and why in problems[0]
    assert "add %r to the allow option (role variable kernel_args_allow)" % name in problems[0]
    assert check_dangerous([param], [], allow=[name]) == []


@pytest.mark.parametrize("param,why", [
    ("systemd.mask=kubelet.service", "masks a systemd unit"), ("rd.systemd.mask=sshd.service", "masks"),
    ("systemd.wants=rescue.service", "pulls another one into the boot"), ("rd.systemd.wants=x.service", "masks"),
    ("systemd.run=/bin/true", "powers the node off"), ("systemd.volatile=state", "in memory"),
    ("systemd.volatile", "in memory"), ("rd.lvm=0", "root file system"), ("rd.luks=0", "root file system"),
    ("rd.md=0", "root file system"), ("rd.dm=0", "root file system"), ("noinitrd", "root file system"),
    ("net.ifnames=0", "network interfaces"), ("biosdevname=1", "network interfaces"),
    ("ifname=eth0:52:54:00:12:34:56", "network interfaces"), ("ip=dhcp", "network interfaces"),
    ("ip=10.0.0.2::10.0.0.1:255.255.255.0::eth0:none", "network interfaces"),
    ("cgroup_disable=memory", "cgroup"), ("cgroup_no_v1=all", "cgroup"), ("cgroup_no_v1", "cgroup"),
    ("systemd.unified_cgroup_hierarchy=0", "cgroup version"), ("rd.systemd.debug_shell", "root shell"),
    ("rd.systemd.debug_shell=tty9", "root shell"),
])
def test_the_reviews_node_breakers_are_refused(param, why):
    problems = check_dangerous([param], [])
    assert len(problems) == 1 and repr(param) in problems[0] and why in problems[0], problems
    assert check_dangerous([], [param]) != [], "removing too"
    assert check_dangerous([param], [], allow=[param.split("=", 1)[0]]) == []


@pytest.mark.parametrize("param,key", [
    ("nr-cpus=1", "nr_cpus"), ("possible-cpus=1", "possible_cpus"), ("module-blacklist=virtio_net", "module_blacklist"),
    ("systemd.debug-shell", "systemd.debug_shell"), ("rd.systemd.debug-shell", "rd.systemd.debug_shell"),
    ("cgroup-disable=memory", "cgroup_disable"), ("systemd.unified-cgroup-hierarchy=0",
                                                  "systemd.unified_cgroup_hierarchy"),
    ("cgroup_no-v1=all", "cgroup_no_v1"),
])
def test_dashes_are_underscores_to_the_kernel_and_systemd(param, key):
    """The kernel (parameq) and systemd (proc_cmdline_key_streq) read - and _ in a name alike."""
    problem, = check_dangerous([param], [])
    assert "%s (the kernel and systemd read %s" % (key, param.split("=", 1)[0]) in problem
    assert "add %r to the allow option" % key in problem
    assert check_dangerous([param], [], allow=[key]) == []
    assert check_dangerous([param], [], allow=[param.split("=", 1)[0]]) == [], "the allow list is read alike"
    assert check_dangerous([key], [], allow=[key.replace("_", "-")]) == []


@pytest.mark.parametrize("param", [
    "Root=/dev/sdz9", "INIT=/bin/sh", "Single", "systemd.Mask=x", "rootwait", "rootdelay=5", "initcall_debug",
    "ipv6.disablex=0", "ipmi_si.type=kcs", "ip_something=1", "memory_hotplug", "panic_print=1", "iommu=pt",
    "rd.lvm.lvx=1", "systemd.masked=1", "systemd.mask_x=1", "rd.luksx=0", "maxcpusfoo=1", "initrdmem=1",
    "nosmp_foo", "rescue.target", "single_user", "no_initrd", "no-initrd",
])
def test_names_are_matched_whole_and_case_sensitively(param):
    """A name merely starting like, or spelt in another case than, a refused one is another parameter to
    the kernel and systemd (both compare case-sensitively and whole names)."""
    assert check_dangerous([param], []) == [], param


@pytest.mark.parametrize("param", ["noinitrdx", "noinitrd_please", "noinitrd-please", "noinitrd=1"])
def test_a_name_the_kernel_matches_by_its_beginning_is_refused_by_its_beginning(param):
    """noinitrd is a __setup() handler without '=': the kernel runs it for every name starting so."""
    problem, = check_dangerous([param], [])
    assert "noinitrd" in problem and "add 'noinitrd' to the allow option" in problem
    if param.split("=", 1)[0] != "noinitrd":
        assert "acts on every name that starts with noinitrd" in problem
    assert check_dangerous([param], [], allow=["noinitrd"]) == []


def test_refused_names_are_written_as_the_kernel_reads_them():
    assert all("-" not in name for name in DANGEROUS), "keys are compared after - became _"
    assert set(PREFIX_MATCHED) <= set(DANGEROUS)


@pytest.mark.parametrize("param", ["root", "root=UUID=0b6f3d2e", "init", "rd.lvm.lv=vg/root", "panic"])
def test_removing_them_is_refused_too(param):
    problems = check_dangerous([], [param])
    assert len(problems) == 1 and problems[0].startswith("absent: %r is refused" % param)
    assert "removing it is as risky as setting it" in problems[0]
    assert check_dangerous([], [param], allow=[param.split("=", 1)[0]]) == []


@pytest.mark.parametrize("param", ["isolcpus=managed_irq,domain,2-5", "nohz_full=2-7", "rcu_nocbs=2-7",
                                   "console=ttyS0,115200n8", "hugepages=16", "numa_balancing=disable",
                                   "mem_sampling_on", "numa_icon=enable", "irqaffinity=0-1", "memory_hotplug"])
def test_numa_tuning_and_the_console_need_no_allowing(param):
    assert check_dangerous([param], [param]) == []


def test_every_dangerous_name_passes_the_grammar():
    """Each name must be reachable: one the grammar refused first would never need allowing."""
    assert check_params(sorted(DANGEROUS), "present") == []


def test_allow_takes_names_only():
    assert check_allow(["init", "rd.break", "maxcpus"]) == []
    problems = check_allow(["init=/bin/sh", "", "a b"])
    assert len(problems) == 3 and "without =value" in problems[0]


# the files grubby writes -----------------------------------------------------------------------------------

def test_grubby_files_lists_entries_and_follows_links(tmp_path):
    entries = tmp_path / "boot" / "loader" / "entries"
    entries.mkdir(parents=True)
    for name in ("abc-6.6.0.conf", "abc-0-rescue.conf"):
        (entries / name).write_text("options root=/dev/vda1\n")
    (entries / "notes.txt").write_text("")
    efi = tmp_path / "boot" / "efi" / "EFI" / "openEuler"
    efi.mkdir(parents=True)
    (efi / "grubenv").write_text("# GRUB Environment Block\n")
    (tmp_path / "boot" / "grub2").mkdir()
    os.symlink("../efi/EFI/openEuler/grubenv", str(tmp_path / "boot" / "grub2" / "grubenv"))
    files = grubby_files(root=str(tmp_path))
    assert files == sorted(["/boot/efi/EFI/openEuler/grubenv", "/boot/grub2/grub.cfg", "/etc/default/grub",
                            "/boot/loader/entries/abc-0-rescue.conf", "/boot/loader/entries/abc-6.6.0.conf",
                            "/etc/kernel/cmdline"])


# systemd's kernel-command-line(7) switches that change what boots (a rescue or emergency target, a
# command, a console that must answer), where from (file systems, verity, LUKS, resume), as whom
# (host name, machine ID, first boot), when (the clock) or with what (environment, timeouts, cgroups)
SYSTEMD_SWITCHES = ["rd.rescue", "rescue", "rd.emergency", "emergency", "single", "s", "S", "1",
                    "systemd.unit=rescue.target", "rd.systemd.unit=emergency.target", "systemd.run=/bin/true",
                    "systemd.run_success_action=none", "systemd.run_failure_action=none", "systemd.confirm_spawn",
                    "systemd.crash_shell", "systemd.debug_shell", "systemd.mask=kubelet.service",
                    "systemd.wants=rescue.target", "systemd.setenv=LD_PRELOAD=/x.so",
                    "systemd.default_timeout_start_sec=1", "systemd.hostname=other",
                    "systemd.machine_id=0123456789abcdef0123456789abcdef", "systemd.condition-first-boot=1",
                    "systemd.clock-usec=0", "systemd.volatile=yes", "fstab=0", "rd.fstab=0", "mount.usr=/dev/sdb",
                    "roothash=abcd", "systemd.verity=0", "systemd.gpt_auto=0", "luks=0", "luks.uuid=1234",
                    "rd.luks.key=/k", "resume=/dev/sda2", "net.naming-scheme=v238", "net.ifnames=0",
                    "systemd.unified_cgroup_hierarchy=0", "systemd.legacy_systemd_cgroup_controller=1",
                    # found by the review of the fix
                    "systemd.mount-extra=tmpfs:/var:tmpfs", "systemd.swap-extra=/swapfile", "rd.shell",
                    "rd.cmdline=ask", "rd.timeout=0", "udev.blockdev_read_only", "systemd.set_credential=a:b",
                    "numa=off", "numa=fake=4", "nosmt", "selinux=0", "lsm=landlock", "crashkernel=512M",
                    "initcall_blacklist=ahci_init", "usrhash=abcd", "bond=bond0:eth0",
                    # found by the third review: put back from a record's removed list before
                    "acpi=off", "nolapic", "nox2apic", "noapic", "rd.multipath=0", "nfsroot=10.0.0.1:/srv",
                    "netroot=iscsi:10.0.0.1::::iqn.x", "ima_appraise=enforce", "module.sig_enforce=1",
                    "ipv6.disable=1", "kernelcore=95%", "movablecore=50%", "systemd.cpu_affinity=0",
                    "lockdown=confidentiality",
                    # and by the fourth
                    "pci=off", "noefi", "rd.iscsi.ibft=1", "rd.nvmf.discover=fc,auto", "team=team0:eth0,eth1",
                    "ima_appraise_tcb", "loadpin.enforce=1", "ipe.enforce=1", "ipv6.disable_ipv6=1", "cma=95%",
                    "movable_node"]


@pytest.mark.parametrize("param", SYSTEMD_SWITCHES)
def test_systemds_switches_that_change_what_boots_are_refused_both_ways(param):
    """Hostile review: rd.rescue in a record's removed list was put back, while rescue and
    rd.emergency were refused."""
    assert len(check_dangerous([param], [])) == 1, param
    assert len(check_dangerous([], [param])) == 1, param


def test_the_roles_readme_names_every_refused_parameter():
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "kernel_args",
                               "README.md")).read()
    table = readme[readme.index("| parameters | why |"):]
    table = table[:table.index("\n\n")]
    missing = [name for name in sorted(DANGEROUS) if "`%s`" % name not in table]
    assert missing == []
