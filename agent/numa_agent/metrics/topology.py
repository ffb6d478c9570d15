# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's static collector: NUMA nodes, their CPUs and distances, and each PCI device's node.

Read once through numa.sysfs.SysfsReader (the reader topology_facts uses) and again only when the
online CPUs or nodes change; the families are rendered to text once per reading.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from numa_agent.metrics.text import Family, render
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader, parse_cpu_list, read_file


class Topology(object):
    """What changes only when CPUs or nodes go on- or offline: read once, then kept.

    ``nodes``: [{id, folder, cpus, distances, hugepages}] (SysfsReader.node_layout), ``cpu_node``:
    {cpu: node}, ``pci``: [(address, class, vendor, device, node)], ``static_text``: the families.
    """

    def __init__(self, sysfs_root):
        self.sysfs_root = sysfs_root
        reader = SysfsReader(sysfs_root)
        self.signature = self.current_signature(sysfs_root)
        cpu_text = self.signature[0]
        online = parse_cpu_list(cpu_text.strip()) if cpu_text else None
        self.nodes = reader.node_layout(online) or []
        self.cpu_node = {}
        for node in self.nodes:
            for cpu in node["cpus"]:
                self.cpu_node[cpu] = node["id"]
        self.pci = reader.pci_numa()
        self.static_text = render(self.families())

    @staticmethod
    def current_signature(sysfs_root):
        """The online CPU and node lists: the topology is read again when they change."""
        return (read_file(os.path.join(sysfs_root, "devices/system/cpu/online")),
                read_file(os.path.join(sysfs_root, "devices/system/node/online")))

    def families(self):
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
