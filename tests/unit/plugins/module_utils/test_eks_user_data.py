# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""EKS user data, read back the way EKS reads it: the MIME document with Python's email package,
the NodeConfig part with a YAML parser, both held to the facts read in nodeadm's source
(awslabs/amazon-eks-ami nodeadm/api/v1alpha1/nodeconfig_types.go, internal/configprovider/mime.go,
internal/api/validation.go), and the reservation to kubelet's sum, computed here on its own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import email
import re

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet.eks_user_data import (
    EksUserDataError,
    bootstrap_kubelet_extra_args,
    kubelet_settings,
    node_config,
    user_data,
)

MIB = 2 ** 20
GIB = 2 ** 30
# nodeadm's NodeConfig, as its Go types declare it (json tags and types)
NODECONFIG = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig"}
SPEC = {"cluster": dict, "containerd": dict, "instance": dict, "kubelet": dict, "featureGates": dict}
KUBELET = {"config": dict, "flags": list, "maxPodsExpression": str}
CLUSTER = {"name": str, "apiServerEndpoint": str, "certificateAuthority": str, "cidr": str, "enableOutpost": bool,
           "id": str}
CLUSTER_REQUIRED = ("name", "apiServerEndpoint", "certificateAuthority", "cidr")
MEDIA_TYPE = "application/node.eks.aws"

ALIGNED = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
           "topologyManagerScope": "pod", "memoryManagerPolicy": "Static"}
CLUSTER_DETAILS = {"name": "numa", "apiServerEndpoint": "https://ABC.gr7.eu-west-1.eks.amazonaws.example",
                   "certificateAuthority": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode(),
                   "cidr": "10.100.0.0/16"}


def bytes_of(text):
    """A memory quantity in bytes, read here without the collection's parser (Mi, Gi, Ki or bytes)."""
    text = str(text)
    for suffix, factor in (("Ki", 2 ** 10), ("Mi", MIB), ("Gi", GIB)):
        if text.endswith(suffix):
            return int(text[:-2]) * factor
    return int(text)


def node_configs(document):
    """Parse user data as nodeadm does: a multipart MIME message, the application/node.eks.aws parts."""
    assert document.startswith("MIME-Version: 1.0\n"), "Karpenter takes user data as MIME only from this first line"
    message = email.message_from_string(document)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    assert message.get_boundary(), "a multipart document names its boundary"
    assert not message.defects, message.defects
    assert "--%s--" % message.get_boundary() in document.splitlines(), "the closing delimiter"
    parts = message.get_payload()
    configs = [yaml.safe_load(p.get_payload()) for p in parts if p.get_content_type() == MEDIA_TYPE]
    return configs, parts


def check_schema(config):
    """Hold a NodeConfig to nodeadm's types and required fields."""
    for key, value in NODECONFIG.items():
        assert config[key] == value
    assert set(config) <= {"apiVersion", "kind", "metadata", "spec"}
    spec = config["spec"]
    for key, value in spec.items():
        assert isinstance(value, SPEC[key]), key
    for key, value in spec.get("kubelet", {}).items():
        assert isinstance(value, KUBELET[key]), key
    for flag in spec.get("kubelet", {}).get("flags", []):
        assert isinstance(flag, str) and flag.startswith("--") and not re.search(r"\s", flag)
    cluster = spec.get("cluster")
    if cluster is not None:
        for key, value in cluster.items():
            assert isinstance(value, CLUSTER[key]), key
        for key in CLUSTER_REQUIRED:
            assert cluster[key], "nodeadm's ValidateNodeConfig requires %s" % key
        base64.b64decode(cluster["certificateAuthority"], validate=True)  # a Go []byte


def reserved(config):
    return sum(bytes_of(e["limits"]["memory"]) for e in config["reservedMemory"])


@pytest.mark.parametrize("max_pods,layout,expected_nodes", [
    (58, {"numa_nodes": 1}, [0]),
    (110, {"numa_nodes": 2}, [0, 1]),
    (737, {"numa_node_memory": {0: "96Gi", 1: "96Gi"}}, [0, 1]),
    (234, {"numa_node_memory": {"0": 64 * GIB, "1": 32 * GIB, "2": 0}}, [0, 1]),
    (29, {"numa_nodes": [0, 1, 2, 3], "placement": "single", "placement_node": 2}, [2]),
])
def test_nodeconfig_in_mime_carries_a_reservation_kubelet_accepts(max_pods, layout, expected_nodes):
    document = user_data(node_config(ALIGNED, max_pods=max_pods, **layout))
    configs, parts = node_configs(document)
    assert len(parts) == 1 and len(configs) == 1
    config = configs[0]
    check_schema(config)
    kubelet = config["spec"]["kubelet"]["config"]
    for field, value in ALIGNED.items():
        assert kubelet[field] == value
    # kubelet: sum of reservedMemory == kubeReserved + systemReserved + evictionHard memory.available,
    # with EKS's kubeReserved.memory = 11 MiB per pod + 255 MiB and nodeadm's 100Mi threshold
    assert bytes_of(kubelet["kubeReserved"]["memory"]) == (11 * max_pods + 255) * MIB
    assert reserved(kubelet) == (11 * max_pods + 255 + 100) * MIB
    assert sorted(e["numaNode"] for e in kubelet["reservedMemory"]) == expected_nodes
    assert set(kubelet["kubeReserved"]) == {"memory"}, "cpu and ephemeral-storage stay nodeadm's"


def test_spread_follows_node_memory_and_yaml_keeps_strings():
    settings = dict(ALIGNED, cpuManagerPolicyOptions={"full-pcpus-only": "true"},
                    topologyManagerPolicyOptions={"prefer-closest-numa-nodes": "true"})
    config = node_config(settings, max_pods=58, numa_node_memory={0: "48Gi", 1: "16Gi"})
    parsed = node_configs(user_data(config))[0][0]
    assert parsed == config, "the YAML reads back as the very NodeConfig"
    options = parsed["spec"]["kubelet"]["config"]["cpuManagerPolicyOptions"]
    assert options == {"full-pcpus-only": "true"}, "kubelet reads option values as strings"
    by_node = dict((e["numaNode"], bytes_of(e["limits"]["memory"])) for e in parsed["spec"]["kubelet"]["config"]
                   ["reservedMemory"])
    # 993 MiB split 3:1 in whole MiB, the odd MiB to the larger remainder
    assert by_node == {0: 745 * MIB, 1: 248 * MIB}


def test_eviction_and_system_reserved_enter_the_sum_as_each_ami_merges_them():
    settings = dict(ALIGNED, systemReserved={"memory": "512Mi"}, evictionHard={"nodefs.available": "15%"})
    # AL2023: the drop-in's evictionHard merges into nodeadm's, which keeps memory.available 100Mi
    kubelet = node_config(settings, max_pods=58, numa_nodes=1)["spec"]["kubelet"]["config"]
    assert reserved(kubelet) == (893 + 512 + 100) * MIB
    # AL2: the --eviction-hard flag replaces bootstrap.sh's whole map: no memory.available any more
    flags = parse_extra_args(bootstrap_kubelet_extra_args(settings, max_pods=58, numa_nodes=1, cpu_count=4))
    assert flags["eviction-hard"] == "nodefs.available<15%"
    assert sum(bytes_of(limit.split("=")[1]) for limit in flags["reserved-memory"].split(";")) == (893 + 512) * MIB
    higher = dict(ALIGNED, evictionHard={"memory.available": "300Mi"})
    assert reserved(node_config(higher, max_pods=58, numa_nodes=1)["spec"]["kubelet"]["config"]) == (893 + 300) * MIB


def test_a_given_reservation_is_checked_not_replaced():
    good = dict(ALIGNED, reservedMemory=[{"numaNode": 0, "limits": {"memory": "500Mi"}},
                                         {"numaNode": 1, "limits": {"memory": "493Mi"}}])
    kubelet = node_config(good, max_pods=58, numa_nodes=2)["spec"]["kubelet"]["config"]
    assert [e["limits"]["memory"] for e in kubelet["reservedMemory"]] == ["500Mi", "493Mi"]
    bad = dict(ALIGNED, reservedMemory=[{"numaNode": 0, "limits": {"memory": "1Gi"}}])
    with pytest.raises(EksUserDataError, match=r'the total amount "1Gi" of type "memory" is not equal to the value '
                                               r'"993Mi".*kubeReserved 893Mi'):
        node_config(bad, max_pods=58, numa_nodes=2)


def test_kube_reserved_memory_given_replaces_the_formula_and_max_pods_may_come_from_the_settings():
    mine = dict(ALIGNED, kubeReserved={"memory": "2Gi", "cpu": "250m"})
    kubelet = node_config(mine, numa_nodes=1)["spec"]["kubelet"]["config"]
    assert kubelet["kubeReserved"] == {"memory": "2Gi", "cpu": "250m"}
    assert reserved(kubelet) == 2 * GIB + 100 * MIB
    from_settings = node_config(dict(ALIGNED, maxPods=110), numa_nodes=1)["spec"]["kubelet"]["config"]
    assert reserved(from_settings) == (11 * 110 + 255 + 100) * MIB and from_settings["maxPods"] == 110


def test_without_the_static_memory_manager_nothing_is_reserved_or_needed():
    kubelet = node_config({"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted"})["spec"]["kubelet"]
    assert kubelet == {"config": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "restricted"}}


def test_flags_and_cluster_for_a_self_managed_group():
    config = node_config(ALIGNED, max_pods=58, numa_nodes=1, flags=["--node-labels=team=numa,tier=batch"],
                         cluster=CLUSTER_DETAILS)
    parsed = node_configs(user_data(config))[0][0]
    check_schema(parsed)
    assert parsed["spec"]["cluster"] == CLUSTER_DETAILS
    assert parsed["spec"]["kubelet"]["flags"] == ["--node-labels=team=numa,tier=batch"]


def test_several_parts_keep_their_order_and_types():
    first = node_config(ALIGNED, max_pods=58, numa_nodes=1)
    second = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
              "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}}}
    document = user_data([first, "#!/bin/bash\necho before-nodeadm", second])
    configs, parts = node_configs(document)
    assert [p.get_content_type() for p in parts] == [MEDIA_TYPE, "text/x-shellscript", MEDIA_TYPE]
    assert configs == [first, second]
    assert parts[1].get_payload().startswith("#!/bin/bash\necho before-nodeadm")
    assert user_data([first, "#!/bin/bash\necho before-nodeadm", second]) == document, "the same input, the same text"


def parse_extra_args(text):
    """bootstrap.sh's value as kubelet gets it: systemd reads %% as %, then splits at white space."""
    assert "'" not in text, "the value sits inside single quotes in the user data script"
    words = text.replace("%%", "%").split()
    assert all(w.startswith("--") and "=" in w for w in words)
    return dict(w[2:].split("=", 1) for w in words)


def test_al2_extra_args_carry_the_reservation_and_a_whole_kube_reserved():
    text = bootstrap_kubelet_extra_args(ALIGNED, max_pods=58, numa_nodes=2, cpu_count=8)
    flags = parse_extra_args(text)
    assert flags["cpu-manager-policy"] == "static" and flags["memory-manager-policy"] == "Static"
    assert flags["topology-manager-policy"] == "single-numa-node" and flags["topology-manager-scope"] == "pod"
    kube = dict(item.split("=") for item in flags["kube-reserved"].split(","))
    # EKS: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest = 90m for 8
    assert kube == {"cpu": "90m", "ephemeral-storage": "1Gi", "memory": "893Mi"}
    entries = dict(entry.split(":") for entry in flags["reserved-memory"].split(";"))
    assert sorted(entries) == ["0", "1"]
    assert sum(bytes_of(limits.split("=")[1]) for limits in entries.values()) == (893 + 100) * MIB


def test_al2_takes_reserved_cpus_and_escapes_percent_for_systemd():
    settings = dict(ALIGNED, reservedSystemCPUs="0-1", evictionHard={"memory.available": "5%"})
    text = bootstrap_kubelet_extra_args(settings, max_pods=58, numa_node_memory={0: "8Gi"},
                                        memory_capacity="8Gi", cpu_count=4)
    assert "--eviction-hard=memory.available<5%%" in text
    flags = parse_extra_args(text)
    assert flags["reserved-cpus"] == "0-1"
    # 5% of 8Gi as kubelet resolves it (float32 percentage), plus 893Mi
    assert bytes_of(flags["reserved-memory"].split("=")[1]) == 893 * MIB + int(8 * GIB * 0.05000000074505806)


@pytest.mark.parametrize("settings,options,message", [
    (ALIGNED, {"numa_nodes": 1}, r"max_pods is missing: EKS reserves 11 MiB per pod \+ 255 MiB.*give the instance "
                                 r"type's max pods"),
    (ALIGNED, {"max_pods": 58}, r"needs the instance type's NUMA nodes.*numa_node_memory.*numa_nodes"),
    (ALIGNED, {"max_pods": 0, "numa_nodes": 1}, r"max_pods: 0 is not a number of pods \(a whole number from 1"),
    (ALIGNED, {"max_pods": True, "numa_nodes": 1}, r"max_pods: True is not a number of pods"),
    (ALIGNED, {"max_pods": "58 pods", "numa_nodes": 1}, r"max_pods: '58 pods' is not a number of pods"),
    (ALIGNED, {"max_pods": 58, "numa_nodes": 0}, r"numa_nodes: 0 is not a number of NUMA nodes"),
    (ALIGNED, {"max_pods": 58, "numa_nodes": "two"}, r"numa_nodes: 'two' is neither a number"),
    (dict(ALIGNED, maxPods=110), {"max_pods": 58, "numa_nodes": 1}, r"maxPods 110 in the settings and max_pods 58 "
                                                                    r"differ"),
    (dict(ALIGNED, memoryManagerPolicy="static"), {"numa_nodes": 1},
     r"memoryManagerPolicy: 'static' is not one of None, Static\. Values are case-sensitive: write 'Static'"),
    (dict(ALIGNED, cpuManagerPolicy="Static"), {"max_pods": 58, "numa_nodes": 1}, r"write 'static'"),
    (dict(ALIGNED, topologyManagerPolcy="restricted"), {"max_pods": 58, "numa_nodes": 1},
     r"'topologyManagerPolcy' is not a KubeletConfiguration field; did you mean"),
    (dict(ALIGNED, reservedSystemCPUs="0-1"), {"max_pods": 58, "numa_nodes": 1},
     r"reservedSystemCPUs cannot be combined with systemReservedCgroup.*nodeadm always sets the cgroups"),
    (dict(ALIGNED, kubeReserved={"memory": "lots"}), {"numa_nodes": 1}, r"kubeReserved\.memory.*lots"),
    (ALIGNED, {"max_pods": 58, "numa_node_memory": {0: "100Mi"}}, r"NUMA node 0: reserves 993Mi but the node has "
                                                                  r"only 100Mi"),
    (ALIGNED, {"max_pods": 58, "numa_nodes": [0, 1], "placement": "single", "placement_node": 5},
     r"placement_node 5 is not a NUMA node"),
    ("cpuManagerPolicy=static", {}, r"expected a mapping of KubeletConfiguration fields"),
    (dict(ALIGNED, topologyManagerPolicy="single-numa-node"), {"max_pods": 58, "numa_nodes": 9},
     r"this machine has 9 NUMA nodes and kubelet refuses more than 8"),
])
def test_bad_input_is_refused_naming_value_rule_and_fix(settings, options, message):
    with pytest.raises(EksUserDataError, match=message):
        node_config(settings, **options)


@pytest.mark.parametrize("flags,message", [
    (["--cpu-manager-policy=none"], r"--cpu-manager-policy sets cpuManagerPolicy, which this NodeConfig writes.*"
                                    r"Put the value in the settings"),
    (["--node-labels=a=b c"], r"white space, a control character, a quote or a backslash"),
    # third review: a C1 control character (CSI, U+009B) passed, though the message promises them refused
    (["--node-labels=a\x9bb"], r"white space, a control character, a quote or a backslash"),
    (["--node-labels=a\x85b"], r"white space, a control character, a quote or a backslash"),
    (["node-labels=a=b"], r"is not a kubelet flag written --name=value"),
    ("--node-labels=a=b", r"expected a list"),
])
def test_bad_flags_are_refused(flags, message):
    with pytest.raises(EksUserDataError, match=message):
        node_config(ALIGNED, max_pods=58, numa_nodes=1, flags=flags)


@pytest.mark.parametrize("change,message", [
    ({"name": None}, r"cluster\.name is missing; nodeadm refuses"),
    ({"cidr": "10.100.0.0"}, r"cluster\.cidr: '10\.100\.0\.0' is not a CIDR"),
    ({"certificateAuthority": "not base64!"}, r"cluster\.certificateAuthority: not base64"),
    ({"endpoint": "https://x"}, r"cluster\.endpoint: nodeadm has no such field"),
    ({"enableOutpost": True}, r"cluster\.id is missing"),
])
def test_bad_cluster_is_refused(change, message):
    cluster = dict(CLUSTER_DETAILS, **change)
    cluster = dict((k, v) for k, v in cluster.items() if v is not None)
    with pytest.raises(EksUserDataError, match=message):
        node_config(ALIGNED, max_pods=58, numa_nodes=1, cluster=cluster)


@pytest.mark.parametrize("parts,message", [
    ({"apiVersion": "v1", "kind": "ConfigMap"}, r"nodeadm reads apiVersion node\.eks\.aws/v1alpha1, kind NodeConfig"),
    ({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"kubelet": {"extraArgs": []}}},
     r"spec\.kubelet\.extraArgs: nodeadm has no such field"),
    (["echo no shebang"], r"neither a NodeConfig mapping nor a shell script"),
    (["#!/bin/sh\n--numa-kube-user-data\n"], r"a line starts with the MIME boundary"),
    ([], r"expected a NodeConfig mapping or a list"),
])
def test_user_data_refuses_what_nodeadm_or_mime_cannot_read(parts, message):
    with pytest.raises(EksUserDataError, match=message):
        user_data(parts)


def test_al2_refuses_what_has_no_flag_and_needs_the_cpu_reservation():
    with pytest.raises(EksUserDataError, match=r"give cpu_count.*or kubeReserved\.cpu"):
        bootstrap_kubelet_extra_args(ALIGNED, max_pods=58, numa_nodes=1)
    with pytest.raises(EksUserDataError, match=r"containerLogMaxWorkers has no kubelet flag.*bootstrap\.sh passes "
                                               r"kubelet flags only"):
        bootstrap_kubelet_extra_args({"containerLogMaxWorkers": 2})
    with pytest.raises(EksUserDataError, match=r"white space, a quote or a backslash"):
        bootstrap_kubelet_extra_args({"cpuManagerPolicy": "static", "providerID": "aws:///a b"})


def test_kubelet_settings_returns_the_reservation_it_wrote():
    written, reservation = kubelet_settings(ALIGNED, "al2023", max_pods=58, numa_nodes=1)
    assert reservation["reserved_memory"] == written["reservedMemory"]
    assert reservation["required"] == {"memory": "993Mi"}
    with pytest.raises(EksUserDataError, match=r"ami 'bottlerocket' is not one of al2023, al2"):
        kubelet_settings(ALIGNED, "bottlerocket")


@pytest.mark.parametrize("flag", ["--node-labels=a=b\n--hostname-override=evil", "--v=2 --x=y", "--a='b'", "--a=b\\c",
                                  "node-labels=a", "--a=b\x00c", "--a=b\x7f"])
def test_a_nodeconfig_part_of_the_users_gets_the_same_flag_checks(flag):
    """Hostile review: eks_user_data let a NodeConfig flag with a newline through (node_config refused it)."""
    mine = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": {"kubelet": {"flags": [flag]}}}
    with pytest.raises(EksUserDataError, match=r"parts\[0\].spec.kubelet.flags\[0\]"):
        user_data([mine])
    with pytest.raises(EksUserDataError):
        node_config(ALIGNED, max_pods=110, flags=[flag])
    fine = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
            "spec": {"kubelet": {"flags": ["--node-labels=team=a"]}}}
    assert node_configs(user_data([fine]))[0] == [fine]
