# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's locality collector: each container's memory per NUMA node, from its cgroup.

kubelet's cgroup tree is walked once and the container-to-folder map kept (``CgroupMap``) until a
folder of the tree above the containers changes. A cgroup v2 folder is a kernfs directory: its
link count is two plus its subfolders, refreshed on every stat (fs/kernfs/inode.c,
kernfs_refresh_inode), while its modification time moves only once the folder had its attributes
set (fs/kernfs/dir.c, kernfs_add_one updates the parent's times only when it has any). So each
scrape stats the kubepods, QoS and pod folders and compares (link count, modification time): a
container or pod that appears changes its parent's link count, one that goes makes its pod
folder vanish or fails the read of its own ``memory.numa_stat``, which marks the map stale. A
full walk also happens at least every ``max_age`` seconds, whatever the folders say.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import time

from numa_agent.metrics.text import Family
from numa_agent.metrics.assignment import who_text
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import read_file

# memory.numa_stat rows reported per container (bytes per NUMA node)
NUMA_STAT_TYPES = ("anon", "file")

_CONTAINER_ID = re.compile(r"(?:^|[-_])([0-9a-f]{64})(?:\.scope)?$")
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$")
_QOS = ("burstable", "besteffort")


def parse_numa_stat(text, types=NUMA_STAT_TYPES):
    """{(type, node): bytes} from a cgroup's memory.numa_stat (``anon N0=123 N1=0``)."""
    result = {}
    for line in (text or "").split("\n"):
        kind, _sep, rest = line.partition(" ")
        if kind not in types:
            continue
        for field in rest.split():
            node, _sep, value = field.partition("=")
            if node.startswith("N") and value.isdigit():
                result[(kind, int(node[1:]))] = int(value)
    return result


def walk(cgroup_root):
    """({container id: cgroup folder}, {folder above the containers: its key}) of kubelet's kubepods tree.

    Both cgroup drivers are understood: ``kubepods/burstable/pod<uid>/<id>`` (cgroupfs) and
    ``kubepods.slice/.../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`` (systemd).
    Only folders are looked at (the directory entry's type, no stat), and their names matched
    only there: a cgroup folder holds dozens of control files. Each folder's key (link count,
    modification time) is taken before it is listed, so a change while it is listed shows later.
    """
    found = {}
    folders = {cgroup_root: _key(cgroup_root)}
    stack = []
    for entry in _scandir(cgroup_root):
        if entry.name.startswith("kubepods") and entry.is_dir(follow_symlinks=False):
            stack.append(entry.path)
    while stack:
        folder = stack.pop()
        folders[folder] = _key(folder)
        for entry in _scandir(folder):
            if not entry.is_dir(follow_symlinks=False):
                continue
            name = entry.name
            if len(name) >= 64:
                match = _CONTAINER_ID.search(name)
                if match:
                    found[match.group(1)] = entry.path
                    continue
            if name.startswith("kubepods") or name in _QOS or _POD_UID.search(name):
                stack.append(entry.path)
    return found, folders


def container_cgroups(cgroup_root):
    """{container id: cgroup folder} of every container under kubelet's kubepods tree (one walk)."""
    return walk(cgroup_root)[0]


def _scandir(path):
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except OSError:
        return []


def _key(folder):
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_nlink, info.st_mtime_ns)


class CgroupMap(object):
    """{container id: cgroup folder}, walked again only when kubelet's folders change (see above)."""

    def __init__(self, cgroup_root, max_age=300.0, clock=time.monotonic):
        self.cgroup_root = cgroup_root
        self.max_age = max_age
        self.clock = clock
        self.map = {}
        self.keys = None  # {folder: (link count, mtime)} of the folders above the containers
        self.walked_at = None
        self.walks = 0

    def stale(self):
        if self.keys is None or self.clock() - self.walked_at >= self.max_age:
            return True
        for folder, key in self.keys.items():
            if _key(folder) != key:
                return True
        return False

    def invalidate(self):
        """Walk again at the next look (a container's folder went away)."""
        self.keys = None

    def current(self):
        """The map, walked again first if a folder changed."""
        if self.stale():
            self.map, self.keys = walk(self.cgroup_root)
            self.walked_at = self.clock()
            self.walks += 1
        return self.map


class LocalityCollector(object):
    """numa_container_memory_bytes of the containers the caller names."""

    def __init__(self, cgroup_root):
        self.cgroups = CgroupMap(cgroup_root) if cgroup_root else None
        self.labels = {}  # (namespace, pod, container): rendered labels and a comma, kept while named

    def family(self, containers, cgroups=None, keep=None):
        """``containers``: {container id: (namespace, pod, container)}; ids without a cgroup here are left
        out, and so are names ``keep`` (a set of names, or None for all) does not hold. ``cgroups``: the
        map of this scrape when the caller already took it (CgroupMap.current), so the tree is looked
        at once a scrape."""
        family = Family("numa_container_memory_bytes", "gauge", "Memory of a container on each NUMA node, by "
                        "type (anon, file), from its cgroup's memory.numa_stat.")
        if self.cgroups is None or not containers:
            return family
        if cgroups is None:
            cgroups = self.cgroups.current()
        labels = {}
        vanished = False
        for container_id in sorted(cgroups):
            who = containers.get(container_id)
            if who is None or (keep is not None and who not in keep):
                continue
            text = read_file(cgroups[container_id] + "/memory.numa_stat")
            if text is None:
                vanished = True
                continue
            prefix = self.labels.get(who) or who_text(*who) + ","
            labels[who] = prefix
            for (kind, node), value in sorted(parse_numa_stat(text).items()):
                family.add_text('%snuma_node="%d",type="%s"' % (prefix, node, kind), value)
        self.labels = labels
        if vanished:
            self.cgroups.invalidate()
        return family
