# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The locality collector's cgroup map: one walk, kept until kubelet's folders change; the series limit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from prometheus_client.parser import text_string_to_metric_families

from numa_agent.metrics import numa_metrics
from numa_agent.metrics import locality as numa_metrics_locality
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
OTHER_UID = "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def container(cgroup, uid, cid, anon=4096):
    folder = cgroup / "kubepods" / "burstable" / ("pod" + uid) / cid
    folder.mkdir(parents=True)
    (folder / "memory.numa_stat").write_text("anon N0=%d N1=0\nfile N0=0 N1=8192\n" % anon)
    (folder / "memory.current").write_text("1\n")
    return folder


def series(text, name="numa_container_memory_bytes"):
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                labels = sample.labels
                found[(labels["pod"], labels["container"], labels["numa_node"], labels["type"])] = sample.value
    return found


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_map_is_walked_once_and_again_only_when_a_folder_changes(tmp_path):
    cgroup = tmp_path / "cgroup"
    first = container(cgroup, UID, "a" * 64)
    clock = Clock()
    cgroups = numa_metrics_locality.CgroupMap(str(cgroup), clock=clock)
    assert cgroups.current() == {"a" * 64: str(first)} and cgroups.walks == 1
    assert cgroups.current() == {"a" * 64: str(first)} and cgroups.walks == 1, "nothing changed: no walk"
    # a second container in the same pod: the pod folder gains a subfolder (its link count)
    second = container(cgroup, UID, "b" * 64)
    assert cgroups.current() == {"a" * 64: str(first), "b" * 64: str(second)} and cgroups.walks == 2
    # a new pod in the QoS folder
    third = container(cgroup, OTHER_UID, "c" * 64)
    assert "c" * 64 in cgroups.current() and cgroups.walks == 3
    # a pod that goes away: its folder no longer answers a stat
    for name in os.listdir(str(third)):
        os.unlink(os.path.join(str(third), name))
    os.rmdir(str(third))
    os.rmdir(os.path.dirname(str(third)))
    assert "c" * 64 not in cgroups.current() and cgroups.walks == 4
    assert cgroups.walks == 4 and cgroups.current() and cgroups.walks == 4
    clock.now += cgroups.max_age
    cgroups.current()
    assert cgroups.walks == 5, "a full walk at least every max_age seconds"


def test_a_folder_whose_stat_does_not_change_is_still_caught_when_its_file_is_gone(tmp_path, monkeypatch):
    """kernfs moves a folder's mtime only when it has attributes: a container replaced by another in the
    same pod between two scrapes leaves the link count alone; the failed read marks the map stale."""
    cgroup = tmp_path / "cgroup"
    first = container(cgroup, UID, "a" * 64)
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    scraper = numa_metrics.Scraper(sys_root, str(cgroup))
    names = {"a" * 64: ("prod", "db-0", "db"), "b" * 64: ("prod", "db-0", "db")}
    assert series(scraper.scrape(containers=names, cgroups=scraper.cgroups()))[("db-0", "db", "0", "anon")] == 4096
    monkeypatch.setattr(numa_metrics_locality, "_key", lambda folder: ("unchanged",))
    scraper.locality.cgroups.invalidate()
    scraper.cgroups()
    walks = scraper.locality.cgroups.walks
    (first / "memory.numa_stat").unlink()  # the container went; its successor comes below
    container(cgroup, UID, "b" * 64, anon=123)
    assert series(scraper.scrape(containers=names, cgroups=scraper.cgroups())) == {}
    assert scraper.locality.cgroups.walks == walks, "the folders' keys did not move"
    got = series(scraper.scrape(containers=names, cgroups=scraper.cgroups()))
    assert got[("db-0", "db", "0", "anon")] == 123 and scraper.locality.cgroups.walks == walks + 1


def test_one_look_at_the_tree_per_scrape(tmp_path, monkeypatch):
    cgroup = tmp_path / "cgroup"
    container(cgroup, UID, "a" * 64)
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    scraper = numa_metrics.Scraper(sys_root, str(cgroup))
    walks = []
    real_walk = numa_metrics_locality.walk
    monkeypatch.setattr(numa_metrics_locality, "walk", lambda root: walks.append(root) or real_walk(root))
    names = {"a" * 64: ("prod", "db-0", "db")}
    for _scrape in range(3):
        cgroups = scraper.cgroups()
        scraper.scrape(containers=names, cgroups=cgroups)
    assert walks == [str(cgroup)], "one walk for three scrapes of an unchanged tree"
    scraper.scrape(containers=names)  # without the caller's map the scraper takes it itself, still cached
    assert len(walks) == 1


def assigned_pods():
    return [{"namespace": "prod", "name": "db-0", "containers": [
        {"name": "db", "cpu_ids": [2, 4], "memory": [], "devices": []},
        {"name": "sidecar", "cpu_ids": [], "memory": [],
         "devices": [{"resource_name": "example.com/nic", "device_ids": ["x"], "nodes": []}]}]},
        {"namespace": "prod", "name": "cache-0", "containers": [
            {"name": "cache", "cpu_ids": [], "memory": [{"memory_type": "memory", "size": 1 << 30, "nodes": [1]}],
             "devices": []}]}]


def test_the_series_limit(tmp_path):
    cgroup = tmp_path / "cgroup"
    container(cgroup, UID, "a" * 64)
    container(cgroup, UID, "b" * 64)
    container(cgroup, OTHER_UID, "c" * 64)
    names = {"a" * 64: ("prod", "db-0", "db"), "b" * 64: ("prod", "db-0", "sidecar"),
             "c" * 64: ("prod", "cache-0", "cache")}
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    texts = {}
    for mode in ("all", "exclusive", "none"):
        scraper = numa_metrics.Scraper(sys_root, str(cgroup), containers=mode)
        texts[mode] = scraper.scrape(assigned=assigned_pods(), containers=names)
    pods = dict((mode, sorted(set(key[:2] for key in series(text)))) for mode, text in texts.items())
    assert pods["all"] == [("cache-0", "cache"), ("db-0", "db"), ("db-0", "sidecar")]
    assert pods["exclusive"] == [("cache-0", "cache"), ("db-0", "db")], "the sidecar has no exclusive resource"
    assert pods["none"] == []
    assert "numa_container_devices{" in texts["all"] and "numa_container_devices{" not in texts["exclusive"]
    assert "numa_container_" not in texts["none"], "no per-container family at all"
    for mode in ("all", "exclusive", "none"):  # the node totals count every container whatever the limit
        assert 'numa_node_cpus_exclusive{numa_node="0"} 2' in texts[mode]
        assert 'numa_node_memory_assigned_bytes{numa_node="1",resource="memory"} 1073741824' in texts[mode]
    none = numa_metrics.Scraper(sys_root, str(cgroup), containers="none")
    assert none.cgroups() == {} and none.locality.cgroups is None, "the tree is not even walked"


def test_an_unknown_limit_is_refused_by_name(tmp_path):
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    try:
        numa_metrics.Scraper(sys_root, containers="some")
    except ValueError as exc:
        assert "'some'" in str(exc) and "all, exclusive, none" in str(exc)
    else:
        raise AssertionError("containers='some' was taken")


def test_label_values_are_escaped_once_per_container(tmp_path):
    cgroup = tmp_path / "cgroup"
    container(cgroup, UID, "a" * 64)
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    scraper = numa_metrics.Scraper(sys_root, str(cgroup))
    text = scraper.scrape(containers={"a" * 64: ("pro\"d", "db\\0", "d\nb")})
    lines = [line for line in text.splitlines() if line.startswith("numa_container_memory_bytes{")]
    assert len(lines) == 4
    assert all(line.startswith('numa_container_memory_bytes{namespace="pro\\"d",pod="db\\\\0",container="d\\nb",')
               for line in lines), lines
