# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA device plugin stack, deployed by site.yml's cluster phase (numa.kube.numa_resource_plugin)
on numa-kubelet, proven with the real scheduler, API server and kubelet.

Pods are placed by kube-scheduler (no nodeName); logs come through the API server, which reaches
the kubelet as in any cluster. The tests run in file order; the last one removes the stack.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys
import time

import kubernetes
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import (PausedGuest, converge_vars, cpu_list, deadline_in, node_cpus, run_module,  # noqa: E402 pylint: disable=wrong-import-position
                     wait, wait_kubelet_healthy)

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
KUBECONFIG = os.path.join(CONTROL_PLANE, "admin.kubeconfig")
NODE = "numa-kubelet"
NAMESPACE = "kube-system"
PLUGIN = "numa-resource-plugin"
CAPACITY = 100
RESOURCES = ["numa-align/numa-0", "numa-align/numa-1"]
ALIGNED = {"numa.kube/aligned": "true"}
# what converge.yml passes the cluster phase (its node selector is the role's default: the label the
# rollout sets on nodes whose kubelet aligns), besides the defaults
MODULE_ARGS = {"kubeconfig": KUBECONFIG, "image": "numa.kube/node-agent:test", "image_pull_policy": "Never",
               "node_selector": ALIGNED, "numa_nodes": {NODE: [0, 1]}}
# the converge's container resources (no CPU request on the test bed), so that a run here changes nothing else
MODULE_ARGS["resources"] = converge_vars()["numa_resource_plugin_resources"]


@pytest.fixture(scope="module")
def uneven_paused():
    """numa-uneven is held stopped from the first test that works on numa-kubelet alone to the end."""
    with PausedGuest(os.path.join(ROOT, "tests", "output", "vm", "cluster", "numa-uneven")):
        yield


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(KUBECONFIG)
    return kubernetes.client.CoreV1Api()


def advertised(api):
    allocatable = api.read_node(NODE).status.allocatable or {}
    return dict((name, allocatable.get(name)) for name in RESOURCES)


def plugin_pods(api):
    return api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % PLUGIN).items


def running_plugin_pod(api):
    pods = [p for p in plugin_pods(api) if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
            and all(c.ready for c in p.status.container_statuses or [])]
    return pods[0] if pods else None


def numa_pod(name, numa, init=False):
    """A Guaranteed pod asking for numa-align/numa-<numa>, placed by the scheduler on numa-kubelet;
    its container prints what it got: NUMA_NODE, its cgroup's CPUs and memory nodes."""
    limits = {"cpu": "1", "memory": "64Mi", "numa-align/numa-%d" % numa: "1"}
    report = ("echo NUMA_NODE=$NUMA_NODE; echo cpus=$(cat /sys/fs/cgroup/cpuset.cpus.effective); "
              "echo mems=$(cat /sys/fs/cgroup/cpuset.mems.effective); sleep 3600")
    container = {"name": "app", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                 "command": ["sh", "-c", report], "resources": {"requests": limits, "limits": limits}}
    spec = {"nodeSelector": {"kubernetes.io/hostname": NODE}, "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1, "restartPolicy": "Never", "containers": [container]}
    if init:  # the README's example: the first init container asks for the same resource
        spec["initContainers"] = [dict(container, name="init", command=["sh", "-c", "echo init on $NUMA_NODE"])]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def started(pod):
    return pod if pod.status.phase in ("Running", "Failed") else None


def reported(log):
    return log if "mems=" in log else None


def run_numa_pod(api, name, numa, init=False):
    """Run the pod, return what it reported (dict) once it runs; the pod is deleted afterwards."""
    api.create_namespaced_pod("default", numa_pod(name, numa, init))
    try:
        pod = wait("pod %s running" % name, lambda: started(api.read_namespaced_pod(name, "default")))
        assert pod.status.phase == "Running", (pod.status.reason, pod.status.message)
        assert pod.spec.node_name == NODE
        log = wait("pod %s's report" % name,
                   lambda: reported(api.read_namespaced_pod_log(name, "default", container="app")))
        print("%s: %s" % (name, log.replace("\n", " ")))
        return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
    finally:
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        wait("pod %s gone" % name,
             lambda: name not in [p.metadata.name for p in api.list_namespaced_pod("default").items])


def registrations(api, pod):
    """How often the plugin's log says it registered, and the log; (-1, why) while the log cannot
    be read: the API server fetches it from kubelet, which right after its restart answers 404 for
    pods it has not synced yet (the observation channel, not the plugin, is what is down then)."""
    try:
        log = api.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    except kubernetes.client.exceptions.ApiException as exc:
        if exc.status in (404, 500, 502, 503):
            return -1, "log not readable yet: %s %s" % (exc.status, exc.reason)
        raise
    return len(re.findall(r"all \d+ resources registered", log)), log


# --- refused first, while numa-uneven runs (the other tests work on numa-kubelet alone) -------------

def test_a_node_that_would_not_align_is_refused_before_anything_is_applied(api):
    """numa-uneven runs topologyManagerPolicy best-effort (converge.yml): the module reads that from
    its kubelet and stops before applying anything."""
    result = run_module("numa.kube.numa_resource_plugin", dict(
        MODULE_ARGS, name="refused-plugin", node_selector={"kubernetes.io/hostname": "numa-uneven"}))
    assert result.get("failed"), result
    assert "numa-uneven: kubelet runs topologyManagerPolicy 'best-effort'" in result["msg"], result["msg"]
    apps = kubernetes.client.AppsV1Api()
    assert "refused-plugin" not in [d.metadata.name for d in apps.list_namespaced_daemon_set(NAMESPACE).items]
    assert "refused-plugin" not in [c.metadata.name for c in api.list_namespaced_config_map(NAMESPACE).items]


# --- what site.yml's cluster phase left -----------------------------------------------------------

@pytest.mark.usefixtures("uneven_paused")
def test_each_numa_node_is_advertised_at_the_configured_capacity(host, api):
    assert advertised(api) == dict((name, str(CAPACITY)) for name in RESOURCES)
    pod = running_plugin_pod(api)
    assert pod is not None and pod.spec.node_name == NODE
    assert [p.spec.node_name for p in plugin_pods(api)] == [NODE], "numa-uneven (best-effort) is not selected"
    # site.yml deployed it with the role's default selector, the label its rollout set on numa-kubelet
    daemon_set = kubernetes.client.AppsV1Api().read_namespaced_daemon_set(PLUGIN, NAMESPACE)
    assert daemon_set.spec.template.spec.node_selector == ALIGNED, daemon_set.spec.template.spec.node_selector
    # the logs say what was found and registered (read through the API server, as kubectl logs does)
    _count, log = registrations(api, pod)
    assert "Discovered NUMA node 0 with CPUs 0-1" in log and "Discovered NUMA node 1 with CPUs 2-3" in log, log
    assert "Registered numa-align/numa-1 with kubelet" in log, log
    # unprivileged: no capability at all in the running process, root file system read-only
    pid = host.check_output("pgrep -f 'numa_agent device-plugin' | head -n 1")
    status = host.file("/proc/%s/status" % pid).content_string
    assert re.search(r"^CapEff:\s+0+$", status, re.M), status
    assert " ro," in " " + host.check_output("awk '$2 == \"/\" {print $4\",\"}' /proc/%s/mounts" % pid)


@pytest.mark.usefixtures("uneven_paused")
def test_a_pod_asking_for_a_numa_node_gets_its_cpus_and_memory(host, api):
    for numa in (1, 0):
        got = run_numa_pod(api, "on-numa-%d" % numa, numa)
        assert got["NUMA_NODE"] == str(numa)
        assert cpu_list(got["cpus"]) <= node_cpus(host, numa) and len(cpu_list(got["cpus"])) == 1, got
        assert got["mems"] == str(numa), got


@pytest.mark.usefixtures("uneven_paused")
def test_the_readme_init_container_example_is_admitted_and_aligned(host, api):
    got = run_numa_pod(api, "init-then-app", 1, init=True)
    assert got["NUMA_NODE"] == "1" and got["mems"] == "1", got
    assert cpu_list(got["cpus"]) <= node_cpus(host, 1), got


@pytest.mark.usefixtures("uneven_paused")
def test_a_second_run_changes_nothing(api):
    result = run_module("numa.kube.numa_resource_plugin", MODULE_ARGS)
    assert not result.get("failed"), result.get("msg", result)
    assert result["changed"] is False, result["objects"]
    assert result["nodes"] == {NODE: dict((name, CAPACITY) for name in RESOURCES)}
    preview = run_module("numa.kube.numa_resource_plugin", dict(MODULE_ARGS, capacity=50), check=True, diff=True)
    assert preview["changed"] is True and not preview.get("failed"), preview
    assert [o["object"] for o in preview["objects"] if o["changed"]] == ["ConfigMap kube-system/%s" % PLUGIN]
    assert advertised(api) == dict((name, str(CAPACITY)) for name in RESOURCES), "check mode changed nothing"


# --- it comes back on its own -----------------------------------------------------------------------

@pytest.mark.usefixtures("uneven_paused")
def test_after_a_kubelet_restart_the_resources_come_back_and_pods_are_allocated(host, api):
    pod = running_plugin_pod(api)
    before, log = registrations(api, pod)
    assert before >= 1, log
    host.run_expect([0], "systemctl restart kubelet")
    wait_kubelet_healthy(host, settle=0)
    healthy = time.time()
    wait("the plugin registered again", lambda: registrations(api, pod)[0] > before, timeout=120, interval=0.5)
    registered = time.time() - healthy
    wait("resources back in allocatable", lambda: advertised(api) == dict((n, str(CAPACITY)) for n in RESOURCES),
         timeout=120, interval=0.5)
    seconds = time.time() - healthy
    # the plugin's part ends with its registration; kubelet then publishes the Node's allocatable
    # with its next status update (nodeStatusUpdateFrequency, 10 s by default)
    print("kubelet restart: the plugin registered again %.1f s and numa-align/numa-N were back in allocatable "
          "%.1f s after kubelet answered /healthz" % (registered, seconds))
    assert registered < 10, "the plugin took %.1f s to register again with the restarted kubelet" % registered
    assert seconds < 60, "the resources took %.0f s to come back in allocatable" % seconds
    got = run_numa_pod(api, "after-kubelet-restart", 1)
    assert got["NUMA_NODE"] == "1" and got["mems"] == "1", got


@pytest.mark.usefixtures("uneven_paused")
def test_a_deleted_plugin_pod_is_recreated_and_registers(api):
    old = running_plugin_pod(api)
    api.delete_namespaced_pod(old.metadata.name, NAMESPACE)

    def replaced():
        pod = running_plugin_pod(api)
        return pod if pod and pod.metadata.uid != old.metadata.uid else None

    new = wait("a new plugin pod", replaced)
    wait("the new pod registered", lambda: registrations(api, new)[0] >= 1, timeout=120)
    wait("resources back in allocatable", lambda: advertised(api) == dict((n, str(CAPACITY)) for n in RESOURCES),
         timeout=120)


# --- it touches only what it made -------------------------------------------------------------------

def kube_proxy_objects(api):
    """resourceVersions of the test bed's kube-proxy (deployed as kubeadm does, not by numa.kube)."""
    apps = kubernetes.client.AppsV1Api()
    return {"DaemonSet": apps.read_namespaced_daemon_set("kube-proxy", NAMESPACE).metadata.resource_version,
            "ConfigMap": api.read_namespaced_config_map("kube-proxy", NAMESPACE).metadata.resource_version,
            "ServiceAccount": api.read_namespaced_service_account("kube-proxy", NAMESPACE).metadata.resource_version}


@pytest.mark.usefixtures("uneven_paused")
def test_a_stack_named_like_a_foreign_one_neither_takes_it_over_nor_deletes_it(api):
    """The review's case: name kube-proxy in kube-system. present is refused before anything is
    applied, naming every foreign object; absent leaves all three alone and says so."""
    before = kube_proxy_objects(api)
    refused = run_module("numa.kube.numa_resource_plugin", dict(MODULE_ARGS, name="kube-proxy"))
    assert refused.get("failed"), refused
    for kind in ("ServiceAccount", "ConfigMap", "DaemonSet"):
        assert "%s kube-system/kube-proxy" % kind in refused["msg"], refused["msg"]
    assert "numa.kube did not make them: nothing was changed" in refused["msg"] and "adopt: true" in refused["msg"]
    kept = run_module("numa.kube.numa_resource_plugin",
                      {"kubeconfig": KUBECONFIG, "state": "absent", "name": "kube-proxy"})
    assert not kept.get("failed") and kept["changed"] is False, kept
    assert sorted(entry.split(" (")[0] for entry in kept["kept"]) == [
        "ConfigMap kube-system/kube-proxy", "DaemonSet kube-system/kube-proxy", "ServiceAccount kube-system/kube-proxy"]
    assert kube_proxy_objects(api) == before, "kube-proxy's objects were not written or deleted"
    proxies = api.list_namespaced_pod(NAMESPACE, label_selector="k8s-app=kube-proxy").items
    assert proxies and all(p.metadata.deletion_timestamp is None for p in proxies)


# --- it follows the machine (before the stack goes: the plugin must run) ----------------------------

def exclusive_cpus(host):
    """{pod uid: CPUs} kubelet's static CPU Manager has given containers for themselves (its checkpoint)."""
    state = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    held = {}
    for uid, containers in (state.get("entries") or {}).items():
        for cpus in containers.values():
            held.setdefault(uid, set()).update(cpu_list(cpus))
    return held


def in_the_way_of_numa_1(host, api, cpus):
    """What would make taking NUMA node 1's CPUs offline unsafe: pods holding numa-align/numa-1 or one of
    its CPUs exclusively."""
    found = ["pod %s holds CPUs %s exclusively" % (uid, sorted(held))
             for uid, held in exclusive_cpus(host).items() if held & cpus]
    for pod in api.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % NODE).items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in list(pod.spec.containers) + list(pod.spec.init_containers or []):
            if "numa-align/numa-1" in ((container.resources and container.resources.limits) or {}):
                found.append("pod %s/%s holds numa-align/numa-1" % (pod.metadata.namespace, pod.metadata.name))
    return found


def plugin_log(api, pod):
    return api.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)


@pytest.mark.usefixtures("uneven_paused")
def test_a_numa_node_whose_cpus_go_offline_leaves_allocatable_until_they_are_back(host, api):
    """NUMA node 1's CPUs (2 and 3) taken offline through sysfs: the plugin marks numa-align/numa-1's
    devices Unhealthy, kubelet publishes 0 of them in allocatable (capacity unchanged) while numa-0
    stays whole; online again, numa-1 returns to capacity. The plugin pod runs on throughout.

    Why these CPUs: all of node 1's, since a node with one online CPU left stays Healthy. Neither is
    CPU 0, the boot CPU (x86 Linux does not take it offline) and the one kubelet's static policy keeps
    for the system here (the node profile's reservedSystemCPUs; test_volcano prints it). Both sit in
    the shared pool once no container holds them exclusively: the earlier tests delete their pods,
    and this test waits until kubelet's checkpoint and the pods on the node show no exclusive CPU of
    node 1 and no numa-align/numa-1 before it starts. Offlining a shared CPU only
    narrows the effective cpuset of the containers that share it (cgroup v2 gives it back when the
    CPU returns); offlining a CPU kubelet assigned to a container for itself would leave that
    container without its CPU while kubelet's checkpoint still names it. The CPUs are put back
    online in a ``finally``, whatever happened.
    """
    cpus = node_cpus(host, 1)
    assert cpus == {2, 3}, "numa-kubelet's layout: NUMA node 1 holds CPUs 2-3, got %s" % sorted(cpus)
    online_before = cpu_list(host.file("/sys/devices/system/cpu/online").content_string)
    assert online_before == {0, 1, 2, 3}, online_before
    wait("numa-align/numa-N at capacity", lambda: advertised(api) == dict((n, str(CAPACITY)) for n in RESOURCES),
         timeout=120)
    deadline = deadline_in(60)
    blocking = in_the_way_of_numa_1(host, api, cpus)
    while blocking and time.time() < deadline:  # pods deleted by earlier tests may still be going
        time.sleep(2)
        blocking = in_the_way_of_numa_1(host, api, cpus)
    assert not blocking, "NUMA node 1's CPUs cannot go offline safely: %s" % blocking
    pod = running_plugin_pod(api)
    restarts = pod.status.container_statuses[0].restart_count
    try:
        for cpu in sorted(cpus):
            host.run_expect([0], "echo 0 > /sys/devices/system/cpu/cpu%d/online" % cpu)
        offline = time.time()
        assert cpu_list(host.file("/sys/devices/system/cpu/online").content_string) == online_before - cpus
        wait("numa-align/numa-1 at 0 in allocatable", lambda: advertised(api)["numa-align/numa-1"] == "0",
             timeout=60, interval=0.5)
        print("NUMA node 1 offline: numa-align/numa-1 at 0 in allocatable %.1f s after its CPUs went offline"
              % (time.time() - offline))
        status = api.read_node(NODE).status
        assert status.capacity["numa-align/numa-1"] == str(CAPACITY), "unhealthy devices are still capacity"
        assert status.allocatable["numa-align/numa-0"] == str(CAPACITY), status.allocatable
        assert "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy" in plugin_log(api, pod)
    finally:
        for cpu in sorted(cpus):
            host.run("echo 1 > /sys/devices/system/cpu/cpu%d/online" % cpu)
    assert cpu_list(host.file("/sys/devices/system/cpu/online").content_string) == online_before, "CPUs back online"
    back = time.time()
    wait("numa-align/numa-1 back at capacity", lambda: advertised(api) == dict((n, str(CAPACITY)) for n in RESOURCES),
         timeout=60, interval=0.5)
    print("NUMA node 1 online again: numa-align/numa-1 at capacity %.1f s later" % (time.time() - back))
    assert re.search(r"NUMA node 1 is back with online CPUs [0-9,-]+: numa-align/numa-1 Healthy",
                     plugin_log(api, pod)), "the plugin logs the way back"
    again = running_plugin_pod(api)
    assert again is not None and again.metadata.uid == pod.metadata.uid, "the same plugin pod runs on"
    assert again.status.container_statuses[0].restart_count == restarts


@pytest.mark.usefixtures("uneven_paused")
def test_state_absent_removes_the_stack(api):
    result = run_module("numa.kube.numa_resource_plugin", {"kubeconfig": KUBECONFIG, "state": "absent"})
    assert result["changed"] is True and not result.get("failed"), result
    apps = kubernetes.client.AppsV1Api()
    assert PLUGIN not in [d.metadata.name for d in apps.list_namespaced_daemon_set(NAMESPACE).items]
    assert PLUGIN not in [c.metadata.name for c in api.list_namespaced_config_map(NAMESPACE).items]
    assert PLUGIN not in [s.metadata.name for s in api.list_namespaced_service_account(NAMESPACE).items]
    assert not plugin_pods(api)
    again = run_module("numa.kube.numa_resource_plugin", {"kubeconfig": KUBECONFIG, "state": "absent"})
    assert again["changed"] is False, again
