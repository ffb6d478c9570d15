# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and replace a text file the way every numa.kube module does: backup, atomic, durable
(node/durable.py flushes the new bytes before the move and the folder after), attributes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible_collections.numa.kube.plugins.module_utils.node import durable


def read_text(path):
    """The file's text, or None when it does not exist."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return to_native(handle.read(), errors="surrogate_or_strict")


def diff(path, before, after):
    return dict(before=before or "", after=after, before_header=path if before is not None else "/dev/null",
                after_header=path)


def replace(module, path, data):
    """Put ``data`` at ``path`` through a temporary file in its folder and Ansible's atomic move: an
    existing file keeps its owner, mode and SELinux context. The bytes are on disk before the move
    and the move is after it (both flushed), as every durable write of numa.kube's is: a crash leaves
    the old file or the new one, never an empty one."""
    folder = os.path.dirname(path) or "."
    temp = os.path.join(folder, ".%s.numa-kube.tmp" % os.path.basename(path))
    durable.write_synced(temp, to_bytes(data), 0o666 & ~_umask())
    module.atomic_move(temp, path, unsafe_writes=module.params.get("unsafe_writes", False))
    durable.sync_folder(os.path.realpath(folder))


def _umask():
    current = os.umask(0)
    os.umask(current)
    return current


def apply(module, path, before, after, changed, result, backup=False, make_dirs=False):
    """Write ``after`` to ``path`` when ``changed`` (not in check mode), then settle file attributes.

    Adds ``backup_file`` to ``result`` when a backup was made and returns whether anything changed.
    """
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            if not make_dirs:
                module.fail_json(msg="folder %s does not exist" % directory)
            os.makedirs(directory, 0o755)
        if backup and before is not None:
            result["backup_file"] = module.backup_local(path)
        replace(module, path, after)
    if os.path.exists(path):
        file_args = module.load_file_common_arguments(module.params, path=path)
        changed = module.set_fs_attributes_if_different(file_args, changed)
    return changed


# files that go with a change (kubelet_config's extra_files and remove_files) ----------------------

def mode_value(mode):
    """The permission bits of ``mode`` (an octal text such as "0700"), or None when it is not one."""
    text = str(mode or "")
    if not text or len(text) > 4 or any(digit not in "01234567" for digit in text):
        return None
    return int(text, 8)


def side_file_problems(extra_files, remove_files):
    """What is wrong with the files given to write and remove, each naming the value and the fix."""
    problems = []
    seen = set()
    for index, item in enumerate(extra_files or []):
        where = "extra_files[%d]" % index
        path = item.get("path")
        if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path:
            problems.append("%s: path %r is not an absolute, normal path: give the file's full path" % (where, path))
        elif path in seen:
            problems.append("%s: path %s is given twice: give each file once" % (where, path))
        seen.add(path)
        if not isinstance(item.get("content"), str):
            problems.append("%s: content must be the file's text, not %r" % (where, type(item.get("content")).__name__))
        if mode_value(item.get("mode")) is None:
            problems.append("%s: mode %r is not an octal mode such as \"0700\": give it quoted, as a text"
                            % (where, item.get("mode")))
        unknown = sorted(set(item) - set(["path", "content", "mode"]))
        if unknown:
            problems.append("%s: unknown key(s) %s: each file has path, content and mode" % (where, ", ".join(unknown)))
    for index, path in enumerate(remove_files or []):
        if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path:
            problems.append("remove_files[%d]: %r is not an absolute, normal path: give the file's full path"
                            % (index, path))
        elif path in seen:
            problems.append("remove_files[%d]: %s is also in extra_files: a file is either written or removed"
                            % (index, path))
    return problems


def plan_side_files(extra_files, remove_files, found):
    """The writes and removals that make the node hold ``extra_files`` and none of ``remove_files``.

    ``found(path)`` says what is at a path: None (nothing), or (kind, text, mode bits) with kind
    "file" (text None when it is not UTF-8) or another kind. Returns (writes, removals, problems):
    writes as (path, text before or None, text, mode bits), removals as (path, text before or None).
    A directory or device where a file is to be written or removed is a problem.
    """
    writes, removals, problems = [], [], []
    for item in extra_files or []:
        path, mode = item["path"], mode_value(item["mode"])
        there = found(path)
        if there is not None and there[0] != "file":
            problems.append("extra_files: %s is a %s, not a file: move it away, or write the file elsewhere"
                            % (path, there[0]))
        elif there is None or there[1] != item["content"] or there[2] != mode:
            writes.append((path, there[1] if there else None, item["content"], mode))
    for path in remove_files or []:
        there = found(path)
        if there is not None and there[0] not in ("file", "link"):
            problems.append("remove_files: %s is a %s, not a file: only files are removed" % (path, there[0]))
        elif there is not None:
            removals.append((path, there[1]))
    return writes, removals, problems
