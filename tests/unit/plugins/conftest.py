# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Modules run in-process keep their records of what numa.kube set (kubelet.json, kernel.json,
containerd-nri.json) in each test's own folder, never in /var/lib/numa-kube/applied of the machine
running the tests."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.modules import containerd_nri, kernel_args, kubelet_config


@pytest.fixture(autouse=True)
def records_in_the_tests_folder(tmp_path, monkeypatch):
    folder = tmp_path / "applied"
    monkeypatch.setattr(kubelet_config, "RECORD", str(folder / "kubelet.json"))
    monkeypatch.setattr(kernel_args, "RECORD", str(folder / "kernel.json"))
    monkeypatch.setattr(containerd_nri, "RECORD", str(folder / "containerd-nri.json"))
    return folder
