# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's Numatopology (``nodeinfo.volcano.sh/v1alpha1``) as Volcano's numa-aware plugin reads it,
built from what kubelet reports: the spec, and what the numa.kube publisher annotates it with."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.quantity import Quantity, QuantityError
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list

NUMATOPOLOGY_API = "nodeinfo.volcano.sh/v1alpha1"
# the labels of a Numatopology the numa.kube publisher made: numa.kube's, of the stack that
# numa.kube.volcano_stack manages (its state=absent removes exactly these)
PUBLISHER_LABELS = {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "volcano"}
# annotations the numa.kube publisher adds to a Numatopology (Volcano reads only the spec)
RESERVED_CPUS_ANNOTATION = "numa.kube/reserved-cpus"
STARTED_ANNOTATION = "numa.kube/publisher-started"


def reserved_memory(kubelet_config):
    """kubeReserved + systemReserved memory as kubelet's configz shows them ("" when none)."""
    total = None
    for field in ("kubeReserved", "systemReserved"):
        text = (kubelet_config.get(field) or {}).get("memory")
        if text is None:
            continue
        try:
            value = Quantity.parse(text)
        except QuantityError:
            continue  # kubelet refuses such a config at start; nothing sensible to publish
        total = value if total is None else total.add(value)
    return "" if total is None or total.is_zero() else str(total)


def numatopology_spec(cpus, kubelet_config, allocatable_cpus, assigned_cpus):
    """The spec of a node's Numatopology as Volcano's numa-aware plugin reads it.

    ``cpus``: the node's online CPUs as topology facts give them (``id``, ``numa_node``, ``socket``,
    ``core``); ``kubelet_config``: the configuration kubelet runs (its ``/configz``);
    ``allocatable_cpus``: PodResources' GetAllocatableResources CPUs (every CPU minus kubelet's
    reserved ones under the static policy, none under ``none``); ``assigned_cpus``: the CPUs
    PodResources' List reports as exclusively assigned to containers.

    ``numares.cpu.allocatable`` is the free CPU set the plugin picks from: kubelet's own allocatable
    set minus what is assigned. kubelet has already taken its reserved CPUs out of it, so
    ``resReserved`` carries no ``cpu``: given one, the plugin would take that many CPUs off again,
    chosen by its own rule, which is not kubelet's when ``reservedSystemCPUs`` names other CPUs.
    """
    online = sorted(cpu["id"] for cpu in cpus)
    cpu_policy = kubelet_config.get("cpuManagerPolicy") or "none"
    topology_policy = kubelet_config.get("topologyManagerPolicy") or "none"
    if cpu_policy == "static":
        free = set(allocatable_cpus) - set(assigned_cpus)
    else:
        # without the static policy every container shares every CPU; the plugin never places
        # a NUMA-annotated pod here anyway (it wants static), the set is for people reading it
        free = set(online)
    spec = {
        "policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": topology_policy},
        "numares": {"cpu": {"allocatable": format_cpu_list(sorted(c for c in free if c in set(online))),
                            "capacity": len(online)}},
        "cpuDetail": dict((str(cpu["id"]), {"numa": cpu.get("numa_node") or 0, "socket": cpu.get("socket") or 0,
                                            "core": cpu.get("core") or 0}) for cpu in cpus),
    }
    memory = reserved_memory(kubelet_config)
    if memory:
        spec["resReserved"] = {"memory": memory}
    return spec


def reserved_cpus(cpus, kubelet_config, allocatable_cpus):
    """The CPUs kubelet keeps for itself and the system (static policy only), as a CPU list."""
    if (kubelet_config.get("cpuManagerPolicy") or "none") != "static" or not allocatable_cpus:
        return ""
    return format_cpu_list(sorted(set(cpu["id"] for cpu in cpus) - set(allocatable_cpus)))
