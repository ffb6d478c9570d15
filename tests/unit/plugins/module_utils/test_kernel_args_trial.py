# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The trial boot's pure parts: the trial entry copied from a recorded grub.cfg (the test bed's guest,
Debian 13, as update-grub wrote it), the refusals grub-probe's answers lead to, what the node booted,
and the check once the change is kept. The scenario boots these entries for real (test_trial.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import kernel_args_trial as trial
from ansible_collections.numa.kube.plugins.modules import kernel_args_trial
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run as run_module

HERE = os.path.dirname(__file__)


def recorded(name):
    with open(os.path.join(HERE, "fixtures", name)) as handle:
        return handle.read()


GRUB_CFG = recorded("grub-debian13.cfg")
PREVIOUS = ["root=UUID=1c1ae0af-b9e7-4174-b628-b2333cc7442f", "ro", "console=ttyS0"]


def test_the_default_entry_is_the_first_and_its_command_line_is_read():
    block, kernel, args = trial.default_entry(GRUB_CFG)
    assert kernel == "/boot/vmlinuz-6.12.117+deb13-amd64"
    assert args == PREVIOUS
    assert block[0].startswith("menuentry 'Debian GNU/Linux'") and block[-1] == "}"


def test_the_trial_entry_boots_the_new_line_and_what_brings_the_node_back():
    block, kernel, previous = trial.default_entry(GRUB_CFG)
    wanted, tried = trial.trial_args(previous, ["nohz_full=1-3", "console=ttyS1"], ["ro"], 10, 120, True)
    assert wanted == [PREVIOUS[0], "console=ttyS1", "nohz_full=1-3"]
    assert tried == wanted + ["panic=10", "systemd.watchdog_sec=120", "modules-load=softdog", "numa_kube.trial=1"]
    script = trial.entry_script(block, kernel, tried)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh" and lines[3] == 'exec tail -n +5 "$0"'
    assert lines[4] == "menuentry 'numa.kube trial: Debian GNU/Linux' --id numa-kube-trial {"
    assert "\tlinux\t/boot/vmlinuz-6.12.117+deb13-amd64 %s" % " ".join(tried) in lines
    # everything else of the default entry as it was: the modules, the root search, the initrd
    assert [line for line in lines[5:] if "linux\t" not in line] == [line for line in block[1:] if "linux\t" not in line]
    assert lines[-1] == "}"
    # without a watchdog, or where the node has one of its own
    assert trial.trial_args(previous, [], [], 5, 0, True)[1][-2:] == ["panic=5", "numa_kube.trial=1"]
    assert "modules-load=softdog" not in trial.trial_args(previous, [], [], 5, 60, False)[1]


def test_the_script_prints_the_entry_as_grub_mkconfig_runs_it(tmp_path):
    block, kernel, previous = trial.default_entry(GRUB_CFG)
    script = tmp_path / "45_numa_kube_trial"
    script.write_text(trial.entry_script(block, kernel, trial.trial_args(previous, [], [], 10, 0, True)[1]))
    printed = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=True, timeout=30).stdout
    assert printed.startswith("menuentry 'numa.kube trial: Debian GNU/Linux' --id numa-kube-trial {\n")
    assert printed.count("menuentry") == 1 and printed.endswith("}\n")


def test_the_changed_grub_defaults_go_where_update_grub_puts_them():
    """GRUB_CMDLINE_LINUX comes before GRUB_CMDLINE_LINUX_DEFAULT (quiet, on stock Debian and Ubuntu):
    the trial boots the order the kept default will have, or grub.cfg's check after the keep fails."""
    quiet = GRUB_CFG.replace("ro console=ttyS0 \n\techo\t'Loading initial", "ro console=ttyS0 quiet\n\techo\t'Loading initial")
    previous = trial.default_entry(quiet)[2]
    assert previous == PREVIOUS + ["quiet"]
    wanted, _tried = trial.trial_args(previous, ["nohz_full=1-3"], [], 10, 0, False,
                                      linux=(["console=ttyS0"], ["console=ttyS0", "nohz_full=1-3"]))
    assert wanted == [PREVIOUS[0], "ro", "console=ttyS0", "nohz_full=1-3", "quiet"]
    # empty defaults: right after root= and ro
    expected = [PREVIOUS[0], "ro", "nohz_full=1-3", "quiet"]
    assert trial.replace_run([PREVIOUS[0], "ro", "quiet"], [], ["nohz_full=1-3"]) == expected
    # a grub.cfg made from other defaults than the node has is refused
    with pytest.raises(trial.KernelTrialError, match="grub.cfg was made from other defaults"):
        trial.trial_args(previous, [], [], 10, 0, False, linux=(["console=ttyS1"], ["console=ttyS1", "x"]))


def test_the_running_line_is_compared_without_the_trials_own_parameters():
    kept = "BOOT_IMAGE=/boot/vmlinuz ro console=ttyS0 nohz_full=1-3 panic=10 systemd.watchdog_sec=120 numa_kube.trial=1"
    assert trial.running_args(kept) == ["ro", "console=ttyS0", "nohz_full=1-3"]
    # a panic= of the node's own stays where no trial booted
    assert trial.running_args("BOOT_IMAGE=/x ro panic=30") == ["ro", "panic=30"]


def test_the_regenerated_menu_is_checked_before_grub_is_told_to_boot_the_trial():
    block, kernel, previous = trial.default_entry(GRUB_CFG)
    tried = trial.trial_args(previous, ["nohz_full=1-3"], [], 10, 0, False)[1]
    staged = GRUB_CFG + "\n".join(trial.entry_script(block, kernel, tried).splitlines()[4:]) + "\n"
    assert trial.check_staged(staged, "", previous, tried) == []
    assert "holds 0 trial entries" in trial.check_staged(GRUB_CFG, "", previous, tried)[0]
    assert "not the" in trial.check_staged(staged, "", previous, tried[:-1])[0]
    assert "would fall back to a command line it never ran" in trial.check_staged(staged, "", previous + ["x"], tried)[0]


@pytest.mark.parametrize("asked", [["panic=0"], ["modules_load=x"], ["systemd.watchdog_sec=5"]])
def test_the_trials_own_parameters_cannot_be_asked_for_as_well(asked):
    with pytest.raises(trial.KernelTrialError, match="the trial boot sets these itself"):
        trial.trial_args(PREVIOUS, asked, [], 10, 120, True)
    with pytest.raises(trial.KernelTrialError, match="the trial boot sets these itself"):
        trial.trial_args(PREVIOUS, [], [asked[0].split("=")[0]], 10, 120, True)


@pytest.mark.parametrize("abstraction, fs, expected", [
    ("lvm", "ext2", "lies on lvm, where grub cannot write its environment block"),
    ("diskfilter mdraid1x", "ext2", "lies on diskfilter"),
    ("cryptodisk luks2", "ext2", "lies on cryptodisk and luks2"),
    ("", "btrfs", "is on btrfs, which grub cannot write at boot"),
    ("", "zfs", "is on zfs"),
])
def test_a_boot_folder_grub_cannot_write_is_refused_with_the_opt_in_named(abstraction, fs, expected):
    # what grub-probe --target=abstraction and --target=fs answer on such nodes
    reason = trial.check_grub_probe(abstraction + "\n", fs + "\n", "/boot/grub")
    assert expected in reason and "kernel_args_trial: false" in reason, reason


@pytest.mark.parametrize("abstraction, fs", [("", "ext2"), ("\n", "xfs\n"), ("part_msdos", "fat")])
def test_a_plain_boot_folder_is_fine(abstraction, fs):
    assert trial.check_grub_probe(abstraction, fs, "/boot/grub") is None


def test_another_default_entry_or_a_pending_one_time_boot_is_refused():
    other = GRUB_CFG.replace('set default="0"', 'set default="1>2"')
    with pytest.raises(trial.KernelTrialError, match="grub boots entry '1>2' by default, not the first"):
        trial.default_entry(other)
    saved = GRUB_CFG.replace('set default="0"', 'set default="${saved_entry}"')
    assert trial.default_entry(saved, "# GRUB Environment Block\nsaved_entry=\n")[2] == PREVIOUS
    with pytest.raises(trial.KernelTrialError, match="grub boots entry 'gnulinux-advanced"):
        trial.default_entry(saved, "saved_entry=gnulinux-advanced-x>gnulinux-6.1-x\n")
    with pytest.raises(trial.KernelTrialError, match="already names a one-time boot"):
        trial.default_entry(GRUB_CFG, "next_entry=1\n")
    # numa.kube's own, left by an interrupted run: the rollout's recover puts the block back first
    assert trial.default_entry(GRUB_CFG, "next_entry=numa-kube-trial\n")[2] == PREVIOUS


def test_ubuntus_vt_handoff_variable_is_copied_as_it_is():
    ubuntu = GRUB_CFG.replace("ro console=ttyS0 \n", "ro console=ttyS0 quiet splash $vt_handoff\n", 1)
    assert trial.default_entry(ubuntu)[2][-1] == "$vt_handoff"
    with pytest.raises(trial.KernelTrialError, match="with quotes or grub variables"):
        trial.default_entry(GRUB_CFG.replace("ro console=ttyS0 \n", "ro console=ttyS0 $other\n", 1))


def test_a_menu_without_entries_is_refused():
    with pytest.raises(trial.KernelTrialError, match="no top-level menuentry to copy"):
        trial.default_entry("set default=0\nblscfg\n")


def test_the_node_says_which_line_it_booted():
    assert trial.booted("BOOT_IMAGE=/boot/vmlinuz ro quiet panic=10 numa_kube.trial=1\n") == "trial"
    assert trial.booted("BOOT_IMAGE=/boot/vmlinuz ro quiet\n") == "previous"
    assert trial.shown("BOOT_IMAGE=/boot/vmlinuz ro quiet numa_kube.trial=1\n") == "ro quiet"


def test_once_kept_the_default_entry_must_boot_what_the_trial_booted():
    assert trial.check_committed(GRUB_CFG, "", PREVIOUS) == []
    found = trial.check_committed(GRUB_CFG, "", PREVIOUS + ["nohz_full=1-3"])
    assert len(found) == 1 and "not the %r the trial booted" % " ".join(PREVIOUS + ["nohz_full=1-3"]) in found[0]
    left = GRUB_CFG + "menuentry 'numa.kube trial: x' --id numa-kube-trial {\n}\n"
    assert any("still holds the trial entry" in problem for problem in trial.check_committed(left, "", PREVIOUS))


REBOOT = "/usr/sbin/grub-reboot"


def test_the_module_plans_reads_and_checks_on_recorded_files(tmp_path):
    cfg = tmp_path / "grub.cfg"
    cfg.write_text(GRUB_CFG)
    (tmp_path / "grubenv").write_text("# GRUB Environment Block\n" + "#" * 900)
    watchdogs = tmp_path / "watchdog"
    watchdogs.mkdir()
    defaults = tmp_path / "grub"
    defaults.write_text('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="console=ttyS0"\n')
    running = tmp_path / "running"
    running.write_text("BOOT_IMAGE=/boot/vmlinuz-6.12.117+deb13-amd64 %s\n" % " ".join(PREVIOUS))
    node = dict(grub_cfg_path=str(cfg), probe=False, watchdog_sysfs=str(watchdogs), grub_reboot=REBOOT,
                grub_default_path=str(defaults), proc_cmdline_path=str(running), grubenv_path=str(tmp_path / "grubenv"))
    failed, result = run_module(kernel_args_trial, dict(node, present=["nohz_full=1-3"]), check_mode=True)
    assert not failed, result
    assert result["changed"] is False and result["grubenv"] == str(tmp_path / "grubenv")
    assert result["wanted"] == PREVIOUS + ["nohz_full=1-3"] and result["softdog"] is True
    assert result["trial"][-4:] == ["panic=10", "systemd.watchdog_sec=120", "modules-load=softdog", "numa_kube.trial=1"]
    assert result["reboot_command"] == [REBOOT, "numa-kube-trial"] and result["entry_path"] == trial.ENTRY_PATH
    (watchdogs / "watchdog0").mkdir()  # a device of its own: no softdog
    failed, result = run_module(kernel_args_trial, node)
    assert not failed and "modules-load=softdog" not in result["trial"], result
    # grubby's entries, and a node that does not run its default entry, are refused
    failed, result = run_module(kernel_args_trial, dict(node, method="grubby"))
    assert failed and "not built yet: set kernel_args_trial: false" in result["msg"], result
    running.write_text("BOOT_IMAGE=/boot/vmlinuz ro console=ttyS1\n")
    failed, result = run_module(kernel_args_trial, node)
    assert failed and "a trial that fell back would boot a command line this node has not run" in result["msg"], result

    proc = tmp_path / "cmdline"
    proc.write_text("BOOT_IMAGE=/boot/vmlinuz ro panic=10 numa_kube.trial=1\n")
    failed, result = run_module(kernel_args_trial, dict(state="booted", proc_cmdline_path=str(proc)))
    assert not failed and result["booted"] == "trial" and result["running"] == "ro panic=10", result
    assert len(result["boot_id"]) == 36, result

    failed, result = run_module(kernel_args_trial, dict(state="committed", grub_cfg_path=str(cfg), wanted=["ro"]))
    assert failed and "grub.cfg's default entry boots" in result["msg"], result
    failed, result = run_module(kernel_args_trial, dict(node, panic_seconds=0))
    assert failed and "panic_seconds: 0 must be from 1 to 3600 seconds" in result["msg"], result
