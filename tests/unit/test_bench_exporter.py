# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter bench's made-up machines and its floor: the floor renders the same per-container
samples as the exporter, from the same files, so their ratio compares like with like."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import re

import pytest

from numa_agent.metrics import numa_metrics

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench_exporter.py")
SAMPLE = re.compile(r'^numa_container_memory_bytes\{(.*)\} (\d+)$')


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_exporter", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def container_samples(text):
    found = set()
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = tuple(sorted(pair.split("=", 1) and tuple(pair.split("=", 1))
                                  for pair in match.group(1).split(",")))
            found.add((labels, int(match.group(2))))
    return found


def test_the_floor_renders_what_the_exporter_renders_from_the_same_files(bench, tmp_path):
    sysfs = bench.synthetic_sysfs(str(tmp_path / "sys"), bench.hyperthreaded(2, 4))
    cgroup = str(tmp_path / "cgroup")
    names = bench.cgroup_tree(cgroup, 4, nodes=2, cpus=16)
    # one container a pod is named, its sandbox is not: kubelet's pod list names only containers
    assert len(names) == 4
    assert len([n for n in os.listdir(os.path.join(cgroup, "kubepods.slice")) if n.startswith("kubepods-pod")]) == 2
    floor = bench.floor(sysfs, cgroup, names)
    scraper = numa_metrics.Scraper(sysfs, cgroup)
    ours = container_samples(scraper.scrape(containers=names))
    theirs = container_samples(floor().decode())
    assert ours and ours == theirs
    assert len(ours) == 4 * 2 * 2  # anon and file on 2 nodes, each container
    exporter_files = bench.traced(lambda: scraper.scrape(containers=names))
    floor_files = bench.traced(floor)
    assert set(f for f in exporter_files if "memory.numa_stat" in f) == set(f for f in floor_files if "numa_stat" in f)


def test_made_up_machines_have_memory_only_nodes_and_hyperthread_siblings(bench, tmp_path):
    assert [short for _label, short, _build in bench.shapes()] == ["8 nodes, 256 CPUs", "16 nodes",
                                                                   "2 + 2 memory-only nodes"]
    # x86 numbering: node 1 of 8 x 16 cores has cores 16-31 and their second threads 144-159
    assert bench.hyperthreaded(8, 16)[1] == list(range(16, 32)) + list(range(144, 160))
    cxl = [[10, 21, 14, 24], [21, 10, 24, 14], [14, 24, 10, 26], [24, 14, 26, 10]]
    root = bench.synthetic_sysfs(str(tmp_path / "cxl"), bench.hyperthreaded(2, 2) + [[], []], cxl)
    node = os.path.join(root, "devices/system/node")
    assert open(os.path.join(node, "has_cpu")).read() == "0-1\n"
    assert open(os.path.join(node, "has_memory")).read() == "0-3\n"
    assert open(os.path.join(node, "node3/cpulist")).read() == "\n"
    assert open(os.path.join(node, "node1/cpulist")).read() == "2-3,6-7\n"
    assert "MemTotal" in open(os.path.join(node, "node3/meminfo")).read()
    assert open(os.path.join(root, "devices/system/cpu/cpu6/topology/thread_siblings_list")).read() == "2,6\n"
    topology = numa_metrics.Scraper(root).topology
    assert [len(n["cpus"]) for n in topology.nodes] == [4, 4, 0, 0] and len(topology.cpu_node) == 8


def test_a_side_finds_the_collection_link_made_by_its_sibling(bench, tmp_path, monkeypatch):
    """The race's sides start together and each asks for the collection's folder: one that finds the
    link made by a sibling between its check and its own link uses it, and a link pointing elsewhere is
    refused by name."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    lib = bench.collection_lib(root, str(tmp_path))
    link = os.path.join(lib, "ansible_collections", "numa", "kube")
    monkeypatch.setattr(os.path, "islink", lambda path: False)  # the sibling made it just after a check
    assert bench.collection_lib(root, str(tmp_path)) == lib
    assert os.path.realpath(link) == os.path.realpath(root)
    monkeypatch.undo()
    os.unlink(link)
    os.symlink(str(tmp_path), link)
    with pytest.raises(SystemExit, match="points elsewhere"):
        bench.collection_lib(root, str(tmp_path))
