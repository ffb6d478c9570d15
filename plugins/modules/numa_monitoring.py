#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: numa_monitoring
short_description: Deploy the NUMA exporter, its ServiceMonitor, alerts and dashboard into a cluster and prove it
version_added: "0.1.0"
description:
  - Deploys the node agent's NUMA exporter as a DaemonSet in each selected node's network namespace,
    listening on the node's address only and serving HTTPS, with its ServiceAccount (allowed to list
    pods, to name containers, and to create TokenReviews and SubjectAccessReviews, to authenticate
    its scrapers), a headless Service C(numa-exporter) (label C(app=numa-exporter),
    port C(https)), a TLS Secret, a Prometheus Operator ServiceMonitor and PrometheusRule, and a
    Grafana dashboard ConfigMap that the kube-prometheus-stack dashboard sidecar loads (server-side
    apply, field manager C(numa.kube)).
  - The exporter serves per NUMA node the CPUs (online, allocatable, exclusively assigned), memory
    (total, free, used, assigned and allocatable per kubelet's memory manager), huge pages per
    size, the kernel's numastat counters and distances; per container the CPUs, memory and devices
    kubelet assigned on each NUMA node (kubelet's PodResources API) and the bytes of its memory on
    each NUMA node (its cgroup's C(memory.numa_stat)); each PCI device's NUMA node.
  - The exporter's metrics name pods, namespaces and the CPUs they are pinned to, so with
    O(exporter_authentication) (the default) it serves C(/metrics) only to a scraper whose bearer
    token the API server authenticates (TokenReview) and allows to C(get) the non-resource URL
    C(/metrics) (SubjectAccessReview), as kube-rbac-proxy does; each verdict is kept 60 s (10 s for a
    refusal). No token or an invalid one gets 401, a user without the grant 403, an API server that
    does not answer in 4 s 503. C(/healthz) stays open (kubelet's readiness probe). The
    ServiceMonitor has Prometheus send its own service account token (C(bearerTokenFile)), so
    Prometheus's ServiceAccount needs a ClusterRole rule with nonResourceURLs C([/metrics]) and
    verbs C([get]), as kube-prometheus and kube-prometheus-stack give theirs.
  - The exporter mounts only the sysfs subtrees it reads (C(/sys/devices), C(/sys/bus/pci/devices),
    C(/sys/fs/cgroup)), read-only, with no capability; it runs as uid 0 only because kubelet's
    PodResources socket is root's.
  - The TLS Secret is made by the module (its own CA and a certificate for the Service's DNS name,
    renewed 30 days before its end), unless O(tls_secret) names one of the user's; the ServiceMonitor
    tells Prometheus to verify the exporters against that CA under that name. A renewal keeps the old
    CA in C(ca.crt) next to the new one (annotation C(numa.kube/ca-rotation-started)), so that
    Prometheus verifies the exporters that still serve the old certificate; the old CA leaves
    C(ca.crt) on the first later run that finds every selected node's exporter serving the new
    certificate (named on its C(/healthz)), or once it has expired.
  - Then waits for the DaemonSet's rollout (O(max_unavailable) nodes at a time; its status says
    every pod runs the new spec and passed its readiness probe on C(/healthz)), and for the exporters
    of a sample of three selected nodes, spread over them, to serve through the API server's pod
    proxy, which passes on no credentials - its C(/healthz) answers and names the Secret's current
    certificate, and its C(/metrics) without a token answers 401 (authentication in force; with
    O(exporter_authentication=false), the metrics). A node is asked until its exporter serves and not
    again; no node's C(/metrics) is read each round. The waits run while the rollout moves (see
    O(wait_timeout) and O(wait_ceiling)).
  - The sample starts at a place the time decides, so each run asks other nodes (the ones asked are
    RV(nodes)), and an exporter broken in a way its readiness probe does not see is found over a
    few runs. With authentication, only the exporter's own 401 to a scrape without a token counts
    (it proves that the exporter authenticates its scrapers; the module holds no token Prometheus
    would be allowed, so it does not render the metrics itself); any other answer, the API
    server's own 401 among them, does not.
  - Selected nodes that are NotReady, up to O(unavailable_nodes_allowed), are left out and named;
    more fail the task before anything is applied.
  - When the cluster does not serve the C(monitoring.coreos.com/v1) ServiceMonitor and
    PrometheusRule, fails with a clear message before applying anything, or, with
    O(without_operator=service), deploys the exporter and its Service alone.
  - O(state=absent) removes what the module made (a Secret given as O(tls_secret) stays).
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
  - numa.kube.stack_rollout
options:
  state:
    description: Whether the stack is deployed or removed.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the DaemonSet, Service, ServiceAccount, ServiceMonitor and PrometheusRule (the C(job) label of the metrics).
    type: str
    default: numa-exporter
  namespace:
    description: Namespace of the objects; made if it does not exist.
    type: str
    default: volcano-system
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
  port:
    description: The port the exporter serves HTTPS on, on each node's address.
    type: int
    default: 9201
  tls_secret:
    description:
      - A Secret of yours in O(namespace) with C(ca.crt), C(tls.crt) and C(tls.key) (as cert-manager
        writes them) whose certificate names C(<name>.<namespace>.svc). The module checks it and
        never changes it.
      - Checked before anything is applied - C(tls.crt) (then any intermediate CA) must be signed by a
        CA in C(ca.crt) (signatures verified), C(tls.key) must be the key of C(tls.crt), C(tls.crt)
        must be valid now and for 30 more days and name C(<name>.<namespace>.svc) (a wildcard
        C(*.<namespace>.svc) does). Each failure is reported with the Secret, what is wrong and the fix.
      - Empty makes C(<name>-tls) with a CA of its own.
    type: str
    default: ""
  interval:
    description: How often Prometheus scrapes each exporter (the ServiceMonitor's endpoint interval).
    type: str
    default: 30s
  service_monitor:
    description: Whether to make the ServiceMonitor.
    type: bool
    default: true
  service_monitor_labels:
    description:
      - Extra labels of the ServiceMonitor. kube-prometheus-stack's Prometheus selects
        ServiceMonitors by its C(release) label unless told otherwise, e.g. C(release=kube-prometheus-stack).
    type: dict
    default: {}
  prometheus_rule:
    description: Whether to make the PrometheusRule with the NUMA alerts.
    type: bool
    default: true
  rule_labels:
    description: Extra labels of the PrometheusRule (kube-prometheus-stack selects rules by C(release) too).
    type: dict
    default: {}
  memory_threshold:
    description: Fraction of a NUMA node's memory in use above which C(NumaNodeMemoryNearlyExhausted) fires (after 10 minutes).
    type: float
    default: 0.9
  miss_ratio_threshold:
    description: Fraction of a NUMA node's allocations served by another node above which C(NumaNodeMissRatioHigh) fires (after 15 minutes).
    type: float
    default: 0.1
  dashboard:
    description:
      - The Grafana dashboard (its JSON model) to ship as a ConfigMap; the role
        numa.kube.numa_monitoring passes the collection's own. No ConfigMap when empty.
    type: dict
  dashboard_labels:
    description: Labels of the dashboard ConfigMap, those the Grafana dashboard sidecar looks for.
    type: dict
    default: {grafana_dashboard: "1"}
  dashboard_namespace:
    description: Namespace of the dashboard ConfigMap; O(namespace) when empty.
    type: str
    default: ""
  exporter_authentication:
    description:
      - Whether the exporter serves C(/metrics) only to scrapers the API server authenticates and
        allows to C(get) C(/metrics) (TokenReview and SubjectAccessReview; the exporter's ClusterRole
        may then create both), and the ServiceMonitor sends Prometheus's service account token.
      - Turn it off only where something else already keeps the exporters' port to trusted scrapers
        (a kube-rbac-proxy in front, a network policy or mesh that lets in Prometheus alone), or for
        a Prometheus that may not read files from ServiceMonitors (C(arbitraryFSAccessThroughSMs.deny))
        and so cannot send its token; anyone who reaches a node's address then reads which pods run
        there, pinned to which CPUs.
    type: bool
    default: true
  exporter_containers:
    description:
      - Which containers get per-container series (C(numa_container_cpus_exclusive),
        C(numa_container_memory_assigned_bytes), C(numa_container_devices),
        C(numa_container_memory_bytes)); the per NUMA node totals count every container.
      - C(all) every container on the node. Each adds two series per NUMA node (its anon and file
        memory there) plus those of what kubelet assigned it - 16 on a machine of 8 NUMA nodes, so
        1,000 such nodes of 110 containers send Prometheus about 2 million series.
      - C(exclusive) only the containers kubelet gave exclusive CPUs, memory-manager memory or
        devices bound to a NUMA node - the pinned workloads whose locality matters; their memory per
        NUMA node is reported only while kubelet's PodResources API answers.
      - C(none) no per-container series; the exporter then does not read the cgroup tree nor list
        the node's pods. The dashboard's per-pod panels stay empty.
      - Any other value than C(all) is passed to the exporter as C(--containers), which node agent
        images older than this option refuse; C(all) passes nothing.
    type: str
    choices: [all, exclusive, none]
    default: all
  without_operator:
    description:
      - What to do when Prometheus Operator's resources are not served by the cluster. C(fail) stops
        before anything is applied; C(service) deploys the exporter, its Service and the dashboard,
        without ServiceMonitor and PrometheusRule.
    type: str
    choices: [fail, service]
    default: fail
  node_selector:
    description: Labels of the nodes the exporter runs on; every node when empty.
    type: dict
    default: {}
  tolerations:
    description: The pods' tolerations. Default C(CriticalAddonsOnly) and every C(NoSchedule) taint.
    type: list
    elements: dict
  priority_class_name:
    description: The pods' priority class; empty for none.
    type: str
    default: system-node-critical
  resources:
    description: The container's resources. Default requests 20m CPU and 40Mi, limit 96Mi memory.
    type: dict
  labels:
    description: Extra labels for every object and pod.
    type: dict
    default: {}
  wait:
    description: Wait for the rollout and for a sample of the selected nodes' exporters to serve.
    type: bool
    default: true
notes:
  - Check mode applies with the API server's dry run, so the diff shows what the server would store;
    Secret values are hidden in the diff.
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost));
    making the TLS Secret needs the C(cryptography) library there too (ansible-core depends on it).
  - The exporter needs kubelet's PodResources API (on by default since Kubernetes 1.28).
  - "RBAC the stack grants its exporter: C(list) pods (to name containers; RBAC cannot narrow a list
    by field, the exporter asks for its own node's pods only), C(create) tokenreviews and
    subjectaccessreviews (to authenticate scrapers, what C(system:auth-delegator) grants). Prometheus
    needs C(get) on the non-resource URL C(/metrics)."
seealso:
  - module: numa.kube.numa_resource_plugin
"""

EXAMPLES = r"""
- name: NUMA exporter, ServiceMonitor, alerts and dashboard for kube-prometheus-stack
  numa.kube.numa_monitoring:
    image: registry.example/numa-kube/node-agent:0.1.0
    namespace: monitoring
    service_monitor_labels: {release: kube-prometheus-stack}
    rule_labels: {release: kube-prometheus-stack}
    dashboard: "{{ lookup('ansible.builtin.file', 'numa-dashboard.json') | from_json }}"
  delegate_to: localhost
  run_once: true

- name: The exporter alone, in a cluster without Prometheus Operator
  numa.kube.numa_monitoring:
    image: registry.example/numa-kube/node-agent:0.1.0
    without_operator: service
  delegate_to: localhost

- name: Remove the stack
  numa.kube.numa_monitoring:
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
  sample: [{object: Service volcano-system/numa-exporter, changed: false}]
operator:
  description: Whether the cluster serves Prometheus Operator's ServiceMonitor and PrometheusRule.
  returned: always
  type: bool
tls:
  description: What became of the TLS Secret.
  returned: when state is present
  type: str
  sample: Secret volcano-system/numa-exporter-tls serves numa-exporter.volcano-system.svc
nodes:
  description:
    - Per node of the sample asked (up to three selected nodes, spread over them from a starting
      point that changes with each run), C(serving) once its exporter answered, else why not.
  returned: when state is present, wait is true and not in check mode
  type: dict
  sample: {worker-1: serving}
unavailable_nodes:
  description:
    - Selected nodes left out of the proof as unavailable (NotReady or unreachable), within
      O(unavailable_nodes_allowed), each with why; also given as a warning.
  returned: when state is present and the stack was applied (also in check mode and with O(wait=false))
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
from ansible_collections.numa.kube.plugins.module_utils.stacks.monitoring import run


def main():
    argument_spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        name=dict(type="str", default="numa-exporter"),
        namespace=dict(type="str", default="volcano-system"),
        image=dict(type="str"),
        image_pull_policy=dict(type="str", choices=["Always", "IfNotPresent", "Never"], default="IfNotPresent"),
        port=dict(type="int", default=9201),
        tls_secret=dict(type="str", default="", no_log=False),  # a Secret's name, not a secret
        interval=dict(type="str", default="30s"),
        service_monitor=dict(type="bool", default=True),
        service_monitor_labels=dict(type="dict", default={}),
        prometheus_rule=dict(type="bool", default=True),
        rule_labels=dict(type="dict", default={}),
        memory_threshold=dict(type="float", default=0.9),
        miss_ratio_threshold=dict(type="float", default=0.1),
        dashboard=dict(type="dict"),
        dashboard_labels=dict(type="dict", default={"grafana_dashboard": "1"}),
        dashboard_namespace=dict(type="str", default=""),
        exporter_authentication=dict(type="bool", default=True),
        exporter_containers=dict(type="str", choices=["all", "exclusive", "none"], default="all"),
        without_operator=dict(type="str", choices=["fail", "service"], default="fail"),
        node_selector=dict(type="dict", default={}),
        tolerations=dict(type="list", elements="dict"),
        priority_class_name=dict(type="str", default="system-node-critical"),
        resources=dict(type="dict"),
        labels=dict(type="dict", default={}),
        wait=dict(type="bool", default=True),
    )
    argument_spec.update(ROLLOUT_ARGUMENT_SPEC)
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True,
                          required_if=[("state", "present", ["image"])])
    api = connect(module, "numa-monitoring")
    run_stack_module(module, api, lambda: run(api, module.params, module.check_mode, api.wait_for))


if __name__ == "__main__":
    main()
