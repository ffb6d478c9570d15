# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command lines booted on trial (the kernel_args role's kernel_args_trial), on numa-kubelet's
real grub, kernel, initramfs and systemd.

The converge's own change (numa_balancing=disable and the profile's parameters, in the reboot the
scenario makes anyway) went through a trial and was kept. Then two changes that must not stick: a
root device that does not exist, which the node cannot boot (Debian's initramfs gives up on it and,
told panic=, reboots: grub boots the previous default by itself), and systemd told to mask kubelet,
which boots but fails the health gate (the controller reboots the node back). Each prints both
command lines and what the node runs after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import kubernetes  # pinned in requirements-dev.txt: a missing client must fail the run, not skip it
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import boot_time, run_playbook, wait, wait_kubelet_healthy  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
CONSOLE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "numa-kubelet", "console.log")
NODE = "numa-kubelet"
ENTRY = "/etc/grub.d/45_numa_kube_trial"
GRUB_FILES = ["/etc/default/grub", "/boot/grub/grub.cfg", "/boot/grub/grubenv"]
MARKER = "/var/lib/numa-kube/rollout/marker.json"
TRIAL = "numa_kube.trial=1"


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


def default_entry_args(host):
    """The command line of grub.cfg's first entry, the one grub boots by default."""
    cfg = host.file("/boot/grub/grub.cfg").content_string
    entry = cfg[cfg.index("\nmenuentry "):]
    line = next(line for line in entry.splitlines() if line.strip().startswith("linux"))
    return line.split()[2:]


def cmdline(host):
    return host.file("/proc/cmdline").content_string.split()


def grubenv(host):
    return dict(line.split("=", 1) for line in host.check_output("grub-editenv /boot/grub/grubenv list").splitlines()
                if "=" in line)


def try_line(present, allow, **more):
    """site.yml's kernel_args part on numa-kubelet with ``present`` on trial (no drain: the pods stay)."""
    extra = dict({"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain": False,
                  "rollout_health_settle": 5, "kernel_args_present": present, "kernel_args_allow": allow,
                  "kernel_args_reboot_ok": True, "kernel_args_backup": False}, **more)
    done = run_playbook([os.path.join(ROOT, "playbooks", "site.yml"), "--limit", NODE, "--tags", "kernel_args",
                         "-e", json.dumps(extra)], timeout=1800)
    return done, done.stdout + done.stderr


def test_the_converges_change_was_booted_on_trial_and_kept(host):
    """The converge booted numa-kubelet's new command line from the trial entry (the marker, panic= and
    the watchdog on the running kernel's line: no boot since), then made it the default: grub.cfg's
    first entry has it, the trial entry and the one-time choice are gone, the watchdog is disarmed."""
    running, default = cmdline(host), default_entry_args(host)
    env = grubenv(host)
    watchdog = host.check_output("systemctl show -p RuntimeWatchdogUSec --value")
    armed = host.run("journalctl -b 0 -o cat -u init.scope --no-pager | grep -i -m 3 watchdog").stdout.strip()
    print("running:  %s\ndefault:  %s\ngrubenv:  %s\nwatchdog now: %s; this boot's journal: %s"
          % (" ".join(running), " ".join(default), env, watchdog, armed))
    assert TRIAL in running and "panic=10" in running and "systemd.watchdog_sec=120" in running, running
    assert "numa_balancing=disable" in default and any(arg.startswith("nohz_full=") for arg in default), default
    assert TRIAL not in default and not any(arg.startswith("panic=") for arg in default), default
    # what the trial booted, less its own parameters, is what the default boots
    assert [arg for arg in running if not arg.startswith("BOOT_IMAGE=")][:len(default)] == default
    assert not env.get("next_entry"), env
    assert not host.file(ENTRY).exists and "numa-kube-trial" not in host.file("/boot/grub/grub.cfg").content_string
    assert watchdog in ("0", "infinity", "0s"), "the trial's watchdog is disarmed once the change is kept"
    assert armed, "systemd ran the trial boot with its watchdog"


def test_a_command_line_that_cannot_boot_falls_back_by_itself(host, api):
    """root= names a device the node lacks: the initramfs gives up on it and reboots (panic=), grub
    boots the default again, the role sees the node back on its previous command line, fails the
    change and puts every file back; kubelet runs as before. That boot is the next the scenario makes
    after the converge: it carries the converge's command line."""
    before = [host.file(path).sha256sum for path in GRUB_FILES]
    booted, previous = boot_time(host), default_entry_args(host)
    console_at = os.path.getsize(CONSOLE)
    done, output = try_line(["numa_balancing=disable", "root=/dev/disk/by-label/numa-kube-missing"],
                            ["root"], kernel_args_trial_panic_seconds=3)
    fell = [line.strip() for line in output.splitlines() if "fell back to the previous command line" in line]
    with open(CONSOLE, errors="replace") as handle:
        handle.seek(console_at)
        console = [line.strip() for line in handle if "panic" in line.lower() or "does not exist" in line
                   or "Gave up waiting" in line]
    running = cmdline(host)
    print("%s\nthe console of the boot that failed:\n  %s\nrunning now: %s"
          % ("\n".join(fell[:2])[:1500], "\n  ".join(console[:6]), " ".join(running)))
    assert done.returncode != 0, "the change must fail"
    assert fell, output[-4000:]
    assert "Tried: " in fell[0] and "root=/dev/disk/by-label/numa-kube-missing" in fell[0], fell[0]
    assert any("Rebooting automatically due to panic= boot argument" in line for line in console), console
    assert boot_time(host) > booted, "the node rebooted"
    assert TRIAL not in running and "root=/dev/disk/by-label/numa-kube-missing" not in running
    assert [arg for arg in running if not arg.startswith("BOOT_IMAGE=")] == previous, "the previous default booted"
    assert [host.file(path).sha256sum for path in GRUB_FILES] == before, "grub's files are back byte for byte"
    assert not host.file(ENTRY).exists and not host.file(MARKER).exists
    wait_kubelet_healthy(host, settle=5)
    assert not api.read_node(NODE).spec.unschedulable


def test_a_trial_that_fails_its_health_gate_is_rebooted_back_from_the_controller(host, api):
    """systemd.mask=kubelet.service boots, but kubelet never starts: the gate fails, the files go back
    and the rollback reboots the node (its command line still has the trial's marker) onto the
    previous command line, where kubelet runs."""
    before = [host.file(path).sha256sum for path in GRUB_FILES]
    booted, previous = boot_time(host), default_entry_args(host)
    done, output = try_line(["numa_balancing=disable", "systemd.mask=kubelet.service"], ["systemd.mask"],
                            rollout_health_timeout=45)
    said = [line.strip() for line in output.splitlines() if "was rebooted onto the previous one" in line]
    running = cmdline(host)
    print("%s\nrunning now: %s" % ("\n".join(said[:1])[:1500], " ".join(running)))
    assert done.returncode != 0, "the change must fail"
    assert said, output[-4000:]
    assert "Reboot onto the boot configuration put back" in output
    assert boot_time(host) > booted
    assert TRIAL not in running and "systemd.mask=kubelet.service" not in running
    assert [arg for arg in running if not arg.startswith("BOOT_IMAGE=")] == previous
    assert [host.file(path).sha256sum for path in GRUB_FILES] == before
    assert not host.file(ENTRY).exists and not host.file(MARKER).exists
    wait_kubelet_healthy(host, settle=5)
    assert not api.read_node(NODE).spec.unschedulable
    wait("numa-kubelet Ready", lambda: [c for c in api.read_node(NODE).status.conditions
                                        if c.type == "Ready"][0].status == "True", timeout=120)
