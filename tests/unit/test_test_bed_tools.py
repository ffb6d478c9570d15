# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test tiers' own tools: each step's time (tools/steps.sh), molecule's phases timed
(tools/molecule_steps.py), the boots and drains a scenario cost (tools/bed_counts.py), and the run's time
guard (tools/run-tiers), which must stop a run itself and say where before CI cuts it off."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.path.join(ROOT, "tools")

# these tests time real threads, sockets or processes: they run in the foreground (tools/run-tiers timed)
pytestmark = pytest.mark.wall_clock


def bash(script, **env):
    return subprocess.run(["bash", "-c", "set -euo pipefail; source %s/steps.sh; %s" % (TOOLS, script)],
                          capture_output=True, text=True, timeout=60, check=False, env=dict(os.environ, **env))


def test_a_step_says_when_it_started_and_how_long_it_took_and_keeps_its_status():
    done = bash('step "sleep a little" sleep 1; echo out')
    assert done.returncode == 0 and done.stdout == "out\n", done
    began, took = done.stderr.splitlines()
    assert began.startswith("step: sleep a little started ") and len(began.rsplit(" ", 1)[1]) == 8, began
    assert took in ("step: sleep a little took 1 s", "step: sleep a little took 2 s"), took
    failed = bash('step "a failing one" false')
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1].startswith("step: a failing one failed (exit 1) after "), failed.stderr


def test_phases_end_the_one_before_and_the_last_is_ended_by_an_empty_name():
    done = bash('phase one; phase two; phase ""')
    # bash's SECONDS counts whole seconds of the clock, so a phase that takes no time at all can still be
    # said to take 1 s when the clock's second turns inside it
    lines = [line.rsplit(" ", 1)[0] if "started" in line else re.sub(r"took [01] s$", "took 0-1 s", line)
             for line in done.stderr.splitlines()]
    assert lines == ["step: one started", "step: one took 0-1 s", "step: two started", "step: two took 0-1 s"], done.stderr


def test_open_steps_are_those_begun_and_not_ended_in_their_order(tmp_path):
    log = tmp_path / "tier.log"
    log.write_text("step: go build (kube) started 10:00:00\nstep: go build (stacks) started 10:00:00\n"
                   "noise\nstep: go build (kube) took 59 s\n\u2502 step: molecule verify started 10:20:00\n"
                   "step: guest image started 10:00:01\nstep: guest image failed (exit 2) after 3 s\n")
    assert bash("open_steps %s" % log).stdout == "go build (stacks), molecule verify"
    log.write_text("step: a started 10:00:00\nstep: a took 1 s\n")
    assert bash("open_steps %s" % log).stdout == ""


def test_molecule_steps_times_each_action_and_copies_every_line():
    text = ("INFO     cluster \u279c create: Executing\nPLAY [Create]\n"
            "INFO     cluster \u279c create: Executed: Successful\n"
            "\x1b[32mINFO\x1b[0m     cluster \u279c verify: Executing\n"
            "ERROR    cluster \u279c verify: Executed: Failed\n")
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "molecule_steps.py")], input=text, capture_output=True,
                          text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    assert [line for line in lines if not line.startswith("step: ")] == text.splitlines()
    steps = [line.rsplit(" ", 1)[0] if " started " in line else line for line in lines if line.startswith("step: ")]
    assert steps == ["step: molecule create started", "step: molecule create took 0 s",
                     "step: molecule verify started", "step: molecule verify failed after 0 s"], steps

    # molecule's plain form (no colours: TERM unset or dumb and output to a pipe, as in CI), and
    # the other ends: counted states, a missing playbook
    text = ("INFO     [cluster > converge] Executing\nok: [numa-kubelet]\n"
            "INFO     [cluster > converge] Executed: Successful\n"
            "INFO     [cluster > verify] Executing\nINFO     [cluster > verify] Executed: 2 successful\n"
            "INFO     [cluster > cleanup] Executing\n"
            "WARNING  [cluster > cleanup] Executed: Missing playbook (Remove from test_sequence to suppress)\n"
            "INFO     [cluster > side_effect] Executing\n"
            "ERROR    [cluster > side_effect] Executed: 1 successful, 1 failed\n")
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "molecule_steps.py")], input=text, capture_output=True,
                          text=True, timeout=60, check=True)
    steps = [line.rsplit(" ", 1)[0] if " started " in line else line for line in done.stdout.splitlines()
             if line.startswith("step: ")]
    assert steps == ["step: molecule converge started", "step: molecule converge took 0 s",
                     "step: molecule verify started", "step: molecule verify took 0 s",
                     "step: molecule cleanup started", "step: molecule cleanup took 0 s",
                     "step: molecule side_effect started", "step: molecule side_effect failed after 0 s"], steps


def audit_event(verb, resource, name, request=None, subresource=None, user="numa-kube-admin", code=200):
    ref = {"resource": resource, "name": name}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps({"stage": "ResponseComplete", "user": {"username": user}, "verb": verb, "objectRef": ref,
                       "responseStatus": {"code": code}, "requestObject": request})


def test_bed_counts_reads_boots_from_the_consoles_and_drains_from_the_audit_log(tmp_path):
    for guest, console, attempts in (("numa-kubelet", "Linux version 6\nx\nLinux version 6\n", 0),
                                     ("numa-uneven", "Linux version 6\n", 1)):
        (tmp_path / guest).mkdir()
        (tmp_path / guest / "console.log").write_text(console)
        for attempt in range(attempts):
            (tmp_path / guest / ("console.attempt%d.log" % (attempt + 1))).write_text("Linux version 6\n")
    (tmp_path / "control-plane").mkdir()
    events = [audit_event("patch", "nodes", "numa-kubelet", {"spec": {"unschedulable": True}}),
              audit_event("create", "pods", "p", subresource="eviction"),
              audit_event("patch", "nodes", "numa-kubelet", {"spec": {"unschedulable": False}}),
              audit_event("patch", "nodes", "numa-uneven", {"spec": {"unschedulable": True}}),
              # not numa.kube's, refused, or not a cordon: not counted
              audit_event("patch", "nodes", "numa-uneven", {"spec": {"unschedulable": True}}, user="admin"),
              audit_event("patch", "nodes", "numa-uneven", {"spec": {"unschedulable": True}}, code=409),
              audit_event("patch", "nodes", "numa-uneven", {"metadata": {"labels": {"a": "b"}}}),
              "not json"]
    (tmp_path / "control-plane" / "audit.log").write_text("\n".join(events) + "\n")
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "bed_counts.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "test bed: guest boots numa-kubelet 2, numa-uneven 1 (after 1 failed attempts)",
        "test bed: drains by numa.kube 2 (numa-kubelet 1, numa-uneven 1), evictions 1"], done.stdout


def run_tiers(tmp_path, *tiers, **env):
    env = dict(os.environ, NUMA_KUBE_TIER_LOGS=str(tmp_path / "logs"), NUMA_KUBE_RUN_LOGS=str(tmp_path / "runs"),
               **env)
    started = time.monotonic()
    done = subprocess.run(["bash", os.path.join(TOOLS, "run-tiers")] + list(tiers), capture_output=True, text=True,
                          timeout=300, check=False, env=env, cwd=ROOT)
    return done, time.monotonic() - started


def test_the_guard_stops_a_run_that_is_past_its_limit_before_the_next_tier(tmp_path):
    done, _seconds = run_tiers(tmp_path, "lint", "units", NUMA_KUBE_RUN_STARTED=str(int(time.time()) - 100),
                               NUMA_KUBE_RUN_LIMIT="60")
    assert done.returncode == 1, done
    assert "=== the run reached its limit of 1 min (60 s)" in done.stdout, done.stdout
    assert "stopped in tier lint, before it began" in done.stdout, done.stdout
    assert "lint: STOPPED by the run's time guard" in done.stdout
    assert "tier: lint" not in done.stdout and not os.path.exists(str(tmp_path / "logs" / "lint.log"))


def test_the_guard_ends_a_tier_under_way_and_names_it(tmp_path):
    # the lint tier (yamllint, then ansible-lint over the whole collection) takes longer than 3 s
    done, seconds = run_tiers(tmp_path, "lint", NUMA_KUBE_RUN_STARTED=str(int(time.time())), NUMA_KUBE_RUN_LIMIT="3")
    assert done.returncode == 1, done
    assert "stopped in tier lint, step (none begun)" in done.stdout, done.stdout
    assert "lint: STOPPED by the run's time guard after" in done.stdout
    assert seconds < 60, "the tier was not ended at the limit: %d s" % seconds
    # its process group went with it: no process of that run is left
    assert processes_with(("NUMA_KUBE_TIER_LOGS=%s" % (tmp_path / "logs")).encode()) == []


def processes_with(marker):
    """The ids of the processes whose environment holds ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_an_interrupt_ends_the_tier_under_way_and_the_run(tmp_path):
    """The tier runs in a process group of its own (the guard's), which Ctrl-C at a terminal no longer
    reaches: run-tiers passes the signal on, and stops the run after the tier instead of going on."""
    env = dict(os.environ, NUMA_KUBE_TIER_LOGS=str(tmp_path / "logs"), NUMA_KUBE_RUN_LOGS=str(tmp_path / "runs"))
    run = subprocess.Popen(["bash", os.path.join(TOOLS, "run-tiers"), "lint", "units"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not os.path.exists(str(tmp_path / "logs" / "lint.log")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    run.send_signal(2)
    output = run.communicate(timeout=120)[0]
    assert run.returncode == 130, output
    assert "=== stopped by a signal in tier lint" in output, output
    assert "tier: units" not in output, output
    assert processes_with(("NUMA_KUBE_TIER_LOGS=%s" % (tmp_path / "logs")).encode()) == []


def test_a_tier_beside_the_others_that_fails_fails_the_run_and_says_why(tmp_path):
    done, _seconds = run_tiers(tmp_path, "--beside", "no-such-tier")
    assert done.returncode == 1, done
    assert "no-such-tier: FAILED after" in done.stdout and "(beside the others)" in done.stdout, done.stdout
    assert "=== why no-such-tier failed" in done.stdout and "command not found" in done.stdout, done.stdout


def test_a_tier_beside_the_others_that_fails_ends_the_tier_under_way(tmp_path):
    """A failing unit test beside the scenario must not leave the run going for the scenario's 40 minutes."""
    done, seconds = run_tiers(tmp_path, "--beside", "no-such-tier", "lint")
    assert done.returncode == 1, done
    assert "=== tier lint ended after" in done.stdout and "a tier beside the others failed" in done.stdout, done.stdout
    assert "lint: ENDED after" in done.stdout and "no-such-tier: FAILED after" in done.stdout, done.stdout
    assert seconds < 30, "lint ran on for %d s" % seconds
    time.sleep(1)
    assert processes_with(("NUMA_KUBE_TIER_LOGS=%s" % (tmp_path / "logs")).encode()) == []


def test_a_failed_tier_ends_the_tiers_beside_it(tmp_path):
    done, seconds = run_tiers(tmp_path, "--beside", "lint", "no-such-tier")
    assert done.returncode == 1, done
    assert "no-such-tier: FAILED after" in done.stdout, done.stdout
    assert seconds < 30, "the run waited for lint beside it: %d s" % seconds
    time.sleep(1)  # the tier's timeout passes the TERM on to its group
    assert processes_with(("NUMA_KUBE_TIER_LOGS=%s" % (tmp_path / "logs")).encode()) == []


def autogroup_nice(pid):
    """The nice value of the autogroup the process runs in.

    None where the kernel has no autogroups, and for the first session, which init's default group holds.
    """
    try:
        with open("/proc/%d/autogroup" % pid) as handle:
            return int(handle.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_tier_beside_the_others_runs_at_idle_priority_under_the_guard(tmp_path):
    env = dict(os.environ, NUMA_KUBE_TIER_LOGS=str(tmp_path / "logs"), NUMA_KUBE_RUN_LOGS=str(tmp_path / "runs"),
               NUMA_KUBE_RUN_STARTED=str(int(time.time())), NUMA_KUBE_RUN_LIMIT="8")
    run = subprocess.Popen(["bash", os.path.join(TOOLS, "run-tiers"), "--beside", "lint"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    marker = ("NUMA_KUBE_TIER_LOGS=%s" % (tmp_path / "logs")).encode()
    policies = set()
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline and not policies:
        for pid in processes_with(marker):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as handle:
                    argv = handle.read().split(b"\0")
                if argv[0] == b"bash" and b"--body" in argv:  # the tier's body (timeout and chrt start it)
                    policies.add((os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid), autogroup_nice(pid)))
            except OSError:
                continue
        time.sleep(0.1)
    output = run.communicate(timeout=120)[0]
    # A process in the first session (as under CI's runner) reads nothing from its own autogroup file, so
    # whether the kernel has autogroups at all is told by the file's presence, not by this process's read.
    expected_group_nice = 19 if os.path.exists("/proc/self/autogroup") else None
    assert policies == {(os.SCHED_IDLE, 19, expected_group_nice)}, policies
    assert run.returncode == 1, output
    assert "lint: STOPPED by the run's time guard after" in output and "(beside the others)" in output, output
    assert "stopped in tier lint (beside the others)" in output, output
    time.sleep(1)
    assert processes_with(marker) == []
