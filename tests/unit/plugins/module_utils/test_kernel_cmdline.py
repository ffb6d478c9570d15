# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kernel_cmdline import (
    KernelCmdlineError,
    apply_params,
    check_params,
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
    (["a=1", "b", "a=2"], ["a=3"], [], ["a=3", "b"]),
    (["mem_sampling_on", "numa_icon=enable"], [], ["numa_icon"], ["mem_sampling_on"]),
    (["x=1", "x=2"], [], ["x=1"], ["x=2"]),
    (["quiet"], ["quiet"], [], ["quiet"]),
])
def test_apply_params(current, present, absent, expected):
    assert apply_params(current, present, absent) == expected


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
