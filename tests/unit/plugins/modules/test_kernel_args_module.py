# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_args run in-process: every refusal with its words, nothing written; the files it reports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import hashlib
import os
import stat

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import kernel_args as utils
from ansible_collections.numa.kube.plugins.module_utils.node import kernel_args_apply
from ansible_collections.numa.kube.plugins.modules import kernel_args
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="console=ttyS0"\n'


@pytest.fixture
def grub(tmp_path):
    path = tmp_path / "grub"
    path.write_text(GRUB)
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def grub_args(grub, **more):
    return dict({"method": "grub_default", "grub_default_path": str(grub), "present": ["numa_balancing=disable"]},
                **more)


def test_the_issues_variable_is_refused_and_nothing_runs_or_changes(grub, tmp_path):
    witness = tmp_path / "x"
    before = digest(grub)
    failed, result = run(kernel_args, grub_args(grub, variable="$(touch${IFS}%s)" % witness))
    assert failed and "must be a shell variable name" in result["msg"] and "$(touch${IFS}" in result["msg"]
    assert digest(grub) == before and not witness.exists()


def test_a_variable_other_than_a_command_line_one_is_refused(grub):
    failed, result = run(kernel_args, grub_args(grub, variable="GRUB_DEFAULT"))
    assert failed and "only grub's kernel command-line variables" in result["msg"]
    assert grub.read_text() == GRUB


def test_init_is_refused_until_allowed(grub):
    failed, result = run(kernel_args, grub_args(grub, present=["init=/bin/sh"]))
    assert failed and "'init=/bin/sh' is refused" in result["msg"] and "kernel_args_allow" in result["msg"]
    assert result["problems"] == [result["msg"]] and grub.read_text() == GRUB
    failed, result = run(kernel_args, grub_args(grub, present=["init=/bin/sh"], allow=["init"]))
    assert not failed and 'GRUB_CMDLINE_LINUX="console=ttyS0 init=/bin/sh"' in grub.read_text()


def test_removing_root_is_refused(grub):
    grub.write_text(GRUB.replace("console=ttyS0", "console=ttyS0 root=/dev/vda1"))
    before = digest(grub)
    failed, result = run(kernel_args, grub_args(grub, present=[], absent=["root"]))
    assert failed and result["msg"].startswith("absent: 'root' is refused: root names the root file system")
    assert digest(grub) == before


def test_every_problem_is_told_at_once(grub):
    failed, result = run(kernel_args, grub_args(grub, present=["maxcpus=1", "a b"], allow=["x=1"],
                                                variable="1X"))
    assert failed and len(result["problems"]) == 4, result["problems"]
    assert result["msg"] == " | ".join(result["problems"])


@pytest.mark.parametrize("make,message", [
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: p.symlink_to(p.parent / "grub"), "symbolic link"),
    (lambda p: os.mkfifo(str(p)), "not a regular file"),
])
def test_the_grub_defaults_path_must_be_a_regular_file(grub, tmp_path, make, message):
    path = tmp_path / "other"
    make(path)
    failed, result = run(kernel_args, grub_args(grub, grub_default_path=str(path)))
    assert failed and message in result["msg"] and str(path) in result["msg"]
    assert grub.read_text() == GRUB


@pytest.mark.parametrize("path", ["", "default/grub", "/etc/default/../default/grub"])
def test_the_grub_defaults_path_must_be_absolute_and_plain(grub, path):
    failed, result = run(kernel_args, grub_args(grub, grub_default_path=path))
    assert failed and "grub_default_path %r is refused" % path in result["msg"]


def test_check_mode_reports_the_files_it_would_write(grub, tmp_path):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz root=/dev/vda1 console=ttyS0\n")
    failed, result = run(kernel_args, grub_args(grub, proc_cmdline_path=str(cmdline)), check_mode=True)
    assert not failed and result["changed"] and result["differs"] and result["files"] == [str(grub)]
    assert result["grub_update_required"] and result["reboot_required"] and grub.read_text() == GRUB
    failed, result = run(kernel_args, grub_args(grub, proc_cmdline_path=str(cmdline)))
    assert not failed and result["differs"] and "numa_balancing=disable" in grub.read_text()
    failed, result = run(kernel_args, grub_args(grub, proc_cmdline_path=str(cmdline)), check_mode=True)
    assert not failed and not result["differs"] and result["reboot_required"], "written, still to boot"


FAKE_GRUBBY = """#!/bin/sh
case "$1" in
  --info=ALL) printf 'index=0\\nkernel="/boot/vmlinuz-6.6.0"\\nargs="ro root=/dev/vda1"\\n' ;;
  *) echo "$@" >> "%s"; exit 0 ;;
esac
"""


@pytest.fixture
def grubby(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    binary = tmp_path / "bin" / "grubby"
    binary.parent.mkdir()
    binary.write_text(FAKE_GRUBBY % calls)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:%s" % (binary.parent, os.environ["PATH"]))
    root = tmp_path / "root"
    (root / "boot" / "loader" / "entries").mkdir(parents=True)
    (root / "boot" / "loader" / "entries" / "abc-6.6.0.conf").write_text("options ro root=/dev/vda1\n")
    monkeypatch.setattr(kernel_args_apply, "grubby_files", functools.partial(utils.grubby_files, root=str(root)))
    return calls


def test_grubby_reports_its_files_in_check_mode_and_refuses_like_grub_default(grubby, tmp_path):
    args = {"method": "grubby", "present": ["numa_balancing=disable"], "proc_cmdline_path": str(tmp_path / "none")}
    failed, result = run(kernel_args, args, check_mode=True)
    assert not failed and result["changed"] and not grubby.exists(), "check mode only asked grubby --info"
    assert "/boot/loader/entries/abc-6.6.0.conf" in result["files"] and "/etc/kernel/cmdline" in result["files"]
    failed, result = run(kernel_args, dict(args, present=["rdinit=/bin/sh"]))
    assert failed and "'rdinit=/bin/sh' is refused" in result["msg"] and not grubby.exists()
    failed, result = run(kernel_args, args)
    assert not failed and grubby.read_text() == "--update-kernel=ALL --args=numa_balancing=disable\n"


def test_a_dashed_spelling_of_a_refused_name_is_refused_and_allowed_by_either_spelling(grub):
    failed, result = run(kernel_args, grub_args(grub, present=["nr-cpus=1"]))
    assert failed and "'nr-cpus=1' is refused: nr_cpus (the kernel and systemd read nr-cpus" in result["msg"]
    assert grub.read_text() == GRUB
    failed, result = run(kernel_args, grub_args(grub, present=["nr-cpus=1"], allow=["nr-cpus"]))
    assert not failed and "nr-cpus=1" in grub.read_text()


def test_a_repeated_name_in_the_grub_defaults_is_not_collapsed(grub):
    pools = "hugepagesz=1G hugepages=16 hugepagesz=2M hugepages=512"
    grub.write_text(GRUB.replace("console=ttyS0", pools))
    before = digest(grub)
    failed, result = run(kernel_args, grub_args(grub, present=["hugepages=32"]))
    assert failed and result["msg"].startswith(
        "present: 'hugepages=32' is refused: hugepages occurs 2 times in GRUB_CMDLINE_LINUX in %s "
        "(hugepages=16 hugepages=512)" % grub), result["msg"]
    assert digest(grub) == before
    failed, result = run(kernel_args, grub_args(grub, present=["hugepagesz=1G", "hugepagesz=2M"]))
    assert failed and "present: hugepagesz is given 2 times" in result["msg"] and digest(grub) == before


GRUBBY_POOLS = FAKE_GRUBBY.replace('args="ro root=/dev/vda1"', 'args="ro hugepagesz=1G hugepages=16 hugepagesz=2M '
                                                               'hugepages=512"')


def test_grubby_refuses_a_repeated_name_before_running_anything(grubby, tmp_path):
    binary = tmp_path / "bin" / "grubby"
    binary.write_text(GRUBBY_POOLS % grubby)
    args = {"method": "grubby", "absent": ["hugepages"], "proc_cmdline_path": str(tmp_path / "none")}
    failed, result = run(kernel_args, args)
    assert failed and "'hugepages' is refused: hugepages occurs 2 times in the arguments grubby keeps for " \
                      "/boot/vmlinuz-6.6.0" in result["msg"], result["msg"]
    assert not grubby.exists(), "grubby was only asked for --info"
