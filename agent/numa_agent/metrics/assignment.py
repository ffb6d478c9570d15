# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's assignment collector: what kubelet assigned to containers and may assign, per NUMA node.

The data comes in as plain data: from kubelet's PodResources API (the node agent) or, where gRPC
is not at hand, from kubelet's CPU and Memory Manager checkpoints (``checkpoint_data``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from numa_agent.metrics.text import Family, label_text
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import parse_cpu_list

# which containers get per-container series (--containers): every one, only those kubelet gave
# exclusive CPUs or NUMA-bound memory or devices, or none (node totals only)
CONTAINER_MODES = ("all", "exclusive", "none")


def nodes_label(nodes):
    return ",".join(str(n) for n in sorted(nodes)) if nodes else "none"


def pinned(container):
    """Whether kubelet gave the container exclusive CPUs, memory blocks or devices bound to a NUMA node."""
    return bool(container.get("cpu_ids") or container.get("memory")
                or any(device.get("nodes") for device in container.get("devices") or []))


def who_text(namespace, pod, container):
    """The rendered namespace, pod and container labels of a container's series."""
    return label_text((("namespace", namespace), ("pod", pod), ("container", container)))


def assignment_families(topology, assigned, allocatable, mode="all"):
    """What kubelet assigned (PodResources List) and may assign (GetAllocatableResources).

    ``assigned``: [{namespace, name, containers: [{name, cpu_ids, memory: [{memory_type, size,
    nodes}], devices: [{resource_name, device_ids, nodes}]}]}]; ``allocatable``: {cpu_ids,
    memory, devices} of the same shapes. Either may be None when kubelet could not be asked.
    ``mode`` (CONTAINER_MODES) limits the per-container families; the node totals count every container.
    """
    cpu_node = topology.cpu_node
    node_ids = [n["id"] for n in topology.nodes]
    families = []
    if allocatable is not None:
        cpus = Family("numa_node_cpus_allocatable", "gauge", "CPUs of the NUMA node that kubelet may assign "
                      "to containers exclusively (its reserved CPUs excluded).")
        if "cpu_ids" in allocatable:
            counts = dict((n, 0) for n in node_ids)
            for cpu in allocatable["cpu_ids"] or []:
                if cpu_node.get(cpu) in counts:
                    counts[cpu_node[cpu]] += 1
            for node in node_ids:
                cpus.add((("numa_node", node),), counts[node])
        memory = Family("numa_node_memory_allocatable_bytes", "gauge", "Memory of the NUMA node that kubelet's "
                        "memory manager may assign to containers, per resource (memory, hugepages-<size>).")
        for block in allocatable.get("memory") or []:
            memory.add((("numa_node", nodes_label(block.get("nodes"))),
                        ("resource", block.get("memory_type", ""))), block.get("size", 0))
        families += [cpus, memory]
    if assigned is None:
        return families
    exclusive = Family("numa_node_cpus_exclusive", "gauge", "CPUs of the NUMA node assigned exclusively "
                       "to containers.")
    per_container = Family("numa_container_cpus_exclusive", "gauge", "CPUs assigned exclusively to a "
                           "container, per NUMA node.")
    memory = Family("numa_container_memory_assigned_bytes", "gauge", "Memory kubelet's memory manager "
                    "assigned to a container, per NUMA node (a comma-separated group when the block "
                    "spans several) and resource.")
    devices = Family("numa_container_devices", "gauge", "Devices assigned to a container, per resource "
                     "and NUMA node of the devices (a comma-separated group, or none).")
    node_memory = {}
    totals = dict((n, 0) for n in node_ids)
    for pod in assigned:
        for container in pod.get("containers") or []:
            report = mode == "all" or (mode == "exclusive" and pinned(container))
            who = who_text(pod.get("namespace", ""), pod.get("name", ""), container.get("name", "")) + ","
            counts = {}
            for cpu in container.get("cpu_ids") or []:
                node = cpu_node.get(cpu, -1)
                counts[node] = counts.get(node, 0) + 1
                if node in totals:
                    totals[node] += 1
            if report:
                for node in sorted(counts):
                    per_container.add_text(who + 'numa_node="%d"' % node, counts[node])
            for block in container.get("memory") or []:
                key = (nodes_label(block.get("nodes")), block.get("memory_type", ""))
                if report:
                    memory.add_text(who + label_text((("numa_node", key[0]), ("resource", key[1]))),
                                    block.get("size", 0))
                node_memory[key] = node_memory.get(key, 0) + block.get("size", 0)
            if not report:
                continue
            grouped = {}
            for device in container.get("devices") or []:
                key = (device.get("resource_name", ""), nodes_label(device.get("nodes")))
                grouped[key] = grouped.get(key, 0) + len(device.get("device_ids") or [])
            for (resource, nodes), count in sorted(grouped.items()):
                devices.add_text(who + label_text((("resource", resource), ("numa_node", nodes))), count)
    for node in node_ids:
        exclusive.add((("numa_node", node),), totals[node])
    node_assigned = Family("numa_node_memory_assigned_bytes", "gauge", "Memory kubelet's memory manager "
                           "assigned to containers, per NUMA node (or group) and resource.")
    for (nodes, resource), size in sorted(node_memory.items()):
        node_assigned.add((("numa_node", nodes), ("resource", resource)), size)
    if mode == "none":
        return families + [exclusive, node_assigned]
    return families + [exclusive, per_container, memory, node_assigned, devices]


def checkpoint_data(kubelet_root, cpu_node=None):
    """(assigned, allocatable, problems) from kubelet's CPU and Memory Manager checkpoints.

    The fallback of the systemd exporter, on nodes where kubelet's PodResources API cannot be
    reached from Python (no gRPC): the checkpoints are kubelet's internal files, keyed by pod UID,
    so containers are named by UID, and they may change between kubelet versions. ``assigned``
    has the shape PodResources' List gives; ``allocatable`` covers memory only. (``cpu_node`` is
    not used; it stays for callers that pass it.)
    """
    problems = []
    containers = {}

    def container(uid, name):
        return containers.setdefault((uid, name), {"name": name, "cpu_ids": [], "memory": []})

    cpu_state, error = _load_json(os.path.join(kubelet_root, "cpu_manager_state"))
    if error:
        problems.append(("cpu_manager_state", error))
    for uid, assigned in ((cpu_state or {}).get("entries") or {}).items():
        for name, cpuset in (assigned or {}).items():
            container(uid, name)["cpu_ids"].extend(parse_cpu_list(cpuset))
    memory_state, error = _load_json(os.path.join(kubelet_root, "memory_manager_state"))
    if error:
        problems.append(("memory_manager_state", error))
    for uid, assigned in ((memory_state or {}).get("entries") or {}).items():
        for name, blocks in (assigned or {}).items():
            for block in blocks or []:
                container(uid, name)["memory"].append({"memory_type": block.get("type", ""),
                                                       "size": block.get("size", 0),
                                                       "nodes": block.get("numaAffinity") or []})
    allocatable = None
    machine = (memory_state or {}).get("machineState")
    if machine:
        allocatable = {"memory": [{"memory_type": resource, "size": block.get("allocatable", 0), "nodes": [int(node)]}
                                  for node, state in sorted(machine.items(), key=lambda item: int(item[0]))
                                  for resource, block in sorted((state.get("memoryMap") or {}).items())]}
    pods = {}
    for (uid, _name), data in sorted(containers.items()):
        pods.setdefault(uid, {"namespace": "", "name": uid, "containers": []})["containers"].append(data)
    return (list(pods.values()) if cpu_state is not None or memory_state is not None else None), allocatable, problems


def _load_json(path):
    """(document, error): a kubelet checkpoint, None and None when absent, or None and why unreadable."""
    if not os.path.exists(path):
        return None, None
    try:
        with open(path) as handle:
            return json.load(handle), None
    except (IOError, OSError) as exc:
        return None, "unreadable: %s" % exc.strerror
    except ValueError as exc:
        return None, "not JSON: %s" % exc
