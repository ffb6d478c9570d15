# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube.node_labels run in-process against the in-memory Node and kubelet: what a task
returns, warns and shows as its diff, and how it fails."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.module_utils import basic

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.modules import node_labels
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_node_labels import (
    ALIGNED_LABELS,
    BEST_EFFORT,
    NOT_READY,
    NodeApi,
    quick_wait,
)
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run


class ModuleApi(NodeApi):
    """What connect() gives the module: the API with its deadline-bound wait."""

    @staticmethod
    def wait_for(check, timeout=None, interval=2.0):
        return quick_wait(check, timeout, interval)


@pytest.fixture
def cluster(monkeypatch):
    """The API the module connects to (set ``cluster["api"]`` first) and the warnings it gave."""
    state = {"api": ModuleApi(), "warnings": [], "stacks": []}

    def connect(module, stack=None):
        state["stacks"].append(stack)
        return state["api"]

    monkeypatch.setattr(node_labels, "connect", connect)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: state["warnings"].append(text))
    return state


def test_a_fresh_node_is_labelled_and_the_diff_comes_only_when_asked(cluster):
    failed, result = run(node_labels, {"name": "w1"}, diff=True)
    assert not failed, result
    assert result["changed"] and result["aligned"] and result["labels"] == ALIGNED_LABELS and result["stale"] == []
    assert result["diff"] == {"before": {}, "after": ALIGNED_LABELS, "before_header": "Node w1 numa.kube labels",
                              "after_header": "Node w1 numa.kube labels"}
    assert cluster["warnings"] == [] and cluster["stacks"] == [None]
    failed, result = run(node_labels, {"name": "w1"})
    assert not failed and not result["changed"] and "diff" not in result


def test_stale_labels_are_a_warning_naming_each_and_check_mode_patches_nothing(cluster):
    cluster["api"] = ModuleApi(labels=ALIGNED_LABELS, config=BEST_EFFORT)
    failed, result = run(node_labels, {"name": "w1"}, check_mode=True)
    assert not failed and result["changed"] and not result["aligned"]
    assert [item["key"] for item in result["stale"]] == ["numa.kube/aligned", "numa.kube/topology-manager-policy"]
    assert cluster["api"].patches == []
    warning, = cluster["warnings"]
    assert warning.startswith("Node w1 carried numa.kube labels that disagree with what its kubelet runs")
    assert "numa.kube/topology-manager-policy=single-numa-node while kubelet runs best-effort" in warning


def test_a_node_not_ready_fails_the_task_with_nothing_changed(cluster):
    cluster["api"] = ModuleApi(conditions=NOT_READY)
    failed, result = run(node_labels, {"name": "w1", "wait_timeout": 5})
    assert failed and result["msg"].startswith("Node w1 is not Ready after")
    assert cluster["api"].patches == [] and "changed" not in result


def test_an_api_error_before_the_patch_says_nothing_was_changed(cluster):
    def refuse(path, **params):
        raise KubeApiError("GET /api/v1/nodes/w1: 403 nodes \"w1\" is forbidden", 403)

    cluster["api"].get = refuse
    failed, result = run(node_labels, {"name": "w1"})
    assert failed and result["msg"] == "GET /api/v1/nodes/w1: 403 nodes \"w1\" is forbidden; nothing was changed"


def test_absent_takes_the_labels_off_a_node_that_is_not_ready(cluster):
    cluster["api"] = ModuleApi(labels=ALIGNED_LABELS, conditions=NOT_READY)
    failed, result = run(node_labels, {"name": "w1", "state": "absent"})
    assert not failed and result["changed"] and result["labels"] == {}
    assert not any(key.startswith("numa.kube/") and key != "numa.kube/other"
                   for key in cluster["api"].node["metadata"]["labels"])


def test_a_missing_node_is_a_warning_for_absent(cluster):
    cluster["api"] = ModuleApi(exists=False)
    failed, result = run(node_labels, {"name": "w1", "state": "absent"})
    assert not failed and not result["changed"]
    assert cluster["warnings"] == ["Node w1 does not exist: there are no labels to take off"]


def _yaml(path):
    import os
    import yaml
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
    with open(os.path.join(root, path)) as handle:
        return yaml.safe_load(handle)


def test_the_stacks_that_need_alignment_select_the_aligned_label_by_default_and_the_exporter_every_node():
    import yaml
    from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import ALIGNED_SELECTOR
    from ansible_collections.numa.kube.plugins.modules import numa_resource_plugin, volcano_stack
    for module, option in ((numa_resource_plugin, "node_selector"), (volcano_stack, "publisher_node_selector")):
        assert yaml.safe_load(module.DOCUMENTATION)["options"][option]["default"] == ALIGNED_SELECTOR
    for role, variable in (("numa_resource_plugin", "numa_resource_plugin_node_selector"),
                           ("volcano", "volcano_publisher_node_selector"),
                           ("numa_monitoring", "numa_monitoring_node_selector")):
        default = _yaml("roles/%s/defaults/main.yml" % role)[variable]
        assert default == ({} if role == "numa_monitoring" else ALIGNED_SELECTOR), role
        spec = _yaml("roles/%s/meta/argument_specs.yml" % role)["argument_specs"]["main"]["options"][variable]
        assert spec["default"] == default, role
