# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real kubelet (registered with a real API server) proves what the kubelet role did.

The tests run in file order: the ones that stop or break kubelet come last and leave it healthy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import kubernetes  # pinned in requirements-dev.txt: a missing client must fail the run, not skip it
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import (SLOWER, AuditLog, configz, cpu_list, deadline_in, exporter_metrics,  # noqa: E402 pylint: disable=wrong-import-position
                     node_cpus, run_playbook, wait, wait_kubelet_healthy)

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
AUDIT = AuditLog(os.path.join(CONTROL_PLANE, "audit.log"))
NODE = "numa-kubelet"
# the file numa.kube manages on this node: a drop-in in the folder kubelet is started with
CONFIG = "/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf"
KUBEADM_CONFIG = "/var/lib/kubelet/config.yaml"
MARKER = "/var/lib/numa-kube/rollout/marker.json"
# what the test runs pass besides the change under test: the API, short settle times
API = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain_force": True,
       "kubelet_topology_manager_scope": "pod", "kubelet_health_settle": 5, "rollout_health_settle": 5}
# the tests here change numa-kubelet alone
SITE = [os.path.join(ROOT, "playbooks", "site.yml"), "--limit", NODE]


# Every test here works on numa-kubelet alone (--limit): they run last, and the tests that work on
# numa-uneven alone (marked beside) run meanwhile in a second pytest, on the other host core; once
# that has ended numa-uneven is held stopped (conftest.py's lanes). The audit log is read for this
# node's requests only.
pytestmark = pytest.mark.with_beside


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


def guaranteed_pod(name, cpu, memory):
    resources = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                 "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                                 "resources": {"requests": resources, "limits": resources}}]},
    }


def wait_pod(api, name, done, timeout=300):
    deadline = deadline_in(timeout)
    pod = None
    while time.time() < deadline:
        pod = api.read_namespaced_pod(name, "default")
        if done(pod):
            return pod
        time.sleep(3)
    pytest.fail("pod %s did not get there in %d s: %s" % (name, timeout * SLOWER, pod and pod.status))


# --- bad input stops everything before any node changes ------------------------------------------

def test_bad_input_is_refused_in_preflight_and_nothing_changes(host, api):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vars", "bad-inputs.yml")) as handle:
        bad = yaml.safe_load(handle)

    def checksums():
        return [host.file(path).sha256sum if host.file(path).exists else "absent" for path in bad["test_managed_files"]]

    before = checksums()
    mark = AUDIT.mark()
    # one after another: side by side (five ansible-playbook processes on the two host cores the
    # guests use) the five runs took 113 s against 66-84 s
    for case in bad["test_bad_inputs"]:
        done = run_playbook(SITE + ["-e", json.dumps(dict(API, **case["vars"]))], timeout=900)
        output = done.stdout + done.stderr
        for expect in case["expect"] if isinstance(case["expect"], list) else [case["expect"]]:
            said = [line for line in output.splitlines() if expect in line]
            print("%s: %s" % (case["name"], said[0][:400] if said else "(not said)"))
            assert done.returncode != 0, "%s: the run passed" % case["name"]
            assert said, "%s: the failure does not say %r:\n%s" % (case["name"], expect, output[-3000:])
        assert "PLAY [Change the nodes" not in done.stdout, "%s: got past preflight" % case["name"]
    assert checksums() == before, "a run with bad input changed a file on the node"
    assert AUDIT.node_requests(since=mark, node=NODE) == [], "a run with bad input cordoned or evicted"
    assert not api.read_node(NODE).spec.unschedulable


# --- kubelet pins Guaranteed pods to one NUMA node ------------------------------------------------

def test_guaranteed_pod_gets_exclusive_cpus_and_memory_of_one_numa_node(host, api):
    api.create_namespaced_pod("default", guaranteed_pod("pinned", "1", "128Mi"))
    pod = wait_pod(api, "pinned", lambda p: p.status.phase == "Running")
    container = pod.status.container_statuses[0].container_id.split("://")[-1]
    folder = host.check_output("find /sys/fs/cgroup/kubepods* -maxdepth 3 -type d -name '*%s*'" % container)
    assert folder, "no cgroup for container %s" % container
    cpus = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.cpus.effective").content_string)
    mems = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.mems.effective").content_string)
    print("pinned pod: cpuset.cpus=%s cpuset.mems=%s" % (sorted(cpus), sorted(mems)))
    assert len(cpus) == 1, "a Guaranteed pod with cpu: 1 gets exactly one exclusive CPU"
    assert len(mems) == 1, "its memory comes from one NUMA node"
    assert cpus <= node_cpus(host, list(mems)[0]), "CPU and memory on the same NUMA node"
    reserved = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    assert str(list(cpus)[0]) in json.dumps(reserved.get("entries", {})), reserved
    # the exporter reads the same checkpoints: one exclusive CPU and 128Mi assigned, on that node only
    node = list(mems)[0]
    values = exporter_metrics(host)
    for numa_node in (0, 1):
        label = (("numa_node", str(numa_node)),)
        assert values[("numa_node_cpus_exclusive", label)] == (1 if numa_node == node else 0), values
        assigned = values.get(("numa_node_memory_assigned_bytes",
                               (("numa_node", str(numa_node)), ("resource", "memory"))), 0)
        assert assigned == (128 * 2 ** 20 if numa_node == node else 0), values
    api.delete_namespaced_pod("pinned", "default", grace_period_seconds=0)


def test_pod_that_fits_the_node_but_no_numa_node_is_rejected(host, api):
    allocatable = api.read_node(NODE).status.allocatable["cpu"]
    cores = float(allocatable[:-1]) / 1000 if allocatable.endswith("m") else float(allocatable)
    assert cores >= 3, "the node as a whole has room for 3 CPUs (%s)" % allocatable
    assert all(len(node_cpus(host, n)) < 3 for n in (0, 1)), "no single NUMA node has 3 CPUs"
    api.create_namespaced_pod("default", guaranteed_pod("too-wide", "3", "128Mi"))
    pod = wait_pod(api, "too-wide", lambda p: p.status.phase == "Failed")
    print("too-wide pod: reason=%s message=%s" % (pod.status.reason, pod.status.message))
    assert pod.status.reason == "TopologyAffinityError"
    api.delete_namespaced_pod("too-wide", "default", grace_period_seconds=0)


# --- the role is what makes the difference ---------------------------------------------------------

def test_the_same_change_by_hand_without_removing_the_state_crash_loops(host):
    """Flip the CPU Manager policy by hand, keeping cpu_manager_state: kubelet refuses to start. (The
    static policy's options go with it, as a person would take them out: the none policy refuses
    any, before it reads the checkpoint.)"""
    original = host.file(CONFIG).content_string
    by_hand = ("import yaml; p = '%s'; c = yaml.safe_load(open(p)); assert c['cpuManagerPolicy'] == 'static', c; "
               "c['cpuManagerPolicy'] = 'none'; c.pop('cpuManagerPolicyOptions', None); "
               "open(p, 'w').write(yaml.safe_dump(c))" % CONFIG)
    host.run_expect([0], "cp %s /var/tmp/config.yaml.by-hand && python3 -c \"%s\" && date +%%s > /var/tmp/by-hand.since"
                    % (CONFIG, by_hand))
    try:
        host.run_expect([0], "systemctl restart kubelet")
        since = host.file("/var/tmp/by-hand.since").content_string.strip()
        deadline = deadline_in(120)
        line = ""
        while time.time() < deadline and not line:
            journal = host.run("journalctl -u kubelet --since @%s --no-pager -o cat" % since).stdout
            line = next((entry for entry in journal.splitlines() if "differs from state checkpoint policy" in entry), "")
            time.sleep(3)
        print("kubelet after the change by hand: %s" % line)
        assert 'configured policy \\"none\\" differs from state checkpoint policy \\"static\\"' in line
        assert "delete the CPU manager checkpoint file" in line
    finally:
        host.run_expect([0], "cp /var/tmp/config.yaml.by-hand %s && systemctl restart kubelet" % CONFIG)
        wait_kubelet_healthy(host)
    assert host.file(CONFIG).content_string == original


def run_site(extra):
    """The site playbook's kubelet part against numa-kubelet, as a user runs it."""
    return run_playbook(SITE + ["--tags", "kubelet", "-e", json.dumps(extra)], timeout=900)


def test_a_configuration_kubelet_refuses_is_rolled_back(host):
    """Past the preflight with the test-only switch, a wrong sum reaches kubelet; the health wait
    stops at kubelet's refusal instead of its timeout, and the role restores the previous bytes from
    its rollout record although no backup copy is kept."""
    before = host.file(CONFIG).sha256sum
    backups = host.run("ls %s.*~ 2>/dev/null" % CONFIG).stdout
    running_before = configz(host)["reservedMemory"]
    extra = {"kubelet_validate": False, "rollout_drain": False, "kubelet_health_timeout": 60,
             "kubelet_health_settle": 10, "rollout_health_settle": 5, "kubelet_backup": False,
             "kubelet_reserved_memory": [{"numaNode": 0, "limits": {"memory": "300Mi"}}]}
    result = run_site(extra)
    output = result.stdout + result.stderr
    print("\n".join(line for line in output.splitlines() if "rolled" in line or "not equal" in line)[:3000])
    assert result.returncode != 0, "the play should fail"
    assert "rolled %s back" % NODE in output
    assert 'is not equal to the value' in output and "Node Allocatable" in output
    # the refusal ended the health wait when the refusing process ended, not the 60 s timeout
    assert "refused its configuration and ended after" in output and "rather than at its 60 s timeout" in output
    assert host.file(CONFIG).sha256sum == before, "the previous configuration file is back"
    assert host.run("ls %s.*~ 2>/dev/null" % CONFIG).stdout == backups, "no backup was kept"
    assert not host.file(MARKER).exists, "the rollout record is closed"
    wait_kubelet_healthy(host, settle=5)
    assert configz(host)["reservedMemory"] == running_before


def test_a_change_that_never_reached_its_files_is_closed_without_a_restart(host):
    """A run that recorded its change and failed before writing anything (a drain held up by a
    PodDisruptionBudget, say) leaves a record whose files all match the node: the next run closes it
    without stopping kubelet, cordoning or uncordoning the node."""
    pid = host.check_output("systemctl show -p MainPID --value kubelet")
    record = {"state": "begin", "files": [CONFIG], "services": ["kubelet"], "unschedulable": False,
              "reason": "kubelet configuration"}
    planted = subprocess.run(["ansible", NODE, "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-m",
                              "numa.kube.rollout_state", "-a", json.dumps(record)],
                             capture_output=True, text=True, timeout=300, check=False)
    assert planted.returncode == 0, planted.stdout + planted.stderr
    assert host.file(MARKER).exists
    mark = AUDIT.mark()
    result = run_site(API)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "unfinished change started at" in output, "the run did not find the record"
    assert not host.file(MARKER).exists, "the record is closed"
    assert host.check_output("systemctl show -p MainPID --value kubelet") == pid, "kubelet was restarted"
    assert AUDIT.node_requests(since=mark, node=NODE) == []


# --- a drain is done only when the node is empty -------------------------------------------------

def bare_pod(name, labels=None, grace=1):
    """A BestEffort pod without a controller on NODE (the drain evicts it: the test runs force it)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never"}]},
    }


def pcpus_change(full_pcpus_only):
    """NODE's node profile (molecule.yml) decides its CPU Manager options: full-pcpus-only on or off
    through the profile's own variable, a change that makes cpu_manager_state stale."""
    return dict(API, node_profile_full_pcpus_only=full_pcpus_only)


def running_full_pcpus_only(host):
    return (configz(host).get("cpuManagerPolicyOptions") or {}).get("full-pcpus-only") == "true"


def a_change_that_drains(host):
    """kubelet settings that differ from the running ones and make cpu_manager_state stale: the
    envelope must drain NODE before kubelet restarts."""
    return pcpus_change(not running_full_pcpus_only(host))


def kubelet_pid(host):
    return host.check_output("systemctl show -p MainPID --value kubelet")


def assert_nothing_changed(host, api, before_config, before_pid, output):
    assert host.file(CONFIG).sha256sum == before_config, "the kubelet configuration was written"
    assert kubelet_pid(host) == before_pid, "kubelet was restarted"
    assert not host.file(MARKER).exists, "the change record was left open"
    assert not api.read_node(NODE).spec.unschedulable, "the node was schedulable before and must be again"
    assert "stopped before it changed anything on %s" % NODE in output, output[-3000:]


def schedulable_again(api):
    """After a test that failed half way: the later tests need NODE in service."""
    if api.read_node(NODE).spec.unschedulable:
        api.patch_node(NODE, {"spec": {"unschedulable": False}})


def test_a_drain_a_disruption_budget_blocks_fails_before_anything_disruptive(host, api):
    """A PodDisruptionBudget that allows no disruption refuses the eviction (429): the node's change
    fails naming the pod, the node is schedulable again, the record closed, kubelet neither
    restarted nor reconfigured."""
    policy = kubernetes.client.PolicyV1Api()
    labels = {"app": "numa-test-guarded"}
    api.create_namespaced_pod("default", bare_pod("numa-test-guarded", labels))
    policy.create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "numa-test-guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
    try:
        wait_pod(api, "numa-test-guarded", lambda p: p.status.phase == "Running")

        def budget_settled():
            budget = policy.read_namespaced_pod_disruption_budget("numa-test-guarded", "default")
            return (budget.status and budget.status.observed_generation == budget.metadata.generation
                    and budget.status.current_healthy == 1 and budget.status.disruptions_allowed == 0)
        wait("the disruption controller counts the guarded pod", budget_settled, timeout=120, interval=2)
        before_config, before_pid = host.file(CONFIG).sha256sum, kubelet_pid(host)
        mark = AUDIT.mark()
        result = run_site(dict(a_change_that_drains(host), rollout_drain_timeout=30))
        output = result.stdout + result.stderr
        print("\n".join(line for line in output.splitlines() if "pod(s) on it" in line)[:2000])
        assert result.returncode != 0, "the run must fail: the drain left a pod"
        assert re.search(r"left \d+ pod\(s\) on it: [^.]*default/numa-test-guarded[,.]", output), output[-3000:]
        assert "disruption budget" in output, output[-3000:]
        assert_nothing_changed(host, api, before_config, before_pid, output)
        seen = AUDIT.node_requests(since=mark, node=NODE)
        assert seen and seen[0] == ("cordon", NODE) and seen[-1] == ("uncordon", NODE), seen
        assert ("evict", "numa-test-guarded") not in seen, seen
        assert api.read_namespaced_pod("numa-test-guarded", "default").metadata.deletion_timestamp is None
    finally:
        policy.delete_namespaced_pod_disruption_budget("numa-test-guarded", "default")
        api.delete_namespaced_pod("numa-test-guarded", "default", grace_period_seconds=0)
        schedulable_again(api)


def numa_labels(api):
    return dict((key, value) for key, value in (api.read_node(NODE).metadata.labels or {}).items()
                if key.startswith("numa.kube/"))


def test_a_take_out_whose_drain_wait_runs_out_fails_before_anything_disruptive_and_keeps_the_labels(host, api):
    """A pod that takes longer to stop than rollout_drain_timeout (the test bed's Prometheus had
    prometheus-operator's 600 s) is still terminating when the drain's wait runs out: k8s_drain only
    warns, the envelope fails the change naming the pod. The change is a take-out (numa_kube_state
    absent), whose first step takes the Node's numa.kube labels off: the node still runs its NUMA
    kubelet, so the run puts them back."""
    # sleep runs as the container's init process and ignores SIGTERM: the pod stops at its grace period
    api.create_namespaced_pod("default", bare_pod("numa-test-slow", grace=300))
    try:
        wait_pod(api, "numa-test-slow", lambda p: p.status.phase == "Running")
        before_config, before_pid, before_labels = host.file(CONFIG).sha256sum, kubelet_pid(host), numa_labels(api)
        assert before_labels.get("numa.kube/aligned") == "true", before_labels
        started = time.time()
        result = run_site(dict(API, numa_kube_state="absent", rollout_drain_timeout=20))
        output = result.stdout + result.stderr
        print("run took %d s; labels before %s, after %s; %s" % (
            time.time() - started, before_labels, numa_labels(api),
            "\n".join(line for line in output.splitlines() if "pod(s) on it" in line)[:2000]))
        assert result.returncode != 0, "the run must fail: the drain left a pod"
        assert re.search(r"left \d+ pod\(s\) on it: [^.]*default/numa-test-slow \(terminating\)[,.]", output), \
            output[-3000:]
        assert "when the wait of the drain ran out (rollout_drain_timeout: 20 s)" in output, output[-3000:]
        assert "Label the Node again from what its kubelet runs, as its take-out failed" in output, output[-3000:]
        assert_nothing_changed(host, api, before_config, before_pid, output)
        assert numa_labels(api) == before_labels, "the take-out failed: the node must keep its numa.kube labels"
    finally:
        api.delete_namespaced_pod("numa-test-slow", "default", grace_period_seconds=0)
        schedulable_again(api)


# --- one owner per node change ----------------------------------------------------------------------

def plant_record(owner):
    """A record of a kubelet change on NODE, as a run with ``owner`` opens it (nothing else changes)."""
    record = {"state": "begin", "files": [CONFIG], "services": ["kubelet"], "unschedulable": False,
              "reason": "kubelet configuration", "owner": owner, "lease": 3600}
    planted = subprocess.run(["ansible", NODE, "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-m",
                              "numa.kube.rollout_state", "-a", json.dumps(record)],
                             capture_output=True, text=True, timeout=300, check=False)
    assert planted.returncode == 0, planted.stdout + planted.stderr


def test_a_record_a_live_run_holds_is_left_alone_until_forced(host):
    """A record whose owner runs on this controller (a live process, a fresh heartbeat) is another
    run's change under way: a run stops for that node naming the owner and touches nothing. With
    rollout_force=true the next run takes the record over and undoes it."""
    live = subprocess.Popen(["sleep", "600"])
    try:
        with open("/proc/%d/stat" % live.pid) as handle:
            start = handle.read().rsplit(")", 1)[1].split()[19]
        owner = {"run_id": "numa-test-live-run", "controller": socket.gethostname(), "user": getpass.getuser(),
                 "pid": live.pid, "pid_start": start}
        plant_record(owner)
        record = host.file(MARKER).content_string
        pid = kubelet_pid(host)
        mark = AUDIT.mark()
        result = run_site(API)
        output = result.stdout + result.stderr
        print("\n".join(line for line in output.splitlines() if "numa-test-live-run" in line)[:2000])
        assert result.returncode != 0, "the run must stop at a record a live run holds"
        assert ("belongs to run numa-test-live-run (%s@%s, pid %d)" % (owner["user"], owner["controller"], live.pid)
                in output), output[-3000:]
        assert "rollout_force=true" in output
        assert host.file(MARKER).content_string == record, "the live run's record was changed"
        assert kubelet_pid(host) == pid, "kubelet was restarted under a live run's change"
        assert AUDIT.node_requests(since=mark, node=NODE) == []

        result = run_site(dict(API, rollout_force=True))
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-4000:]
        assert "taken over with rollout_force=true" in output, output[-3000:]
        assert not host.file(MARKER).exists, "the record is closed"
        assert kubelet_pid(host) == pid, "the record's files never changed: no restart"
    finally:
        live.kill()
        live.wait()


# --- an interrupted run is finished by the next one ------------------------------------------------

def run_site_killed_after(extra, task):
    """Run the kubelet part and SIGKILL the controller (ansible-playbook and its workers) as soon as
    ``task`` has reported on the guest, as a lost laptop or CI runner would."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"]] + SITE + [
        "--tags", "kubelet", "-e", json.dumps(extra)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1"))
    lines, in_task, killed = [], False, False
    deadline = deadline_in(900)
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("TASK ["):
                in_task = task in line
            elif in_task and line.startswith(("changed:", "ok:")):
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            if time.time() > deadline:
                break
    finally:
        if not killed:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    output = "".join(lines)
    assert killed, "the run never reached %r:\n%s" % (task, output[-3000:])
    return output


def interrupted_and_finished(host, api, full_pcpus_only):
    """Kill a run right after it stopped kubelet, prove the node is left down, run again; returns the
    audit log mark taken before the first run."""
    assert running_full_pcpus_only(host) != full_pcpus_only, "the run must change something"
    mark = AUDIT.mark()
    change = pcpus_change(full_pcpus_only)
    run_site_killed_after(change, "Stop the kubelet service")
    # what the interrupted run left: kubelet stopped, the node cordoned, the record on the node
    assert host.run("systemctl is-active kubelet").stdout.strip() != "active"
    assert api.read_node(NODE).spec.unschedulable
    record = json.loads(host.file(MARKER).content_string)
    assert any(entry["path"] == CONFIG for entry in record["files"]), record
    result = run_site(change)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "unfinished change started at" in output, "the second run did not find the record"
    assert not host.file(MARKER).exists
    assert host.service("kubelet").is_running
    assert running_full_pcpus_only(host) == full_pcpus_only
    assert configz(host)["cpuManagerPolicyOptions"].get("strict-cpu-reservation") == "true", "the profile's"
    ready = [c for c in api.read_node(NODE).status.conditions if c.type == "Ready"][0]
    assert ready.status == "True"
    return mark


def test_an_interrupted_run_is_finished_and_the_node_returned_to_service(host, api):
    assert not api.read_node(NODE).spec.unschedulable
    mark = interrupted_and_finished(host, api, False)
    assert not api.read_node(NODE).spec.unschedulable, "the node was schedulable before and must be again"
    seen = AUDIT.node_requests(since=mark, node=NODE)
    assert seen[-1] == ("uncordon", NODE), seen


def test_an_interrupted_run_keeps_the_operators_cordon(host, api):
    """The operator cordoned the node for maintenance before the run: neither the interrupted run,
    nor the one that finishes it, may put the node back into service."""
    api.patch_node(NODE, {"spec": {"unschedulable": True}})
    try:
        mark = interrupted_and_finished(host, api, True)
        assert api.read_node(NODE).spec.unschedulable, "the operator's cordon was undone"
        seen = AUDIT.node_requests(since=mark, node=NODE)
        assert ("uncordon", NODE) not in seen, seen
    finally:
        api.patch_node(NODE, {"spec": {"unschedulable": False}})


# --- kubeadm renders config.yaml again on upgrade -----------------------------------------------------

# what `kubeadm init` left in the cluster, as far as `kubeadm upgrade node` reads it on a worker
CLUSTER_CONFIGURATION = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"


def put(create, replace, namespace, body):
    try:
        create(namespace, body)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
        replace(body["metadata"]["name"], namespace, body)


def test_kubeadm_upgrade_renders_config_yaml_again_and_the_settings_stay(host, api):
    """The real kubeadm (built from the same k8s.io/kubernetes module as kubelet) runs the kubelet-config
    phase of `kubeadm upgrade node` on the node: config.yaml is written again from the cluster's
    kubelet-config ConfigMap, which knows nothing of NUMA. kubelet restarted on it still runs
    numa.kube's settings: they live in the drop-in of the folder KUBELET_EXTRA_ARGS gives kubelet."""
    uploaded = host.file(KUBEADM_CONFIG).content_string  # the cluster-wide configuration, as kubeadm uploaded it
    rbac = kubernetes.client.RbacAuthorizationV1Api()
    put(api.create_namespaced_config_map, api.replace_namespaced_config_map, "kube-system",
        {"metadata": {"name": "kubeadm-config"}, "data": {"ClusterConfiguration": CLUSTER_CONFIGURATION}})
    put(api.create_namespaced_config_map, api.replace_namespaced_config_map, "kube-system",
        {"metadata": {"name": "kubelet-config"}, "data": {"kubelet": uploaded}})
    # kubeadm lets every node read these two (its kubeadm:nodes-kubeadm-config and kubeadm:kubelet-config roles)
    for name in ("kubeadm-config", "kubelet-config"):
        role = "numa-test:read-" + name
        put(rbac.create_namespaced_role, rbac.replace_namespaced_role, "kube-system", {
            "metadata": {"name": role},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name], "verbs": ["get"]}]})
        put(rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding, "kube-system", {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]})
    before = configz(host)
    assert before["cpuManagerPolicy"] == "static"
    done = host.run("kubeadm upgrade node phase kubelet-config 2>&1")
    print(done.stdout[-2500:])
    assert done.rc == 0, done.stdout[-2500:]
    assert "successfully upgraded" in done.stdout
    rendered = yaml.safe_load(host.file(KUBEADM_CONFIG).content_string)
    assert rendered["cpuManagerPolicy"] == "none" and "reservedMemory" not in rendered, rendered
    host.run_expect([0], "systemctl restart kubelet")
    wait_kubelet_healthy(host)
    running = configz(host)
    for field in ("cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerScope",
                  "reservedMemory"):
        assert running[field] == before[field], (field, running[field], before[field])


@pytest.mark.with_beside(last=True)
def test_the_tests_beside_these_passed(beside_lane):
    """The second lane (conftest.py): its pytest ended, every test of it passed. Its lines are in this
    log, marked ``beside |``."""
    if beside_lane is None:
        pytest.skip("no lane beside this verify: the beside tests ran in order, in this pytest")
    code = beside_lane.wait(timeout=3600 * SLOWER)
    summary = [line for line in beside_lane.lines if line.startswith("=") and re.search(r" (passed|failed|error)", line)]
    summary = [line for line in beside_lane.lines if line.startswith("FAILED ")] + summary
    assert code == 0, "the beside lane %s: %s" % ("ran past its deadline" if code is None else "exited %d" % code,
                                                  "\n".join(summary[-5:] or beside_lane.lines[-40:]))
