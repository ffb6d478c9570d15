#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: topology_scheduler
short_description: Deploy the NodeResourceTopology scheduler (NodeResourceTopologyMatch) and the publisher that feeds it
version_added: "0.1.0"
description:
  - Deploys scheduler-plugins' C(NodeResourceTopologyMatch) as a second scheduler under its own
    name (O(scheduler_name)), the node agent's NodeResourceTopology publisher as a DaemonSet, and
    the C(topology.node.k8s.io) CRD, with server-side apply (field manager C(numa.kube)), then waits
    until the scheduler is available and every selected node has its NodeResourceTopology.
  - The scheduler is kube-scheduler with the plugin registered, the binary at C(/nrt-scheduler) in
    O(scheduler_image), run as one replica (C(Recreate), no leader election, so never two at once)
    with C(--config=/etc/numa-topology-scheduler/config.yaml). That file is a
    C(kubescheduler.config.k8s.io/v1) C(KubeSchedulerConfiguration) in a ConfigMap, with one
    profile under O(scheduler_name) that adds C(NodeResourceTopologyMatch) at every extension point
    it implements (C(multiPoint), that is filter, score and reserve) to kube-scheduler's own
    plugins, with C(scoringStrategy.type) (O(scoring_strategy)), C(cacheResyncPeriodSeconds)
    (O(cache_resync_period)) and the cache's C(informerMode) (O(informer_mode)) and
    C(foreignPodsDetect) (O(foreign_pods_detect)). Its digest is on the pod template
    (C(numa.kube/scheduler-config-sha256)), so a changed configuration starts a new pod.
  - The scheduler's rights are its own ClusterRole C(numa-kube:numa-topology-scheduler), which reads
    NodeResourceTopologies and holds the rules of the live ClusterRole C(system:kube-scheduler) (read at
    each run, so they follow the API server's version; shown in the diff) less every
    C(coordination.k8s.io) rule. Without leader election kube-scheduler takes no Lease and makes no
    LeaseCandidate, so it gets neither, and the default scheduler's C(kube-system/kube-scheduler)
    lock stays out of its reach. The ClusterRole C(system:volume-scheduler) and the Role
    C(extension-apiserver-authentication-reader) in C(kube-system) are bound as they are. The task
    fails, before anything is applied, when either ClusterRole is missing, when
    C(system:volume-scheduler) grants anything of C(coordination.k8s.io), or when
    C(system:kube-scheduler) has a rule of every API group over leases.
  - The publisher (C(python3 -m numa_agent nrt-publisher)) writes one C(NodeResourceTopology) per
    node, named as the node, from kubelet's PodResources API, C(/configz) and sysfs, with a zone per
    NUMA node holding its CPUs, memory, huge pages and C(numa-align/numa-N) devices, the Topology Manager
    policy and scope. It may get, create and update those objects, get Nodes and their C(/configz);
    a ValidatingAdmissionPolicy (C(numa-kube.nrt-publisher-own-node)) lets each pod write only the
    object of the node its token is bound to.
  - A node whose NodeResourceTopology another publisher writes (NFD's topology-updater, an
    operator's exporter) is left out of the publisher's DaemonSet by node affinity, named in
    RV(foreign_topology_nodes) and a warning, and nothing of it is changed or deleted, by any run;
    the scheduler reads that publisher's object for it. Such an object is one without numa.kube's
    managed-by label, or one with it whose C(metadata.managedFields) show another manager writing
    its C(zones) or C(attributes) (an updater that starts after numa.kube's publisher updates the
    object it finds and keeps its labels). Remove this stack from those nodes before enabling NFD's
    topology-updater there.
  - The CRD is applied from O(crd) unless a CRD C(noderesourcetopologies.topology.node.k8s.io)
    that numa.kube did not make is installed (NFD's, an operator's). That one is used as it is when
    it serves C(v1alpha2); the task fails naming its manager, before anything is applied, when
    it does not (taken over only with O(adopt)).
  - Every option, the CRD file, the CRD in the cluster and the publisher's nodes are checked before
    anything is applied, and every problem is named in one refusal.
  - Waits (with O(wait)) run while the rollout moves (see O(wait_timeout) and O(wait_ceiling)),
    for the CRD served, the scheduler's Deployment available (its pod ready once its informers have
    synced), the publisher's DaemonSet rolled out, then each selected node's NodeResourceTopology
    there, written by numa.kube's publisher, with a zone of type C(Node) named C(node-<id>) per
    NUMA node (exactly the ids in O(numa_nodes) where given). Selected nodes that are NotReady, up
    to O(unavailable_nodes_allowed), are left out and named.
  - NodeResourceTopologies numa.kube's publisher wrote for nodes it no longer covers (the Node is
    gone, or O(publisher_node_selector) no longer matches it) are deleted, as the scheduler would
    read them as current; they are named in RV(stale_topology_nodes). The Nodes and the publisher's
    pods are read again right before deleting (with O(wait), after the rollout; without, at once),
    so a node selected by then keeps its object, and one where a publisher pod is still Ready or
    terminating keeps it until a later run (named in a warning).
  - O(state=absent) deletes what numa.kube applied. The publisher first (its DaemonSet, then its
    ClusterRoleBinding, so that a pod still terminating can write nothing more, then the own-node
    policy and the rest), then, with O(wait), once its pods are gone (at most O(wait_timeout)
    seconds without progress; pods still there are named in a warning), the NodeResourceTopologies
    it wrote (another manager's stay, those with numa.kube's label named in
    RV(foreign_topology_nodes)), the scheduler, the CRD only when numa.kube made it and no
    NodeResourceTopology of another publisher is left, and the Namespace only when it holds nothing
    numa.kube did not make for this stack; either kept is named in RV(objects) and a warning.
  - The stack's cluster-scoped objects (its ClusterRoleBindings, the own-node policy) are one per
    cluster. A run whose O(namespace) is not the one the stack's ClusterRoleBindings name fails,
    before anything changes, naming that namespace; keep it, or remove the stack there first.
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
  - numa.kube.stack_rollout
  - numa.kube.publisher
options:
  state:
    description: Whether the stack is deployed or removed.
    type: str
    choices: [present, absent]
    default: present
  crd:
    description:
      - Path, on the host the module runs on, of the NodeResourceTopology CRD of the NRT API module
        (C(manifests/crd.yaml) of C(github.com/k8stopologyawareschedwg/noderesourcetopology-api);
        v0.1.2 is the one numa.kube is tested with). It must serve C(v1alpha2).
      - Needed with O(state=present) unless another manager's CRD of that name serving C(v1alpha2)
        is installed (then that one is used and the file, when given, only checked). Not read for
        O(state=absent).
    type: path
  namespace:
    description: Namespace of the scheduler and the publisher (made when missing; one numa.kube did not make is used as it is).
    type: str
    default: numa-kube-topology
  scheduler_image:
    description:
      - The image of kube-scheduler with C(NodeResourceTopologyMatch) registered, the binary at
        C(/nrt-scheduler) (built from C(sigs.k8s.io/scheduler-plugins)). Required with O(state=present).
    type: str
  scheduler_name:
    description:
      - The scheduler's name, which pods set as C(spec.schedulerName) to be placed by it. A
        DNS-1123 label; not C(default-scheduler) nor C(volcano), whose schedulers would place the
        same pods.
    type: str
    default: numa-topology-scheduler
  scoring_strategy:
    description:
      - How the plugin scores the nodes that fit (C(scoringStrategy.type)). C(MostAllocated),
        C(BalancedAllocation) and C(LeastAllocated) score only nodes whose kubelet runs the
        C(single-numa-node) Topology Manager policy; C(LeastNUMANodes) (fewest NUMA nodes for the
        pod) nodes of any policy.
    type: str
    choices: [MostAllocated, BalancedAllocation, LeastAllocated, LeastNUMANodes]
    default: LeastAllocated
  cache_resync_period:
    description:
      - C(cacheResyncPeriodSeconds). Above 0, the plugin keeps an over-reserving cache (its Reserve
        step counts each pod it placed against the node until a NodeResourceTopology newer than the
        pod, checked by the pods fingerprint the publisher writes, shows it), resynced this often,
        which guards against placing pods on stale objects at the price of pods waiting longer.
      - C(0) turns the cache off (the objects are read as they are). Otherwise 5 to 3600 seconds
        (scheduler-plugins advises at least 5).
    type: int
    default: 5
  informer_mode:
    description:
      - Which pods the cache counts on a node (C(cache.informerMode)), to compare with the pods
        fingerprint the publisher writes (kubelet's PodResources List, its active pods) before it
        takes in a changed object.
      - V(Shared), kube-scheduler's own pod informer, counts the Running pods and never a Succeeded
        or Failed one. V(Dedicated) (scheduler-plugins' default, one more watch of every pod)
        counts every bound pod that is not Pending, so a Failed pod left in the API (one kubelet
        refused with C(TopologyAffinityError), a finished Job's) keeps the fingerprints apart, and
        the node refused, until it is deleted.
    type: str
    choices: [Shared, Dedicated]
    default: Shared
  foreign_pods_detect:
    description:
      - Which pods placed by other schedulers make the cache treat a node's object as stale until
        its next resync (C(cache.foreignPodsDetect)).
      - V(OnlyExclusiveResources) those that take exclusive CPUs (Guaranteed, whole CPUs) or
        devices, the only ones a NodeResourceTopology's C(available) counts. V(All)
        (scheduler-plugins' default) any, a DaemonSet pod's status update included, which keeps
        nodes refused far more often. V(None) none.
    type: str
    choices: [OnlyExclusiveResources, All, None]
    default: OnlyExclusiveResources
  scheduler_node_selector:
    description: Node labels the scheduler's pod must match (where its image is, for example); any node when empty.
    type: dict
    default: {}
  scheduler_verbosity:
    description:
      - kube-scheduler's log level (C(--v)), 0 to 10. At 2 it logs each binding and the cache's
        reserves and the foreign pods it noticed; at 4 each resync and fingerprint mismatch.
    type: int
    default: 2
  publisher_image:
    description: The node agent image (the collection's C(agent/Containerfile)). Required with O(state=present).
    type: str
  publisher_node_selector:
    description:
      - Node labels the publisher's pods must match; every node when empty. Nodes without a
        NodeResourceTopology are not filtered by the plugin (any pod fits them as far as it knows).
      - The default selects the nodes M(numa.kube.node_labels) labelled C(numa.kube/aligned=true),
        those whose kubelet was proven to align pods to a NUMA node.
    type: dict
    default: {numa.kube/aligned: "true"}
  publisher_kubelet_tls:
    description:
      - How the publisher checks kubelet's serving certificate before it sends its token to
        C($NODE_IP:10250), as for M(numa.kube.volcano_stack)'s publisher. V(node-cert) checks it against the
        node's own C(/var/lib/kubelet/pki/kubelet.crt) (mounted alone, read-only), V(cluster-ca)
        against the cluster's CA, V(insecure) nothing (only to diagnose).
    type: str
    choices: [node-cert, cluster-ca, insecure]
    default: node-cert
  publisher_nodes_proxy:
    description:
      - Also grant the publisher C(nodes/proxy), which kubelets before 1.33 (or with the
        C(KubeletFineGrainedAuthz) gate off) require for C(/configz). It allows much more than
        reading the configuration, so grant it only where needed.
    type: bool
    default: false
  image_pull_policy:
    description: The C(imagePullPolicy) of the scheduler's and the publisher's containers.
    type: str
    choices: [Always, IfNotPresent, Never]
    default: IfNotPresent
  numa_nodes:
    description:
      - Node name to the ids of its NUMA nodes (C(numa_topology.node_ids) of
        M(numa.kube.topology_facts)). A node listed here must have exactly the zones C(node-<id>)
        of those ids; any other selected node at least one zone.
    type: dict
    default: {}
  wait:
    description:
      - Whether to wait for the CRD, the scheduler, the publisher and its NodeResourceTopologies;
        with O(state=absent), for the publisher's pods to be gone before its objects are deleted.
    type: bool
    default: true
  max_unavailable:
    description:
      - The publisher DaemonSet's C(maxUnavailable). The scheduler is one replica, replaced (not
        rolled) when it changes.
notes:
  - Check mode applies with the API server's dry run (objects in a namespace the run would create
    are shown as they would be sent).
  - The scheduler built from scheduler-plugins v0.34.7 is a Kubernetes 1.34 kube-scheduler;
    kube-scheduler supports API servers at most one minor version newer.
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost)).
requirements:
  - PyYAML
seealso:
  - module: numa.kube.volcano_stack
  - module: numa.kube.node_labels
  - name: NodeResourceTopologyMatch
    description: scheduler-plugins' documentation of the plugin, its scoring strategies and cache.
    link: https://github.com/kubernetes-sigs/scheduler-plugins/tree/master/pkg/noderesourcetopology
"""

EXAMPLES = r"""
- name: The NodeResourceTopology scheduler and publisher on the aligned nodes
  numa.kube.topology_scheduler:
    crd: /srv/numa-kube/noderesourcetopology-crd.yaml
    scheduler_image: registry.example/numa-kube/nrt-scheduler:v0.34.7
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
  delegate_to: localhost
  run_once: true

- name: Fewest NUMA nodes first, on every node, without the reserve cache
  numa.kube.topology_scheduler:
    crd: /srv/numa-kube/noderesourcetopology-crd.yaml
    scheduler_image: registry.example/numa-kube/nrt-scheduler:v0.34.7
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
    publisher_node_selector: {}
    scoring_strategy: LeastNUMANodes
    cache_resync_period: 0
  delegate_to: localhost

- name: A pod placed by it
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Pod
      metadata: {name: aligned, namespace: default}
      spec:
        schedulerName: numa-topology-scheduler
        containers:
          - name: app
            image: registry.example/app:1
            resources:
              limits: {cpu: "4", memory: 8Gi}
  delegate_to: localhost

- name: Remove what numa.kube deployed (another publisher's objects, and the CRD they need, stay)
  numa.kube.topology_scheduler:
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
objects:
  description:
    - Each object and whether it changed, in the order the run went through them. A CRD or
      Namespace numa.kube did not make, or (with O(state=absent)) one that would take others'
      objects with it, has C(kept) and C(reason).
  returned: always
  type: list
  elements: dict
  sample: [{object: Deployment numa-kube-topology/numa-topology-scheduler, changed: true}]
kept:
  description: Objects of the stack's names that numa.kube did not make, left alone by O(state=absent), each with its manager.
  returned: always
  type: list
  elements: str
crd:
  description: The NodeResourceTopology CRD the scheduler reads, whether numa.kube manages it, and who does.
  returned: when state is present
  type: dict
  sample: {name: noderesourcetopologies.topology.node.k8s.io, numa_kube: false, manager: "field managers nfd-master"}
foreign_topology_nodes:
  description:
    - Nodes whose NodeResourceTopology another publisher writes, with who writes it, never changed
      nor deleted. With O(state=present), the selected ones (left out of numa.kube's publisher)
      and those of nodes no longer selected that carry numa.kube's label; with O(state=absent),
      those carrying numa.kube's label (kept). Also given as a warning.
  returned: when state is present; with state absent, when there are any
  type: dict
  sample: {worker-3: "field managers nfd-topology-updater"}
topology_nodes:
  description: The nodes whose NodeResourceTopology numa.kube's publisher wrote, each proven.
  returned: when state is present, wait is true and not in check mode
  type: list
  elements: str
  sample: [worker-1, worker-2]
stale_topology_nodes:
  description: Nodes the publisher no longer covers whose NodeResourceTopology it had written, deleted (or to be, in check mode); with or without O(wait).
  returned: when there were any
  type: list
  elements: str
unavailable_nodes:
  description:
    - Selected nodes left out of the proof as unavailable (NotReady or unreachable), within
      O(unavailable_nodes_allowed), each with why; also given as a warning.
  returned: when state is present and wait is true
  type: dict
  sample: {worker-17: "NotReady (Ready Unknown: NodeStatusUnknown)"}
scheduler_config_sha256:
  description: The SHA-256 of the scheduler's configuration file, as its pod template carries it.
  returned: when state is present
  type: str
wait_seconds:
  description: Seconds the scheduler's Deployment took to become available.
  returned: when state is present, wait is true and not in check mode
  type: dict
  sample: {"Deployment numa-kube-topology/numa-topology-scheduler": 12.5}
"""

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.numa.kube.plugins.module_utils.k8s.runner import (
    AUTH_ARGUMENT_SPEC,
    ROLLOUT_ARGUMENT_SPEC,
    connect,
    run_stack_module,
    stack_module,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import ALIGNED_SELECTOR
from ansible_collections.numa.kube.plugins.module_utils.stacks.publisher import PUBLISHER_OPTIONS
from ansible_collections.numa.kube.plugins.module_utils.stacks.nrt_scheduler import run
from ansible_collections.numa.kube.plugins.module_utils.stacks.nrt_scheduler_objects import (
    FOREIGN_PODS_DETECT,
    HAS_YAML,
    INFORMER_MODES,
    SCORING_STRATEGIES,
    STACK,
)


def main():
    argument_spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        crd=dict(type="path"),
        namespace=dict(type="str", default="numa-kube-topology"),
        scheduler_image=dict(type="str"),
        scheduler_name=dict(type="str", default="numa-topology-scheduler"),
        scoring_strategy=dict(type="str", choices=list(SCORING_STRATEGIES), default="LeastAllocated"),
        cache_resync_period=dict(type="int", default=5),
        publisher_image=dict(type="str"),
        publisher_node_selector=dict(type="dict", default=dict(ALIGNED_SELECTOR)),
        publisher_resources=PUBLISHER_OPTIONS["publisher_resources"],
        publisher_kubelet_tls=dict(type="str", choices=["node-cert", "cluster-ca", "insecure"], default="node-cert"),
        publisher_nodes_proxy=dict(type="bool", default=False),
        image_pull_policy=dict(type="str", choices=["Always", "IfNotPresent", "Never"], default="IfNotPresent"),
        numa_nodes=dict(type="dict", default={}),
        informer_mode=dict(type="str", choices=list(INFORMER_MODES), default="Shared"),
        foreign_pods_detect=dict(type="str", choices=list(FOREIGN_PODS_DETECT), default="OnlyExclusiveResources"),
        scheduler_node_selector=dict(type="dict", default={}),
        scheduler_verbosity=dict(type="int", default=2),
        wait=dict(type="bool", default=True),
    )
    argument_spec.update(ROLLOUT_ARGUMENT_SPEC)
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True)
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    api = connect(module, STACK)
    run_stack_module(module, api, lambda: run(api, module.params, module.check_mode, api.wait_for))


if __name__ == "__main__":
    main()
