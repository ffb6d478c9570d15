# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NodeResourceTopology publisher's rounds: what it writes, when, and what it leaves alone.

The API server, kubelet and its PodResources API are the in-memory doubles of test_publisher.py;
the rounds themselves are the Numatopology publisher's shared code, so these tests check what the
NRT publisher adds: its object, its ownership rule and its sources.
"""

from __future__ import absolute_import, division, print_function

import copy
import logging
import os
import sys

import pytest

from ansible_collections.numa.kube.plugins.module_utils.numa import podfingerprint
from ansible_collections.numa.kube.tests.unit.agent.test_publisher import Api, Clock, Down, Kubelet
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent import __main__ as agent_main  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent import nrt_publisher  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.kube import ApiError  # noqa: E402 pylint: disable=wrong-import-position

NODE = "w1"
PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/" + NODE
GI = 1024 ** 3
STATIC = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static", "topologyManagerPolicy": "single-numa-node",
          "topologyManagerScope": "pod"}


class PodResources(object):
    """GetAllocatableResources and List: even CPUs on node 0, odd on 1 (two_socket_interleaved), CPU 0 reserved."""

    def __init__(self):
        self.up = True
        self.memory = [{"memory_type": "memory", "size": 6 * GI, "nodes": [0]},
                       {"memory_type": "memory", "size": 7 * GI, "nodes": [1]}]
        self.pods = [{"namespace": "kube-system", "name": "kube-proxy-1", "containers": [
            {"name": "proxy", "cpu_ids": [], "memory": [], "devices": []}]}]

    def allocatable(self):
        if not self.up:
            raise Down("kubelet restarting")
        return {"cpu_ids": list(range(1, 8)), "memory": copy.deepcopy(self.memory), "devices": []}

    def assigned(self):
        if not self.up:
            raise Down("kubelet restarting")
        return copy.deepcopy(self.pods)

    def add(self, namespace, name, cpus, memory_bytes, node):
        self.pods.append({"namespace": namespace, "name": name, "containers": [
            {"name": "c", "cpu_ids": cpus, "devices": [],
             "memory": [{"memory_type": "memory", "size": memory_bytes, "nodes": [node]}]}]})


def publisher(tmp_path, api, kubelet, pods, resync=60.0, **kwargs):
    sys_root, dummy = two_socket_interleaved(hyperthreading=False).write(str(tmp_path))
    return nrt_publisher.NrtPublisher(NODE, sys_root, pods, api=api, kubelet=kubelet, resync=resync,
                                      pod_resources_errors=(Down,), **kwargs)


def resource(obj, zone, name):
    found = [r for z in obj["zones"] if z["name"] == zone for r in z["resources"] if r["name"] == name]
    assert len(found) == 1, (zone, name)
    return found[0]


def attribute(obj, name):
    return dict((a["name"], a["value"]) for a in obj["attributes"])[name]


def test_first_round_creates_the_nrt_owned_by_the_node_with_numa_kubes_labels(tmp_path):
    api, pods = Api(), PodResources()
    pods.add("team", "db", [2, 4], GI, 0)
    assert publisher(tmp_path, api, Kubelet(STATIC), pods).step()
    assert api.writes == ["POST"]
    obj = api.objects[PATH]
    assert (obj["apiVersion"], obj["kind"]) == ("topology.node.k8s.io/v1alpha2", "NodeResourceTopology")
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"}
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "uid-1"}]
    assert "numa.kube/publisher-started" in obj["metadata"]["annotations"]
    assert [z["name"] for z in obj["zones"]] == ["node-0", "node-1"]
    assert obj["zones"][0]["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert resource(obj, "node-0", "cpu") == {"name": "cpu", "capacity": "4", "allocatable": "3", "available": "1"}
    assert resource(obj, "node-0", "memory") == {"name": "memory", "capacity": "8Gi", "allocatable": "6Gi",
                                                 "available": "5Gi"}
    assert resource(obj, "node-0", "hugepages-2Mi")["capacity"] == "1Gi", "512 pages of 2 MiB in sysfs"
    assert attribute(obj, "topologyManagerPolicy") == "single-numa-node"
    # the Static Memory Manager: the pods holding exclusive resources, as the scheduler's cache counts them
    assert attribute(obj, "nodeTopologyPodsFingerprint") == podfingerprint.fingerprint([("team", "db")])
    assert attribute(obj, "nodeTopologyPodsFingerprintMethod") == "with-exclusive-resources"
    assert api.managers == ["numa-kube-nrt-publisher"], "its writes name its own field manager"
    assert [entry["manager"] for entry in obj["metadata"]["managedFields"]] == ["numa-kube-nrt-publisher"]


def test_written_only_when_the_content_changes(tmp_path):
    api, pods, clock = Api(), PodResources(), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    del api.requests[:]
    for dummy in range(5):
        clock.now += 2
        assert not pub.step()
    assert api.requests == [], "an unchanged node asks the API server nothing between resyncs"
    pods.add("team", "web", [3], GI, 1)
    clock.now += 2
    assert pub.step()
    assert api.requests == [("PUT", PATH)], "one write, no read before it"
    obj = api.objects[PATH]
    assert resource(obj, "node-1", "cpu")["available"] == "3"
    assert resource(obj, "node-1", "memory")["available"] == "6Gi"
    before = attribute(obj, "nodeTopologyPodsFingerprint")
    del api.requests[:]
    pods.pods.append({"namespace": "default", "name": "best-effort", "containers": [
        {"name": "c", "cpu_ids": [], "memory": [], "devices": []}]})
    clock.now += 2
    assert not pub.step() and api.requests == [], (
        "a pod holding no exclusive resource is not in the fingerprint (method with-exclusive-resources)")
    pods.pods.append({"namespace": "default", "name": "burstable-nic", "containers": [
        {"name": "c", "cpu_ids": [], "memory": [], "devices": [
            {"resource_name": "example.com/nic", "device_ids": ["vf-3"], "nodes": []}]}]})
    clock.now += 2
    assert pub.step(), "a pod given a device is, NUMA-bound or not, in any QoS class"
    assert attribute(api.objects[PATH], "nodeTopologyPodsFingerprint") == podfingerprint.fingerprint(
        [("team", "web"), ("default", "burstable-nic")]) != before
    del api.requests[:]
    clock.now += 60
    assert not pub.step()
    assert api.requests == [("GET", PATH)], "the resync reads the object and writes nothing when it is equal"


def test_an_object_someone_else_made_is_left_alone(tmp_path, caplog):
    api, pods, clock = Api(), PodResources(), Clock()
    foreign = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
               "metadata": {"name": NODE, "resourceVersion": "7",
                            "managedFields": [{"manager": "nfd-topology-updater", "operation": "Update"}]},
               "zones": [{"name": "node-0", "type": "Node", "resources": []}], "attributes": []}
    api.objects[PATH] = copy.deepcopy(foreign)
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    with caplog.at_level(logging.WARNING, logger="nrt-publisher"):
        assert not pub.step()
        for cpus in ([1], [1, 3], [5]):
            pods.add("team", "p%d" % cpus[0], cpus, GI, 1)
            clock.now += 2
            assert not pub.step()
        clock.now += 60
        assert not pub.step()
    assert api.writes == [], "never changed"
    assert api.objects[PATH] == foreign
    assert api.requests == [("GET", PATH)] * 2, "read at start and at the resync, nothing between"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["NodeResourceTopology w1 is not numa.kube's (no label app.kubernetes.io/managed-by=numa.kube; "
                        "written by nfd-topology-updater): left as it is"] * 2, "once per resync"
    # another manager's label is not numa.kube's either
    api.objects[PATH]["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "nfd"}
    clock.now += 60
    assert not pub.step() and api.writes == []
    # once its owner removed it, the next resync creates numa.kube's own
    del api.objects[PATH]
    clock.now += 60
    assert pub.step() and api.writes == ["POST"]
    assert api.objects[PATH]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "numa.kube"


def test_without_the_static_memory_manager_the_fingerprint_names_every_pod_kubelet_lists(tmp_path):
    api, pods = Api(), PodResources()
    pods.pods.append({"namespace": "team", "name": "fraction", "containers": [
        {"name": "c", "cpu_ids": [], "memory": [], "devices": []}]})  # Guaranteed, 500m: List shows nothing held
    publisher(tmp_path, api, Kubelet(dict(STATIC, memoryManagerPolicy="None")), pods).step()
    obj = api.objects[PATH]
    assert attribute(obj, "nodeTopologyPodsFingerprintMethod") == "all"
    assert attribute(obj, "nodeTopologyPodsFingerprint") == podfingerprint.fingerprint(
        [("kube-system", "kube-proxy-1"), ("team", "fraction")])


def co_writer_update(api, zones):
    """NFD's topology-updater (or the resource-topology-exporter) updating the object numa.kube made: a GET,
    zones and attributes replaced, the labels kept, an Update under its own field manager."""
    obj = api.get(PATH)
    obj["zones"] = zones
    obj["attributes"] = [{"name": "topologyManagerPolicy", "value": "single-numa-node"}]
    api.request("PUT", PATH + "?fieldManager=nfd-topology-updater", obj)
    del api.requests[:], api.writes[:]
    return copy.deepcopy(api.objects[PATH])


def test_an_updater_that_starts_later_and_keeps_numa_kubes_label_is_seen_and_left_alone(tmp_path, caplog):
    api, pods, clock = Api(), PodResources(), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    assert pub.step() and api.writes == ["POST"]
    nfd = co_writer_update(api, [{"name": "node-0", "type": "Node", "resources": []}])
    assert nfd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "numa.kube", "the label stays"
    with caplog.at_level(logging.WARNING, logger="nrt-publisher"):
        clock.now += 60
        assert not pub.step()
        pods.add("team", "late", [5], GI, 1)  # a change of its own content: still nothing written
        clock.now += 2
        assert not pub.step()
        clock.now += 60
        assert not pub.step()
    assert api.writes == [], "never written over the other updater's content"
    assert api.objects[PATH] == nfd
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, "once per resync: %s" % warnings
    assert warnings[0].startswith("NodeResourceTopology w1 is not numa.kube's (labelled numa.kube's, but its "
                                  "managedFields show nfd-topology-updater writing its zones, attributes or topologyPolicies")
    assert "delete the object" in warnings[0]


def test_its_own_writes_never_make_the_object_foreign(tmp_path):
    api, pods, clock = Api(), PodResources(), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    for cpus in ([3], [5], [7]):
        pods.add("team", "p%d" % cpus[0], cpus, GI, 1)
        clock.now += 2
        assert pub.step()
    clock.now += 60
    api.objects[PATH]["metadata"]["labels"]["numa.kube/stack"] = "old"  # relabelled at the resync
    assert pub.step()
    # numa.kube's modules (server-side apply, field manager numa.kube) and a label edit do not count either
    managed = api.objects[PATH]["metadata"]["managedFields"]
    managed.append({"manager": "numa.kube", "operation": "Apply", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:zones": {}, "f:attributes": {}}})
    managed.append({"manager": "kubectl-label", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}})
    pods.add("team", "p1", [1], GI, 0)
    clock.now += 2
    assert pub.step()
    assert api.writes == ["POST", "PUT", "PUT", "PUT", "PUT", "PUT"]
    assert set(api.managers) == {"numa-kube-nrt-publisher"}


def test_kubelet_restarting_publishes_nothing_then_its_configuration_is_read_again(tmp_path):
    api, kubelet, pods = Api(), Kubelet(STATIC), PodResources()
    pub = publisher(tmp_path, api, kubelet, pods)
    pub.step()
    pods.up = False
    assert not pub.step() and api.writes == ["POST"]
    kubelet.config = dict(STATIC, topologyManagerScope="container")
    pods.up = True
    assert pub.step()
    assert attribute(api.objects[PATH], "topologyManagerScope") == "container"
    assert kubelet.reads == 2


def test_a_kubelet_restart_between_two_rounds_with_a_new_policy_is_published_at_the_next_round(tmp_path):
    """kubelet restarted (a new PodResources socket) between two 2 s rounds, so no round saw it down, and
    GetAllocatableResources answers as before: the next round reads /configz again, not the resync."""
    api, kubelet, pods, clock = Api(), Kubelet(dict(STATIC, topologyManagerPolicy="none")), PodResources(), Clock()
    socket = {"identity": (1, 100)}
    pub = publisher(tmp_path, api, kubelet, pods, clock=clock, rand=lambda: 0.5,
                    kubelet_identity=lambda: socket["identity"])
    pub.step()
    for dummy in range(3):
        clock.now += 2
        pub.step()
    assert kubelet.reads == 1, "an unchanged kubelet's /configz is read once per resync"
    kubelet.config = dict(STATIC, topologyManagerPolicy="single-numa-node")
    socket["identity"] = (2, 200)
    clock.now += 2
    assert pub.step()
    assert attribute(api.objects[PATH], "topologyManagerPolicy") == "single-numa-node"
    assert kubelet.reads == 2
    clock.now += 2
    assert not pub.step() and kubelet.reads == 2, "read once after the restart, not every round"


def test_a_kubelet_answering_other_allocatable_resources_has_its_configuration_read_again(tmp_path):
    api, kubelet, pods, clock = Api(), Kubelet(STATIC), PodResources(), Clock()
    pub = publisher(tmp_path, api, kubelet, pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    kubelet.config = dict(STATIC, topologyManagerPolicy="restricted", topologyManagerScope="container")
    pods.memory[1]["size"] = 5 * GI  # e.g. restarted with more memory reserved on NUMA node 1
    clock.now += 2
    assert pub.step()
    obj = api.objects[PATH]
    assert (attribute(obj, "topologyManagerPolicy"), attribute(obj, "topologyManagerScope")) == (
        "restricted", "container")
    assert resource(obj, "node-1", "memory")["allocatable"] == "5Gi"
    assert kubelet.reads == 2


def test_sysfs_is_read_again_at_the_resync(tmp_path):
    api, pods, clock = Api(), PodResources(), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    with open(os.path.join(pub.sysfs, "devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages"), "w") as f:
        f.write("1024\n")
    clock.now += 2
    assert not pub.step(), "between resyncs sysfs' figures are kept"
    clock.now += 60
    assert pub.step()
    assert resource(api.objects[PATH], "node-1", "hugepages-2Mi")["capacity"] == "2Gi"


def test_the_api_server_refusing_a_write_is_tried_again(tmp_path, caplog):
    class Refusing(Api):
        def request(self, method, path, body=None):
            self.requests.append((method, path))
            raise ApiError(403, "noderesourcetopologies.topology.node.k8s.io is forbidden")

    api = Refusing()
    pub = publisher(tmp_path, api, Kubelet(STATIC), PodResources())
    with caplog.at_level(logging.WARNING, logger="nrt-publisher"):
        assert not pub.step() and not pub.step()
    assert [m for m, p in api.requests if m == "POST"] == ["POST", "POST"]
    assert "could not write NodeResourceTopology w1" in caplog.text


def test_the_program_takes_the_numatopology_publishers_options(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(nrt_publisher, "main", seen.append)
    monkeypatch.delenv("KUBELET_TLS", raising=False)
    options = ["--sysfs", "/host/sys", "--pod-resources-socket", "/p.sock", "--node-name", "n1", "--kubelet-url",
               "https://10.0.0.1:10250", "--kubelet-tls", "cluster-ca", "--kubelet-ca-file", "/ca.crt",
               "--kubelet-server-name", "n1.example", "--period", "3", "--resync", "90"]
    agent_main.main(["nrt-publisher"] + options)
    nrt_args = vars(seen[-1])
    assert vars(agent_main.parse_args(["topology-publisher"] + options)) == dict(nrt_args, program="topology-publisher")
    assert (nrt_args["sysfs"], nrt_args["kubelet_tls"], nrt_args["period"], nrt_args["resync"]) == (
        "/host/sys", "cluster-ca", 3.0, 90.0)
    with pytest.raises(SystemExit):
        agent_main.parse_args(["nrt-publisher", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the NodeResourceTopology object are read again, and the object written only when they differ" in text


def test_the_program_refuses_to_start_without_what_it_needs(tmp_path, caplog):
    def args(*options):
        return agent_main.parse_args(["nrt-publisher", "--kubelet-url", "https://127.0.0.1:1"] + list(options))

    with caplog.at_level(logging.ERROR, logger="nrt-publisher"):
        assert nrt_publisher.main(args("--node-name", "")) == 2
        assert nrt_publisher.main(args("--node-name", NODE, "--kubelet-ca-file", str(tmp_path / "kubelet.crt"))) == 2
    assert "no node name: give --node-name or NODE_NAME" in caplog.text
    assert "mount the node's kubelet.crt there" in caplog.text
