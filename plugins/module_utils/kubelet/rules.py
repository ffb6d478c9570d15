# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What kubelet refuses in a KubeletConfiguration outside the CPU, Topology and Memory Managers.

Three steps, as kubelet takes them when it starts: each field's value must decode into the field's
Go type (``maxPods`` is an int32, a duration is Go's ``1m30s`` syntax); the feature gates must be
known, not locked to another value, and leave no enabled gate without the gates it depends on; and
the values kubelet sees after defaulting must pass ValidateKubeletConfiguration's rules, several of
which depend on those gates. The tables come from kubelet itself (kubelet_fields), and the
differential tests (tests/differential) hold these rules against kubelet's own code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import posixpath

from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import (
    DEFAULTS,
    FEATURE_GATE_DEPENDENCIES,
    FEATURE_GATES,
    TYPES,
)

INT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
NANOSECONDS = {"ns": 1, "us": 10 ** 3, u"\u00b5s": 10 ** 3, u"\u03bcs": 10 ** 3, "ms": 10 ** 6, "s": 10 ** 9,
               "m": 60 * 10 ** 9, "h": 3600 * 10 ** 9}
SECOND = 10 ** 9
_TOP = 1 << 63
# What numa.kube says where it refuses on purpose a value kubelet would read (docs/modules.md, "Where numa.kube
# is stricter than kubelet"): a whole-number field written as a decimal number.
WHOLE_NUMBERS_ONLY = "numa.kube takes whole numbers only"


def go_duration(text):
    """Nanoseconds of a Go duration string, as time.ParseDuration reads it (``1m30s``, ``-1.5h``,
    ``300ms``, ``0``); raises ValueError with Go's message otherwise."""
    if not isinstance(text, str):
        raise ValueError("%r is not a duration string" % (text,))
    data = text.encode("utf-8")
    invalid = ValueError('time: invalid duration "%s"' % text)
    negative = False
    if data[:1] in (b"-", b"+"):
        negative = data[:1] == b"-"
        data = data[1:]
    if data == b"0":
        return 0
    if not data:
        raise invalid
    total = 0
    while data:
        if not (data[:1] == b"." or data[:1].isdigit()):
            raise invalid
        whole, digits = 0, 0
        while digits < len(data) and data[digits:digits + 1].isdigit():
            if whole > _TOP // 10:
                raise invalid
            whole = whole * 10 + int(data[digits:digits + 1])
            if whole > _TOP:
                raise invalid
            digits += 1
        data = data[digits:]
        fraction, scale, after = 0, 1.0, 0
        if data[:1] == b".":
            data = data[1:]
            overflow = False
            while after < len(data) and data[after:after + 1].isdigit():
                if not overflow:
                    if fraction > (_TOP - 1) // 10:
                        overflow = True
                    else:
                        bigger = fraction * 10 + int(data[after:after + 1])
                        if bigger > _TOP:
                            overflow = True
                        else:
                            fraction = bigger
                            scale *= 10
                after += 1
            data = data[after:]
        if not digits and not after:
            raise invalid
        end = 0
        while end < len(data) and not (data[end:end + 1] == b"." or data[end:end + 1].isdigit()):
            end += 1
        if end == 0:
            raise ValueError('time: missing unit in duration "%s"' % text)
        unit_name = data[:end].decode("utf-8", "replace")
        data = data[end:]
        if unit_name not in NANOSECONDS:
            raise ValueError('time: unknown unit "%s" in duration "%s"' % (unit_name, text))
        unit = NANOSECONDS[unit_name]
        if whole > _TOP // unit:
            raise invalid
        whole *= unit
        if fraction > 0:
            whole += int(float(fraction) * (float(unit) / scale))
            if whole > _TOP:
                raise invalid
        total += whole
        if total > _TOP:
            raise invalid
    if negative:
        return -total
    if total > _TOP - 1:
        raise invalid
    return total


def _describe(value):
    return "%r (%s)" % (value, type(value).__name__)


def _whole(value, gotype):
    """The problem with ``value`` for an integer Go type, or None."""
    low, high = INT_RANGES[gotype]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "%s is not a whole number" % _describe(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or value != int(value):
            return "%r is not a whole number" % (value,)
        if low <= value <= high:
            return ("%r is written as a decimal number; %s (kubelet reads it from YAML but not from JSON): "
                    "write %d" % (value, WHOLE_NUMBERS_ONLY, int(value)))
    if not low <= value <= high:
        return "%r is out of range: kubelet reads this field as an %s (%d..%d)" % (value, gotype, low, high)
    return None


def type_problem(gotype, value):
    """Why ``value`` (as YAML or JSON gives it) does not decode into the Go type ``gotype``, or None.

    Structures (authentication, logging, taints...) are only checked to be a mapping or a list.
    """
    if value is None:
        return None
    gotype = gotype.lstrip("*")
    if gotype in INT_RANGES:
        return _whole(value, gotype)
    if gotype == "float64":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "%s is not a number" % _describe(value)
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return "%r is not a finite number" % (value,)
        return None
    if gotype == "bool":
        return None if isinstance(value, bool) else "%s is not true or false" % _describe(value)
    if gotype == "v1.Duration":
        if not isinstance(value, str):
            return "%s is not a duration string such as \"1m30s\"" % _describe(value)
        try:
            go_duration(value)
        except ValueError as exc:
            return "%r is not a duration such as 1m30s, 500ms or 2h (kubelet: '%s')" % (value, exc)
        return None
    if gotype == "string" or gotype.startswith("v1beta1.") and gotype[8:] in _STRING_TYPES:
        if isinstance(value, bool):
            return "%s is not a string: write \"%s\"" % (_describe(value), str(value).lower())
        return None if isinstance(value, str) else "%s is not a string; quote it" % _describe(value)
    if gotype.startswith("map["):
        if not isinstance(value, dict):
            return "%s is not a mapping" % _describe(value)
        element = gotype[gotype.index("]") + 1:]
        for key in sorted(value, key=str):
            problem = type_problem(element, value[key]) if value[key] is not None else None
            if problem:
                return "%s: %s" % (key, problem)
        return None
    if gotype.startswith("[]"):
        if not isinstance(value, list):
            return "%s is not a list" % _describe(value)
        for index, item in enumerate(value):
            problem = type_problem(gotype[2:], item)
            if problem:
                return "[%d]: %s" % (index, problem)
        return None
    # a structure of kubelet's (v1beta1.KubeletAuthentication, v1.LoggingConfiguration...)
    return None if isinstance(value, dict) else "%s is not a mapping" % _describe(value)


# v1beta1 types that are strings underneath
_STRING_TYPES = ("ImagePullCredentialsVerificationPolicy", "MemoryReservationPolicy",
                 "ResourceChangeDetectionStrategy")


# the fields inside kubelet's structures that the rules below read
NESTED = {
    "memorySwap": {"swapBehavior": "string"},
    "crashLoopBackOff": {"maxContainerRestartPeriod": "*v1.Duration"},
    "userNamespaces": {"idsPerPod": "*int64"},
}


def decode_problems(config):
    """Problems of the fields whose value kubelet cannot decode; returns (problems, the fields)."""
    problems, bad = [], set()
    for field in sorted(config):
        if field not in TYPES:
            continue
        problem = type_problem(TYPES[field], config[field])
        if not problem and isinstance(config[field], dict):
            for key, gotype in sorted(NESTED.get(field, {}).items()):
                inner = type_problem(gotype, config[field].get(key))
                if inner:
                    problem = "%s: %s" % (key, inner)
        if problem:
            bad.add(field)
            if WHOLE_NUMBERS_ONLY in problem:
                problems.append("%s: %s" % (field, problem))
            else:
                problems.append("%s: %s; kubelet cannot load the file (its type is %s)"
                                % (field, problem, TYPES[field].lstrip("*")))
    return problems, bad


class FeatureGates(object):
    """kubelet's feature gates after it set those of a configuration (featureGates)."""

    def __init__(self, explicit):
        self.explicit = dict(explicit)

    def enabled(self, name):
        if name in self.explicit:
            return self.explicit[name]
        default, dummy_locked, stage = FEATURE_GATES[name]
        # AllAlpha and AllBeta set every gate of their stage the file does not set itself
        if stage == "ALPHA" and "AllAlpha" in self.explicit and name != "AllBeta":
            return self.explicit["AllAlpha"]
        if stage == "BETA" and "AllBeta" in self.explicit and name != "AllAlpha":
            return self.explicit["AllBeta"]
        return default


def feature_gates(gates, problems):
    """Check featureGates as kubelet sets them; returns the FeatureGates kubelet would run with."""
    if gates is None:
        return FeatureGates({})
    if not isinstance(gates, dict):
        problems.append("featureGates: expected a mapping of gate name to true or false, got %r" % (gates,))
        return FeatureGates({})
    explicit = {}
    for name, value in sorted(gates.items(), key=lambda item: str(item[0])):
        if name not in FEATURE_GATES:
            problems.append("featureGates.%s: kubelet does not know this feature gate and stops on it ('unrecognized "
                            "feature gate: %s')" % (name, name))
            continue
        if not isinstance(value, bool):
            problems.append("featureGates.%s: %r must be true or false" % (name, value))
            continue
        default, locked, dummy_stage = FEATURE_GATES[name]
        if locked and value != default:
            problems.append("featureGates.%s: the gate is locked to %s in this kubelet ('cannot set feature gate %s "
                            "to %s, feature is locked to %s'); remove it"
                            % (name, str(default).lower(), name, str(value).lower(), str(default).lower()))
            continue
        explicit[name] = value
    result = FeatureGates(explicit)
    for name in sorted(FEATURE_GATE_DEPENDENCIES):
        if not result.enabled(name):
            continue
        off = [dependency for dependency in FEATURE_GATE_DEPENDENCIES[name] if not result.enabled(dependency)]
        if off:
            how = "featureGates.%s" % name if name in explicit else "%s (on %s)" % (name, _why_on(name, explicit))
            problems.append("%s: kubelet refuses it ('%s is enabled, but depends on features that are disabled: "
                            "[%s]'); enable %s too, or turn %s off"
                            % (how, name, " ".join(off), " and ".join(off), name))
    return result


def _why_on(name, explicit):
    stage = FEATURE_GATES[name][2]
    if stage == "ALPHA" and explicit.get("AllAlpha"):
        return "through AllAlpha"
    if stage == "BETA" and explicit.get("AllBeta"):
        return "through AllBeta"
    return "by default"


class Settings(object):
    """The value kubelet validates for each field: the file's, or kubelet's default where the file
    leaves the field out (or gives the zero value of a field that is not a pointer)."""

    def __init__(self, config, gates):
        self.config = config
        self.gates = gates

    def given(self, field):
        return self.config.get(field) is not None

    def __getitem__(self, field):
        value = self.config.get(field)
        gotype = TYPES[field]
        pointer = gotype.startswith("*")
        if field == "crashLoopBackOff":
            period = (value or {}).get("maxContainerRestartPeriod")
            if period is None and self.gates.enabled("KubeletCrashLoopBackOffMax"):
                period = DEFAULTS[field]["maxContainerRestartPeriod"]
            return {} if period is None else {"maxContainerRestartPeriod": period}
        if field == "serializeImagePulls" and value is None:
            # true unless maxParallelImagePulls allows more than one pull at a time
            pulls = self.config.get("maxParallelImagePulls")
            return pulls is None or pulls < 2
        if field == "imagePullCredentialsVerificationPolicy" and not value:
            return DEFAULTS[field] if self.gates.enabled("KubeletEnsureSecretPulledImages") else ""
        if value is not None and (pointer or not _is_zero(gotype, value)):
            return value
        if field in DEFAULTS:
            return DEFAULTS[field]
        if pointer:
            return None
        return value if value is not None else _ZEROS.get(gotype)

    def duration(self, field):
        value = self[field]
        return 0 if value is None else go_duration(value)


_ZEROS = {"int32": 0, "int64": 0, "float64": 0.0, "bool": False, "string": "", "v1.Duration": "0s"}


def _is_zero(gotype, value):
    if gotype == "v1.Duration":
        return go_duration(value) == 0
    if gotype in ("int32", "int64", "float64"):
        return value == 0
    if gotype == "bool":
        return value is False
    if gotype == "string" or gotype[8:] in _STRING_TYPES:
        return value == ""
    if gotype.startswith("v1beta1.") and isinstance(value, dict):
        return not any(v is not None for v in value.values())
    return False


def _port(value):
    return 1 <= value <= 65535


def settings_problems(config, gates, skip=()):
    """ValidateKubeletConfiguration's rules for the fields outside the NUMA managers, on the values
    kubelet sees after defaulting. ``skip``: fields that did not decode (already reported)."""
    problems = []
    s = Settings(dict((k, v) for k, v in config.items() if k not in skip), gates)

    def refuse(field, message, fix):
        problems.append("%s: %s (kubelet: 'invalid configuration: %s'); %s" % (field, _shown(config, field), message,
                                                                               fix))

    def at_least(field, low, message=None, fix=None):
        if s[field] < low:
            refuse(field, message or "%s must not be a negative number" % field,
                   fix or "use %d or more" % low)

    def between(field, low, high, message):
        if not low <= s[field] <= high:
            refuse(field, message, "use %d to %d" % (low, high))

    if s["nodeLeaseDurationSeconds"] <= 0:
        refuse("nodeLeaseDurationSeconds", "nodeLeaseDurationSeconds must be greater than 0", "use a positive number")
    if s["systemCgroups"] != "" and s["cgroupRoot"] == "":
        refuse("systemCgroups", "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not "
               "specified", "set cgroupRoot too")
    for field in ("eventBurst", "eventRecordQPS", "kubeAPIBurst", "kubeAPIQPS", "maxOpenFiles", "maxPods",
                  "podsPerCore", "registryBurst", "registryPullQPS"):
        at_least(field, 0)
    if s["healthzPort"] != 0 and not _port(s["healthzPort"]):
        refuse("healthzPort", "healthzPort (--healthz-port) must be between 1 and 65535, inclusive",
               "use 0 (off) or 1 to 65535")
    period = s.duration("cpuCFSQuotaPeriod")
    if not gates.enabled("CustomCPUCFSQuotaPeriod") and period != 100 * 10 ** 6:
        refuse("cpuCFSQuotaPeriod", "cpuCFSQuotaPeriod requires feature gate CustomCPUCFSQuotaPeriod",
               "enable featureGates.CustomCPUCFSQuotaPeriod or leave it at 100ms")
    if gates.enabled("CustomCPUCFSQuotaPeriod") and not 10 ** 6 <= period <= SECOND:
        refuse("cpuCFSQuotaPeriod", "cpuCFSQuotaPeriod must be between 1ms and 1sec, inclusive", "use 1ms to 1s")
    high, low = s["imageGCHighThresholdPercent"], s["imageGCLowThresholdPercent"]
    between("imageGCHighThresholdPercent", 0, 100, "imageGCHighThresholdPercent must be between 0 and 100, inclusive")
    between("imageGCLowThresholdPercent", 0, 100, "imageGCLowThresholdPercent must be between 0 and 100, inclusive")
    if low >= high:
        refuse("imageGCLowThresholdPercent", "imageGCLowThresholdPercent %s must be less than "
               "imageGCHighThresholdPercent %s" % (low, high), "keep the low threshold below the high one")
    newest, oldest = s.duration("imageMinimumGCAge"), s.duration("imageMaximumGCAge")
    if newest < 0:
        refuse("imageMinimumGCAge", "imageMinimumGCAge must not be negative", "use 0s or more")
    if oldest < 0:
        refuse("imageMaximumGCAge", "imageMaximumGCAge must not be negative", "use 0s (off) or more")
    if 0 < oldest <= newest:
        refuse("imageMaximumGCAge", "imageMaximumGCAge must be greater than imageMinimumGCAge",
               "make it longer than imageMinimumGCAge (%s)" % s["imageMinimumGCAge"])
    between("iptablesDropBit", 0, 31, "iptablesDropBit must be between 0 and 31, inclusive")
    between("iptablesMasqueradeBit", 0, 31, "iptablesMasqueradeBit must be between 0 and 31, inclusive")
    at_least("nodeStatusMaxImages", -1, "nodeStatusMaxImages must be -1 or greater", "use -1 (no limit) or more")
    between("oomScoreAdj", -1000, 1000, "oomScoreAdj must be between -1000 and 1000, inclusive")
    if not _port(s["port"]):
        refuse("port", "port (--port) must be between 1 and 65535, inclusive", "use 1 to 65535")
    if s["readOnlyPort"] != 0 and not _port(s["readOnlyPort"]):
        refuse("readOnlyPort", "readOnlyPort (--read-only-port) must be between 0 and 65535, inclusive",
               "use 0 (off) or 1 to 65535")
    pulls = s["maxParallelImagePulls"]
    if pulls is not None and pulls < 1:
        refuse("maxParallelImagePulls", "maxParallelImagePulls must be a positive number", "use 1 or more")
    if s["serializeImagePulls"] and pulls is not None and pulls > 1:
        refuse("maxParallelImagePulls", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls "
               "(--serialize-image-pulls) is set to false", "set serializeImagePulls: false too")
    if s["serverTLSBootstrap"] and not gates.enabled("RotateKubeletServerCertificate"):
        refuse("serverTLSBootstrap", "serverTLSBootstrap requires feature gate RotateKubeletServerCertificate",
               "enable the gate or leave serverTLSBootstrap off")
    if s["runOnce"]:
        refuse("runOnce", "runOnce (--runOnce), Runonce mode has been deprecated and should not be set",
               "remove it")
    _shutdown(s, gates, refuse)
    swap = (s["memorySwap"] or {}).get("swapBehavior")
    if gates.enabled("NodeSwap") and swap not in (None, "", "NoSwap", "LimitedSwap"):
        refuse("memorySwap", "memorySwap.swapBehavior %r must be one of: \"\", \"LimitedSwap\" or \"NoSwap\""
               % (swap,), "use NoSwap or LimitedSwap")
    if not gates.enabled("NodeSwap") and swap not in (None, ""):
        refuse("memorySwap", "memorySwap.swapBehavior cannot be set when NodeSwap feature flag is disabled",
               "enable NodeSwap or remove memorySwap")
    _crash_loop(s, gates, refuse)
    _enforcement(s, refuse)
    if s["hairpinMode"] not in ("none", "hairpin-veth", "promiscuous-bridge"):
        refuse("hairpinMode", "option %r specified for hairpinMode" % (s["hairpinMode"],),
               "use none, hairpin-veth or promiscuous-bridge")
    _image_credentials(s, gates, refuse)
    _user_namespaces(s, refuse)
    factor = s["memoryThrottlingFactor"]
    if factor is not None and not 0 < factor <= 1.0:
        refuse("memoryThrottlingFactor", "memoryThrottlingFactor must be greater than 0 and less than or equal to "
               "1.0", "use a value in (0, 1]")
    policy = s["memoryReservationPolicy"]
    if not gates.enabled("MemoryQoS") and policy == "TieredReservation":
        refuse("memoryReservationPolicy", "memoryReservationPolicy \"TieredReservation\" requires MemoryQoS feature "
               "gate to be enabled", "set featureGates.MemoryQoS: true, or use None")
    if policy not in ("None", "TieredReservation"):
        refuse("memoryReservationPolicy", "option %r specified for memoryReservationPolicy" % (policy,),
               "use None or TieredReservation (case-sensitive)")
    if s["enableSystemLogQuery"] and not gates.enabled("NodeLogQuery"):
        refuse("enableSystemLogQuery", "NodeLogQuery feature gate is required for enableSystemLogQuery",
               "enable NodeLogQuery")
    if s["enableSystemLogQuery"] and not s["enableSystemLogHandler"]:
        refuse("enableSystemLogQuery", "enableSystemLogHandler is required for enableSystemLogQuery",
               "set enableSystemLogHandler: true too")
    at_least("containerLogMaxWorkers", 1, "containerLogMaxWorkers must be greater than or equal to 1")
    if s.duration("containerLogMonitorInterval") < 3 * SECOND:
        refuse("containerLogMonitorInterval", "containerLogMonitorInterval must be a positive time duration greater "
               "than or equal to 3s", "use 3s or more")
    if s["containerLogMaxFiles"] <= 1:
        refuse("containerLogMaxFiles", "containerLogMaxFiles must be greater than 1", "use 2 or more")
    # a relative path is joined to the folder of the configuration file (and so normalized)
    logs = s["podLogsDir"]
    if logs.startswith("/") and posixpath.normpath(logs) != logs or logs.startswith("//"):
        refuse("podLogsDir", "pod logs path %r must be normalized" % (logs,), "write it like /var/log/pods")
    if any(ord(c) > 127 for c in logs):
        refuse("podLogsDir", "pod logs path %r mut contains ASCII characters only" % (logs,),
               "name a folder whose path is ASCII")
    return problems


def _shown(config, field):
    return repr(config[field]) if config.get(field) is not None else "(kubelet's default)"


def _shutdown(s, gates, refuse):
    period, critical = s.duration("shutdownGracePeriod"), s.duration("shutdownGracePeriodCriticalPods")
    by_priority = s["shutdownGracePeriodByPodPriority"] or []
    if gates.enabled("GracefulNodeShutdown"):
        if critical > period:
            refuse("shutdownGracePeriodCriticalPods", "shutdownGracePeriodCriticalPods must be <= "
                   "shutdownGracePeriod", "shorten it or lengthen shutdownGracePeriod")
        for field, value in (("shutdownGracePeriod", period), ("shutdownGracePeriodCriticalPods", critical)):
            if value < 0 or 0 < value < SECOND:
                refuse(field, "%s must be either zero or otherwise >= 1 sec" % field, "use 0s or 1s or more")
    elif period > 0 or critical > 0:
        refuse("shutdownGracePeriod", "specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires "
               "feature gate GracefulNodeShutdown", "enable the gate or remove them")
    if gates.enabled("GracefulNodeShutdownBasedOnPodPriority"):
        if by_priority and (period > 0 or critical > 0):
            refuse("shutdownGracePeriodByPodPriority", "Cannot specify both shutdownGracePeriodByPodPriority and "
                   "shutdownGracePeriod at the same time", "keep one of them")
    elif by_priority:
        refuse("shutdownGracePeriodByPodPriority", "Specifying shutdownGracePeriodByPodPriority requires feature gate "
               "GracefulNodeShutdownBasedOnPodPriority", "enable the gate or remove it")


def _crash_loop(s, gates, refuse):
    period = s["crashLoopBackOff"].get("maxContainerRestartPeriod")
    if gates.enabled("KubeletCrashLoopBackOffMax"):
        if period is None:
            refuse("crashLoopBackOff", "FeatureGate KubeletCrashLoopBackOffMax is enabled, "
                   "CrashLoopBackOff.MaxContainerRestartPeriod must be set", "set maxContainerRestartPeriod")
        elif isinstance(period, str) and not 1000 <= _milliseconds(period) <= 300000:
            refuse("crashLoopBackOff", "CrashLoopBackOff.MaxContainerRestartPeriod must be set between 1s and 300s",
                   "use 1s to 300s")
    elif period is not None:
        refuse("crashLoopBackOff", "FeatureGate KubeletCrashLoopBackOffMax not enabled, "
               "CrashLoopBackOff.MaxContainerRestartPeriod must not be set", "enable the gate or remove it")


def _milliseconds(text):
    nanoseconds = go_duration(text)
    return int(nanoseconds / 10 ** 6) if nanoseconds >= 0 else -(-nanoseconds // 10 ** 6)


_ENFORCEMENTS = ("pods", "system-reserved", "system-reserved-compressible", "kube-reserved",
                 "kube-reserved-compressible", "none")


def _enforcement(s, refuse):
    keys = s["enforceNodeAllocatable"] or []
    field = "enforceNodeAllocatable"
    for first, second in (("system-reserved", "system-reserved-compressible"),
                          ("kube-reserved", "kube-reserved-compressible")):
        if first in keys and second in keys:
            refuse(field, "both %r and %r cannot be specified together" % (first, second), "keep one of them")
    seen = set()
    for key in keys:
        if key in seen:
            refuse(field, "duplicated enforcements %r" % (key,), "list each once")
            continue
        seen.add(key)
        if key not in _ENFORCEMENTS:
            refuse(field, "option %r specified for enforceNodeAllocatable" % (key,), "use %s" % ", ".join(_ENFORCEMENTS))
            continue
        if key == "none":
            if len(keys) > 1:
                refuse(field, "enforceNodeAllocatable may not contain additional enforcements when \"none\" is "
                       "specified", "use none alone")
            continue
        cgroup = {"system-reserved": "systemReservedCgroup", "system-reserved-compressible": "systemReservedCgroup",
                  "kube-reserved": "kubeReservedCgroup", "kube-reserved-compressible": "kubeReservedCgroup"}.get(key)
        if cgroup and not s[cgroup]:
            refuse(field, "%s must be specified when %r is included" % (cgroup, key), "set %s" % cgroup)
        if not s["cgroupsPerQOS"]:
            refuse(field, "cgroupsPerQOS must be set to true when %r contained in enforceNodeAllocatable" % (key,),
                   "set cgroupsPerQOS: true")


def _image_credentials(s, gates, refuse):
    policy, allowlist = s["imagePullCredentialsVerificationPolicy"], s["preloadedImagesVerificationAllowlist"] or []
    field = "imagePullCredentialsVerificationPolicy"
    if gates.enabled("KubeletEnsureSecretPulledImages"):
        if policy not in ("NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"):
            refuse(field, "option %r specified for imagePullCredentialsVerificationPolicy" % (policy,),
                   "use NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages or AlwaysVerify")
        if allowlist and policy != "NeverVerifyAllowlistedImages":
            refuse("preloadedImagesVerificationAllowlist", "can't set `preloadedImagesVerificationAllowlist` if "
                   "`imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"",
                   "set that policy or remove the list")
    else:
        if policy:
            refuse(field, "`imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages "
                   "feature gate is not enabled", "enable the gate or remove it")
        if allowlist:
            refuse("preloadedImagesVerificationAllowlist", "`preloadedImagesVerificationAllowlist` must not be set if "
                   "KubeletEnsureSecretPulledImages feature gate is not enabled", "enable the gate or remove it")


def _user_namespaces(s, refuse):
    ids = (s["userNamespaces"] or {}).get("idsPerPod")
    if ids is None:
        return
    if ids < 65536 or ids % 65536 or ids > 2 ** 32 - 1:
        refuse("userNamespaces", "userNamespaces.idsPerPod must be a multiple of 65536, from 65536 to 4294967295",
               "use a multiple of 65536 such as 65536")
