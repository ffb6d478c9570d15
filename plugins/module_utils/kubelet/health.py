# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide whether a restarted kubelet is healthy, and pick its own error lines when it is not.

kubelet answers /healthz before its CPU Manager has restored its checkpoint; a stale
cpu_manager_state makes it exit a moment later and systemd starts it again. One good answer
proves little, so the service counts as healthy only once /healthz has answered ok for a settle
period with the same main process throughout. When the process's age is known, the period counts
from the process's start, not from the first answer seen: the time between the restart and the
check (the rest of the change, the node coming back from a reboot) then counts towards it, and a
kubelet that has run long enough is proven by one good answer.

A kubelet that refuses its configuration or its state files (the reservation that does not add up,
a policy its checkpoint contradicts) refuses it again at every start: nothing changes between two of
them. So when a process the wait saw ends and its own journal lines hold one of those refusals, the
wait ends there, with the refusal as the reason, instead of at the timeout (minutes of a node without
a kubelet, and the change's rollback, waiting on an outcome already known). A process that ends for
any other reason (the container runtime not answering yet, say) is waited on as before.

``wait_healthy``, ``refusal`` and ``error_lines`` decide; ``run(module)`` is the kubelet_health module's work
(the probe, the service's main process, its log or journal) around them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from ansible.module_utils.urls import open_url

from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import running_process

# klog's error and fatal lines (E1122 10:00:00.000000 ...), and what systemd prints on a crash.
_ERROR_LINE = re.compile(r"^(?:[EF]\d{4} |.*(?:command failed|Failed to run|failed to run Kubelet|"
                         r"could not restore state|is not equal to the value|"
                         r"does not exist on this machine|differs from state checkpoint|"
                         r"doesn't match with CPUs in state))")

# The refusals of kubelet's configuration and state that no restart can get past (kubelet's Memory
# and CPU Managers and its configuration check; their texts in kubelet's sources, see domain.md):
# the same files give the same refusal at every start. "doesn't match with CPUs in state" is the
# static CPU Manager's, on a node whose online CPUs changed since its checkpoint (nr_cpus, maxcpus,
# nosmt, a CPU taken offline: pkg/kubelet/cm/cpumanager/policy_static.go, validateState).
_REFUSAL = re.compile(r"is not equal to the value|does not exist on this machine|"
                      r"failed to validate kubelet configuration|invalid configuration: the reserved memory|"
                      r"could not restore state|differs from state checkpoint|doesn't match with CPUs in state")
# klog's header: severity and date, time, the writing process's ID, then the source line
_KLOG_PID = re.compile(r"^[EF]\d{4} \S+\s+(\d+) ")


def wait_healthy(probe, main_pid, clock, sleep, timeout, settle, interval=2.0, age=None, refused=None):
    """Poll until healthy or ``timeout`` seconds pass.

    ``probe()`` returns (ok, detail); ``main_pid()`` the service's main PID (0 when not running);
    ``clock()`` seconds; ``sleep(s)`` waits; ``age(pid)``, when given, the seconds since that
    process started (None when unknown): the settle period then counts from the process's start.
    ``refused(pid, since)``, when given, is asked once for each process seen that ended: the refusal
    of its configuration that process ``pid`` wrote (since ``since``, its start in seconds), or None;
    a refusal ends the wait at once.
    Returns a dict: ``healthy``, ``waited`` (seconds), ``detail`` (the last probe's answer), ``pids``
    (main PIDs seen, in order, so a crash loop shows as several) and ``refused`` (the refusal that
    ended the wait, or None).
    """
    start = clock()
    good_since = None
    good_pid = None
    pids = []
    detail = ""
    watched, watched_since = None, None   # the process seen last, and when it started
    while True:
        pid = main_pid()
        if pid and (not pids or pids[-1] != pid):
            pids.append(pid)
        if watched and pid != watched and refused is not None:
            line = refused(watched, watched_since)
            if line:
                now = clock()
                return {"healthy": False, "waited": round(now - start, 1), "detail": detail, "pids": pids,
                        "refused": line}
        if pid and pid != watched:
            lived = age(pid) if age else None
            watched, watched_since = pid, clock() - (lived if lived is not None and lived > 0 else 0)
        elif not pid:
            watched = None
        ok, detail = probe()
        now = clock()
        if ok and pid and pid == good_pid:
            if now - good_since >= settle:
                return {"healthy": True, "waited": round(now - start, 1), "detail": detail, "pids": pids,
                        "refused": None}
        elif ok and pid:
            lived = age(pid) if age else None
            good_since, good_pid = (now - lived if lived is not None and lived > 0 else now), pid
            if now - good_since >= settle:
                return {"healthy": True, "waited": round(now - start, 1), "detail": detail, "pids": pids,
                        "refused": None}
        else:
            good_since, good_pid = None, None
        if now - start >= timeout:
            return {"healthy": False, "waited": round(now - start, 1), "detail": detail, "pids": pids,
                    "refused": None}
        sleep(interval)


def error_lines(journal_text, limit=10):
    """The last ``limit`` distinct error lines of a kubelet journal, oldest first."""
    found = []
    for line in (journal_text or "").splitlines():
        line = line.strip()
        if line and _ERROR_LINE.match(line) and line not in found:
            found.append(line)
    return found[-limit:]


def refusal(journal_text, pid=None):
    """The last of kubelet's error lines in ``journal_text`` that refuses its configuration or state
    (a refusal no restart gets past), or None; with ``pid``, only a line that process wrote (klog
    names the writing process in each line), so that no other process's refusal counts."""
    found = []
    for line in error_lines(journal_text, limit=1000):
        writer = _KLOG_PID.match(line)
        if _REFUSAL.search(line) and (pid is None or (writer is not None and int(writer.group(1)) == pid)):
            found.append(line)
    return found[-1] if found else None


# How much of a log file to read back at most for error lines.
_LOG_TAIL = 256 * 1024


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path, start):
    """What was written to ``path`` since it was ``start`` bytes long (the last 256 KiB at most;
    all of its end when it was rotated meanwhile)."""
    size = _size(path)
    begin = start if start <= size else 0
    begin = max(begin, size - _LOG_TAIL)
    try:
        with open(path, "rb") as handle:
            handle.seek(begin)
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return ""


def _process_age(pid):
    """Seconds since process ``pid`` started (from /proc/uptime and its stat), or None."""
    try:
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
        with open("/proc/%d/stat" % pid) as handle:
            # the command name (field 2) may hold spaces: the fields after its ')' are fixed
            fields = handle.read().rsplit(")", 1)[1].split()
        return uptime - int(fields[19]) / float(os.sysconf("SC_CLK_TCK"))
    except (IOError, OSError, ValueError, IndexError):
        return None


def run(module):
    """The kubelet_health module's work: wait as its options say, then end its task with the outcome
    and kubelet's own error lines."""
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, healthy=None, waited=0.0, detail="check mode: not waited", restarts=0,
                         log_lines=[], refused=None)
    since = params["since"] or time.time()
    unit = params["service"] if "." in params["service"] else params["service"] + ".service"

    def probe():
        try:
            response = open_url(params["url"], timeout=5, validate_certs=False)
            body = response.read().decode("utf-8", "replace").strip()
            return response.getcode() == 200 and body == "ok", body
        except Exception as exc:  # connection refused, timeouts, HTTP errors: all mean not healthy yet
            return False, str(exc)

    def main_pid():
        if params["process"]:
            found = running_process(params["process"])
            return found[0] if found else 0
        rc, out, _err = module.run_command(["systemctl", "show", "-p", "MainPID", "--value", unit])
        return int(out.strip()) if rc == 0 and out.strip().isdigit() else 0

    log_start = _size(params["log_file"]) if params["log_file"] else 0

    def lines_since(moment):
        if params["log_file"]:
            return _tail(params["log_file"], log_start)
        _rc, text, _err = module.run_command(["journalctl", "-u", unit, "--since", "@%.6f" % moment, "--no-pager",
                                              "-o", "cat"])
        return text

    # the lines that process wrote (klog names it in each), read from a second before its start as
    # /proc tells it, never from before the wait's own start point
    outcome = wait_healthy(probe, main_pid, time.time, time.sleep, params["timeout"], params["settle"],
                           age=_process_age,
                           refused=lambda pid, started: refusal(lines_since(max(since, started - 1)), pid))
    journal = lines_since(since)
    result = dict(changed=False, healthy=outcome["healthy"], waited=outcome["waited"], detail=outcome["detail"],
                  restarts=max(len(outcome["pids"]) - 1, 0), log_lines=error_lines(journal, params["log_lines"]),
                  refused=outcome["refused"])
    if outcome["refused"]:
        module.fail_json(msg="kubelet (%s) refused its configuration and ended after %s s, so the wait stopped there "
                             "rather than at its %d s timeout (every start would refuse it again): %s"
                         % (unit, outcome["waited"], params["timeout"], outcome["refused"]), **result)
    if not outcome["healthy"]:
        last = result["log_lines"][-1] if result["log_lines"] else "no error lines in %s" % (
            params["log_file"] or "the journal of " + unit)
        module.fail_json(msg="kubelet (%s) did not stay healthy within %d s (%s); its last error: %s"
                         % (unit, params["timeout"], outcome["detail"], last), **result)
    module.exit_json(**result)
