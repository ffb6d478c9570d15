#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: numa_resource_plugin
short_description: Deploy the NUMA device plugin (numa-align/numa-N) into a cluster and prove it
version_added: "0.1.0"
description:
  - Deploys the node agent's NUMA device plugin as a ServiceAccount, a ConfigMap and a DaemonSet
    (server-side apply, field manager C(numa.kube)). On every selected node it advertises one
    extended resource C(numa-align/numa-N) per NUMA node with CPUs, O(capacity) devices each,
    carrying the node's topology; a container that asks for one gets C(NUMA_NODE=N) and, through
    kubelet's Topology Manager, CPUs and memory of NUMA node N.
  - A drop-in for ChessCom's k8s-numa-resource-plugin (same resource names, environment
    C(NUMA_CAPACITY) and C(NUMA_SOCKET_DIR), label C(app=numa-resource-plugin), namespace
    C(kube-system)).
  - Before anything is applied, reads the configuration each selected node's kubelet runs with
    (its C(/configz), through the API server) and refuses nodes on which the resource would not
    align anything (CPU Manager other than C(static), Topology Manager policy other than
    C(single-numa-node) or C(restricted)).
  - Then waits for the DaemonSet's rollout (O(max_unavailable) nodes at a time) and for every
    selected node to show each C(numa-align/numa-N) at O(capacity) in its allocatable, with one list of
    the Nodes a round, each node looked at until it shows them and not again. The waits run while
    the rollout moves (see O(wait_timeout) and O(wait_ceiling)).
  - The kubelets' C(/configz) are read a few at a time (at most 8 at once, 10 s each). Unavailable
    nodes (NotReady, or a kubelet that does not answer) up to O(unavailable_nodes_allowed) are left
    out and named; more fail the task before anything is applied. The plugin registers with kubelet again
    on its own after a kubelet restart.
  - The plugin follows CPUs and NUMA nodes going offline and online; the devices of a NUMA node left
    without online CPUs turn Unhealthy (kubelet takes them out of allocatable) until its CPUs are back.
  - O(state=absent) removes the three objects.
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
  - numa.kube.stack_rollout
options:
  state:
    description: Whether the plugin is deployed or removed.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the ServiceAccount, ConfigMap and DaemonSet.
    type: str
    default: numa-resource-plugin
  namespace:
    description: Namespace of the objects (it must exist).
    type: str
    default: kube-system
  image:
    description:
      - The node agent image (built from the collection's C(agent/Containerfile) and pushed to your
        registry). Required with O(state=present).
    type: str
  image_pull_policy:
    description: The containers' C(imagePullPolicy).
    type: str
    choices: [Always, IfNotPresent, Never]
    default: IfNotPresent
  capacity:
    description: Devices per NUMA node (C(NUMA_CAPACITY)), the most pods or containers one NUMA node can take.
    type: int
    default: 100
  socket_dir:
    description:
      - kubelet's device-plugin folder on the nodes (C(NUMA_SOCKET_DIR)); k0s and some distributions
        move it.
    type: path
    default: /var/lib/kubelet/device-plugins
  node_selector:
    description:
      - Labels of the nodes the plugin runs on (the DaemonSet's C(nodeSelector)); every node when empty.
        Each selected node must align (see above).
      - The default selects the nodes M(numa.kube.node_labels) labelled C(numa.kube/aligned=true),
        those whose kubelet was proven to align (C(site.yml) labels every node it prepares), so a
        node that does not align is left out rather than refused. With no such node the task
        fails saying so.
    type: dict
    default: {numa.kube/aligned: "true"}
  tolerations:
    description:
      - The pods' tolerations. Default C(CriticalAddonsOnly) and every C(NoSchedule) taint, so that
        cordoned and tainted NUMA nodes keep advertising.
    type: list
    elements: dict
  priority_class_name:
    description: The pods' priority class; empty for none.
    type: str
    default: system-node-critical
  resources:
    description: The container's resources. Default requests 10m CPU and 48Mi, limit 128Mi memory.
    type: dict
  labels:
    description: Extra labels for every object and pod.
    type: dict
    default: {}
  numa_nodes:
    description:
      - Node name to the NUMA node ids with CPUs it has (C(numa_topology.nodes_with_cpus) of
        M(numa.kube.topology_facts)), to verify that each of them is advertised. Without an entry
        for a node, every C(numa-align/numa-N) it shows must be at O(capacity).
    type: dict
    default: {}
  kubelet_plan:
    description:
      - Node name to the kubelet configuration the node phase of the same run plans for it (the
        C(config) that M(numa.kube.kubelet_config) returns in check mode). Read in check mode
        only, instead of the node's running configuration, so that a preview of a run that also
        sets the kubelet policies does not refuse the nodes it would set right.
    type: dict
    default: {}
  wait:
    description: Wait for the rollout and the advertised resources (or, with O(state=absent), the pods' end).
    type: bool
    default: true
notes:
  - Check mode applies with the API server's dry run, so the diff shows what the server would store.
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost)).
  - A Guaranteed pod asks for one C(numa-align/numa-N) in every container, its first init container
    too, because kubelet's CPU Manager hands init containers' CPUs on to the app containers.
seealso:
  - module: numa.kube.kubelet_config
"""

EXAMPLES = r"""
- name: Deploy the NUMA device plugin on the nodes labelled numa.kube/aligned=true
  numa.kube.numa_resource_plugin:
    kubeconfig: ~/.kube/config
    image: registry.example/numa-kube/node-agent:0.1.0
  delegate_to: localhost
  run_once: true

- name: Or on nodes of your own choice (each must align, or the task fails naming it)
  numa.kube.numa_resource_plugin:
    image: registry.example/numa-kube/node-agent:0.1.0
    node_selector:
      node-role.example/numa: "true"
  delegate_to: localhost
  run_once: true

- name: A pod that runs on NUMA node 1 only (CPUs, memory and NUMA_NODE=1)
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Pod
      metadata: {name: on-numa-1}
      spec:
        initContainers:
          - name: init
            image: busybox
            command: [sh, -c, "echo preparing on NUMA node $NUMA_NODE"]
            resources:
              limits: {cpu: "1", memory: 64Mi, numa-align/numa-1: "1"}
        containers:
          - name: app
            image: busybox
            command: [sleep, infinity]
            resources:
              limits: {cpu: "1", memory: 64Mi, numa-align/numa-1: "1"}
  delegate_to: localhost

- name: Remove the plugin
  numa.kube.numa_resource_plugin:
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
kept:
  description:
    - Objects of the stack's names that numa.kube did not make (no C(app.kubernetes.io/managed-by=numa.kube)
      label), left alone by O(state=absent), each with its manager.
  returned: always
  type: list
  elements: str
  sample: ["DaemonSet kube-system/kube-proxy (field managers kubeadm)"]
objects:
  description: Each object of the stack and whether it changed.
  returned: always
  type: list
  elements: dict
  sample: [{object: ServiceAccount kube-system/numa-resource-plugin, changed: false}]
nodes:
  description: Per selected node, the plugin's resources in its allocatable once verified.
  returned: when state is present, wait is true and not in check mode
  type: dict
  sample: {worker-1: {"numa-align/numa-0": 100, "numa-align/numa-1": 100}}
unavailable_nodes:
  description:
    - Selected nodes left out of the proof as unavailable (NotReady, or a kubelet that did not
      answer), within O(unavailable_nodes_allowed), each with why; also given as a warning.
  returned: when state is present and the stack was applied
  type: dict
  sample: {worker-17: "NotReady (Ready Unknown: NodeStatusUnknown)"}
rollout_seconds:
  description: Seconds the DaemonSet took to roll out.
  returned: when state is present, wait is true and not in check mode
  type: float
  sample: 12.5
"""


from ansible_collections.numa.kube.plugins.module_utils.k8s.runner import (
    AUTH_ARGUMENT_SPEC,
    ROLLOUT_ARGUMENT_SPEC,
    connect,
    run_stack_module,
    stack_module,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import ALIGNED_SELECTOR
from ansible_collections.numa.kube.plugins.module_utils.stacks.resource_plugin import (
    DEFAULT_SOCKET_DIR,
    check_params,
    run,
)


def main():
    argument_spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        name=dict(type="str", default="numa-resource-plugin"),
        namespace=dict(type="str", default="kube-system"),
        image=dict(type="str"),
        image_pull_policy=dict(type="str", choices=["Always", "IfNotPresent", "Never"], default="IfNotPresent"),
        capacity=dict(type="int", default=100),
        socket_dir=dict(type="path", default=DEFAULT_SOCKET_DIR),
        node_selector=dict(type="dict", default=dict(ALIGNED_SELECTOR)),
        tolerations=dict(type="list", elements="dict"),
        priority_class_name=dict(type="str", default="system-node-critical"),
        resources=dict(type="dict"),
        labels=dict(type="dict", default={}),
        numa_nodes=dict(type="dict", default={}),
        kubelet_plan=dict(type="dict", default={}),
        wait=dict(type="bool", default=True),
    )
    argument_spec.update(ROLLOUT_ARGUMENT_SPEC)
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True,
                          required_if=[("state", "present", ["image"])])
    api = connect(module, "numa-resource-plugin")

    def work():
        check_params(module.params)
        return run(api, module.params, module.check_mode, api.wait_for)

    run_stack_module(module, api, work)


if __name__ == "__main__":
    main()
