# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command lines booted on trial (the kernel_args role's kernel_args_trial), on numa-kubelet's
real grub, kernel, initramfs and systemd.

The converge's own change (numa_balancing=disable and the profile's parameters, in the reboot the
scenario makes anyway) went through a trial and was kept. Then two changes that must not stick, each
in a run of its own on its node, the two at once (conftest.py's lanes): a root mount option ext4
does not know, which numa-uneven cannot boot (Debian's initramfs fails to mount its root and, told
panic=, reboots: grub boots the previous default by itself), and nr_cpus=2, which numa-kubelet boots
but whose kubelet refuses its CPU Manager state, so the health gate fails (the controller reboots
the node back). Each test prints the command line its node runs after.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import kubernetes  # pinned in requirements-dev.txt: a missing client must fail the run, not skip it
import pytest
import testinfra

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import boot_time, run_playbook, wait, wait_kubelet_healthy  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
CONSOLE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "%s", "console.log")
NODE = "numa-kubelet"
UNEVEN = "numa-uneven"
ENTRY = "/etc/grub.d/45_numa_kube_trial"
GRUB_FILES = ["/etc/default/grub", "/boot/grub/grub.cfg", "/boot/grub/grubenv"]
MARKER = "/var/lib/numa-kube/rollout/marker.json"
TRIAL = "numa_kube.trial=1"


@pytest.fixture(scope="module")
def uneven():
    return testinfra.get_host("ansible://" + UNEVEN, ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])


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


def test_the_converges_change_was_booted_on_trial_and_kept(host):
    """The converge booted numa-kubelet's new command line from the trial entry (the marker, panic= and
    the watchdog on the running kernel's line: no boot since), then made it the default: grub.cfg's
    first entry has it, the trial entry and the one-time choice are gone, and the kernel's panic
    timeout and systemd's watchdog are back as the node had them before the trial."""
    running, default = cmdline(host), default_entry_args(host)
    env = grubenv(host)
    watchdog, reboot_watchdog, kexec_watchdog = host.check_output(
        "systemctl show -p RuntimeWatchdogUSec,RebootWatchdogUSec,KExecWatchdogUSec --value").split()
    panic = host.file("/proc/sys/kernel/panic").content_string.strip()
    armed = host.run("journalctl -b 0 -o cat -u init.scope --no-pager | grep -i -m 3 watchdog").stdout.strip()
    print("running:  %s\ndefault:  %s\ngrubenv:  %s\npanic timeout now: %s; watchdogs now (runtime, reboot, kexec): "
          "%s %s %s; this boot's journal: %s"
          % (" ".join(running), " ".join(default), env, panic, watchdog, reboot_watchdog, kexec_watchdog, armed))
    assert TRIAL in running and "panic=10" in running and "systemd.watchdog_sec=120" in running, running
    assert "numa_balancing=disable" in default and any(arg.startswith("nohz_full=") for arg in default), default
    assert TRIAL not in default and not any(arg.startswith("panic=") for arg in default), default
    # what the trial booted, less its own parameters, is what the default boots
    assert [arg for arg in running if not arg.startswith("BOOT_IMAGE=")][:len(default)] == default
    assert not env.get("next_entry"), env
    assert not host.file(ENTRY).exists and "numa-kube-trial" not in host.file("/boot/grub/grub.cfg").content_string
    # Debian's own watchdogs (the trial's 2 min on all three until then); the panic timeout is kubelet's
    # (it sets kernel.panic to 10 s when it starts: container_manager_linux.go), and so the trial's too
    assert watchdog in ("0", "0s") and kexec_watchdog in ("0", "0s"), (watchdog, kexec_watchdog)
    assert reboot_watchdog == "10min", reboot_watchdog
    assert armed, "systemd ran the trial boot with its watchdog"


def console_lines(path, start, words):
    with open(path, errors="replace") as handle:
        handle.seek(start)
        return [line.strip() for line in handle if any(word in line for word in words)]


def failed_trial(name, guest, api, present, **extra):
    """One site.yml run on ``name`` alone whose kernel change (``present``) must fail its trial; returns
    the run's output and the node's running command line once the run has put it back. Asserts what
    both kinds of failure share: the node rebooted (or fell back) onto its previous default line, grub's
    files and the record as before, kubelet healthy, the Node Ready and schedulable."""
    before = [guest.file(path).sha256sum for path in GRUB_FILES]
    booted, previous = boot_time(guest), default_entry_args(guest)
    settings = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain": False,
                "rollout_health_settle": 5, "kernel_args_present": present, "kernel_args_allow": ["rootflags", "nr_cpus"],
                "kernel_args_reboot_ok": True, "kernel_args_backup": False, "kernel_args_trial_panic_seconds": 3,
                "containerd_nri_manage": False}
    settings.update(extra)
    done = run_playbook([os.path.join(ROOT, "playbooks", "site.yml"), "--limit", name, "--tags", "kernel_args",
                         "-e", json.dumps(settings)], timeout=1800)
    output = done.stdout + done.stderr
    running = cmdline(guest)
    print("%s runs now: %s" % (name, " ".join(running)))
    assert done.returncode != 0, "the change must fail"
    assert boot_time(guest) > booted, "%s rebooted" % name
    assert TRIAL not in running and not [arg for arg in present if arg in running and arg not in previous], running
    assert [arg for arg in running if not arg.startswith("BOOT_IMAGE=")] == previous, "%s runs its previous default" % name
    assert [guest.file(path).sha256sum for path in GRUB_FILES] == before, "grub's files back on %s" % name
    assert not guest.file(ENTRY).exists and not guest.file(MARKER).exists
    wait_kubelet_healthy(guest, settle=5)
    wait("%s Ready" % name, lambda: [c for c in api.read_node(name).status.conditions
                                     if c.type == "Ready"][0].status == "True", timeout=300)
    assert not api.read_node(name).spec.unschedulable
    return output


# numa-uneven alone: first in the lane beside the next test's (conftest.py), so the two trials' boots overlap
@pytest.mark.beside(first=True)
def test_a_line_a_node_cannot_boot_falls_back_by_itself(uneven, api):
    """numa-uneven is given a root mount option ext4 refuses: its initramfs fails to mount the root file
    system and, told panic=, reboots; grub boots the default entry again. (A root device it does not
    have fails the same way after the initramfs' 30 s wait for it.) The role finds the node back on its
    previous command line, fails its change and puts every file back. It runs beside the next test,
    so the two guests' boots overlap."""
    console = os.path.getsize(CONSOLE % UNEVEN)
    # its kubelet keeps the converge's own settings (a drop-in); only its kernel changes here
    output = failed_trial(UNEVEN, uneven, api, ["rootflags=numa_kube_missing"], kubelet_manage=False)
    fell = [line.strip() for line in output.splitlines() if "fell back to the previous command line" in line]
    failed_boot = console_lines(CONSOLE % UNEVEN, console, ("Command line:", "Failed to mount", "numa_kube_missing",
                                                            "Rebooting automatically"))
    print("%s\nnuma-uneven's console from the boot that failed:\n  %s"
          % ("\n".join(fell[:1])[:1500], "\n  ".join(failed_boot[:8])))
    assert fell and UNEVEN in fell[0] and "Tried: " in fell[0] and "rootflags=numa_kube_missing" in fell[0], output[-4000:]
    assert any("Failed to mount" in line for line in failed_boot), failed_boot
    assert any("Rebooting automatically due to panic= boot argument" in line for line in failed_boot), failed_boot


# numa-kubelet alone: first in the lane of test_kubelet.py (conftest.py), its boots beside those of
# numa-uneven's trial in the other lane
@pytest.mark.with_beside(first=True)
def test_a_line_that_fails_the_gate_is_rebooted_back(host, api):
    """numa-kubelet is given nr_cpus=2: it boots, but its kubelet refuses the CPU Manager checkpoint
    that names CPUs 2 and 3 (the omni#3262 kind of failure), so the health gate fails; the files go
    back and the rollback reboots the node onto the previous command line - the converge's, the next
    boot the scenario makes after it - where kubelet runs."""
    output = failed_trial(NODE, host, api, ["numa_balancing=disable", "nr_cpus=2"])
    gate = [line.strip() for line in output.splitlines() if "was rebooted onto the previous one" in line]
    print("\n".join(gate[:1])[:1500])
    assert gate and "doesn't match with CPUs in state" in output, output[-4000:]
    assert "Reboot onto the boot configuration put back" in output
