# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Folders and whole files put on a node in one module run (the node_files module).

A role that installs a program, its systemd units and its TLS files with one copy or template task
each pays two module runs per file (a stat, then a copy or a file task for the attributes), every
run, changed or not: seconds each on a busy node. Here one run compares them all and writes only
what differs.

Each file is written whole: to a temporary file beside it, created with its final mode (a key is
never readable by anyone else, not even for a moment), flushed, given its owner, renamed into
place, its folder flushed (node/durable.py). A file given as ``secret_content`` never shows in a
diff or a result. In check mode nothing is written, and an owner or group that does not exist yet
(created by an earlier task that check mode did not run) counts as a change instead of a failure.

``problems`` checks the arguments; ``run(module)`` is the module's work.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import grp
import os
import pwd
import stat

from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.module_utils.node.file_update import mode_value

ENCODINGS = ("utf-8", "base64")


def _path_problem(where, path):
    if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path:
        return "%s: path %r is not an absolute, normal path: give the full path without '.', '..' or doubled " \
               "slashes" % (where, path)
    return None


def problems(folders, files):
    """What is wrong with the folders and files asked for, each naming the value and the fix."""
    found, seen = [], set()
    for kind, items in (("folders", folders or []), ("files", files or [])):
        for index, item in enumerate(items):
            where = "%s[%d]" % (kind, index)
            path = item.get("path")
            problem = _path_problem(where, path)
            if problem:
                found.append(problem)
            elif path in seen:
                found.append("%s: %s is given twice: give each path once" % (where, path))
            seen.add(path)
            if mode_value(item.get("mode")) is None:
                found.append("%s: mode %r is not an octal mode such as \"0644\": give it quoted, as a text"
                             % (where, item.get("mode")))
            if kind == "files":
                found.extend(_content_problems(where, item))
    return found


def _content_problems(where, item):
    found = []
    given = [name for name in ("content", "secret_content") if item.get(name) is not None]
    if len(given) != 1:
        found.append("%s: give exactly one of content and secret_content (the file's bytes; secret_content for a "
                     "key, never shown), not %s" % (where, " and ".join(given) or "neither"))
    if item.get("encoding", "utf-8") not in ENCODINGS:
        found.append("%s: encoding %r is neither utf-8 nor base64" % (where, item.get("encoding")))
    elif given and len(given) == 1 and item.get("encoding") == "base64":
        try:
            base64.b64decode(item[given[0]], validate=True)
        except (binascii.Error, ValueError, TypeError):
            found.append("%s: %s is not base64 although encoding is base64: give the bytes base64-encoded"
                         % (where, given[0]))
    return found


def data_of(item):
    """The bytes a file is to hold."""
    text = item["content"] if item.get("content") is not None else item["secret_content"]
    if item.get("encoding") == "base64":
        return base64.b64decode(text, validate=True)
    return to_bytes(text, errors="surrogate_or_strict")


def _ids(owner, group):
    """(uid, gid) of ``owner`` and ``group`` (names or numbers; None keeps that part), or None for a
    name this node does not know."""
    try:
        uid = -1 if owner is None else (int(owner) if str(owner).isdigit() else pwd.getpwnam(owner).pw_uid)
        gid = -1 if group is None else (int(group) if str(group).isdigit() else grp.getgrnam(group).gr_gid)
    except KeyError:
        return None
    return uid, gid


def _current(path):
    """(kind, bytes or None, mode bits, uid, gid) of what is at ``path`` (a link is not followed), or None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(info.st_mode):
        with open(path, "rb") as handle:
            data = handle.read()
        return "file", data, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    kind = "folder" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "special file"
    return kind, None, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def _attributes_differ(there, mode, ids):
    if ids is None:
        return True
    uid, gid = ids
    return there[2] != mode or (uid != -1 and there[3] != uid) or (gid != -1 and there[4] != gid)


def _describe(path, there, mode, ids, item):
    """What a change does to the attributes, for the diff's header."""
    parts = []
    if there is not None and there[2] != mode:
        parts.append("mode %04o -> %04o" % (there[2], mode))
    if ids is None:
        parts.append("owner %s:%s (not on the node yet)" % (item.get("owner"), item.get("group")))
    elif there is not None and ((ids[0] != -1 and there[3] != ids[0]) or (ids[1] != -1 and there[4] != ids[1])):
        parts.append("owner %d:%d -> %s:%s" % (there[3], there[4], item.get("owner"), item.get("group")))
    return "%s%s" % (path, " (%s)" % ", ".join(parts) if parts else "")


def ensure_folder(module, item):
    """Make the folder or give it its mode and owner; returns (changed, diff or None)."""
    path, mode = item["path"], mode_value(item["mode"])
    there = _current(path)
    ids = _ids(item.get("owner"), item.get("group"))
    if there is not None and there[0] != "folder":
        module.fail_json(msg="%s is a %s, not a folder: move it away, or choose another folder" % (path, there[0]))
    if ids is None and not module.check_mode:
        module.fail_json(msg="%s: owner %s or group %s does not exist on this node: create them first"
                         % (path, item.get("owner"), item.get("group")))
    if there is not None and not _attributes_differ(there, mode, ids):
        return False, None
    if not module.check_mode:
        if there is None:
            # missing parents as ansible.builtin.file makes them: root's, 0755
            parent = os.path.dirname(path)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.mkdir(path, mode)
        os.chown(path, *ids)
        os.chmod(path, mode)
        durable.sync_folder(os.path.dirname(path))
    state = "absent" if there is None else "directory"
    return True, dict(before_header=_describe(path, there, mode, ids, item), after_header=path,
                      before="path: %s\nstate: %s\n" % (path, state), after="path: %s\nstate: directory\n" % path)


def put_file(module, item):
    """Write the file when its bytes differ, give it its mode and owner; returns (entry, diff or None)."""
    path, mode = item["path"], mode_value(item["mode"])
    data = data_of(item)
    there = _current(path)
    ids = _ids(item.get("owner"), item.get("group"))
    if there is not None and there[0] != "file":
        module.fail_json(msg="%s is a %s, not a file: move it away, or write the file elsewhere" % (path, there[0]))
    if ids is None and not module.check_mode:
        module.fail_json(msg="%s: owner %s or group %s does not exist on this node: create them first"
                         % (path, item.get("owner"), item.get("group")))
    content_changed = there is None or there[1] != data
    attributes_changed = there is not None and _attributes_differ(there, mode, ids)
    entry = dict(path=path, changed=content_changed or attributes_changed, content_changed=content_changed,
                 created=there is None)
    if not entry["changed"]:
        return entry, None
    if not module.check_mode:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            module.fail_json(msg="%s: its folder %s does not exist: list it in folders" % (path, folder))
        if content_changed:
            temp = os.path.join(folder, ".%s.numa-kube.tmp" % os.path.basename(path))
            # created with the final mode and owned by root until the chown: never readable by more
            durable.write_synced(temp, data, mode)
            os.chown(temp, *ids)
            os.chmod(temp, mode)
            os.replace(temp, path)
            durable.sync_folder(folder)
        else:
            os.chown(path, *ids)
            os.chmod(path, mode)
    return entry, _file_diff(path, there, data, mode, ids, item)


def _attributes(path, mode, owner, group):
    return "path: %s\nmode: %04o\nowner: %s\ngroup: %s\n" % (path, mode, owner, group)


def _file_diff(path, there, data, mode, ids, item):
    header = _describe(path, there, mode, ids, item)
    if there is not None and there[1] == data:
        # the bytes stay: the diff shows the attributes that change
        return dict(before_header=header, after_header=path, before=_attributes(path, there[2], there[3], there[4]),
                    after=_attributes(path, mode, item.get("owner") or there[3], item.get("group") or there[4]))
    if item.get("secret_content") is not None:
        return dict(before_header=header, after_header=path, before="(secret)\n" if there else "",
                    after="(secret, changed)\n")
    before, after = (there[1] if there else b""), data
    try:
        return dict(before_header=header, after_header=path, before=to_native(before, errors="strict"),
                    after=to_native(after, errors="strict"))
    except UnicodeError:
        return dict(before_header=header, after_header=path, before="(%d bytes)\n" % len(before) if there else "",
                    after="(%d bytes, changed)\n" % len(after))


def run(module):
    """The node_files module's work: check the arguments, then the folders in order, then the files."""
    folders, files = module.params["folders"] or [], module.params["files"] or []
    found = problems(folders, files)
    if found:
        module.fail_json(msg="node_files: " + "; ".join(found), problems=found)
    result = dict(changed=False, folders=[], files=[], changed_paths=[])
    diffs = []
    for item in folders:
        changed, diff = ensure_folder(module, item)
        result["folders"].append(dict(path=item["path"], changed=changed))
        if diff:
            diffs.append(diff)
        if changed:
            result["changed_paths"].append(item["path"])
    for item in files:
        entry, diff = put_file(module, item)
        result["files"].append(entry)
        if diff:
            diffs.append(diff)
        if entry["changed"]:
            result["changed_paths"].append(item["path"])
    result["changed"] = bool(result["changed_paths"])
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)
