# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The folder of numa.kube's records on a node (numa_kube_record_dir), read one way everywhere."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.node.record import DEFAULT_DIR, record_path


def record_dir(value, name=None):
    """``value`` without trailing slashes, the default folder when that leaves nothing; with
    ``name``, the path of that record in it."""
    folder = (str(value) if value else "").rstrip("/")
    return record_path(folder, name) if name else folder or DEFAULT_DIR


class FilterModule(object):
    """numa.kube's record folder."""

    def filters(self):
        return {"record_dir": record_dir}
