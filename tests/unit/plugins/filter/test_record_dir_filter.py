# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube.record_dir: the one reading of numa_kube_record_dir, as the roles and site.yml use it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.filter.record_dir import record_dir


@pytest.mark.parametrize("value, name, expected", [
    (None, None, "/var/lib/numa-kube/applied"),
    ("", None, "/var/lib/numa-kube/applied"),
    ("/", None, "/var/lib/numa-kube/applied"),
    ("///", "kubelet.json", "/var/lib/numa-kube/applied/kubelet.json"),
    ("/srv/numa/", None, "/srv/numa"),
    ("/srv/numa//", "kernel.json", "/srv/numa/kernel.json"),
    # what the preflight then refuses stays as given (not absolute, not normal), for its message
    ("relative/dir", None, "relative/dir"),
    ("/a/../b", "x.json", "/a/../b/x.json"),
])
def test_the_folder_is_read_one_way(value, name, expected):
    assert record_dir(value, name) == expected
