# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a scenario run cost in guest boots and drains, read from what it leaves under
tests/output/vm/<scenario>: each guest's console (every boot's kernel prints its banner there) and
the control plane's audit log (each cordon numa.kube's controller user made is one drain begun).

usage: python tools/bed_counts.py SCENARIO_OUTPUT_DIR
"""

import collections
import glob
import json
import os
import sys

USER = "numa-kube-admin"  # the controller's identity in the test bed (control_plane.py)


def boots(folder):
    """{guest: (boots of its last qemu, failed boot attempts before it)}"""
    counts = {}
    for console in sorted(glob.glob(os.path.join(folder, "*", "console.log"))):
        guest = os.path.basename(os.path.dirname(console))
        with open(console, "rb") as handle:
            booted = handle.read().count(b"Linux version ")
        attempts = len(glob.glob(os.path.join(folder, guest, "console.attempt*.log")))
        counts[guest] = (booted, attempts)
    return counts


def drains(audit):
    """(cordons by node, evictions) numa.kube's controller asked for."""
    cordons, evictions = collections.Counter(), 0
    with open(audit) as handle:
        for line in handle:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("stage") != "ResponseComplete" or event.get("user", {}).get("username") != USER:
                continue
            if event.get("responseStatus", {}).get("code", 500) >= 300:
                continue
            ref = event.get("objectRef") or {}
            if ref.get("subresource") == "eviction":
                evictions += 1
            elif ref.get("resource") == "nodes" and not ref.get("subresource") and event.get("verb") in ("patch", "update"):
                spec = (event.get("requestObject") or {}).get("spec") or {}
                if spec.get("unschedulable") is True:
                    cordons[ref.get("name")] += 1
    return cordons, evictions


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    folder = argv[1]
    counted = boots(folder)
    if counted:
        print("test bed: guest boots " + ", ".join(
            "%s %d%s" % (guest, booted, " (after %d failed attempts)" % failed if failed else "")
            for guest, (booted, failed) in sorted(counted.items())))
    audit = os.path.join(folder, "control-plane", "audit.log")
    if os.path.exists(audit):
        cordons, evictions = drains(audit)
        print("test bed: drains by numa.kube %d (%s), evictions %d" % (
            sum(cordons.values()), ", ".join("%s %d" % item for item in sorted(cordons.items())) or "none", evictions))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
