# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copy molecule's output from stdin to stdout, adding a line when each of its actions (create,
prepare, converge, verify...) starts and ends, in tools/steps.sh's form ("step: molecule converge
started HH:MM:SS", "step: molecule converge took N s"): molecule itself prints no times."""

import re
import sys
import time

# "cluster \u279c converge: Executing" when molecule colours its output (TERM=xterm...), "[cluster >
# converge] Executing" when it does not (TERM unset or dumb, output not a terminal: CI, mostly).
# The end: "Executed: Successful", "Skipped", "Disabled", "Missing playbook (note)", "Failed",
# or several states counted ("Executed: 2 successful, 1 failed").
ACTION = re.compile(r"(?:\S+ \u279c (\w[\w-]*):|\[\S+ > (\w[\w-]*)\]) (Executing|Executed: .*)\s*$")


def main():
    began = {}
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace")
        sys.stdout.write(line)
        match = ACTION.search(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if match:
            action, state = match.group(1) or match.group(2), match.group(3)
            if state == "Executing":
                began[action] = time.monotonic()
                sys.stdout.write("step: molecule %s started %s\n" % (action, time.strftime("%H:%M:%S", time.gmtime())))
            elif action in began:
                seconds = time.monotonic() - began.pop(action)
                verb = "failed after" if "failed" in state.lower() else "took"
                sys.stdout.write("step: molecule %s %s %d s\n" % (action, verb, seconds))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
