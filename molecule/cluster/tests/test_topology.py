# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NodeResourceTopology path, deployed by site.yml's cluster phase (numa_kube_schedulers:
topology; numa.kube.topology_scheduler): the NRT publisher on every node and scheduler-plugins'
NodeResourceTopologyMatch in the test bed's kube-scheduler v1.34 build, proven with the real API
server (v1.36), kubelets and Volcano.

numa-kubelet: two NUMA nodes of 2 CPUs (kubelet keeps one whole CPU for itself), static CPU
manager, Static memory manager, single-numa-node at pod scope, and 16 2 MiB huge pages on NUMA
node 1 only (prepare-node.yml). Every pod these tests make is Guaranteed, pinned to numa-kubelet
by nodeSelector, and deleted before its test ends.

kubelet's PodResources answers inside the node's own NRT publisher container (the agent's client,
through ctr on the guest): the guests have no gRPC of their own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import re
import sys
import time
import uuid

import kubernetes
import pytest
import testinfra
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import (SLOWER, account_token, configz, cpu_list, custom_objects_as, deadline_in,  # noqa: E402 pylint: disable=wrong-import-position
                     node_cpus, wait)

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KUBECONFIG = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane", "admin.kubeconfig")
NODE, UNEVEN = "numa-kubelet", "numa-uneven"
NAMESPACE = "numa-kube-topology"            # the module's default namespace
SCHEDULER = "numa-topology-scheduler"       # its Deployment and ConfigMap (fixed names)
PUBLISHER = "numa-nrt-publisher"            # its DaemonSet, label app=, and service account
OWN_NODE_POLICY = "numa-kube.nrt-publisher-own-node"
NRT = ("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")
HUGEPAGES = "hugepages-2Mi"
MI = 2 ** 20
TEST_LABEL = {"numa.kube/test": "topology"}
VOLCANO_POLICY = "volcano.sh/numa-topology-policy"
REPORT = "echo cpus=$(cat /sys/fs/cgroup/cpuset.cpus.effective) mems=$(cat /sys/fs/cgroup/cpuset.mems.effective); sleep 3600"
# kubelet's PodResources as plain data, asked inside the publisher's container with the agent's client
PODRESOURCES = ("import json\n"
                "from numa_agent.pod_resources import PodResources\n"
                "client = PodResources('/var/lib/kubelet/pod-resources/kubelet.sock', timeout=20)\n"
                "print(json.dumps({'allocatable': client.allocatable(), 'assigned': client.assigned()}))\n")


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(KUBECONFIG)
    return kubernetes.client.CoreV1Api()


@pytest.fixture(scope="module")
def custom(api):
    return kubernetes.client.CustomObjectsApi()


@pytest.fixture(scope="module")
def guests(host):
    return {NODE: host, UNEVEN: testinfra.get_host("ansible://" + UNEVEN,
                                                   ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])}


@pytest.fixture(scope="module")
def scheduler(api):
    """The scheduler's name, as its configuration says (its over-reserving cache on), once it is ready
    (numa-uneven, where it runs, was held stopped by test_resource_plugin.py)."""
    config = yaml.safe_load(api.read_namespaced_config_map(SCHEDULER, NAMESPACE).data["config.yaml"])
    profile = config["profiles"][0]
    args = [entry["args"] for entry in profile["pluginConfig"] if entry["name"] == "NodeResourceTopologyMatch"][0]

    def ready():
        pods = api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % SCHEDULER).items
        return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp
                and all(c.ready for c in p.status.container_statuses or [])]

    wait("the NRT scheduler ready", ready, timeout=300, interval=3)
    for node in (NODE, UNEVEN):
        wait("the NRT publisher running on %s" % node, lambda node=node: publisher_pod(api, node), timeout=300, interval=3)
    # cache_trusts() waits for the cache's resync to flush a node: the over-reserving cache must be on
    assert int(args.get("cacheResyncPeriodSeconds") or 0) >= 5, args
    return {"name": profile["schedulerName"]}


# --- reading both sides ---------------------------------------------------------------------------------

def publisher_pod(api, node):
    pods = [p for p in api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % PUBLISHER).items
            if p.spec.node_name == node and p.status.phase == "Running" and not p.metadata.deletion_timestamp
            and (p.status.container_statuses or [None])[0] and p.status.container_statuses[0].ready]
    return pods[0] if pods else None


def pod_resources(api, guest, node):
    """kubelet's GetAllocatableResources and List, asked in the node's publisher container."""
    pod = wait("the NRT publisher running on %s" % node, lambda: publisher_pod(api, node), timeout=180)
    container = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    out = guest.check_output("ctr -n k8s.io tasks exec --exec-id %s %s python3 -c %s",
                             "nrt-test-" + uuid.uuid4().hex[:12], container, PODRESOURCES)
    return json.loads(out)


def nrt(custom, node):
    return custom.get_cluster_custom_object(NRT[0], NRT[1], NRT[2], node)


def number(quantity):
    return int(kubernetes.utils.parse_quantity(quantity))


def nrt_zones(obj):
    """{NUMA id: {resource: (allocatable, available)}} of cpu, memory and huge pages."""
    zones = {}
    for zone in obj.get("zones") or []:
        match = re.match(r"^node-(\d+)$", zone["name"])
        assert match and zone["type"] == "Node", zone
        zones[int(match.group(1))] = dict(
            (r["name"], (number(r["allocatable"]), number(r["available"]))) for r in zone.get("resources") or []
            if r["name"] in ("cpu", "memory") or r["name"].startswith("hugepages-"))
    return zones


def kubelet_zones(guest, resources):
    """The same figures from kubelet's PodResources, per NUMA node sysfs lists; memory kinds whose
    assigned blocks span NUMA nodes (best-effort) are left out of ``available``, named in the second value."""
    allocatable, assigned = resources["allocatable"], resources["assigned"]
    containers = [c for pod in assigned for c in pod["containers"]]
    exclusive = set(cpu for c in containers for cpu in c["cpu_ids"])
    spanning = set(block["memory_type"] for c in containers for block in c["memory"] if len(block["nodes"]) > 1)
    kinds = set(block["memory_type"] for block in allocatable["memory"])
    zones = {}
    for numa in sorted(cpu_list(guest.file("/sys/devices/system/node/online").content_string)):
        usable = set(allocatable["cpu_ids"]) & node_cpus(guest, numa)
        zone = {"cpu": (len(usable), len(usable - exclusive))}
        for kind in kinds:
            total = sum(b["size"] for b in allocatable["memory"] if b["memory_type"] == kind and b["nodes"] == [numa])
            used = sum(b["size"] for c in containers for b in c["memory"]
                       if b["memory_type"] == kind and b["nodes"] == [numa])
            zone[kind] = (total, None if kind in spanning else total - used)
        zones[numa] = zone
    return zones, sorted(spanning)


def disagreements(obj, expected, config):
    problems = []
    got = nrt_zones(obj)
    if sorted(got) != sorted(expected):
        return ["zones %s, NUMA nodes %s" % (sorted(got), sorted(expected))]
    for numa, want in sorted(expected.items()):
        for kind in sorted(set(want) | set(got[numa])):
            mine, theirs = want.get(kind, (0, 0)), got[numa].get(kind, (0, 0))
            if mine[1] is None:
                mine, theirs = mine[:1], theirs[:1]
            if tuple(mine) != tuple(theirs):
                problems.append("node-%d %s: NRT allocatable/available %s, kubelet %s" % (numa, kind, theirs, mine))
    attributes = dict((a["name"], a["value"]) for a in obj.get("attributes") or [])
    for name in ("topologyManagerPolicy", "topologyManagerScope"):
        if attributes.get(name) != config.get(name):
            problems.append("%s: NRT %r, kubelet's /configz %r" % (name, attributes.get(name), config.get(name)))
    return problems


def scheduler_log(api, lines=40):
    """The NRT scheduler's last log lines about numa-kubelet (it runs with --v=2: bindings, the
    cache's "flushing" of a node), for a failure's message."""
    pods = api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % SCHEDULER).items
    if not pods:
        return "no scheduler pod"
    log = api.read_namespaced_pod_log(pods[0].metadata.name, NAMESPACE, tail_lines=2000)
    return "\n".join([line for line in log.splitlines() if NODE in line][-lines:])


def cache_trusts(api, node=NODE, timeout=120):
    """Wait until the NRT scheduler's cache trusts ``node`` again: pods another scheduler placed or
    removed there make the cache mark the node ("marked with foreign pods", its log at --v=2) and
    refuse it ("invalid node topology data") until a resync finds the NRT's pods fingerprint equal to
    the pods it sees, and flushes it ("flushing"). Trusted: no mark, or a flush after the last one."""
    def probe():
        pods = api.list_namespaced_pod(NAMESPACE, label_selector="app=%s" % SCHEDULER).items
        log = api.read_namespaced_pod_log(pods[0].metadata.name, NAMESPACE, tail_lines=5000) if pods else ""
        lines = [line for line in log.splitlines() if 'node="%s"' % node in line]
        marks = [i for i, line in enumerate(lines) if "marked with foreign pods" in line]
        flushes = [i for i, line in enumerate(lines) if '"flushing"' in line]
        return (marks[-1] if marks else None, flushes[-1] if flushes else None)

    return until("the NRT scheduler's cache trusting %s again (a flush after its last foreign-pods mark)" % node,
                 probe, lambda seen: seen[0] is None or (seen[1] is not None and seen[1] > seen[0]), timeout)


def until(what, probe, done, timeout):
    """The first value of ``probe()`` that ``done`` accepts within ``timeout`` s; the test fails
    naming ``what`` and the last value otherwise."""
    deadline = deadline_in(timeout)
    while True:
        value = probe()
        if done(value):
            return value
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s; last seen: %s" % (what, timeout * SLOWER, value))
        time.sleep(2)


def agreed(api, custom, guest, node):
    """The node's NRT once it says what its kubelet says (the publisher writes every 2 s)."""
    config = configz(guest)

    def probe():
        obj = nrt(custom, node)
        expected, spanning = kubelet_zones(guest, pod_resources(api, guest, node))
        return obj, spanning, disagreements(obj, expected, config)

    obj, spanning, _problems = until("NRT %s agrees with its kubelet" % node, probe, lambda seen: not seen[2], 90)
    if spanning:
        print("%s: memory kinds %s assigned over several NUMA nodes: their available not compared" % (node, spanning))
    return obj


def zone_text(zones):
    return ", ".join("node-%d cpu %d/%d memory %dMi/%dMi%s" % (
        numa, z["cpu"][1], z["cpu"][0], z["memory"][1] // MI, z["memory"][0] // MI,
        " %s %dMi/%dMi" % (HUGEPAGES, z[HUGEPAGES][1] // MI, z[HUGEPAGES][0] // MI) if z.get(HUGEPAGES, (0,))[0] else "")
        for numa, z in sorted(zones.items()))


# --- pods -------------------------------------------------------------------------------------------------

def guaranteed(name, cpu, memory_mi, hugepages_mi=0, scheduler=None, annotations=None):
    resources = {"cpu": str(cpu), "memory": "%dMi" % memory_mi}
    if hugepages_mi:
        resources[HUGEPAGES] = "%dMi" % hugepages_mi
    spec = {"automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [{"name": "app", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                            "command": ["sh", "-c", REPORT],
                            "resources": {"requests": resources, "limits": dict(resources)}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": dict(TEST_LABEL),
                         "annotations": annotations or {}}, "spec": spec}


def state(api, name):
    """('running', cpus, mems) once the pod reported; ('failed', reason, message); ('pending',
    reason, message) while unbound and refused by its scheduler; None in between."""
    pod = api.read_namespaced_pod(name, "default")
    if pod.status.phase == "Failed":
        return ("failed", pod.status.reason, pod.status.message)
    if pod.status.phase == "Running":
        log = api.read_namespaced_pod_log(name, "default")
        match = re.search(r"cpus=(\S+) mems=(\S+)", log)
        return ("running", cpu_list(match.group(1)), cpu_list(match.group(2))) if match else None
    if not pod.spec.node_name:
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                return ("pending", condition.reason, condition.message)
    return None


def numa_of(guest, seen):
    """The NUMA node a running pod's CPUs and memory are on; the test fails when they are not on one."""
    _kind, cpus, mems = seen
    assert len(mems) == 1, "memory on NUMA nodes %s" % sorted(mems)
    numa = list(mems)[0]
    assert cpus <= node_cpus(guest, numa), "CPUs %s, memory on NUMA node %d" % (sorted(cpus), numa)
    return numa


def delete_test_pods(api):
    # their own grace (1 s): gone from the API once kubelet has stopped them
    api.delete_collection_namespaced_pod("default", label_selector="numa.kube/test=topology")
    wait("the test's pods gone", lambda: not api.list_namespaced_pod(
        "default", label_selector="numa.kube/test=topology").items, timeout=180, interval=2)


def node_free(api):
    """CPU (cores) and memory (bytes) numa-kubelet's allocatable leaves to new pods."""
    allocatable = api.read_node(NODE).status.allocatable
    cpu, memory = float(kubernetes.utils.parse_quantity(allocatable["cpu"])), number(allocatable["memory"])
    for pod in api.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % NODE).items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            requests = (container.resources and container.resources.requests) or {}
            cpu -= float(kubernetes.utils.parse_quantity(requests.get("cpu", "0")))
            memory -= number(requests.get("memory", "0"))
    return cpu, memory


# --- a: each node's NRT is its kubelet's --------------------------------------------------------------------

@pytest.mark.usefixtures("scheduler")
def test_every_nodes_nrt_agrees_with_its_kubelet(api, custom, guests):
    for node, guest in sorted(guests.items()):
        obj = agreed(api, custom, guest, node)
        labels = obj["metadata"].get("labels") or {}
        assert labels.get("app.kubernetes.io/managed-by") == "numa.kube", labels
        assert [(o["kind"], o["name"]) for o in obj["metadata"].get("ownerReferences") or []] == [("Node", node)]
        attributes = dict((a["name"], a["value"]) for a in obj["attributes"])
        print("%s: %s; %s/%s" % (node, zone_text(nrt_zones(obj)), attributes["topologyManagerPolicy"],
                                 attributes["topologyManagerScope"]))
    # what converge asked of the two kubelets, as the scheduler reads it
    policies = dict((node, dict((a["name"], a["value"]) for a in nrt(custom, node)["attributes"])) for node in guests)
    assert policies[NODE]["topologyManagerPolicy"] == "single-numa-node"
    assert policies[UNEVEN]["topologyManagerPolicy"] == "best-effort"
    assert sorted(nrt_zones(nrt(custom, UNEVEN))) == [0, 1, 2, 3], "a zone for the memory-only NUMA node too"
    zones = nrt_zones(nrt(custom, NODE))
    assert [numa for numa, zone in sorted(zones.items()) if zone.get(HUGEPAGES, (0,))[0]] == [1], \
        "the huge pages prepare-node.yml set aside on NUMA node 1 only: %s" % zone_text(zones)


@pytest.mark.usefixtures("scheduler")
def test_available_drops_and_comes_back_on_the_numa_node_of_a_pod(api, custom, host):
    before = nrt_zones(agreed(api, custom, host, NODE))
    api.create_namespaced_pod("default", guaranteed("nrt-follow", 1, 64))
    try:
        seen = until("pod nrt-follow running", lambda: state(api, "nrt-follow"),
                     lambda s: s is not None and s[0] != "pending", 300)
        assert seen[0] == "running", seen
        numa = numa_of(host, seen)
        want = dict((n, dict(z)) for n, z in before.items())
        want[numa]["cpu"] = (before[numa]["cpu"][0], before[numa]["cpu"][1] - 1)
        want[numa]["memory"] = (before[numa]["memory"][0], before[numa]["memory"][1] - 64 * MI)
        until("NRT %s with the pod's CPU and memory taken on NUMA node %d" % (NODE, numa),
              lambda: nrt_zones(nrt(custom, NODE)), lambda zones: zones == want, 60)
        print("pod on NUMA node %d: %s" % (numa, zone_text(want)))
        agreed(api, custom, host, NODE)
    finally:
        delete_test_pods(api)
    until("NRT %s as before the pod" % NODE, lambda: nrt_zones(nrt(custom, NODE)), lambda zones: zones == before, 60)
    agreed(api, custom, host, NODE)


def test_a_publisher_token_may_write_its_own_nodes_nrt_and_no_other(api, custom):
    """The ValidatingAdmissionPolicy, as the real API server runs its CEL: numa-kubelet's publisher
    token may replace numa-kubelet's NodeResourceTopology, not numa-uneven's; a token bound to no pod
    names no node and is refused both."""
    pod = wait("the NRT publisher running on %s" % NODE, lambda: publisher_pod(api, NODE), timeout=180)
    publisher = custom_objects_as(account_token(api, PUBLISHER, NAMESPACE, pod), KUBECONFIG)

    def put(client, node):
        obj = publisher.get_cluster_custom_object(NRT[0], NRT[1], NRT[2], node)  # get is granted for any node
        with pytest.raises(kubernetes.client.ApiException) as caught:
            client.replace_cluster_custom_object(NRT[0], NRT[1], NRT[2], node, obj, dry_run="All")
        return caught.value.status, json.loads(caught.value.body)["message"]

    status, message = put(publisher, UNEVEN)
    print("%s's token writing NRT %s: %d %s" % (NODE, UNEVEN, status, message))
    assert status == 403 and "ValidatingAdmissionPolicy '%s'" % OWN_NODE_POLICY in message, message
    assert "the token names node %s" % NODE in message, message
    own = publisher.get_cluster_custom_object(NRT[0], NRT[1], NRT[2], NODE)
    publisher.replace_cluster_custom_object(NRT[0], NRT[1], NRT[2], NODE, own, dry_run="All")  # its own: allowed
    status, message = put(custom_objects_as(account_token(api, PUBLISHER, NAMESPACE), KUBECONFIG), NODE)
    assert status == 403 and "the token names no node" in message, message


# --- b: a burst that fits the node but not every NUMA node ---------------------------------------------------

def burst(api, zones):
    """Three Guaranteed pods of one CPU each, sized from the node's NRT: the node holds all three,
    its NUMA nodes two. nrt-memory (most of the lower NUMA node's free memory) and nrt-hugepages
    (half the huge pages, all on the higher NUMA node) fit together whatever their order: kubelet
    gives nrt-memory the lowest NUMA node it fits, and the scheduler's over-reserving cache, which
    takes each pod's request from every zone until it resyncs, still finds room for the second.
    nrt-wide asks for more memory than any NUMA node has free. (Asking for huge pages too makes
    kubelet's memory manager refuse it with UnexpectedAdmissionError, "failed to find NUMA nodes to
    extend the current topology hint", not TopologyAffinityError: seen in the test bed.)"""
    with_pages = [numa for numa, z in zones.items() if z.get(HUGEPAGES, (0, 0))[1] > 0]
    assert len(zones) == 2 and len(with_pages) == 1, zone_text(zones)
    high = with_pages[0]
    low = [numa for numa in zones if numa != high][0]
    assert low < high, "kubelet gives a pod that fits both NUMA nodes the lower one: the huge pages must be on the higher"
    # the cache takes the first pod's CPU from both zones: the second still needs one on the higher
    assert zones[low]["cpu"][1] >= 1 and zones[high]["cpu"][1] >= 2, zone_text(zones)
    pages_mi = zones[high][HUGEPAGES][1] // MI // 2 // 2 * 2
    free_cpu, free_memory = node_free(api)
    wide_mi = int(math.ceil(max(z["memory"][1] for z in zones.values()) / float(MI))) + 64
    memory_mi = min(zones[low]["memory"][1] // MI - 64, zones[high]["memory"][1] // MI - 128,
                    free_memory // MI - 64 - wide_mi - 64)
    assert pages_mi >= 2 and memory_mi >= 128, "the node leaves no room for the burst: %s, free memory %dMi" % (
        zone_text(zones), free_memory // MI)
    assert free_cpu >= 3, "the node leaves %.2f CPUs, the burst asks for 3" % free_cpu
    return [("nrt-memory", 1, memory_mi, 0), ("nrt-hugepages", 1, 64, pages_mi), ("nrt-wide", 1, wide_mi, 0)]


def run_burst(api, custom, host, sizes, before, scheduler=None):
    """Create the burst under ``scheduler`` (None: the default one), wait for each pod's verdict, check
    that every running pod has its CPUs and memory on one NUMA node and that the NRT shows them
    there; returns {name: verdict}. The pods are deleted before it returns."""
    names = [name for name, _cpu, _memory, _pages in sizes]
    for name, cpu, memory, pages in sizes:
        api.create_namespaced_pod("default", guaranteed(name, cpu, memory, pages, scheduler=scheduler))
    try:
        def decided(states):
            if scheduler:   # fitting pods run, the wide one waits refused by the plugin; a failure ends the wait
                return any(s and s[0] == "failed" for s in states.values()) or (
                    all(states[n] and states[n][0] == "running" for n in names[:2])
                    and states["nrt-wide"] and states["nrt-wide"][0] == "pending"
                    and "cannot align pod" in (states["nrt-wide"][2] or ""))
            return all(s and s[0] in ("running", "failed") for s in states.values())

        try:
            states = until("the burst's verdicts under %s" % (scheduler or "the default scheduler"),
                           lambda: dict((n, state(api, n)) for n in names), decided, 300)
        except AssertionError:
            if scheduler:
                print("the NRT scheduler's log about %s:\n%s" % (NODE, scheduler_log(api)))
            raise
        placed = dict((name, numa_of(host, s)) for name, s in states.items() if s[0] == "running")
        want = dict((n, dict(z)) for n, z in before.items())
        for name, cpu, memory, pages in sizes:
            if name in placed:
                zone = want[placed[name]]
                zone["cpu"] = (zone["cpu"][0], zone["cpu"][1] - cpu)
                zone["memory"] = (zone["memory"][0], zone["memory"][1] - memory * MI)
                if pages:
                    zone[HUGEPAGES] = (zone[HUGEPAGES][0], zone[HUGEPAGES][1] - pages * MI)
        until("NRT %s showing the running pods on their NUMA nodes" % NODE, lambda: nrt_zones(nrt(custom, NODE)),
              lambda zones: zones == want, 60)
        print("under %s:" % (scheduler or "the default scheduler"))
        for name, cpu, memory, pages in sizes:
            where = "NUMA node %d" % placed[name] if name in placed else "%s %s" % states[name][1:]
            extra = ", %s %dMi" % (HUGEPAGES, pages) if pages else ""
            print("  %s (%d CPU, %dMi%s): %s" % (name, cpu, memory, extra, where))
        print("  per-NUMA fill (free/allocatable): %s" % zone_text(want))
        return states
    finally:
        delete_test_pods(api)
        until("NRT %s as before the burst" % NODE, lambda: nrt_zones(nrt(custom, NODE)),
              lambda zones: zones == before, 60)


def test_a_burst_the_default_scheduler_sends_to_topology_affinity_errors_runs_aligned_under_the_nrt_scheduler(
        api, custom, host, scheduler):
    before = nrt_zones(agreed(api, custom, host, NODE))
    sizes = burst(api, before)
    print("burst on %s (%s): %s" % (NODE, zone_text(before), sizes))

    default = run_burst(api, custom, host, sizes, before)
    # kubelet refuses nrt-wide either way: as TopologyAffinityError when its memory manager can offer a
    # hint over both NUMA nodes (which single-numa-node refuses), as UnexpectedAdmissionError ("failed
    # to find NUMA nodes to extend the current topology hint") when the other two pods, admitted
    # first, already hold each NUMA node alone: which one depends on the order kubelet admits them in
    refused = sorted(n for n, s in default.items() if s[0] == "failed" and (
        s[1] == "TopologyAffinityError" or (s[1] == "UnexpectedAdmissionError" and "memorymanager" in (s[2] or ""))))
    assert refused == ["nrt-wide"], default
    assert all(default[n][0] == "running" for n in ("nrt-memory", "nrt-hugepages")), default

    # The default scheduler's pods (exclusive CPUs) were foreign to the NRT scheduler's cache, which
    # distrusts the node ("invalid node topology data") until a resync finds the NRT's pods
    # fingerprint equal to the pods it sees there. They are gone and the NRT agrees with kubelet: the
    # next resync (every cacheResyncPeriodSeconds) must flush the node, and the scheduler says so.
    agreed(api, custom, host, NODE)
    print("cache marks/flushes of %s (log line numbers): %s" % (NODE, cache_trusts(api)))
    topology = run_burst(api, custom, host, sizes, before, scheduler["name"])
    assert not [n for n, s in topology.items() if s[0] == "failed"], topology
    assert [n for n, s in topology.items() if s[0] == "pending"] == ["nrt-wide"], topology
    print("pods kubelet refused (%s): %d under the default scheduler, 0 under %s (%d Running, %d Pending)"
          % (", ".join(default[n][1] for n in refused), len(refused), scheduler["name"], sum(s[0] == "running" for s in topology.values()),
             sum(s[0] == "pending" for s in topology.values())))


# --- c: memory Volcano's numa-aware does not see ----------------------------------------------------------

def test_a_memory_bound_pod_volcano_sends_to_kubelet_waits_under_the_nrt_scheduler(api, custom, host, scheduler):
    zones = nrt_zones(agreed(api, custom, host, NODE))
    cache_trusts(api)
    memory_mi = max(z["memory"][1] for z in zones.values()) // MI + 64
    free_cpu, free_memory = node_free(api)
    assert memory_mi * MI <= free_memory and free_cpu >= 1, \
        "the node as a whole holds %dMi and a CPU (free: %dMi, %.2f CPUs)" % (memory_mi, free_memory // MI, free_cpu)
    print("memory-bound pod: 1 CPU, %dMi; %s" % (memory_mi, zone_text(zones)))

    api.create_namespaced_pod("default", guaranteed("nrt-memory-bound", 1, memory_mi, scheduler=scheduler["name"]))
    try:
        try:
            seen = until("the NRT scheduler's verdict", lambda: state(api, "nrt-memory-bound"),
                         lambda s: s is not None and (s[0] != "pending" or "cannot align pod" in (s[2] or "")), 120)
        except AssertionError:
            print("the NRT scheduler's log about %s:\n%s" % (NODE, scheduler_log(api)))
            raise
        assert seen[0] == "pending", seen
        events = api.list_namespaced_event("default", field_selector="involvedObject.name=nrt-memory-bound").items
        failed = [e.message for e in events if e.reason == "FailedScheduling" and "cannot align pod" in (e.message or "")]
        assert failed, [(e.reason, e.message) for e in events]
        print("under %s: Pending, %s" % (scheduler["name"], failed[-1]))
    finally:
        delete_test_pods(api)

    api.create_namespaced_pod("default", guaranteed("nrt-memory-volcano", 1, memory_mi, scheduler="volcano",
                                                    annotations={VOLCANO_POLICY: "single-numa-node"}))
    try:
        seen = until("Volcano's pod ends", lambda: state(api, "nrt-memory-volcano"),
                     lambda s: s is not None and s[0] != "pending", 180)
        pod = api.read_namespaced_pod("nrt-memory-volcano", "default")
        print("under Volcano: bound to %s, %s" % (pod.spec.node_name, seen))
        assert pod.spec.node_name == NODE and seen[:2] == ("failed", "TopologyAffinityError"), seen
    finally:
        delete_test_pods(api)
