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
compares (``nodeTopologyPodsFingerprint``, podfingerprint.py) with its method
(``nodeTopologyPodsFingerprintMethod``).

Which pods the fingerprint names. The over-reserving cache (scheduler-plugins v0.34.7,
``cache/overreserve.go`` ``Resync``) takes a node's object again only when the fingerprint in it
equals the one it signs over the node's pods: with ``informerMode: Shared`` the pods of the
scheduler's informer in phase ``Running`` (``podprovider.IsPodRelevantShared``); with the method
``with-exclusive-resources`` (read from the object: ``resyncMethod`` Autodetect, the default) only
those of them ``resourcerequests.AreExclusiveForPod`` calls exclusive: a request for any
non-native (extended, device) resource in any QoS class, or a Guaranteed pod asking for whole
CPUs, memory or huge pages, which is every Guaranteed pod (its memory request is never 0).
kubelet's PodResources ``List`` names its active pods, phase ``Pending`` included, without their
QoS class or phase; what it does show is what kubelet gave each container: exclusive CPU ids
(static CPU Manager, whole CPUs of Guaranteed pods), memory blocks (Static Memory Manager: every
Guaranteed pod) and device ids (every pod given a device-plugin resource). So:

- under ``memoryManagerPolicy: Static`` the fingerprint names, with the method
  ``with-exclusive-resources``, the pods List shows holding CPU ids, memory blocks or device ids:
  the scheduler's exclusive pods as kubelet admitted them;
- otherwise a Guaranteed pod with a fraction of a CPU (or any, without the static CPU Manager)
  shows nothing in List while the scheduler counts it, which would make every resync miss for as
  long as it runs; the fingerprint then names every pod List shows, with the method ``all``.

What is left: a pod kubelet admitted that is not ``Running`` yet (its image pulling or missing, a
container it cannot create, init containers still running) is in List and not in the scheduler's
set (under ``all`` any such pod, under ``with-exclusive-resources`` only one holding exclusive
resources: a stuck Guaranteed pod); also a pod whose only non-native request is an extended
resource no device plugin serves, or is in a non-sidecar init container (the scheduler counts
it, List shows no device). While such a pod stays, a node the cache marked (foreign pods, or
refused after its reserves) keeps answering "invalid node topology data" or keeps its reserves;
the scheduler's ``--v=4`` log says "NodeTopology podset fingerprint mismatch" for it at each
resync. It clears when the pod runs or goes.

Ownership: numa.kube's object carries the managed-by label and no other writer's changes. NFD's
topology-updater and the resource-topology-exporter update an existing object keeping its labels,
so an updater that starts after numa.kube's publisher leaves numa.kube's label on an object it now
writes; the API server records who wrote ``zones``, ``attributes`` and the deprecated
``topologyPolicies`` in ``metadata.managedFields``. ``is_ours`` takes an object for numa.kube's only
when no manager other than numa.kube's own (its publisher's ``PUBLISHER_FIELD_MANAGER``, its
modules' ``k8s.objects.FIELD_MANAGER``) owns any of them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.numa import podfingerprint
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import FIELD_MANAGER
from ansible_collections.numa.kube.plugins.module_utils.quantity import bytes_quantity

NRT_API = "topology.node.k8s.io/v1alpha2"
NRT_KIND = "NodeResourceTopology"
NRT_COLLECTION = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
# the labels of an NRT numa.kube's publisher made; an object of the node's name without the
# managed-by label belongs to someone else (NFD's topology-updater...) and is left alone
MANAGED_BY = "app.kubernetes.io/managed-by"
PUBLISHER_LABELS = {MANAGED_BY: "numa.kube", "numa.kube/stack": "topology"}
# the field manager the publisher's writes name (the API server records it in managedFields)
PUBLISHER_FIELD_MANAGER = "numa-kube-nrt-publisher"
OWN_MANAGERS = (PUBLISHER_FIELD_MANAGER, FIELD_MANAGER)
# the fields a topology publisher writes (managedFields' FieldsV1 keys): numa.kube's writes zones
# and attributes; older updaters (the resource-topology-exporter, NFD before v0.14) also write the
# deprecated topologyPolicies, which makes them co-writers all the same
CONTENT_FIELDS = ("f:zones", "f:attributes", "f:topologyPolicies")
ZONE_TYPE = "Node"

POLICY_ATTRIBUTE = "topologyManagerPolicy"
SCOPE_ATTRIBUTE = "topologyManagerScope"
MAX_NUMA_NODES_ATTRIBUTE = "topologyManagerMaxNUMANodes"
HUGEPAGES_PREFIX = "hugepages-"


def zone_name(node_id):
    return "node-%d" % node_id


def _object(value):
    """``value`` when it is a JSON object, else an empty one (an answer of the wrong shape)."""
    return value if isinstance(value, dict) else {}


def co_writers(obj):
    """The managers other than numa.kube's own that ``metadata.managedFields`` shows owning an NRT's
    ``zones``, ``attributes`` or ``topologyPolicies`` (sorted; empty when none)."""
    names = set()
    entries = _object(_object(obj).get("metadata")).get("managedFields") or []
    for entry in entries if isinstance(entries, list) else [entries]:
        if not isinstance(entry, dict):
            names.add("(an entry that is no object)")  # unreadable: not taken for numa.kube's
            continue
        manager = entry.get("manager") if isinstance(entry.get("manager"), str) else ""
        fields = entry.get("fieldsV1") if isinstance(entry.get("fieldsV1"), dict) else {}
        # an entry of another manager whose fields cannot be read (none, or not an object) may own anything
        if manager not in OWN_MANAGERS and (any(field in fields for field in CONTENT_FIELDS)
                                            or not isinstance(entry.get("fieldsV1"), dict)):
            names.add(manager or "(unnamed)")
    return sorted(names)


def foreign_reason(obj):
    """Why an existing NRT object is not numa.kube's, in words; None when it is (``is_ours``)."""
    metadata = _object((obj if isinstance(obj, dict) else {}).get("metadata"))
    label = _object(metadata.get("labels")).get(MANAGED_BY)
    if label != PUBLISHER_LABELS[MANAGED_BY]:
        entries = metadata.get("managedFields") if isinstance(metadata.get("managedFields"), list) else []
        managers = sorted(set(entry["manager"] if isinstance(entry, dict) and isinstance(entry.get("manager"), str)
                              and entry["manager"] else "?" for entry in entries))
        label = label if isinstance(label, str) else None
        return "no label %s=%s; written by %s" % (MANAGED_BY, PUBLISHER_LABELS[MANAGED_BY],
                                                  label or ", ".join(managers) or "unknown")
    others = co_writers(obj)
    if others:
        return ("labelled numa.kube's, but its managedFields show %s writing its zones, attributes or "
                "topologyPolicies: another "
                "topology updater shares it; keep one: take the node out of numa.kube's publisher_node_selector, "
                "or stop the other updater there and delete the object (numa.kube's publisher then makes its own)"
                % ", ".join(others))
    return None


def is_ours(obj):
    """Whether an NRT object is numa.kube's: its managed-by label, and no manager other than numa.kube's
    own owns its zones, attributes or topologyPolicies in ``metadata.managedFields``."""
    return foreign_reason(obj) is None


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


def holds_exclusive(pod):
    """Whether List shows kubelet gave one of the pod's containers exclusive CPU ids, memory blocks or
    device ids (any device: the scheduler counts every non-native request, NUMA-bound or not)."""
    for container in pod.get("containers") or []:
        if container.get("cpu_ids") or container.get("memory"):
            return True
        if any(entry.get("device_ids") for entry in container.get("devices") or []):
            return True
    return False


def fingerprint_method(kubelet_config):
    """``with-exclusive-resources`` when kubelet runs the Static Memory Manager (List then shows memory
    blocks for every Guaranteed pod, as the scheduler counts them), else ``all`` (see the module's text)."""
    if (kubelet_config.get("memoryManagerPolicy") or "None") == "Static":
        return podfingerprint.METHOD_WITH_EXCLUSIVE_RESOURCES
    return podfingerprint.METHOD_ALL


def fingerprint_pods(kubelet_config, assigned):
    """(method, [(namespace, name), ...]): the pods the fingerprint names, of those List shows."""
    method = fingerprint_method(kubelet_config)
    return method, [(pod.get("namespace") or "", pod.get("name") or "") for pod in assigned
                    if method == podfingerprint.METHOD_ALL or holds_exclusive(pod)]


def attributes(kubelet_config, assigned):
    """The top-level attributes: kubelet's Topology Manager settings and the pods fingerprint."""
    options = kubelet_config.get("topologyManagerPolicyOptions") or {}
    result = [{"name": POLICY_ATTRIBUTE, "value": kubelet_config.get("topologyManagerPolicy") or "none"},
              {"name": SCOPE_ATTRIBUTE, "value": kubelet_config.get("topologyManagerScope") or "container"}]
    if str(options.get("max-allowable-numa-nodes") or "").isdigit():
        result.append({"name": MAX_NUMA_NODES_ATTRIBUTE, "value": str(options["max-allowable-numa-nodes"])})
    method, pods = fingerprint_pods(kubelet_config, assigned)
    result.append({"name": podfingerprint.ATTRIBUTE, "value": podfingerprint.fingerprint(pods)})
    result.append({"name": podfingerprint.ATTRIBUTE_METHOD, "value": method})
    return result


def nrt_object(node_name, topology, kubelet_config, allocatable, assigned):
    """The node's NodeResourceTopology (no ownerReferences, annotations or resourceVersion).

    ``topology``: ``numa.sysfs.SysfsReader(sysfs).read(include_pci=False)``; ``kubelet_config``: the
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
