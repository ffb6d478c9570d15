# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet_config run in-process keeps its record in each test's own folder, never in the
/var/lib/numa-kube/applied of the machine running the tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.modules import kubelet_config


@pytest.fixture(autouse=True)
def kubelet_record_in_the_tests_folder(tmp_path, monkeypatch):
    path = tmp_path / "applied-kubelet" / "kubelet.json"
    monkeypatch.setattr(kubelet_config, "RECORD", str(path))
    return path
