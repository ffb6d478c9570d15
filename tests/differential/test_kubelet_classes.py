# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Differential tests by class of input: what kubelet refuses when it starts, numa.kube refuses.

Each class (see generate.py) feeds the same generated configurations, on the same generated
machines, to kubelet_config's validation and to kubelet's own code (the oracle); every verdict must
agree, except where numa.kube refuses on purpose (DELIBERATE, the table in docs/modules.md). Each test prints
how many inputs of its class it ran ("seed ... class ..." lines, which CI's log summary shows) and
checks that the class reaches both verdicts. NUMA_KUBE_DIFF_SEED and NUMA_KUBE_DIFF_CASES replay or
widen a run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random

from ansible_collections.numa.kube.tests.differential import generate

SEED = int(os.environ.get("NUMA_KUBE_DIFF_SEED", "20261123"))
CASES = int(os.environ.get("NUMA_KUBE_DIFF_CASES", "4000"))


def run_class(oracle, name, cases, least_refused=0.05, least_accepted=0.05):
    disagreements, tally, answers = generate.compare(oracle, cases)
    print("\nseed %d class %-20s %5d inputs: kubelet refused %d, numa.kube refused %d (%d on purpose)"
          % (SEED, name, tally["inputs"], tally["kubelet refused"], tally["numa.kube refused"], tally["on purpose"]))
    assert not disagreements, "%s: %d disagreements of %d, first ones:\n%s" % (
        name, len(disagreements), len(cases), "\n".join(disagreements[:12]))
    # the class reaches both sides of kubelet's rules
    refused = tally["kubelet refused"] / float(len(cases))
    assert least_refused <= refused <= 1 - least_accepted, "%s: kubelet refused %.0f%%" % (name, 100 * refused)
    return answers


def test_field_values(oracle):
    """Every field kubelet_config validates, its value at and beyond the limits of its Go type
    (maxPods 2^31, ports 65536, durations past 2^63 ns, decimals, strings for numbers...) and of
    ValidateKubeletConfiguration's rules, on the values kubelet sees after defaulting."""
    rng = random.Random(SEED + 10)
    machine = generate.Machine([GIB_4] * 2, [2, 2])
    cases = [(generate.field_values(rng), machine, "machine") for dummy in range(CASES // 4)]
    answers = run_class(oracle, "field values", cases)
    stages = set(a.get("stage") for a in answers if not a["ok"])
    assert {"load", "validate"} <= stages, stages


def test_feature_gates(oracle):
    """Feature gates on and off (AllAlpha, AllBeta, locked gates, gates whose dependencies are off,
    unknown ones) with the settings whose allowed values depend on them: memoryReservationPolicy,
    memoryThrottlingFactor, cpuCFSQuotaPeriod, graceful shutdown, crash loop back-off, image
    credential verification, swap, the CPU and Topology Managers' options."""
    rng = random.Random(SEED + 11)
    machine = generate.Machine([GIB_4] * 2, [2, 2], smt=2)
    cases = [(generate.feature_gates(rng), machine, "machine") for dummy in range(CASES // 4)]
    answers = run_class(oracle, "feature gates", cases)
    stages = set(a.get("stage") for a in answers if not a["ok"])
    assert {"panic", "validate", "cpumanager"} <= stages, stages


def test_eviction_signals(oracle):
    """Every eviction signal, hard and soft, with malformed values, grace periods and minimum
    reclaims, as kubelet parses them when it starts (the node allocatable sum and NewMainKubelet)."""
    rng = random.Random(SEED + 12)
    machine = generate.Machine([GIB_4] * 2, [2, 2])
    cases = [(generate.eviction_settings(rng), machine, "machine") for dummy in range(CASES // 4)]
    answers = run_class(oracle, "eviction signals", cases)
    stages = set(a.get("stage") for a in answers if not a["ok"])
    assert {"eviction", "eviction-settings"} <= stages, stages


def test_topology_manager_options(oracle):
    """max-allowable-numa-nodes at and beyond Go's integer limits, prefer-closest-numa-nodes, every
    policy and scope, on machines of 1 to 12 NUMA nodes."""
    rng = random.Random(SEED + 13)
    cases = []
    for dummy in range(CASES // 8):
        count = rng.choice([1, 2, 4, 8, 9, 12])
        machine = generate.Machine([GIB_4] * count, [1] * count)
        cases.append((generate.topology_options(rng), machine, "machine"))
    answers = run_class(oracle, "topology options", cases)
    stages = set(a.get("stage") for a in answers if not a["ok"])
    assert {"validate", "topologymanager"} <= stages, stages


def test_zero_quantities_with_huge_exponents(oracle):
    """Zero and near-zero quantities whose exponent kubelet cannot read (beyond 64 bits) or reads
    wrapped to 32 bits, where kubelet reads quantities: reservations, thresholds, reservedMemory."""
    rng = random.Random(SEED + 14)
    machine = generate.Machine([GIB_4] * 2, [2, 2])
    cases = [(generate.zero_exponents(rng), machine, "machine") for dummy in range(CASES // 10)]
    run_class(oracle, "zero exponents", cases)


def test_reserved_resources(oracle):
    """kubeReserved and systemReserved: negative (-1Gi), unknown, malformed or huge amounts, with and
    without reservedSystemCPUs, which replaces their cpu before kubelet reads them."""
    rng = random.Random(SEED + 15)
    machine = generate.Machine([GIB_4] * 2, [2, 2])
    cases = [(generate.reserved_resources(rng), machine, "machine") for dummy in range(CASES // 8)]
    run_class(oracle, "reserved resources", cases)


def test_reserved_cpus(oracle):
    """reservedSystemCPUs at and beyond Go's integer limits and the largest CPU id, malformed, with
    the reserved cgroups kubelet refuses beside it; checked with and without the machine's CPUs."""
    rng = random.Random(SEED + 16)
    machine = generate.Machine([GIB_4] * 2, [2, 2])
    cases = []
    for dummy in range(CASES // 10):
        config = generate.reserved_cpus(rng)
        cases.append((config, machine, "machine"))
        cases.append((config, machine, "alone-sound"))
    run_class(oracle, "reserved cpus", cases)


def test_numa_managers_on_generated_machines(oracle):
    """The CPU, Topology and Memory Managers on generated machines (1 to 9 NUMA nodes, CPU-less nodes,
    SMT 1 to 4, sub-NUMA clustering and more sockets than nodes): policies, options and the gates
    they need, align-by-socket, distribute-cpus-across-numa with full-pcpus-only, the static
    policy's reserved CPUs up to and beyond the machine's, reservedSystemCPUs, the reservation."""
    rng = random.Random(SEED + 2)
    cases = []
    for dummy in range(CASES // 4):
        machine = generate.random_machine(rng)
        cases.append((generate.numa_settings(rng, machine), machine, "machine"))
    answers = run_class(oracle, "numa managers", cases)
    stages = set(a.get("stage") for a in answers)
    assert {"validate", "topologymanager", "cpumanager", "memorymanager", None} <= stages, stages
    # the machine-dependent refusals occur
    errors = " ".join(a.get("error", "") for a in answers)
    assert "unable to reserve the required amount of CPUs" in errors
    assert "Align by socket is not compatible" in errors


def test_static_memory_manager_without_the_machine(oracle):
    """kubelet_config without numa_node_memory: a Static memory manager's reservedMemory is still held
    to the sums kubelet demands on any machine (nothing reserved, a sum that is off, huge pages),
    here against kubelet on a machine with room on 8 NUMA nodes. With a percentage threshold the
    memory total depends on the machine: then only numa.kube's refusals are held to kubelet's."""
    rng = random.Random(SEED + 17)
    machine = generate.random_machine(rng, big=True)
    cases = []
    for dummy in range(CASES // 8):
        config, percentage = generate.static_alone(rng)
        cases.append((config, machine, "alone-sound" if percentage else "alone"))
    answers = run_class(oracle, "static alone", cases)
    assert any("you should specify the system reserved memory" in a.get("error", "") for a in answers)


GIB_4 = 4 * generate.GIB
