# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube.numa_monitoring's option exporter_containers, through the module's own argument spec:
refused outside its choices before any connection, handed to the stack's run() as given, defaulting
to ``all``. (The stack itself: tests/unit/plugins/module_utils/test_monitoring.py.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.modules import numa_monitoring
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run


class Api(object):
    kept = []

    @staticmethod
    def wait_for(check, timeout=None, interval=2.0, progress=None):
        raise AssertionError("no wait in these tests")


@pytest.fixture
def module(monkeypatch):
    """The params run() got, and the stacks connect() was asked for."""
    seen = {"params": [], "connected": []}

    def connect(ansible_module, stack=None):
        seen["connected"].append(stack)
        return Api()

    def fake_run(api, params, check_mode, wait_for):
        seen["params"].append(dict(params))
        return {"changed": False, "objects": [], "diff": [], "nodes": {}, "operator": True}

    monkeypatch.setattr(numa_monitoring, "connect", connect)
    monkeypatch.setattr(numa_monitoring, "run", fake_run)
    return seen


@pytest.mark.parametrize("value", ["all", "exclusive", "none"])
def test_each_choice_reaches_the_stack(module, value):
    failed, result = run(numa_monitoring, {"image": "r/agent:1", "exporter_containers": value})
    assert not failed, result
    assert module["params"][0]["exporter_containers"] == value


def test_the_default_is_every_container(module):
    failed, result = run(numa_monitoring, {"image": "r/agent:1"})
    assert not failed, result
    assert module["params"][0]["exporter_containers"] == "all"


@pytest.mark.parametrize("value", ["pinned", "All", ""])
def test_another_value_is_refused_before_any_connection(module, value):
    failed, result = run(numa_monitoring, {"image": "r/agent:1", "exporter_containers": value})
    assert failed
    assert "exporter_containers" in result["msg"] and "all, exclusive, none" in result["msg"], result["msg"]
    assert module["connected"] == [] and module["params"] == []
