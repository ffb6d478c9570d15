# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The durable record of a disruptive change on a node, so that no run can leave a node half done.

Before numa.kube cordons, drains, stops a service or reboots, it writes a marker on the node: what
the run is doing, which run it is (the owner, with a heartbeat), every file it may change as it was
(a regular file's bytes, mode, owner and extended attributes; a symbolic link's target), whether
the node was unschedulable before, and the step reached. The marker outlives the controller: a
later run that finds it puts every recorded file back, restarts what was stopped and gives the node
back exactly the schedulability it had, then starts the change afresh.

The marker lives in a folder (default ``/var/lib/numa-kube/rollout``) holding ``marker.json``, one
saved copy per regular file and ``.lock``. Every read-modify-write of the marker holds an exclusive
``flock`` on ``.lock``; only the owner of the record (``rollout_owner``) may change it while its
lease runs. Opening a marker that exists already keeps what it recorded first (the bytes before the
first change, the schedulability before the first cordon) and only adds files and services not yet
recorded: an interrupted run cannot overwrite the truth with its own half-done state. Every file
written (saved copies, the marker, restored files) is fsynced with its folder.

Version 2 of the marker adds the owner, file types and extended attributes; a version 1 marker (the
previous release) is read as a record without owner whose files are regular files with unknown
extended attributes (left as they are).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json
import os
import re
import stat
import time

from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.module_utils.node.durable import (
    LOCK_WAIT,
    DurableError,
    decode_xattrs,
    encode_xattrs,
    kind_of,
    saved_name,
    sha256_bytes,
    xattrs_match,
)

MARKER_VERSION = 2
READABLE_VERSIONS = (1, 2)
MARKER_NAME = "marker.json"
DEFAULT_DIR = "/var/lib/numa-kube/rollout"
# the step a restore records before it writes the first file: a run cut short after that point left
# files put back under services still running on the changed ones, so the next run restarts them
RESTORING_STEP = "restoring files"
MAX_TEXT = 1000
STATES = ("query", "begin", "step", "restore", "finish")
# extended attribute names the kernel accepts: a namespace, a dot, a name; at most 255 bytes, values
# at most 64 KiB (XATTR_NAME_MAX, XATTR_SIZE_MAX)
XATTR_NAME = re.compile(r"^(user|trusted|security|system)\.[^\x00]+$")
XATTR_NAME_MAX = 255
XATTR_SIZE_MAX = 65536
# user and group ids a record may hold (uid_t; 4294967295 is the kernel's "no change")
ID_MAX = 4294967294


class RolloutError(DurableError):
    """A marker that cannot be read or trusted, or a change the record does not allow."""


class OwnerRefused(RolloutError):
    """Another live run owns the record."""

    def __init__(self, problems, owner, owner_age, folder):
        RolloutError.__init__(self, problems)
        self.owner = owner
        self.owner_age = owner_age
        self.folder = folder


def _shown(value, width=60):
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[:width - 3] + "..."


def folder_problems(node, folder):
    """Whether ``folder`` may hold the record: absolute, normal, not / and not an existing non-folder."""
    if not isinstance(folder, str) or not folder.strip():
        return ["folder %r is empty: give the absolute path of the folder that holds the node's record, e.g. %s"
                % (folder, DEFAULT_DIR)]
    if "\0" in folder or not folder.startswith("/"):
        return ["folder %r is not an absolute path: give one such as %s" % (folder, DEFAULT_DIR)]
    if os.path.normpath(folder) in ("/", "//") or folder.strip("/") == "":
        return ["folder %r is the root folder: the record needs a folder of its own, such as %s"
                % (folder, DEFAULT_DIR)]
    if os.path.normpath(folder) != folder.rstrip("/") or "//" in folder:
        return ["folder %r is not in normal form (it has '.', '..' or '//'): write it as %s"
                % (folder, os.path.normpath(folder))]
    info = node.lstat(folder)
    try:
        followed = os.stat(node.path(folder)) if info is not None else None
    except OSError:
        followed = None  # a link that leads nowhere
    if info is not None and (followed is None or not stat.S_ISDIR(followed.st_mode)):
        return ["folder %s is a %s, not a folder: choose another folder for the record, or remove what is there "
                "if nothing needs it" % (folder, kind_of(info.st_mode))]
    return []


def path_problems(path):
    if not isinstance(path, str) or not path:
        return ["rollout file %r is empty: give an absolute path" % (path,)]
    if "\0" in path or not path.startswith("/"):
        return ["rollout file %r is not an absolute path: give the whole path from /" % (path,)]
    if path.rstrip("/") != os.path.normpath(path) or path.endswith("/") or path.startswith("//"):
        return ["rollout file %r is not in normal form (trailing '/', '.', '..' or '//'): write it as %s"
                % (path, os.path.normpath(path))]
    return []


def text_problems(name, value):
    if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
        return ["%s must be a text of at most %d characters, not %s" % (name, MAX_TEXT, _shown(value))]
    return []


def _owner_defects(owner, where):
    if not isinstance(owner, dict):
        return ["%s is %s, not an object" % (where, _shown(owner))]
    if not owner:
        return []
    defects = []
    if not isinstance(owner.get("run_id"), str) or not owner.get("run_id"):
        defects.append("%s has no run_id" % where)
    if not rollout_owner.is_time(owner.get("heartbeat")):
        defects.append("%s.heartbeat is %s, not a time in epoch seconds (0 to %d)"
                       % (where, _shown(owner.get("heartbeat")), rollout_owner.TIME_MAX))
    if "lease" in owner and (not rollout_owner.is_int(owner["lease"])
                             or not rollout_owner.LEASE_MIN <= owner["lease"] <= rollout_owner.LEASE_MAX):
        defects.append("%s.lease is %s, not a number of seconds from %d to %d"
                       % (where, _shown(owner["lease"]), rollout_owner.LEASE_MIN, rollout_owner.LEASE_MAX))
    for key in ("controller", "user", "pid_start", "boot_id"):
        if key in owner and not isinstance(owner[key], str):
            defects.append("%s.%s is %s, not a string" % (where, key, _shown(owner[key])))
    for key, what in (("pid", "a process id"), ("pid_ns", "a pid namespace's inode number")):
        if key in owner and owner[key] is not None and (not rollout_owner.is_int(owner[key]) or owner[key] < 1):
            defects.append("%s.%s is %s, not %s" % (where, key, _shown(owner[key]), what))
    return defects


def _xattr_defects(values, where):
    if not isinstance(values, dict):
        return ["%s.xattrs is %s, not an object" % (where, _shown(values))]
    for name, value in values.items():
        if not XATTR_NAME.match(name) or len(name.encode("utf-8", "surrogateescape")) > XATTR_NAME_MAX:
            return ["%s.xattrs has the name %s, not an extended attribute name (user., trusted., security. or "
                    "system. and a name, at most %d bytes)" % (where, _shown(name), XATTR_NAME_MAX)]
        if not isinstance(value, str):
            return ["%s.xattrs[%s] is %s, not base64 text" % (where, _shown(name), _shown(value))]
        try:
            decoded = base64.b64decode(value.encode("ascii"), validate=True)
        except (ValueError, binascii.Error, UnicodeError):
            return ["%s.xattrs[%s] is not base64" % (where, _shown(name))]
        if len(decoded) > XATTR_SIZE_MAX:
            return ["%s.xattrs[%s] holds %d bytes, more than the %d an extended attribute can"
                    % (where, _shown(name), len(decoded), XATTR_SIZE_MAX)]
    return []


def _entry_defects(entry, index, version, seen):
    where = "files[%d]" % index
    if not isinstance(entry, dict):
        return ["%s is %s, not an object" % (where, _shown(entry))]
    path = entry.get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        return ["%s has no absolute path (path is %s)" % (where, _shown(path))]
    where = "%s (%s)" % (where, path)
    if path in seen:
        return ["%s is recorded twice" % where]
    seen.add(path)
    if not isinstance(entry.get("existed"), bool):
        return ["%s.existed is %s, not true or false" % (where, _shown(entry.get("existed")))]
    if not entry["existed"]:
        return []
    defects = []
    kind = entry.get("type", "file" if version == 1 else None)
    if kind not in ("file", "link"):
        return ["%s.type is %s, not \"file\" or \"link\"" % (where, _shown(entry.get("type")))]
    for key in ("uid", "gid"):
        if not rollout_owner.is_int(entry.get(key)) or not 0 <= entry[key] <= ID_MAX:
            defects.append("%s.%s is %s, not a user or group id (0 to %d)" % (where, key, _shown(entry.get(key)),
                                                                              ID_MAX))
    if kind == "file":
        saved = entry.get("saved")
        if not isinstance(saved, str) or not saved or "/" in saved or saved in (".", ".."):
            defects.append("%s.saved is %s, not the name of a copy in the folder" % (where, _shown(saved)))
        mode = entry.get("mode")
        if not rollout_owner.is_int(mode) or not 0 <= mode <= 0o7777:
            defects.append("%s.mode is %s, not a file mode (0 to 4095)" % (where, _shown(mode)))
        digest = entry.get("sha256")
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            defects.append("%s.sha256 is %s, not a SHA-256 digest" % (where, _shown(digest)))
        if "links" in entry and (not rollout_owner.is_int(entry["links"]) or entry["links"] < 1):
            defects.append("%s.links is %s, not a link count" % (where, _shown(entry["links"])))
    else:
        if not isinstance(entry.get("target"), str) or not entry.get("target"):
            defects.append("%s.target is %s, not a link target" % (where, _shown(entry.get("target"))))
    if "xattrs" in entry:
        defects.extend(_xattr_defects(entry["xattrs"], where))
    return defects


def marker_defects(marker):
    """What makes a parsed marker of a readable version unusable (empty when nothing)."""
    version = marker["version"]
    defects = []
    checks = (("started", rollout_owner.is_time, "a time in epoch seconds (0 to %d)" % rollout_owner.TIME_MAX),
              ("reason", lambda v: isinstance(v, str), "a string"),
              ("unschedulable", lambda v: v is None or isinstance(v, bool), "true, false or null"),
              ("services", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of names"),
              ("steps", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "a list of texts"),
              ("files", lambda v: isinstance(v, list), "a list"))
    for key, check, what in checks:
        if key not in marker:
            defects.append("it has no %s" % key)
        elif not check(marker[key]):
            defects.append("%s is %s, not %s" % (key, _shown(marker[key]), what))
    if isinstance(marker.get("files"), list):
        seen = set()
        for index, entry in enumerate(marker["files"]):
            defects.extend(_entry_defects(entry, index, version, seen))
    if "owner" in marker:
        defects.extend(_owner_defects(marker["owner"], "owner"))
    previous = marker.get("previous_owners", [])
    if not isinstance(previous, list):
        defects.append("previous_owners is %s, not a list" % _shown(previous))
    else:
        for index, owner in enumerate(previous):
            if not isinstance(owner, dict):
                defects.append("previous_owners[%d] is %s, not an object" % (index, _shown(owner)))
    return defects


def _upgrade(marker):
    """A readable marker in this release's form (version 1: no owner, regular files only)."""
    marker = dict(marker, version=MARKER_VERSION)
    marker.setdefault("owner", {})
    marker.setdefault("previous_owners", [])
    marker["files"] = [dict(entry, type=entry.get("type", "file")) if entry["existed"] else entry
                       for entry in marker["files"]]
    return marker


def load_marker(node, folder):
    """The marker's content (in this release's form), or None when no change is under way."""
    where = os.path.join(folder, MARKER_NAME)
    if node.lstat(where) is None:
        return None
    raw = node.read(where)
    advice = ("Nothing was changed. The copies of the recorded files are in %s (marker.json names each file's copy "
              "under 'saved'): put back by hand the files the change had reached, then remove %s so that the next "
              "run starts afresh" % (folder, folder))
    if raw is None:
        raise RolloutError("the rollout marker %s is not a regular file. %s" % (where, advice))
    try:
        marker = json.loads(raw[0].decode("utf-8"))
    except ValueError as exc:
        raise RolloutError("the rollout marker %s is damaged (%s). %s" % (where, exc, advice))
    version = marker.get("version") if isinstance(marker, dict) else None
    if not isinstance(marker, dict):
        raise RolloutError("the rollout marker %s is damaged (it holds %s, not an object). %s"
                           % (where, _shown(marker), advice))
    if not rollout_owner.is_int(version) or version not in READABLE_VERSIONS:
        raise RolloutError("the rollout marker %s has version %s; this numa.kube reads versions %s. Finish the "
                           "change with the numa.kube release that started it"
                           % (where, _shown(version), ", ".join(str(v) for v in READABLE_VERSIONS)))
    defects = marker_defects(marker)
    if defects:
        raise RolloutError("the rollout marker %s is damaged (%s). %s" % (where, "; ".join(defects), advice))
    return _upgrade(marker)


# plans --------------------------------------------------------------------------------------------

def _entry(path, found, folder_name=None):
    """The record of what ``found`` (Node.inspect) shows at ``path``."""
    if found is None:
        return {"path": path, "existed": False}
    if found["type"] == "link":
        return {"path": path, "existed": True, "type": "link", "target": found["target"], "uid": found["uid"],
                "gid": found["gid"], "xattrs": encode_xattrs(found["xattrs"])}
    return {"path": path, "existed": True, "type": "file", "saved": folder_name, "mode": found["mode"],
            "uid": found["uid"], "gid": found["gid"], "links": found["links"], "sha256": sha256_bytes(found["data"]),
            "xattrs": encode_xattrs(found["xattrs"])}


def _recordable(path, found):
    """A problem when ``found`` cannot be recorded and restored faithfully."""
    if found is None or found["type"] == "link":
        return None
    if found["type"] != "file":
        return ("rollout file %s is a %s: only regular files and symbolic links can be recorded and put back; "
                "list the files %s instead" % (path, found["type"], "inside it" if found["type"] == "directory"
                                               else "the change writes"))
    if "data" not in found or found["data"] is None:
        return ("rollout file %s has %d bytes, more than the %d the record keeps: it is not a configuration file; "
                "leave it out of the change's files" % (path, found["size"], durable.MAX_FILE_BYTES))
    return None


def plan_begin(marker, files, services, unschedulable, reason, node, folder, now=None, step=None):
    """The marker after opening (or extending) a change, and the copies to save.

    ``step``, when given, is recorded after the reason (the step the change takes next, such as the
    drain, recorded in the same write).

    Returns (new marker, [(path, saved name, bytes)]). Files and services already recorded keep what
    was recorded first; ``unschedulable`` is kept from the first opening too. A symbolic link is
    recorded as the link; where it leads (a regular file, or nothing yet) is recorded as well, so a
    change that writes through the link is put back too. Directories, devices, FIFOs and sockets
    are refused, naming every one, before anything is recorded.
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
        "owner": {},
        "previous_owners": [],
    }
    if reason and (marker["steps"] or [None])[-1] != reason:
        marker["steps"].append(reason)  # the part under way: what a later run reports it found
    if step:
        marker["steps"].append(step)
    if resumed and marker.get("unschedulable") is None and unschedulable is not None:
        # the first opening could not ask the API (no access then); the first answer is the truth
        marker["unschedulable"] = unschedulable
    for service in services or []:
        if service not in marker["services"]:
            marker["services"].append(service)
    problems = []
    for path in files or []:
        problems.extend(path_problems(path))
    if problems:
        raise RolloutError(problems)
    known = set(entry["path"] for entry in marker["files"])
    wanted = []
    for path in files or []:
        if path in known or path in [p for p, _f in wanted]:
            continue
        found = node.inspect(path)
        wanted.append((path, found))
        if found is not None and found["type"] == "link":
            beyond = node.resolve(path)
            if beyond and beyond not in known and beyond != path and beyond not in [p for p, _f in wanted]:
                behind = node.inspect(beyond)
                if behind is None or behind["type"] == "file":
                    wanted.append((beyond, behind))
    problems = [problem for problem in (_recordable(path, found) for path, found in wanted) if problem]
    if problems:
        raise RolloutError(problems)
    copies = []
    for path, found in wanted:
        entry = _entry(path, found, saved_name(path))
        marker["files"].append(entry)
        if entry.get("type") == "file":
            copies.append((path, entry["saved"], found["data"]))
    return marker, copies


def _same(entry, current):
    """Whether what is at a path now is what the record keeps."""
    if current is None or current["type"] != entry["type"]:
        return False
    if os.geteuid() == 0 and (current["uid"], current["gid"]) != (entry["uid"], entry["gid"]):
        return False
    if not xattrs_match(entry.get("xattrs"), current["xattrs"]):
        return False
    if entry["type"] == "link":
        return current["target"] == entry["target"]
    return current.get("data") is not None and sha256_bytes(current["data"]) == entry["sha256"] \
        and current["mode"] == entry["mode"]


def plan_restore(marker, node, folder):
    """What putting the recorded files back changes: [(action, entry, saved bytes or None)].

    ``action`` is ``write`` (a regular file whose bytes, mode, owner or extended attributes differ
    from the record, or that is not a regular file any more), ``link`` (a link to put back),
    ``remove`` (the file did not exist before the change) or ``keep``. A saved copy that is missing
    or does not match its checksum is an error, and so is a folder where a file is to go: nothing
    is restored from a copy that cannot be trusted.
    """
    actions = []
    problems = []
    for entry in marker.get("files", []):
        current = node.inspect(entry["path"])
        if current is not None and current["type"] == "directory":
            problems.append("%s is a directory now; before the change it %s. Move it away by hand, then run again"
                            % (entry["path"], "was a %s" % entry["type"] if entry["existed"] else "did not exist"))
            continue
        if not entry["existed"]:
            actions.append(("remove" if current is not None else "keep", entry, None))
            continue
        if entry["type"] == "link":
            actions.append(("keep" if _same(entry, current) else "link", entry, None))
            continue
        saved = node.read(os.path.join(folder, entry["saved"]))
        if saved is None or sha256_bytes(saved[0]) != entry["sha256"]:
            problems.append("the copy of %s kept in %s is missing or damaged; restore that file by hand from a "
                            "backup, then remove %s" % (entry["path"], folder, folder))
            continue
        actions.append(("keep" if _same(entry, current) else "write", entry, saved[0]))
    if problems:
        raise RolloutError(problems)
    return actions


def restore_entry(node, action, entry, data):
    """Carry out one action of plan_restore. A regular file that has other hard links now is
    rewritten in place so that every link sees it; anything else is replaced atomically."""
    path = entry["path"]
    xattrs = decode_xattrs(entry["xattrs"]) if entry.get("xattrs") is not None else None
    if action == "remove":
        node.remove(path)
    elif action == "link":
        node.write_link(path, entry["target"], entry["uid"], entry["gid"], xattrs)
    elif action == "write":
        current = node.lstat(path)
        if current is not None and stat.S_ISREG(current.st_mode) and current.st_nlink > 1:
            node.write_in_place(path, data, entry["mode"], entry["uid"], entry["gid"], xattrs)
        else:
            node.write(path, data, entry["mode"], entry["uid"], entry["gid"], xattrs)


def restore_started(marker):
    """Whether an earlier restore began writing files back (see RESTORING_STEP)."""
    return RESTORING_STEP in (marker or {}).get("steps", [])


def describe(marker, now=None):
    """A short account of an unfinished change, for messages and results."""
    if not marker:
        return "no change under way"
    text = "change started at %s (%s), last step %r, files %s, services %s, node was %s before" % (
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(marker.get("started", 0))),
        marker.get("reason") or "no reason given",
        (marker.get("steps") or ["opened"])[-1],
        ", ".join(e["path"] for e in marker.get("files", [])) or "none",
        ", ".join(marker.get("services", [])) or "none",
        {True: "cordoned", False: "schedulable", None: "of unknown schedulability"}[marker.get("unschedulable")])
    owner = marker.get("owner")
    if owner:
        now = time.time() if now is None else now
        heard = rollout_owner.age(owner, now)
        ahead = rollout_owner.ahead(owner, now)
        text += ", owned by %s, last heard from %s s ago" % (rollout_owner.describe_owner(owner),
                                                             "?" if heard is None else heard)
        if ahead:
            text += (" (its heartbeat is %d s ahead of the node's clock: the clock went back since, so its lease "
                     "counts as run out)" % ahead)
    return text


# the whole transaction ----------------------------------------------------------------------------

def _without_heartbeat(marker):
    if marker is None:
        return None
    owner = dict(marker.get("owner") or {})
    owner.pop("heartbeat", None)
    return dict(marker, owner=owner)


def files_problems(node, files):
    """Paths that are not absolute and normal, and what is at a path that cannot be recorded."""
    problems = []
    for path in files or []:
        found = path_problems(path)
        if not found:
            info = node.lstat(path)
            if info is not None and kind_of(info.st_mode) not in ("file", "link"):
                found = [_recordable(path, {"type": kind_of(info.st_mode)})]
        problems.extend(found)
    return problems


def option_problems(node, state, folder, owner, lease, take_over, reason, step):
    problems = []
    if state not in STATES:
        problems.append("state %r must be one of %s" % (state, ", ".join(STATES)))
    problems.extend(folder_problems(node, folder))
    problems.extend(rollout_owner.owner_problems(rollout_owner.clean_owner(owner)))
    problems.extend(rollout_owner.lease_problems(lease))
    problems.extend(rollout_owner.take_over_problems(take_over))
    problems.extend(text_problems("reason", reason))
    problems.extend(text_problems("step", step))
    return problems


def _write_marker(node, folder, marker):
    node.write(os.path.join(folder, MARKER_NAME), json.dumps(marker, indent=1, sort_keys=True).encode("ascii"),
               0o600)


def run_state(node, state, folder=DEFAULT_DIR, files=(), services=(), unschedulable=None, reason="", step=None,
              owner=None, lease=rollout_owner.LEASE_DEFAULT, take_over="", check_mode=False, now=None,
              lock_wait=LOCK_WAIT):
    """Carry out one call of the rollout_state module and return its result.

    Raises RolloutError (OwnerRefused when another live run owns the record) before anything is
    written. ``now`` (epoch seconds) is read inside the lock when not given.
    """
    problems = option_problems(node, state, folder, owner, lease, take_over, reason, step)
    if state == "begin":
        problems.extend(files_problems(node, files))
    if problems:
        raise RolloutError(problems)  # before the lock: nothing is created for input that is refused
    owner = rollout_owner.clean_owner(owner)
    writing = state != "query" and not check_mode
    with node.lock(folder, exclusive=writing, create=writing, wait=lock_wait):
        now = time.time() if now is None else now
        marker = load_marker(node, folder)
        result = {"changed": False, "taken_over": {}}
        claimed = marker
        if state != "query" and marker is not None:
            new_owner, replaced, refusal = rollout_owner.claim(marker.get("owner"), owner, lease, take_over, now,
                                                               folder)
            if refusal:
                raise OwnerRefused(refusal, marker.get("owner"), rollout_owner.age(marker.get("owner"), now), folder)
            claimed = dict(marker, owner=new_owner)
            if replaced:
                claimed["previous_owners"] = marker.get("previous_owners", []) + [
                    dict(replaced, replaced=int(now), replaced_by=(owner or {}).get("run_id", ""))]
                result["taken_over"] = replaced
        if state == "begin":
            new, copies = plan_begin(claimed, files, services, unschedulable, reason, node, folder, now=now, step=step)
            if marker is None:
                new["owner"] = rollout_owner.record(owner, lease, now)
            result["resumed"] = marker is not None
            result["changed"] = _without_heartbeat(new) != _without_heartbeat(marker)
            if (result["changed"] or owner) and not check_mode:
                for _path, name, data in copies:
                    node.write(os.path.join(folder, name), data, 0o600)
                _write_marker(node, folder, new)  # after the copies: a marker never points at a missing copy
            marker = new
        elif state == "step":
            if marker is None:
                raise RolloutError("no rollout marker in %s: open one with state=begin first" % folder)
            marker = dict(claimed, steps=claimed.get("steps", []) + [step])
            result["changed"] = True
            if not check_mode:
                _write_marker(node, folder, marker)
        elif state in ("query", "restore"):
            plan = [item for item in (plan_restore(marker, node, folder) if marker else []) if item[0] != "keep"]
            result.update(differs=[entry["path"] for _action, entry, _data in plan],
                          restore_started=restore_started(marker))
            if state == "restore" and marker is not None:
                result.update(restored=result["differs"],
                              changed=bool(plan) or _without_heartbeat(claimed) != _without_heartbeat(marker))
                if plan and not result["restore_started"] and not check_mode:
                    claimed = dict(claimed, steps=claimed.get("steps", []) + [RESTORING_STEP])
                marker = claimed
                if not check_mode and (result["changed"] or owner):
                    _write_marker(node, folder, marker)  # before the first file is written back
                    for action, entry, data in plan:
                        restore_entry(node, action, entry, data)
            elif state == "restore":
                result["restored"] = []
        elif state == "finish":
            result["changed"] = marker is not None
            if not check_mode:
                if marker is not None:
                    # the change's own files were written without fsync (atomic_move): make them durable
                    # before the record that could undo them goes
                    folders = set()
                    for entry in marker.get("files", []):
                        node.sync_written(entry["path"], folders)
                    # the marker first: cut short after it, what is left are copies nothing names
                    node.remove(os.path.join(folder, MARKER_NAME))
                for name in node.leftovers(folder):
                    node.remove(os.path.join(folder, name))
            marker = None
        if state == "finish":
            now_owner = {}
        else:
            now_owner = (marker or {}).get("owner") or {}
    result.update(active=marker is not None, marker=marker or {}, summary=describe(marker, now),
                  owner=now_owner, owner_expired=rollout_owner.expired(now_owner, now, lease),
                  owner_age=rollout_owner.age(now_owner, now))
    return result
