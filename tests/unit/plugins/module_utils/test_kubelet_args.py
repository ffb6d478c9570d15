# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet_args import (
    KubeletArgsError,
    flag_name,
    kubelet_arg_list,
    kubelet_extra_args,
)

SETTINGS = {
    "cpuManagerPolicy": "static",
    "topologyManagerPolicy": "single-numa-node",
    "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
    "kubeReserved": {"memory": "1Gi", "cpu": "500m"},
    "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "562Mi"}}, {"numaNode": 1, "limits": {"memory": "562Mi"}}],
    "reservedSystemCPUs": "0-1",
    "featureGates": {"CPUManagerPolicyAlphaOptions": True},
    "maxPods": 110,
    "clusterDNS": ["10.43.0.10", "fd00::10"],
    "memorySwap": None,
}


def test_kubelet_arg_list():
    assert kubelet_arg_list(SETTINGS) == [
        "cpu-manager-policy=static",
        "topology-manager-policy=single-numa-node",
        "topology-manager-policy-options=prefer-closest-numa-nodes=true",
        "kube-reserved=cpu=500m,memory=1Gi",
        "eviction-hard=memory.available<100Mi,nodefs.available<10%",
        "reserved-memory=0:memory=562Mi;1:memory=562Mi",
        "reserved-cpus=0-1",
        "feature-gates=CPUManagerPolicyAlphaOptions=true",
        "max-pods=110",
        "cluster-dns=10.43.0.10,fd00::10",
    ]


def test_kubelet_extra_args_plain_and_quoted():
    plain = kubelet_extra_args({"cpuManagerPolicy": "static", "evictionHard": {"memory.available": "100Mi"}})
    assert plain == "--cpu-manager-policy=static --eviction-hard=memory.available<100Mi"
    quoted = kubelet_extra_args(SETTINGS, quote=True)
    assert shlex.split(quoted) == ["--" + a for a in kubelet_arg_list(SETTINGS)]
    assert "'--reserved-memory=0:memory=562Mi;1:memory=562Mi'" in quoted


@pytest.mark.parametrize("field,flag", [
    ("cpuManagerPolicy", "cpu-manager-policy"),
    ("reservedSystemCPUs", "reserved-cpus"),
    ("kubeAPIQPS", "kube-api-qps"),
    ("podPidsLimit", "pod-pids-limit"),
    ("memoryManagerPolicy", "memory-manager-policy"),
])
def test_flag_names(field, flag):
    assert flag_name(field) == flag


def test_nested_settings_have_no_flag():
    with pytest.raises(KubeletArgsError, match="authentication"):
        kubelet_arg_list({"authentication": {"x509": {"clientCAFile": "/ca"}}})
    with pytest.raises(KubeletArgsError, match="mapping"):
        kubelet_arg_list(["cpuManagerPolicy=static"])


def test_api_version_and_kind_are_skipped():
    assert kubelet_arg_list({"apiVersion": "v1", "kind": "KubeletConfiguration", "maxPods": 10}) == ["max-pods=10"]
