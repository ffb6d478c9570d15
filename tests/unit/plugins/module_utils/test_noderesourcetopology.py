# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's NodeResourceTopology as scheduler-plugins' NodeResourceTopologyMatch reads it, from what
kubelet's PodResources API, its /configz and sysfs report."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.numa import nrt
from ansible_collections.numa.kube.plugins.module_utils.numa import podfingerprint
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import Machine, non_numa

GI = 1024 ** 3
MI = 1024 ** 2
STATIC = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static", "topologyManagerPolicy": "single-numa-node",
          "topologyManagerScope": "pod"}


def uneven(tmp_path):
    """Nodes 0, 1, 3 with 4, 2, 2 CPUs and 4, 2, 1 GiB; node 5 memory only (16 GiB); huge pages on 0, 1 and 5."""
    cpus = dict((c, (0 if c < 4 else 1, c % 4)) for c in range(8))
    nodes = {
        0: dict(cpus=[0, 1, 2, 3], mem_kb=4 * 1024 * 1024, hugepages={2048: (256, 256), 1048576: (1, 1)}),
        1: dict(cpus=[4, 5], mem_kb=2 * 1024 * 1024, hugepages={2048: (128, 128)}),
        3: dict(cpus=[6, 7], mem_kb=1 * 1024 * 1024, hugepages={32768: (0, 0)}),  # a size without pages
        5: dict(cpus=[], mem_kb=16 * 1024 * 1024, hugepages={1048576: (4, 4)}),
    }
    distances = [[10, 16, 16, 30], [16, 10, 16, 30], [16, 16, 10, 30], [30, 30, 30, 10]]
    sys_root, proc_root = Machine(nodes=nodes, cpus=cpus, distances=distances).write(str(tmp_path))
    return SysfsReader(sys_root, proc_root).read(include_pci=False)


def block(kind, size, nodes):
    return {"memory_type": kind, "size": size, "nodes": nodes}


def devices(name, ids, nodes):
    return {"resource_name": name, "device_ids": ids, "nodes": nodes}


def plugin(node):
    return devices("numa-align/numa-%d" % node, ["n%d-%d" % (node, i) for i in range(4)], [node])


# GetAllocatableResources with the static CPU Manager (CPU 0 reserved) and the Static Memory Manager
ALLOCATABLE = {
    "cpu_ids": [1, 2, 3, 4, 5, 6, 7],
    "memory": [block("memory", 2 * GI, [0]), block("hugepages-2Mi", 512 * MI, [0]), block("hugepages-1Gi", GI, [0]),
               block("memory", 1536 * MI, [1]), block("hugepages-2Mi", 256 * MI, [1]),
               block("memory", 768 * MI, [3]),
               block("memory", 12 * GI, [5]), block("hugepages-1Gi", 4 * GI, [5])],
    "devices": [plugin(0), plugin(1), plugin(3), devices("example.com/gpu", ["g0"], [0, 1]),
                devices("example.com/nic", ["nic0"], [])],
}
# List: what kubelet assigned
ASSIGNED = [
    {"namespace": "team-a", "name": "db", "containers": [
        {"name": "db", "cpu_ids": [1, 2], "memory": [block("memory", GI, [0]), block("hugepages-2Mi", 256 * MI, [0])],
         "devices": [devices("numa-align/numa-0", ["n0-0"], [0])]}]},
    {"namespace": "team-a", "name": "big", "containers": [
        {"name": "big", "cpu_ids": [4, 5], "memory": [block("memory", 2 * GI, [1, 5])],
         "devices": [devices("example.com/gpu", ["g0"], [0, 1])]}]},
    {"namespace": "kube-system", "name": "kube-proxy-x", "containers": [
        {"name": "proxy", "cpu_ids": [], "memory": [], "devices": [devices("example.com/nic", ["nic0"], [])]}]},
    {"namespace": "team-b", "name": "huge", "containers": [
        {"name": "huge", "cpu_ids": [7], "memory": [block("hugepages-1Gi", 3 * GI, [5])],
         "devices": [devices("numa-align/numa-3", ["n3-0", "n3-1"], [3])]}]},
]


def res(name, capacity, allocatable, available):
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": available}


def zones_by_name(obj):
    return dict((zone["name"], zone) for zone in obj["zones"])


def attributes(obj):
    return dict((a["name"], a["value"]) for a in obj["attributes"])


def test_every_numa_node_is_a_zone_with_its_distances_as_costs(tmp_path):
    obj = nrt.nrt_object("w1", uneven(tmp_path), STATIC, ALLOCATABLE, ASSIGNED)
    assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == (
        "topology.node.k8s.io/v1alpha2", "NodeResourceTopology", "w1")
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"}
    assert [(zone["name"], zone["type"]) for zone in obj["zones"]] == [
        ("node-0", "Node"), ("node-1", "Node"), ("node-3", "Node"), ("node-5", "Node")], "the memory-only node too"
    zones = zones_by_name(obj)
    assert zones["node-5"]["costs"] == [{"name": "node-0", "value": 30}, {"name": "node-1", "value": 30},
                                        {"name": "node-3", "value": 30}, {"name": "node-5", "value": 10}]
    assert zones["node-1"]["costs"] == [{"name": "node-0", "value": 16}, {"name": "node-1", "value": 10},
                                        {"name": "node-3", "value": 16}, {"name": "node-5", "value": 30}]


def test_static_managers_resources_are_kubelets_allocatable_minus_its_assignments(tmp_path):
    zones = zones_by_name(nrt.nrt_object("w1", uneven(tmp_path), STATIC, ALLOCATABLE, ASSIGNED))
    assert zones["node-0"]["resources"] == [
        res("cpu", "4", "3", "1"),  # CPU 0 reserved by kubelet, 1 and 2 assigned
        res("memory", "4Gi", "2Gi", "1Gi"),
        res("hugepages-2Mi", "512Mi", "512Mi", "256Mi"),
        res("hugepages-1Gi", "1Gi", "1Gi", "1Gi"),
        res("example.com/gpu", "1", "1", "0"),  # on two NUMA nodes: counted, and taken, on both
        res("numa-align/numa-0", "4", "4", "3"),
    ]
    assert zones["node-1"]["resources"] == [
        res("cpu", "2", "2", "0"),
        res("memory", "2Gi", "1536Mi", "0"),  # the 2 GiB block over nodes 1 and 5 empties node 1 first
        res("hugepages-2Mi", "256Mi", "256Mi", "256Mi"),
        res("hugepages-1Gi", "0", "0", "0"),
        res("example.com/gpu", "1", "1", "0"),
        res("numa-align/numa-1", "4", "4", "4"),
    ]
    assert zones["node-3"]["resources"] == [
        res("cpu", "2", "2", "1"),
        res("memory", "1Gi", "768Mi", "768Mi"),
        res("hugepages-2Mi", "0", "0", "0"),
        res("hugepages-1Gi", "0", "0", "0"),
        res("numa-align/numa-3", "4", "4", "2"),
    ]
    assert zones["node-5"]["resources"] == [
        res("cpu", "0", "0", "0"),
        res("memory", "16Gi", "12Gi", "11776Mi"),  # and takes the other 512 MiB here
        res("hugepages-2Mi", "0", "0", "0"),
        res("hugepages-1Gi", "4Gi", "4Gi", "1Gi"),
    ]
    names = set(r["name"] for zone in zones.values() for r in zone["resources"])
    assert "example.com/nic" not in names, "a device without a NUMA topology is no zone's resource"
    assert "hugepages-32Mi" not in names, "a page size no node has pages of"


def test_without_the_static_managers_every_zone_offers_the_whole_node(tmp_path):
    """PodResources then reports no CPU ids or memory blocks: kubelet binds neither to NUMA nodes."""
    config = {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "topologyManagerPolicy": "single-numa-node"}
    allocatable = dict(ALLOCATABLE, cpu_ids=[], memory=[])
    assigned = [dict(pod, containers=[dict(c, cpu_ids=[], memory=[]) for c in pod["containers"]]) for pod in ASSIGNED]
    zones = zones_by_name(nrt.nrt_object("w1", uneven(tmp_path), config, allocatable, assigned))
    whole = [res("cpu", "8", "8", "8"), res("memory", "23Gi", "23Gi", "23Gi"),
             res("hugepages-2Mi", "768Mi", "768Mi", "768Mi"), res("hugepages-1Gi", "5Gi", "5Gi", "5Gi")]
    for name, zone in zones.items():
        assert zone["resources"][:4] == whole, name
    assert zones["node-3"]["resources"][4:] == [res("numa-align/numa-3", "4", "4", "2")], "devices stay NUMA-bound"


@pytest.mark.parametrize("memory_manager, node1_memory", [
    ("Static", res("memory", "2Gi", "1536Mi", "0")),
    ("None", res("memory", "23Gi", "23Gi", "23Gi")),
])
def test_memory_follows_the_memory_manager_and_cpu_the_cpu_manager(tmp_path, memory_manager, node1_memory):
    config = dict(STATIC, memoryManagerPolicy=memory_manager)
    allocatable = ALLOCATABLE if memory_manager == "Static" else dict(ALLOCATABLE, memory=[])
    zones = zones_by_name(nrt.nrt_object("w1", uneven(tmp_path), config, allocatable, ASSIGNED))
    assert zones["node-1"]["resources"][0] == res("cpu", "2", "2", "0"), "the static CPU Manager either way"
    assert zones["node-1"]["resources"][1] == node1_memory


def test_figures_stay_within_their_bounds(tmp_path):
    """Capacity is never below what kubelet calls allocatable, available never below 0 nor above it."""
    allocatable = copy.deepcopy(ALLOCATABLE)
    allocatable["memory"].append(block("memory", 8 * GI, [3]))  # more than node 3's 1 GiB, as kubelet says
    assigned = ASSIGNED + [{"namespace": "x", "name": "y", "containers": [
        {"name": "c", "cpu_ids": [3, 6, 0], "memory": [block("memory", 64 * GI, [3])],
         "devices": [devices("numa-align/numa-3", ["n3-0", "n3-2", "n3-3", "gone"], [3])]}]}]
    zones = zones_by_name(nrt.nrt_object("w1", uneven(tmp_path), STATIC, allocatable, assigned))
    assert zones["node-3"]["resources"][1] == res("memory", "8960Mi", "8960Mi", "0")
    assert zones["node-0"]["resources"][0] == res("cpu", "4", "3", "0"), "CPU 0 is no allocatable CPU to take"
    assert zones["node-3"]["resources"][4] == res("numa-align/numa-3", "4", "4", "0"), "a device counts once"


def test_a_machine_without_numa_is_one_zone(tmp_path):
    sys_root, proc_root = non_numa(cpu_count=4, mem_kb=2 * 1024 * 1024).write(str(tmp_path))
    topology = SysfsReader(sys_root, proc_root).read(include_pci=False)
    allocatable = {"cpu_ids": [1, 2, 3], "memory": [block("memory", GI, [0]), block("hugepages-2Mi", 32 * MI, [0])],
                   "devices": []}
    obj = nrt.nrt_object("w1", topology, STATIC, allocatable, [])
    assert obj["zones"] == [{"name": "node-0", "type": "Node", "costs": [{"name": "node-0", "value": 10}],
                             "resources": [res("cpu", "4", "3", "3"), res("memory", "2Gi", "1Gi", "1Gi"),
                                           res("hugepages-2Mi", "32Mi", "32Mi", "32Mi")]}]


def test_attributes_carry_kubelets_topology_manager_and_the_pods_fingerprint(tmp_path):
    topology = uneven(tmp_path)
    got = attributes(nrt.nrt_object("w1", topology, STATIC, ALLOCATABLE, ASSIGNED))
    assert got == {
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
        # kube-proxy-x holds a NIC without NUMA topology: any device counts (the scheduler counts every
        # extended resource request as exclusive)
        "nodeTopologyPodsFingerprint": podfingerprint.fingerprint(
            [("team-a", "db"), ("team-a", "big"), ("kube-system", "kube-proxy-x"), ("team-b", "huge")]),
        "nodeTopologyPodsFingerprintMethod": "with-exclusive-resources",
    }
    bare = attributes(nrt.nrt_object("w1", topology, {"topologyManagerPolicyOptions": {
        "max-allowable-numa-nodes": "16"}}, {}, []))
    assert bare["topologyManagerPolicy"] == "none" and bare["topologyManagerScope"] == "container", \
        "kubelet's defaults when /configz leaves them out"
    assert bare["topologyManagerMaxNUMANodes"] == "16"
    assert bare["nodeTopologyPodsFingerprint"] == "pfp0v001ef46db3751d8e999"
    assert [a["name"] for a in nrt.nrt_object("w1", topology, STATIC, {}, [])["attributes"]] == [
        "topologyManagerPolicy", "topologyManagerScope", "nodeTopologyPodsFingerprint",
        "nodeTopologyPodsFingerprintMethod"], "a stable order: equal content compares equal"


SHARED = [("team-c", "web", {"cpu_ids": [], "memory": [], "devices": []}),  # BestEffort, Burstable, 0.5 CPU...
          ("team-c", "pinned", {"cpu_ids": [3], "memory": [], "devices": []}),
          ("team-c", "static-memory", {"cpu_ids": [], "memory": [block("memory", 64 * MI, [1])], "devices": []}),
          ("team-c", "gpu", {"cpu_ids": [], "memory": [], "devices": [devices("example.com/gpu", ["g0"], [0, 1])]}),
          ("team-c", "unbound-nic", {"cpu_ids": [], "memory": [], "devices": [devices("example.com/nic", ["v"], [])]}),
          ("team-c", "no-ids", {"cpu_ids": [], "memory": [], "devices": [devices("example.com/nic", [], [])]})]


def test_which_pods_the_fingerprint_names_follows_what_list_can_show_of_the_schedulers_set():
    assigned = [{"namespace": ns, "name": name, "containers": [dict(container, name="c")]}
                for ns, name, container in SHARED]
    assert [pod["name"] for pod in assigned if nrt.holds_exclusive(pod)] == [
        "pinned", "static-memory", "gpu", "unbound-nic"]
    # the Static Memory Manager gives every Guaranteed pod memory blocks: List shows the scheduler's exclusive pods
    assert nrt.fingerprint_pods(STATIC, assigned) == ("with-exclusive-resources", [
        ("team-c", "pinned"), ("team-c", "static-memory"), ("team-c", "gpu"), ("team-c", "unbound-nic")])
    # without it a Guaranteed pod with a fraction of a CPU shows nothing: every pod List shows counts
    for config in (dict(STATIC, memoryManagerPolicy="None"), {"cpuManagerPolicy": "static"}, {}):
        method, pods = nrt.fingerprint_pods(config, assigned)
        assert (method, len(pods)) == ("all", len(SHARED)), config
    found = dict((a["name"], a["value"]) for a in nrt.attributes(STATIC, assigned))
    assert found["nodeTopologyPodsFingerprint"] == podfingerprint.fingerprint(
        [("team-c", "unbound-nic"), ("team-c", "gpu"), ("team-c", "static-memory"), ("team-c", "pinned")])
    assert found["nodeTopologyPodsFingerprintMethod"] == podfingerprint.METHOD_WITH_EXCLUSIVE_RESOURCES


def managed(manager, *fields, **extra):
    """A managedFields entry as the API server writes it for an Update of the NRT's top-level ``fields``."""
    entry = {"manager": manager, "operation": extra.get("operation", "Update"),
             "apiVersion": "topology.node.k8s.io/v1alpha2", "time": "2026-11-24T10:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": dict(("f:" + field, {}) for field in fields)}
    entry["fieldsV1"]["f:metadata"] = extra.get("metadata", {"f:labels": {".": {}, "f:numa.kube/stack": {}}})
    return entry


def test_ownership_is_the_label_and_no_other_writer_of_zones_or_attributes():
    labels = {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"}
    assert nrt.is_ours({"metadata": {"labels": labels}})
    assert not nrt.is_ours({"metadata": {"labels": {"app.kubernetes.io/managed-by": "nfd-topology-updater"}}})
    assert not nrt.is_ours({"metadata": {"name": "w1"}})
    own = [managed("numa-kube-nrt-publisher", "zones", "attributes"), managed("numa.kube", "zones", operation="Apply")]
    assert nrt.is_ours({"metadata": {"labels": labels, "managedFields": own}}), "numa.kube's own writers"
    label_edit = managed("kubectl-label", metadata={"f:labels": {"f:team": {}}})
    assert nrt.is_ours({"metadata": {"labels": labels, "managedFields": own + [label_edit]}}), "metadata only"
    # topologyPolicies: the deprecated field older updaters write (hostile review: absent would have
    # deleted an object such a co-writer keeps)
    for fields in (("zones",), ("attributes",), ("zones", "attributes"), ("topologyPolicies",)):
        obj = {"metadata": {"labels": labels, "managedFields": own + [managed("nfd-topology-updater", *fields)]}}
        assert not nrt.is_ours(obj), fields
        assert nrt.co_writers(obj) == ["nfd-topology-updater"]
        assert nrt.foreign_reason(obj).startswith(
            "labelled numa.kube's, but its managedFields show nfd-topology-updater writing its zones, attributes or "
            "topologyPolicies")
    assert nrt.foreign_reason({"metadata": {"managedFields": [managed("resource-topology-exporter", "zones")]}}) == (
        "no label app.kubernetes.io/managed-by=numa.kube; written by resource-topology-exporter")
    assert nrt.OWN_MANAGERS == (nrt.PUBLISHER_FIELD_MANAGER, k8s_objects.FIELD_MANAGER)


def test_zone_summary_names_each_zones_free_cpu_and_memory(tmp_path):
    obj = nrt.nrt_object("w1", uneven(tmp_path), STATIC, ALLOCATABLE, ASSIGNED)
    assert nrt.zone_summary(obj).startswith("node-0 cpu 1/3 memory 1Gi/2Gi, node-1 cpu 0/2 memory 0/1536Mi")


@pytest.mark.parametrize("entries", [[1], "x", [{"manager": "x", "fieldsV1": 5}], [{"manager": 5, "fieldsV1": {"f:zones": {}}}],
                                     [None]])
def test_managed_fields_no_kubernetes_object_would_have_are_not_taken_for_numa_kubes(entries):
    """Review of the fixes: a malformed managedFields (an int fieldsV1, an entry that is no object)
    crashed is_ours; such an object is not numa.kube's, so absent leaves it alone."""
    labels = {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"}
    obj = {"metadata": {"labels": labels, "managedFields": entries}}
    assert not nrt.is_ours(obj) and nrt.co_writers(obj)


@pytest.mark.parametrize("metadata", [
    {"managedFields": ["x"]}, {"managedFields": {"manager": "x"}}, {"managedFields": [{"manager": ["a"]}]},
    {"labels": "numa.kube", "managedFields": []}, {"labels": ["x"]}, "metadata", ["x"], None,
    {"labels": {"app.kubernetes.io/managed-by": ["numa.kube"]}},
])
def test_an_object_of_the_wrong_shape_without_numa_kubes_label_is_named_not_a_crash(metadata):
    """Third review: foreign_reason raised AttributeError or TypeError (unhashable manager) on such
    an object, which ended the publisher process (it catches only the API's errors)."""
    reason = nrt.foreign_reason({"metadata": metadata})
    assert reason.startswith("no label app.kubernetes.io/managed-by=numa.kube; written by "), reason
    assert not nrt.is_ours({"metadata": metadata})


def test_another_managers_entry_without_fields_is_a_co_writer_as_one_whose_fields_are_null():
    """Third review: an entry of another manager with no fieldsV1 was taken for numa.kube's, while one
    whose fieldsV1 is null was not: neither says what it owns, so neither is taken for numa.kube's."""
    labels = {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"}
    for entry in ({"manager": "other"}, {"manager": "other", "fieldsV1": None}):
        obj = {"metadata": {"labels": labels, "managedFields": [entry]}}
        assert nrt.co_writers(obj) == ["other"] and not nrt.is_ours(obj)
