# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's entry points run by ansible-playbook on this machine, with the record in a
temporary folder: what they write, the facts they set, and that a record another live run holds is
left alone. Without a cluster the drain is off, or the Kubernetes API is a stand-in (the
kubernetes.core modules the role calls, keeping the Node's schedulability and pods in a file and
logging every cordon and uncordon), with systemctl and kubelet's health endpoint stood in too."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# recorded by begin's opening write, before the drain; "cordoned and drained" after the drain in
# records of earlier builds, which release still honours
CORDON_STEP = "cordoning and draining"
OLD_CORDON_STEP = "cordoned and drained"


def run_play(tmp_path, tasks, extra_vars=None, collections=(), env=None):
    """One play on localhost around ``tasks``; returns (exit code, {task name: result}, output).

    ``collections`` are searched before this checkout's (stand-ins for a collection or a plugin);
    ``env`` is added to ansible-playbook's environment."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": dict({"rollout_drain": False, "rollout_marker_dir": str(tmp_path / "record")}, **(extra_vars or {})),
             "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    environment = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
                       ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(
                           list(collections) + [os.path.join(ROOT, ".venv", "collections")]),
                       ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    environment.update(env or {})
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)]
    done = subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    results = {}
    for each in json.loads(done.stdout)["plays"][0]["tasks"]:
        name = each["task"]["name"].split(" : ", 1)[-1]  # without the role's prefix
        results.setdefault(name, []).append(each["hosts"].get("localhost", {}))
    return done.returncode, results, done.stdout + done.stderr


def include(entry, **variables):
    task = {"name": entry, "ansible.builtin.include_role": {"name": "numa.kube.rollout", "tasks_from": entry}}
    if variables:
        task["vars"] = variables
    return task


def show(name, expression):
    return {"name": name, "ansible.builtin.debug": {"msg": "{{ %s }}" % expression}}


def record(tmp_path):
    path = tmp_path / "record" / "marker.json"
    return json.loads(path.read_text()) if path.exists() else None


def digest(tmp_path):
    return hashlib.sha256((tmp_path / "record" / "marker.json").read_bytes()).hexdigest()


def plant_record(tmp_path, state="begin", **options):
    """Write the record a run left in tmp_path/record as numa.kube.rollout_state would (its own code,
    called here rather than through an ansible-playbook run of its own: the record is the tests'
    starting point, what the role then does with it is what they run the role for)."""
    return rollout.run_state(durable.Node("/"), state, folder=str(tmp_path / "record"), **options)


@pytest.fixture
def changed_file(tmp_path):
    path = tmp_path / "kubelet.conf"
    path.write_text("cpuManagerPolicy: none\n")
    return str(path)


def test_begin_records_the_change_as_this_run_and_end_closes_it(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [
        include("recover"),
        include("begin", rollout_change_files=[changed_file], rollout_change_services=["kubelet"],
                rollout_change_disruptive=False, rollout_change_reason="kubelet configuration"),
        show("opened", "[rollout_record, rollout_open, rollout_drained, rollout_recovered,"
                       " lookup('numa.kube.rollout_owner')]"),
        {"name": "proven", "ansible.builtin.set_fact": {"rollout_kubelet_healthy": True}},
        include("end"),
        show("closed", "[rollout_record, rollout_open, rollout_drained, rollout_kubelet_healthy]"),
    ])
    assert rc == 0, output[-3000:]
    opened, is_open, drained, recovered, me = results["opened"][0]["msg"]
    assert is_open is True and drained is False and recovered is False
    assert opened["reason"] == "kubelet configuration" and opened["services"] == ["kubelet"]
    assert [entry["path"] for entry in opened["files"]] == [changed_file]
    assert opened["owner"]["run_id"] == me["run_id"] and opened["owner"]["lease"] == 7200
    assert results["closed"][0]["msg"] == [{}, False, False, False]
    assert record(tmp_path) is None, "end removes the record"


def test_begin_refuses_a_call_without_a_reason_before_its_first_task(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [include("begin", rollout_change_files=[changed_file])])
    assert rc != 0
    validation = [name for name in results if name.startswith("Validating arguments against arg spec 'begin'")]
    assert validation and "rollout_change_reason" in results[validation[0]][0]["msg"], output[-3000:]
    assert not (tmp_path / "record").exists(), "nothing is written"


def test_recover_leaves_the_record_this_run_holds(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration"),
        include("recover"),
        show("after", "[rollout_recovered, rollout_open]"),
    ])
    assert rc == 0, output[-3000:]
    assert results["after"][0]["msg"] == [False, True]
    assert record(tmp_path) is not None, "this run's own record is not undone"


@pytest.fixture
def live_owner(tmp_path, changed_file):
    """A record held by another run on this controller whose process still runs (a sleep)."""
    live = subprocess.Popen(["sleep", "300"])
    with open("/proc/%d/stat" % live.pid) as handle:
        start = handle.read().rsplit(")", 1)[1].split()[19]
    owner = {"run_id": "other-run", "controller": socket.gethostname(), "user": getpass.getuser(), "pid": live.pid,
             "pid_start": start}
    plant_record(tmp_path, files=[changed_file], reason="planted", owner=owner)
    yield owner
    live.kill()
    live.wait()


def test_recover_stops_at_a_record_a_live_run_holds_and_changes_nothing(tmp_path, live_owner):
    before = digest(tmp_path)
    rc, results, output = run_play(tmp_path, [include("recover")])
    assert rc != 0
    message = results["Stop when another run that may still be alive owns the change"][0]["msg"]
    holder = "belongs to run other-run (%s@%s, pid %d)" % (live_owner["user"], live_owner["controller"], live_owner["pid"])
    assert holder in message, message
    assert "s ago (lease 3600 s)" in message and "rollout_force=true" in message, message
    assert digest(tmp_path) == before, "the live run's record was changed"


def test_a_part_whose_begin_is_refused_does_not_undo_the_other_runs_change(tmp_path, live_owner, changed_file):
    """A run that skipped recover meets the live run at begin: the module refuses, and the part's
    rescue (rollback) leaves the other run's record and node alone."""
    before = digest(tmp_path)
    rc, results, output = run_play(tmp_path, [{
        "name": "part",
        "block": [include("begin", rollout_change_files=[changed_file], rollout_change_reason="racing change")],
        "rescue": [include("rollback"), show("after", "[rollout_recovered, ansible_failed_result.msg]")],
    }])
    assert rc == 0, output[-3000:]
    recovered, failure = results["after"][0]["msg"]
    assert recovered is False
    assert "belongs to run other-run" in failure, failure
    assert digest(tmp_path) == before, "the live run's record was changed"
    assert "Stop kubelet while its files are put back" not in results or \
        all(result.get("skipped") for result in results["Stop kubelet while its files are put back"])


def test_a_step_is_recorded_as_this_run_and_kept_in_rollout_record(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [
        include("begin", rollout_change_files=[changed_file], rollout_change_disruptive=False,
                rollout_change_reason="kernel parameters"),
        include("step", rollout_step="rebooted for kernel parameters"),
        show("after", "[rollout_record.steps, rollout_record.owner.run_id]"),
    ])
    assert rc == 0, output[-3000:]
    steps, holder = results["after"][0]["msg"]
    assert steps == ["kernel parameters", "rebooted for kernel parameters"]
    on_disk = record(tmp_path)
    assert on_disk["steps"] == steps and on_disk["owner"]["run_id"] == holder, "rollout_record is the record as written"


def test_a_step_on_a_record_a_live_run_holds_is_refused(tmp_path, live_owner):
    before = digest(tmp_path)
    rc, results, output = run_play(tmp_path, [include("step", rollout_step="rebooted for kernel parameters")])
    assert rc != 0
    assert "belongs to run other-run" in results["Record the step reached"][0]["msg"], output[-3000:]
    assert digest(tmp_path) == before, "the live run's record was changed"


# --- this run's identity is asked for once per host -------------------------------------------------

COUNTING_LOOKUP = '''
from __future__ import absolute_import, division, print_function
__metaclass__ = type
DOCUMENTATION = """
name: rollout_owner
short_description: a stand-in that counts how often it is asked
description: [Each call returns another run id, as the worker pid did on a controller without /proc.]
"""
import os
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        path = os.environ["NUMA_KUBE_TEST_OWNER_CALLS"]
        with open(path, "a") as handle:
            handle.write("asked\\n")
        with open(path) as handle:
            count = len(handle.read().splitlines())
        return [{"run_id": "asked-%d" % count, "controller": "test-controller", "user": "test", "pid": count,
                 "pid_start": str(count)}]
'''


@pytest.fixture
def counting_owner(tmp_path):
    """numa.kube as in this checkout, but its lookup rollout_owner answers another run id each time
    it is asked; returns (collections path, environment, file with a line per call)."""
    top = tmp_path / "counting"
    collection = top / "ansible_collections" / "numa" / "kube"
    lookups = collection / "plugins" / "lookup"
    lookups.mkdir(parents=True)
    for name in ("galaxy.yml", "meta", "roles"):
        os.symlink(os.path.join(ROOT, name), str(collection / name))
    for name in os.listdir(os.path.join(ROOT, "plugins")):
        if name != "lookup":
            os.symlink(os.path.join(ROOT, "plugins", name), str(collection / "plugins" / name))
    for name in os.listdir(os.path.join(ROOT, "plugins", "lookup")):
        if name.endswith(".py") and name != "rollout_owner.py":
            os.symlink(os.path.join(ROOT, "plugins", "lookup", name), str(lookups / name))
    (lookups / "rollout_owner.py").write_text(COUNTING_LOOKUP)
    calls = tmp_path / "owner-calls"
    return str(top), {"NUMA_KUBE_TEST_OWNER_CALLS": str(calls)}, calls


def asked(calls):
    return len(calls.read_text().splitlines()) if calls.exists() else 0


@pytest.mark.parametrize("first", ["recover", "begin"])
def test_the_run_identity_is_asked_once_and_every_write_names_it(tmp_path, changed_file, counting_owner, first):
    """A lookup that answers differently each time (the worker's pid on a controller without /proc)
    must not split one run into several owners: recover, or begin when recover did not run, pins the
    first answer, and begin, the steps and the closing all write as that run."""
    collections, env, calls = counting_owner
    tasks = [include("recover")] if first == "recover" else []
    tasks += [
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration"),
        show("opened", "rollout_record.owner.run_id"),
        include("step", rollout_step="restarted"),
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="containerd configuration"),
        {"name": "proven", "ansible.builtin.set_fact": {"rollout_kubelet_healthy": True}},
        include("end"),
    ]
    rc, results, output = run_play(tmp_path, tasks, collections=[collections], env=env)
    assert rc == 0, output[-3000:]
    assert asked(calls) == 1, "the lookup was asked %d times in one run" % asked(calls)
    assert results["opened"][0]["msg"] == "asked-1"
    assert record(tmp_path) is None, "end closed the record as the run that opened it"


# --- a stand-in for the Kubernetes API, systemctl and kubelet's health --------------------------------

FAKE_K8S_INFO = '''#!/usr/bin/python
from __future__ import absolute_import, division, print_function
__metaclass__ = type
DOCUMENTATION = """
module: k8s_info
short_description: a stand-in reading the Node and its pods from the file NUMA_KUBE_TEST_API names
"""
import json
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        kind=dict(type="str", required=True), name=dict(type="str"), namespace=dict(type="str"),
        kubeconfig=dict(type="raw"), wait=dict(type="bool", default=False), wait_condition=dict(type="dict"),
        wait_timeout=dict(type="int"), label_selectors=dict(type="list", elements="str", default=[]),
        field_selectors=dict(type="list", elements="str", default=[])), supports_check_mode=True)
    with open(os.environ["NUMA_KUBE_TEST_API"]) as handle:
        api = json.load(handle)
    if module.params["kind"] == "Node":
        resources = [{"metadata": {"name": module.params["name"]}, "spec": {"unschedulable": api["unschedulable"]},
                      "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
    else:  # the pods bound to the node; no control-plane pods
        resources = [] if module.params["label_selectors"] else api["pods"]
    module.exit_json(changed=False, resources=resources)


main()
'''

FAKE_K8S_DRAIN = '''#!/usr/bin/python
from __future__ import absolute_import, division, print_function
__metaclass__ = type
DOCUMENTATION = """
module: k8s_drain
short_description: a stand-in changing the Node in the file NUMA_KUBE_TEST_API names, logging each request
description: [drain cordons first, then evicts as the file's drain says - ok, refuse (a 429) or error.]
"""
import json
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        name=dict(type="str", required=True), state=dict(type="str", default="drain"),
        kubeconfig=dict(type="raw"), delete_options=dict(type="dict")), supports_check_mode=True)
    path = os.environ["NUMA_KUBE_TEST_API"]
    with open(path) as handle:
        api = json.load(handle)
    state = module.params["state"]
    changed = False
    if state in ("drain", "cordon") and not api["unschedulable"]:
        api["unschedulable"], changed = True, True
        api["requests"].append("cordon")
    elif state == "uncordon" and api["unschedulable"]:
        api["unschedulable"], changed = False, True
        api["requests"].append("uncordon")
    if state == "drain" and api["drain"] == "ok":
        api["pods"] = []
    with open(path, "w") as handle:
        json.dump(api, handle)
    if state == "drain" and api["drain"] == "refuse":
        module.fail_json(msg="Failed to delete pod default/db-0 due to: Cannot evict pod as it would violate the "
                             "pod's disruption budget.")
    if state == "drain" and api["drain"] == "error":
        module.fail_json(msg="Exception raised: Internal Server Error")
    module.exit_json(changed=changed, result="node %s: %s" % (module.params["name"], state))


main()
'''

# systemctl as the modules use it: kubelet runs with main process 4242; every call is logged beside it
FAKE_SYSTEMCTL = '''#!/bin/sh
echo "$*" >> "$(dirname "$0")/systemctl.log"
if [ "$1" = show ] && [ "$2" = -p ]; then
  echo 4242
elif [ "$1" = show ]; then
  printf 'Id=%s\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\nMainPID=4242\\n' "$2"
fi
exit 0
'''

DB_POD = {"metadata": {"namespace": "default", "name": "db-0"}, "status": {"phase": "Running"}}


class Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the name http.server calls)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class FakeCluster(object):
    """The Node's schedulability and pods in a JSON file, read and changed by stand-ins for
    kubernetes.core.k8s_info and k8s_drain; systemctl and kubelet's health endpoint stood in too."""

    def __init__(self, tmp_path, health_url):
        self.path = tmp_path / "api.json"
        self.bin = tmp_path / "bin"
        self.collections = str(tmp_path / "kube")
        modules = tmp_path / "kube" / "ansible_collections" / "kubernetes" / "core" / "plugins" / "modules"
        modules.mkdir(parents=True)
        (modules / "k8s_info.py").write_text(FAKE_K8S_INFO)
        (modules / "k8s_drain.py").write_text(FAKE_K8S_DRAIN)
        self.bin.mkdir()
        (self.bin / "systemctl").write_text(FAKE_SYSTEMCTL)
        (self.bin / "systemctl").chmod(0o755)
        (tmp_path / "kubelet.log").write_text("")
        self.variables = {"rollout_drain": True, "rollout_node_name": "node-1", "rollout_kubelet_health_url": health_url,
                          "rollout_kubelet_log_file": str(tmp_path / "kubelet.log"), "rollout_health_settle": 0,
                          "rollout_health_timeout": 60, "rollout_kubelet_service": "kubelet"}
        self.env = {"NUMA_KUBE_TEST_API": str(self.path), "PATH": str(self.bin) + os.pathsep + os.environ["PATH"]}
        self.write(unschedulable=False, pods=[], drain="ok", requests=[])

    def read(self):
        return json.loads(self.path.read_text())

    def write(self, **values):
        current = self.read() if self.path.exists() else {}
        current.update(values)
        self.path.write_text(json.dumps(current))

    def systemctl(self):
        log = self.bin / "systemctl.log"
        return log.read_text().splitlines() if log.exists() else []

    def run(self, tmp_path, tasks, **extra_vars):
        return run_play(tmp_path, tasks, dict(self.variables, **extra_vars), collections=[self.collections],
                        env=self.env)


@pytest.fixture
def cluster(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), Healthy)
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    yield FakeCluster(tmp_path, "http://127.0.0.1:%d/healthz" % server.server_address[1])
    server.shutdown()
    server.server_close()


OPERATOR_CORDONS = {"name": "operator cordons", "kubernetes.core.k8s_drain": {"name": "node-1", "state": "cordon"}}


# --- the envelope uncordons only a node its own drain cordoned -------------------------------------

def test_an_operators_cordon_during_a_change_that_did_not_drain_stays(tmp_path, changed_file, cluster):
    """A kubelet restart that keeps its state does not drain; an operator who cordons the node while
    it runs keeps the cordon: end does not uncordon a node this change never cordoned."""
    rc, results, output = cluster.run(tmp_path, [
        include("recover"),
        include("begin", rollout_change_files=[changed_file], rollout_change_disruptive=False,
                rollout_change_reason="kubelet configuration"),
        OPERATOR_CORDONS,
        {"name": "proven", "ansible.builtin.set_fact": {"rollout_kubelet_healthy": True}},
        include("end"),
    ])
    assert rc == 0, output[-3000:]
    api = cluster.read()
    assert api["unschedulable"] is True, "the operator's cordon was undone"
    assert api["requests"] == ["cordon"], "only the operator's cordon: %s" % api["requests"]
    assert record(tmp_path) is None


def test_a_drained_change_records_the_cordon_and_end_uncordons(tmp_path, changed_file, cluster):
    cluster.write(pods=[DB_POD])
    rc, results, output = cluster.run(tmp_path, [
        include("recover"),
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration"),
        show("opened", "[rollout_record.steps, rollout_drained]"),
        {"name": "proven", "ansible.builtin.set_fact": {"rollout_kubelet_healthy": True}},
        include("end"),
    ])
    assert rc == 0, output[-3000:]
    steps, drained = results["opened"][0]["msg"]
    assert steps == ["kubelet configuration", CORDON_STEP] and drained is True
    api = cluster.read()
    assert api["requests"] == ["cordon", "uncordon"] and api["unschedulable"] is False
    assert record(tmp_path) is None


def test_a_refused_eviction_is_recorded_as_a_cordon_and_the_node_given_back(tmp_path, changed_file, cluster):
    """k8s_drain cordons, then stops at the eviction a PodDisruptionBudget refuses: the pod stays,
    the change fails before anything disruptive, and the node it cordoned is uncordoned."""
    cluster.write(pods=[DB_POD], drain="refuse")
    rc, results, output = cluster.run(tmp_path, [
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration"),
    ])
    assert rc != 0
    message = results["Fail naming the pods that stayed"][0]["msg"]
    assert "left 1 pod(s) on it: default/db-0" in message and "eviction the API refused" in message, message
    api = cluster.read()
    assert api["requests"] == ["cordon", "uncordon"] and api["unschedulable"] is False
    assert record(tmp_path) is None, "the record is closed"


def test_a_drain_that_fails_is_recorded_and_the_rollback_uncordons(tmp_path, changed_file, cluster):
    """Any other failure of the drain may come after its cordon: the step is recorded all the same,
    the part's rescue sees the drain's own failure, and its rollback gives the node back."""
    cluster.write(pods=[DB_POD], drain="error")
    rc, results, output = cluster.run(tmp_path, [{
        "name": "part",
        "block": [include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration")],
        "rescue": [show("failed", "[ansible_failed_result.msg, rollout_record.steps]"), include("rollback"),
                   show("after", "rollout_recovered")],
    }])
    assert rc == 0, output[-3000:]
    failure, steps = results["failed"][0]["msg"]
    assert failure == "Exception raised: Internal Server Error"
    assert steps == ["kubelet configuration", CORDON_STEP]
    assert results["after"][0]["msg"] is True
    api = cluster.read()
    assert api["requests"] == ["cordon", "uncordon"] and api["unschedulable"] is False
    assert record(tmp_path) is None
    assert not [call for call in cluster.systemctl() if call.split()[0] in ("stop", "restart")], \
        "no file was changed: nothing to stop or restart"


def plant(tmp_path, changed_file, steps=()):
    """The record a run left when it was killed (no owner: a record anyone may take over)."""
    plant_record(tmp_path, files=[changed_file], services=["kubelet"], unschedulable=False,
                 reason="kubelet configuration")
    for step in steps:
        plant_record(tmp_path, "step", step=step)


def test_recovering_a_killed_change_that_did_not_drain_keeps_the_operators_cordon(tmp_path, changed_file, cluster):
    plant(tmp_path, changed_file)
    cluster.write(unschedulable=True, requests=[])  # the operator cordoned the node after the run died
    rc, results, output = cluster.run(tmp_path, [include("recover"), show("after", "rollout_recovered")])
    assert rc == 0, output[-3000:]
    assert results["after"][0]["msg"] is True, "the record was taken over and undone"
    assert record(tmp_path) is None
    api = cluster.read()
    assert api["unschedulable"] is True and api["requests"] == [], api


@pytest.mark.parametrize("step", [CORDON_STEP, OLD_CORDON_STEP])
def test_recovering_a_killed_change_that_drained_uncordons_the_node(tmp_path, changed_file, cluster, step):
    plant(tmp_path, changed_file, steps=[step])
    cluster.write(unschedulable=True, requests=[])  # the killed run's drain cordoned it
    rc, results, output = cluster.run(tmp_path, [include("recover"), show("after", "rollout_recovered")])
    assert rc == 0, output[-3000:]
    assert results["after"][0]["msg"] is True
    assert record(tmp_path) is None
    api = cluster.read()
    assert api["unschedulable"] is False and api["requests"] == ["uncordon"], api
    assert "show kubelet" in cluster.systemctl(), "kubelet's service was looked at through the stand-in"
    assert not [call for call in cluster.systemctl() if call.split()[0] in ("stop", "restart")], \
        "no file was changed: nothing to stop or restart"
