# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Differential tests of the node profile: every plan numa.kube accepts is one kubelet starts on.

Generated machines (NUMA nodes, cores per node, one or two threads per core, more than 8 nodes
now and then) and generated profiles go to the planner (profile/plan.py); the kubelet fields of
each plan it accepts go to the oracle, kubelet 1.36's own CPU, Topology and Memory Managers on the
same machine, which must start on them. A plan made together with a ``nosmt`` must also start
kubelet on the machine that boot leaves (the first thread of each core). Where the planner refuses
reserved CPUs kubelet cannot find, kubelet must refuse them too. The planner is stricter than
kubelet on purpose elsewhere (split cores, nothing left to isolate, gaps in the split): those
refusals are counted, not compared.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random

from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import dump_text
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import ProfileError, plan

SEED = int(os.environ.get("NUMA_KUBE_DIFF_SEED", "20261123"))
CASES = int(os.environ.get("NUMA_KUBE_DIFF_CASES", "4000")) // 10
GIB = 2 ** 30
# kubelet must agree where the planner refuses CPUs that are not there
NOT_ONLINE = "are not online on this node"
NOSMT_OFFLINE = "are secondary threads that go offline"


def machine(rng):
    """(cores per NUMA node, threads per core) numbered as the oracle and Linux number them: thread t
    of core c is CPU c + t * (all cores)."""
    count = rng.choice([1, 2, 2, 2, 3, 4, 9])
    cores = [rng.choice([1, 2, 2, 3, 4]) for dummy in range(count)]
    return cores, rng.choice([1, 2, 2])


def topology_of(cores, smt):
    """The topology as SysfsReader.read gives it, for that machine."""
    total = sum(cores)
    cpus, nodes, core = [], [], 0
    for node, count in enumerate(cores):
        ids = []
        for dummy in range(count):
            threads = [core + thread * total for thread in range(smt)]
            for cpu in threads:
                cpus.append({"id": cpu, "numa_node": node, "socket": node, "core": core, "die": 0,
                             "thread_siblings": threads})
            ids.extend(threads)
            core += 1
        nodes.append({"id": node, "cpus": sorted(ids), "memory_total_bytes": 4 * GIB, "hugepages": {}})
    return {"cpus": sorted(cpus, key=lambda cpu: cpu["id"]), "nodes": nodes}


def profile_of(rng, topology):
    online = [cpu["id"] for cpu in topology["cpus"]]
    profile = {"full_pcpus_only": rng.random() < 0.6}
    roll = rng.random()
    if roll < 0.55:
        profile["reserved_per_node"] = rng.choice([1, 1, 2, 2, 3, 4])
        if rng.random() < 0.4:
            with_cpus = [node["id"] for node in topology["nodes"]]
            profile["reserved_nodes"] = sorted(rng.sample(with_cpus, rng.randint(1, len(with_cpus))))
    else:
        pool = online + [max(online) + 1, max(online) + 7]  # now and then a CPU the machine has not
        chosen = sorted(set(rng.sample(pool, rng.randint(1, min(4, len(pool))))))
        profile["reserved"] = format_cpu_list(chosen)
    if rng.random() < 0.2:
        profile["strict_cpu_reservation"] = rng.random() < 0.5
    return profile


def kubelet_request(fields, cores, smt):
    config = dict(fields, apiVersion="kubelet.config.k8s.io/v1beta1", kind="KubeletConfiguration",
                  topologyManagerPolicy="single-numa-node")
    return {"kind": "kubelet", "config": dump_text(config, "yaml"), "nodes": [4 * GIB] * len(cores),
            "capacity": 4 * GIB * len(cores), "cpus": cores, "smt": smt}


def test_every_profile_numa_kube_plans_is_one_kubelet_starts_on(oracle):
    rng = random.Random(SEED + 34)
    cases, requests = [], []
    for dummy in range(CASES):
        cores, smt = machine(rng)
        topology = topology_of(cores, smt)
        profile = profile_of(rng, topology)
        nosmt = smt > 1 and rng.random() < 0.3
        primaries = list(range(sum(cores))) if nosmt else None
        try:
            planned = plan(topology, profile, kubelet_version=(1, 36, 3), kernel_args=["nosmt"] if nosmt else (),
                           primary_threads=primaries)
            problems = []
        except ProfileError as exc:
            planned, problems = None, exc.problems
        if planned is not None:
            fields = planned["kubelet"]
        else:
            # what the user declared, as kubelet would get it without numa.kube
            fields = {"cpuManagerPolicy": "static", "reservedSystemCPUs": profile.get("reserved", "")}
        case = (cores, smt, profile, nosmt, planned, problems)
        # the machine as it runs, and as the nosmt boot leaves it
        cases.append(case + ("now",))
        requests.append(kubelet_request(fields, cores, smt))
        if nosmt:
            cases.append(case + ("after nosmt",))
            requests.append(kubelet_request(fields, cores, 1))
    answers = oracle.ask(requests)
    disagreements, tally = [], {}
    for (cores, smt, profile, nosmt, planned, problems, when), answer in zip(cases, answers):
        where = "cores per node %s, smt %d%s, profile %s, %s" % (
            cores, smt, ", nosmt planned" if nosmt else "", profile, when)
        if planned is not None:
            key = ("planned", when, "kubelet starts" if answer["ok"] else "kubelet refuses")
            if not answer["ok"]:
                disagreements.append("kubelet refuses a plan numa.kube made: %s\n  plan %s\n  kubelet (%s): %s"
                                     % (where, planned["kubelet"], answer.get("stage"), answer.get("error")))
        else:
            rule = "not there" if any(NOT_ONLINE in p for p in problems) else (
                "nosmt" if any(NOSMT_OFFLINE in p for p in problems) else "stricter")
            key = ("refused: " + rule, when, "kubelet starts" if answer["ok"] else "kubelet refuses")
            if rule == "not there" and answer["ok"]:
                disagreements.append("numa.kube refuses reserved CPUs the machine lacks, kubelet starts: %s\n  %s"
                                     % (where, problems))
            if rule == "nosmt" and when == "after nosmt" and answer["ok"]:
                disagreements.append("numa.kube says nosmt takes reserved CPUs offline, kubelet starts after it: %s"
                                     % where)
        tally[key] = tally.get(key, 0) + 1
    for key in sorted(tally):
        print("%-20s %-12s %-15s %5d" % (key + (tally[key],)))
    print("\nseed %d class %-20s %5d inputs" % (SEED, "node profiles", len(cases)))
    assert not disagreements, "%d disagreements, first ones:\n%s" % (len(disagreements), "\n".join(disagreements[:12]))
    # the classes the comparison stands on all occur
    seen = set((key[0], key[1]) for key in tally)
    for needed in [("planned", "now"), ("planned", "after nosmt"), ("refused: not there", "now"),
                   ("refused: nosmt", "after nosmt"), ("refused: stricter", "now")]:
        assert needed in seen, (needed, sorted(tally))
    # and kubelet refuses where the planner said it would
    assert tally.get(("refused: not there", "now", "kubelet refuses"), 0) > 0
    assert tally.get(("refused: nosmt", "after nosmt", "kubelet refuses"), 0) > 0
