# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin's devices: names, which to hand out, and whether their NUMA node can take pods.

No gRPC here, so that all of it is unit-tested alone; ``device_plugin`` turns it into kubelet's API.

Health follows the machine: a NUMA node whose CPUs all went offline, or that left the kernel's list
of online nodes, cannot run a pod aligned to it, so its devices turn Unhealthy (kubelet then takes
them out of the Node's allocatable and the scheduler stops sending pods there) and Healthy again when
it is back. Only the resources found at start are served: kubelet learns of a new resource only
through a registration, which this plugin makes at start (and again after a kubelet restart) for the
same list, so a NUMA node that gains CPUs later is reported in the log and needs a restart.
"""

import os
import threading
from collections import namedtuple

from numa_agent.metrics.numa_metrics import Topology
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import (
    SysfsReader, SysfsError, format_cpu_list, parse_cpu_list)


def device_ids(node, capacity):
    """``numa-<node>-<index>``, the index zero-padded to one width so the names sort as numbers."""
    width = len(str(capacity - 1))
    return ["numa-%d-%0*d" % (node, width, index) for index in range(capacity)]


def preferred(available, must_include, size):
    """The devices to hand out: those kubelet must include, then the lowest-numbered others.

    Every device of one resource sits on the same NUMA node and is interchangeable, so the only
    sensible preference is a stable one: it keeps allocations compact and easy to read in logs.
    """
    chosen = list(must_include)[:size]
    for device in sorted(available):
        if len(chosen) >= size:
            break
        if device not in chosen:
            chosen.append(device)
    return chosen


def numa_nodes_with_cpus(sysfs_root):
    """[(node id, [cpu ids])] of the online NUMA nodes that have online CPUs: what is served at start."""
    facts = SysfsReader(sysfs_root=sysfs_root).read(include_pci=False)
    return [(node["id"], node["cpus"]) for node in facts["nodes"] if node["has_cpu"]]


# One registered resource changing health; ``message`` is the log line that says why.
Transition = namedtuple("Transition", "node healthy message")


class NodeHealth(object):
    """Which of the NUMA nodes served since start can take pods, as sysfs says now.

    Each ``poll`` reads two short files, the online CPU list and the online node list; only when one
    of them changed does it read the CPU list of each online NUMA node (one line each) and decide.
    """

    def __init__(self, sysfs_root, nodes, resource_prefix):
        self.sysfs_root = sysfs_root
        self.prefix = resource_prefix
        self.healthy = dict((node, True) for node in nodes)  # served at start: each had online CPUs
        self.signature = None
        self.unserved = set()  # NUMA nodes with online CPUs that were not served at start (reported once)
        self.unreadable = None  # the signature that could not be read (reported once)

    def resource(self, node):
        return "%s%d" % (self.prefix, node)

    def _read(self, signature):
        """(online CPUs, {online NUMA node: its online CPUs}) from the two lists and each node's cpulist."""
        cpu_text, node_text = signature
        if cpu_text is None:  # no list (never seen on a real kernel): ask each CPU, as topology_facts does
            online = set(SysfsReader(sysfs_root=self.sysfs_root).online_cpus())
        else:
            online = set(parse_cpu_list(cpu_text))
        node_dir = os.path.join(self.sysfs_root, "devices/system/node")
        if node_text is not None:
            ids = parse_cpu_list(node_text)
        elif os.path.isdir(node_dir):
            ids = sorted(int(name[4:]) for name in os.listdir(node_dir)
                         if name.startswith("node") and name[4:].isdigit())
        else:  # a kernel without NUMA: one node holds every CPU
            return online, {0: sorted(online)}
        nodes = {}
        for node in ids:
            try:
                with open(os.path.join(node_dir, "node%d" % node, "cpulist")) as handle:
                    text = handle.read()
            except (IOError, OSError):
                text = ""  # the node went away between the two reads
            nodes[node] = [cpu for cpu in parse_cpu_list(text) if cpu in online]
        return online, nodes

    def poll(self):
        """([Transition], [notice]) since the last poll; nothing when neither online list changed."""
        signature = Topology.current_signature(self.sysfs_root)
        # a missing list cannot tell a change: read again each time then (cheap without NUMA)
        if signature == self.signature and None not in signature:
            return [], []
        try:
            online, nodes = self._read(signature)
        except (SysfsError, ValueError) as exc:
            if signature == self.unreadable:
                return [], []
            self.unreadable = signature
            return [], ["cannot read the online CPUs and NUMA nodes under %s/devices/system (%s): health of %s "
                        "kept as it was; read again at the next change"
                        % (self.sysfs_root, exc, ", ".join(self.resource(n) for n in sorted(self.healthy)))]
        self.signature, self.unreadable = signature, None
        transitions = []
        for node in sorted(self.healthy):
            cpus = nodes.get(node)
            healthy = bool(cpus)
            if healthy == self.healthy[node]:
                continue
            self.healthy[node] = healthy
            if healthy:
                why = "NUMA node %d is back with online CPUs %s" % (node, format_cpu_list(cpus))
            elif cpus is None:
                why = "NUMA node %d is no longer online" % node
            else:
                why = "NUMA node %d has no online CPU" % node
            transitions.append(Transition(node, healthy, "%s: %s %s" % (
                why, self.resource(node), "Healthy" if healthy else "Unhealthy")))
        notices = []
        for node in sorted(nodes):
            if node in self.healthy:
                continue
            if not nodes[node]:
                self.unserved.discard(node)  # report it again if it gains CPUs once more
            elif node not in self.unserved:
                self.unserved.add(node)
                notices.append("NUMA node %d now has online CPUs %s but was not there when the plugin started: "
                               "%s is not advertised (resources are registered at start only); restart the device "
                               "plugin (delete its pod on this node) to advertise it"
                               % (node, format_cpu_list(nodes[node]), self.resource(node)))
        self.unserved &= set(nodes)
        return transitions, notices


class Health(object):
    """One resource's health, and the waits of the ListAndWatch streams that report it to kubelet."""

    def __init__(self):
        self._changed = threading.Condition()
        self._healthy = True
        self._version = 0  # counts changes, so that a waiting stream sees any it slept through
        self._epoch = 0  # counts ``end_watches`` calls: a stream ends when its epoch is over

    def set(self, healthy):
        """Record the health; True when it changed (every open stream then sends the device list again)."""
        with self._changed:
            if healthy == self._healthy:
                return False
            self._healthy = healthy
            self._version += 1
            self._changed.notify_all()
            return True

    def end_watches(self):
        """End every stream open now (the server is stopping)."""
        with self._changed:
            self._epoch += 1
            self._changed.notify_all()

    def watch(self, is_active, recheck=5.0):
        """Yield the health now, then each time it differs from the last one yielded.

        Ends when ``is_active()`` turns false (kubelet closed the stream; checked at least every
        ``recheck`` seconds) or ``end_watches`` is called.
        """
        with self._changed:
            epoch, version, sent = self._epoch, self._version, self._healthy
        yield sent
        while True:
            with self._changed:
                if self._version == version and self._epoch == epoch:
                    self._changed.wait(recheck)  # a change, the end, or time to ask whether kubelet still listens
                if self._epoch != epoch:
                    return
                version, healthy = self._version, self._healthy
            if not is_active():
                return
            if healthy != sent:
                sent = healthy
                yield healthy
