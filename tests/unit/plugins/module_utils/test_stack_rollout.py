# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster stacks on a cluster of any size: maxUnavailable, waits that run while the rollout
moves (a virtual clock), paged lists, pending-only re-checks, a few proxy calls at a time and an
accepted share of unavailable nodes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.numa.kube.plugins.module_utils.k8s import runner as k8s_runner
from ansible_collections.numa.kube.plugins.module_utils.k8s import waiting as kube_wait
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring_objects
from ansible_collections.numa.kube.plugins.module_utils.stacks import resource_plugin
from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano as volcano_stack
from ansible_collections.numa.kube.plugins.module_utils.k8s.client import KubeApi
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    count_or_percent,
    daemonset_ready,
    max_unavailable,
    scaled,
    wait_pending,
    wait_progress,
)
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_monitoring import PARAMS as MONITORING
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_monitoring import StackApi
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_resource_plugin import (
    ALIGNED,
    PARAMS,
    MemoryApi,
    no_wait,
    node,
)


class Clock(object):
    """A virtual clock: sleep moves it on, nothing waits."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def virtual_wait(clock, ceiling=3600):
    """The wait_for a module gets (KubeApi.wait_for with progress), on a virtual clock."""
    def wait_for(check, timeout, progress=None):
        return wait_progress(check, timeout, ceiling, progress or (lambda value: 0), 2.0, clock, clock.sleep)
    return wait_for


# --- maxUnavailable and shares ------------------------------------------------------------------------

@pytest.mark.parametrize("value,expected", [(1, 1), ("3", 3), ("10%", "10%"), (" 100% ", "100%"), ("1%", "1%")])
def test_max_unavailable_takes_a_count_or_a_percentage(value, expected):
    assert max_unavailable(value) == expected


@pytest.mark.parametrize("value", [0, "0", "0%", "101%", "-1", "10 %", "ten", "", None, True, 2.5, "5%%"])
def test_max_unavailable_refuses_what_kubernetes_refuses_naming_the_rule(value):
    with pytest.raises(ValueError, match=r"max_unavailable must be a count of nodes \(an integer from 1 to 2147483647, Kubernetes' int32\) or a "
                                         r"percentage of them .* got %s" % repr(value).replace("(", r"\(")
                       .replace("%", "%").replace(".", r"\.").replace(")", r"\)")):
        max_unavailable(value)


def test_percentages_round_up_for_max_unavailable_and_down_for_the_accepted_share():
    assert [scaled(count_or_percent("10%", "x"), n, round_up=True) for n in (1, 3, 10, 11, 1000)] == [1, 1, 1, 2, 100]
    assert [scaled(count_or_percent("5%", "x"), n, round_up=False) for n in (3, 19, 20, 1000)] == [0, 0, 1, 50]
    assert scaled(count_or_percent(2, "x"), 1000, round_up=False) == 2
    assert count_or_percent("0", "unavailable_nodes_allowed") == 0 and count_or_percent("0%", "x") == "0%"


def test_each_daemonset_renders_max_unavailable():
    plugin = resource_plugin.objects(dict(PARAMS, max_unavailable="25%"))[-1]
    assert plugin["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}}
    assert resource_plugin.objects(PARAMS)[-1]["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": "10%"}
    exporter = monitoring_objects.daemonset(dict(MONITORING, max_unavailable="4"))
    assert exporter["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 4}
    publisher = volcano_stack.publisher_objects({"namespace": "volcano-system", "publisher_image": "r/agent:1",
                                                 "publisher_nodes_proxy": False, "max_unavailable": 7})[-1]
    assert publisher["kind"] == "DaemonSet"
    assert publisher["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 7}


def test_bad_shares_are_refused_with_every_option_named_before_any_request():
    with pytest.raises(resource_plugin.PluginError) as caught:
        resource_plugin.check_params(dict(PARAMS, max_unavailable="0%", unavailable_nodes_allowed="half"))
    assert [p.split(" must")[0] for p in caught.value.problems] == ["max_unavailable", "unavailable_nodes_allowed"]
    with pytest.raises(monitoring_objects.MonitoringError, match="max_unavailable must be"):
        monitoring.check_params(dict(MONITORING, max_unavailable=0))
    assert any("unavailable_nodes_allowed must be" in p for p in volcano_stack.option_problems(
        {"namespace": "volcano-system", "unavailable_nodes_allowed": "200%"}))


# --- waits that run while the rollout moves -------------------------------------------------------------

def test_progress_resets_the_stall_window_and_the_wait_ends_when_done():
    clock = Clock()
    counts = iter(range(0, 200))

    def check():
        count = next(counts)
        return count == 100, count

    # one more pod every 2 s for 200 s: far past a 30 s stall window in all, never 30 s without progress
    outcome = wait_progress(check, 30, 3600, lambda count: count, 2.0, clock, clock.sleep)
    assert outcome == (True, 100, 200.0) and outcome.reason == "done"


def test_a_stall_fails_after_the_window_without_progress():
    clock = Clock()
    values = iter([1, 2, 3] + [3, 2, 3, 2] * 100)  # then it only comes back to its best: no progress
    outcome = wait_progress(lambda: (False, next(values)), 30, 3600, lambda v: v, 2.0, clock, clock.sleep)
    assert outcome.reason == "stalled" and outcome[2] == 34.0, "30 s after the last new best (at 4 s)"
    assert "nothing moved for 30 s (wait_timeout" in kube_wait.why_waiting_ended(outcome, 30)


def test_the_ceiling_holds_while_things_still_move():
    clock = Clock()
    values = iter(range(10000))
    outcome = wait_progress(lambda: (False, next(values)), 30, 100, lambda v: v, 2.0, clock, clock.sleep)
    assert outcome.reason == "ceiling" and outcome[2] == 100.0
    assert "hard limit (wait_ceiling)" in kube_wait.why_waiting_ended(outcome, 30)


def test_kube_api_waits_with_progress_against_its_deadline():
    clock = Clock()
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 20, "wait_ceiling": 50},
                  clock=clock)
    api.sleep = clock.sleep
    values = iter(range(1000))
    outcome = api.wait_for(lambda: (False, next(values)), 20, progress=lambda v: v)
    assert outcome.reason == "ceiling" and clock.now == 50.0, "wait_ceiling bounds the task, not wait_timeout"
    assert api.limit_option == "wait_ceiling"


def status(generation, updated, available, desired=4, observed=None):
    return {"metadata": {"generation": generation}, "status": {
        "observedGeneration": generation if observed is None else observed, "desiredNumberScheduled": desired,
        "updatedNumberScheduled": updated, "numberAvailable": available}}


def test_a_daemonset_rollout_in_waves_is_waited_for_to_its_end():
    """4 nodes, one wave every 40 s (30 s stall window): the first status is the old generation's."""
    clock = Clock()
    waves = [status(2, 4, 4, observed=1)] + [status(2, 0, 4)] * 10 + [status(2, 1, 3)] * 10 + [status(2, 1, 4)] * 10 + \
        [status(2, 2, 3)] * 10 + [status(2, 2, 4)] * 10 + [status(2, 4, 4)]
    answers = iter(waves)
    seen = []

    def get():
        seen.append(clock.now)
        return next(answers)

    done, text, waited = kube_wait.wait_daemonset(get, 4, virtual_wait(clock), 30)
    assert done and text == "4 of 4 pods updated, 4 available, on 4 selected nodes" and len(seen) == len(waves)


def test_a_daemonset_that_stops_moving_fails_naming_the_stall():
    clock = Clock()
    outcome = kube_wait.wait_daemonset(lambda: status(2, 1, 3), 4, virtual_wait(clock), 30)
    assert not outcome[0] and outcome.reason == "stalled" and "1 of 4 pods updated, 3 available" in outcome[1]


def test_counts_alone_never_pass_a_rollout_short_of_pods():
    assert daemonset_ready(status(2, 3, 3), 4)[0] is False
    done, text = daemonset_ready(status(2, 3, 3), 4, tolerated=1)
    assert not done and text.endswith("(1 unavailable node accepted)"), "the pods decide, not the counts"
    empty = status(2, 0, 0, desired=0)
    assert daemonset_ready(empty, 3, tolerated=3)[0] is False, "a DaemonSet with no pod proves nothing"


def ds_pod(node_name, generation="2", ready=True):
    return {"metadata": {"name": "p-" + node_name, "labels": {"pod-template-generation": generation}},
            "spec": {"nodeName": node_name},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def rolled(updated, available, desired):
    found = status(2, updated, available, desired=desired)
    found["metadata"]["annotations"] = {"deprecated.daemonset.template.generation": "2"}
    return found


def test_a_ready_node_with_the_old_pod_fails_the_wait_whatever_the_counts():
    """10 nodes, w09 NotReady and accepted: its new pod is scheduled but not ready, and Ready w03 still
    runs the old pod, available: 9 updated and 9 available add up, the pods do not."""
    clock = Clock()
    names = ["w%02d" % i for i in range(10)]
    pods = [ds_pod(n) for n in names if n not in ("w03", "w09")] + [ds_pod("w03", "1"), ds_pod("w09", ready=False)]
    down = {"w09": "NotReady (Ready Unknown: NodeStatusUnknown)"}

    def ready_nodes(pending):
        return dict((n, node(n)) for n in pending)

    outcome = kube_wait.wait_daemonset(lambda: rolled(9, 9, 10), names, virtual_wait(clock), 30, down, 1,
                                       lambda: pods, ready_nodes)
    assert not outcome[0] and outcome.reason == "stalled"
    assert "w03: its pod runs an older template" in outcome[1] and list(down) == ["w09"]
    pods[-2] = ds_pod("w03")
    outcome = kube_wait.wait_daemonset(lambda: rolled(10, 9, 10), names, virtual_wait(clock), 30, down, 1,
                                       lambda: pods, ready_nodes)
    assert outcome[0] and outcome[2] == 0.0


def test_a_node_lost_mid_rollout_is_accepted_within_the_share_asking_only_for_it():
    clock = Clock()
    names = ["w%02d" % i for i in range(100)]
    pods = [ds_pod(n, ready=n != "w42") for n in names]
    asked = []

    def nodes(pending):
        asked.append(list(pending))
        return dict((n, node(n, ready="Unknown" if n == "w42" else "True")) for n in pending)

    down = {}
    outcome = kube_wait.wait_daemonset(lambda: rolled(100, 99, 100), names, virtual_wait(clock), 300, down, 5,
                                       lambda: pods, nodes)
    assert outcome[0] and asked == [["w42"]], "only the node without a ready pod is read again"
    assert down["w42"].startswith("NotReady (Ready Unknown") and "(1 unavailable node accepted)" in outcome[1]
    # no room left in the share: the lost node fails the wait, named
    down = dict(("w%02d" % i, "NotReady") for i in range(90, 95))
    outcome = kube_wait.wait_daemonset(lambda: rolled(100, 99, 100), names, virtual_wait(clock), 30, down, 5,
                                       lambda: pods, nodes)
    assert not outcome[0] and "w42: its pod of the current template is not ready" in outcome[1]


def test_the_share_never_covers_every_selected_node():
    assert [kube_wait.accepted_down(count_or_percent(v, "x"), n) for v, n in
            [(5, 3), ("100%", 10), ("100%", 1), (0, 5), ("5%", 1000), (2, 0)]] == [2, 9, 0, 0, 50, 0]
    with pytest.raises(resource_plugin.PluginError, match="all 3 selected nodes are unavailable: w00: NotReady"):
        resource_plugin.run(fleet(3, down=["w00", "w01", "w02"]), dict(PARAMS, unavailable_nodes_allowed=5), False,
                            no_wait)
    api = StackApi([node("w%02d" % i, ready="Unknown") for i in range(3)])
    with pytest.raises(monitoring_objects.MonitoringError, match="at least one selected node must be proven"):
        monitoring.run(api, dict(MONITORING, unavailable_nodes_allowed="100%"), False, no_wait)
    assert not kinds_applied(api)
    result = resource_plugin.run(fleet(3, down=["w00", "w01"]), dict(PARAMS, unavailable_nodes_allowed="100%"),
                                 False, no_wait)
    assert sorted(result["nodes"]) == ["w02"] and sorted(result["unavailable_nodes"]) == ["w00", "w01"]


def kinds_applied(api):
    return [c for c in api.calls if c[0] == "apply"]


def test_only_pending_names_are_looked_at_again():
    clock = Clock()
    asked = []
    late = {"w3": 3}  # w3 proves itself on its fourth look

    def prove(pending):
        asked.append(list(pending))
        answers = {}
        for name in pending:
            late[name] = late.get(name, 0) - 1
            answers[name] = None if late[name] < 0 else "not yet"
        return answers

    outcome = wait_pending(["w1", "w2", "w3"], prove, virtual_wait(clock), 30)
    assert outcome[0] and asked == [["w1", "w2", "w3"], ["w3"], ["w3"], ["w3"]]


def test_pending_names_that_never_prove_fail_with_their_reasons():
    clock = Clock()
    outcome = wait_pending(["w1", "w2"], lambda pending: dict((n, "absent" if n == "w2" else None) for n in pending),
                           virtual_wait(clock), 30)
    assert not outcome[0] and outcome[1] == {"w2": "absent"} and outcome.reason == "stalled"


# --- paged lists -----------------------------------------------------------------------------------------

def paged_api(pages):
    """A KubeApi whose GETs answer from ``pages`` (a list of answers or exceptions, in turn)."""
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t"})
    sent = []

    def get(path, **params):
        sent.append(dict(params))
        answer = pages.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    api.get = get
    return api, sent


def page(names, token=None):
    return {"items": [{"metadata": {"name": n}} for n in names], "metadata": {"continue": token} if token else {}}


def test_a_list_follows_its_continue_tokens():
    api, sent = paged_api([page(["a", "b"], "t1"), page(["c"], "t2"), page(["d"])])
    assert [i["metadata"]["name"] for i in api.list("/api/v1/nodes", page=2, label_selector="x=y")] == list("abcd")
    assert sent == [{"limit": 2, "label_selector": "x=y"}, {"limit": 2, "label_selector": "x=y", "_continue": "t1"},
                    {"limit": 2, "label_selector": "x=y", "_continue": "t2"}]


def test_an_expired_continue_token_starts_the_list_again():
    gone = KubeApiError("GET /api/v1/nodes: 410 The provided continue parameter is too old", 410)
    api, sent = paged_api([page(["a"], "t1"), gone, page(["a"], "u1"), page(["b"])])
    assert [i["metadata"]["name"] for i in api.list("/api/v1/nodes", page=1)] == ["a", "b"], "no item twice"
    assert [s.get("_continue") for s in sent] == [None, "t1", None, "u1"]


def test_a_list_that_keeps_expiring_or_fails_otherwise_is_an_error():
    gone = KubeApiError("410 expired", 410)
    api, sent = paged_api([page(["a"], "t"), gone] * (k8s_client.LIST_RESTARTS + 1))
    with pytest.raises(KubeApiError, match="410 expired"):
        api.list("/api/v1/nodes", page=1)
    assert len(sent) == 2 * (k8s_client.LIST_RESTARTS + 1)
    api, sent = paged_api([KubeApiError("410 on the first page", 410)])
    with pytest.raises(KubeApiError, match="first page"):
        api.list("/api/v1/nodes")


def test_few_pending_objects_are_got_one_by_one_and_many_listed_once():
    api, sent = paged_api([{"metadata": {"name": "w1"}}, None])
    assert api.named("/api/v1/nodes", ["w1", "w2"]) == {"w1": {"metadata": {"name": "w1"}}, "w2": None}
    names = ["w%d" % i for i in range(k8s_client.FEW_PENDING + 1)]
    api, sent = paged_api([page(names[1:])])
    found = api.named("/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies", names, metadata_only=True)
    assert found["w0"] is None and all(found[n] for n in names[1:]) and len(sent) == 1
    assert sent[0]["header_params"]["Accept"].startswith("application/json;as=PartialObjectMetadataList")


def test_proxy_calls_run_a_few_at_a_time_and_errors_stay_per_item():
    running, most = [0], [0]
    lock = threading.Lock()
    release = threading.Event()

    def call(item):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(0.05)
        with lock:
            running[0] -= 1
        if item == 3:
            raise KubeApiError("503 no kubelet")
        return item * 2

    found = k8s_client.bounded_map(call, range(20), workers=4)
    assert most[0] <= 4 and found[2] == (4, None) and str(found[3][1]) == "503 no kubelet"


# --- an accepted share of unavailable nodes ------------------------------------------------------------------

def fleet(count, down=(), silent=()):
    nodes = [node("w%02d" % i, {"numa-align/numa-0": "100"}, "Unknown" if "w%02d" % i in down else "True")
             for i in range(count)]
    configs = dict((n["metadata"]["name"], ALIGNED) for n in nodes)
    for name in silent:
        configs[name] = KubeApiError("GET /api/v1/nodes/%s/proxy/configz: 503 no route to host" % name, 503)
    return MemoryApi(nodes, configs)


def test_one_notready_node_of_a_fleet_is_left_out_named_and_warned_about():
    api = fleet(20, down=["w07"], silent=["w11"])
    result = resource_plugin.run(api, dict(PARAMS, unavailable_nodes_allowed="10%"), False, no_wait)
    assert sorted(result["unavailable_nodes"]) == ["w07", "w11"]
    assert result["unavailable_nodes"]["w07"].startswith("NotReady (Ready Unknown")
    assert "503 no route to host" in result["unavailable_nodes"]["w11"]
    assert "w07" in result["warnings"][0] and "w11" in result["warnings"][0]
    assert ("configz", "w07") not in api.calls, "a NotReady kubelet is not asked"
    assert sorted(result["nodes"]) == sorted("w%02d" % i for i in range(20) if i not in (7, 11))


def test_more_unavailable_nodes_than_accepted_fail_before_anything_is_applied():
    api = fleet(20, down=["w01", "w02"])
    with pytest.raises(resource_plugin.PluginError) as caught:
        resource_plugin.run(api, dict(PARAMS, unavailable_nodes_allowed="5%"), False, no_wait)
    assert caught.value.problems[0].startswith("2 of the 20 selected nodes are unavailable and "
                                               "unavailable_nodes_allowed accepts 1: w01: NotReady")
    assert not [c for c in api.calls if c[0] in ("apply", "claim")]
    with pytest.raises(resource_plugin.PluginError, match="accepts 0"):
        resource_plugin.run(fleet(3, down=["w00"]), dict(PARAMS, unavailable_nodes_allowed="5%"), False, no_wait)


def test_the_plugins_proof_looks_again_only_at_pending_nodes():
    api = fleet(3)
    api.node_list[1]["status"]["allocatable"] = {}

    def wait_for(check, timeout, progress=None):
        for _round in range(3):
            done, value = check()
            if done:
                return done, value, 0.0
            api.node_list[1]["status"]["allocatable"] = {"numa-align/numa-0": "100"}
        return done, value, 0.0

    result = resource_plugin.run(api, PARAMS, False, wait_for)
    assert [c[1] for c in api.calls if c[0] == "named"] == [("w00", "w01", "w02"), ("w01",)]
    assert sorted(result["nodes"]) == ["w00", "w01", "w02"]


def test_the_exporters_are_proven_on_a_sample_not_on_every_node(monkeypatch):
    monkeypatch.setattr(monitoring, "sample_seed", lambda: 0)
    api = StackApi([node("w%02d" % i) for i in range(30)])
    result = monitoring.run(api, MONITORING, False, no_wait)
    asked = sorted(set(c[2].split("/pods/https:x-")[1].split(":")[0] for c in api.calls
                       if c[0] == "request" and c[2].endswith("/healthz")))
    assert asked == ["w00", "w14", "w29"] and sorted(result["nodes"]) == asked
    assert not [c for c in api.calls if c[0] == "request" and c[2].endswith("/metrics") and "x-w01:" in c[2]]


def test_the_publishers_wait_names_the_nodes_left_and_skips_the_unavailable():
    from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_volcano_stack import Cluster
    api = Cluster(nodes=["w%02d" % i for i in range(25)])
    api.node_list[3]["status"]["conditions"][0]["status"] = "False"
    params = {"state": "present", "namespace": "volcano-system", "publisher_image": "r/agent:1",
              "publisher_nodes_proxy": False, "publisher_node_selector": {}, "wait": True, "wait_timeout": 5,
              "unavailable_nodes_allowed": "5%"}
    publisher = volcano_stack.publisher_objects(params)
    for obj in publisher:
        api.put(obj)
    for name in ["w%02d" % i for i in range(25) if i not in (3, 9)]:
        api.put({"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": name}})
    result = {}
    with pytest.raises(volcano_stack.VolcanoError, match="no Numatopology for w09: "):
        volcano_stack._wait_publisher(api, params, publisher, no_wait, result)
    api.put({"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": "w09"}})
    assert "w03" not in volcano_stack._wait_publisher(api, params, publisher, no_wait, result)
    assert list(result["unavailable_nodes"]) == ["w03"]


# --- review 1's findings: bounds, transient errors, the deadline, the sample ----------------------------

def test_a_continue_token_that_never_ends_is_refused_naming_the_server(monkeypatch):
    api, sent = paged_api([page(["a"], "same"), page(["b"], "same")])
    with pytest.raises(KubeApiError, match=r"GET /api/v1/nodes: the API server keeps returning continue tokens "
                                           r"\(the same token again after 2 pages"):
        api.list("/api/v1/nodes", page=1)
    assert len(sent) == 2
    monkeypatch.setattr(k8s_client, "LIST_MAX_PAGES", 5)
    api, sent = paged_api([page(["x"], "t%d" % i) for i in range(10)])
    with pytest.raises(KubeApiError, match=r"\(still one after 5 pages of 1\).*kubectl get --raw"):
        api.list("/api/v1/nodes", page=1)
    assert len(sent) == 5


def test_a_transient_error_inside_a_moving_wait_is_a_round_without_progress():
    clock = Clock()
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 30, "wait_ceiling": 3600},
                  clock=clock)
    api.sleep = clock.sleep
    rounds = iter(range(1000))

    def moving():
        count = next(rounds)
        if count in (5, 6):
            raise KubeApiError("GET /apis/apps/v1/...: Read timed out", transient=True)
        if count == 7:
            raise KubeApiError("GET /apis/apps/v1/...: 500 etcdserver: leader changed", 500, transient=True)
        return count == 20, count

    outcome = api.wait_for(moving, 30, progress=lambda v: v)
    assert outcome[0] and outcome[1] == 20

    def refused():
        raise KubeApiError("GET x: 403 forbidden", 403)

    with pytest.raises(KubeApiError, match="403 forbidden"):
        api.wait_for(refused, 30, progress=lambda v: v)
    start = clock.now

    def silent():
        raise KubeApiError("GET /apis/apps/v1/x: connection reset", transient=True)

    with pytest.raises(KubeApiError, match="connection reset"):
        api.wait_for(silent, 30, progress=lambda v: v)
    assert clock.now - start >= 30, "only the stall window ends a wait of transient errors"


def test_kubelets_not_asked_before_the_deadline_are_not_called_unavailable():
    api = fleet(20)
    api.remaining = lambda: -1.0
    with pytest.raises(resource_plugin.PluginError) as caught:
        resource_plugin.run(api, dict(PARAMS, unavailable_nodes_allowed="50%"), False, no_wait)
    assert caught.value.problems[0].startswith("the task's deadline passed before the kubelets of 20 selected nodes "
                                               "were asked for /configz (w00, ")
    assert "raise wait_ceiling" in caught.value.problems[0] and "unavailable" not in caught.value.problems[0]
    assert not [c for c in api.calls if c[0] in ("configz", "apply")]


def test_the_sample_moves_between_runs_and_only_the_exporters_own_401_proves_authentication():
    names = ["w%03d" % i for i in range(1000)]
    samples = set(tuple(monitoring.spread(names, 3, seed)) for seed in range(0, 400, 7))
    assert len(samples) > 50 and all(len(sample) == 3 for sample in samples)
    assert monitoring.spread(names, 3, 0) == ["w000", "w499", "w999"]
    api = StackApi([node("w00")])
    pod = {"metadata": {"name": "x-w00"}}
    assert monitoring.exporter_answers(api, MONITORING, pod) is None, "the exporter's refusal of no token"

    def unauthorized(method, path, body=None, **params):
        if path.endswith("/healthz"):
            return "ok\n"
        raise monitoring.KubeApiError("GET %s: 401 Unauthorized" % path, 401)

    api.request = unauthorized
    assert "401 Unauthorized" in monitoring.exporter_answers(api, MONITORING, pod), "the API server's own 401"


def test_the_publisher_refuses_too_many_unavailable_nodes_before_anything_is_applied():
    from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_volcano_stack import Cluster
    api = Cluster(nodes=["w%02d" % i for i in range(4)])
    api.node_list[1]["status"]["conditions"][0]["status"] = "False"
    api.put({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": "numatopologies.nodeinfo.volcano.sh"}})
    params = {"state": "present", "namespace": "volcano-system", "publisher_image": "r/agent:1",
              "publisher_nodes_proxy": False, "publisher_node_selector": {}, "wait": True, "wait_timeout": 5,
              "unavailable_nodes_allowed": "5%", "image_registry": "", "image_tag": "", "node_selector": {}}
    with pytest.raises(volcano_stack.VolcanoError, match=r"^1 of the 4 selected nodes .* Nothing was applied"):
        volcano_stack.run(api, params, None, False, no_wait)
    assert api.events == [], "not even the claim ran"


def test_the_unavailable_warning_is_given_once_and_check_mode_names_the_nodes():
    result = resource_plugin.run(fleet(20, down=["w07"]), dict(PARAMS, unavailable_nodes_allowed="10%"), False,
                                 no_wait)
    assert len([w for w in result["warnings"] if "w07" in w]) == 1
    api = StackApi([node("w%02d" % i, ready="Unknown" if i == 3 else "True") for i in range(20)])
    for check_mode, wait in ((True, True), (False, False)):
        result = monitoring.run(api, dict(MONITORING, wait=wait, unavailable_nodes_allowed="10%"), check_mode, no_wait)
        assert list(result["unavailable_nodes"]) == ["w03"] and len(result["warnings"]) == 1


@pytest.mark.parametrize("value", [2 ** 31, "3000000000", 99999999999])
def test_counts_beyond_kubernetes_int32_are_refused_before_any_request(value):
    with pytest.raises(ValueError, match="an integer from 1 to 2147483647, Kubernetes' int32"):
        max_unavailable(value)
    assert count_or_percent(2 ** 31 - 1, "x") == 2 ** 31 - 1


def test_a_ceiling_below_the_stall_window_is_refused():
    class Failed(Exception):
        pass

    class Module(object):
        params = {"wait_timeout": 300, "wait_ceiling": 60, "host": "http://127.0.0.1:9", "api_key": "t"}
        no_log_values = set()

        def fail_json(self, msg):
            raise Failed(msg)

    with pytest.raises(Failed, match=r"wait_ceiling \(60 s.*below wait_timeout \(300 s.*raise wait_ceiling to at "
                                     r"least 300 or lower wait_timeout"):
        k8s_runner.connect(Module())


def test_a_proxy_call_that_drips_its_answer_ends_after_its_whole_budget():
    clock = Clock()
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 300, "wait_ceiling": 3600},
                  clock=clock)

    class Dripping(object):
        released = False

        def read1(self, amount):
            clock.now += 3  # a byte every 3 s: each read within the read timeout, the whole never
            return b"{"

        def release_conn(self):
            Dripping.released = True

    class Client(object):
        configuration = type("Configuration", (), {"host": "https://api:6443"})

        def request(self, method, path, **params):
            assert "_total_seconds" not in params, "the budget is this client's own, not the library's"
            return Dripping()

    api.client = Client()
    with pytest.raises(KubeApiError, match=r"proxy/configz: the answer was not complete after 20 s") as caught:
        api.kubelet_config("w01")
    assert caught.value.transient and Dripping.released and clock.now <= k8s_client.PROXY_CALL_SECONDS + 3
