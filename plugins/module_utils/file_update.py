# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and replace a text file the way every numa.kube module does: backup, atomic, attributes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.common.text.converters import to_bytes, to_native


def read_text(path):
    """The file's text, or None when it does not exist."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return to_native(handle.read(), errors="surrogate_or_strict")


def diff(path, before, after):
    return dict(before=before or "", after=after, before_header=path if before is not None else "/dev/null",
                after_header=path)


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
        temp = os.path.join(directory, ".%s.numa-kube.tmp" % os.path.basename(path))
        with open(temp, "wb") as handle:
            handle.write(to_bytes(after))
        module.atomic_move(temp, path, unsafe_writes=module.params.get("unsafe_writes", False))
    if os.path.exists(path):
        file_args = module.load_file_common_arguments(module.params, path=path)
        changed = module.set_fs_attributes_if_different(file_args, changed)
    return changed
