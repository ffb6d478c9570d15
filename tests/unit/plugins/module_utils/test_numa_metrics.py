# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.numa.kube.plugins.module_utils.numa_metrics import collect, exclusive_cpus
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import four_nodes_with_memory_only, two_socket_interleaved

GIB = 2 ** 30

CPU_STATE = {"policyName": "static", "defaultCpuSet": "0,1,3,5,7-15",
             "entries": {"pod-a": {"app": "2,4,6"}, "pod-b": {"db": "9"}}, "checksum": 1}
MEMORY_STATE = {
    "policyName": "Static",
    "machineState": {
        "0": {"numberOfAssignments": 1, "cells": [0], "memoryMap": {
            "memory": {"total": 8 * GIB, "systemReserved": GIB, "allocatable": 7 * GIB, "reserved": 2 * GIB,
                       "free": 5 * GIB},
            "hugepages-2Mi": {"total": 0, "systemReserved": 0, "allocatable": 0, "reserved": 0, "free": 0}}},
        "1": {"numberOfAssignments": 0, "cells": [1], "memoryMap": {
            "memory": {"total": 8 * GIB, "systemReserved": 0, "allocatable": 8 * GIB, "reserved": 0,
                       "free": 8 * GIB}}},
    },
    "entries": {},
    "checksum": 2,
}


def by_name(metrics):
    return dict((m.name, dict(m.samples)) for m in metrics)


def roots(tmp_path, machine):
    sys_root, proc_root = machine.write(str(tmp_path / "m"))
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    return sys_root, proc_root, str(kubelet)


def test_node_metrics_without_kubelet_state(tmp_path):
    sys_root, proc_root, kubelet = roots(tmp_path, four_nodes_with_memory_only())
    metrics = by_name(collect(sys_root, proc_root, kubelet))
    assert metrics["numa_node_cpus_count"] == {("0",): 4, ("1",): 2, ("3",): 2, ("5",): 0}
    assert metrics["numa_node_memory_total_bytes"][("5",)] == 16 * GIB
    assert metrics["numa_node_memory_used_bytes"][("0",)] == 2 * GIB
    assert metrics["numa_node_distance"][("3", "5")] == 30
    assert metrics["numa_node_distance"][("3", "3")] == 10
    assert metrics["numa_node_cpus_exclusive"] == {}
    assert metrics["numa_kubelet_state_readable"] == {}


def test_exclusive_cpus_and_assigned_memory_per_node(tmp_path):
    sys_root, proc_root, kubelet = roots(tmp_path, two_socket_interleaved())
    (tmp_path / "kubelet" / "cpu_manager_state").write_text(json.dumps(CPU_STATE))
    (tmp_path / "kubelet" / "memory_manager_state").write_text(json.dumps(MEMORY_STATE))
    metrics = by_name(collect(sys_root, proc_root, kubelet))
    # CPUs 2, 4, 6 are on node 0 (even ids); CPU 9 on node 1
    assert metrics["numa_node_cpus_exclusive"] == {("0",): 3, ("1",): 1}
    assert metrics["numa_node_memory_assigned_bytes"][("0", "memory")] == 2 * GIB
    assert metrics["numa_node_memory_assigned_bytes"][("1", "memory")] == 0
    assert metrics["numa_node_memory_allocatable_bytes"][("0", "memory")] == 7 * GIB
    assert metrics["numa_node_hugepages_total"][("0", "2Mi")] == 512
    assert metrics["numa_node_hugepages_free"][("1", "1Gi")] == 0
    assert metrics["numa_kubelet_state_readable"] == {("cpu_manager_state",): 1, ("memory_manager_state",): 1}
    assert metrics["numa_kubelet_manager_policy_info"] == {("cpu", "static"): 1, ("memory", "Static"): 1}


def test_unreadable_checkpoint_is_reported_not_fatal(tmp_path):
    sys_root, proc_root, kubelet = roots(tmp_path, two_socket_interleaved())
    (tmp_path / "kubelet" / "cpu_manager_state").write_text("{not json")
    metrics = by_name(collect(sys_root, proc_root, kubelet))
    assert metrics["numa_kubelet_state_readable"] == {("cpu_manager_state",): 0}
    assert metrics["numa_node_cpus_count"][("0",)] == 8


def test_exclusive_cpus_parses_cpusets():
    assert exclusive_cpus({"entries": {"a": {"c1": "0-2,8", "c2": ""}, "b": None}}) == {0, 1, 2, 8}
    assert exclusive_cpus({}) == set()
