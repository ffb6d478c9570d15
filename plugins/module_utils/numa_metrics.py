# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA exporter's metrics, as Prometheus text, without third-party imports.

A ``Scraper`` reads the node's static topology once (NUMA nodes, their CPUs and distances, huge page
sizes, each PCI device's NUMA node) and again only when the online CPUs or nodes change; each scrape
reads just what moves: every node's meminfo, numastat and free huge pages, the containers'
``memory.numa_stat`` in the cgroup tree, and what kubelet has assigned, handed in as plain data by
the caller (the node agent reads it from kubelet's PodResources API). Names follow Prometheus'
conventions, except the compatibility names in ``COMPATIBILITY`` that existing dashboards query.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import time

from ansible_collections.numa.kube.plugins.module_utils.topology import TopologyError, parse_cpu_list

# Names kept for what users already query (the openFuyao guide's numa_node_cpus_count); promtool
# flags them ("_count" belongs to histograms and summaries) and is told to expect it.
COMPATIBILITY = ("numa_node_cpus_count",)

# numastat fields, as the kernel names them, in the order it prints them
NUMASTAT_EVENTS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")

# memory.numa_stat rows reported per container (bytes per NUMA node)
NUMA_STAT_TYPES = ("anon", "file")

_CONTAINER_ID = re.compile(r"(?:^|[-_])([0-9a-f]{64})(?:\.scope)?$")
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$")


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if isinstance(value, float) and value != int(value):
        return repr(value)
    return str(int(value))


class Family(object):
    """One metric family: name, type, help and samples (a tuple of label pairs, value)."""

    def __init__(self, name, kind, documentation):
        self.name = name
        self.kind = kind
        self.documentation = documentation
        self.samples = []

    def add(self, labels, value):
        self.samples.append((tuple(labels), value))
        return self

    def lines(self):
        # text format 0.0.4 names a counter's family by its sample name, _total included
        name = self.name + ("_total" if self.kind == "counter" and not self.name.endswith("_total") else "")
        yield "# HELP %s %s" % (name, self.documentation)
        yield "# TYPE %s %s" % (name, self.kind)
        for labels, value in self.samples:
            text = ",".join('%s="%s"' % (key, _escape(val)) for key, val in labels)
            yield "%s%s %s" % (name, "{%s}" % text if text else "", _number(value))


def render(families):
    """The Prometheus text exposition (format 0.0.4) of the families, in order."""
    lines = []
    for family in families:
        lines.extend(family.lines())
    return "\n".join(lines) + "\n"


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return default


def _read_int(path, default=0):
    text = _read(path)
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


class Topology(object):
    """What changes only when CPUs or nodes go on- or offline: read once, then kept."""

    def __init__(self, sysfs_root):
        self.sysfs_root = sysfs_root
        node_dir = os.path.join(sysfs_root, "devices/system/node")
        self.signature = self.current_signature(sysfs_root)
        cpu_text, node_text = self.signature
        online = set(parse_cpu_list(cpu_text.strip())) if cpu_text else None
        if node_text:
            ids = parse_cpu_list(node_text.strip())
        else:
            ids = sorted(int(name[4:]) for name in _listdir(node_dir) if name[4:].isdigit() and name.startswith("node"))
        self.nodes = []
        self.cpu_node = {}
        for node in ids:
            folder = os.path.join(node_dir, "node%d" % node)
            cpus = [c for c in parse_cpu_list((_read(os.path.join(folder, "cpulist")) or "").strip())
                    if online is None or c in online]
            for cpu in cpus:
                self.cpu_node[cpu] = node
            distances = (_read(os.path.join(folder, "distance")) or "").split()
            hugepages = sorted(name for name in _listdir(os.path.join(folder, "hugepages"))
                               if name.startswith("hugepages-"))
            self.nodes.append({
                "id": node, "folder": folder, "cpus": cpus,
                "distances": [(ids[i], int(value)) for i, value in enumerate(distances) if i < len(ids)],
                # (size label, folder): 2048kB as the kernel names the size
                "hugepages": [(name[len("hugepages-"):], os.path.join(folder, "hugepages", name)) for name in hugepages],
            })
        self.pci = []
        pci_dir = os.path.join(sysfs_root, "bus/pci/devices")
        for address in sorted(_listdir(pci_dir)):
            folder = os.path.join(pci_dir, address)
            self.pci.append((address, (_read(os.path.join(folder, "class")) or "").strip(),
                             (_read(os.path.join(folder, "vendor")) or "").strip(),
                             (_read(os.path.join(folder, "device")) or "").strip(),
                             _read_int(os.path.join(folder, "numa_node"), -1)))
        self.static_text = render(self._static_families())

    @staticmethod
    def current_signature(sysfs_root):
        return (_read(os.path.join(sysfs_root, "devices/system/cpu/online")),
                _read(os.path.join(sysfs_root, "devices/system/node/online")))

    def _static_families(self):
        count = Family("numa_node_cpus_count", "gauge", "Online CPUs of the NUMA node (compatibility name; "
                       "numa_node_cpus_online is the same).")
        online = Family("numa_node_cpus_online", "gauge", "Online CPUs of the NUMA node.")
        distance = Family("numa_node_distance", "gauge", "ACPI SLIT distance from the NUMA node to another "
                          "(10 is local).")
        pci = Family("numa_pci_device_info", "gauge", "A PCI device and the NUMA node it is attached to "
                     "(-1: the firmware gives none).")
        for node in self.nodes:
            label = (("numa_node", node["id"]),)
            count.add(label, len(node["cpus"]))
            online.add(label, len(node["cpus"]))
            for other, value in node["distances"]:
                distance.add((("numa_node", node["id"]), ("to_node", other)), value)
        for address, klass, vendor, device, numa in self.pci:
            pci.add((("address", address), ("class", klass), ("vendor", vendor), ("device", device),
                     ("numa_node", numa)), 1)
        return [count, online, distance, pci]


def _listdir(path):
    try:
        return os.listdir(path)
    except (IOError, OSError):
        return []


MEMINFO_FIELDS = ("MemTotal:", "MemFree:", "FilePages:")


def parse_meminfo(text):
    """MemTotal, MemFree and FilePages in bytes from a node's meminfo (``Node N MemTotal: 123 kB``)."""
    values = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in MEMINFO_FIELDS:
            values[parts[2][:-1]] = int(parts[3]) * 1024
            if len(values) == len(MEMINFO_FIELDS):
                break
    return values.get("MemTotal", 0), values.get("MemFree", 0), values.get("FilePages", 0)


def parse_numa_stat(text, types=NUMA_STAT_TYPES):
    """{(type, node): bytes} from a cgroup's memory.numa_stat (``anon N0=123 N1=0``)."""
    result = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts or parts[0] not in types:
            continue
        for field in parts[1:]:
            node, _sep, value = field.partition("=")
            if node.startswith("N") and value.isdigit():
                result[(parts[0], int(node[1:]))] = int(value)
    return result


def container_cgroups(cgroup_root):
    """{container id: cgroup folder} of every container under kubelet's kubepods tree.

    Both cgroup drivers are understood: ``kubepods/burstable/pod<uid>/<id>`` (cgroupfs) and
    ``kubepods.slice/.../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`` (systemd).
    """
    found = {}
    stack = [os.path.join(cgroup_root, name) for name in _listdir(cgroup_root) if name.startswith("kubepods")]
    while stack:
        folder = stack.pop()
        for name in _listdir(folder):
            path = os.path.join(folder, name)
            match = _CONTAINER_ID.search(name)
            if match:
                found[match.group(1)] = path
            elif name.startswith("kubepods") or _POD_UID.search(name) or name in ("burstable", "besteffort"):
                stack.append(path)
    return found


def _nodes_label(nodes):
    return ",".join(str(n) for n in sorted(nodes)) if nodes else "none"


def checkpoint_data(kubelet_root, cpu_node):
    """(assigned, allocatable, problems) from kubelet's CPU and Memory Manager checkpoints.

    The fallback of the systemd exporter, on nodes where kubelet's PodResources API cannot be
    reached from Python (no gRPC): the checkpoints are kubelet's internal files, keyed by pod UID,
    so containers are named by UID, and they may change between kubelet versions. ``assigned``
    has the shape PodResources' List gives; ``allocatable`` covers memory only.
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


class Scraper(object):
    """Renders one scrape: the static text, then what moved since the last one."""

    def __init__(self, sysfs_root="/sys", cgroup_root=None):
        self.sysfs_root = sysfs_root
        self.cgroup_root = cgroup_root
        self.topology = Topology(sysfs_root)

    def refresh_topology(self):
        """Read the static topology again if CPUs or nodes went on- or offline.

        Returns None, or why the new topology could not be read (the last good one is kept).
        """
        if Topology.current_signature(self.sysfs_root) == self.topology.signature:
            return None
        try:
            self.topology = Topology(self.sysfs_root)
        except (ValueError, TopologyError) as exc:
            return str(exc)
        return None

    def node_families(self):
        total = Family("numa_node_memory_total_bytes", "gauge", "Memory of the NUMA node (MemTotal).")
        free = Family("numa_node_memory_free_bytes", "gauge", "Free memory of the NUMA node (MemFree).")
        used = Family("numa_node_memory_used_bytes", "gauge", "Memory in use on the NUMA node (MemTotal - MemFree).")
        files = Family("numa_node_memory_file_bytes", "gauge", "Page cache and shared memory on the NUMA node "
                       "(FilePages), most of it reclaimable.")
        huge_total = Family("numa_node_hugepages", "gauge", "Huge pages reserved on the NUMA node, per page size.")
        huge_free = Family("numa_node_hugepages_free", "gauge", "Free huge pages on the NUMA node, per page size.")
        numastat = Family("numa_node_numastat_pages", "counter", "Pages allocated, by the kernel's numastat "
                          "event: numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node.")
        for node in self.topology.nodes:
            label = ("numa_node", node["id"])
            mem_total, mem_free, file_pages = parse_meminfo(_read(os.path.join(node["folder"], "meminfo")))
            total.add((label,), mem_total)
            free.add((label,), mem_free)
            used.add((label,), max(mem_total - mem_free, 0))
            files.add((label,), file_pages)
            for size, folder in node["hugepages"]:
                huge_total.add((label, ("size", size)), _read_int(os.path.join(folder, "nr_hugepages")))
                huge_free.add((label, ("size", size)), _read_int(os.path.join(folder, "free_hugepages")))
            for line in (_read(os.path.join(node["folder"], "numastat")) or "").splitlines():
                name, _sep, value = line.partition(" ")
                if name in NUMASTAT_EVENTS:
                    numastat.add((label, ("event", name)), int(value))
        return [total, free, used, files, huge_total, huge_free, numastat]

    def assignment_families(self, assigned, allocatable):
        """What kubelet assigned (PodResources List) and may assign (GetAllocatableResources).

        ``assigned``: [{namespace, name, containers: [{name, cpu_ids, memory: [{memory_type, size,
        nodes}], devices: [{resource_name, device_ids, nodes}]}]}]; ``allocatable``: {cpu_ids,
        memory, devices} of the same shapes. Either may be None when kubelet could not be asked.
        """
        cpu_node = self.topology.cpu_node
        node_ids = [n["id"] for n in self.topology.nodes]
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
                memory.add((("numa_node", _nodes_label(block.get("nodes"))),
                            ("resource", block.get("memory_type", ""))), block.get("size", 0))
            families += [cpus, memory]
        if assigned is not None:
            exclusive = Family("numa_node_cpus_exclusive", "gauge", "CPUs of the NUMA node assigned exclusively "
                               "to containers.")
            per_container = Family("numa_container_cpus_exclusive", "gauge", "CPUs assigned exclusively to a "
                                   "container, per NUMA node.")
            memory = Family("numa_container_memory_assigned_bytes", "gauge", "Memory kubelet's memory manager "
                            "assigned to a container, per NUMA node (a comma-separated group when the block "
                            "spans several) and resource.")
            node_memory = {}
            devices = Family("numa_container_devices", "gauge", "Devices assigned to a container, per resource "
                             "and NUMA node of the devices (a comma-separated group, or none).")
            totals = dict((n, 0) for n in node_ids)
            for pod in assigned:
                for container in pod.get("containers") or []:
                    who = (("namespace", pod.get("namespace", "")), ("pod", pod.get("name", "")),
                           ("container", container.get("name", "")))
                    counts = {}
                    for cpu in container.get("cpu_ids") or []:
                        node = cpu_node.get(cpu, -1)
                        counts[node] = counts.get(node, 0) + 1
                        if node in totals:
                            totals[node] += 1
                    for node in sorted(counts):
                        per_container.add(who + (("numa_node", node),), counts[node])
                    for block in container.get("memory") or []:
                        key = (_nodes_label(block.get("nodes")), block.get("memory_type", ""))
                        memory.add(who + (("numa_node", key[0]), ("resource", key[1])), block.get("size", 0))
                        node_memory[key] = node_memory.get(key, 0) + block.get("size", 0)
                    grouped = {}
                    for device in container.get("devices") or []:
                        key = (device.get("resource_name", ""), _nodes_label(device.get("nodes")))
                        grouped[key] = grouped.get(key, 0) + len(device.get("device_ids") or [])
                    for (resource, nodes), count in sorted(grouped.items()):
                        devices.add(who + (("resource", resource), ("numa_node", nodes)), count)
            for node in node_ids:
                exclusive.add((("numa_node", node),), totals[node])
            node_assigned = Family("numa_node_memory_assigned_bytes", "gauge", "Memory kubelet's memory manager "
                                   "assigned to containers, per NUMA node (or group) and resource.")
            for (nodes, resource), size in sorted(node_memory.items()):
                node_assigned.add((("numa_node", nodes), ("resource", resource)), size)
            families += [exclusive, per_container, memory, node_assigned, devices]
        return families

    def locality_family(self, containers):
        """Each known container's memory per NUMA node, from its cgroup's memory.numa_stat.

        ``containers``: {container id: (namespace, pod, container)}; containers without a cgroup
        here (or unknown ids) are left out.
        """
        family = Family("numa_container_memory_bytes", "gauge", "Memory of a container on each NUMA node, by "
                        "type (anon, file), from its cgroup's memory.numa_stat.")
        if not self.cgroup_root or not containers:
            return [family]
        for container_id, folder in sorted(container_cgroups(self.cgroup_root).items()):
            who = containers.get(container_id)
            if who is None:
                continue
            stats = parse_numa_stat(_read(os.path.join(folder, "memory.numa_stat")))
            for (kind, node), value in sorted(stats.items()):
                family.add((("namespace", who[0]), ("pod", who[1]), ("container", who[2]),
                            ("numa_node", node), ("type", kind)), value)
        return [family]

    def scrape(self, assigned=None, allocatable=None, containers=None, extra=()):
        """The whole exposition text of one scrape."""
        started = time.time()
        problem = self.refresh_topology()
        families = self.node_families()
        families += self.assignment_families(assigned, allocatable)
        families += self.locality_family(containers)
        families += list(extra)
        families.append(Family("numa_exporter_topology_error", "gauge", "1 when the changed topology could not "
                               "be read (the exporter goes on with the last one it read).").add((), 1 if problem else 0))
        duration = Family("numa_exporter_scrape_duration_seconds", "gauge", "Time the exporter took to read "
                          "the node for this scrape.").add((), round(time.time() - started, 6))
        return self.topology.static_text + render(families + [duration])
