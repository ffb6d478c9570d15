# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-NUMA-node metrics for the NUMA exporter, as plain data.

Reads sysfs on every call (nodes, CPUs, memory, huge pages, distances; no PCI walk, so a scrape
stays cheap) and kubelet's CPU and Memory Manager checkpoints, read-only, to tell how much of each
node kubelet has handed to containers. The exporter turns the result into Prometheus gauges; this
module has no third-party imports so that it can be unit-tested and shipped on its own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.numa.kube.plugins.module_utils.topology import SysfsReader, parse_cpu_list

CPU_STATE = "cpu_manager_state"
MEMORY_STATE = "memory_manager_state"


class Metric(object):
    """One gauge family: a name, its help text and (labels, value) samples."""

    def __init__(self, name, documentation, label_names):
        self.name = name
        self.documentation = documentation
        self.label_names = tuple(label_names)
        self.samples = []

    def add(self, labels, value):
        self.samples.append((tuple(str(v) for v in labels), float(value)))
        return self


def _load_json(path):
    """(document, error): the parsed JSON checkpoint, or None and why it could not be read."""
    try:
        with open(path) as handle:
            return json.load(handle), None
    except (IOError, OSError) as exc:
        return None, "unreadable: %s" % exc.strerror
    except ValueError as exc:
        return None, "not JSON: %s" % exc


def exclusive_cpus(cpu_state):
    """CPUs the static CPU manager has assigned exclusively to containers."""
    cpus = set()
    for containers in (cpu_state.get("entries") or {}).values():
        for cpuset in (containers or {}).values():
            cpus.update(parse_cpu_list(cpuset))
    return cpus


def collect(sysfs_root="/sys", procfs_root="/proc", kubelet_root="/var/lib/kubelet"):
    """Read everything once and return a list of Metric."""
    facts = SysfsReader(sysfs_root, procfs_root).read(include_pci=False)
    node_label = ("numa_node",)
    cpus = Metric("numa_node_cpus_count", "Online CPUs of the NUMA node.", node_label)
    mem_total = Metric("numa_node_memory_total_bytes", "Memory of the NUMA node (MemTotal).", node_label)
    mem_free = Metric("numa_node_memory_free_bytes", "Free memory of the NUMA node (MemFree).", node_label)
    mem_used = Metric("numa_node_memory_used_bytes", "Memory in use on the NUMA node (MemTotal - MemFree).", node_label)
    huge_total = Metric("numa_node_hugepages_total", "Huge pages allocated on the NUMA node.", ("numa_node", "size"))
    huge_free = Metric("numa_node_hugepages_free", "Free huge pages on the NUMA node.", ("numa_node", "size"))
    distance = Metric("numa_node_distance", "ACPI SLIT distance from the NUMA node to another (10 is local).",
                      ("numa_node", "to_node"))
    exclusive = Metric("numa_node_cpus_exclusive", "CPUs of the NUMA node that kubelet's static CPU manager has "
                       "assigned exclusively to containers.", node_label)
    assigned = Metric("numa_node_memory_assigned_bytes", "Memory of the NUMA node that kubelet's Static memory "
                      "manager has assigned to containers, per resource.", ("numa_node", "resource"))
    allocatable = Metric("numa_node_memory_allocatable_bytes", "Memory of the NUMA node that kubelet's Static memory "
                         "manager may assign to containers, per resource.", ("numa_node", "resource"))
    state_ok = Metric("numa_kubelet_state_readable", "Whether a kubelet checkpoint could be read (1) or not (0); "
                      "absent when the file does not exist.", ("file",))
    policy = Metric("numa_kubelet_manager_policy_info", "Policy recorded in a kubelet checkpoint.", ("manager", "policy"))

    for node in facts["nodes"]:
        label = (node["id"],)
        cpus.add(label, len(node["cpus"]))
        mem_total.add(label, node["memory_total_bytes"])
        mem_free.add(label, node["memory_free_bytes"])
        mem_used.add(label, node["memory_used_bytes"])
        for name, pages in sorted(node["hugepages"].items()):
            size = name[len("hugepages-"):]
            huge_total.add((node["id"], size), pages["total"])
            huge_free.add((node["id"], size), pages["free"])
        for other, value in sorted(node["distances"].items(), key=lambda item: int(item[0])):
            distance.add((node["id"], other), value)

    node_of = dict((c["id"], c["numa_node"]) for c in facts["cpus"])
    cpu_path = os.path.join(kubelet_root, CPU_STATE)
    if os.path.exists(cpu_path):
        document, error = _load_json(cpu_path)
        state_ok.add((CPU_STATE,), 0 if error else 1)
        if document is not None:
            policy.add(("cpu", document.get("policyName", "")), 1)
            taken = exclusive_cpus(document)
            for node in facts["nodes"]:
                exclusive.add((node["id"],), sum(1 for c in taken if node_of.get(c) == node["id"]))

    memory_path = os.path.join(kubelet_root, MEMORY_STATE)
    if os.path.exists(memory_path):
        document, error = _load_json(memory_path)
        state_ok.add((MEMORY_STATE,), 0 if error else 1)
        if document is not None:
            policy.add(("memory", document.get("policyName", "")), 1)
            machine = document.get("machineState") or {}
            for node_id in sorted(machine, key=int):
                for resource, block in sorted((machine[node_id].get("memoryMap") or {}).items()):
                    assigned.add((node_id, resource), block.get("reserved", 0))
                    allocatable.add((node_id, resource), block.get("allocatable", 0))

    return [cpus, mem_total, mem_free, mem_used, huge_total, huge_free, distance, exclusive, assigned,
            allocatable, state_ok, policy]
