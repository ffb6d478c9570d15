# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes Volcano's numa-aware predicate could never pass, and why (from their Numatopology)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.numa.volcano_numatopology import NUMATOPOLOGY_API

POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"


def node_problems(node, topology, pod_policy=None):
    """Why Volcano's numa-aware predicate would never pass ``node`` for a pod asking ``pod_policy``.

    ``topology`` is the node's Numatopology object (None when there is none). With a pod policy the
    predicate needs the object, the static CPU Manager, the same Topology Manager policy and free CPUs
    in it; without one (every policy the plugin knows), it names what the node could serve.
    """
    if topology is None:
        return ["%s: no Numatopology object, so numa-aware rejects every pod that asks for a NUMA policy: run "
                "the numa.kube node agent's topology publisher (or volcano-sh/resource-exporter) on it" % node]
    spec = topology.get("spec") or {}
    policies = spec.get("policies") or {}
    cpu = policies.get("CPUManagerPolicy") or "none"
    topology_policy = policies.get("TopologyManagerPolicy") or "none"
    problems = []
    if cpu != "static":
        problems.append("%s: kubelet runs cpuManagerPolicy %r, numa-aware passes only nodes with the static CPU "
                        "Manager: set kubelet_cpu_manager_policy static (numa.kube.kubelet)" % (node, cpu))
    if topology_policy == "none":
        problems.append("%s: kubelet runs topologyManagerPolicy none, which no pod's %s can match: set "
                        "kubelet_topology_manager_policy (numa.kube.kubelet)" % (node, POLICY_ANNOTATION))
    elif pod_policy and pod_policy != topology_policy:
        problems.append("%s: kubelet runs topologyManagerPolicy %r, pods annotated %s=%s never pass it "
                        "(the predicate wants them equal)" % (node, topology_policy, POLICY_ANNOTATION, pod_policy))
    cpus = ((spec.get("numares") or {}).get("cpu") or {}).get("allocatable")
    if not cpus:
        problems.append("%s: its Numatopology has no allocatable CPUs (numares.cpu.allocatable), so no pod with "
                        "a NUMA policy fits" % node)
    return problems


def node_report(api, params):
    """{node: [problems]} for every Node (node_selector) that numa-aware would never pass."""
    selector = params.get("node_selector") or {}
    nodes = api.nodes(selector)
    try:
        answer = api.get("/apis/%s/numatopologies" % NUMATOPOLOGY_API)
    except Exception:  # pylint: disable=broad-except  # the CRD is not served: no object for any node
        answer = None
    topologies = dict((t["metadata"]["name"], t) for t in (answer or {}).get("items", []))
    report = {}
    for node in nodes:
        name = node["metadata"]["name"]
        problems = node_problems(name, topologies.get(name), params.get("topology_policy"))
        if problems:
            report[name] = problems
    return report
