# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build recorded sysfs/procfs trees for tests: the files topology_facts reads, nothing more."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list

KIB = 1024


def _write(path, text):
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    with open(path, "w") as handle:
        handle.write(text)


class Machine(object):
    """A machine description that writes itself out as /sys and /proc trees.

    ``nodes`` maps node id to dict(cpus=[...], mem_kb=int, free_kb=int, hugepages={size_kb: (total, free)}).
    ``cpus`` maps CPU id to (socket, core); CPUs sharing (socket, core) are hyperthread siblings.
    """

    def __init__(self, nodes=None, cpus=None, distances=None, numa=True, offline=(), mem_total_kb=None):
        self.nodes = nodes or {}
        self.cpus = cpus or {}
        self.distances = distances
        self.numa = numa
        self.offline = set(offline)
        self.mem_total_kb = mem_total_kb
        self.pci = []
        self.hugepages_kb = {}

    def add_pci(self, address, class_code, numa_node=-1, vendor="0x8086", device="0x1572", driver=None,
                net=(), nvme=(), sriov_total=None, vfs=(), physfn=None, virtio_net=()):
        self.pci.append(dict(address=address, class_code=class_code, numa_node=numa_node, vendor=vendor,
                             device=device, driver=driver, net=net, nvme=nvme, sriov_total=sriov_total,
                             vfs=vfs, physfn=physfn, virtio_net=virtio_net))
        return self

    def write(self, root):
        sys_root = os.path.join(root, "sys")
        proc_root = os.path.join(root, "proc")
        online = sorted(c for c in self.cpus if c not in self.offline)
        cpu_dir = os.path.join(sys_root, "devices/system/cpu")
        _write(os.path.join(cpu_dir, "online"), format_cpu_list(online) + "\n")
        for cpu, (socket, core) in self.cpus.items():
            siblings = sorted(c for c, sc in self.cpus.items() if sc == (socket, core) and c not in self.offline)
            base = os.path.join(cpu_dir, "cpu%d" % cpu)
            _write(os.path.join(base, "online"), "0\n" if cpu in self.offline else "1\n")
            if cpu in self.offline:
                continue
            _write(os.path.join(base, "topology/physical_package_id"), "%d\n" % socket)
            _write(os.path.join(base, "topology/core_id"), "%d\n" % core)
            _write(os.path.join(base, "topology/thread_siblings_list"), format_cpu_list(siblings) + "\n")
        total_kb = 0
        free_kb = 0
        ids = sorted(self.nodes)
        if self.numa:
            node_dir = os.path.join(sys_root, "devices/system/node")
            _write(os.path.join(node_dir, "online"), format_cpu_list(ids) + "\n")
            for index, node in enumerate(ids):
                spec = self.nodes[node]
                base = os.path.join(node_dir, "node%d" % node)
                _write(os.path.join(base, "cpulist"), format_cpu_list(spec.get("cpus", [])) + "\n")
                mem = spec.get("mem_kb", 0)
                free = spec.get("free_kb", mem // 2)
                total_kb += mem
                free_kb += free
                _write(os.path.join(base, "meminfo"),
                       "Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n"
                       % (node, mem, node, free, node, mem - free))
                if self.distances:
                    row = self.distances[index]
                else:
                    row = [10 if other == node else 20 for other in ids]
                _write(os.path.join(base, "distance"), " ".join(str(d) for d in row) + "\n")
                stats = spec.get("numastat", {"numa_hit": 1000 * (node + 1), "numa_miss": 10 * node,
                                              "numa_foreign": 5, "interleave_hit": 7,
                                              "local_node": 900 * (node + 1), "other_node": 3})
                _write(os.path.join(base, "numastat"), "".join("%s %d\n" % item for item in stats.items()))
                for size_kb, (count, free_pages) in spec.get("hugepages", {}).items():
                    folder = os.path.join(base, "hugepages/hugepages-%dkB" % size_kb)
                    _write(os.path.join(folder, "nr_hugepages"), "%d\n" % count)
                    _write(os.path.join(folder, "free_hugepages"), "%d\n" % free_pages)
        else:
            for spec in self.nodes.values():
                total_kb += spec.get("mem_kb", 0)
                free_kb += spec.get("free_kb", spec.get("mem_kb", 0) // 2)
            for size_kb, (count, free_pages) in self.hugepages_kb.items():
                folder = os.path.join(sys_root, "kernel/mm/hugepages/hugepages-%dkB" % size_kb)
                _write(os.path.join(folder, "nr_hugepages"), "%d\n" % count)
                _write(os.path.join(folder, "free_hugepages"), "%d\n" % free_pages)
        if self.mem_total_kb is not None:
            total_kb = self.mem_total_kb
        _write(os.path.join(proc_root, "meminfo"),
               "MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n" % (total_kb, free_kb, free_kb))
        self._write_pci(sys_root)
        return sys_root, proc_root

    def _write_pci(self, sys_root):
        devices = os.path.join(sys_root, "devices/pci0000:00")
        bus = os.path.join(sys_root, "bus/pci/devices")
        os.makedirs(bus, exist_ok=True)
        for dev in self.pci:
            path = os.path.join(devices, dev["address"])
            _write(os.path.join(path, "class"), "0x%06x\n" % dev["class_code"])
            _write(os.path.join(path, "numa_node"), "%d\n" % dev["numa_node"])
            _write(os.path.join(path, "vendor"), dev["vendor"] + "\n")
            _write(os.path.join(path, "device"), dev["device"] + "\n")
            os.symlink(os.path.relpath(path, bus), os.path.join(bus, dev["address"]))
            if dev["driver"]:
                driver = os.path.join(sys_root, "bus/pci/drivers", dev["driver"])
                os.makedirs(driver, exist_ok=True)
                os.symlink(os.path.relpath(driver, path), os.path.join(path, "driver"))
            if dev["sriov_total"]:
                _write(os.path.join(path, "sriov_totalvfs"), "%d\n" % dev["sriov_total"])
                _write(os.path.join(path, "sriov_numvfs"), "%d\n" % len(dev["vfs"]))
                for index, vf in enumerate(dev["vfs"]):
                    os.symlink(os.path.join("..", vf), os.path.join(path, "virtfn%d" % index))
            if dev["physfn"]:
                os.symlink(os.path.join("..", dev["physfn"]), os.path.join(path, "physfn"))
            self._class_links(sys_root, "net", path, dev["net"], "net")
            self._class_links(sys_root, "nvme", path, dev["nvme"], "nvme")
            self._class_links(sys_root, "net", os.path.join(path, "virtio0"), dev["virtio_net"], "net")

    @staticmethod
    def _class_links(sys_root, cls, device_path, names, sub):
        for name in names:
            own = os.path.join(device_path, sub, name)
            os.makedirs(own, exist_ok=True)
            os.symlink(os.path.relpath(device_path, own), os.path.join(own, "device"))
            class_dir = os.path.join(sys_root, "class", cls)
            os.makedirs(class_dir, exist_ok=True)
            os.symlink(os.path.relpath(own, class_dir), os.path.join(class_dir, name))


def two_socket_interleaved(hyperthreading=True):
    """Two sockets, 4 cores each; even CPU ids on socket 0, odd on socket 1 (as many Intel servers)."""
    cpus = {}
    per_socket = 4
    threads = 2 if hyperthreading else 1
    for thread in range(threads):
        for core in range(per_socket):
            for socket in range(2):
                cpu = thread * per_socket * 2 + core * 2 + socket
                cpus[cpu] = (socket, core)
    nodes = {
        0: dict(cpus=sorted(c for c, (s, dummy) in cpus.items() if s == 0), mem_kb=8 * 1024 * 1024,
                free_kb=6 * 1024 * 1024, hugepages={2048: (512, 500), 1048576: (2, 2)}),
        1: dict(cpus=sorted(c for c, (s, dummy) in cpus.items() if s == 1), mem_kb=8 * 1024 * 1024,
                free_kb=7 * 1024 * 1024, hugepages={2048: (512, 512), 1048576: (0, 0)}),
    }
    return Machine(nodes=nodes, cpus=cpus, distances=[[10, 21], [21, 10]])


def four_nodes_with_memory_only():
    """Nodes 0, 1, 3 have CPUs; node 5 is memory only (CXL-like); ids are not contiguous; sizes differ."""
    cpus = dict((c, (0 if c < 4 else 1, c % 4)) for c in range(8))
    nodes = {
        0: dict(cpus=[0, 1, 2, 3], mem_kb=4 * 1024 * 1024),
        1: dict(cpus=[4, 5], mem_kb=2 * 1024 * 1024),
        3: dict(cpus=[6, 7], mem_kb=1 * 1024 * 1024),
        5: dict(cpus=[], mem_kb=16 * 1024 * 1024, free_kb=16 * 1024 * 1024),
    }
    distances = [[10, 16, 16, 30], [16, 10, 16, 30], [16, 16, 10, 30], [30, 30, 30, 10]]
    return Machine(nodes=nodes, cpus=cpus, distances=distances)


def non_numa(cpu_count=4, mem_kb=2 * 1024 * 1024):
    cpus = dict((c, (0, c)) for c in range(cpu_count))
    machine = Machine(nodes={0: dict(cpus=list(cpus), mem_kb=mem_kb)}, cpus=cpus, numa=False)
    machine.hugepages_kb = {2048: (16, 8)}
    return machine
