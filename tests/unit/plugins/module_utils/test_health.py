# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settle rule: healthy only when /healthz stays ok with one process; kubelet's error lines."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.kubelet.health import error_lines, refusal, wait_healthy


class Clock:
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run(timeline, timeout=60, settle=10, started=None, start=0.0, refused=None):
    """``timeline(t)`` -> (ok, pid) at time t; ``started(pid)`` -> when that process started;
    ``refused(since, now)`` -> a refusal line or None (the ended process's ID is left out here)."""
    clock = Clock()
    clock.now = start
    age = (lambda pid: clock.now - started(pid)) if started else None
    asked = (lambda pid, since: refused(since, clock.now)) if refused else None
    return wait_healthy(lambda: (timeline(clock.now)[0], "x"), lambda: timeline(clock.now)[1], clock.time,
                        clock.sleep, timeout, settle, age=age, refused=asked)


REFUSAL = ('E1122 10:00:01.000000 1 run.go:72] "command failed" err="failed to run Kubelet: the total amount '
           '\\"600Mi\\" of type \\"memory\\" is not equal to the value \\"612Mi\\" determined by Node Allocatable feature"')
RUNTIME_DOWN = ('E1122 10:00:01.000000 1 run.go:72] "command failed" err="failed to run Kubelet: validate service '
                'connection: validate CRI v1 runtime API for endpoint \\"unix:///run/containerd/containerd.sock\\": '
                'rpc error: code = Unavailable desc = connection error"')


def crash_loop(t):
    """A kubelet that runs 4 s from each start, answering nothing, and is started again 4 s later
    (pid 1000 from t=0, 1001 from t=8, ...): the gaps show as no main process."""
    return (False, 1000 + int(t) // 8 if int(t) % 8 < 4 else 0)


def test_a_refusal_of_the_process_that_ended_stops_the_wait_before_the_timeout():
    asked = []

    def refused(since, now):
        asked.append((since, now))
        return REFUSAL

    result = run(crash_loop, timeout=300, started=lambda pid: (pid - 1000) * 8.0, refused=refused)
    # the first process ends at t=4: seen at the poll after it, its own lines asked for from its start
    assert not result["healthy"] and result["refused"] == REFUSAL
    assert result["waited"] < 10 and result["pids"] == [1000]
    assert asked == [(0.0, 4.0)]


def test_an_ending_for_another_reason_is_waited_on_and_each_process_is_asked_once():
    asked = []

    def refused(since, now):
        asked.append(since)
        return None

    result = run(crash_loop, timeout=40, started=lambda pid: (pid - 1000) * 8.0, refused=refused)
    assert not result["healthy"] and result["refused"] is None and result["waited"] >= 40
    # one question per process that ended (pids 1000 to 1004 ended by t=40), from that process's start
    assert asked == [0.0, 8.0, 16.0, 24.0, 32.0]


def test_the_runtime_not_answering_is_no_refusal_but_a_bad_reservation_is():
    assert refusal(RUNTIME_DOWN) is None
    assert refusal("\n".join([RUNTIME_DOWN, REFUSAL, "kubelet.service: Main process exited, code=exited"])) == REFUSAL
    checkpoint = ('E1122 10:00:01.000000 1 cpu_manager.go:1] "Failed to start" err="could not restore state from '
                  'checkpoint: configured policy \\"static\\" differs from state checkpoint policy \\"none\\""')
    assert refusal(checkpoint) == checkpoint
    # the static CPU Manager on a node with fewer CPUs online than its checkpoint names (policy_static.go)
    fewer = ('E1129 10:00:01.000000 7 policy_static.go:200] "invalid state, please drain node and remove policy state '
             'file" err="current set of available CPUs \\"0-1\\" doesn\'t match with CPUs in state \\"0-3\\""')
    assert refusal(fewer, pid=7) == fewer and refusal(fewer, pid=8) is None
    assert refusal("") is None


def test_a_healthy_kubelet_is_never_asked_for_a_refusal():
    result = run(lambda t: (t >= 6, 100), refused=lambda since, now: REFUSAL)
    assert result["healthy"] and result["refused"] is None


def test_the_settle_counts_from_the_process_start_when_its_age_is_known():
    # kubelet (pid 100) started at t=0 and answers ok from t=6; the check begins at t=30: one answer
    result = run(lambda t: (t >= 6, 100), started=lambda pid: 0.0, start=30.0)
    assert result["healthy"] and result["waited"] == 0 and result["pids"] == [100]
    # begun at t=4, two seconds before the first ok: healthy 10 s after the start, not after the first ok
    result = run(lambda t: (t >= 6, 100), started=lambda pid: 0.0, start=4.0)
    assert result["healthy"] and result["waited"] == 6


def test_a_crash_loop_stays_unhealthy_when_each_process_is_young():
    result = run(lambda t: (int(t) % 8 < 4, 1000 + int(t) // 8), started=lambda pid: (pid - 1000) * 8.0)
    assert not result["healthy"] and len(result["pids"]) > 3


def test_healthy_after_settling_with_one_process():
    result = run(lambda t: (t >= 6, 100))
    assert result["healthy"] and 16 <= result["waited"] <= 18 and result["pids"] == [100]


def test_a_crash_loop_that_answers_ok_briefly_is_not_healthy():
    # ok for 4 s after every start, then the process dies and systemd starts a new one
    result = run(lambda t: (int(t) % 8 < 4, 1000 + int(t) // 8))
    assert not result["healthy"] and len(result["pids"]) > 3


def test_never_answering_times_out():
    result = run(lambda t: (False, 0), timeout=20)
    assert not result["healthy"] and result["waited"] >= 20 and result["pids"] == []


def test_error_lines_keep_kubelet_errors_only():
    journal = "\n".join([
        'I1122 10:00:00.000000 1 server.go:1] "Starting"',
        'E1122 10:00:01.000000 1 run.go:72] "command failed" err="failed to run Kubelet: the total amount '
        '\\"600Mi\\" of type \\"memory\\" is not equal to the value \\"612Mi\\" determined by Node Allocatable feature"',
        'E1122 10:00:01.000000 1 run.go:72] "command failed" err="failed to run Kubelet: the total amount '
        '\\"600Mi\\" of type \\"memory\\" is not equal to the value \\"612Mi\\" determined by Node Allocatable feature"',
        "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
    ])
    lines = error_lines(journal)
    assert len(lines) == 1 and "Node Allocatable" in lines[0]
    assert error_lines("", 5) == []
    many = "\n".join("E1122 line %d" % i for i in range(20))
    assert error_lines(many, 3) == ["E1122 line 17", "E1122 line 18", "E1122 line 19"]


def test_a_refusal_counts_only_from_the_process_that_ended_and_only_kubelets_own():
    # REFUSAL was written by process 1 (klog's header names it)
    assert refusal(REFUSAL, pid=1) == REFUSAL
    assert refusal(REFUSAL, pid=2) is None, "another process's refusal (the one before the restart, say)"
    # a kubeconfig that client-go finds wrong while kubelet's certificates are still being written
    kubeconfig = ('E1122 10:00:01.000000 1 run.go:72] "command failed" err="failed to run Kubelet: invalid kubeconfig: '
                  'invalid configuration: unable to read client-cert /var/lib/kubelet/pki/kubelet-client-current.pem"')
    assert refusal(kubeconfig, pid=1) is None
    duplicate = ('E1122 10:00:01.000000 7 run.go:72] "command failed" err="failed to run Kubelet: invalid configuration: '
                 'the reserved memory has a duplicate value for NUMA node 0 and resource \\"memory\\""')
    assert refusal(duplicate, pid=7) == duplicate
