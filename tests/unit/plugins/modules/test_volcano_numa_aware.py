# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube.volcano_numa_aware run in-process against the in-memory scheduler API: what a task
returns, and what a failed switch reports beside its message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.module_utils import basic

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.modules import volcano_numa_aware
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_volcano_conf import SHIPPED
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_volcano_scheduler import (
    SchedulerApi,
    quick_wait,
)
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run


class ModuleApi(SchedulerApi):
    """What connect() gives the module: the API with its deadline-bound wait and the kept list."""

    kept = []

    @staticmethod
    def wait_for(check, timeout, interval=2.0):
        return quick_wait(check, timeout, interval)


@pytest.fixture
def api(monkeypatch):
    made = []

    def connect(module):
        made.append(ModuleApi())
        return made[-1]

    monkeypatch.setattr(volcano_numa_aware, "connect", connect)
    clock = [0.0]

    def tick():
        clock[0] += 3.0
        return clock[0]

    monkeypatch.setattr(volcano_numa_aware.time, "monotonic", tick)
    return made


ARGS = {"state": "enabled", "weight": 10, "topology_policy": "single-numa-node", "wait_timeout": 10}


def test_the_module_switches_and_returns_the_diff_only_when_asked(api):
    failed, result = run(volcano_numa_aware, dict(ARGS, scheduler_selector={"app": "volcano-scheduler"}), diff=True)
    assert not failed, result
    assert result["changed"] and result["status"] == "open" and result["activation"]["how"] == "reload"
    assert result["diff"]["before"] == SHIPPED and "numa-aware" in result["diff"]["after"]
    assert "kept" not in result and list(result["nodes"]) == ["w2"]
    failed, result = run(volcano_numa_aware, ARGS)
    assert "diff" not in result


def test_a_refusal_fails_the_task_with_its_message_and_nothing_written(api):
    failed, result = run(volcano_numa_aware, dict(ARGS, weight=0))
    assert failed and result["msg"].startswith("weight must be a whole number from 1 to 100")
    assert api[0].calls == []


def test_a_failure_after_the_write_returns_what_became_of_the_previous_configuration(api, monkeypatch):
    monkeypatch.setattr(ModuleApi, "__init__", lambda self, log_level=3: SchedulerApi.__init__(self, log_level=1))
    failed, result = run(volcano_numa_aware, ARGS)
    assert failed
    assert result["msg"].startswith("the scheduler did not take in the new configuration within 10s")
    assert "; the previous configuration was put back in ConfigMap volcano-system/volcano-scheduler-configmap" \
        in result["msg"]
    assert result["rollback"] == {"restored": True, "resource_version": "9"}
    assert api[0].conf() == SHIPPED


def test_a_node_report_the_api_server_refuses_is_a_warning_not_a_failed_switch(api, monkeypatch):
    # the report comes after the change is done: failing the task there would leave a switch
    # reported as failed that went through (and nothing to put back)
    def refuse(self, selector=None):
        raise KubeApiError("GET /api/v1/nodes: 403 nodes is forbidden", 403)

    monkeypatch.setattr(ModuleApi, "nodes", refuse)
    # the module's warnings as it gives them (the test runner stops at exit_json, before Ansible puts
    # them in the result; where they go from there differs between a run of this file and the tier)
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, message: warned.append(message))
    failed, result = run(volcano_numa_aware, ARGS)
    assert not failed and result["changed"] and result["nodes"] == {}, result
    assert any("the nodes could not be reported: GET /api/v1/nodes: 403" in message for message in warned), warned
