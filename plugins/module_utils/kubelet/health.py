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
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# klog's error and fatal lines (E1122 10:00:00.000000 ...), and what systemd prints on a crash.
_ERROR_LINE = re.compile(r"^(?:[EF]\d{4} |.*(?:command failed|Failed to run|failed to run Kubelet|"
                         r"could not restore state|is not equal to the value|"
                         r"does not exist on this machine|differs from state checkpoint))")


def wait_healthy(probe, main_pid, clock, sleep, timeout, settle, interval=2.0, age=None):
    """Poll until healthy or ``timeout`` seconds pass.

    ``probe()`` returns (ok, detail); ``main_pid()`` the service's main PID (0 when not running);
    ``clock()`` seconds; ``sleep(s)`` waits; ``age(pid)``, when given, the seconds since that
    process started (None when unknown): the settle period then counts from the process's start.
    Returns a dict: ``healthy``, ``waited`` (seconds), ``detail`` (the last probe's answer) and
    ``pids`` (main PIDs seen, in order, so a crash loop shows as several).
    """
    start = clock()
    good_since = None
    good_pid = None
    pids = []
    detail = ""
    while True:
        pid = main_pid()
        if pid and (not pids or pids[-1] != pid):
            pids.append(pid)
        ok, detail = probe()
        now = clock()
        if ok and pid and pid == good_pid:
            if now - good_since >= settle:
                return {"healthy": True, "waited": round(now - start, 1), "detail": detail, "pids": pids}
        elif ok and pid:
            lived = age(pid) if age else None
            good_since, good_pid = (now - lived if lived is not None and lived > 0 else now), pid
            if now - good_since >= settle:
                return {"healthy": True, "waited": round(now - start, 1), "detail": detail, "pids": pids}
        else:
            good_since, good_pid = None, None
        if now - start >= timeout:
            return {"healthy": False, "waited": round(now - start, 1), "detail": detail, "pids": pids}
        sleep(interval)


def error_lines(journal_text, limit=10):
    """The last ``limit`` distinct error lines of a kubelet journal, oldest first."""
    found = []
    for line in (journal_text or "").splitlines():
        line = line.strip()
        if line and _ERROR_LINE.match(line) and line not in found:
            found.append(line)
    return found[-limit:]
