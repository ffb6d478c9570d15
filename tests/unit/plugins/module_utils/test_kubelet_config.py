# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import (
    KubeletConfigError,
    detect_format,
    dropin_document,
    merge_patch,
    plan_change,
    state_changes,
    validate,
)

KUBEADM = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
kubeReserved:
  cpu: 100m
  ephemeral-storage: 1Gi
"""

NUMA = {
    "cpuManagerPolicy": "static",
    "topologyManagerPolicy": "single-numa-node",
    "topologyManagerScope": "pod",
    "memoryManagerPolicy": "Static",
    "kubeReserved": {"memory": "1Gi"},
    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
}


def problems(config, **kwargs):
    with pytest.raises(KubeletConfigError) as info:
        validate(config, **kwargs)
    return " | ".join(info.value.problems)


def test_merge_patch_merges_maps_replaces_lists_and_removes_nulls():
    target = {"a": {"x": 1, "y": 2}, "l": [1, 2], "gone": 1}
    patch = {"a": {"y": 3, "z": 4}, "l": [3], "gone": None, "new": {"k": None, "v": 1}}
    assert merge_patch(target, patch) == {"a": {"x": 1, "y": 3, "z": 4}, "l": [3], "new": {"v": 1}}
    assert target == {"a": {"x": 1, "y": 2}, "l": [1, 2], "gone": 1}


def test_valid_numa_settings_pass():
    validate(merge_patch(yaml.safe_load(KUBEADM), NUMA), numa_node_count=2, online_cpus=[0, 1, 2, 3])


def BEST_EFFORT_WITH(options):  # pylint: disable=invalid-name
    """Topology Manager options are read only for a policy other than none."""
    return {"topologyManagerPolicy": "best-effort", "topologyManagerPolicyOptions": options}


@pytest.mark.parametrize("config,message", [
    ({"cpuManagerpolicy": "static"}, "did you mean 'cpuManagerPolicy'"),
    ({"topologyManagerPolicys": "restricted"}, "did you mean 'topologyManagerPolicy'"),
    ({"numaMagic": 1}, "'numaMagic' is not a KubeletConfiguration field"),
    ({"cpuManagerPolicy": "Static"}, "Values are case-sensitive: write 'static'"),
    ({"memoryManagerPolicy": "static"}, "Values are case-sensitive: write 'Static'"),
    ({"memoryManagerPolicy": "none"}, "write 'None'"),
    ({"topologyManagerPolicy": "single-numa"}, "is not one of none, best-effort, restricted, single-numa-node"),
    ({"topologyManagerScope": "Pod"}, "write 'pod'"),
    (BEST_EFFORT_WITH({"max-allowable-numa-nodes": "4"}), "must be a whole number >= 8"),
    (BEST_EFFORT_WITH({"max-allowable-numa-nodes": "many"}), "must be a whole number >= 8"),
    (BEST_EFFORT_WITH({"max-allowable-numa-nodes": " 9"}), "must be a whole number >= 8"),
    ({"topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": True}}, "is not a string: write \"true\""),
    (BEST_EFFORT_WITH({"prefer-closest-numa-nodes": "yes"}), "must be \"true\" or \"false\""),
    (BEST_EFFORT_WITH({"closest": "true"}), "unknown option"),
    ({"cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}, "cpuManagerPolicy is none, which takes no options"),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"},
      "cpuManagerPolicyOptions": {"distribute-cpus-across-cores": "true"}}, "needs the feature gate CPUManagerPolicyAlphaOptions"),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}, "featureGates": {"CPUManagerPolicyAlphaOptions": True},
      "cpuManagerPolicyOptions": {"distribute-cpus-across-cores": "1", "full-pcpus-only": "T"}},
     "full-pcpus-only and distribute-cpus-across-cores cannot be used at the same time"),
    ({"featureGates": {"NoSuchGate": True}}, "kubelet does not know this feature gate"),
    ({"featureGates": {"CPUManagerPolicyOptions": False}}, "locked to true"),
    ({"reservedSystemCPUs": "0,"}, "not a CPU list"),
    ({"reservedSystemCPUs": " 0-1"}, "not a CPU list"),
    ({"reservedSystemCPUs": "0-99999999"}, "but CPU ids stop at 8191"),
    ({"topologyManagerPolicyOptions": ["prefer-closest-numa-nodes"]}, "is not a mapping; kubelet cannot load the file"),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"},
      "cpuManagerPolicyOptions": {"full-pcpus-only": True}}, "write \"true\""),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"},
      "cpuManagerPolicyOptions": {"full-pcpus-only": "on"}}, "must be \"true\" or \"false\""),
    ({"cpuManagerPolicy": "static"}, "the static policy requires systemreserved.cpu + kubereserved.cpu"),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "0"}}, "greater than zero"),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "lots"}}, "kubeReserved.cpu"),
    ({"reservedSystemCPUs": "0-1", "systemReservedCgroup": "/system.slice"}, "cannot be combined with systemReservedCgroup"),
    ({"reservedSystemCPUs": "0-1", "kubeReservedCgroup": "/kube.slice"}, "kubeReservedCgroup"),
    ({"reservedSystemCPUs": "0-x"}, "not a CPU list"),
    ({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "0"}}]}, "may not be zero"),
    ({"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"},
      "cpuManagerPolicyOptions": {"align-by-socket": "true"}}, "align-by-socket cannot be combined"),
])
def test_refused_settings(config, message):
    assert message in problems(config)


@pytest.mark.parametrize("config", [
    {"cpuManagerPolicy": ""},                                                      # kubelet's default
    {"topologyManagerPolicyOptions": {"closest": "x"}},                            # not read under none
    {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}, "cpuManagerPolicyOptions": {"full-pcpus-only": "1"}},
    {"reservedSystemCPUs": "+0-1"},                                                # Go's Atoi takes the sign
])
def test_accepted_as_kubelet_accepts(config):
    validate(config)


def test_small_fractional_cpu_reservation_is_enough_for_static():
    validate({"cpuManagerPolicy": "static", "systemReserved": {"cpu": "10m"}})


def test_reserved_cpus_must_be_online():
    assert "not online" in problems({"reservedSystemCPUs": "0,7"}, online_cpus=[0, 1, 2, 3])
    validate({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}, online_cpus=[0, 1, 2, 3])


def test_more_than_eight_numa_nodes_needs_the_option():
    config = {"topologyManagerPolicy": "restricted"}
    assert "max-allowable-numa-nodes is raised to at least 16" in problems(config, numa_node_count=16)
    config["topologyManagerPolicyOptions"] = {"max-allowable-numa-nodes": "16"}
    validate(config, numa_node_count=16)
    validate({"topologyManagerPolicy": "none"}, numa_node_count=16)


def test_validate_refuses_a_non_mapping():
    with pytest.raises(KubeletConfigError):
        validate(["cpuManagerPolicy"])


def test_all_problems_are_reported_together():
    with pytest.raises(KubeletConfigError) as info:
        validate({"cpuManagerPolicy": "Static", "memoryManagerPolicy": "static", "numaMagic": 1})
    assert len(info.value.problems) == 3


# state files ----------------------------------------------------------------------------------

@pytest.mark.parametrize("before,after,cpu,memory", [
    ({}, {"cpuManagerPolicy": "static"}, True, False),
    ({"cpuManagerPolicy": "none"}, {}, False, False),
    ({"cpuManagerPolicy": "static"}, {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}},
     True, False),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}, {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"},
     True, False),
    ({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}}, {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "2"}},
     True, False),
    ({"cpuManagerPolicy": "none", "kubeReserved": {"cpu": "1"}}, {"kubeReserved": {"cpu": "2"}}, False, False),
    ({}, {"memoryManagerPolicy": "Static"}, False, True),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
     {"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1024Mi"}}]}, False, False),
    ({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
     {"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 1, "limits": {"memory": "1Gi"}}]}, False, True),
    ({"memoryManagerPolicy": "None", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]},
     {"reservedMemory": [{"numaNode": 1, "limits": {"memory": "1Gi"}}]}, False, False),
    ({"topologyManagerPolicy": "none"}, {"topologyManagerPolicy": "restricted"}, False, False),
])
def test_state_changes(before, after, cpu, memory):
    assert state_changes(before, after) == {"remove_cpu_manager_state": cpu, "remove_memory_manager_state": memory}


# planning a file change -----------------------------------------------------------------------

def test_merge_into_kubeadm_yaml_keeps_other_keys():
    plan = plan_change("/var/lib/kubelet/config.yaml", KUBEADM, NUMA)
    assert plan["changed"] and plan["format"] == "yaml"
    written = yaml.safe_load(plan["text"])
    assert written["cgroupDriver"] == "systemd" and written["clusterDNS"] == ["10.96.0.10"]
    assert written["kubeReserved"] == {"cpu": "100m", "ephemeral-storage": "1Gi", "memory": "1Gi"}
    assert written["cpuManagerPolicy"] == "static"
    assert plan["restart_required"] and plan["remove_cpu_manager_state"] and plan["remove_memory_manager_state"]
    again = plan_change("/var/lib/kubelet/config.yaml", plan["text"], NUMA)
    assert not again["changed"] and not again["restart_required"]
    assert again["text"] == plan["text"]
    assert not again["remove_cpu_manager_state"] and not again["remove_memory_manager_state"]


def test_merge_into_eks_json():
    text = json.dumps({"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1", "maxPods": 29,
                       "kubeReserved": {"cpu": "70m", "memory": "574Mi"}, "reservedSystemCPUs": "0"}, indent=4)
    plan = plan_change("/etc/kubernetes/kubelet/kubelet-config.json", text,
                       {"topologyManagerPolicy": "restricted", "reservedSystemCPUs": None})
    assert plan["format"] == "json"
    written = json.loads(plan["text"])
    assert "reservedSystemCPUs" not in written and written["maxPods"] == 29
    assert list(written)[:2] == ["kind", "apiVersion"]


def test_new_file_gets_api_version_and_kind():
    plan = plan_change("/tmp/kubelet.yaml", None, {"cpuManagerPolicy": "none"})
    assert yaml.safe_load(plan["text"])["kind"] == "KubeletConfiguration"
    assert plan["changed"]


def test_dropin_holds_only_the_settings_and_validates_the_effective_config():
    base = "kubeReserved:\n  cpu: 500m\ncpuManagerPolicy: none\n"
    plan = plan_change("/etc/kubernetes/kubelet.conf.d/50-numa.conf", None, {"cpuManagerPolicy": "static"},
                       mode="dropin", base_text=base, base_path="/var/lib/kubelet/config.yaml")
    assert yaml.safe_load(plan["text"]) == dropin_document({"cpuManagerPolicy": "static"})
    assert plan["config"]["kubeReserved"] == {"cpu": "500m"}
    assert plan["remove_cpu_manager_state"]
    # without the base's CPU reservation the static policy is refused
    with pytest.raises(KubeletConfigError, match="static policy requires"):
        plan_change("/etc/kubernetes/kubelet.conf.d/50-numa.conf", None, {"cpuManagerPolicy": "static"}, mode="dropin")
    # a second run with the file in place changes nothing
    again = plan_change("/etc/kubernetes/kubelet.conf.d/50-numa.conf", plan["text"], {"cpuManagerPolicy": "static"},
                        mode="dropin", base_text=base, base_path="/var/lib/kubelet/config.yaml")
    assert not again["changed"] and not again["restart_required"]


@pytest.mark.parametrize("kwargs,message", [
    (dict(path="/etc/kubelet.conf.d/numa.yaml", current_text=None, settings={}, mode="dropin"), "ending in .conf"),
    (dict(path="/x.yaml", current_text=None, settings=[], mode="merge"), "must be a mapping"),
    (dict(path="/x.yaml", current_text=None, settings={}, mode="patch"), "mode 'patch'"),
    (dict(path="/x.yaml", current_text="a: [", settings={}), "could not be parsed"),
    (dict(path="/x.json", current_text="{", settings={}), "not valid JSON"),
    (dict(path="/x.yaml", current_text="- 1\n", settings={}), "does not hold"),
    (dict(path="/x.yaml", current_text=None, settings={"kind": "Other"}), "sets apiVersion and kind itself"),
    (dict(path="/x.yaml", current_text=None, settings={"cpuManagerPolicy": "Static"}), "case-sensitive"),
])
def test_plan_change_refusals(kwargs, message):
    with pytest.raises(KubeletConfigError, match=message):
        plan_change(**kwargs)


def test_detect_format():
    assert detect_format("/a/config.json", "") == "json"
    assert detect_format("/a/config.yaml", "{}") == "yaml"
    assert detect_format("/a/40-nodeadm.conf", '{"a": 1}') == "json"
    assert detect_format("/a/50.conf", "a: 1") == "yaml"


MACHINE = {"numa_node_memory": {"0": 2 ** 30, "1": 2 ** 30}, "distribution": "kubeadm"}


def test_the_reservation_is_checked_against_the_configuration_that_results():
    # kubeReserved changed by extra settings (or found in the node's file) after the sum was laid out
    config = {"memoryManagerPolicy": "Static", "kubeReserved": {"cpu": "1", "memory": "512Mi"},
              "reservedMemory": [{"numaNode": 0, "limits": {"memory": "178Mi"}},
                                 {"numaNode": 1, "limits": {"memory": "178Mi"}}]}
    with pytest.raises(KubeletConfigError) as info:
        validate(config, machine=MACHINE)
    assert 'the total amount "356Mi" of type "memory" is not equal to the value "612Mi"' in str(info.value)
    validate(dict(config, kubeReserved={"cpu": "1", "memory": "256Mi"}), machine=MACHINE)
    # a node that does not exist, and nothing reserved at all under Static
    with pytest.raises(KubeletConfigError, match="references a NUMA node 5"):
        validate(dict(config, kubeReserved={"cpu": "1", "memory": "256Mi"},
                      reservedMemory=[{"numaNode": 5, "limits": {"memory": "356Mi"}}]), machine=MACHINE)
    with pytest.raises(KubeletConfigError, match="you should specify the system reserved memory"):
        validate({"memoryManagerPolicy": "Static", "kubeReserved": {"cpu": "1"}, "evictionHard": {}},
                 machine=MACHINE)
    # without the machine the sums are still kubelet's, whatever the machine (not the node ids)
    with pytest.raises(KubeletConfigError, match='the total amount "356Mi" of type "memory" is not equal'):
        validate(config)
    validate(dict(config, kubeReserved={"cpu": "1", "memory": "256Mi"}))
    validate(dict(config, kubeReserved={"cpu": "1", "memory": "256Mi"},
                  reservedMemory=[{"numaNode": 5, "limits": {"memory": "356Mi"}}]))
    with pytest.raises(KubeletConfigError, match="you should specify the system reserved memory"):
        validate({"memoryManagerPolicy": "Static", "kubeReserved": {"cpu": "1"}, "evictionHard": {}})
    # the None policy sums nothing
    validate(dict(config, memoryManagerPolicy="None"), machine=MACHINE)


# --- what the review found kubelet refuses and numa.kube accepted (issue 21) -------------------------

@pytest.mark.parametrize("config,message", [
    ({"maxPods": 10 ** 20}, "maxPods: 100000000000000000000 is out of range: kubelet reads this field as an int32"),
    ({"maxPods": -1}, "maxPods must not be a negative number"),
    ({"kubeReserved": {"memory": "-1Gi"}}, "kubeReserved.memory: '-1Gi' is negative; kubelet refuses negative"),
    ({"systemReserved": {"cpu": "-500m"}}, "systemReserved.cpu: '-500m' is negative"),
    ({"kubeReserved": {"hugepages-2Mi": "1Gi"}}, "cannot reserve \"hugepages-2Mi\" resource"),
    ({"memoryReservationPolicy": "TieredReservation"}, "requires MemoryQoS feature gate to be enabled"),
    ({"evictionHard": {"nodefs.available": "abc"}}, "evictionHard.nodefs.available: 'abc' is not a quantity"),
    ({"evictionHard": {"imagefs.inodesFree": "150%"}}, "is outside 0%..100%"),
    ({"evictionHard": {"pid.available": "0"}}, "'eviction threshold pid.available must be positive'"),
    ({"evictionHard": {"cpu.available": "5%"}}, "kubelet does not know the eviction signal 'cpu.available'"),
    ({"evictionSoft": {"memory.available": "200Mi"}}, "set evictionSoftGracePeriod.memory.available"),
    ({"evictionSoftGracePeriod": {"memory.available": "-1s"}}, "must be a positive value"),
    ({"evictionMinimumReclaim": {"nodefs.available": "0%"}}, "eviction percentage minimum reclaim"),
    (BEST_EFFORT_WITH({"max-allowable-numa-nodes": "9223372036854775808"}), "is out of range: kubelet reads it"),
    ({"reservedSystemCPUs": "99999999999999999999"}, "out of range (strconv.Atoi"),
    ({"memoryManagerPolicy": "Static", "kubeReserved": {"memory": "1Gi"}}, 'the total amount "0" of type "memory"'),
    ({"featureGates": {"GracefulNodeShutdown": False}}, "depends on features that are disabled"),
])
def test_what_kubelet_refuses_at_start_is_refused(config, message):
    assert message in problems(config)


def test_a_decimal_for_a_whole_number_is_refused_on_purpose():
    assert "numa.kube takes whole numbers only" in problems({"maxPods": 110.0})


def test_an_ignored_soft_threshold_needs_no_grace_period():
    validate({"evictionSoft": {"memory.available": "0%"}})


def test_reserved_cpus_replace_the_cpu_of_the_reservations_before_kubelet_reads_them():
    # kubelet drops kubeReserved.cpu and overwrites systemReserved.cpu when reservedSystemCPUs is set
    validate({"reservedSystemCPUs": "0-1", "kubeReserved": {"cpu": "-1"}, "systemReserved": {"cpu": "abc"}})
    assert "kubeReserved.cpu" in problems({"kubeReserved": {"cpu": "-1"}})


def cpus(sockets, smt=1):
    """CPUs of a machine with one core per (node, socket) pair given as [(node, socket), ...]."""
    result = []
    for core, (node, socket) in enumerate(sockets):
        for thread in range(smt):
            result.append({"id": core + thread * len(sockets), "core": core, "socket": socket, "numa_node": node})
    return result


ALIGN = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "1"}, "cpuManagerPolicyOptions": {
    "align-by-socket": "true"}, "featureGates": {"CPUManagerPolicyAlphaOptions": True}}


def test_align_by_socket_where_sockets_outnumber_numa_nodes_is_refused():
    two_sockets_one_node = {"cpus": cpus([(0, 0), (0, 1)])}
    assert "this machine has 2 sockets and 1 NUMA nodes with CPUs" in problems(ALIGN, machine=two_sockets_one_node)
    validate(ALIGN, machine={"cpus": cpus([(0, 0), (1, 0)])})  # sub-NUMA clustering: fine
    validate(ALIGN)  # machine unknown


def test_the_static_policy_cannot_reserve_more_cpus_than_the_machine_has():
    config = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "4500m"}}
    assert "reserve 5 CPUs, more than this machine's 4 online CPUs" in problems(config, online_cpus=[0, 1, 2, 3])
    assert "reserve 5 CPUs" in problems(config, machine={"cpus": cpus([(0, 0), (0, 0)], smt=2)})
    validate(config, online_cpus=list(range(5)))
    validate(dict(config, reservedSystemCPUs="0"), online_cpus=[0])  # named CPUs replace the count


def test_static_memory_alone_with_a_percentage_threshold_needs_only_some_memory():
    config = {"memoryManagerPolicy": "Static", "evictionHard": {"memory.available": "5%"},
              "reservedMemory": [{"numaNode": 0, "limits": {"memory": "300Mi"}}]}
    validate(config)
    assert "nothing is reserved for memory" in problems(dict(config, reservedMemory=[]))
    assert "hugepages-2Mi" in problems(dict(config, reservedMemory=[
        {"numaNode": 0, "limits": {"memory": "300Mi", "hugepages-2Mi": "2Mi"}}]))


def test_reserved_memory_numa_node_is_an_int32():
    assert "kubelet reads it as an int32" in problems({"reservedMemory": [
        {"numaNode": 2 ** 31, "limits": {"memory": "1Gi"}}]})
