# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet.rules import (
    FeatureGates,
    Settings,
    decode_problems,
    feature_gates,
    go_duration,
    settings_problems,
    type_problem,
)


@pytest.mark.parametrize("text,nanoseconds", [
    ("0", 0), ("-0", 0), ("1s", 10 ** 9), ("1m30s", 90 * 10 ** 9), ("-1.5h", -5400 * 10 ** 9), ("300ms", 3 * 10 ** 8),
    ("1.s", 10 ** 9), (".5s", 5 * 10 ** 8), ("1\u00b5s", 1000), ("1\u03bcs", 1000), ("2h45m", 9900 * 10 ** 9),
    ("9223372036854775807ns", 2 ** 63 - 1), ("-9223372036854775808ns", -2 ** 63), ("2562047h", 2562047 * 3600 * 10 ** 9),
])
def test_go_durations_read_as_time_parse_duration_reads_them(text, nanoseconds):
    assert go_duration(text) == nanoseconds


@pytest.mark.parametrize("text,message", [
    ("", "invalid duration"), ("1", "missing unit"), ("1.5.5s", "missing unit"), (".s", "invalid duration"),
    ("1d", 'unknown unit "d"'), ("9223372036854775808ns", "invalid duration"), ("2562048h", "invalid duration"),
    ("1 s", 'unknown unit " s"'), ("s", "invalid duration"),
])
def test_what_go_refuses_as_a_duration_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        go_duration(text)


@pytest.mark.parametrize("gotype,value,message", [
    ("int32", 2 ** 31, "out of range: kubelet reads this field as an int32"),
    ("int32", 10 ** 20, "out of range"),
    ("*int32", -2 ** 31 - 1, "out of range"),
    ("int64", 2 ** 63, "out of range"),
    ("int32", True, "is not a whole number"),
    ("int32", "110", "is not a whole number"),
    ("int32", 1.5, "is not a whole number"),
    ("int32", 110.0, "numa.kube takes whole numbers only (kubelet reads it from YAML but not from JSON): write 110"),
    ("float64", float("nan"), "not a finite number"),
    ("bool", "true", "is not true or false"),
    ("string", True, 'write "true"'),
    ("string", 5, "quote it"),
    ("v1.Duration", "5", "not a duration"),
    ("v1.Duration", 5, "not a duration string"),
    ("map[string]string", {"memory": 1}, "memory: 1 (int) is not a string"),
    ("map[string]bool", ["x"], "is not a mapping"),
    ("[]string", "pods", "is not a list"),
    ("v1beta1.KubeletAuthentication", [], "is not a mapping"),
])
def test_a_value_that_does_not_decode_into_its_go_type_is_named(gotype, value, message):
    assert message in type_problem(gotype, value)


@pytest.mark.parametrize("gotype,value", [
    ("int32", 2 ** 31 - 1), ("int32", -2 ** 31), ("int64", 2 ** 63 - 1), ("float64", 1), ("v1.Duration", "1m"),
    ("map[string]string", {}), ("[]string", []), ("v1beta1.MemorySwapConfiguration", {}), ("int32", None),
])
def test_values_of_the_type_decode(gotype, value):
    assert type_problem(gotype, value) is None


def test_max_pods_beyond_int32_is_refused_as_kubelet_cannot_load_it():
    problems, bad = decode_problems({"maxPods": 10 ** 20, "cpuManagerPolicy": "static"})
    assert bad == {"maxPods"}
    assert "maxPods: 100000000000000000000 is out of range: kubelet reads this field as an int32" in problems[0]
    assert "kubelet cannot load the file" in problems[0]


def test_nested_fields_the_rules_read_are_decoded_too():
    problems, bad = decode_problems({"memorySwap": {"swapBehavior": 5}, "crashLoopBackOff": {
        "maxContainerRestartPeriod": "soon"}})
    assert bad == {"memorySwap", "crashLoopBackOff"}


def gate_problems(gates):
    problems = []
    result = feature_gates(gates, problems)
    return result, " | ".join(problems)


def test_feature_gates_unknown_locked_and_typed():
    dummy, problems = gate_problems({"NoSuchGate": True, "CPUManagerPolicyOptions": False, "MemoryQoS": "true"})
    assert "featureGates.NoSuchGate: kubelet does not know this feature gate" in problems
    assert "featureGates.CPUManagerPolicyOptions: the gate is locked to true" in problems
    assert "featureGates.MemoryQoS: 'true' must be true or false" in problems


def test_a_gate_whose_dependencies_are_off_is_refused_with_both_named():
    dummy, problems = gate_problems({"InPlacePodVerticalScalingExclusiveCPUs": True})
    assert problems == ""  # InPlacePodVerticalScaling is on by default (locked)
    dummy, problems = gate_problems({"GracefulNodeShutdown": False})
    # GracefulNodeShutdownBasedOnPodPriority is on by default and needs it
    assert ("GracefulNodeShutdownBasedOnPodPriority (on by default): kubelet refuses it ('GracefulNodeShutdown"
            "BasedOnPodPriority is enabled, but depends on features that are disabled: [GracefulNodeShutdown]')"
            in problems)
    dummy, problems = gate_problems({"GracefulNodeShutdown": False, "GracefulNodeShutdownBasedOnPodPriority": False,
                                     "WindowsGracefulNodeShutdown": False})
    assert problems == ""


def test_all_alpha_and_all_beta_set_the_gates_a_file_leaves_alone():
    gates, dummy = gate_problems({"AllAlpha": True, "MemoryQoS": False, "GangScheduling": False})
    assert gates.enabled("CPUManagerPolicyAlphaOptions") and not gates.enabled("MemoryQoS")
    assert gates.enabled("CPUManagerPolicyBetaOptions")  # beta: its default
    gates, problems = gate_problems({"AllBeta": False})
    assert not gates.enabled("CPUManagerPolicyBetaOptions") and not gates.enabled("KubeletCrashLoopBackOffMax")
    assert gates.enabled("CPUManagerPolicyOptions")  # GA: untouched
    assert problems == ""


def test_all_alpha_turns_on_gates_whose_dependencies_stay_off():
    dummy, problems = gate_problems({"AllAlpha": True, "GenericWorkload": False})
    assert "GangScheduling (on through AllAlpha)" in problems


def rules(config, gates=None):
    return " | ".join(settings_problems(config, FeatureGates(gates or {})))


def test_an_empty_configuration_passes():
    assert rules({}) == ""


def test_zero_is_kubelets_default_where_the_field_is_not_a_pointer():
    # maxPods 0 and port 0 become 110 and 10250; a pointer field keeps its 0
    assert rules({"maxPods": 0, "port": 0, "nodeLeaseDurationSeconds": 0}) == ""
    assert "containerLogMaxFiles must be greater than 1" in rules({"containerLogMaxFiles": 0})
    settings = Settings({"maxPods": 0, "imageGCHighThresholdPercent": 0}, FeatureGates({}))
    assert settings["maxPods"] == 110 and settings["imageGCHighThresholdPercent"] == 0


@pytest.mark.parametrize("config,message", [
    ({"maxPods": -1}, "maxPods: -1 (kubelet: 'invalid configuration: maxPods must not be a negative number')"),
    ({"port": 65536}, "port (--port) must be between 1 and 65535"),
    ({"healthzPort": 70000}, "healthzPort (--healthz-port) must be between 1 and 65535"),
    ({"imageGCLowThresholdPercent": 90}, "imageGCLowThresholdPercent 90 must be less than imageGCHighThresholdPercent 85"),
    ({"oomScoreAdj": -1001}, "oomScoreAdj must be between -1000 and 1000"),
    ({"iptablesDropBit": 32}, "iptablesDropBit must be between 0 and 31"),
    ({"nodeStatusMaxImages": -2}, "must be -1 or greater"),
    ({"maxParallelImagePulls": 5, "serializeImagePulls": True}, "cannot be larger than 1 unless SerializeImagePulls"),
    ({"maxParallelImagePulls": 0}, "maxParallelImagePulls must be a positive number"),
    ({"runOnce": True}, "Runonce mode has been deprecated"),
    ({"systemCgroups": "/system.slice"}, "cgroupRoot (--cgroup-root) was not specified"),
    ({"cpuCFSQuotaPeriod": "2s"}, "cpuCFSQuotaPeriod must be between 1ms and 1sec"),
    ({"imageMaximumGCAge": "1m"}, "imageMaximumGCAge must be greater than imageMinimumGCAge"),
    ({"hairpinMode": "veth"}, "option 'veth' specified for hairpinMode"),
    ({"enforceNodeAllocatable": ["pods", "system-reserved"]}, "systemReservedCgroup must be specified"),
    ({"enforceNodeAllocatable": ["none", "pods"]}, "may not contain additional enforcements"),
    ({"enforceNodeAllocatable": ["pods", "pods"]}, "duplicated enforcements 'pods'"),
    ({"memorySwap": {"swapBehavior": "Always"}}, "memorySwap.swapBehavior 'Always' must be one of"),
    ({"crashLoopBackOff": {"maxContainerRestartPeriod": "10m"}}, "must be set between 1s and 300s"),
    ({"shutdownGracePeriod": "500ms"}, "shutdownGracePeriod must be either zero or otherwise >= 1 sec"),
    ({"shutdownGracePeriod": "10s", "shutdownGracePeriodCriticalPods": "20s"}, "must be <= shutdownGracePeriod"),
    ({"memoryThrottlingFactor": 1.5}, "memoryThrottlingFactor must be greater than 0"),
    ({"memoryReservationPolicy": "tiered"}, "option 'tiered' specified for memoryReservationPolicy"),
    ({"enableSystemLogQuery": True, "enableSystemLogHandler": False}, "enableSystemLogHandler is required"),
    ({"containerLogMonitorInterval": "2s"}, "greater than or equal to 3s"),
    ({"podLogsDir": "/var/log/../pods"}, "must be normalized"),
    ({"podLogsDir": "/var/log/p\u00f6ds"}, "ASCII characters only"),
    ({"userNamespaces": {"idsPerPod": 65535}}, "must be a multiple of 65536"),
    ({"imagePullCredentialsVerificationPolicy": "Sometimes"}, "option 'Sometimes' specified"),
])
def test_kubelet_validation_rules(config, message):
    assert message in rules(config)


def test_a_relative_pod_logs_dir_is_joined_to_the_configuration_folder():
    assert rules({"podLogsDir": "var/log/../pods"}) == ""


def test_serialized_pulls_default_to_off_when_parallel_pulls_are_asked_for():
    assert rules({"maxParallelImagePulls": 5}) == ""


@pytest.mark.parametrize("config,gates,message", [
    ({"memoryReservationPolicy": "TieredReservation"}, {}, "requires MemoryQoS feature gate to be enabled; "),
    ({"cpuCFSQuotaPeriod": "50ms"}, {"CustomCPUCFSQuotaPeriod": False}, "requires feature gate CustomCPUCFSQuotaPeriod"),
    ({"serverTLSBootstrap": True}, {"RotateKubeletServerCertificate": False}, "requires feature gate Rotate"),
    ({"shutdownGracePeriod": "30s"}, {"GracefulNodeShutdown": False}, "requires feature gate GracefulNodeShutdown"),
    ({"shutdownGracePeriodByPodPriority": [{"priority": 1}]}, {"GracefulNodeShutdownBasedOnPodPriority": False},
     "requires feature gate GracefulNodeShutdownBasedOnPodPriority"),
    ({"crashLoopBackOff": {"maxContainerRestartPeriod": "1m"}}, {"KubeletCrashLoopBackOffMax": False},
     "KubeletCrashLoopBackOffMax not enabled"),
    ({"imagePullCredentialsVerificationPolicy": "AlwaysVerify"}, {"KubeletEnsureSecretPulledImages": False},
     "must not be set if KubeletEnsureSecretPulledImages"),
])
def test_values_that_need_a_feature_gate(config, gates, message):
    assert message in rules(config, gates).replace("'); ", "; ")
    # the same value with the gate in its other position passes
    flipped = dict((name, not value) for name, value in gates.items()) or {"MemoryQoS": True}
    assert rules(config, flipped) == ""
