# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generated machines and kubelet settings for the differential tests, one generator per class of
input, and the comparison of numa.kube's verdict with kubelet's.

A class is a part of the input space kubelet treats in its own way: the values of every field
kubelet_config validates (at and beyond their Go types' limits), feature gates on and off with the
settings that depend on them, every eviction signal, the Topology Manager's options at and beyond
integer limits, zero quantities with exponents kubelet cannot read, a Static memory manager checked
without the machine, and CPU Manager options whose effect depends on the machine (its CPU count,
SMT, sockets and NUMA nodes, the same machine for both sides).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import KubeletConfigError, dump_text, validate
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import FEATURE_GATES, TYPES
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import ReservationError, plan

MIB = 2 ** 20
GIB = 2 ** 30
HEAD = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cgroupDriver": "cgroupfs"}
# what numa.kube's messages say where it refuses on purpose what kubelet takes (docs/modules.md, "Where
# numa.kube is stricter than kubelet")
DELIBERATE = ("kubelet does not check this", "numa.kube takes plain decimal percentages only",
              "numa.kube refuses powers of ten beyond", "numa.kube takes whole numbers only")
BOOLISH = ["true", "false", "1", "True", "TRUE", "t", "0", "yes", "on", " true", "F"]
INT_EDGES = [0, 1, -1, 2, 5, 100, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 63 - 1, 2 ** 63, 10 ** 20]
DURATIONS = ["0s", "0", "1s", "500ms", "999ms", "2s", "3s", "-1s", "1m30s", "5m", "300s", "301s", "1h", "1.5h",
             ".5s", "1.s", "2562047h", "2562048h", "9223372036854775807ns", "9223372036854775808ns", "1", "abc",
             "1e3s", "1 s", "-0s", "+2s", "1h-1m", "100ms", "1ms", "1001ms", "1\u00b5s", "5us", ""]
# string fields with a rule, and values around it
STRINGS = {
    "hairpinMode": ["none", "hairpin-veth", "promiscuous-bridge", "Promiscuous-Bridge", "veth", ""],
    "memoryReservationPolicy": ["None", "TieredReservation", "tieredreservation", "none", "Tiered", ""],
    "imagePullCredentialsVerificationPolicy": ["NeverVerify", "NeverVerifyPreloadedImages", "AlwaysVerify",
                                               "NeverVerifyAllowlistedImages", "neververify", "Sometimes", ""],
    "podLogsDir": ["/var/log/pods", "/var/log/pods/", "var/log/pods", "/var/log/../log/pods", "/var/log/p\u00f6ds",
                   "/", "//var/log", "/var/./log", ""],
    "systemCgroups": ["", "/system.slice", "system"],
    "cgroupRoot": ["", "/", "/kubepods"],
    "systemReservedCgroup": ["", "/system.slice"],
    "kubeReservedCgroup": ["", "/kube.slice"],
    "containerRuntimeEndpoint": ["", "unix:///run/containerd/containerd.sock"],
}
# fields numa.kube checks only for their type: kubelet has rules for them this tier does not model
# (taints, metrics versions, image patterns, logging and tracing settings) or that depend on the host
TYPE_ONLY = ("registerWithTaints", "showHiddenMetricsForVersion", "preloadedImagesVerificationAllowlist",
             "logging", "tracing", "authentication", "authorization", "singleProcessOOMKill", "failCgroupV1",
             "staticPodURLHeader", "allowedUnsafeSysctls", "tlsCipherSuites")
# fields with classes of their own
OWN_CLASS = ("featureGates", "cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy",
             "topologyManagerPolicy", "topologyManagerPolicyOptions", "topologyManagerScope", "reservedSystemCPUs",
             "reservedMemory", "kubeReserved", "systemReserved", "evictionHard", "evictionSoft",
             "evictionSoftGracePeriod", "evictionMinimumReclaim", "mergeDefaultEvictionSettings", "apiVersion",
             "kind")


# the KubeletConfiguration kubeadm v1.36.3 writes for a node (kubeadm config print init-defaults
# --component-configs KubeletConfiguration): the file numa.kube merges into on a kubeadm node
KUBEADM_FILE = """apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s"""


class Machine(object):

    """A machine as both sides see it: NUMA nodes with memory and physical cores, threads per core,
    the socket of each node's cores (or several sockets per node)."""

    def __init__(self, memory, cores, smt=1, sockets=None, sockets_per_node=1):
        self.memory = list(memory)
        self.cores = list(cores)
        self.smt = smt
        self.sockets = list(sockets) if sockets is not None else list(range(len(memory)))
        self.sockets_per_node = sockets_per_node

    def cpus(self):
        """The CPUs as numa.kube.topology_facts reports them, numbered as Linux numbers siblings."""
        total = sum(self.cores)
        result = []
        core = 0
        for node, count in enumerate(self.cores):
            for index in range(count):
                siblings = [core + t * total for t in range(self.smt)]
                socket = self.sockets[node] * self.sockets_per_node + index % self.sockets_per_node
                for cpu in siblings:
                    result.append({"id": cpu, "core": core, "socket": socket, "numa_node": node,
                                   "thread_siblings": siblings})
                core += 1
        return sorted(result, key=lambda c: c["id"])

    def request(self, config):
        return {"kind": "kubelet", "config": dump_text(config, "yaml"), "nodes": self.memory,
                "capacity": sum(self.memory), "cpus": self.cores, "smt": self.smt, "sockets": self.sockets,
                "sockets_per_node": self.sockets_per_node}

    def verdict(self, config):
        """numa.kube's problems with ``config`` on this machine ([] when it accepts it)."""
        try:
            validate(config, numa_node_count=len(self.memory), online_cpus=[c["id"] for c in self.cpus()],
                     machine={"numa_node_memory": dict((str(i), m) for i, m in enumerate(self.memory)),
                              "memory_capacity": sum(self.memory), "cpus": self.cpus()})
        except KubeletConfigError as exc:
            return exc.problems
        return []

    def __repr__(self):
        return "Machine(memory %s MiB, cores %s, smt %d, sockets %s x%d)" % (
            [m // MIB for m in self.memory], self.cores, self.smt, self.sockets, self.sockets_per_node)


def alone(config):
    """numa.kube's problems with ``config`` when it knows nothing of the machine."""
    try:
        validate(config)
    except KubeletConfigError as exc:
        return exc.problems
    return []


def random_machine(rng, big=False):
    count = rng.choice([1, 1, 2, 2, 2, 3, 4, 8, 9]) if not big else 8
    memory = [rng.choice([512, 1024, 2048, 4096]) * MIB for dummy in range(count)]
    cores = [rng.choice([0, 1, 1, 2, 2, 3, 4, 8]) for dummy in range(count)]
    cores[0] = cores[0] or rng.choice([1, 2, 4])
    smt = rng.choice([1, 1, 2, 2, 4])
    layout = rng.random()
    if layout < 0.5:
        sockets, per_node = list(range(count)), 1
    elif layout < 0.65:
        sockets, per_node = [0] * count, 1  # sub-NUMA clustering: several nodes on one socket
    elif layout < 0.8:
        sockets, per_node = [index // 2 for index in range(count)], 1  # two nodes a socket
    else:
        sockets, per_node = list(range(count)), rng.choice([2, 3])  # more sockets than NUMA nodes
    if big:
        memory = [16 * GIB] * count
        cores = [4] * count
    return Machine(memory, cores, smt, sockets, per_node)


def reserved_layout(machine, config):
    """The reservedMemory numa.kube computes for ``config`` on ``machine``, or a placeholder."""
    try:
        result = plan(numa_node_memory=dict((str(i), m) for i, m in enumerate(machine.memory)),
                      memory_capacity=sum(machine.memory), kube_reserved=config.get("kubeReserved"),
                      system_reserved=config.get("systemReserved"), eviction_hard=config.get("evictionHard"),
                      merge_default_eviction_settings=bool(config.get("mergeDefaultEvictionSettings")))
        return result["reserved_memory"]
    except (ReservationError, ValueError):
        return [{"numaNode": 0, "limits": {"memory": "100Mi"}}]


# --- the classes ----------------------------------------------------------------------------------

def _int_value(rng, field):
    typical = {"port": [10250, 65535, 65536], "healthzPort": [10248, 65535, 65536], "readOnlyPort": [10255, 65536],
               "imageGCHighThresholdPercent": [85, 100, 101, 50], "imageGCLowThresholdPercent": [80, 85, 90, 101],
               "iptablesDropBit": [15, 31, 32], "iptablesMasqueradeBit": [14, 31, 32],
               "oomScoreAdj": [-999, -1000, -1001, 1000, 1001], "nodeStatusMaxImages": [50, -1, -2],
               "containerLogMaxFiles": [5, 1, 2], "containerLogMaxWorkers": [1, 0, 4],
               "maxParallelImagePulls": [1, 0, 5], "nodeLeaseDurationSeconds": [40, 0, -5],
               "maxPods": [110, 250, 0, -1, 2 ** 31 - 1, 2 ** 31, 10 ** 20]}
    roll = rng.random()
    if roll < 0.45 and field in typical:
        return rng.choice(typical[field])
    if roll < 0.85:
        return rng.choice(INT_EDGES)
    return rng.choice([110.0, 1.5, "5", True, -0.0, 1e20, [1]])


def _value(rng, field):
    """A value for ``field``: usually of its type, at and beyond its limits; sometimes not of it."""
    gotype = TYPES[field].lstrip("*")
    wrong = rng.random() < 0.08
    if gotype in ("int32", "int64"):
        return _int_value(rng, field)
    if gotype == "float64":
        return rng.choice([0.9, 0.5, 1.0, 1.0000001, 0.0, -0.1, 1.5, 2, 1e308, float("nan"), float("inf"), "0.9",
                           True])
    if gotype == "bool":
        return rng.choice([True, False, True, False, "true", 1]) if not wrong else "yes"
    if gotype == "v1.Duration":
        return rng.choice(DURATIONS) if not wrong else rng.choice([5, True, 1.5])
    if field in STRINGS:
        return rng.choice(STRINGS[field]) if not wrong else rng.choice([5, True])
    if gotype == "string" or gotype == "v1beta1.ResourceChangeDetectionStrategy":
        return rng.choice(["x", "/var/lib/kubelet", ""]) if not wrong else rng.choice([5, True, ["x"]])
    if field == "enforceNodeAllocatable":
        keys = ["pods", "system-reserved", "kube-reserved", "system-reserved-compressible", "none", "Pods", "pods"]
        return rng.sample(keys, rng.choice([0, 1, 1, 2, 3])) if not wrong else "pods"
    if field == "memorySwap":
        return {"swapBehavior": rng.choice(["", "NoSwap", "LimitedSwap", "limitedswap", "UnlimitedSwap", 5])}
    if field == "crashLoopBackOff":
        return rng.choice([{}, {"maxContainerRestartPeriod": rng.choice(DURATIONS)}])
    if field == "userNamespaces":
        return {"idsPerPod": rng.choice([65536, 131072, 65535, 0, 100000, 2 ** 32 - 65536, 2 ** 32, 2 ** 63, "x"])}
    if field == "shutdownGracePeriodByPodPriority":
        return rng.choice([[], [{"priority": 0, "shutdownGracePeriodSeconds": 30}]])
    if gotype.startswith("map["):
        return rng.choice([{}, {"a": "b"}, {"a": 5}, ["a"]]) if "string" in gotype else rng.choice([{}, "x"])
    if gotype.startswith("[]"):
        return rng.choice([[], ["x"], "x", [5]]) if gotype == "[]string" else rng.choice([[], "x", {"a": 1}])
    return rng.choice([{}, "x", [1]])  # a structure of kubelet's: only its type is checked


def field_values(rng):
    """Class: the value of every field kubelet_config validates, at and beyond its type's limits."""
    fields = sorted(f for f in TYPES if f not in OWN_CLASS)
    config = dict(HEAD)
    for field in rng.sample(fields, rng.choice([1, 1, 2, 3])):
        if field in TYPE_ONLY:
            # the empty value of its type (no rule applies to it), or a value of another type
            gotype = TYPES[field].lstrip("*")
            empty = [] if gotype.startswith("[]") else "" if gotype == "string" else {} if gotype != "bool" else True
            config[field] = rng.choice([5, [1], True, {"a": 5}, empty, empty, empty] + (["x"] if gotype != "string"
                                                                                        else []))
        else:
            config[field] = _value(rng, field)
    return config


GATE_FIELDS = {
    "memoryReservationPolicy": ["None", "TieredReservation", "TieredReservation"],
    "memoryThrottlingFactor": [0.9, 1.0, 0.0, 1.2],
    "cpuCFSQuotaPeriod": ["100ms", "50ms", "2s", "1ms", "999us"],
    "serverTLSBootstrap": [True, False],
    "shutdownGracePeriod": ["0s", "30s", "500ms", "-1s"],
    "shutdownGracePeriodCriticalPods": ["0s", "10s", "60s", "900ms"],
    "shutdownGracePeriodByPodPriority": [[], [{"priority": 0, "shutdownGracePeriodSeconds": 30}]],
    "crashLoopBackOff": [{}, {"maxContainerRestartPeriod": "1m"}, {"maxContainerRestartPeriod": "10m"},
                         {"maxContainerRestartPeriod": "500ms"}],
    "imagePullCredentialsVerificationPolicy": ["NeverVerify", "AlwaysVerify", "Sometimes"],
    "memorySwap": [{"swapBehavior": "LimitedSwap"}, {"swapBehavior": "NoSwap"}, {"swapBehavior": "Always"}],
    "enableSystemLogQuery": [True, False],
    "enableSystemLogHandler": [False, True],
    "imageMaximumGCAge": ["0s", "1h", "1m"],
}
# the gates the fields above depend on, the gates the CPU and Topology Manager options depend on,
# the special ones, and a few with dependencies
GATES = ["MemoryQoS", "CustomCPUCFSQuotaPeriod", "RotateKubeletServerCertificate", "GracefulNodeShutdown",
         "GracefulNodeShutdownBasedOnPodPriority", "KubeletCrashLoopBackOffMax", "KubeletEnsureSecretPulledImages",
         "NodeSwap", "NodeLogQuery", "ImageMaximumGCAge", "CPUManagerPolicyAlphaOptions",
         "CPUManagerPolicyBetaOptions", "CPUManagerPolicyOptions", "TopologyManagerPolicyBetaOptions",
         "TopologyManagerPolicyAlphaOptions", "TopologyManagerPolicyOptions", "AllAlpha", "AllBeta",
         "InPlacePodVerticalScalingExclusiveCPUs", "DynamicResourceAllocation", "DRAConsumableCapacity",
         "PodLevelResources", "PodLevelResourceManagers", "UserNamespacesSupport", "NodeDeclaredFeatures",
         "WindowsGracefulNodeShutdown", "AtomicFIFO", "StaleControllerConsistencyJob"]


def feature_gates(rng):
    """Class: feature gates on and off, with the settings whose allowed values depend on them."""
    config = dict(HEAD)
    gates = {}
    for dummy in range(rng.choice([0, 1, 1, 2, 3, 4])):
        roll = rng.random()
        if roll < 0.75:
            name = rng.choice(GATES)
        elif roll < 0.93:
            name = rng.choice(sorted(FEATURE_GATES))
        else:
            name = rng.choice(["NoSuchGate", "memoryQoS", "MemoryQOS"])
        gates[name] = rng.choice([True, False]) if rng.random() < 0.95 else rng.choice(["true", 1])
    if gates or rng.random() < 0.3:
        config["featureGates"] = gates
    for field in rng.sample(sorted(GATE_FIELDS), rng.choice([0, 1, 1, 2, 3])):
        config[field] = rng.choice(GATE_FIELDS[field])
    if rng.random() < 0.3:
        config["cpuManagerPolicy"] = "static"
        config["kubeReserved"] = {"cpu": "1"}
        options = ["full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket", "distribute-cpus-across-cores",
                   "strict-cpu-reservation", "prefer-align-cpus-by-uncorecache"]
        config["cpuManagerPolicyOptions"] = dict((name, "true") for name in rng.sample(options, rng.choice([1, 2])))
    if rng.random() < 0.15:
        config["topologyManagerPolicy"] = "best-effort"
        config["topologyManagerPolicyOptions"] = {"prefer-closest-numa-nodes": "true"}
    return config


SIGNALS = ["memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree",
           "containerfs.available", "containerfs.inodesFree", "pid.available", "allocatableMemory.available"]
THRESHOLDS = ["100Mi", "1Gi", "500", "1k", "10%", "5%", "0%", "100%", "100.0%", "150%", "-1%", "0.0%", "-0%", "1e-50%",
              "99.99999999%", "100.000001%", "1e39%", "5%%", "nan%", "0x1p3%", "1_0%", " 5%", "5 %", "%", "", "abc",
              "-100Mi", "0", "0Mi", "0e99", "0e99999999999999999999", "1.5.5Mi", "Mi", "e3", "+5%", ".5%", "5.%",
              "1e2%", "\u0665%", "10Gi ", "1Ei", "9Ei", 5]


def eviction_settings(rng):
    """Class: every eviction signal, hard and soft, with malformed values, grace periods and minimum
    reclaims, as kubelet parses them when it starts."""
    config = dict(HEAD)
    signals = SIGNALS + ["memory.availabe", "cpu.available"]
    if rng.random() < 0.8:
        config["evictionHard"] = dict((s, rng.choice(THRESHOLDS)) for s in rng.sample(signals, rng.choice([1, 1, 2, 3])))
    if rng.random() < 0.4:
        soft = dict((s, rng.choice(THRESHOLDS)) for s in rng.sample(signals, rng.choice([1, 2])))
        config["evictionSoft"] = soft
        grace = dict((s, rng.choice(["1m30s", "30s", "0s", "-1s", "abc", "1", 5])) for s in soft
                     if rng.random() < 0.8)
        if rng.random() < 0.2:
            grace[rng.choice(signals)] = "1m"
        config["evictionSoftGracePeriod"] = grace
    if rng.random() < 0.3:
        reclaims = ["500Mi", "0", "0%", "5%", "-1%", "150%", "-1Mi", "x", "1.5Gi", "nan%"]
        config["evictionMinimumReclaim"] = dict((s, rng.choice(reclaims))
                                                for s in rng.sample(signals, rng.choice([1, 2])))
    if rng.random() < 0.2:
        config["mergeDefaultEvictionSettings"] = True
    return config


MAX_NUMA = ["8", "7", "9", "16", "+9", "08", "-8", "0", "9223372036854775807", "9223372036854775808",
            "-9223372036854775808", "-9223372036854775809", "18446744073709551616", "99999999999999999999999",
            "1e3", "0x10", " 8", "8 ", "", "x", "\u0668", "8.0", "2147483648", "4294967297"]


def topology_options(rng):
    """Class: the Topology Manager's options at and beyond integer limits, on machines of 1 to 12
    NUMA nodes, with every policy."""
    config = dict(HEAD)
    config["topologyManagerPolicy"] = rng.choice(["none", "best-effort", "restricted", "single-numa-node", "",
                                                  "Restricted"])
    if rng.random() < 0.4:
        config["topologyManagerScope"] = rng.choice(["container", "pod", "Pod", "node"])
    options = {}
    if rng.random() < 0.85:
        options["max-allowable-numa-nodes"] = rng.choice(MAX_NUMA)
    if rng.random() < 0.4:
        options["prefer-closest-numa-nodes"] = rng.choice(BOOLISH)
    if rng.random() < 0.08:
        options["bogus"] = "true"
    config["topologyManagerPolicyOptions"] = options
    return config


def _wrapped_exponent(text):
    """The exponent kubelet keeps of a quantity text (its low 32 bits), or None."""
    match = re.search(r"[eE]([+-]?[0-9]+)\Z", text)
    return (int(match.group(1)) + 2 ** 31) % 2 ** 32 - 2 ** 31 if match else None


def _kubelet_answers(text, where):
    """Whether kubelet answers at all on ``text`` there: it never finishes reading a quantity whose
    exponent it keeps as far below -1000000, nor loading a reservedMemory of exponent -2147483648."""
    exponent = _wrapped_exponent(text)
    if exponent is None or where == "evictionHard":
        return True
    if exponent == -2 ** 31:
        return where != "reservedMemory"
    return exponent > -10 ** 6


def zero_exponents(rng):
    """Class: zero (and not quite zero) quantities with exponents kubelet cannot read or that wrap,
    where kubelet reads quantities: reservations, eviction thresholds, reservedMemory."""
    texts = ["0e99", "0e4000", "0e4001", "0e2147483647", "0e2147483648", "0e-2147483649", "0e9223372036854775807",
             "0e-4001", "0e9223372036854775808", "0e99999999999999999999", "0.0e99999", "-0e4294967296", "0E-99",
             "0e+5", "00e0", ".0e12", "0.e-12", "1e4294967296", "1e-4294967296", "100Mi", "1e8", "1e-4001", "1e4001",
             "1e-99999", "0e-99999", "0e-2147483648", "0e6442450944", "0e-9223372036854775808"]
    config = dict(HEAD)
    where = rng.choice(["kubeReserved", "systemReserved", "evictionHard", "reservedMemory", "kubeReserved-cpu"])
    text = rng.choice(texts)
    while not _kubelet_answers(text, where):
        text = rng.choice(texts)
    if where == "kubeReserved-cpu":
        config["cpuManagerPolicy"] = "static"
        config["kubeReserved"] = {"cpu": text}
    elif where == "evictionHard":
        config["evictionHard"] = {rng.choice(SIGNALS): text}
    elif where == "reservedMemory":
        config["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": text}}]
    else:
        config[where] = {rng.choice(["memory", "cpu", "pid", "ephemeral-storage"]): text}
    return config


RESOURCES = ["cpu", "memory", "ephemeral-storage", "pid", "hugepages-2Mi", "gpu", "Memory"]
AMOUNTS = ["1", "500m", "1Gi", "256Mi", "-1Gi", "-1", "-0", "0", "1e3", "abc", "", "-500m", "1.5", "100Mi",
           "-0.000000001", "9223372036854775807", 5]


def reserved_resources(rng):
    """Class: kubeReserved and systemReserved as kubelet parses them: negative, unknown or malformed
    amounts, with and without reservedSystemCPUs (which replaces their cpu)."""
    config = dict(HEAD)
    for section in ("kubeReserved", "systemReserved"):
        if rng.random() < 0.7:
            config[section] = dict((r, rng.choice(AMOUNTS)) for r in rng.sample(RESOURCES, rng.choice([1, 1, 2])))
    if rng.random() < 0.3:
        config["reservedSystemCPUs"] = rng.choice(["0", "0-1", "1"])
    if rng.random() < 0.3:
        config["cpuManagerPolicy"] = "static"
    return config


CPU_OPTIONS = ["full-pcpus-only", "distribute-cpus-across-numa", "align-by-socket", "distribute-cpus-across-cores",
               "strict-cpu-reservation", "prefer-align-cpus-by-uncorecache", "bogus-option"]


def numa_settings(rng, machine):
    """Class: the CPU, Topology and Memory Managers on a generated machine (CPU count, SMT, sockets,
    NUMA nodes), the static policy reserving up to and beyond the machine's CPUs."""
    config = dict(HEAD, kubeReserved={"memory": "256Mi"})
    if rng.random() < 0.3:
        config = dict(yaml.safe_load(KUBEADM_FILE), cgroupDriver="cgroupfs", kubeReserved={"memory": "256Mi"})
    cpus = [c["id"] for c in machine.cpus()]
    roll = rng.random()
    if roll < 0.75:
        config["kubeReserved"]["cpu"] = rng.choice(
            ["500m", "1", "0", str(len(cpus)), str(len(cpus) + 1), "%d500m" % (len(cpus) - 1), "2", "3", "4",
             str(max(1, len(cpus) - 1)), "9223372036854775807", "1n"])

    def maybe(field, values, chance=0.7):
        if rng.random() < chance:
            config[field] = rng.choice(values)

    maybe("cpuManagerPolicy", ["none", "static", "static", "static", "Static", ""], 0.85)
    maybe("topologyManagerPolicy", ["none", "best-effort", "restricted", "single-numa-node", "Single-numa-node"])
    maybe("topologyManagerScope", ["container", "pod", "Pod"], 0.4)
    maybe("memoryManagerPolicy", ["None", "Static", "static"], 0.4)
    if rng.random() < 0.3:
        roll = rng.random()
        if roll < 0.5:
            chosen = sorted(rng.sample(cpus, min(len(cpus), rng.choice([1, 1, 2]))))
            config["reservedSystemCPUs"] = ",".join(str(c) for c in chosen)
        else:
            config["reservedSystemCPUs"] = rng.choice(["0", "0-1", "0,", " 0-1", "1-0", "+0", "99", "0-1,3", "0--1",
                                                       "0,1", "%d" % len(cpus), "0-%d" % (len(cpus) - 1)])
    if rng.random() < 0.6:
        names = CPU_OPTIONS if rng.random() < 0.5 else ["full-pcpus-only", "distribute-cpus-across-numa",
                                                        "align-by-socket"]
        config["cpuManagerPolicyOptions"] = dict(
            (name, rng.choice(BOOLISH[:3] + ["true", "true"])) for name in rng.sample(names, rng.choice([1, 1, 2, 3])))
    if rng.random() < 0.3:
        options = {"prefer-closest-numa-nodes": BOOLISH, "max-allowable-numa-nodes": ["8", "16", "4", "x", " 8", "+9"],
                   "bogus": ["true"]}
        config["topologyManagerPolicyOptions"] = dict(
            (name, rng.choice(options[name])) for name in rng.sample(sorted(options), rng.choice([1, 2])))
    if rng.random() < 0.35:
        config["featureGates"] = dict(rng.sample([
            ("CPUManagerPolicyAlphaOptions", True), ("CPUManagerPolicyAlphaOptions", False),
            ("CPUManagerPolicyBetaOptions", False), ("CPUManagerPolicyOptions", False), ("NoSuchGate", True),
            ("TopologyManagerPolicyBetaOptions", False), ("AllAlpha", True), ("AllBeta", False)], rng.choice([1, 2])))
    options = config.get("cpuManagerPolicyOptions") or {}
    if ("align-by-socket" in options or "distribute-cpus-across-cores" in options) and rng.random() < 0.7:
        config.setdefault("featureGates", {})["CPUManagerPolicyAlphaOptions"] = True
    if config.get("memoryManagerPolicy") == "Static":
        config["reservedMemory"] = reserved_layout(machine, config)
    return config


def static_alone(rng):
    """Class: a Static memory manager validated without the machine (kubelet_config run without
    numa_node_memory): the sums kubelet demands do not depend on the machine, so numa.kube must
    refuse what kubelet refuses on every machine (here: one with room on 8 nodes)."""
    config = dict(HEAD, memoryManagerPolicy="Static")
    if rng.random() < 0.6:
        config["kubeReserved"] = {"memory": rng.choice(["256Mi", "1Gi", "100Mi", "0"])}
    if rng.random() < 0.3:
        config["systemReserved"] = {"memory": rng.choice(["128Mi", "0", "1Gi"])}
    roll = rng.random()
    if roll < 0.3:
        # with white space around the percent sign too: kubelet's ParseFloat takes no space
        config["evictionHard"] = {"memory.available": rng.choice(
            ["100Mi", "0%", "100%", "200Mi", "5%", "10 %", " 5%", "5% ", "5%%", "7.5%"])}
    elif roll < 0.45:
        config["evictionHard"] = {"nodefs.available": "10%"}
    elif roll < 0.5:
        config["evictionHard"] = {}
    required = 0
    for section in ("kubeReserved", "systemReserved"):
        amount = (config.get(section) or {}).get("memory", "0")
        required += int(amount[:-2]) * (GIB if amount.endswith("Gi") else MIB) if amount != "0" else 0
    eviction = config.get("evictionHard")
    threshold = eviction.get("memory.available", "") if eviction is not None else "100Mi"
    if threshold in ("100Mi", "200Mi"):
        required += int(threshold[:-2]) * MIB
    roll = rng.random()
    if roll < 0.3:
        pass  # nothing reserved
    elif roll < 0.55 and required:
        half = required // 2
        config["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": str(half)}},
                                    {"numaNode": 1, "limits": {"memory": str(required - half)}}]
    elif roll < 0.7:
        config["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": str(max(1, required + rng.choice(
            [-MIB, 1, MIB])))}}]
    elif roll < 0.85:
        config["reservedMemory"] = [{"numaNode": rng.choice([0, 1]), "limits": {"memory": "%dMi" % rng.choice(
            [100, 356, 612, 1124, 228])}}]
    else:
        config["reservedMemory"] = [{"numaNode": 0, "limits": {"memory": str(required or MIB),
                                                               "hugepages-2Mi": rng.choice(["2Mi", "0"])}}]
    return config, threshold.endswith("%") and threshold not in ("0%", "100%")


def reserved_cpus(rng):
    """Class: reservedSystemCPUs written every way kubelet's cpuset.Parse reads or refuses, bounds
    included, with and without the reserved cgroups it cannot be combined with."""
    config = dict(HEAD, cpuManagerPolicy=rng.choice(["static", "none"]))
    config["reservedSystemCPUs"] = rng.choice(
        ["0", "0-1", "1", "0,1", "+0", "1-+1", "0-4294967295", "99999999999999999999", "9223372036854775807",
         "9223372036854775808", "0-8191", "8191", "8192", "0-9223372036854775807", "", "0,,1", ",", "-1", "1--1",
         "0-0", "00", "0x1", "1 ", "\u0661", "2-1", "0-3"])
    if rng.random() < 0.2:
        config[rng.choice(["systemReservedCgroup", "kubeReservedCgroup"])] = "/system.slice"
    if rng.random() < 0.5:
        config["kubeReserved"] = {"cpu": rng.choice(["1", "-1", "abc"])}
    return config


def compare(oracle, cases, machine_independent=True):
    """Run ``cases`` (config, machine, how numa.kube is asked: "machine", "alone" or "alone-sound")
    through kubelet and numa.kube; return (disagreements, tally, answers).

    "alone": numa.kube without the machine must give kubelet's verdict on the machine (the class
    keeps to settings whose verdict does not depend on it); "alone-sound": only numa.kube's
    refusals are held to kubelet's (the machine could make kubelet refuse more)."""
    answers = oracle.ask([machine.request(config) for config, machine, dummy in cases])
    disagreements, tally = [], {"inputs": len(cases), "kubelet refused": 0, "numa.kube refused": 0,
                                "on purpose": 0}
    for (config, machine, how), answer in zip(cases, answers):
        problems = machine.verdict(config) if how == "machine" else alone(config)
        deliberate = [p for p in problems if any(words in p for words in DELIBERATE)]
        tally["kubelet refused"] += not answer["ok"]
        tally["numa.kube refused"] += bool(problems)
        tally["on purpose"] += bool(problems) and answer["ok"] and bool(deliberate)
        shown = dict((k, v) for k, v in config.items() if k not in ("apiVersion", "kind", "cgroupDriver"))
        if answer["ok"] and problems and not deliberate:
            disagreements.append("kubelet accepts, numa.kube refuses: %s on %s (%s)\n  numa.kube: %s"
                                 % (shown, machine, how, problems))
        elif not answer["ok"] and not problems and how != "alone-sound":
            disagreements.append("kubelet refuses, numa.kube accepts: %s on %s (%s)\n  kubelet (%s): %s"
                                 % (shown, machine, how, answer.get("stage"), answer.get("error")))
    return disagreements, tally, answers
