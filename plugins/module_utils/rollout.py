# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The durable record of a disruptive change on a node, so that no run can leave a node half done.

Before numa.kube cordons, drains, stops a service or reboots, it writes a marker on the node: what
the run is doing, the exact bytes (with mode and owner) of every file it may change, whether the
node was unschedulable before, and the step reached. The marker outlives the controller: a later
run that finds it puts every recorded file back byte for byte, restarts what was stopped and gives
the node back exactly the schedulability it had, then starts the change afresh.

The marker lives in a folder (default ``/var/lib/numa-kube/rollout``) holding ``marker.json`` and
one saved copy per file. Opening a marker that exists already keeps what it recorded first (the
bytes before the first change, the schedulability before the first cordon) and only adds files and
services not yet recorded: an interrupted run cannot overwrite the truth with its own half-done state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import time

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

MARKER_VERSION = 1
MARKER_NAME = "marker.json"
DEFAULT_DIR = "/var/lib/numa-kube/rollout"
# the step a restore records before it writes the first file: a run cut short after that point left
# files put back under services still running on the changed ones, so the next run restarts them
RESTORING_STEP = "restoring files"


class RolloutError(ProblemsError):
    """A marker that cannot be read or trusted."""


def saved_name(path):
    """The name under which a file's previous bytes are kept in the marker folder."""
    digest = hashlib.sha256(path.encode("utf-8")).hexdigest()[:16]
    return "%s-%s" % (digest, os.path.basename(path) or "root")


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


class Node(object):
    """File operations on the node, below ``root`` (``/`` on a node, a temporary folder in tests)."""

    def __init__(self, root="/"):
        self.root = root

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path):
        """(bytes, mode, uid, gid) of a file, or None when it does not exist."""
        real = self.path(path)
        if not os.path.isfile(real):
            return None
        info = os.stat(real)
        with open(real, "rb") as handle:
            return handle.read(), info.st_mode & 0o7777, info.st_uid, info.st_gid

    def write(self, path, data, mode, uid=None, gid=None):
        """Replace a file atomically (a temporary file in the same folder, then rename)."""
        real = self.path(path)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o700)
        temp = os.path.join(folder, ".%s.numa-kube-restore" % os.path.basename(real))
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(temp, mode)
        if uid is not None and gid is not None and os.geteuid() == 0:
            os.chown(temp, uid, gid)
        os.rename(temp, real)

    def remove(self, path):
        real = self.path(path)
        if os.path.lexists(real):
            os.remove(real)
            return True
        return False


def load_marker(node, folder):
    """The marker's content, or None when no change is under way."""
    raw = node.read(os.path.join(folder, MARKER_NAME))
    if raw is None:
        return None
    try:
        marker = json.loads(raw[0].decode("utf-8"))
    except ValueError as exc:
        raise RolloutError("the rollout marker %s is damaged (%s); its saved files are in %s. Restore them by "
                           "hand if needed, then remove the folder" % (os.path.join(folder, MARKER_NAME), exc, folder))
    if not isinstance(marker, dict) or marker.get("version") != MARKER_VERSION:
        raise RolloutError("the rollout marker %s has version %r; this numa.kube writes version %d. Finish the "
                           "change with the numa.kube release that started it"
                           % (os.path.join(folder, MARKER_NAME), marker.get("version") if isinstance(marker, dict)
                              else None, MARKER_VERSION))
    return marker


def plan_begin(marker, files, services, unschedulable, reason, node, folder, now=None):
    """The marker after opening (or extending) a change, and the copies to save.

    Returns (new marker, [(path, saved name, bytes)]). Files and services already recorded keep what
    was recorded first; ``unschedulable`` is kept from the first opening too.
    """
    resumed = marker is not None
    marker = json.loads(json.dumps(marker)) if resumed else {
        "version": MARKER_VERSION,
        "started": int(now if now is not None else time.time()),
        "reason": reason or "",
        "unschedulable": unschedulable,
        "services": [],
        "files": [],
        "steps": [],
    }
    if reason and (marker["steps"] or [None])[-1] != reason:
        marker["steps"].append(reason)  # the part under way: what a later run reports it found
    if resumed and marker.get("unschedulable") is None and unschedulable is not None:
        # the first opening could not ask the API (no access then); the first answer is the truth
        marker["unschedulable"] = unschedulable
    for service in services or []:
        if service not in marker["services"]:
            marker["services"].append(service)
    known = set(entry["path"] for entry in marker["files"])
    copies = []
    for path in files or []:
        if not os.path.isabs(path):
            raise RolloutError("rollout file %r is not an absolute path" % (path,))
        if path in known:
            continue
        known.add(path)
        current = node.read(path)
        if current is None:
            marker["files"].append({"path": path, "existed": False})
            continue
        data, mode, uid, gid = current
        name = saved_name(path)
        marker["files"].append({"path": path, "existed": True, "saved": name, "mode": mode, "uid": uid,
                                "gid": gid, "sha256": sha256_bytes(data)})
        copies.append((path, name, data))
    return marker, copies


def plan_restore(marker, node, folder):
    """What putting the recorded files back changes: [(action, entry, saved bytes or None)].

    ``action`` is ``write`` (bytes, mode or owner differ from the record), ``remove`` (the file did
    not exist before the change) or ``keep``. A saved copy that is missing or does not match its
    checksum is an error: nothing is restored from a copy that cannot be trusted.
    """
    actions = []
    problems = []
    for entry in marker.get("files", []):
        current = node.read(entry["path"])
        if not entry["existed"]:
            actions.append(("remove" if current is not None else "keep", entry, None))
            continue
        saved = node.read(os.path.join(folder, entry["saved"]))
        if saved is None or sha256_bytes(saved[0]) != entry["sha256"]:
            problems.append("the copy of %s kept in %s is missing or damaged; restore that file by hand from a "
                            "backup, then remove %s" % (entry["path"], folder, folder))
            continue
        same = current is not None and sha256_bytes(current[0]) == entry["sha256"] and current[1] == entry["mode"] \
            and (os.geteuid() != 0 or (current[2], current[3]) == (entry["uid"], entry["gid"]))
        actions.append(("keep" if same else "write", entry, saved[0]))
    if problems:
        raise RolloutError(problems)
    return actions


def restore_started(marker):
    """Whether an earlier restore began writing files back (see RESTORING_STEP)."""
    return RESTORING_STEP in (marker or {}).get("steps", [])


def describe(marker):
    """A short account of an unfinished change, for messages and results."""
    if not marker:
        return "no change under way"
    return "change started at %s (%s), last step %r, files %s, services %s, node was %s before" % (
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(marker.get("started", 0))),
        marker.get("reason") or "no reason given",
        (marker.get("steps") or ["opened"])[-1],
        ", ".join(e["path"] for e in marker.get("files", [])) or "none",
        ", ".join(marker.get("services", [])) or "none",
        {True: "cordoned", False: "schedulable", None: "of unknown schedulability"}[marker.get("unschedulable")])
