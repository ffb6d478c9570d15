# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a machine's NUMA topology from sysfs (and /proc/meminfo), the way kubelet sees it.

Everything is read under a root folder so that recorded trees can stand in for /sys in tests.
Node ids may have gaps; a node may have memory and no CPUs (CXL, a qemu node without CPUs) or
CPUs and no memory. A kernel without NUMA support has no /sys/devices/system/node: the machine
is then reported as one node 0 holding every online CPU and all memory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

from ansible_collections.numa.kube.plugins.module_utils.quantity import bytes_quantity

_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")

# PCI class codes (class, subclass) that matter to NUMA alignment.
_PCI_KINDS = (
    ("nvme", lambda c: c >> 8 == 0x0108 and (c & 0xFF) == 0x02),
    ("network", lambda c: c >> 16 == 0x02),
    ("gpu", lambda c: c >> 16 == 0x03),
    ("accelerator", lambda c: c >> 16 == 0x12),
    ("infiniband", lambda c: c >> 8 == 0x0C06),
)


class SysfsError(Exception):
    """sysfs is missing or unreadable where a value is required."""


# Linux numbers CPUs below its NR_CPUS, at most 8192 on any architecture it builds for: a CPU list
# naming a larger id comes from no machine.
MAX_CPUS = 8192
_CPU_RANGE = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?\Z")


def parse_cpu_list(text, limit=MAX_CPUS):
    """Parse a kernel CPU/node list such as ``0-3,8-11`` into a sorted list of ints.

    Every id must be below ``limit`` (default MAX_CPUS; pass the machine's count of possible CPUs
    when known), checked before anything is expanded, so that ``0-4294967295`` is refused at once
    instead of filling memory. Raises ValueError naming the part at fault.
    """
    text = (text or "").strip()
    if not text:
        return []
    spans = []
    for part in text.split(","):
        if not part.strip():
            continue
        match = _CPU_RANGE.match(part)
        if not match or len(part) > 40:
            raise ValueError("%r is not a CPU id or range such as 4 or 0-3" % part.strip())
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError("range %r runs backwards" % part.strip())
        if high >= limit:
            raise ValueError("%r names CPU %d, but CPU ids stop at %d (%d CPUs at most); check the list"
                             % (part.strip(), high, limit - 1, limit))
        spans.append((low, high))
    result = []
    for low, high in sorted(spans):
        start = max(low, result[-1] + 1) if result else low
        result.extend(range(start, high + 1))
    return result


def format_cpu_list(cpus):
    """The kernel's list form of a set of ids: ``[0, 1, 2, 5]`` -> ``0-2,5``."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in ranges)


def _listdir(path):
    try:
        return os.listdir(path)
    except (IOError, OSError):
        return []


def read_file(path):
    """The text of a small kernel file (sysfs, cgroupfs), or None when it cannot be read.

    One ``read`` of up to 64 KiB without Python's buffered text layer: a sysfs or cgroup attribute
    hands over its whole value in one read (they are at most a page, memory.numa_stat a few KiB).
    """
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(handle, 65536)
        while len(data) % 65536 == 0 and data:  # a larger file: the rest, as it comes
            more = os.read(handle, 65536)
            if not more:
                break
            data += more
    except OSError:
        return None
    finally:
        os.close(handle)
    return data.decode("utf-8", "replace")


class SysfsReader(object):
    """Reads NUMA facts under ``sysfs_root`` (default /sys) and ``procfs_root`` (default /proc)."""

    def __init__(self, sysfs_root="/sys", procfs_root="/proc"):
        self.sys = sysfs_root
        self.proc = procfs_root

    # small helpers -------------------------------------------------------------------------
    def _path(self, *parts):
        return os.path.join(self.sys, *parts)

    @staticmethod
    def _read(path, default=None):
        try:
            with open(path) as handle:
                return handle.read().strip()
        except (IOError, OSError):
            return default

    def _read_int(self, path, default=None):
        text = self._read(path)
        if text is None or text == "":
            return default
        try:
            return int(text, 0)
        except ValueError:
            return default

    @staticmethod
    def _meminfo(text, prefix=""):
        """Parse meminfo lines (``[Node N ]Key: value kB``) into {key: bytes}."""
        values = {}
        for line in (text or "").splitlines():
            if prefix and line.startswith(prefix):
                line = line[len(prefix):]
            if ":" not in line:
                continue
            key, rest = line.split(":", 1)
            fields = rest.split()
            if not fields:
                continue
            try:
                number = int(fields[0])
            except ValueError:
                continue
            if len(fields) > 1 and fields[1].lower() == "kb":
                number *= 1024
            values[key.strip()] = number
        return values

    # facts ---------------------------------------------------------------------------------
    def online_cpus(self):
        text = self._read(self._path("devices/system/cpu/online"))
        if text is None:
            cpus = []
            for path in glob.glob(self._path("devices/system/cpu/cpu[0-9]*")):
                online = self._read(os.path.join(path, "online"), "1")
                if online == "1":
                    cpus.append(int(os.path.basename(path)[3:]))
            if not cpus:
                raise SysfsError("no CPUs found under %s" % self._path("devices/system/cpu"))
            return sorted(cpus)
        return parse_cpu_list(text)

    def cpu_details(self, cpu):
        base = self._path("devices/system/cpu/cpu%d/topology" % cpu)
        siblings = self._read(os.path.join(base, "thread_siblings_list"))
        if siblings is None:
            siblings = self._read(os.path.join(base, "core_cpus_list"))
        return {
            "id": cpu,
            "socket": self._read_int(os.path.join(base, "physical_package_id"), 0),
            "core": self._read_int(os.path.join(base, "core_id"), cpu),
            "die": self._read_int(os.path.join(base, "die_id"), 0),
            "thread_siblings": parse_cpu_list(siblings) if siblings else [cpu],
        }

    def hugepages(self, folder):
        result = {}
        for path in sorted(glob.glob(os.path.join(folder, "hugepages-*kB"))):
            size_kb = int(os.path.basename(path)[len("hugepages-"):-2])
            name = "hugepages-" + bytes_quantity(size_kb * 1024).canonical()
            result[name] = {
                "page_size_bytes": size_kb * 1024,
                "total": self._read_int(os.path.join(path, "nr_hugepages"), 0),
                "free": self._read_int(os.path.join(path, "free_hugepages"), 0),
            }
        return result

    def machine_memory(self):
        values = self._meminfo(self._read(os.path.join(self.proc, "meminfo")))
        return values.get("MemTotal"), values.get("MemFree")

    def node_ids(self):
        """The NUMA node ids (``node/online``, else the ``nodeN`` folders), or None without NUMA support."""
        node_dir = self._path("devices/system/node")
        ids_text = self._read(os.path.join(node_dir, "online"))
        if ids_text is not None:
            return parse_cpu_list(ids_text)
        if not os.path.isdir(node_dir):
            return None
        return sorted(int(name[4:]) for name in _listdir(node_dir) if name.startswith("node") and name[4:].isdigit())

    def node_layout(self, online=None):
        """What changes only when CPUs or nodes go on- or offline, per NUMA node: id, folder, its online
        CPUs (all its CPUs when ``online`` is None), distances [(to node, value)] in node order and huge
        page folders [(size as the kernel names it, e.g. 2048kB, folder)]. None without NUMA support."""
        ids = self.node_ids()
        if not ids:
            return None
        online_set = set(online) if online is not None else None
        node_dir = self._path("devices/system/node")
        layout = []
        for node in ids:
            folder = os.path.join(node_dir, "node%d" % node)
            cpus = [c for c in parse_cpu_list(self._read(os.path.join(folder, "cpulist"), ""))
                    if online_set is None or c in online_set]
            raw = (self._read(os.path.join(folder, "distance")) or "").split()
            huge_dir = os.path.join(folder, "hugepages")
            sizes = sorted(name for name in _listdir(huge_dir) if name.startswith("hugepages-"))
            layout.append({
                "id": node,
                "folder": folder,
                "cpus": cpus,
                "distances": [(ids[position], int(value)) for position, value in enumerate(raw) if position < len(ids)],
                "hugepages": [(name[len("hugepages-"):], os.path.join(huge_dir, name)) for name in sizes],
            })
        return layout

    def numa_nodes(self, online):
        """Per-node facts, or None when the kernel has no NUMA support (no node folder)."""
        if not os.path.isdir(self._path("devices/system/node")):
            return None
        layout = self.node_layout(online)
        if not layout:
            return None
        nodes = []
        for node in layout:
            meminfo = self._meminfo(self._read(os.path.join(node["folder"], "meminfo")), "Node %d " % node["id"])
            mem_total = meminfo.get("MemTotal", 0)
            mem_free = meminfo.get("MemFree", 0)
            cpus = node["cpus"]
            nodes.append({
                "id": node["id"],
                "cpus": cpus,
                "cpu_list": format_cpu_list(cpus),
                "has_cpu": bool(cpus),
                "has_memory": mem_total > 0,
                "memory_total_bytes": mem_total,
                "memory_free_bytes": mem_free,
                "memory_used_bytes": max(mem_total - mem_free, 0),
                "hugepages": self.hugepages(os.path.join(node["folder"], "hugepages")),
                "distances": dict((str(other), value) for other, value in node["distances"]),
            })
        return nodes

    def pci_numa(self):
        """[(address, class, vendor, device, NUMA node or -1)] of every PCI device, as sysfs writes them."""
        pci_dir = self._path("bus/pci/devices")
        found = []
        for address in sorted(_listdir(pci_dir)):
            folder = os.path.join(pci_dir, address)
            found.append((address, self._read(os.path.join(folder, "class"), ""),
                          self._read(os.path.join(folder, "vendor"), ""), self._read(os.path.join(folder, "device"), ""),
                          self._read_int(os.path.join(folder, "numa_node"), -1)))
        return found

    def pci_devices(self):
        devices = {}
        for path in sorted(glob.glob(self._path("bus/pci/devices/*"))):
            address = os.path.basename(path)
            code = self._read_int(os.path.join(path, "class"))
            kind = None
            for name, test in _PCI_KINDS:
                if code is not None and test(code):
                    kind = name
                    break
            if kind is None:
                continue
            numa = self._read_int(os.path.join(path, "numa_node"), -1)
            driver = os.path.join(path, "driver")
            device = {
                "address": address,
                "kind": kind,
                "class": "0x%06x" % code,
                "vendor": self._read(os.path.join(path, "vendor")),
                "device": self._read(os.path.join(path, "device")),
                "numa_node": numa if numa is not None and numa >= 0 else None,
                "driver": os.path.basename(os.path.realpath(driver)) if os.path.exists(driver) else None,
                "interfaces": [],
            }
            total_vfs = self._read_int(os.path.join(path, "sriov_totalvfs"))
            if total_vfs:
                device["sriov"] = {
                    "role": "pf",
                    "total_vfs": total_vfs,
                    "num_vfs": self._read_int(os.path.join(path, "sriov_numvfs"), 0),
                    "vfs": sorted(os.path.basename(os.path.realpath(p))
                                  for p in glob.glob(os.path.join(path, "virtfn*"))),
                }
            physfn = os.path.join(path, "physfn")
            if os.path.exists(physfn):
                device["sriov"] = {"role": "vf", "pf": os.path.basename(os.path.realpath(physfn))}
            devices[address] = device
        self._attach(devices, "class/net", "interfaces")
        self._attach(devices, "class/nvme", "interfaces")
        return [devices[a] for a in sorted(devices)]

    def _attach(self, devices, class_dir, field):
        """Name the interfaces (eth0, nvme0) that sit on each PCI device, virtio included."""
        for path in sorted(glob.glob(self._path(class_dir, "*"))):
            target = os.path.realpath(os.path.join(path, "device"))
            while target and target != os.path.dirname(target):
                name = os.path.basename(target)
                if _PCI_ADDRESS.match(name):
                    if name in devices:
                        devices[name][field].append(os.path.basename(path))
                    break
                target = os.path.dirname(target)

    def read(self, include_pci=True):
        online = self.online_cpus()
        cpus = [self.cpu_details(c) for c in online]
        mem_total, mem_free = self.machine_memory()
        nodes = self.numa_nodes(online)
        numa_enabled = nodes is not None
        if not numa_enabled:
            # No NUMA support: one node holds everything, memory comes from /proc/meminfo.
            nodes = [{
                "id": 0,
                "cpus": online,
                "cpu_list": format_cpu_list(online),
                "has_cpu": True,
                "has_memory": bool(mem_total),
                "memory_total_bytes": mem_total or 0,
                "memory_free_bytes": mem_free or 0,
                "memory_used_bytes": max((mem_total or 0) - (mem_free or 0), 0),
                "hugepages": self.hugepages(self._path("kernel/mm/hugepages")),
                "distances": {"0": 10},
            }]
        node_of = {}
        for node in nodes:
            for cpu in node["cpus"]:
                node_of[cpu] = node["id"]
        for cpu in cpus:
            cpu["numa_node"] = node_of.get(cpu["id"])
        if mem_total is None:
            mem_total = sum(n["memory_total_bytes"] for n in nodes)
        page_sizes = dict((name, info["page_size_bytes"]) for n in nodes for name, info in n["hugepages"].items())
        sizes = sorted(page_sizes, key=page_sizes.get)
        threads = dict((c["id"], len(c["thread_siblings"])) for c in cpus)
        facts = {
            "numa_enabled": numa_enabled,
            "node_count": len(nodes),
            "node_ids": [n["id"] for n in nodes],
            "nodes": nodes,
            "nodes_with_cpus": [n["id"] for n in nodes if n["has_cpu"]],
            "nodes_with_memory": [n["id"] for n in nodes if n["has_memory"]],
            "numa_node_memory": dict((str(n["id"]), n["memory_total_bytes"]) for n in nodes),
            "cpus": cpus,
            "cpu_count": len(cpus),
            "sockets": sorted(set(c["socket"] for c in cpus)),
            "hyperthreading": any(count > 1 for count in threads.values()),
            "memory_total_bytes": mem_total,
            "hugepage_sizes": sizes,
        }
        if include_pci:
            facts["pci_devices"] = self.pci_devices()
        return facts
