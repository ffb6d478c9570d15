# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from prometheus_client.parser import text_string_to_metric_families

from numa_agent.metrics import numa_metrics
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import four_nodes_with_memory_only, two_socket_interleaved

GIB = 2 ** 30
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CONTAINER = "ab" * 32


def samples(text):
    """{(name, ((label, value), ...)): value}, parsed by prometheus_client (so the text is valid)."""
    found = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found, types


def node(label, **more):
    return tuple(sorted([("numa_node", str(label))] + [(k, str(v)) for k, v in more.items()]))


def scraper(tmp_path, machine, cgroup_root=None):
    sys_root, _proc = machine.write(str(tmp_path / "m"))
    return numa_metrics.Scraper(sys_root, cgroup_root), sys_root


def test_node_metrics_of_an_uneven_machine(tmp_path):
    scrape, _root = scraper(tmp_path, four_nodes_with_memory_only())
    values, types = samples(scrape.scrape())
    assert [values[("numa_node_cpus_count", node(n))] for n in (0, 1, 3, 5)] == [4, 2, 2, 0]
    assert values[("numa_node_cpus_online", node(1))] == 2
    assert values[("numa_node_memory_total_bytes", node(5))] == 16 * GIB
    assert values[("numa_node_memory_used_bytes", node(0))] == 2 * GIB
    assert values[("numa_node_distance", node(3, to_node=5))] == 30
    assert values[("numa_node_distance", node(3, to_node=3))] == 10
    assert values[("numa_node_numastat_pages_total", node(3, event="numa_hit"))] == 4000
    assert types["numa_node_numastat_pages"] == "counter"
    # nothing from kubelet was handed in: no assignment families at all
    assert not any(name.startswith("numa_node_cpus_exclusive") for name, _labels in values)


def test_huge_pages_and_pci_devices(tmp_path):
    machine = two_socket_interleaved()
    machine.add_pci("0000:3b:00.0", 0x020000, numa_node=1)
    machine.add_pci("0000:00:1f.2", 0x010601)
    scrape, _root = scraper(tmp_path, machine)
    values, _types = samples(scrape.scrape())
    assert values[("numa_node_hugepages", node(0, size="2048kB"))] == 512
    assert values[("numa_node_hugepages_free", node(0, size="2048kB"))] == 500
    assert values[("numa_node_hugepages_free", node(1, size="1048576kB"))] == 0
    nic = [labels for name, labels in values if name == "numa_pci_device_info" and ("address", "0000:3b:00.0") in labels]
    assert nic and ("numa_node", "1") in nic[0] and ("class", "0x020000") in nic[0]
    sata = [labels for name, labels in values if name == "numa_pci_device_info" and ("address", "0000:00:1f.2") in labels]
    assert ("numa_node", "-1") in sata[0]


def test_each_scrape_reads_memory_afresh_and_topology_only_on_change(tmp_path):
    scrape, root = scraper(tmp_path, two_socket_interleaved())
    meminfo = os.path.join(root, "devices/system/node/node1/meminfo")
    with open(meminfo, "w") as handle:
        handle.write("Node 1 MemTotal: 100 kB\nNode 1 MemFree: 40 kB\n")
    values, _types = samples(scrape.scrape())
    assert values[("numa_node_memory_used_bytes", node(1))] == 60 * 1024
    topology = scrape.topology
    scrape.scrape()
    assert scrape.topology is topology, "the static topology was read again without a change"
    with open(os.path.join(root, "devices/system/cpu/online"), "w") as handle:
        handle.write("0-7\n")  # half the CPUs went offline
    values, _types = samples(scrape.scrape())
    assert scrape.topology is not topology
    assert values[("numa_node_cpus_online", node(0))] == 4


def test_assignments_from_pod_resources(tmp_path):
    scrape, _root = scraper(tmp_path, two_socket_interleaved())
    # CPUs 2, 4, 6 are on node 0 (even ids); CPU 9 on node 1
    assigned = [{"namespace": "prod", "name": "db-0", "containers": [
        {"name": "db", "cpu_ids": [2, 4, 6, 9],
         "memory": [{"memory_type": "memory", "size": 2 * GIB, "nodes": [0]},
                    {"memory_type": "hugepages-2Mi", "size": 64 << 20, "nodes": [0, 1]}],
         "devices": [{"resource_name": "numa-align/numa-0", "device_ids": ["numa-0-1", "numa-0-2"], "nodes": [0]},
                     {"resource_name": "example.com/nic", "device_ids": ["x"], "nodes": []}]}]}]
    allocatable = {"cpu_ids": list(range(1, 16)), "memory": [{"memory_type": "memory", "size": 7 * GIB, "nodes": [0]}]}
    values, _types = samples(scrape.scrape(assigned=assigned, allocatable=allocatable))
    who = (("container", "db"), ("namespace", "prod"), ("pod", "db-0"))
    assert values[("numa_node_cpus_exclusive", node(0))] == 3
    assert values[("numa_node_cpus_exclusive", node(1))] == 1
    assert values[("numa_container_cpus_exclusive", tuple(sorted(who + (("numa_node", "0"),))))] == 3
    assert values[("numa_node_cpus_allocatable", node(0))] == 7  # CPU 0 is kubelet's reserved one
    assert values[("numa_node_cpus_allocatable", node(1))] == 8
    assert values[("numa_node_memory_allocatable_bytes", node(0, resource="memory"))] == 7 * GIB
    assert values[("numa_node_memory_assigned_bytes", node(0, resource="memory"))] == 2 * GIB
    assert values[("numa_node_memory_assigned_bytes", node("0,1", resource="hugepages-2Mi"))] == 64 << 20
    devices = tuple(sorted(who + (("numa_node", "0"), ("resource", "numa-align/numa-0"))))
    assert values[("numa_container_devices", devices)] == 2
    assert values[("numa_container_devices", tuple(sorted(who + (("numa_node", "none"), ("resource", "example.com/nic")))))] == 1


def test_container_locality_from_memory_numa_stat(tmp_path):
    cgroup = tmp_path / "cgroup"
    folder = cgroup / "kubepods" / "burstable" / ("pod" + UID) / CONTAINER
    folder.mkdir(parents=True)
    (folder / "memory.numa_stat").write_text("anon N0=4096 N1=1048576\nfile N0=0 N1=8192\nkernel_stack N0=16384 N1=0\n")
    other = cgroup / "kubepods.slice" / ("kubepods-pod%s.slice" % UID.replace("-", "_")) / ("cri-containerd-%s.scope" % ("cd" * 32))
    other.mkdir(parents=True)
    (other / "memory.numa_stat").write_text("anon N0=1 N1=2\n")
    scrape, _root = scraper(tmp_path, two_socket_interleaved(), str(cgroup))
    assert set(numa_metrics.container_cgroups(str(cgroup))) == {CONTAINER, "cd" * 32}
    values, _types = samples(scrape.scrape(containers={CONTAINER: ("prod", "db-0", "db")}))
    who = (("container", "db"), ("namespace", "prod"), ("pod", "db-0"))
    assert values[("numa_container_memory_bytes", tuple(sorted(who + (("numa_node", "1"), ("type", "anon")))))] == 1048576
    assert values[("numa_container_memory_bytes", tuple(sorted(who + (("numa_node", "1"), ("type", "file")))))] == 8192
    # kernel_stack is not reported; a container the caller cannot name is left out
    assert len([name for name, _labels in values if name == "numa_container_memory_bytes"]) == 4


def test_checkpoint_fallback_of_the_systemd_exporter(tmp_path):
    scrape, _root = scraper(tmp_path, two_socket_interleaved())
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    (kubelet / "cpu_manager_state").write_text(json.dumps(
        {"policyName": "static", "defaultCpuSet": "0,1,3", "entries": {UID: {"app": "2,4,6"}}, "checksum": 1}))
    (kubelet / "memory_manager_state").write_text(json.dumps({
        "policyName": "Static",
        "machineState": {"0": {"memoryMap": {"memory": {"allocatable": 7 * GIB, "reserved": GIB}}},
                         "1": {"memoryMap": {"memory": {"allocatable": 8 * GIB, "reserved": 0}}}},
        "entries": {UID: {"app": [{"numaAffinity": [0], "type": "memory", "size": GIB}]}}}))
    assigned, allocatable, problems = numa_metrics.checkpoint_data(str(kubelet), scrape.topology.cpu_node)
    assert problems == []
    values, _types = samples(scrape.scrape(assigned=assigned, allocatable=allocatable))
    assert values[("numa_node_cpus_exclusive", node(0))] == 3
    assert values[("numa_node_memory_assigned_bytes", node(0, resource="memory"))] == GIB
    assert values[("numa_node_memory_allocatable_bytes", node(1, resource="memory"))] == 8 * GIB
    assert not any(name == "numa_node_cpus_allocatable" for name, _labels in values), "checkpoints do not tell"
    (kubelet / "cpu_manager_state").write_text("{not json")
    _assigned, _allocatable, problems = numa_metrics.checkpoint_data(str(kubelet), scrape.topology.cpu_node)
    assert problems and problems[0][0] == "cpu_manager_state" and "not JSON" in problems[0][1]


def test_label_values_are_escaped():
    family = numa_metrics.Family("x_info", "gauge", "help").add((("a", 'q"\\\n'),), 1)
    assert numa_metrics.render([family]).splitlines()[-1] == 'x_info{a="q\\"\\\\\\n"} 1'


def test_the_exporter_reads_the_topology_through_the_facts_reader(tmp_path):
    """One sysfs reader: the exporter's static topology is SysfsReader's, as topology_facts reports it."""
    from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader

    machine = four_nodes_with_memory_only()
    machine.add_pci("0000:3b:00.0", 0x020000, numa_node=3)
    scrape, root = scraper(tmp_path, machine)
    facts = SysfsReader(root, os.path.join(os.path.dirname(root), "proc")).read()
    assert [n["id"] for n in scrape.topology.nodes] == facts["node_ids"]
    assert dict((n["id"], n["cpus"]) for n in scrape.topology.nodes) == dict((n["id"], n["cpus"]) for n in facts["nodes"])
    assert dict((n["id"], dict((str(k), v) for k, v in n["distances"])) for n in scrape.topology.nodes) == \
        dict((n["id"], n["distances"]) for n in facts["nodes"])
    nic = [device for device in facts["pci_devices"] if device["address"] == "0000:3b:00.0"][0]
    assert ("0000:3b:00.0", nic["class"], nic["vendor"], nic["device"], 3) in scrape.topology.pci
