# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM launcher's own failure paths, with a real qemu: a boot that never answers SSH in time is
ended, tried again from a fresh overlay, and reported with its console; a ``stop`` while a boot is
still under way (a scenario whose create failed early) ends the launcher too; nothing is left
running."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VM = os.path.join(ROOT, "molecule", "resources", "vm")


@pytest.fixture(scope="module")
def numa_vm():
    sys.path.insert(0, VM)
    try:
        import numa_vm as module  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(VM)
    return module


# busy and asleep by turns, as a launcher is; on SIGTERM it goes on so for two seconds, then exits 143
_SLOW_TO_END = """
import signal, sys, time
def work(seconds):
    until = time.time() + seconds
    while time.time() < until:
        busy = time.time() + 0.005
        while time.time() < busy:
            pass
        time.sleep(0.005)
def ending(_signum, _frame):
    work(2)
    sys.exit(143)
signal.signal(signal.SIGTERM, ending)
print("ready", flush=True)
work(3600)
"""


def test_a_launcher_busy_ending_its_boot_is_waited_for_not_killed(numa_vm, tmp_path):
    # stop's wait once compared the process's state too: sleeping then running then sleeping again,
    # the launcher looked like another process and was killed (CI on 2026-11-28: -9 instead of 143)
    workdir = str(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", _SLOW_TO_END], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        started = numa_vm.process_identity(child.pid)
        seen = set()
        for _sample in range(400):
            seen.add(numa_vm.process_identity(child.pid))
            time.sleep(0.001)
        assert seen == {started}, "one process, one identity, running or asleep"
        with open(os.path.join(workdir, numa_vm.LAUNCHER_PID), "w") as handle:
            handle.write("%d %s %s\n" % (child.pid, started, os.path.realpath(workdir)))
        assert numa_vm.launcher_pid(workdir) == child.pid
        numa_vm.end_launcher(workdir, seconds=60)
        assert child.wait(timeout=10) == 143
        assert numa_vm.process_identity(child.pid) is None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.fixture(scope="module")
def image():
    built = subprocess.run(["bash", os.path.join(VM, "build-image.sh")], capture_output=True, text=True,
                           check=True, timeout=1800)
    return built.stdout.strip().splitlines()[-1]


def test_a_boot_that_does_not_answer_is_retried_then_reported_and_cleaned_up(image, tmp_path):
    workdir = str(tmp_path / "vm")
    layout = json.dumps({"nodes": [{"cpus": 1, "memory_mb": 512}]})
    run = subprocess.run([sys.executable, os.path.join(VM, "numa_vm.py"), "start", "--name=too-slow",
                          "--workdir=" + workdir, "--image=" + image,
                          "--key=" + os.path.join(os.path.dirname(image), "id_ed25519"), "--layout=" + layout,
                          "--boot-timeout=4", "--boot-attempts=2"],
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 1, run
    assert run.stdout == ""
    assert "did not boot in 2 attempts" in run.stderr
    assert "attempt 1: no SSH answer within 4 s" in run.stderr
    assert "attempt 2: no SSH answer within 4 s" in run.stderr
    for attempt in (1, 2):
        assert os.path.getsize(os.path.join(workdir, "console.attempt%d.log" % attempt)) > 0
    # nothing left behind: no qemu, no overlay, no instance record
    for name in ("qemu.pid", "disk.qcow2", "instance.json"):
        assert not os.path.exists(os.path.join(workdir, name)), name
    assert subprocess.run(["pgrep", "-f", "qemu-system.*" + workdir], check=False).returncode == 1


def test_a_layout_without_cpus_is_refused_before_qemu_starts(image, tmp_path):
    workdir = str(tmp_path / "vm")
    run = subprocess.run([sys.executable, os.path.join(VM, "numa_vm.py"), "start", "--name=no-cpus",
                          "--workdir=" + workdir, "--image=" + image, "--key=unused",
                          "--layout=" + json.dumps({"nodes": [{"cpus": 0, "memory_mb": 512}]})],
                         capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode != 0
    assert "the layout has no CPUs" in run.stderr
    assert not os.path.exists(os.path.join(workdir, "disk.qcow2"))


def _launcher(image, workdir, *extra, **popen):
    layout = json.dumps({"nodes": [{"cpus": 1, "memory_mb": 512}]})
    return subprocess.Popen([sys.executable, os.path.join(VM, "numa_vm.py"), "start", "--name=stopped-early",
                             "--image=" + image, "--key=" + os.path.join(os.path.dirname(image), "id_ed25519"),
                             "--layout=" + layout, "--accel=tcg", "--boot-timeout=300", "--boot-attempts=3"]
                            + list(extra) + workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _stop(workdir):
    return subprocess.run([sys.executable, os.path.join(VM, "numa_vm.py"), "stop", "--workdir=" + workdir],
                          capture_output=True, text=True, check=False, timeout=300)


def _ended_by_the_stop(launcher, workdir, seconds):
    """The launcher exits 143 within ``seconds``, saying why, and nothing of the guest is left."""
    out, err = launcher.communicate(timeout=seconds)
    assert launcher.returncode == 143, (out, err)
    assert "the boot of stopped-early was stopped" in err
    assert out == ""
    time.sleep(3)  # a qemu started late would be up by now
    assert subprocess.run(["pgrep", "-f", "qemu-system.*" + workdir], check=False).returncode == 1
    for name in ("qemu.pid", "disk.qcow2", "instance.json", "launcher.pid"):
        assert not os.path.exists(os.path.join(workdir, name)), name


@contextlib.contextmanager
def _cleaned_up(launcher, workdir):
    try:
        yield launcher
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        _stop(workdir)


def test_a_stop_made_before_its_launcher_ran_ends_that_boot(image, tmp_path):
    # create.yml's order when the create fails at once: the boot is decided (--started-at), destroy's
    # stop runs, and only then the launcher (started in the background) gets going
    workdir = str(tmp_path / "vm")
    decided = time.time()
    assert _stop(workdir).returncode == 0
    with _cleaned_up(_launcher(image, ["--workdir=" + workdir], "--started-at=%f" % decided), workdir) as launcher:
        _ended_by_the_stop(launcher, workdir, 60)


def test_a_stop_while_qemu_boots_ends_the_launcher_and_leaves_no_qemu(image, tmp_path):
    workdir = str(tmp_path / "vm")
    # a stop from an earlier run does not cancel a later start (no --started-at: since the launcher began)
    assert _stop(workdir).returncode == 0
    time.sleep(1.2)
    # the launcher names its directory relative to its own, in two words; stop names it absolute
    with _cleaned_up(_launcher(image, ["--workdir", "vm"], cwd=str(tmp_path)), workdir) as launcher:
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(workdir, "qemu.pid")) and time.time() < deadline:
            assert launcher.poll() is None, launcher.communicate()
            time.sleep(0.1)
        assert os.path.exists(os.path.join(workdir, "qemu.pid"))
        stop = _stop(workdir)
        assert stop.returncode == 0, stop
        # stop returns once the launcher is gone: before it did, the launcher retried with a fresh qemu
        _ended_by_the_stop(launcher, workdir, 10)
