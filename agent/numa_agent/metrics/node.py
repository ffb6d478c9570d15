# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's node collector: each NUMA node's meminfo, free huge pages and numastat, every scrape.

The file names and label texts are worked out once per topology (metrics.topology.Topology);
a scrape only reads the files and parses the few lines it reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from numa_agent.metrics.text import Family, label_text
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import read_file

# numastat fields, as the kernel names them, in the order it prints them
NUMASTAT_EVENTS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")

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


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


class NodeCollector(object):
    """Reads the moving per-node values of one topology."""

    def __init__(self, topology):
        self.topology = topology
        self.plan = []
        for node in topology.nodes:
            folder = node["folder"]
            label = label_text((("numa_node", node["id"]),))
            huge = [(label_text((("numa_node", node["id"]), ("size", size))), os.path.join(path, "nr_hugepages"),
                     os.path.join(path, "free_hugepages")) for size, path in node["hugepages"]]
            events = dict((name, label_text((("numa_node", node["id"]), ("event", name)))) for name in NUMASTAT_EVENTS)
            self.plan.append((label, os.path.join(folder, "meminfo"), os.path.join(folder, "numastat"), huge, events))

    def families(self):
        total = Family("numa_node_memory_total_bytes", "gauge", "Memory of the NUMA node (MemTotal).")
        free = Family("numa_node_memory_free_bytes", "gauge", "Free memory of the NUMA node (MemFree).")
        used = Family("numa_node_memory_used_bytes", "gauge", "Memory in use on the NUMA node (MemTotal - MemFree).")
        files = Family("numa_node_memory_file_bytes", "gauge", "Page cache and shared memory on the NUMA node "
                       "(FilePages), most of it reclaimable.")
        huge_total = Family("numa_node_hugepages", "gauge", "Huge pages reserved on the NUMA node, per page size.")
        huge_free = Family("numa_node_hugepages_free", "gauge", "Free huge pages on the NUMA node, per page size.")
        numastat = Family("numa_node_numastat_pages", "counter", "Pages allocated, by the kernel's numastat "
                          "event: numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node.")
        for label, meminfo, numastat_file, huge, events in self.plan:
            mem_total, mem_free, file_pages = parse_meminfo(read_file(meminfo))
            total.add_text(label, mem_total)
            free.add_text(label, mem_free)
            used.add_text(label, max(mem_total - mem_free, 0))
            files.add_text(label, file_pages)
            for size_label, nr_file, free_file in huge:
                huge_total.add_text(size_label, _int(read_file(nr_file)))
                huge_free.add_text(size_label, _int(read_file(free_file)))
            for line in (read_file(numastat_file) or "").splitlines():
                name, _sep, value = line.partition(" ")
                if name in events:
                    numastat.add_text(events[name], int(value))
        return [total, free, used, files, huge_total, huge_free, numastat]
