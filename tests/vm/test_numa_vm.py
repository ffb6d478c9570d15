# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM launcher's own failure paths, with a real qemu: a boot that never answers SSH in time is
ended, tried again from a fresh overlay, and reported with its console; a ``stop`` while a boot is
still under way (a scenario whose create failed early) ends the launcher too; nothing is left
running."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VM = os.path.join(ROOT, "molecule", "resources", "vm")


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


def _launcher(image, workdir, accel):
    layout = json.dumps({"nodes": [{"cpus": 1, "memory_mb": 512}]})
    return subprocess.Popen([sys.executable, os.path.join(VM, "numa_vm.py"), "start", "--name=stopped-early",
                             "--workdir=" + workdir, "--image=" + image,
                             "--key=" + os.path.join(os.path.dirname(image), "id_ed25519"), "--layout=" + layout,
                             "--accel=" + accel, "--boot-timeout=300", "--boot-attempts=3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _appears(path, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("moment", ["launcher started", "qemu booting"])
def test_a_stop_during_a_boot_ends_the_launcher_and_leaves_no_qemu(image, tmp_path, moment):
    workdir = str(tmp_path / "vm")
    # the first moment: before the launcher's qemu exists (its KVM probe or overlay); the second:
    # qemu running, the guest not yet answering SSH. Before the launcher took stop's signal, the
    # first left a qemu started after the stop, the second a retry's fresh qemu.
    launcher = _launcher(image, workdir, "auto" if moment == "launcher started" else "tcg")
    try:
        if moment == "launcher started":
            assert _appears(workdir)  # made by the launcher as it starts
            time.sleep(0.5)
        else:
            assert _appears(os.path.join(workdir, "qemu.pid"))
        stop = subprocess.run([sys.executable, os.path.join(VM, "numa_vm.py"), "stop", "--workdir=" + workdir],
                              capture_output=True, text=True, check=False, timeout=200)
        assert stop.returncode == 0, stop
        # the stop returns once the launcher is gone
        assert launcher.poll() is not None, "the launcher still runs after stop returned"
        out, err = launcher.communicate(timeout=10)
        assert launcher.returncode == 143, (out, err)
        assert "the boot of stopped-early was stopped" in err
        assert out == ""
        time.sleep(3)  # a qemu started late would be up by now
        assert subprocess.run(["pgrep", "-f", "qemu-system.*" + workdir], check=False).returncode == 1
        for name in ("qemu.pid", "disk.qcow2", "instance.json", "launcher.pid"):
            assert not os.path.exists(os.path.join(workdir, name)), name
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        subprocess.run([sys.executable, os.path.join(VM, "numa_vm.py"), "stop", "--workdir=" + workdir],
                       capture_output=True, check=False, timeout=200)
