# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's exporter: one look at the cgroup tree per scrape, shared by the names and the locality."""

from __future__ import absolute_import, division, print_function

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent import __main__ as agent  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent import exporter  # noqa: E402 pylint: disable=wrong-import-position

from ansible_collections.numa.kube.plugins.module_utils import numa_metrics_locality  # noqa: E402
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved  # noqa: E402

CID = "ab" * 32


class Names(object):
    def __init__(self):
        self.asked = []

    def lookup(self, container_ids):
        self.asked.append(sorted(container_ids))
        return {CID: ("prod", "db-0", "db")}


class Kubelet(object):
    def assigned(self):
        return [{"namespace": "prod", "name": "db-0", "containers": [{"name": "db", "cpu_ids": [2], "memory": [],
                                                                      "devices": []}]}]

    def allocatable(self):
        return {"cpu_ids": [1, 2, 3], "memory": []}


def exporter_for(tmp_path, *options):
    folder = tmp_path / "cgroup" / "kubepods" / ("pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0") / CID
    folder.mkdir(parents=True)
    (folder / "memory.numa_stat").write_text("anon N0=4096 N1=0\nfile N0=0 N1=0\n")
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    args = agent.parse_args(["exporter", "--sysfs", sys_root, "--cgroup-root", str(tmp_path / "cgroup"),
                             "--pod-resources-socket=", "--authentication=none"] + list(options))
    made = exporter.Exporter(args)
    made.pod_resources, made.pod_names = Kubelet(), Names()
    return made


def test_each_scrape_looks_at_the_tree_once_and_names_what_it_found(tmp_path, monkeypatch):
    made = exporter_for(tmp_path)
    walks = []
    real_walk = numa_metrics_locality.walk
    monkeypatch.setattr(numa_metrics_locality, "walk", lambda root: walks.append(root) or real_walk(root))
    for _scrape in range(2):
        text = made.render()
    assert len(walks) == 1, "the names and the locality share the scrape's map (and it is kept)"
    assert made.pod_names.asked == [[CID], [CID]]
    assert 'numa_container_memory_bytes{namespace="prod",pod="db-0",container="db",numa_node="0",type="anon"} 4096' \
        in text
    assert "numa_exporter_pod_resources_up 1" in text


def test_containers_none_reads_no_tree_and_asks_for_no_names(tmp_path):
    made = exporter_for(tmp_path, "--containers", "none")
    text = made.render()
    assert made.pod_names.asked == [] and "numa_container_" not in text
    assert 'numa_node_cpus_exclusive{numa_node="0"} 1' in text
