# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Node labels that say what a kubelet runs: from /configz, the stale report, the one merge
patch, and the order of the steps against an in-memory Node and kubelet (a refusal comes before
any patch). The module against a real API server and kubelets is proven in the cluster scenario."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import itertools

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
# RFC 7386, as the API server applies application/merge-patch+json
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import merge_patch
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import (
    ALIGNED_LABEL,
    ALIGNED_SELECTOR,
    MERGE_PATCH,
    OWNED_KEYS,
    NodeLabelsError,
    label_patch,
    labels_from_config,
    node_ready,
    owned_labels,
    run,
    stale_labels,
    stale_warning,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.resource_plugin import alignment_problems

CPU = ("none", "static")
MEMORY = ("None", "Static")
TOPOLOGY = ("none", "best-effort", "restricted", "single-numa-node")
SCOPE = ("container", "pod")
ALIGNED = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
           "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod"}
ALIGNED_LABELS = {ALIGNED_LABEL: "true", "numa.kube/cpu-manager-policy": "static",
                  "numa.kube/memory-manager-policy": "Static",
                  "numa.kube/topology-manager-policy": "single-numa-node",
                  "numa.kube/topology-manager-scope": "pod"}
BEST_EFFORT = dict(ALIGNED, topologyManagerPolicy="best-effort")


@pytest.mark.parametrize("cpu,memory,topology,scope", list(itertools.product(CPU, MEMORY, TOPOLOGY, SCOPE)))
def test_labels_name_every_policy_in_force_and_aligned_only_where_kubelet_aligns(cpu, memory, topology, scope):
    config = {"cpuManagerPolicy": cpu, "memoryManagerPolicy": memory, "topologyManagerPolicy": topology,
              "topologyManagerScope": scope, "kubeReserved": {"cpu": "500m"}}
    labels = labels_from_config(config)
    assert {key: value for key, value in labels.items() if key != ALIGNED_LABEL} == {
        "numa.kube/cpu-manager-policy": cpu, "numa.kube/memory-manager-policy": memory,
        "numa.kube/topology-manager-policy": topology, "numa.kube/topology-manager-scope": scope}
    should_align = cpu == "static" and topology in ("restricted", "single-numa-node")
    # never "false": the label is there with "true", or not at all
    assert labels.get(ALIGNED_LABEL, "absent") == ("true" if should_align else "absent")
    # one rule: the label agrees with the device plugin's refusal for every combination
    assert (ALIGNED_LABEL in labels) == (alignment_problems("w1", config) == [])


def test_best_effort_is_not_aligned_even_with_every_other_policy_set():
    labels = labels_from_config(BEST_EFFORT)
    assert ALIGNED_LABEL not in labels and labels["numa.kube/topology-manager-policy"] == "best-effort"


def test_a_field_kubelet_leaves_out_is_kubelets_default():
    assert labels_from_config({}) == {"numa.kube/cpu-manager-policy": "none",
                                      "numa.kube/memory-manager-policy": "None",
                                      "numa.kube/topology-manager-policy": "none",
                                      "numa.kube/topology-manager-scope": "container"}


@pytest.mark.parametrize("config,words", [
    (dict(ALIGNED, topologyManagerPolicy="single numa"), "value 'single numa' of 'numa.kube/topology-manager-policy'"),
    (dict(ALIGNED, cpuManagerPolicy=["static"]), "cpuManagerPolicy ['static'], which is not a policy name"),
])
def test_a_value_that_cannot_be_a_label_is_refused_naming_it(config, words):
    with pytest.raises(KubeApiError) as caught:
        labels_from_config(config)
    assert words in str(caught.value)


def test_the_stacks_default_selector_is_the_aligned_label():
    assert ALIGNED_SELECTOR == {"numa.kube/aligned": "true"} and ALIGNED_LABEL in OWNED_KEYS


def test_owned_labels_reads_only_the_five_keys():
    node = {"metadata": {"labels": dict(ALIGNED_LABELS, **{"numa.kube/stack": "x", "zone": "a",
                                                           "kubernetes.io/hostname": "w1"})}}
    assert owned_labels(node) == ALIGNED_LABELS
    assert owned_labels({"metadata": {}}) == {}


def test_labels_that_disagree_with_the_running_kubelet_are_stale_missing_ones_are_not():
    wanted = labels_from_config(BEST_EFFORT)
    current = dict(ALIGNED_LABELS)
    del current["numa.kube/topology-manager-scope"]  # missing: set, not reported
    assert stale_labels(current, wanted) == [
        {"key": ALIGNED_LABEL, "label": "true", "running": None},
        {"key": "numa.kube/topology-manager-policy", "label": "single-numa-node", "running": "best-effort"}]
    assert stale_labels(wanted, wanted) == [] and stale_labels({}, wanted) == []
    warning = stale_warning("w1", stale_labels(current, wanted))
    assert "Node w1" in warning and "numa.kube/aligned=true while kubelet runs no NUMA alignment" in warning
    assert "numa.kube/topology-manager-policy=single-numa-node while kubelet runs best-effort" in warning
    assert stale_warning("w1", []) is None


def test_the_patch_names_only_what_differs_among_the_owned_keys_and_nulls_removals():
    current = dict(ALIGNED_LABELS)
    patch = label_patch(current, labels_from_config(BEST_EFFORT))
    assert patch == {"metadata": {"labels": {ALIGNED_LABEL: None,
                                             "numa.kube/topology-manager-policy": "best-effort"}}}
    assert label_patch(current, current) is None
    assert label_patch({}, {}) is None
    # taking the labels off names every owned key present, and nothing else
    assert label_patch({"numa.kube/cpu-manager-policy": "static"}, {}) == {
        "metadata": {"labels": {"numa.kube/cpu-manager-policy": None}}}
    everything = label_patch(current, {})["metadata"]["labels"]
    assert everything == dict((key, None) for key in OWNED_KEYS)


@pytest.mark.parametrize("conditions,ready,words", [
    ([{"type": "Ready", "status": "True"}], True, ""),
    ([{"type": "MemoryPressure", "status": "False"},
      {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "PLEG"}],
     False, "Ready=False (KubeletNotReady: PLEG)"),
    ([{"type": "Ready", "status": "Unknown"}], False, "Ready=Unknown"),
    ([], False, "no Ready condition yet"),
])
def test_ready_is_the_nodes_ready_condition(conditions, ready, words):
    found, why = node_ready({"status": {"conditions": conditions}})
    assert found is ready and why.startswith(words) and (why == "") is ready


# --- the steps, against an in-memory Node and kubelet --------------------------------------------

READY = [{"type": "Ready", "status": "True"}]
NOT_READY = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "runtime down"}]


class NodeApi(object):
    """One Node and its kubelet's /configz, in memory; records every request."""

    def __init__(self, labels=None, config=None, conditions=None, configz_errors=(), exists=True):
        self.node = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": "w1", "uid": "uid-1", "resourceVersion": "7",
                                  "labels": dict(labels or {}, **{"kubernetes.io/hostname": "w1", "zone": "a",
                                                                  "numa.kube/other": "x"})},
                     "status": {"conditions": list(READY if conditions is None else conditions)}} if exists else None
        self.config = ALIGNED if config is None else config
        self.configz_errors = list(configz_errors)
        self.calls = []
        self.patches = []

    def get(self, path, **params):
        self.calls.append(("GET", path))
        return copy.deepcopy(self.node)

    def kubelet_config(self, name):
        self.calls.append(("configz", name))
        if self.configz_errors:
            raise self.configz_errors.pop(0)
        return self.config

    def request(self, method, path, body=None, **params):
        self.calls.append((method, path))
        self.patches.append((body, params))
        sent_uid = ((body or {}).get("metadata") or {}).get("uid")
        if sent_uid and sent_uid != self.node["metadata"].get("uid"):
            # what kube-apiserver answers a merge patch whose uid is not the object's (measured on the
            # test bed's 1.36: 422, not a 409 precondition failure)
            raise KubeApiError("PATCH /api/v1/nodes/w1: 422 Node \"w1\" is invalid: metadata.uid: Invalid value: "
                               "\"%s\": field is immutable" % sent_uid, 422)
        sent_version = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if sent_version and sent_version != self.node["metadata"]["resourceVersion"]:
            raise KubeApiError("PATCH /api/v1/nodes/w1: 409 Operation cannot be fulfilled on nodes \"w1\": the "
                               "object has been modified; please "
                               "apply your changes to the latest version and try again", 409)
        self.node = merge_patch(self.node, body)
        self.written()
        return copy.deepcopy(self.node)

    def written(self):
        """A write of the Node: a new resourceVersion, as the API server gives it."""
        self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)


def quick_wait(check, timeout=None, interval=0):
    for _attempt in range(5):
        done, value = check()
        if done:
            return done, value, 0.0
    return done, value, 42.0


PRESENT = {"name": "w1", "state": "present"}
ABSENT = {"name": "w1", "state": "absent"}


def test_present_labels_a_fresh_node_with_one_merge_patch_then_a_rerun_sends_nothing():
    api = NodeApi()
    result = run(api, PRESENT, False, quick_wait)
    assert result["changed"] is True and result["aligned"] is True and result["stale"] == []
    assert result["labels"] == ALIGNED_LABELS
    assert result["diff"] == {"before": {}, "after": ALIGNED_LABELS}
    assert [call[0] for call in api.calls] == ["GET", "configz", "PATCH"]
    body, params = api.patches[0]
    assert body == {"metadata": {"labels": ALIGNED_LABELS, "uid": "uid-1", "resourceVersion": "7"}}, \
        "pinned to the Node as it was read"
    assert params["content_type"] == MERGE_PATCH and params["field_manager"] == "numa.kube"
    # every label numa.kube does not own is as it was
    labels = api.node["metadata"]["labels"]
    assert labels["zone"] == "a" and labels["numa.kube/other"] == "x" and labels["kubernetes.io/hostname"] == "w1"
    again = run(api, PRESENT, False, quick_wait)
    assert again["changed"] is False and len(api.patches) == 1 and again["labels"] == ALIGNED_LABELS


def test_labels_a_changed_kubelet_no_longer_runs_are_reported_and_put_right():
    api = NodeApi(labels=ALIGNED_LABELS, config=BEST_EFFORT)
    result = run(api, PRESENT, False, quick_wait)
    assert result["changed"] is True and result["aligned"] is False
    assert result["stale"] == [{"key": ALIGNED_LABEL, "label": "true", "running": None},
                               {"key": "numa.kube/topology-manager-policy", "label": "single-numa-node",
                                "running": "best-effort"}]
    assert api.patches[0][0] == {"metadata": {"labels": {ALIGNED_LABEL: None,
                                                         "numa.kube/topology-manager-policy": "best-effort"},
                                              "uid": "uid-1", "resourceVersion": "7"}}
    assert ALIGNED_LABEL not in api.node["metadata"]["labels"]
    assert api.node["metadata"]["labels"]["numa.kube/other"] == "x"


def test_check_mode_reports_the_change_and_sends_no_patch():
    api = NodeApi(labels=ALIGNED_LABELS, config=BEST_EFFORT)
    result = run(api, PRESENT, True, quick_wait)
    assert result["changed"] is True and len(result["stale"]) == 2 and api.patches == []
    assert api.node["metadata"]["labels"][ALIGNED_LABEL] == "true"


def test_a_node_not_ready_fails_naming_its_condition_and_nothing_is_patched():
    api = NodeApi(conditions=NOT_READY)
    with pytest.raises(NodeLabelsError) as caught:
        run(api, PRESENT, False, quick_wait)
    message = str(caught.value)
    assert message.startswith("Node w1 is not Ready after 42 s (Ready=False (KubeletNotReady: runtime down))")
    assert "raise wait_timeout" in message and message.endswith("nothing was changed")
    assert api.patches == [] and ("configz", "w1") not in api.calls


def test_a_kubelet_that_does_not_answer_configz_fails_and_nothing_is_patched():
    api = NodeApi(configz_errors=[KubeApiError("GET /api/v1/nodes/w1/proxy/configz: 503 no endpoints", 503)] * 9)
    with pytest.raises(NodeLabelsError) as caught:
        run(api, PRESENT, False, quick_wait)
    assert str(caught.value).startswith("kubelet of Node w1 did not answer /configz through the API server within "
                                        "42 s (HTTP 503: GET /api/v1/nodes/w1/proxy/configz: 503 no endpoints)")
    assert api.patches == []


def test_a_kubelet_that_answers_after_a_restart_is_waited_for():
    api = NodeApi(configz_errors=[KubeApiError("502 bad gateway", 502)] * 2)
    assert run(api, PRESENT, False, quick_wait)["labels"] == ALIGNED_LABELS
    assert [call[0] for call in api.calls].count("configz") == 3


def test_credentials_that_may_not_read_configz_fail_at_once_with_the_grant_needed():
    api = NodeApi(configz_errors=[KubeApiError("403 forbidden: nodes/proxy", 403)])
    with pytest.raises(NodeLabelsError, match="need get on nodes/proxy"):
        run(api, PRESENT, False, quick_wait)
    assert [call[0] for call in api.calls] == ["GET", "configz"] and api.patches == []


def test_a_missing_node_fails_present_and_has_nothing_to_remove_for_absent():
    with pytest.raises(NodeLabelsError, match="Node w1 does not exist"):
        run(NodeApi(exists=False), PRESENT, False, quick_wait)
    result = run(NodeApi(exists=False), ABSENT, False, quick_wait)
    assert result["changed"] is False and "does not exist" in result["warning"]


def test_an_invalid_name_is_refused_before_any_request():
    api = NodeApi()
    with pytest.raises(KubeApiError, match="name 'w1/../x' is not a valid Kubernetes object name"):
        run(api, dict(PRESENT, name="w1/../x"), False, quick_wait)
    assert api.calls == []


def test_absent_removes_only_the_owned_keys_without_reading_kubelet_then_has_nothing_to_do():
    api = NodeApi(labels=ALIGNED_LABELS, conditions=NOT_READY, configz_errors=[KubeApiError("down", 503)])
    preview = run(api, ABSENT, True, quick_wait)
    assert preview["changed"] is True and api.patches == []
    result = run(api, ABSENT, False, quick_wait)
    assert result == {"changed": True, "labels": {}, "stale": [], "aligned": False,
                      "diff": {"before": ALIGNED_LABELS, "after": {}}}
    assert api.patches[0][0] == {"metadata": {"labels": dict((key, None) for key in OWNED_KEYS), "uid": "uid-1",
                                              "resourceVersion": "7"}}
    assert ("configz", "w1") not in api.calls
    assert api.node["metadata"]["labels"] == {"kubernetes.io/hostname": "w1", "zone": "a", "numa.kube/other": "x"}
    assert run(api, ABSENT, False, quick_wait)["changed"] is False and len(api.patches) == 1


def test_a_patch_the_server_did_not_keep_fails_the_task():
    api = NodeApi()
    api.request = lambda method, path, body=None, **params: api.node  # something undid the patch
    with pytest.raises(NodeLabelsError, match="was patched but its numa.kube labels are {}") as caught:
        run(api, PRESENT, False, quick_wait)
    assert caught.value.result["changed"] is True and "diff" not in caught.value.result


def test_a_refused_patch_fails_the_task_naming_it_unchanged():
    api = NodeApi()

    def refuse(method, path, body=None, **params):
        raise KubeApiError("PATCH /api/v1/nodes/w1: 403 forbidden", 403)

    api.request = refuse
    with pytest.raises(NodeLabelsError, match="failed: PATCH /api/v1/nodes/w1: 403 forbidden; fix what it names") \
            as caught:
        run(api, PRESENT, False, quick_wait)
    assert caught.value.result["changed"] is False


def test_a_node_registered_again_between_the_read_and_the_patch_is_not_labelled():
    """Hostile review: the label patch carried no precondition, so a Node deleted and registered again
    (another machine, another kubelet) after /configz was read got the first one's labels."""
    api = NodeApi()
    real_config = api.kubelet_config

    def replaced(name):
        config = real_config(name)
        api.node["metadata"]["uid"] = "uid-2"  # the Node of that name is another object now
        return config

    api.kubelet_config = replaced
    with pytest.raises(NodeLabelsError) as caught:
        run(api, PRESENT, False, quick_wait)
    assert "the Node was deleted and registered again since it was read (uid uid-1)" in str(caught.value)
    assert "metadata.uid: Invalid value" in str(caught.value)
    assert owned_labels(api.node) == {}


def test_labels_read_from_a_kubelet_that_restarted_before_the_patch_are_read_again():
    """Hostile review: label_nodes.yml took no lock against a concurrent take-out. A run that read
    /configz while the node still aligned, then patched after the take-out had restarted its
    kubelet with the defaults, put numa.kube/aligned on a node that no longer aligns. The patch is
    pinned to the resourceVersion read: the restart wrote the Node (kubelet's status), the patch is
    refused, and the next read labels what the kubelet runs now."""
    api = NodeApi()
    real_config = api.kubelet_config
    reads = []

    def taken_out_meanwhile(name):
        config = real_config(name)
        if not reads:
            api.config = BEST_EFFORT   # the take-out restarted kubelet without the NUMA settings
            api.written()              # and kubelet wrote its Node's status
        reads.append(config)
        return config

    api.kubelet_config = taken_out_meanwhile
    result = run(api, PRESENT, False, quick_wait)
    assert [call[0] for call in api.calls] == ["GET", "configz", "PATCH", "GET", "configz", "PATCH"]
    assert result["aligned"] is False and ALIGNED_LABEL not in api.node["metadata"]["labels"]
    assert api.node["metadata"]["labels"]["numa.kube/topology-manager-policy"] == "best-effort"
    assert api.patches[1][0]["metadata"]["resourceVersion"] == "8"


def test_a_node_written_between_every_read_and_patch_fails_after_the_retries_unchanged():
    api = NodeApi()
    real_get = api.get

    def busy(path, **params):
        node = real_get(path, **params)
        api.written()   # something writes the Node right after every read
        return node

    api.get = busy
    with pytest.raises(NodeLabelsError) as caught:
        run(api, PRESENT, False, quick_wait)
    assert str(caught.value).startswith("the patch of Node w1's numa.kube labels was refused 6 times as the Node was "
                                        "written between each read and the patch (PATCH /api/v1/nodes/w1: 409 "
                                        "Operation cannot be fulfilled")
    assert caught.value.result["changed"] is False and owned_labels(api.node) == {}
    assert len(api.patches) == 6


def test_a_409_that_is_no_conflict_fails_at_once_naming_it():
    """Third review: an admission webhook's 409 was read again six times and then blamed on something
    writing the Node without pause."""
    api = NodeApi()

    def denied(method, path, body=None, **params):
        api.patches.append((body, params))
        raise KubeApiError("PATCH /api/v1/nodes/w1: 409 admission webhook \"labels.example.com\" denied the request", 409)

    api.request = denied
    with pytest.raises(NodeLabelsError) as caught:
        run(api, PRESENT, False, quick_wait)
    assert 'admission webhook "labels.example.com" denied the request' in str(caught.value)
    assert "without pause" not in str(caught.value) and len(api.patches) == 1


@pytest.mark.parametrize("missing", ["resourceVersion", "uid"])
def test_a_node_without_the_metadata_the_patch_is_pinned_to_is_refused_unpatched(missing):
    """Third review: a Node answered without resourceVersion (or uid) was patched with no precondition."""
    api = NodeApi()
    del api.node["metadata"][missing]
    with pytest.raises(NodeLabelsError, match="has no uid or resourceVersion"):
        run(api, PRESENT, False, quick_wait)
    assert api.patches == []


@pytest.mark.parametrize("answer", [KubeApiError("the kubelet of w1 answered /configz without a kubeletconfig object: "
                                                 "{'kubeletconfig': []}"),
                                    KubeApiError("GET /api/v1/nodes/w1/proxy/configz: the answer is not JSON")])
def test_a_configz_answer_that_is_no_configuration_fails_without_waiting(answer):
    """Third review: an answer of the wrong shape was asked again until wait_timeout ran out (300 s by
    default), though kubelet answers the same every time."""
    api = NodeApi(configz_errors=[answer] * 9)
    with pytest.raises(NodeLabelsError, match="answered /configz with something that is not its configuration"):
        run(api, PRESENT, False, quick_wait)
    assert [call[0] for call in api.calls].count("configz") == 1 and api.patches == []


def test_a_webhooks_409_that_quotes_a_conflict_is_no_conflict():
    """Fourth review: the conflict was told by its text anywhere in the message, so a webhook's 409
    quoting it was read again six times."""
    api = NodeApi()

    def denied(method, path, body=None, **params):
        api.patches.append((body, params))
        raise KubeApiError("PATCH /api/v1/nodes/w1: 409 admission webhook \"labels.example.com\" denied the request: "
                           "Operation cannot be fulfilled on nodes \"w1\"", 409)

    api.request = denied
    with pytest.raises(NodeLabelsError, match="admission webhook"):
        run(api, PRESENT, False, quick_wait)
    assert len(api.patches) == 1


def test_a_node_answer_of_the_wrong_shape_is_refused_or_has_nothing_to_take_off_without_a_crash():
    """Fourth review: metadata or labels that are lists raised AttributeError or TypeError."""
    api = NodeApi()
    api.get = lambda path, **params: {"metadata": ["x"]}
    with pytest.raises(NodeLabelsError, match="has no uid or resourceVersion"):
        run(api, ABSENT, False, quick_wait)
    api.get = lambda path, **params: {"metadata": {"uid": "u", "resourceVersion": "1", "labels": ["x"]}}
    assert run(api, ABSENT, False, quick_wait)["changed"] is False and api.patches == []
