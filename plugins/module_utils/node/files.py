# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Folders and whole files put on a node in one module run (the node_files module).

A role that installs a program, its systemd units and its TLS files with one copy or template task
each pays two module runs per file (a stat, then a copy or a file task for the attributes), every
run, changed or not: seconds each on a busy node. Here one run compares them all and writes only
what differs.

Everything is planned before anything is written: a link or another kind of file where a file or
folder goes, an owner the node lacks, a folder missing, fail the run with nothing changed. Each file
is written whole: to a new temporary file beside it (never through a link), created with its final
mode, given its owner through that open file (a key is never readable by anyone else, not even
for a moment), flushed, renamed into place, its folder flushed (node/durable.py). An existing file
whose bytes stay is opened without following a link and set through that descriptor. An owner or
group left unset keeps the file's own (root's for a new file). A file given as ``secret_content``
never shows in a diff or a result. In check mode nothing is written, and an owner or group that
does not exist yet (created by an earlier task that check mode did not run) counts as a change
instead of a failure.

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
            mode = item.get("mode")
            if not isinstance(mode, str) or mode_value(mode) is None:
                # YAML reads an unquoted 0644 as the number 420: taken as text it would be another mode
                found.append("%s: mode %r is not an octal mode in quotes such as \"0644\": give it quoted, as a text "
                             "(YAML reads an unquoted 0644 as the number 420)" % (where, mode))
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
    elif len(given) == 1 and item.get("encoding") == "base64":
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
    """(uid, gid) of ``owner`` and ``group`` (names or numbers; None for an unset one), or False for
    a name this node does not know."""
    try:
        uid = None if owner is None else (int(owner) if str(owner).isdigit() else pwd.getpwnam(owner).pw_uid)
        gid = None if group is None else (int(group) if str(group).isdigit() else grp.getgrnam(group).gr_gid)
    except KeyError:
        return False
    return uid, gid


def _current(path, want_bytes=True):
    """(kind, bytes or None, mode bits, uid, gid) of what is at ``path``, or None. A link is never
    followed: the file is opened with O_NOFOLLOW and read through the descriptor it was checked by."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        kind = "folder" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "special file"
        return kind, None, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # became a link (or went) since the lstat
        return "link", None, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "special file", None, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
        data = b"".join(iter(lambda: os.read(fd, 1 << 20), b"")) if want_bytes else None
    finally:
        os.close(fd)
    return "file", data, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def _wanted_ids(ids, there):
    """The (uid, gid) to give: an unset part keeps what the path has (root's when it is new)."""
    uid, gid = ids
    return (uid if uid is not None else (there[3] if there else 0),
            gid if gid is not None else (there[4] if there else 0))


def _describe(path, there, mode, ids, item):
    """What a change does to the attributes, for the diff's header."""
    parts = []
    if there is not None and there[2] != mode:
        parts.append("mode %04o -> %04o" % (there[2], mode))
    if ids is False:
        parts.append("owner %s:%s (not on the node yet)" % (item.get("owner"), item.get("group")))
    elif there is not None and (there[3], there[4]) != _wanted_ids(ids, there):
        parts.append("owner %d:%d -> %d:%d" % ((there[3], there[4]) + _wanted_ids(ids, there)))
    return "%s%s" % (path, " (%s)" % ", ".join(parts) if parts else "")


def _attributes(path, mode, uid, gid):
    return "path: %s\nmode: %04o\nowner: %s\ngroup: %s\n" % (path, mode, uid, gid)


def _set_through(fd, mode, uid, gid):
    os.fchown(fd, uid, gid)
    os.fchmod(fd, mode)


class Plan(object):
    """One folder or file: what is there, what is wanted, whether it changes (nothing written yet)."""

    def __init__(self, item, is_folder):
        self.item, self.is_folder = item, is_folder
        self.path, self.mode = item["path"], mode_value(item["mode"])
        self.data = None if is_folder else data_of(item)
        self.there = _current(self.path, want_bytes=not is_folder)
        self.ids = _ids(item.get("owner"), item.get("group"))
        self.content_changed = not is_folder and (self.there is None or self.there[1] != self.data)
        self.changed = self.there is None or self.content_changed or self.ids is False or \
            self.there[2] != self.mode or (self.there[3], self.there[4]) != _wanted_ids(self.ids, self.there)

    def problem(self, check_mode, folders_made):
        kind = "folder" if self.is_folder else "file"
        if self.there is not None and self.there[0] != kind:
            return "%s is a %s, not a %s: move it away, or choose another path" % (self.path, self.there[0], kind)
        if self.ids is False and not check_mode:
            return "%s: owner %s or group %s does not exist on this node: create them first" % (
                self.path, self.item.get("owner"), self.item.get("group"))
        folder = os.path.dirname(self.path)
        if not self.is_folder and not os.path.isdir(folder) and folder not in folders_made:
            return "%s: its folder %s does not exist: list it in folders" % (self.path, folder)
        return None

    def apply(self):
        uid, gid = _wanted_ids(self.ids, self.there)
        folder = os.path.dirname(self.path)
        if self.is_folder:
            if self.there is None:
                # missing parents as ansible.builtin.file makes them: root's, 0755
                if not os.path.isdir(folder):
                    os.makedirs(folder, 0o755)
                os.mkdir(self.path, self.mode)
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                _set_through(fd, self.mode, uid, gid)
            finally:
                os.close(fd)
            durable.sync_folder(folder)
        elif self.content_changed:
            temp = os.path.join(folder, ".%s.numa-kube.tmp" % os.path.basename(self.path))
            # a new file (never through a link) with the final mode, root's until its owner is set
            # through the same descriptor: never readable by more than it should be
            durable.write_synced(temp, self.data, self.mode, owner=(uid, gid))
            os.replace(temp, self.path)
            durable.sync_folder(folder)
        else:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError("%s is no longer a regular file" % self.path)
                _set_through(fd, self.mode, uid, gid)
            finally:
                os.close(fd)

    def diff(self):
        header = _describe(self.path, self.there, self.mode, self.ids, self.item)
        wanted = _wanted_ids(self.ids, self.there) if self.ids is not False else \
            (self.item.get("owner"), self.item.get("group"))
        if self.is_folder:
            before = "path: %s\nstate: absent\n" % self.path if self.there is None else \
                _attributes(self.path, self.there[2], self.there[3], self.there[4])
            return dict(before_header=header, after_header=self.path, before=before,
                        after=_attributes(self.path, self.mode, wanted[0], wanted[1]))
        if not self.content_changed:
            # the bytes stay: the diff shows the attributes that change
            return dict(before_header=header, after_header=self.path,
                        before=_attributes(self.path, self.there[2], self.there[3], self.there[4]),
                        after=_attributes(self.path, self.mode, wanted[0], wanted[1]))
        if self.item.get("secret_content") is not None:
            return dict(before_header=header, after_header=self.path, before="(secret)\n" if self.there else "",
                        after="(secret, changed)\n")
        before = self.there[1] if self.there else b""
        try:
            return dict(before_header=header, after_header=self.path, before=to_native(before, errors="strict"),
                        after=to_native(self.data, errors="strict"))
        except UnicodeError:
            return dict(before_header=header, after_header=self.path,
                        before="(%d bytes)\n" % len(before) if self.there else "",
                        after="(%d bytes, changed)\n" % len(self.data))


def run(module):
    """The node_files module's work: check the arguments, plan every folder and file, refuse before
    writing anything when one cannot be put in place, then write the folders in order and the files."""
    folders, files = module.params["folders"] or [], module.params["files"] or []
    found = problems(folders, files)
    if found:
        module.fail_json(msg="node_files: " + "; ".join(found), problems=found)
    plans = [Plan(item, True) for item in folders] + [Plan(item, False) for item in files]
    made = set(item["path"] for item in folders)
    found = [problem for problem in (plan.problem(module.check_mode, made) for plan in plans) if problem]
    if found:
        module.fail_json(msg="node_files: nothing was written: " + "; ".join(found), problems=found)
    result = dict(changed=False, folders=[], files=[], changed_paths=[])
    diffs = []
    for plan in plans:
        if plan.changed:
            if not module.check_mode:
                plan.apply()
            diffs.append(plan.diff())
            result["changed_paths"].append(plan.path)
        if plan.is_folder:
            result["folders"].append(dict(path=plan.path, changed=plan.changed))
        else:
            result["files"].append(dict(path=plan.path, changed=plan.changed, content_changed=plan.content_changed,
                                        created=plan.there is None))
    result["changed"] = bool(result["changed_paths"])
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)
