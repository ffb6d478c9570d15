# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA exporter's metrics, as Prometheus text, without third-party imports.

A ``Scraper`` runs the collectors, one per file as node_exporter lays them out:

- metrics/topology: the static topology (NUMA nodes, their CPUs and distances, each PCI
  device's node), read through numa.sysfs.SysfsReader once and again only when the online CPUs or
  nodes change;
- metrics/node: every node's meminfo, numastat and free huge pages, each scrape;
- metrics/assignment: what kubelet assigned and may assign, handed in as plain data by the
  caller (the node agent asks kubelet's PodResources API, the systemd exporter reads its
  checkpoints);
- metrics/locality: the containers' ``memory.numa_stat`` in the cgroup tree, whose
  container-to-folder map is kept until kubelet's folders change.

Names follow Prometheus' conventions, except the compatibility names in ``COMPATIBILITY`` that
existing dashboards query. The per-container families can be limited (``containers``: all,
exclusive - only containers with exclusive CPUs, NUMA-bound memory or devices -, none).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from numa_agent.metrics.text import Family, escape, render
from numa_agent.metrics.assignment import (
    CONTAINER_MODES, assignment_families, checkpoint_data, pinned)
from numa_agent.metrics.locality import (
    NUMA_STAT_TYPES, LocalityCollector, container_cgroups, parse_numa_stat)
from numa_agent.metrics.node import (
    MEMINFO_FIELDS, NUMASTAT_EVENTS, NodeCollector, parse_meminfo)
from numa_agent.metrics.topology import Topology
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsError

# what callers import from here (the agent, the tests, the benchmark), whichever file defines it
__all__ = ["COMPATIBILITY", "CONTAINER_MODES", "Family", "MEMINFO_FIELDS", "NUMASTAT_EVENTS", "NUMA_STAT_TYPES",
           "Scraper", "Topology", "checkpoint_data", "container_cgroups", "escape", "parse_meminfo", "parse_numa_stat",
           "render"]

# Names kept for what users already query (the openFuyao guide's numa_node_cpus_count); promtool
# flags them ("_count" belongs to histograms and summaries) and is told to expect it.
COMPATIBILITY = ("numa_node_cpus_count",)


class Scraper(object):
    """Renders one scrape: the static text, then what moved since the last one.

    ``containers`` (CONTAINER_MODES) limits the per-container series: ``all`` (every container
    named), ``exclusive`` (only those kubelet gave exclusive CPUs, memory blocks or devices bound
    to a NUMA node; their locality only when kubelet's assignments came in) or ``none``.
    """

    def __init__(self, sysfs_root="/sys", cgroup_root=None, containers="all"):
        if containers not in CONTAINER_MODES:
            raise ValueError("containers=%r is not one of %s" % (containers, ", ".join(CONTAINER_MODES)))
        self.sysfs_root = sysfs_root
        self.cgroup_root = cgroup_root
        self.containers = containers
        self.topology = Topology(sysfs_root)
        self.node = NodeCollector(self.topology)
        self.locality = LocalityCollector(cgroup_root if containers != "none" else None)

    def refresh_topology(self):
        """Read the static topology again if CPUs or nodes went on- or offline.

        Returns None, or why the new topology could not be read (the last good one is kept).
        """
        if Topology.current_signature(self.sysfs_root) == self.topology.signature:
            return None
        try:
            topology = Topology(self.sysfs_root)
        except (ValueError, SysfsError) as exc:
            return str(exc)
        self.topology, self.node = topology, NodeCollector(topology)
        return None

    def cgroups(self):
        """{container id: cgroup folder} for this scrape (walked again only if kubelet's folders changed);
        hand it back to ``scrape(cgroups=...)`` so that the tree is looked at once. Empty when the
        per-container series are off or there is no cgroup root."""
        if self.locality.cgroups is None:
            return {}
        return self.locality.cgroups.current()

    def node_families(self):
        return self.node.families()

    def assignment_families(self, assigned, allocatable):
        """See metrics.assignment.assignment_families."""
        return assignment_families(self.topology, assigned, allocatable, self.containers)

    def locality_family(self, containers, cgroups=None, assigned=None):
        """Each named container's memory per NUMA node, from its cgroup's memory.numa_stat.

        ``containers``: {container id: (namespace, pod, container)}; containers without a cgroup
        here (or unknown ids) are left out. With ``containers="exclusive"`` only the containers
        ``assigned`` (PodResources' shape) shows as pinned are read; none when it is None.
        """
        if self.containers == "none":
            return []
        keep = None
        if self.containers == "exclusive":
            keep = set((pod.get("namespace", ""), pod.get("name", ""), container.get("name", ""))
                       for pod in assigned or [] for container in pod.get("containers") or [] if pinned(container))
        return [self.locality.family(containers, cgroups, keep)]

    def scrape(self, assigned=None, allocatable=None, containers=None, extra=(), cgroups=None):
        """The whole exposition text of one scrape."""
        started = time.time()
        problem = self.refresh_topology()
        families = self.node_families()
        families += self.assignment_families(assigned, allocatable)
        families += self.locality_family(containers, cgroups, assigned)
        families += list(extra)
        families.append(Family("numa_exporter_topology_error", "gauge", "1 when the changed topology could not "
                               "be read (the exporter goes on with the last one it read).").add((), 1 if problem else 0))
        duration = Family("numa_exporter_scrape_duration_seconds", "gauge", "Time the exporter took to read "
                          "the node for this scrape.").add((), round(time.time() - started, 6))
        return self.topology.static_text + render(families + [duration])
