# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What numa.kube set on a node, one record file per part, so that ``absent`` undoes only that.

Each node part (kubelet, kernel parameters, containerd's NRI) writes a small JSON file in the
record folder (``DEFAULT_DIR``, mode 0700) when it changes the node, reads it back when the part is
taken out, and removes it once the part is out. A record always carries ``"version": VERSION``.

API (all paths are absolute paths on the node):

``DEFAULT_DIR``, ``VERSION``, ``DIR_MODE`` (0700), ``FILE_MODE`` (0600)
``record_path(folder, name)``
    The path of record ``name`` (``"kubelet.json"``) in ``folder`` (``DEFAULT_DIR`` when empty).
``load(path)``
    The record as a dict (with its ``version``), or None when there is no file. A file that is not
    JSON, not a JSON object, or has a missing or other ``version`` raises ``RecordError``; so does
    a record folder or file that someone other than root could have written (``check_place``).
``check_place(path)``
    Raise ``RecordError`` when the record at ``path`` cannot be trusted by where it lies: its folder
    (when it exists) is a symbolic link, not a directory, group- or world-writable, or - when the
    module runs as root - not owned by root; the record file is a symbolic link, not a regular
    file, or group- or world-writable (or not root's, as root). ``load`` and ``write`` call it.
``render(data)``
    The exact text ``write`` would put in the file (``version`` added, keys sorted): compare it
    with the file's text to plan a change in check mode, or show it in a diff.
``write(path, data)``
    Replace the file atomically (temporary file in the same folder, fsync, rename, fsync of the
    folder), mode 0600; the folder is created with mode 0700 when missing. Returns True when the
    file's bytes changed (an identical record is not rewritten).
``remove(path)``
    Remove the file (and fsync its folder). Returns True when there was one.
``check_fields(record, path, fields)``
    Refuse a record whose fields are missing or of the wrong type: ``fields`` maps a field name to
    a type or a tuple of types (``None`` in the tuple allows JSON null). Raises ``RecordError``
    naming every problem at once.

``load_checked(module, path, *checks)``, ``save_for(module, path, record)``
    The same for a module: a refused record ends its task; nothing is written in check mode.
``run_change(module, present, absent, checks=())``
    The skeleton of a node module that keeps a record (kernel_args, containerd_nri): its input
    checked, then ``present`` or ``absent`` as ``state`` says, its result returned or every problem
    named.

``RecordError`` is an ``errors.ProblemsError``: each problem names the file, what is wrong and
what to do, so a module can ``fail_json(msg=str(exc))`` before it changes anything.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import stat

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError, fail_from, fail_with_problems
from ansible_collections.numa.kube.plugins.module_utils.node import durable

DEFAULT_DIR = "/var/lib/numa-kube/applied"
VERSION = 1
DIR_MODE = 0o700
# the temporary file of a write cut short, removed by the next write
TEMP_SUFFIX = ".numa-kube.tmp"
FILE_MODE = 0o600

_FIX = ("numa.kube writes this file itself: put back the copy the last run saved, or remove the file "
        "to let 'absent' use the part's documented fallback")


class RecordError(ProblemsError):
    """A record numa.kube cannot trust: nothing on the node is changed from it."""


def record_path(folder, name):
    return os.path.join(folder or DEFAULT_DIR, name)


def _place_problem(where, st, regular):
    kind = "folder" if not regular else "file"
    if stat.S_ISLNK(st.st_mode):
        return ("record %s %s is a symbolic link: numa.kube follows no link here (one could point it at any file); "
                "make it a real %s owned by root" % (kind, where, "directory" if not regular else "file"))
    if regular and not stat.S_ISREG(st.st_mode):
        return "record file %s is not a regular file: remove it (numa.kube writes its records itself)" % where
    if not regular and not stat.S_ISDIR(st.st_mode):
        return "record folder %s is not a directory: remove it, or point numa_kube_record_dir elsewhere" % where
    if st.st_mode & 0o022:
        return ("record %s %s has mode %04o: it must not be writable by group or others, since what it holds "
                "decides which files 'absent' changes; run chmod go-w %s (numa.kube makes it %04o)"
                % (kind, where, stat.S_IMODE(st.st_mode), where, FILE_MODE if regular else DIR_MODE))
    if _running_as_root() and st.st_uid != 0:
        return ("record %s %s is owned by uid %d, not root: only root may write what 'absent' acts on; run "
                "chown root:root %s, or point numa_kube_record_dir at a folder of root's" % (kind, where, st.st_uid, where))
    return None


def _running_as_root():
    return hasattr(os, "geteuid") and os.geteuid() == 0


def check_place(path):
    """Raise RecordError when the record at ``path`` or its folder may have been written by another
    user than root (see the module documentation); a missing folder or file is fine."""
    problems = []
    folder = os.path.dirname(path) or "."
    for where, regular in ((folder, False), (path, True)):
        try:
            st = os.lstat(where)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue
            raise RecordError("record %s %s cannot be examined (%s); check its permissions (root, %s)"
                              % ("file" if regular else "folder", where, exc, "0600" if regular else "0700"))
        problem = _place_problem(where, st, regular)
        if problem:
            problems.append(problem)
            break  # a file in an untrusted folder says nothing more
    if problems:
        raise RecordError(problems)


def load(path):
    """The record at ``path`` as a dict, None when there is none; a damaged one raises RecordError."""
    check_place(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except IOError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise RecordError("record %s cannot be read (%s); check its permissions (root, 0600)" % (path, exc))
    try:
        record = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError("record %s is not valid JSON (%s): it was changed or cut short; %s" % (path, exc, _FIX))
    if not isinstance(record, dict):
        raise RecordError("record %s holds a JSON %s, not an object; %s" % (path, type(record).__name__, _FIX))
    version = record.get("version")
    if "version" not in record:
        raise RecordError("record %s has no \"version\" field; %s" % (path, _FIX))
    if version != VERSION or isinstance(version, bool):
        raise RecordError("record %s has version %s, this release of numa.kube reads version %d: run the "
                          "release that wrote it; otherwise %s" % (path, json.dumps(version), VERSION, _FIX))
    return record


def render(data):
    """The text of the record ``data`` as ``write`` stores it."""
    if not isinstance(data, dict):
        raise TypeError("a record is a dict, not %s" % type(data).__name__)
    if data.get("version", VERSION) != VERSION:
        raise ValueError("a record written by this release has version %d, not %r" % (VERSION, data.get("version")))
    body = dict(data)
    body["version"] = VERSION
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def _sync_folder(folder):
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except IOError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def write(path, data):
    """Store ``data`` at ``path`` atomically and durably; True when the file's bytes changed."""
    text = render(data).encode("utf-8")
    folder = os.path.dirname(path) or "."
    if not os.path.lexists(folder):
        os.makedirs(folder, DIR_MODE)
        os.chmod(folder, DIR_MODE)  # the umask may have narrowed it; never wider than 0700
    check_place(path)
    if _read_bytes(path) == text and (os.stat(path).st_mode & 0o7777) == FILE_MODE:
        return False
    # a temporary file beside it, synced, renamed into place, the folder synced: the rollout's writes
    durable.Node("/").write(os.path.abspath(path), text, FILE_MODE, temp_suffix=TEMP_SUFFIX)
    return True


def remove(path):
    """Remove the record at ``path``; True when there was one."""
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    _sync_folder(os.path.dirname(path) or ".")
    return True


def save(path, data, check_mode=False):
    """Write ``data`` at ``path``, or remove the record when ``data`` is None; in check mode only
    say whether that would change anything. True when it (would) change the node."""
    if check_mode:
        if data is None:
            return os.path.lexists(path)
        return _read_bytes(path) != render(data).encode("utf-8")
    if data is None:
        return remove(path)
    return write(path, data)


def _type_names(types):
    names = []
    for kind in types:
        names.append("null" if kind is None else {dict: "object", list: "list", str: "string", bool: "boolean",
                                                  int: "integer", float: "number"}.get(kind, kind.__name__))
    return " or ".join(names)


def check_fields(record, path, fields):
    """Raise RecordError unless every field of ``fields`` is in ``record`` with one of its types."""
    problems = []
    for name in sorted(fields):
        types = fields[name] if isinstance(fields[name], tuple) else (fields[name],)
        if name not in record:
            problems.append("record %s has no %r field" % (path, name))
            continue
        value = record[name]
        allowed = False
        for kind in types:
            if kind is None:
                allowed = allowed or value is None
            elif kind is int:
                allowed = allowed or (isinstance(value, int) and not isinstance(value, bool))
            elif isinstance(value, kind):
                allowed = True
        if not allowed:
            problems.append("record %s field %r is %s, expected %s"
                            % (path, name, json.dumps(value)[:80], _type_names(types)))
    if problems:
        problems.append(_FIX)
        raise RecordError(problems)


def load_checked(module, path, *checks):
    """What a node module does first: the record at ``path``, or None when there is none, checked
    by each of ``checks`` in turn (functions of the record and its path that list problems). A
    damaged record, or one a check refuses, ends the task naming every problem, before anything on
    the node changes."""
    try:
        record = load(path)
    except RecordError as exc:
        fail_with_problems(module, exc.problems)
    if record is None:
        return None
    for check in checks:
        problems = check(record, path)
        if problems:
            fail_with_problems(module, problems)
    return record


def save_for(module, path, record):
    """Write ``record`` at ``path`` (None: remove it), nothing in check mode; whether it changes."""
    return save(path, record, module.check_mode)


def run_change(module, present, absent, checks=()):
    """What a node module that keeps a record does once its arguments are parsed. Each of ``checks``
    (a function of the module listing problems with its input) runs first, and every problem they
    find ends the task before the node is read. Then ``present`` or ``absent``, as the module's
    ``state`` says, each a function of the module returning its result (``changed`` included),
    loads and checks its record (``load_checked``), changes the node and saves or removes the
    record (``save_for``). A ``ProblemsError`` either raises ends the task naming every problem."""
    problems = [problem for check in checks for problem in check(module)]
    if problems:
        fail_with_problems(module, problems)
    try:
        result = (absent if module.params["state"] == "absent" else present)(module)
    except ProblemsError as exc:
        fail_from(module, exc)
    module.exit_json(**result)
