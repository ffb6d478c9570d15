# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch of numa-aware as one transaction: checked before the write, activated after it, and
the previous configuration put back (under the write's resourceVersion) when anything fails after it.

The API server is an in-memory stand-in that keeps the ConfigMap's resourceVersion as the real one
does (a merge patch carrying another resourceVersion gets 409 Conflict); the VM test bed runs the
real scheduler (molecule/cluster/tests/test_volcano.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano_conf
from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano_nodes
from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano_numa_aware as volcano_scheduler
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_volcano_conf import SHIPPED

CONFIGMAP = "/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap"
DEPLOYMENT = "/apis/apps/v1/namespaces/volcano-system/deployments/volcano-scheduler"
POD = "/api/v1/namespaces/volcano-system/pods/volcano-scheduler-0"


class SchedulerApi(object):
    """The scheduler's ConfigMap, Deployment and pods in memory; the pods 'reload' after they are marked."""

    def __init__(self, conf=SHIPPED, log_level=3):
        self.configmap = {"metadata": {"name": "volcano-scheduler-configmap", "resourceVersion": "7"},
                          "data": {"volcano-scheduler.conf": conf}}
        self.deployment = {"metadata": {"name": "volcano-scheduler", "generation": 1},
                           "spec": {"replicas": 1},
                           "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                                      "availableReplicas": 1}}
        self.log_level, self.calls, self.marked, self.looks = log_level, [], False, 0
        self.writes = []  # (resourceVersion sent, text) of each ConfigMap patch the server took

    def conf(self):
        return self.configmap["data"]["volcano-scheduler.conf"]

    def extend_deadline(self, seconds):
        self.calls.append(("extend_deadline", seconds))

    def changes(self):
        return [c for c in self.calls if c[0] not in ("GET", "extend_deadline")]

    def pods(self):
        """The scheduler pods at this look (``self.looks`` counts the listings)."""
        return [{"metadata": {"name": "volcano-scheduler-0"}, "status": {"phase": "Running"}}]

    def nodes(self, selector=None):
        return [{"metadata": {"name": "w1"}}, {"metadata": {"name": "w2"}}]

    def get(self, path, **params):
        self.calls.append(("GET", path))
        if path == CONFIGMAP:
            return copy.deepcopy(self.configmap)
        if path == DEPLOYMENT:
            return copy.deepcopy(self.deployment)
        if path.endswith("/pods"):
            assert params["label_selector"] == "app=volcano-scheduler"
            self.looks += 1
            return {"items": self.pods()}
        if path.endswith("/numatopologies"):
            return {"items": [{"metadata": {"name": "w1"}, "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                "numares": {"cpu": {"allocatable": "1-3", "capacity": 4}}}}]}
        return None

    def write_configmap(self, body):
        """A merge patch as the API server takes it: refused with 409 unless its resourceVersion is current."""
        if body["metadata"]["resourceVersion"] != self.configmap["metadata"]["resourceVersion"]:
            raise KubeApiError("PATCH %s: 409 Operation cannot be fulfilled on configmaps: the object has been "
                               "modified" % CONFIGMAP, 409)
        self.writes.append((body["metadata"]["resourceVersion"], body["data"]["volcano-scheduler.conf"]))
        self.configmap["data"].update(body["data"])
        self.configmap["metadata"]["resourceVersion"] = str(int(self.configmap["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.configmap)

    def request(self, method, path, body=None, **params):
        self.calls.append((method, path))
        if method == "PATCH" and path == CONFIGMAP:
            return self.write_configmap(body)
        if method == "PATCH" and path == DEPLOYMENT:
            self.deployment["metadata"]["generation"] += 1  # and its controller rolls it at once
            self.deployment["status"]["observedGeneration"] = self.deployment["metadata"]["generation"]
            self.deployment["spec"]["template"] = body["spec"]["template"]
            return copy.deepcopy(self.deployment)
        if method == "PATCH" and "/pods/" in path:
            self.marked = body["metadata"]["annotations"][volcano_scheduler.CONF_ANNOTATION]
        elif path.endswith("/log"):
            if not self.marked or self.log_level < 2:
                return ""
            plugins = [p["name"] for t in volcano_conf.parse(self.conf())["tiers"] for p in t["plugins"]]
            return ("I1124 scheduler.go:141] Finished loading scheduler config. Final state: "
                    "actions=[enqueue allocate backfill], plugins=[%s]\n" % " ".join(plugins))
        return {}


RUN = {"state": "enabled", "weight": 10, "namespace": "volcano-system", "configmap": "volcano-scheduler-configmap",
       "config_key": "volcano-scheduler.conf", "activation": "reload", "scheduler_selector": "app=volcano-scheduler",
       "scheduler_deployment": "volcano-scheduler", "wait": True, "wait_timeout": 10,
       "topology_policy": "single-numa-node", "node_selector": {}}
ENABLED = volcano_conf.render(volcano_conf.switch(volcano_conf.parse(SHIPPED), True, 10))


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


def failed(api, params=None, clock=None):
    """The VolcanoError the switch ends in."""
    with pytest.raises(volcano_conf.VolcanoError) as caught:
        volcano_scheduler.run(api, params or RUN, False, quick_wait, clock or ticking())
    return caught.value


# --- the switch that works ------------------------------------------------------------------------

def test_run_enables_waits_for_the_reload_and_a_second_run_changes_nothing():
    api = SchedulerApi()
    result = volcano_scheduler.run(api, RUN, False, quick_wait, ticking())
    assert result["changed"] and result["status"] == "open" and result["weight"] == 10
    assert result["activation"]["how"] == "reload" and result["activation"]["pods"] == ["volcano-scheduler-0"]
    assert result["nodes"] == {"w2": [volcano_nodes.node_problems("w2", None)[0]]}
    assert api.writes == [("7", ENABLED)], "one write, conditional on the resourceVersion read"
    again = volcano_scheduler.run(SchedulerApi(api.conf()), RUN, False, quick_wait, lambda: 0.0)
    assert not again["changed"] and "activation" not in again


def test_run_in_check_mode_writes_nothing_and_shows_the_diff():
    api = SchedulerApi()
    result = volcano_scheduler.run(api, RUN, True, quick_wait, lambda: 0.0)
    assert result["changed"] and "numa-aware" in result["diff"]["after"]
    assert api.changes() == []


def test_query_answers_like_the_openfuyao_service():
    result = volcano_scheduler.run(SchedulerApi(), dict(RUN, state="query"), False, quick_wait, lambda: 0.0)
    assert (result["changed"], result["status"]) == (False, "close")


def test_restart_rolls_the_deployment_and_waits_for_it():
    api = SchedulerApi()
    result = volcano_scheduler.run(api, dict(RUN, activation="restart"), False, quick_wait, ticking())
    assert result["activation"] == {"how": "restart", "seconds": 0.0}
    assert api.deployment["spec"]["template"]["metadata"]["annotations"] == {
        volcano_scheduler.CONF_ANNOTATION: volcano_conf.conf_digest(ENABLED)}


def test_a_mapping_selector_is_built_from_checked_labels():
    api = SchedulerApi()
    volcano_scheduler.run(api, dict(RUN, scheduler_selector={"app": "volcano-scheduler"}), False, quick_wait,
                          ticking())
    assert api.conf() == ENABLED


# --- refused before anything is written -----------------------------------------------------------

def test_run_refuses_a_configuration_it_cannot_parse_and_writes_nothing():
    api = SchedulerApi(conf="actions: [\n")
    with pytest.raises(volcano_conf.VolcanoError, match="(?s)not valid YAML.*nothing was changed"):
        volcano_scheduler.run(api, RUN, False, quick_wait, lambda: 0.0)
    assert api.changes() == []


def test_an_invalid_scheduler_selector_is_refused_before_any_request():
    api = SchedulerApi()
    error = failed(api, dict(RUN, scheduler_selector="app=volcano scheduler"))
    assert str(error).startswith("scheduler_selector 'app=volcano scheduler' is not a label selector the API "
                                 "server accepts: the requirement 'app=volcano scheduler' is wrong")
    assert str(error).endswith("; nothing was changed")
    assert api.calls == [] and api.conf() == SHIPPED


def test_a_node_selector_with_a_spliced_value_is_refused_before_any_request():
    # the node report comes after the write: its selector is checked with the others, first
    api = SchedulerApi()
    error = failed(api, dict(RUN, node_selector={"zone": "true,zone!=x"}))
    assert "node_selector: value 'true,zone!=x' of 'zone'" in str(error) and str(error).endswith("; nothing was changed")
    assert api.calls == [] and api.conf() == SHIPPED


def test_a_mapping_selector_with_a_spliced_value_is_refused_before_any_request():
    api = SchedulerApi()
    error = failed(api, dict(RUN, scheduler_selector={"app": "true,zone!=x"}))
    assert "value 'true,zone!=x' of 'app'" in str(error) and str(error).endswith("; nothing was changed")
    assert api.calls == []


@pytest.mark.parametrize("option,value,words", [
    ("namespace", "Volcano_System", "namespace 'Volcano_System' is not a valid namespace name"),
    ("configmap", "../secrets/x", "configmap '../secrets/x' is not a valid Kubernetes object name"),
])
def test_names_that_would_go_into_a_path_are_refused_before_any_request(option, value, words):
    api = SchedulerApi()
    error = failed(api, dict(RUN, **{option: value}))
    assert str(error).startswith(words) and str(error).endswith("; nothing was changed")
    assert api.calls == []


def test_the_deployment_name_is_checked_when_activation_restarts_it():
    api = SchedulerApi()
    error = failed(api, dict(RUN, activation="restart", scheduler_deployment="vc/../x"))
    assert str(error).startswith("scheduler_deployment 'vc/../x' is not a valid Kubernetes object name")
    assert api.calls == []


def test_a_weight_out_of_bounds_is_refused_before_any_request():
    api = SchedulerApi()
    error = failed(api, dict(RUN, weight=10 ** 30))
    assert "weight must be a whole number from 1 to 100" in str(error) and "got %r" % 10 ** 30 in str(error)
    assert api.calls == []


def test_scheduler_pods_that_cannot_be_listed_stop_the_switch_before_the_write():
    class Forbidden(SchedulerApi):
        def pods(self):
            raise KubeApiError("GET /api/v1/namespaces/volcano-system/pods: 403 pods is forbidden", 403)

    api = Forbidden()
    error = failed(api)
    assert str(error) == (
        "cannot list the scheduler's pods in volcano-system (scheduler_selector app=volcano-scheduler), which "
        "activation reload needs: GET /api/v1/namespaces/volcano-system/pods: 403 pods is forbidden; fix "
        "scheduler_selector or the credentials' rights (list pods) - nothing was changed")
    assert api.changes() == [] and api.conf() == SHIPPED


def test_check_mode_also_finds_the_scheduler_unreachable():
    api = SchedulerApi()
    api.deployment = None
    with pytest.raises(volcano_conf.VolcanoError, match="Deployment volcano-system/volcano-scheduler does not exist"):
        volcano_scheduler.run(api, dict(RUN, activation="restart"), True, quick_wait, lambda: 0.0)


def test_a_missing_deployment_stops_a_restart_switch_before_the_write():
    api = SchedulerApi()
    api.deployment = None
    error = failed(api, dict(RUN, activation="restart"))
    assert str(error) == (
        "Deployment volcano-system/volcano-scheduler does not exist, so activation restart cannot roll it: set "
        "scheduler_deployment to the scheduler's Deployment (Helm names it <release>-scheduler) - nothing was "
        "changed")
    assert api.changes() == []


def test_a_missing_configmap_is_refused_naming_where_it_was_looked_for():
    api = SchedulerApi()
    api.configmap = None
    error = failed(api)
    assert str(error) == (
        "ConfigMap volcano-system/volcano-scheduler-configmap does not exist: is Volcano installed (numa.kube.volcano "
        "deploys it), and are namespace and configmap the ones your installation uses (Helm names it "
        "<release>-scheduler-configmap)?")
    assert api.changes() == []


def test_a_configmap_without_the_key_is_refused_naming_the_keys_it_has():
    api = SchedulerApi()
    api.configmap["data"] = {"scheduler.conf": SHIPPED}
    error = failed(api)
    assert str(error) == ("ConfigMap volcano-system/volcano-scheduler-configmap has no key 'volcano-scheduler.conf' "
                          "(it has scheduler.conf): set config_key to the scheduler's file name")
    assert api.changes() == []


def test_a_configmap_changed_between_read_and_write_is_not_overwritten():
    class Busy(SchedulerApi):
        def pods(self):
            self.configmap["metadata"]["resourceVersion"] = "9"  # someone else's write, just before ours
            return SchedulerApi.pods(self)

    api = Busy()
    error = failed(api)
    assert str(error) == ("ConfigMap volcano-system/volcano-scheduler-configmap key volcano-scheduler.conf changed "
                          "after this task read it (resourceVersion 7): someone else is editing it; nothing was "
                          "changed: run the task again")
    assert api.writes == [] and api.conf() == SHIPPED


def test_a_write_whose_answer_was_lost_is_recognised_by_what_the_configmap_holds():
    class Lost(SchedulerApi):
        def write_configmap(self, body):
            SchedulerApi.write_configmap(self, body)
            raise KubeApiError("PATCH %s on https://api: read timed out" % CONFIGMAP)

    api = Lost()
    result = volcano_scheduler.run(api, RUN, False, quick_wait, ticking())
    assert result["activation"]["how"] == "reload" and api.conf() == ENABLED


def test_a_write_that_failed_leaves_nothing_changed():
    class Refused(SchedulerApi):
        def write_configmap(self, body):
            raise KubeApiError("PATCH %s: 422 data too long" % CONFIGMAP, 422)

    api = Refused()
    error = failed(api)
    assert str(error) == ("writing ConfigMap volcano-system/volcano-scheduler-configmap key volcano-scheduler.conf "
                          "failed: PATCH %s: 422 data too long; nothing was changed" % CONFIGMAP)


def test_a_write_whose_outcome_is_unknown_fails_with_the_servers_answer():
    class Elsewhere(SchedulerApi):
        def write_configmap(self, body):
            self.configmap["data"]["volcano-scheduler.conf"] = "someone else's"
            raise KubeApiError("PATCH %s on https://api: read timed out" % CONFIGMAP)

    api = Elsewhere()
    with pytest.raises(KubeApiError, match="read timed out"):
        volcano_scheduler.run(api, RUN, False, quick_wait, ticking())
    assert api.conf() == "someone else's", "neither ours nor the previous one: left as it is"


def test_activation_none_only_writes():
    api = SchedulerApi()
    result = volcano_scheduler.run(api, dict(RUN, activation="none"), False, quick_wait, ticking())
    assert result["activation"] == {"how": "none"} and api.conf() == ENABLED
    assert [c for c in api.changes() if c[1] != CONFIGMAP] == []


def test_no_scheduler_pod_running_means_it_reads_the_new_configuration_when_it_starts():
    class Idle(SchedulerApi):
        def pods(self):
            return []

    result = volcano_scheduler.run(Idle(), RUN, False, quick_wait, ticking())
    assert result["activation"] == {"how": "reload", "pods": [], "note": "no scheduler pod runs (selector "
                                    "app=volcano-scheduler): it reads the new configuration when it starts"}


# --- put back when anything fails after the write -------------------------------------------------

def test_a_scheduler_that_never_reloads_gets_the_previous_configuration_back_under_the_writes_version():
    api = SchedulerApi(log_level=1)
    error = failed(api, clock=lambda: 0.0)
    assert error.problems[0].startswith("the scheduler did not take in the new configuration within 10s: "
                                        "volcano-scheduler-0 (no configuration load logged since the change)")
    assert error.problems[0].endswith("use activation: restart there")
    assert error.problems[1] == (
        "the previous configuration was put back in ConfigMap volcano-system/volcano-scheduler-configmap key "
        "volcano-scheduler.conf (resourceVersion 9) and the scheduler reads it again: kubelet refreshes the volume "
        "of the marked pods volcano-scheduler-0, and the scheduler reloads it (not waited for)")
    assert api.writes == [("7", ENABLED), ("8", SHIPPED)], "the rollback carries the version our write produced"
    assert api.conf() == SHIPPED, "byte for byte what was there"
    assert api.marked == volcano_conf.conf_digest(SHIPPED), "the pods are marked again, for the old configuration"
    assert error.details == {"rollback": {"restored": True, "resource_version": "9"}}


class CrashingSchedulerApi(SchedulerApi):
    """The scheduler logs the load and then fails in its sessions: each look finds one more restart."""

    def pods(self):
        status = {"phase": "Running", "containerStatuses": [{
            "name": "volcano-scheduler", "restartCount": self.looks,
            "lastState": {"terminated": {"reason": "Error", "exitCode": 2}}}]}
        return [{"metadata": {"name": "volcano-scheduler-0"}, "status": status}]


def test_a_scheduler_that_crashes_after_loading_the_new_configuration_gets_the_old_one_back():
    api = CrashingSchedulerApi()
    error = failed(api)
    assert error.problems[0].startswith(
        "the scheduler does not keep running the new configuration: volcano-scheduler-0 restarted ")
    assert "the last after loading the new configuration (Error, exit code 2): see kubectl -n volcano-system logs " \
           "volcano-scheduler-0 --previous" in error.problems[0]
    assert error.problems[1].startswith("the previous configuration was put back in ConfigMap")
    assert api.writes == [("7", ENABLED), ("8", SHIPPED)] and api.conf() == SHIPPED


def test_someone_elses_change_after_the_write_is_not_overwritten_and_both_are_reported():
    theirs = SHIPPED + "configurations:\n- name: enqueue\n"

    class Meanwhile(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if path.endswith("/log"):  # while the task waits, someone else edits the ConfigMap
                self.configmap["data"]["volcano-scheduler.conf"] = theirs
                self.configmap["metadata"]["resourceVersion"] = "12"
            return SchedulerApi.request(self, method, path, body, **params)

    api = Meanwhile(log_level=1)
    error = failed(api, clock=lambda: 0.0)
    assert error.problems[0].startswith("the scheduler did not take in the new configuration within 10s")
    assert error.problems[1] == (
        "the previous configuration was NOT put back: someone else changed ConfigMap volcano-system/"
        "volcano-scheduler-configmap key volcano-scheduler.conf after this task wrote it (resourceVersion 8, now "
        "12), and their change is kept; compare it with the previous configuration (rollback.previous in this "
        "result) and put that back by hand if theirs is not meant to stay")
    assert api.conf() == theirs and api.writes == [("7", ENABLED)]
    assert error.details == {"rollback": {"restored": False, "conflict": True, "previous": SHIPPED}}


def test_a_conflicting_put_back_whose_current_version_cannot_be_read_says_so():
    class Meanwhile(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if path.endswith("/log"):
                self.configmap["metadata"]["resourceVersion"] = "12"
            return SchedulerApi.request(self, method, path, body, **params)

        def get(self, path, **params):
            if path == CONFIGMAP and self.writes:
                raise KubeApiError("GET %s: 503 unavailable" % path, 503)
            return SchedulerApi.get(self, path, **params)

    error = failed(Meanwhile(log_level=1), clock=lambda: 0.0)
    assert "(resourceVersion 8, now unknown)" in error.problems[1]


def test_a_restart_that_does_not_finish_gets_the_old_configuration_back_and_the_deployment_rolled_again():
    class Stuck(SchedulerApi):
        def get(self, path, **params):
            answer = SchedulerApi.get(self, path, **params)
            if path == DEPLOYMENT:
                answer = dict(answer, status=dict(answer["status"], replicas=2))  # the old pod never leaves
            return answer

    api = Stuck()
    error = failed(api, dict(RUN, activation="restart"))
    assert error.problems[0] == ("Deployment volcano-system/volcano-scheduler did not finish its restart within 10s: "
                                 "1 of 1 replicas updated, 1 available, 2 in all")
    assert error.problems[1] == (
        "the previous configuration was put back in ConfigMap volcano-system/volcano-scheduler-configmap key "
        "volcano-scheduler.conf (resourceVersion 9) and Deployment volcano-system/volcano-scheduler was restarted "
        "again to read it (not waited for)")
    assert api.conf() == SHIPPED
    assert api.deployment["spec"]["template"]["metadata"]["annotations"] == {
        volcano_scheduler.CONF_ANNOTATION: volcano_conf.conf_digest(SHIPPED)}


def test_an_api_error_after_the_write_puts_the_old_configuration_back():
    class NoMarking(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if method == "PATCH" and path == POD and self.conf() == ENABLED:
                raise KubeApiError("PATCH %s: 403 pods is forbidden" % path, 403)
            return SchedulerApi.request(self, method, path, body, **params)

    api = NoMarking()
    error = failed(api)
    assert error.problems[0] == "PATCH %s: 403 pods is forbidden" % POD
    assert error.problems[1].startswith("the previous configuration was put back") and api.conf() == SHIPPED


def test_any_other_failure_after_the_write_puts_the_old_configuration_back_too():
    class Broken(SchedulerApi):
        def pods(self):
            if self.conf() == ENABLED:
                return [{"metadata": {}, "status": {"phase": "Running"}}]  # no name: a KeyError in the wait
            return SchedulerApi.pods(self)

    api = Broken()
    error = failed(api)
    assert error.problems[0] == "KeyError: 'name'"
    assert api.conf() == SHIPPED and error.details["rollback"]["restored"] is True


def test_a_rollback_the_api_server_refuses_is_reported_with_the_previous_configuration():
    class Down(SchedulerApi):
        def write_configmap(self, body):
            if self.writes:
                raise KubeApiError("PATCH %s: 503 etcd leader changed" % CONFIGMAP, 503)
            return SchedulerApi.write_configmap(self, body)

    api = Down(log_level=1)
    error = failed(api, clock=lambda: 0.0)
    assert error.problems[1] == (
        "the previous configuration could NOT be put back (PATCH %s: 503 etcd leader changed): ConfigMap "
        "volcano-system/volcano-scheduler-configmap key volcano-scheduler.conf still holds the new one; put "
        "rollback.previous of this result back by hand" % CONFIGMAP)
    assert error.details == {"rollback": {"restored": False, "conflict": False, "previous": SHIPPED}}
    assert api.conf() == ENABLED


def test_a_put_back_whose_scheduler_cannot_be_told_says_how_to_restart_it():
    class Deaf(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if method == "PATCH" and path == POD and self.conf() == SHIPPED:
                raise KubeApiError("PATCH %s: 500 internal error" % path, 500)
            return SchedulerApi.request(self, method, path, body, **params)

    error = failed(Deaf(log_level=1), clock=lambda: 0.0)
    assert error.problems[1] == (
        "the previous configuration was put back in ConfigMap volcano-system/volcano-scheduler-configmap key "
        "volcano-scheduler.conf (resourceVersion 9), but making the scheduler read it again failed (PATCH %s: 500 "
        "internal error): run kubectl -n volcano-system rollout restart deployment/volcano-scheduler" % POD)


def test_a_put_back_with_no_scheduler_running_says_it_reads_it_when_it_starts():
    class Gone(SchedulerApi):
        def pods(self):
            return SchedulerApi.pods(self) if self.conf() == ENABLED else []

    error = failed(Gone(log_level=1), clock=lambda: 0.0)
    assert error.problems[1].endswith("(resourceVersion 9); no scheduler pod runs: it reads it when it starts")


# --- the reload wait ------------------------------------------------------------------------------

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
    result = volcano_scheduler.run(api, RUN, False, quick_wait, ticking())
    assert result["changed"] and result["activation"]["how"] == "reload"
    assert ("GET", "/api/v1/namespaces/volcano-system/pods/volcano-scheduler-1/log") in api.calls


def test_a_scheduler_that_never_comes_back_is_named_with_its_log_error():
    class Stuck(ReplacedSchedulerApi):
        pods = SchedulerApi.pods

    error = failed(Stuck(), clock=lambda: 0.0)
    assert "volcano-scheduler-0 (GET " in error.problems[0] and "400 container is waiting" in error.problems[0]


def test_a_load_counts_once_the_scheduler_kept_running_on_it():
    error = failed(SchedulerApi(), clock=lambda: 100.0)  # seen, but no time passes
    assert error.problems[0].startswith(
        "the scheduler did not take in the new configuration within 10s: volcano-scheduler-0 (loaded it 0 s "
        "before the deadline, but had not kept running on it for 10 s yet). It reloads its file")


def test_a_scheduler_still_on_the_previous_configuration_is_named_with_its_last_load():
    class Late(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if path.endswith("/log"):
                self.calls.append((method, path))
                return ("I1 x] Finished loading scheduler config. Final state: actions=[enqueue], "
                        "plugins=[gang drf]\n")
            return SchedulerApi.request(self, method, path, body, **params)

    error = failed(Late(), clock=lambda: 0.0)
    assert error.problems[0].startswith("the scheduler did not take in the new configuration within 10s: "
                                        "volcano-scheduler-0 (last load: plugins=gang drf).")


def test_no_scheduler_pod_left_during_the_wait_is_named_with_the_selector():
    class Vanishing(SchedulerApi):
        def pods(self):
            return SchedulerApi.pods(self) if self.looks <= 2 else []

    error = failed(Vanishing(log_level=1), clock=lambda: 0.0)
    assert error.problems[0].startswith("the scheduler did not take in the new configuration within 10s: no "
                                        "scheduler pod runs (selector app=volcano-scheduler).")


def test_a_pod_marked_while_it_goes_away_is_skipped():
    class Leaving(SchedulerApi):
        def request(self, method, path, body=None, **params):
            if method == "PATCH" and path == POD:
                self.calls.append((method, path))
                raise KubeApiError("PATCH %s: 404 not found" % path, 404)
            return SchedulerApi.request(self, method, path, body, **params)

    result = volcano_scheduler.run(Leaving(), dict(RUN, wait=False), False, quick_wait, ticking())
    assert result["activation"] == {"how": "reload", "pods": ["volcano-scheduler-0"]}


def test_loaded_plugins_reads_every_load_in_a_log():
    log = ("I1 x] Finished loading scheduler config. Final state: actions=[enqueue], plugins=[gang drf]\n"
           "I2 noise\n"
           "I3 x] Finished loading scheduler config. Final state: actions=[], plugins=[gang numa-aware]\n")
    assert volcano_scheduler.loaded_plugins(log) == [["gang", "drf"], ["gang", "numa-aware"]]
    assert volcano_scheduler.loaded_plugins(None) == []
