# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command lines booted on trial (the kernel_args role's kernel_args_trial), on numa-kubelet's
real grub, kernel, initramfs and systemd.

The converge's own change (numa_balancing=disable and the profile's parameters, in the reboot the
scenario makes anyway) went through a trial and was kept. Then, in one run over both guests, two
changes that must not stick: a root device that does not exist, which numa-uneven cannot boot
(Debian's initramfs gives up on it and, told panic=, reboots: grub boots the previous default by
itself), and nr_cpus=2, which numa-kubelet boots but whose kubelet refuses its CPU Manager state, so
the health gate fails (the controller reboots the node back). The test prints both command lines
and what each node runs after.
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


def test_a_line_a_node_cannot_boot_falls_back_by_itself_and_one_that_fails_the_gate_is_rebooted_back(
        host, uneven, api):
    """One site.yml run changes both nodes in one batch, so their boots overlap.

    numa-uneven is given a root device it does not have: its initramfs gives up on it and, told
    panic=, reboots; grub boots the default entry again. The role finds the node back on its previous
    command line, fails its change and puts every file back.

    numa-kubelet is given nr_cpus=2: it boots, but its kubelet refuses the CPU Manager checkpoint
    that names CPUs 2 and 3 (the omni#3262 kind of failure), so the health gate fails; the files go
    back and the rollback reboots the node onto the previous command line - the converge's, the next
    boot the scenario makes after it - where kubelet runs."""
    guests = {NODE: host, UNEVEN: uneven}
    before = dict((name, [guest.file(path).sha256sum for path in GRUB_FILES]) for name, guest in guests.items())
    booted = dict((name, boot_time(guest)) for name, guest in guests.items())
    previous = dict((name, default_entry_args(guest)) for name, guest in guests.items())
    consoles = dict((name, os.path.getsize(CONSOLE % name)) for name in guests)
    present = ("{{ ['numa_balancing=disable', 'nr_cpus=2'] if inventory_hostname == '%s' else "
               "['root=/dev/disk/by-label/numa-kube-missing'] }}" % NODE)
    extra = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain": False,
             "rollout_health_settle": 5, "kernel_args_present": present, "kernel_args_allow": ["root", "nr_cpus"],
             "kernel_args_reboot_ok": True, "kernel_args_backup": False, "kernel_args_trial_panic_seconds": 3,
             "numa_kube_batch_size": 2,
             # numa-uneven's kubelet takes the converge's own settings (a drop-in); only its kernel changes here
             "kubelet_manage": "{{ inventory_hostname == '%s' }}" % NODE, "containerd_nri_manage": False}
    done = run_playbook([os.path.join(ROOT, "playbooks", "site.yml"), "--limit", "%s,%s" % (NODE, UNEVEN),
                         "--tags", "kernel_args", "-e", json.dumps(extra)], timeout=1800)
    output = done.stdout + done.stderr
    fell = [line.strip() for line in output.splitlines() if "fell back to the previous command line" in line]
    gate = [line.strip() for line in output.splitlines() if "was rebooted onto the previous one" in line]
    failed_boot = console_lines(CONSOLE % UNEVEN, consoles[UNEVEN], ("Command line:", "Gave up waiting", "does not exist",
                                                                     "Rebooting automatically"))
    running = dict((name, cmdline(guest)) for name, guest in guests.items())
    print("%s\nnuma-uneven's console from the boot that failed:\n  %s\n%s\nrunning now:\n  %s"
          % ("\n".join(fell[:1])[:1500], "\n  ".join(failed_boot[:8]), "\n".join(gate[:1])[:1500],
             "\n  ".join("%s: %s" % item for item in sorted((k, " ".join(v)) for k, v in running.items()))))
    assert done.returncode != 0, "both changes must fail"
    assert fell and UNEVEN in fell[0] and "Tried: " in fell[0] and "numa-kube-missing" in fell[0], output[-4000:]
    assert any("Rebooting automatically due to panic= boot argument" in line for line in failed_boot), failed_boot
    assert gate and "doesn't match with CPUs in state" in output, output[-4000:]
    assert "Reboot onto the boot configuration put back" in output
    for name, guest in guests.items():
        assert boot_time(guest) > booted[name], "%s rebooted" % name
        assert TRIAL not in running[name] and "nr_cpus=2" not in running[name], running[name]
        assert [arg for arg in running[name] if not arg.startswith("BOOT_IMAGE=")] == previous[name], \
            "%s runs its previous default" % name
        assert [guest.file(path).sha256sum for path in GRUB_FILES] == before[name], "grub's files back on %s" % name
        assert not guest.file(ENTRY).exists and not guest.file(MARKER).exists
        wait_kubelet_healthy(guest, settle=5)
        wait("%s Ready" % name, lambda: [c for c in api.read_node(name).status.conditions
                                         if c.type == "Ready"][0].status == "True", timeout=300)
        assert not api.read_node(name).spec.unschedulable
