# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet_config and reserved_memory refuse unusable input early, with a message, not a traceback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.numa.kube.plugins.modules import kubelet_config, reserved_memory
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

KUBEADM = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"


def config_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    return str(path)


@pytest.mark.parametrize("path,message", [
    ("", "path is empty: give the absolute path"),
    ("config.yaml", "path 'config.yaml' is relative: give an absolute path"),
])
def test_kubelet_config_refuses_an_empty_or_relative_path(path, message):
    failed, result = run(kubelet_config, {"path": path, "settings": {}, "create": True})
    assert failed and message in result["msg"]


def test_kubelet_config_refuses_a_directory_without_a_traceback(tmp_path):
    failed, result = run(kubelet_config, {"path": str(tmp_path), "settings": {"maxPods": 110}})
    assert failed and "is a directory: point it at the kubelet configuration file itself" in result["msg"]
    failed, result = run(kubelet_config, {"path": config_file(tmp_path), "dropin": False, "settings": {},
                                          "base_path": [str(tmp_path)]})
    assert failed and "base_path %s is a directory" % tmp_path in result["msg"]


def test_kubelet_config_refuses_a_pipe_instead_of_blocking_on_it(tmp_path):
    fifo = str(tmp_path / "config.yaml")
    os.mkfifo(fifo)
    failed, result = run(kubelet_config, {"path": fifo, "settings": {}})
    assert failed and "is not a regular file" in result["msg"]


def test_kubelet_config_refuses_a_missing_base_and_a_file_that_is_not_text(tmp_path):
    failed, result = run(kubelet_config, {"path": str(tmp_path / "50-numa.conf"), "dropin": True, "settings": {},
                                          "base_path": [str(tmp_path / "absent.yaml")]})
    assert failed and "absent.yaml does not exist" in result["msg"]
    path = tmp_path / "config.yaml"
    path.write_bytes(b"maxPods: \xff\n")
    failed, result = run(kubelet_config, {"path": str(path), "settings": {}})
    assert failed and "config.yaml could not be parsed" in result["msg"]


@pytest.mark.parametrize("args,message", [
    ({"online_cpus": "0-4294967295"}, "online_cpus '0-4294967295' is not a CPU list such as 0-15: '0-4294967295' names"),
    ({"numa_node_count": 0}, "numa_node_count 0 is not a number of NUMA nodes (1 to 1024)"),
    ({"cpus": [{"id": -1}]}, "cpus[0]: id -1 is not a CPU id (0 to 8191)"),
    ({"cpus": [{"core": 1}]}, "cpus[0]: id None is not a CPU id"),
])
def test_kubelet_config_refuses_a_machine_no_kernel_describes(tmp_path, args, message):
    failed, result = run(kubelet_config, dict(args, path=config_file(tmp_path), settings={}))
    assert failed and message in result["msg"], result["msg"]


def test_kubelet_config_refuses_what_kubelet_refuses_and_changes_nothing(tmp_path):
    path = config_file(tmp_path)
    failed, result = run(kubelet_config, {"path": path, "settings": {"maxPods": 10 ** 20,
                                                                     "kubeReserved": {"memory": "-1Gi"}}})
    assert failed and result["msg"].startswith("kubelet would refuse this configuration: ")
    assert any("maxPods: 100000000000000000000 is out of range" in p for p in result["problems"])
    assert any("kubeReserved.memory: '-1Gi' is negative" in p for p in result["problems"])
    with open(path) as handle:
        assert handle.read() == KUBEADM


def test_kubelet_config_checks_the_cpu_manager_on_the_machine_it_is_given(tmp_path):
    cpus = [{"id": 0, "core": 0, "socket": 0, "numa_node": 0}, {"id": 1, "core": 1, "socket": 1, "numa_node": 0}]
    settings = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "3"}}
    failed, result = run(kubelet_config, {"path": config_file(tmp_path), "settings": settings, "cpus": cpus},
                         check_mode=True)
    assert failed and "reserve 3 CPUs, more than this machine's 2 online CPUs" in result["msg"]
    settings["kubeReserved"]["cpu"] = "1"
    failed, result = run(kubelet_config, {"path": config_file(tmp_path), "settings": settings, "cpus": cpus},
                         check_mode=True)
    assert not failed and result["changed"]


@pytest.mark.parametrize("args,message", [
    ({"numa_nodes": [0], "cpu_count": 0}, "cpu_count 0 is not a number of CPUs (1 to 8192)"),
    ({"numa_nodes": [0], "cpu_count": 10 ** 6}, "cpu_count 1000000 is not a number of CPUs"),
    ({"numa_nodes": [0, -1]}, "numa_nodes: -1 is not a NUMA node id (0 to 1023)"),
    ({"numa_nodes": [0], "placement": "single", "placement_node": 4096}, "placement_node: 4096 is not a NUMA node"),
    ({"numa_node_memory": {"-3": 2 ** 30}}, "key '-3' is not a NUMA node id"),
    ({"numa_nodes": [0], "distribution": "eks", "eks_max_pods": 2 ** 40}, "maxPods is an int32"),
])
def test_reserved_memory_refuses_a_machine_no_kernel_describes(args, message):
    failed, result = run(reserved_memory, args)
    assert failed and message in result["msg"], result["msg"]


@pytest.mark.parametrize("spelling", ["same", "slashes", "link"])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_drop_in_that_is_also_a_base_is_refused_however_it_is_written(tmp_path, spelling, state):
    """Third and fourth reviews: a drop-in path that was also in base_path (as written, with doubled
    slashes, or through a link) had 'absent' delete kubelet's base configuration, 'present' rewrite it."""
    base = tmp_path / "conf.d" / "00-base.conf"
    base.parent.mkdir()
    base.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n")
    path = {"same": str(base), "slashes": "/" + str(base)}.get(spelling)
    if spelling == "link":
        os.symlink(str(base), str(tmp_path / "conf.d" / "50-numa-kube.conf"))
        path = str(tmp_path / "conf.d" / "50-numa-kube.conf")
    args = {"path": path, "dropin": True, "base_path": [str(base)], "record": "", "state": state}
    if state == "present":
        args["settings"] = {"cpuManagerPolicy": "static"}
    before = base.read_text()
    failed, result = run(kubelet_config, args)
    assert failed and "is also in base_path (or leads to the same file)" in result["msg"], result
    assert base.read_text() == before
