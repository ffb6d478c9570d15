# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet.args import (
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
    ("podPidsLimit", "pod-max-pids"),
    ("memoryManagerPolicy", "memory-manager-policy"),
    ("imageGCHighThresholdPercent", "image-gc-high-threshold"),
    ("eventRecordQPS", "event-qps"),
    ("serverTLSBootstrap", "rotate-server-certificates"),
    ("failCgroupV1", "fail-cgroupv1"),
])
def test_flag_names_are_kubelets_own(field, flag):
    # the whole table is compared with kubelet's flag set in tests/differential
    assert flag_name(field) == flag


@pytest.mark.parametrize("field", ["shutdownGracePeriod", "mergeDefaultEvictionSettings", "memoryReservationPolicy",
                                   "imageMaximumGCAge"])
def test_fields_kubelet_has_no_flag_for_are_refused(field):
    with pytest.raises(KubeletArgsError, match="has no kubelet flag"):
        kubelet_arg_list({field: "1"})


def test_unknown_fields_are_refused():
    with pytest.raises(KubeletArgsError, match="not a KubeletConfiguration field"):
        kubelet_arg_list({"cpuManagerPolcy": "static"})


def test_nested_settings_have_no_flag():
    with pytest.raises(KubeletArgsError, match="authentication"):
        kubelet_arg_list({"authentication": {"x509": {"clientCAFile": "/ca"}}})
    with pytest.raises(KubeletArgsError, match="mapping"):
        kubelet_arg_list(["cpuManagerPolicy=static"])


def test_api_version_and_kind_are_skipped():
    assert kubelet_arg_list({"apiVersion": "v1", "kind": "KubeletConfiguration", "maxPods": 10}) == ["max-pods=10"]


@pytest.mark.parametrize("value", ["0:memory=1Gi", [{"numaNode": 0}], [{"numaNode": 0, "limits": {"memory": "1.5Gi"}}]])
def test_a_reserved_memory_kubelet_would_refuse_is_refused_with_words(value):
    with pytest.raises(KubeletArgsError, match="reservedMemory: "):
        kubelet_arg_list({"reservedMemory": value})
