# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano's NUMA-aware scheduling, deployed by site.yml's cluster phase (numa.kube.volcano_stack
from Volcano v1.14.1's own release manifest, the Numatopology publisher, numa.kube.volcano_numa_aware),
proven with the real Volcano scheduler and controllers, API server and kubelets.

numa-kubelet runs the static CPU Manager with single-numa-node; numa-uneven best-effort, a node
the plugin must never choose for a single-numa-node pod. Every test leaves numa-aware enabled.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import time

import kubernetes
import pytest
import testinfra

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import account_token, configz, cpu_list, custom_objects_as, node_cpus, run_module, wait  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KUBECONFIG = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane", "admin.kubeconfig")
NODE, UNEVEN = "numa-kubelet", "numa-uneven"
NAMESPACE = "volcano-system"
POLICY = "volcano.sh/numa-topology-policy"
PUBLISHER = "numa-topology-publisher"
SWITCH = {"kubeconfig": KUBECONFIG, "weight": 10, "topology_policy": "single-numa-node"}


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(KUBECONFIG)
    return kubernetes.client.CoreV1Api()


@pytest.fixture(scope="module")
def custom(api):
    return kubernetes.client.CustomObjectsApi()


def topology(custom, node):
    return custom.get_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", node)


def free_cpus(custom, node=NODE):
    return cpu_list(topology(custom, node)["spec"]["numares"]["cpu"]["allocatable"])


def scheduler_loads(api):
    """The plugin lists of each configuration load the scheduler logged, oldest first."""
    pod = api.list_namespaced_pod(NAMESPACE, label_selector="app=volcano-scheduler").items[0]
    log = api.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    return [line.split("plugins=[", 1)[1].rstrip("]").split() for line in log.splitlines()
            if "Finished loading scheduler config" in line]


def guide_pod(name, cpu, scheduler="volcano", node=None):
    """The openFuyao guide's workload: Guaranteed, whole CPUs, single-numa-node, printing its CPUs."""
    resources = {"cpu": cpu, "memory": "64Mi"}
    spec = {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "echo cpus=$(cat /sys/fs/cgroup/cpuset.cpus.effective); "
                                                    "sleep 3600"],
                            "resources": {"requests": resources, "limits": resources}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": name},
                         "annotations": {POLICY: "single-numa-node"}}, "spec": spec}


def delete_and_wait(api, name, pod=True):
    """Delete the pod ``name`` (or only wait for a Deployment's pods, labelled app=name, to go)."""
    if pod:
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    wait("pods of %s gone" % name, lambda: not api.list_namespaced_pod(
        "default", label_selector="app=%s" % name).items, timeout=180)


def test_every_node_has_a_numatopology_that_agrees_with_its_kubelet(host, api, custom):
    config = configz(host)
    obj = topology(custom, NODE)
    spec = obj["spec"]
    assert spec["policies"] == {"CPUManagerPolicy": config["cpuManagerPolicy"],
                                "TopologyManagerPolicy": config["topologyManagerPolicy"]} == \
        {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"}
    for numa in (0, 1):
        for cpu in node_cpus(host, numa):
            assert spec["cpuDetail"][str(cpu)]["numa"] == numa, spec["cpuDetail"]
    online = cpu_list(host.file("/sys/devices/system/cpu/online").content_string)
    reserved = cpu_list(obj["metadata"]["annotations"]["numa.kube/reserved-cpus"])
    print("numa-kubelet: reserved CPUs %s, free %s" % (sorted(reserved), spec["numares"]["cpu"]["allocatable"]))
    assert reserved == {0}, "the node profile (molecule.yml) reserves CPU 0 for the system"
    assert free_cpus(custom) == online - reserved, "no pod holds an exclusive CPU yet"
    assert spec["numares"]["cpu"]["capacity"] == len(online)
    assert [(o["kind"], o["name"]) for o in obj["metadata"]["ownerReferences"]] == [("Node", NODE)]
    assert topology(custom, UNEVEN)["spec"]["policies"]["TopologyManagerPolicy"] == "best-effort"


def test_numa_aware_is_on_and_the_scheduler_runs_it(api):
    result = run_module("numa.kube.volcano_numa_aware", dict(SWITCH, state="query"))
    assert not result.get("failed"), result.get("msg", result)
    assert (result["changed"], result["status"], result["weight"]) == (False, "open", 10)
    assert list(result["nodes"]) == [UNEVEN], "best-effort cannot serve single-numa-node pods: %s" % result["nodes"]
    assert "numa-aware" in scheduler_loads(api)[-1]


def test_the_guides_deployment_runs_on_one_numa_node_and_the_publisher_follows(host, api, custom):
    apps = kubernetes.client.AppsV1Api()
    template = guide_pod("numa-guide", "1")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "numa-guide"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "numa-guide"}},
                           "template": {"metadata": {"labels": template["metadata"]["labels"],
                                                     "annotations": template["metadata"]["annotations"]},
                                        "spec": template["spec"]}}}
    apps.create_namespaced_deployment("default", deployment)
    try:
        def running():
            pods = [p for p in api.list_namespaced_pod("default", label_selector="app=numa-guide").items
                    if p.status.phase == "Running"]
            return pods[0] if pods else None

        pod = wait("the guide's pod running", running)
        placed = time.time()
        assert pod.spec.node_name == NODE, "Volcano put it on %s, whose policy is best-effort" % pod.spec.node_name
        log = wait("the pod's report", lambda: api.read_namespaced_pod_log(pod.metadata.name, "default"))
        cpus = cpu_list(log.split("cpus=", 1)[1].split()[0])
        print("guide pod on %s: CPUs %s" % (pod.spec.node_name, sorted(cpus)))
        assert len(cpus) == 1 and any(cpus <= node_cpus(host, numa) for numa in (0, 1)), cpus
        wait("the Numatopology without the pod's CPU", lambda: not (free_cpus(custom) & cpus), timeout=60,
             interval=0.5)
        print("Numatopology reflected the pinned CPU %.1f s after the pod ran" % (time.time() - placed))

        # the publisher restarts: it writes again at once (so the scheduler sees an update), the same truth
        started = topology(custom, NODE)["metadata"]["annotations"]["numa.kube/publisher-started"]
        old = [p for p in api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % PUBLISHER).items
               if p.spec.node_name == NODE][0]
        api.delete_namespaced_pod(old.metadata.name, NAMESPACE)
        wait("the new publisher's write", lambda: topology(custom, NODE)["metadata"]["annotations"]
             ["numa.kube/publisher-started"] != started, timeout=180)
        assert not free_cpus(custom) & cpus, "after its restart the publisher still counts the pod's CPU as taken"
    finally:
        apps.delete_namespaced_deployment("numa-guide", "default")
        delete_and_wait(api, "numa-guide", pod=False)
    wait("the CPU free again in the Numatopology", lambda: free_cpus(custom) & cpus, timeout=60)


def test_a_pod_no_numa_node_can_hold_waits_under_volcano_but_fails_on_kubelet_under_the_default_scheduler(host, api):
    free = [len(node_cpus(host, numa)) for numa in (0, 1)]
    assert all(count < 3 for count in free), "no NUMA node has 3 CPUs"
    api.create_namespaced_pod("default", dict(guide_pod("wide-volcano", "3", node=NODE), apiVersion="v1", kind="Pod"))
    try:
        def refused():
            pod = api.read_namespaced_pod("wide-volcano", "default")
            text = " ".join("%s %s" % (c.reason, c.message) for c in pod.status.conditions or [])
            return text if "cannot be assigned by numa" in text else None

        text = wait("Volcano's NUMA reason on the pod", refused, timeout=180)
        print("under Volcano: %s" % text)
        time.sleep(10)  # a few more scheduling cycles: it must stay unbound
        pod = api.read_namespaced_pod("wide-volcano", "default")
        assert pod.spec.node_name is None and pod.status.phase == "Pending", pod.status
    finally:
        delete_and_wait(api, "wide-volcano")

    api.create_namespaced_pod("default", dict(guide_pod("wide-default", "3", scheduler=None, node=NODE),
                                              apiVersion="v1", kind="Pod"))
    try:
        def ended():
            pod = api.read_namespaced_pod("wide-default", "default")
            return pod if pod.status.phase == "Failed" else None

        pod = wait("the default scheduler's pod ends", ended, timeout=180)
        print("under the default scheduler: bound to %s, %s: %s"
              % (pod.spec.node_name, pod.status.reason, pod.status.message))
        assert pod.spec.node_name == NODE and pod.status.reason == "TopologyAffinityError"
    finally:
        delete_and_wait(api, "wide-default")


def test_disable_then_enable_each_runs_in_the_scheduler_and_a_second_enable_changes_nothing(api):
    for state, present in (("disabled", False), ("enabled", True)):
        result = run_module("numa.kube.volcano_numa_aware", dict(SWITCH, state=state))
        assert not result.get("failed"), result.get("msg", result)
        assert result["changed"] and result["status"] == ("open" if present else "close"), result
        print("%s: the scheduler reloaded and kept running (10 s) after %s s" % (state, result["activation"].get("seconds")))
        assert ("numa-aware" in scheduler_loads(api)[-1]) is present
    again = run_module("numa.kube.volcano_numa_aware", dict(SWITCH, state="enabled"))
    assert not again.get("failed") and again["changed"] is False, again


# --- the publisher's least privilege: its own node's object only, kubelet's certificate checked ----------

OWN_NODE_POLICY = "numa-kube.publisher-own-node"
TEST_ANNOTATION = "numa.kube/test-write"


def running_publisher(api, node):
    pods = [p for p in api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % PUBLISHER).items
            if p.spec.node_name == node and p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    return pods[0] if pods else None


def publisher_token(api, pod=None):
    return account_token(api, PUBLISHER, NAMESPACE, pod)


def as_token(token):
    return custom_objects_as(token, KUBECONFIG)


def write_annotation(custom, node, value):
    """Replace Numatopology ``node`` (PUT, as the publisher writes) with TEST_ANNOTATION set to
    ``value`` (removed for None); a conflict with the running publisher's own write is retried."""
    for _attempt in range(5):
        obj = custom.get_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", node)
        annotations = obj["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(TEST_ANNOTATION, None)
        else:
            annotations[TEST_ANNOTATION] = value
        try:
            return custom.replace_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", node, obj)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError("Numatopology %s: five conflicts in a row" % node)


def refusal(custom, node, value="x"):
    with pytest.raises(kubernetes.client.ApiException) as caught:
        write_annotation(custom, node, value)
    return caught.value.status, json.loads(caught.value.body)["message"]


def test_a_publisher_token_may_write_its_own_nodes_numatopology_and_no_other(api, custom):
    pod = wait("the publisher running on %s" % NODE, lambda: running_publisher(api, NODE), timeout=180)
    publisher = as_token(publisher_token(api, pod))
    # the token can read another node's object (get is granted) but the policy refuses the write
    assert publisher.get_cluster_custom_object("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", UNEVEN)
    status, message = refusal(publisher, UNEVEN)
    print("%s's token writing Numatopology %s: %d %s" % (NODE, UNEVEN, status, message))
    assert status == 403 and "ValidatingAdmissionPolicy '%s'" % OWN_NODE_POLICY in message, message
    assert "the token names node %s, the request Numatopology %s" % (NODE, UNEVEN) in message, message
    assert TEST_ANNOTATION not in (topology(custom, UNEVEN)["metadata"].get("annotations") or {})

    try:
        written = write_annotation(publisher, NODE, "x")
        assert written["metadata"]["annotations"][TEST_ANNOTATION] == "x"
    finally:
        write_annotation(custom, NODE, None)
    assert TEST_ANNOTATION not in (topology(custom, NODE)["metadata"].get("annotations") or {})

    # a token of the same account bound to no pod names no node: refused even for that node
    status, message = refusal(as_token(publisher_token(api)), NODE)
    assert status == 403 and "the token names no node" in message, message


def test_the_publisher_checks_kubelets_certificate_against_the_nodes_own(host, api, custom):
    daemonset = kubernetes.client.AppsV1Api().read_namespaced_daemon_set(PUBLISHER, NAMESPACE)
    pod_spec = daemonset.spec.template.spec
    container = pod_spec.containers[0]
    assert "--kubelet-tls=node-cert" in container.args
    volumes = dict((v.name, v) for v in pod_spec.volumes)
    mount = [m for m in container.volume_mounts if m.name == "kubelet-cert"][0]
    assert (volumes["kubelet-cert"].host_path.path, volumes["kubelet-cert"].host_path.type) == \
        ("/var/lib/kubelet/pki/kubelet.crt", "File"), "the certificate alone, not the folder with kubelet's keys"
    assert mount.read_only and mount.mount_path == "/var/lib/kubelet/pki/kubelet.crt"
    assert host.file("/var/lib/kubelet/pki/kubelet.crt").exists, "kubelet serves its self-signed certificate"

    pod = wait("the publisher running on %s" % NODE, lambda: running_publisher(api, NODE), timeout=180)
    started = pod.status.container_statuses[0].state.running.started_at

    def written_by_this_pod():
        stamp = (topology(custom, NODE)["metadata"].get("annotations") or {}).get("numa.kube/publisher-started")
        return stamp if stamp and stamp >= started.strftime("%Y-%m-%dT%H:%M:%SZ") else None

    # the publisher writes only after reading kubelet's /configz, so its object proves the check passed
    wait("Numatopology %s written by the running publisher" % NODE, written_by_this_pod, timeout=120)
    log = api.read_namespaced_pod_log(pod.metadata.name, NAMESPACE)
    assert "its certificate checked against /var/lib/kubelet/pki/kubelet.crt for the name %s" % NODE in log, log
    assert "CERTIFICATE_VERIFY_FAILED" not in log, log


# --- a switch that fails after its write is put back ---------------------------------------------------

CONFIGMAP, CONF_KEY = "volcano-scheduler-configmap", "volcano-scheduler.conf"


def running_scheduler(api):
    pods = [p for p in api.list_namespaced_pod(NAMESPACE, label_selector="app=volcano-scheduler").items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def mounted_conf(guest, pod):
    """The scheduler configuration as kubelet last wrote it into the pod's ConfigMap volume (the
    guest's shell loses a trailing newline)."""
    volume = [v.name for v in pod.spec.volumes if v.config_map and v.config_map.name == CONFIGMAP][0]
    return guest.file("/var/lib/kubelet/pods/%s/volumes/kubernetes.io~configmap/%s/%s"
                      % (pod.metadata.uid, volume, CONF_KEY)).content_string


def test_a_volcano_switch_made_to_fail_after_its_write_is_put_back(api):
    """A disable with wait_timeout 3: the switch writes the new configuration and marks the scheduler
    pod, and can never succeed, since a pod counts as running a configuration only once it has kept
    running 10 s after logging its load. The failure so comes after the write whatever the guest's
    speed (under TCG kubelet may refresh the volume within the 3 s or well after; both end the same).
    A scheduler_selector that matches no running pod would not fail: the switch then succeeds, the
    scheduler reading the new configuration when it starts.

    The task must fail saying the previous configuration was put back; the ConfigMap must hold it
    byte for byte; and the scheduler must end up running numa-aware: its volume holds the previous
    configuration again (kubelet refreshes it for the pod marked again after the put-back; with a
    stale cache, at its next periodic sync) and its last logged load has numa-aware, with no restart."""
    before = api.read_namespaced_config_map(CONFIGMAP, NAMESPACE).data[CONF_KEY]
    assert "numa-aware" in before, "converge and the tests before leave numa-aware enabled"
    pod = running_scheduler(api)
    restarts = sum(s.restart_count for s in pod.status.container_statuses)

    result = run_module("numa.kube.volcano_numa_aware", dict(SWITCH, state="disabled", wait_timeout=3))
    print("failed switch: %s; rollback %s" % (result.get("msg"), result.get("rollback")))
    assert result.get("failed"), result
    assert "the scheduler did not take in the new configuration within 3s" in result["msg"], result["msg"]
    assert "the previous configuration was put back in ConfigMap %s/%s key %s" % (NAMESPACE, CONFIGMAP, CONF_KEY) \
        in result["msg"], result["msg"]
    assert result["rollback"]["restored"] is True, result
    assert api.read_namespaced_config_map(CONFIGMAP, NAMESPACE).data[CONF_KEY] == before

    guest = testinfra.get_host("ansible://" + pod.spec.node_name,
                               ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    started = time.time()
    wait("the scheduler's volume holding the previous configuration and its last load with numa-aware",
         lambda: mounted_conf(guest, pod).rstrip("\n") == before.rstrip("\n")
         and "numa-aware" in scheduler_loads(api)[-1], timeout=240, interval=3)
    print("the scheduler runs the previous configuration again %.1f s after the task failed" % (time.time() - started))
    after = running_scheduler(api)
    assert after.metadata.uid == pod.metadata.uid, "the same scheduler pod"
    assert sum(s.restart_count for s in after.status.container_statuses) == restarts, "no crash"
    query = run_module("numa.kube.volcano_numa_aware", dict(SWITCH, state="query"))
    assert (query["status"], query["weight"]) == ("open", 10), query
