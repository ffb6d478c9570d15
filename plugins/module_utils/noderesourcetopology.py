# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's NodeResourceTopology (``topology.node.k8s.io/v1alpha2``) as the scheduler-plugins
NodeResourceTopologyMatch plugin reads it, built from what kubelet reports.

One zone per NUMA node sysfs lists (memory-only nodes too), named ``node-<id>``, type ``Node``,
with ``costs``: the node's distances (``node-<other>``: the ACPI SLIT value, 10 for itself). Each
zone's ``resources`` are ``{name, capacity, allocatable, available}`` (quantity strings):

- ``cpu``, ``memory`` and each ``hugepages-<size>`` some NUMA node has pages of (or kubelet
  reports), in every zone, 0 where the zone has none;
- every device resource kubelet's PodResources reports with a NUMA topology (``numa-align/numa-N``
  of numa.kube's device plugin, SR-IOV VFs, GPUs), in the zones its devices sit on; devices without
  a topology are not NUMA resources and are left out.

How each figure is taken, the way kubelet's PodResources API sees the node (``allocatable``:
``GetAllocatableResources``, per NUMA node; ``assigned``: ``List``), checked against NFD's
topology-updater (kubernetes-sigs/node-feature-discovery, ``pkg/resourcemonitor``, 2026-07) and
the resource-topology-exporter (k8stopologyawareschedwg, ``pkg/resourcemonitor``):

- ``allocatable``: what GetAllocatableResources gives per NUMA node: the count of its CPU ids on
  the zone (static CPU Manager), the sum of its memory blocks of that type on the zone (Static
  Memory Manager: the node's memory minus its reserved memory and huge pages), the count of its
  device ids on the zone. As both of them do.
- ``available``: allocatable minus what List shows assigned on the zone: exclusive CPU ids,
  device ids (a device on two NUMA nodes counts on both, as in allocatable), memory blocks (a
  block over several NUMA nodes is taken from them in ascending order, each down to 0: NFD's
  ``updateMemoryAvailable``, which follows the Memory Manager's own order).
- ``capacity``: the zone's own hardware: its online CPUs, its ``MemTotal`` (sysfs
  ``node<N>/meminfo``), its huge pages (``nr_hugepages`` x size); devices: allocatable (kubelet
  knows no other count). Never below allocatable (resource-topology-exporter trusts kubelet
  there too). NFD: CPUs as allocatable + reserved (the same number), memory and huge pages from
  sysfs as here.

Where kubelet does not bind a resource to NUMA nodes, PodResources reports none of it: CPUs under
``cpuManagerPolicy: none`` (no CPU ids allocatable), memory and huge pages without
``memoryManagerPolicy: Static`` (no memory blocks). NFD and the resource-topology-exporter then
leave the resource out of the zones (or write ``cpu`` 0); NodeResourceTopologyMatch
(scheduler-plugins v0.34.7, ``filter.go`` ``resourcesAvailableInAnyNUMANodes``) then refuses
every Guaranteed pod on a single-numa-node node, since cpu, memory and huge pages are NUMA-affine
resources no zone offers, while kubelet would run them. Here such a resource is written in every
zone with the whole node's amount (online CPUs, ``MemTotal`` of all nodes, all huge pages of the
size) as capacity, allocatable and available: a container aligned to any zone may use all of it,
which is what kubelet does; the node-wide fit stays the default NodeResourcesFit plugin's.

Top-level ``attributes``: ``topologyManagerPolicy`` and ``topologyManagerScope`` from kubelet's
``/configz`` (the names scheduler-plugins' ``nodeconfig`` reads; kubelet's defaults none and
container when absent), ``topologyManagerMaxNUMANodes`` when kubelet runs with the
``max-allowable-numa-nodes`` policy option, and the pods fingerprint the plugin's cache resync
compares (``nodeTopologyPodsFingerprint``, method ``all``: see podfingerprint.py) over the pods
List reports, as NFD's topology-updater computes it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils import podfingerprint
from ansible_collections.numa.kube.plugins.module_utils.quantity import bytes_quantity

NRT_API = "topology.node.k8s.io/v1alpha2"
NRT_KIND = "NodeResourceTopology"
NRT_COLLECTION = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
# the labels of an NRT numa.kube's publisher made; an object of the node's name without the
# managed-by label belongs to someone else (NFD's topology-updater...) and is left alone
MANAGED_BY = "app.kubernetes.io/managed-by"
PUBLISHER_LABELS = {MANAGED_BY: "numa.kube", "numa.kube/stack": "topology"}
ZONE_TYPE = "Node"

POLICY_ATTRIBUTE = "topologyManagerPolicy"
SCOPE_ATTRIBUTE = "topologyManagerScope"
MAX_NUMA_NODES_ATTRIBUTE = "topologyManagerMaxNUMANodes"
HUGEPAGES_PREFIX = "hugepages-"


def zone_name(node_id):
    return "node-%d" % node_id


def is_ours(obj):
    """Whether an NRT object carries numa.kube's managed-by label."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == PUBLISHER_LABELS[MANAGED_BY]


def _count(number):
    return str(number)


def _bytes(number):
    return bytes_quantity(number).canonical()


def _resource(name, capacity, allocatable, available, fmt):
    capacity = max(capacity, allocatable)
    return {"name": name, "capacity": fmt(capacity), "allocatable": fmt(allocatable), "available": fmt(available)}


def _cpu(topology, zones, cpu_bound, allocatable, assigned):
    """{zone id: resource} for cpu."""
    online = [cpu["id"] for cpu in topology["cpus"]]
    if not cpu_bound:
        return dict((node["id"], _resource("cpu", len(online), len(online), len(online), _count)) for node in zones)
    node_of = dict((cpu["id"], cpu.get("numa_node")) for cpu in topology["cpus"])
    usable = set(allocatable.get("cpu_ids") or [])
    taken = set(cpu for pod in assigned for container in pod.get("containers") or []
                for cpu in container.get("cpu_ids") or []) & usable
    result = {}
    for node in zones:
        mine = set(node["cpus"])
        result[node["id"]] = _resource("cpu", len(mine), len(usable & mine), len(usable & mine) - len(taken & mine),
                                       _count)
    return result


def _hugepage_sizes(topology, allocatable):
    """{resource name: page size in bytes (0 when only kubelet names it)} of the sizes in use."""
    sizes = {}
    for node in topology["nodes"]:
        for name, info in (node.get("hugepages") or {}).items():
            if info.get("total"):
                sizes[name] = info["page_size_bytes"]
    for block in allocatable.get("memory") or []:
        kind = block.get("memory_type") or ""
        if kind.startswith(HUGEPAGES_PREFIX):
            sizes.setdefault(kind, 0)
    return sorted(sizes, key=lambda name: (sizes[name], name))


def _memory_capacity(node, kind):
    if kind == "memory":
        return node.get("memory_total_bytes") or 0
    info = (node.get("hugepages") or {}).get(kind) or {}
    return (info.get("total") or 0) * (info.get("page_size_bytes") or 0)


def _memory(topology, zones, kinds, memory_bound, allocatable, assigned):
    """{zone id: [resource, ...]} for memory and each huge page size, in ``kinds`` order."""
    if not memory_bound:
        whole = dict((kind, sum(_memory_capacity(node, kind) for node in zones)) for kind in kinds)
        return dict((node["id"], [_resource(kind, whole[kind], whole[kind], whole[kind], _bytes) for kind in kinds])
                    for node in zones)
    ids = set(node["id"] for node in zones)
    usable = dict((zone, dict((kind, 0) for kind in kinds)) for zone in ids)
    for block in allocatable.get("memory") or []:
        for zone in block.get("nodes") or []:
            if zone in ids and block.get("memory_type") in kinds:
                usable[zone][block["memory_type"]] += block.get("size") or 0
    free = dict((zone, dict(amounts)) for zone, amounts in usable.items())
    for pod in assigned:
        for container in pod.get("containers") or []:
            for block in container.get("memory") or []:
                kind, left = block.get("memory_type"), block.get("size") or 0
                if kind not in kinds:
                    continue
                for zone in sorted(block.get("nodes") or []):
                    if zone not in ids or left <= 0:
                        continue
                    taken = min(left, free[zone][kind])
                    free[zone][kind] -= taken
                    left -= taken
    return dict((node["id"], [_resource(kind, _memory_capacity(node, kind), usable[node["id"]][kind],
                                        free[node["id"]][kind], _bytes) for kind in kinds]) for node in zones)


def _devices(zones, allocatable, assigned):
    """{zone id: [resource, ...]} for the device resources with a NUMA topology, by name."""
    ids = set(node["id"] for node in zones)
    where = {}  # (resource, device id): set of zones
    for entry in allocatable.get("devices") or []:
        nodes = set(entry.get("nodes") or []) & ids
        if not nodes:
            continue
        for device in entry.get("device_ids") or []:
            where.setdefault((entry["resource_name"], device), set()).update(nodes)
    taken = set()
    for pod in assigned:
        for container in pod.get("containers") or []:
            for entry in container.get("devices") or []:
                taken.update((entry.get("resource_name"), device) for device in entry.get("device_ids") or [])
    counts = {}  # zone: {resource: [allocatable, used]}
    for key, nodes in where.items():
        for zone in nodes:
            tally = counts.setdefault(zone, {}).setdefault(key[0], [0, 0])
            tally[0] += 1
            tally[1] += int(key in taken)
    return dict((zone, [_resource(name, total, total, total - used, _count)
                        for name, (total, used) in sorted(counts.get(zone, {}).items())]) for zone in ids)


def _costs(node):
    distances = node.get("distances") or {}
    return [{"name": zone_name(int(other)), "value": int(distances[other])}
            for other in sorted(distances, key=int)]


def attributes(kubelet_config, assigned):
    """The top-level attributes: kubelet's Topology Manager settings and the pods fingerprint."""
    options = kubelet_config.get("topologyManagerPolicyOptions") or {}
    result = [{"name": POLICY_ATTRIBUTE, "value": kubelet_config.get("topologyManagerPolicy") or "none"},
              {"name": SCOPE_ATTRIBUTE, "value": kubelet_config.get("topologyManagerScope") or "container"}]
    if str(options.get("max-allowable-numa-nodes") or "").isdigit():
        result.append({"name": MAX_NUMA_NODES_ATTRIBUTE, "value": str(options["max-allowable-numa-nodes"])})
    pods = [(pod.get("namespace") or "", pod.get("name") or "") for pod in assigned]
    result.append({"name": podfingerprint.ATTRIBUTE, "value": podfingerprint.fingerprint(pods)})
    result.append({"name": podfingerprint.ATTRIBUTE_METHOD, "value": podfingerprint.METHOD_ALL})
    return result


def nrt_object(node_name, topology, kubelet_config, allocatable, assigned):
    """The node's NodeResourceTopology (no ownerReferences, annotations or resourceVersion).

    ``topology``: ``topology.SysfsReader(sysfs).read(include_pci=False)``; ``kubelet_config``: the
    configuration kubelet runs (its ``/configz``); ``allocatable``: PodResources
    ``GetAllocatableResources`` ({cpu_ids, memory: [{memory_type, size, nodes}], devices:
    [{resource_name, device_ids, nodes}]}); ``assigned``: PodResources ``List`` ([{namespace,
    name, containers: [{cpu_ids, memory, devices}]}]).
    """
    allocatable = allocatable or {}
    assigned = list(assigned or [])
    zones = sorted(topology["nodes"], key=lambda node: node["id"])
    cpu_bound = (kubelet_config.get("cpuManagerPolicy") or "none") == "static"
    memory_bound = (kubelet_config.get("memoryManagerPolicy") or "None") == "Static"
    kinds = ["memory"] + _hugepage_sizes(topology, allocatable)
    cpu = _cpu(topology, zones, cpu_bound, allocatable, assigned)
    memory = _memory(topology, zones, kinds, memory_bound, allocatable, assigned)
    devices = _devices(zones, allocatable, assigned)
    return {
        "apiVersion": NRT_API,
        "kind": NRT_KIND,
        "metadata": {"name": node_name, "labels": dict(PUBLISHER_LABELS)},
        "zones": [{"name": zone_name(node["id"]), "type": ZONE_TYPE, "costs": _costs(node),
                   "resources": [cpu[node["id"]]] + memory[node["id"]] + devices[node["id"]]} for node in zones],
        "attributes": attributes(kubelet_config, assigned),
    }


def zone_summary(obj):
    """One line for a log: each zone's available cpu and memory, e.g. ``node-0 cpu 3/4 memory 1Gi/2Gi``."""
    parts = []
    for zone in obj.get("zones") or []:
        shown = [zone["name"]]
        for resource in zone.get("resources") or []:
            if resource["name"] in ("cpu", "memory"):
                shown.append("%s %s/%s" % (resource["name"], resource["available"], resource["allocatable"]))
        parts.append(" ".join(shown))
    return ", ".join(parts)
