# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-aware's switch in volcano-scheduler.conf as data, and the nodes its predicate would refuse."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils import volcano
from ansible_collections.numa.kube.plugins.module_utils.kube_api import KubeApiError

# Volcano v1.14's shipped volcano-scheduler.conf (installer/helm/chart/volcano/config)
SHIPPED = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def names(conf):
    return [[p["name"] for p in tier["plugins"]] for tier in conf["tiers"]]


def test_enable_adds_the_plugin_to_the_tier_of_predicates_and_keeps_the_rest():
    conf = volcano.parse(SHIPPED)
    assert volcano.state(conf) == {"status": "close", "weight": None, "tier": None}
    enabled = volcano.switch(conf, True, weight=10)
    assert names(enabled) == [names(conf)[0], names(conf)[1] + ["numa-aware"]]
    assert enabled["tiers"][1]["plugins"][-1] == {"name": "numa-aware", "arguments": {"weight": 10}}
    assert enabled["tiers"][0]["plugins"][1] == {"name": "gang", "enablePreemptable": False}
    assert enabled["actions"] == "enqueue, allocate, backfill"
    assert volcano.state(enabled) == {"status": "open", "weight": 10, "tier": 1}
    assert names(conf)[1][-1] == "binpack", "the input is left alone"
    # a round trip through the text keeps the data
    assert volcano.parse(volcano.render(enabled)) == enabled


def test_enable_again_is_no_change_and_a_new_weight_keeps_other_arguments():
    conf = volcano.switch(volcano.parse(SHIPPED), True, weight=10)
    assert volcano.switch(conf, True, weight=10) == conf
    assert volcano.switch(conf, True) == conf, "no weight asked: the existing one stays"
    conf["tiers"][1]["plugins"][-1]["arguments"]["extra"] = "x"
    reweighted = volcano.switch(conf, True, weight=3)
    assert reweighted["tiers"][1]["plugins"][-1]["arguments"] == {"weight": 3, "extra": "x"}


def test_disable_removes_every_entry_and_nothing_else():
    conf = volcano.parse(SHIPPED.replace("  - name: conformance\n", "  - name: conformance\n  - name: numa-aware\n"))
    conf = volcano.switch(conf, True, weight=2)
    disabled = volcano.switch(conf, False)
    assert volcano.state(disabled)["status"] == "close"
    assert names(disabled) == names(volcano.parse(SHIPPED))
    assert volcano.switch(disabled, False) == disabled


@pytest.mark.parametrize("text,words", [
    ("actions: [unclosed\n", "is not valid YAML"),
    ("- just\n- a list\n", "not a mapping"),
    ("tiers: {plugins: x}\n", "tiers must be a list"),
    ("tiers:\n- plugins:\n  - weight: 3\n", "every plugin needs a name"),
])
def test_a_configuration_that_cannot_be_parsed_is_refused_with_the_reason(text, words):
    with pytest.raises(volcano.VolcanoError) as caught:
        volcano.parse(text)
    assert words in str(caught.value) and "nothing was changed" in str(caught.value)


def test_nodes_the_predicate_would_never_pass():
    good = {"spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                     "numares": {"cpu": {"allocatable": "1-3", "capacity": 4}}}}
    assert volcano.node_problems("w1", good, "single-numa-node") == []
    assert "best-effort" in volcano.node_problems("w1", good, "best-effort")[0]
    assert "no Numatopology" in volcano.node_problems("w2", None)[0]
    loose = {"spec": {"policies": {"CPUManagerPolicy": "none", "TopologyManagerPolicy": "none"}}}
    problems = volcano.node_problems("w3", loose)
    assert len(problems) == 3 and "static" in problems[0] and "none" in problems[1] and "allocatable" in problems[2]


CPUS = [{"id": i, "numa_node": i // 2, "socket": 0, "core": i} for i in range(4)]


def test_numatopology_spec_free_cpus_are_kubelets_allocatable_minus_assigned():
    config = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted",
              "reservedSystemCPUs": "3", "kubeReserved": {"memory": "1Gi"}}
    spec = volcano.numatopology_spec(CPUS, config, allocatable_cpus=[0, 1, 2], assigned_cpus=[1])
    assert spec["numares"] == {"cpu": {"allocatable": "0,2", "capacity": 4}}
    assert "cpu" not in spec["resReserved"], "kubelet already took its reserved CPUs out of the free set"
    assert spec["resReserved"] == {"memory": "1Gi"}
    assert spec["cpuDetail"]["3"] == {"numa": 1, "socket": 0, "core": 3}
    assert volcano.reserved_cpus(CPUS, config, [0, 1, 2]) == "3"


def test_numatopology_spec_without_the_static_policy():
    spec = volcano.numatopology_spec(CPUS, {}, allocatable_cpus=[], assigned_cpus=[])
    assert spec["policies"] == {"CPUManagerPolicy": "none", "TopologyManagerPolicy": "none"}
    assert spec["numares"]["cpu"]["allocatable"] == "0-3"
    assert "resReserved" not in spec
    assert volcano.reserved_cpus(CPUS, {}, []) == ""


def test_reserved_memory_sums_kube_and_system_and_skips_what_kubelet_would_refuse():
    assert volcano.reserved_memory({"kubeReserved": {"memory": "256Mi"}, "systemReserved": {"memory": "256Mi"}}) \
        == "512Mi"
    assert volcano.reserved_memory({"kubeReserved": {"memory": "bogus"}}) == ""
    assert volcano.reserved_memory({"kubeReserved": {"memory": "0"}}) == ""


class SchedulerApi(object):
    """The scheduler's ConfigMap and pods in memory; the pods 'reload' after they are marked."""

    def __init__(self, conf=SHIPPED, log_level=3):
        self.configmap = {"metadata": {"name": "volcano-scheduler-configmap", "resourceVersion": "7"},
                          "data": {"volcano-scheduler.conf": conf}}
        self.log_level, self.calls, self.marked, self.looks = log_level, [], False, 0

    def pods(self):
        """The scheduler pods at this look (``self.looks`` counts the listings)."""
        return [{"metadata": {"name": "volcano-scheduler-0"}, "status": {"phase": "Running"}}]

    def nodes(self, selector=None):
        return [{"metadata": {"name": "w1"}}, {"metadata": {"name": "w2"}}]

    def get(self, path, **params):
        self.calls.append(("GET", path))
        if path.endswith("/configmaps/volcano-scheduler-configmap"):
            return self.configmap
        if path.endswith("/pods"):
            self.looks += 1
            return {"items": self.pods()}
        if path.endswith("/numatopologies"):
            return {"items": [{"metadata": {"name": "w1"}, "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                "numares": {"cpu": {"allocatable": "1-3", "capacity": 4}}}}]}
        return None

    def request(self, method, path, body=None, **params):
        self.calls.append((method, path))
        if method == "PATCH" and path.endswith("/configmaps/volcano-scheduler-configmap"):
            assert body["metadata"]["resourceVersion"] == "7", "the write is conditional on what was read"
            self.configmap["data"].update(body["data"])
        elif method == "PATCH" and "/pods/" in path:
            self.marked = True
        elif path.endswith("/log"):
            if not self.marked or self.log_level < 2:
                return ""
            plugins = [p["name"] for t in volcano.parse(self.configmap["data"]["volcano-scheduler.conf"])["tiers"]
                       for p in t["plugins"]]
            return ("I1124 scheduler.go:141] Finished loading scheduler config. Final state: "
                    "actions=[enqueue allocate backfill], plugins=[%s]\n" % " ".join(plugins))
        return {}


RUN = {"state": "enabled", "weight": 10, "namespace": "volcano-system", "configmap": "volcano-scheduler-configmap",
       "config_key": "volcano-scheduler.conf", "activation": "reload", "scheduler_selector": "app=volcano-scheduler",
       "scheduler_deployment": "volcano-scheduler", "wait": True, "wait_timeout": 10,
       "topology_policy": "single-numa-node", "node_selector": {}}


def quick_wait(check, timeout, interval=0):
    for dummy in range(8):
        done, value = check()
        if done:
            return done, value, 0.0
    return done, value, float(timeout)


def ticking(step=3.0):
    """A clock that moves ``step`` seconds each time it is read."""
    now = [0.0]

    def clock():
        now[0] += step
        return now[0]
    return clock


def test_run_enables_waits_for_the_reload_and_a_second_run_changes_nothing():
    api = SchedulerApi()
    result = volcano.run(api, RUN, False, quick_wait, ticking())
    assert result["changed"] and result["status"] == "open" and result["weight"] == 10
    assert result["activation"]["how"] == "reload" and result["activation"]["pods"] == ["volcano-scheduler-0"]
    assert result["nodes"] == {"w2": [volcano.node_problems("w2", None)[0]]}
    again = volcano.run(SchedulerApi(api.configmap["data"]["volcano-scheduler.conf"]), RUN, False, quick_wait,
                        lambda: 0.0)
    assert not again["changed"] and "activation" not in again


def test_run_in_check_mode_writes_nothing_and_shows_the_diff():
    api = SchedulerApi()
    result = volcano.run(api, RUN, True, quick_wait, lambda: 0.0)
    assert result["changed"] and "numa-aware" in result["diff"]["after"]
    assert [c for c in api.calls if c[0] != "GET"] == []


def test_run_fails_naming_the_cause_when_the_scheduler_never_logs_the_load():
    with pytest.raises(volcano.VolcanoError, match="did not take in the new configuration.*activation: restart"):
        volcano.run(SchedulerApi(log_level=1), RUN, False, quick_wait, lambda: 0.0)


def test_run_refuses_a_configuration_it_cannot_parse_and_writes_nothing():
    api = SchedulerApi(conf="actions: [\n")
    with pytest.raises(volcano.VolcanoError, match="(?s)not valid YAML.*nothing was changed"):
        volcano.run(api, RUN, False, quick_wait, lambda: 0.0)
    assert [c for c in api.calls if c[0] != "GET"] == []


def test_query_answers_like_the_openfuyao_service():
    result = volcano.run(SchedulerApi(), dict(RUN, state="query"), False, quick_wait, lambda: 0.0)
    assert (result["changed"], result["status"]) == (False, "close")


class ReplacedSchedulerApi(SchedulerApi):
    """The scheduler pod crashes before it reloads and is replaced by one that starts with the
    new configuration; while it waits to restart its log cannot be read."""

    def pods(self):
        name = "volcano-scheduler-0" if self.looks <= 2 else "volcano-scheduler-1"
        return [{"metadata": {"name": name}, "status": {"phase": "Running"}}]

    def request(self, method, path, body=None, **params):
        if path.endswith("volcano-scheduler-0/log"):
            self.calls.append((method, path))
            raise KubeApiError("GET %s: 400 container is waiting to start" % path, 400)
        if path.endswith("volcano-scheduler-1/log"):
            assert params["query_params"] == [], "a pod that came after the change: its whole log"
        return super(ReplacedSchedulerApi, self).request(method, path, body, **params)


def test_a_scheduler_pod_replaced_during_the_wait_is_followed_to_its_successor():
    api = ReplacedSchedulerApi()
    result = volcano.run(api, RUN, False, quick_wait, ticking())
    assert result["changed"] and result["activation"]["how"] == "reload"
    assert ("GET", "/api/v1/namespaces/volcano-system/pods/volcano-scheduler-1/log") in api.calls


def test_a_scheduler_that_never_comes_back_is_named_with_its_log_error():
    class Stuck(ReplacedSchedulerApi):
        pods = SchedulerApi.pods

    with pytest.raises(volcano.VolcanoError, match="volcano-scheduler-0 .GET .*400 container is waiting"):
        volcano.run(Stuck(), RUN, False, quick_wait, lambda: 0.0)


def test_a_load_counts_once_the_scheduler_kept_running_on_it():
    with pytest.raises(volcano.VolcanoError, match="did not take in the new configuration"):
        volcano.run(SchedulerApi(), RUN, False, quick_wait, lambda: 100.0)  # seen, but no time passes


class CrashingSchedulerApi(SchedulerApi):
    """The scheduler logs the load and then fails in its sessions: each look finds one more restart."""

    def pods(self):
        status = {"phase": "Running", "containerStatuses": [{
            "name": "volcano-scheduler", "restartCount": self.looks,
            "lastState": {"terminated": {"reason": "Error", "exitCode": 2}}}]}
        return [{"metadata": {"name": "volcano-scheduler-0"}, "status": status}]


def test_a_scheduler_that_fails_after_loading_the_configuration_is_reported():
    reported = (r"does not keep running the new configuration: volcano-scheduler-0 restarted \d+ times, the last "
                r"after loading the new configuration \(Error, exit code 2\): .*logs volcano-scheduler-0 --previous")
    with pytest.raises(volcano.VolcanoError, match=reported):
        volcano.run(CrashingSchedulerApi(), RUN, False, quick_wait, ticking())
