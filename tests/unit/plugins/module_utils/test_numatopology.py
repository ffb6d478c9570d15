# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's Numatopology spec as Volcano's numa-aware plugin reads it, from what kubelet reports."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.numa import volcano_numatopology as numatopology

CPUS = [{"id": i, "numa_node": i // 2, "socket": 0, "core": i} for i in range(4)]


def test_numatopology_spec_free_cpus_are_kubelets_allocatable_minus_assigned():
    config = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted",
              "reservedSystemCPUs": "3", "kubeReserved": {"memory": "1Gi"}}
    spec = numatopology.numatopology_spec(CPUS, config, allocatable_cpus=[0, 1, 2], assigned_cpus=[1])
    assert spec["numares"] == {"cpu": {"allocatable": "0,2", "capacity": 4}}
    assert "cpu" not in spec["resReserved"], "kubelet already took its reserved CPUs out of the free set"
    assert spec["resReserved"] == {"memory": "1Gi"}
    assert spec["cpuDetail"]["3"] == {"numa": 1, "socket": 0, "core": 3}
    assert numatopology.reserved_cpus(CPUS, config, [0, 1, 2]) == "3"


def test_numatopology_spec_without_the_static_policy():
    spec = numatopology.numatopology_spec(CPUS, {}, allocatable_cpus=[], assigned_cpus=[])
    assert spec["policies"] == {"CPUManagerPolicy": "none", "TopologyManagerPolicy": "none"}
    assert spec["numares"]["cpu"]["allocatable"] == "0-3"
    assert "resReserved" not in spec
    assert numatopology.reserved_cpus(CPUS, {}, []) == ""


def test_reserved_memory_sums_kube_and_system_and_skips_what_kubelet_would_refuse():
    assert numatopology.reserved_memory({"kubeReserved": {"memory": "256Mi"},
                                         "systemReserved": {"memory": "256Mi"}}) == "512Mi"
    assert numatopology.reserved_memory({"kubeReserved": {"memory": "bogus"}}) == ""
    assert numatopology.reserved_memory({"kubeReserved": {"memory": "0"}}) == ""
