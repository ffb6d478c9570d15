# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA device plugin stack's objects, node checks and the order of the module's steps.

The module against a real API server, scheduler and kubelet is proven in the cluster scenario
(molecule/cluster/tests/test_resource_plugin.py); here the pure parts, and the order of the steps
with an in-memory stand-in for the API, so that a refusal provably comes before any change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.stacks.resource_plugin import (
    PluginError,
    alignment_problems,
    allocatable_problems,
    numa_resources,
    objects,
    run,
)

PARAMS = {"state": "present", "name": "numa-resource-plugin", "namespace": "kube-system", "image": "r/agent:1",
          "image_pull_policy": "IfNotPresent", "capacity": 100, "socket_dir": "/var/lib/kubelet/device-plugins",
          "node_selector": {}, "tolerations": None, "priority_class_name": "system-node-critical",
          "resources": None, "labels": {}, "numa_nodes": {}, "wait": True, "wait_timeout": 5}


def node(name, allocatable=None, ready="True"):
    status = {"allocatable": allocatable or {}, "conditions": [{"type": "Ready", "status": ready}]}
    return {"metadata": {"name": name}, "status": status}


def test_objects_match_the_plugin_users_know():
    sa, cm, ds = objects(dict(PARAMS, node_selector={"numa": "yes"}, capacity=7, socket_dir="/k0s/dp"))
    assert [o["kind"] for o in (sa, cm, ds)] == ["ServiceAccount", "ConfigMap", "DaemonSet"]
    assert all(o["metadata"]["namespace"] == "kube-system" for o in (sa, cm, ds))
    assert cm["data"] == {"NUMA_CAPACITY": "7", "NUMA_SOCKET_DIR": "/k0s/dp"}
    pod = ds["spec"]["template"]
    assert pod["metadata"]["labels"]["app"] == "numa-resource-plugin"
    assert set(ds["spec"]["selector"]["matchLabels"].items()) <= set(pod["metadata"]["labels"].items())
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"numa": "yes"} and spec["automountServiceAccountToken"] is False
    container = spec["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [{"name": "device-plugins", "mountPath": "/k0s/dp"}]
    assert spec["volumes"][0]["hostPath"]["path"] == "/k0s/dp"
    # an empty selector and priority class leave the fields out rather than empty
    _sa, _cm, plain = objects(dict(PARAMS, priority_class_name=""))
    assert "nodeSelector" not in plain["spec"]["template"]["spec"]
    assert "priorityClassName" not in plain["spec"]["template"]["spec"]


@pytest.mark.parametrize("config,words", [
    ({"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}, []),
    ({"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted"}, []),
    ({"cpuManagerPolicy": "static", "topologyManagerPolicy": "best-effort"}, ["topologyManagerPolicy 'best-effort'"]),
    ({"cpuManagerPolicy": "static"}, ["topologyManagerPolicy 'none'"]),
    ({"topologyManagerPolicy": "single-numa-node"}, ["cpuManagerPolicy 'none'"]),
    ({}, ["cpuManagerPolicy 'none'", "topologyManagerPolicy 'none'"]),
])
def test_nodes_that_would_not_align_are_named_with_the_fix(config, words):
    problems = alignment_problems("w1", config)
    assert len(problems) == len(words)
    for problem, word in zip(problems, words):
        assert problem.startswith("w1: kubelet runs " + word) and "node_selector" in problem


def test_allocatable_is_checked_against_the_numa_nodes_with_cpus():
    worker = node("w1", {"cpu": "4", "numa-align/numa-0": "100", "numa-align/numa-2": "100",
                         "numa-align/numa-x": "1", "other/numa-align/numa-1": "3"})
    assert numa_resources(worker) == {0: 100, 2: 100}
    assert allocatable_problems(worker, 100) == []
    assert allocatable_problems(worker, 100, expected=[0, 2]) == []
    assert allocatable_problems(worker, 100, expected=[0, 1, 2]) == [
        "w1: numa-align/numa-1 is absent in allocatable, expected 100"]
    assert allocatable_problems(worker, 50) == ["w1: numa-align/numa-0 is 100 in allocatable, expected 50",
                                                "w1: numa-align/numa-2 is 100 in allocatable, expected 50"]
    assert allocatable_problems(node("w2"), 100) == ["w2: no numa-align/numa-N in allocatable yet"]


class MemoryApi(object):
    """The API as the stack's steps see it, in memory, recording what was asked."""

    def __init__(self, nodes, configs):
        self.node_list, self.configs, self.calls, self.store = nodes, configs, [], {}

    def nodes(self, selector=None):
        self.calls.append(("nodes", selector))
        return self.node_list

    def kubelet_config(self, name):
        self.calls.append(("configz", name))
        if isinstance(self.configs[name], Exception):
            raise self.configs[name]
        return self.configs[name]

    def named(self, list_path, names, **params):
        self.calls.append(("named", tuple(names)))
        found = dict((n["metadata"]["name"], n) for n in self.node_list)
        return dict((name, found.get(name)) for name in names)

    def list(self, path, **params):
        return (self.get(path, **params) or {}).get("items", [])

    def claim(self, objs):
        self.calls.append(("claim", [obj["kind"] for obj in objs]))

    def apply(self, obj, check_mode=False):
        self.calls.append(("apply", obj["kind"], check_mode))
        before = self.store.get(k8s_objects.path_of(obj))
        if not check_mode:
            self.store[k8s_objects.path_of(obj)] = obj
        return before != obj, k8s_objects.comparable(before), k8s_objects.comparable(obj)

    def delete(self, obj, check_mode=False):
        self.calls.append(("delete", obj["kind"], check_mode))
        before = self.store.get(k8s_objects.path_of(obj))
        if not check_mode:
            self.store.pop(k8s_objects.path_of(obj), None)
        return before is not None, k8s_objects.comparable(before)

    def get(self, path, **params):
        self.calls.append(("get", path))
        if path.endswith("/pods"):
            return {"items": []}
        found = self.store.get(path)
        if found and found["kind"] == "DaemonSet":
            found = dict(found, metadata=dict(found["metadata"], generation=1), status={
                "observedGeneration": 1, "desiredNumberScheduled": len(self.node_list),
                "updatedNumberScheduled": len(self.node_list), "numberAvailable": len(self.node_list)})
        return found


def no_wait(check, timeout, progress=None):
    done, value = check()
    return done, value, 0.0


ALIGNED = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}


def test_a_refused_node_stops_the_run_before_anything_is_applied():
    loose = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "none"}
    api = MemoryApi([node("good"), node("loose")], {"good": ALIGNED, "loose": loose})
    with pytest.raises(PluginError) as caught:
        run(api, PARAMS, False, no_wait)
    assert caught.value.problems[0].startswith("loose: kubelet runs topologyManagerPolicy 'none'")
    assert [call[0] for call in api.calls] == ["nodes", "configz", "configz"]


def test_a_preview_reads_the_planned_kubelet_configuration_where_given():
    loose = {"cpuManagerPolicy": "none", "topologyManagerPolicy": "none"}
    api = MemoryApi([node("fixed"), node("other")], {"fixed": loose, "other": ALIGNED})
    params = dict(PARAMS, kubelet_plan={"fixed": ALIGNED})
    assert run(api, params, True, no_wait)["changed"] is True
    assert ("configz", "fixed") not in api.calls and ("configz", "other") in api.calls
    with pytest.raises(PluginError, match="fixed: kubelet runs cpuManagerPolicy 'none'"):
        run(api, params, False, no_wait)


def test_a_preview_selects_by_the_labels_the_node_phase_will_set():
    """site.yml --check on a fleet not yet labelled: the default selector numa.kube/aligned matches
    the nodes whose planned kubelet aligns, and no longer the ones whose plan stops aligning."""
    loose = {"cpuManagerPolicy": "none", "topologyManagerPolicy": "none"}
    labelled = dict(node("was-aligned"), metadata={"name": "was-aligned", "labels": {"numa.kube/aligned": "true"}})
    api = MemoryApi([node("fresh"), labelled, node("untouched")], {"untouched": ALIGNED})
    params = dict(PARAMS, node_selector={"numa.kube/aligned": "true"},
                  kubelet_plan={"fresh": ALIGNED, "was-aligned": dict(ALIGNED, topologyManagerPolicy="best-effort")})
    assert run(api, params, True, no_wait)["changed"] is True
    assert [call for call in api.calls if call[0] == "configz"] == [], "the one chosen node was read from its plan"
    assert api.calls[0] == ("nodes", None), "every Node, matched against its planned labels"
    with pytest.raises(PluginError, match="no Node matches"):
        run(api, dict(params, kubelet_plan={"fresh": loose, "was-aligned": loose}), True, no_wait)


def test_no_selected_node_is_refused():
    with pytest.raises(PluginError, match="no Node matches node_selector {'numa': 'yes'}"):
        run(MemoryApi([], {}), dict(PARAMS, node_selector={"numa": "yes"}), False, no_wait)


def test_present_applies_waits_and_verifies_then_a_rerun_changes_nothing():
    api = MemoryApi([node("w1", {"numa-align/numa-0": "100", "numa-align/numa-1": "100"})], {"w1": ALIGNED})
    first = run(api, dict(PARAMS, numa_nodes={"w1": [0, 1]}), False, no_wait)
    assert first["changed"] is True and first["nodes"] == {"w1": {"numa-align/numa-0": 100, "numa-align/numa-1": 100}}
    assert [d["before_header"] for d in first["diff"]] == [
        "ServiceAccount kube-system/numa-resource-plugin", "ConfigMap kube-system/numa-resource-plugin",
        "DaemonSet kube-system/numa-resource-plugin"]
    again = run(api, dict(PARAMS, numa_nodes={"w1": [0, 1]}), False, no_wait)
    assert again["changed"] is False and again["diff"] == []


def test_a_missing_numa_node_fails_the_verification():
    api = MemoryApi([node("w1", {"numa-align/numa-0": "100"})], {"w1": ALIGNED})
    with pytest.raises(PluginError, match="w1: numa-align/numa-1 is absent in allocatable, expected 100"):
        run(api, dict(PARAMS, numa_nodes={"w1": [0, 1]}), False, no_wait)


def test_check_mode_neither_waits_nor_changes():
    api = MemoryApi([node("w1")], {"w1": ALIGNED})
    result = run(api, PARAMS, True, no_wait)
    assert result["changed"] is True and api.store == {}
    assert ("get", "/apis/apps/v1/namespaces/kube-system/daemonsets/numa-resource-plugin") not in api.calls


def test_absent_removes_in_reverse_order_and_then_has_nothing_to_do():
    api = MemoryApi([node("w1", {"numa-align/numa-0": "100"})], {"w1": ALIGNED})
    run(api, PARAMS, False, no_wait)
    api.calls = []
    gone = run(api, dict(PARAMS, state="absent"), False, no_wait)
    assert gone["changed"] is True and api.store == {}
    assert [c[1] for c in api.calls if c[0] == "delete"] == ["DaemonSet", "ConfigMap", "ServiceAccount"]
    assert run(api, dict(PARAMS, state="absent"), False, no_wait)["changed"] is False


@pytest.mark.parametrize("change,words", [
    ({"capacity": 1000000000}, "capacity must be between 1 and 1000 devices per NUMA node .* got 1000000000"),
    ({"capacity": 0}, "capacity must be between 1 and 1000"),
    ({"image": ""}, "image is empty: it must name an image"),
    ({"image": "http://r/agent:1"}, "it starts with a scheme"),
    ({"name": "x/../../secrets/db"}, "name 'x/../../secrets/db' is not a valid Kubernetes object name"),
    ({"namespace": "Kube System"}, "not a valid namespace name"),
    ({"node_selector": {"numa": "true,zone!=x"}}, "node_selector: value 'true,zone!=x' of 'numa'"),
    ({"socket_dir": "relative/dp"}, "socket_dir must be an absolute path"),
])
def test_options_are_checked_before_any_request(change, words):
    from ansible_collections.numa.kube.plugins.module_utils.stacks.resource_plugin import check_params
    with pytest.raises(PluginError, match=words):
        check_params(dict(PARAMS, **change))


def test_every_option_problem_is_named_at_once():
    from ansible_collections.numa.kube.plugins.module_utils.stacks.resource_plugin import check_params
    with pytest.raises(PluginError) as caught:
        check_params(dict(PARAMS, capacity=0, image=" ", namespace="-"))
    assert len(caught.value.problems) == 3
    check_params(PARAMS)  # the defaults pass
    check_params(dict(PARAMS, state="absent", image=None))  # absent needs no image
