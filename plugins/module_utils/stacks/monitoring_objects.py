# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA monitoring stack's objects, built from the module's options alone (no request): the
exporter's DaemonSet and what it may do, its Service, the ServiceMonitor, the alerting rules and the
Grafana dashboard ConfigMap (stacks/monitoring.py deploys them and proves they serve)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import max_unavailable
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import DEFAULT_MAX_UNAVAILABLE, DEFAULT_TOLERATIONS

APP = "numa-exporter"
MONITORING_GROUP = "monitoring.coreos.com/v1"
DEFAULT_RESOURCES = {"requests": {"cpu": "20m", "memory": "40Mi"}, "limits": {"memory": "96Mi"}}
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
CERTIFICATE_DAYS = 825
RENEW_DAYS = 30
# where the operator's Prometheus finds its own service account's token (automounted), which the
# ServiceMonitor has it send: the exporter lets it in once the API server says Prometheus may
# get /metrics
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# when the module began to replace its CA (the old one stays in ca.crt meanwhile): for people
ROTATION_ANNOTATION = "numa.kube/ca-rotation-started"
# the sysfs subtrees the exporter reads (numa_metrics.Topology and Scraper), each mounted read-only
# at the same place under /host/sys as on the host:
# - devices: devices/system/node (NUMA nodes: cpulist, meminfo, numastat, distance, hugepages),
#   devices/system/cpu/online, and the real folders of the PCI devices;
# - bus/pci/devices: one symlink per PCI device, such as 0000:00:01.0 ->
#   ../../../devices/pci0000:00/0000:00:01.0. The link is relative and the kernel resolves it in the
#   container's own tree, so it lands in /host/sys/devices/pci0000:00/... only because /sys/devices
#   is mounted at /host/sys/devices. All of /sys/devices rather than its pci* folders: a hostPath
#   cannot name "every pci* folder", their number and names differ between machines, and on some
#   (ARM SoCs) the host bridges sit under devices/platform/.../pci0000:00.
# - fs/cgroup: the node's cgroup tree (kubelet's kubepods, each container's memory.numa_stat).
# Left out: kernel/ (debug, tracing, security), firmware/ (ACPI tables, EFI variables), module/,
# power/, block/, class/ and the other file systems under fs/.
SYSFS_MOUNTS = (("sys-devices", "/sys/devices"), ("sys-pci-devices", "/sys/bus/pci/devices"),
                ("sys-cgroup", "/sys/fs/cgroup"))
HOST_ROOT = "/host"
# once the DaemonSet says every pod runs the new spec and is available (kubelet's readiness probe
# asks each exporter's /healthz), the exporters of this many nodes, spread over the selection, are
# asked through the API server (/healthz with the certificate, /metrics without a token): the
# proof that Prometheus' way in (TLS, authentication) works, without a request to every node
SERVING_SAMPLE = 3
# the start of the exporter's answer to a scrape without a token (numa_agent.authn)
EXPORTER_REFUSAL = "no bearer token"
# which containers get per-container series (the exporter's --containers; the agent's metrics/assignment):
# every container, only those kubelet gave exclusive CPUs, memory-manager memory or devices bound to
# a NUMA node, or none (node totals only, and the cgroup tree is not read). Each container named
# adds two series per NUMA node (its anon and file memory there) plus those of what it was assigned:
# 16 on an 8-node machine, so "all" on 1,000 such nodes of 110 containers is about 2 million series.
EXPORTER_CONTAINERS = ("all", "exclusive", "none")


class MonitoringError(ProblemsError):
    """The stack cannot be deployed as asked; ``problems`` says why."""


def labels(params, extra=None):
    found = {"app": APP, "app.kubernetes.io/name": APP, "app.kubernetes.io/instance": params["name"],
             "app.kubernetes.io/managed-by": "numa.kube"}
    found.update(params.get("labels") or {})
    found.update(extra or {})
    return found


def server_name(params):
    """The name Prometheus checks the exporters' certificate against: the Service's DNS name."""
    return "%s.%s.svc" % (params["name"], params["namespace"])


def tls_secret_name(params):
    return params.get("tls_secret") or "%s-tls" % params["name"]


# --- objects -------------------------------------------------------------------------------------

def object_meta(params, name=None, namespace=True, extra_labels=None):
    meta = {"name": name or params["name"], "labels": labels(params, extra_labels)}
    if namespace:
        meta["namespace"] = params["namespace"]
    return meta


def daemonset(params):
    port = params["port"]
    scheme_args = ["--tls-cert-file=/etc/numa-exporter/tls/tls.crt", "--tls-key-file=/etc/numa-exporter/tls/tls.key"]
    if not params["exporter_authentication"]:
        scheme_args.append("--authentication=none")
    # "all" is the exporter's own default: left unsaid, so that an image older than the option
    # (whose parser refuses --containers) still starts with the default
    containers = params.get("exporter_containers") or "all"
    limit_args = [] if containers == "all" else ["--containers=%s" % containers]
    container = {
        "name": "exporter",
        "image": params["image"],
        "imagePullPolicy": params["image_pull_policy"],
        "args": ["exporter", "--listen-address=$(NODE_IP)", "--port=%d" % port, "--sysfs=%s/sys" % HOST_ROOT,
                 "--cgroup-root=%s/sys/fs/cgroup" % HOST_ROOT,
                 "--pod-resources-socket=%s/kubelet.sock" % POD_RESOURCES_DIR] + scheme_args + limit_args,
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
        "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"}],
        # /healthz answers without credentials (the probe has none); /metrics wants a token
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTPS"},
                           "periodSeconds": 10, "timeoutSeconds": 5},
        "resources": params.get("resources") or DEFAULT_RESOURCES,
        # uid 0 only because kubelet's PodResources socket is root's and writable by root alone
        # (connecting to a unix socket needs write permission): every other file the exporter
        # reads (sysfs, memory.numa_stat) is readable by anyone. No capability at all, so root
        # here cannot read past file modes (no CAP_DAC_OVERRIDE) nor write to the read-only mounts.
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": name, "mountPath": HOST_ROOT + path, "readOnly": True}
                         for name, path in SYSFS_MOUNTS] + [
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "tls", "mountPath": "/etc/numa-exporter/tls", "readOnly": True}],
    }
    pod_spec = {
        "serviceAccountName": params["name"],
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": params["priority_class_name"],
        "nodeSelector": params.get("node_selector") or {},
        "tolerations": DEFAULT_TOLERATIONS if params.get("tolerations") is None else params["tolerations"],
        "terminationGracePeriodSeconds": 10,
        "containers": [container],
        "volumes": [{"name": name, "hostPath": {"path": path, "type": "Directory"}} for name, path in SYSFS_MOUNTS] + [
            {"name": "pod-resources", "hostPath": {"path": POD_RESOURCES_DIR, "type": "DirectoryOrCreate"}},
            {"name": "tls", "secret": {"secretName": tls_secret_name(params), "defaultMode": 0o400}}],
    }
    for field in ("nodeSelector", "priorityClassName"):
        if not pod_spec[field]:
            del pod_spec[field]
    meta = object_meta(params)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": {"app": APP, "app.kubernetes.io/instance": params["name"]}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable(
            params.get("max_unavailable", DEFAULT_MAX_UNAVAILABLE))}},
        "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": pod_spec}}}


def service_monitor(params):
    endpoint = {
        "port": "https",
        "scheme": "https",
        "interval": params["interval"],
        "tlsConfig": {"ca": {"secret": {"name": tls_secret_name(params), "key": "ca.crt"}},
                      "serverName": server_name(params)},
        # the exporter's own namespace, pod and container labels name the workload a series is
        # about; without this the operator's target labels (the exporter pod's) would take those
        # names and push the workload's into exported_namespace, exported_pod, exported_container
        "honorLabels": True,
        # the node's name, which dashboards and alerts group by, rather than its address
        "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node",
                         "action": "replace"}],
    }
    if params["exporter_authentication"]:
        # Prometheus's own service account token, as kube-prometheus scrapes kubelet. In
        # prometheus-operator v0.88 an endpoint's `authorization` takes only a Secret's key (no
        # file), and the token Prometheus already has is a file: bearerTokenFile (deprecated, still
        # served; a Prometheus with arbitraryFSAccessThroughSMs.deny refuses it)
        endpoint["bearerTokenFile"] = TOKEN_FILE
    return {"apiVersion": MONITORING_GROUP, "kind": "ServiceMonitor",
            "metadata": object_meta(params, extra_labels=params.get("service_monitor_labels")),
            "spec": {"selector": {"matchLabels": {"app": APP, "app.kubernetes.io/instance": params["name"]}},
                     "namespaceSelector": {"matchNames": [params["namespace"]]},
                     "jobLabel": "app.kubernetes.io/instance",  # job = the name (numa-exporter)
                     "endpoints": [endpoint]}}


def rule_groups(params):
    """The alerting rules (plain data, as in a PrometheusRule's spec.groups)."""
    memory = params["memory_threshold"]
    miss = params["miss_ratio_threshold"]
    job = params["name"]
    return [{"name": "numa.kube.numa-exporter", "rules": [
        {"alert": "NumaNodeMemoryNearlyExhausted",
         # in use and not page cache (which the kernel reclaims): what a pinned pod cannot get back
         "expr": "(numa_node_memory_used_bytes{job=\"%s\"} - numa_node_memory_file_bytes{job=\"%s\"})"
                 " / numa_node_memory_total_bytes{job=\"%s\"} > %s" % (job, job, job, memory),
         "for": "10m", "labels": {"severity": "warning"},
         "annotations": {"summary": "NUMA node {{ $labels.numa_node }} of {{ $labels.node }} is nearly out of memory",
                         "description": "{{ $value | humanizePercentage }} of NUMA node {{ $labels.numa_node }}'s "
                                        "memory is in use (page cache aside) on {{ $labels.node }}; pods pinned there will spill to "
                                        "another node or be killed."}},
        {"alert": "NumaNodeMissRatioHigh",
         "expr": "sum by (node, numa_node) (rate(numa_node_numastat_pages_total{job=\"%s\",event=\"numa_miss\"}[10m]))"
                 " / sum by (node, numa_node) (rate(numa_node_numastat_pages_total{job=\"%s\",event=~\"numa_hit|numa_miss\"}[10m]))"
                 " > %s" % (job, job, miss),
         "for": "15m", "labels": {"severity": "warning"},
         "annotations": {"summary": "Allocations on NUMA node {{ $labels.numa_node }} of {{ $labels.node }} "
                                    "often land on another node",
                         "description": "{{ $value | humanizePercentage }} of the pages meant for NUMA node "
                                        "{{ $labels.numa_node }} on {{ $labels.node }} came from another node over "
                                        "the last 10 minutes."}},
        {"alert": "NumaHugePagesExhaustedOnOneNode",
         "expr": "(numa_node_hugepages_free{job=\"%s\"} == 0 and numa_node_hugepages{job=\"%s\"} > 0)"
                 " and on (node, size) (max by (node, size) (numa_node_hugepages_free{job=\"%s\"}) > 0)"
                 % (job, job, job),
         "for": "10m", "labels": {"severity": "warning"},
         "annotations": {"summary": "{{ $labels.size }} huge pages are used up on NUMA node {{ $labels.numa_node }} "
                                    "of {{ $labels.node }} while another node has free ones",
                         "description": "A pod aligned to NUMA node {{ $labels.numa_node }} cannot get {{ $labels.size }} "
                                        "huge pages there, though the machine has some free: reserve them per node."}},
        {"alert": "NumaExporterDown",
         "expr": "up{job=\"%s\"} == 0" % job,
         "for": "5m", "labels": {"severity": "warning"},
         "annotations": {"summary": "The NUMA exporter on {{ $labels.node }} does not answer",
                         "description": "Prometheus could not scrape {{ $labels.instance }} for 5 minutes."}},
    ]}]


def prometheus_rule(params):
    return {"apiVersion": MONITORING_GROUP, "kind": "PrometheusRule",
            "metadata": object_meta(params, extra_labels=params.get("rule_labels")),
            "spec": {"groups": rule_groups(params)}}


def dashboard_config_map(params):
    namespace = params.get("dashboard_namespace") or params["namespace"]
    meta = object_meta(params, name="%s-dashboard" % params["name"], extra_labels=params.get("dashboard_labels"))
    meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"numa-kube-numa.json": json.dumps(params["dashboard"], indent=2, sort_keys=True)}}


def exporter_rules(params):
    """What the exporter's service account may do, and no more."""
    # list pods, to name containers: RBAC cannot narrow a list by field, so the grant covers the
    # cluster's pods while the exporter asks for its own node's alone (field selector
    # spec.nodeName, agent/numa_agent/pods.py); no get, which it never needs
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    if params["exporter_authentication"]:
        # ask the API server whose a scraper's token is and whether it may get /metrics (what the
        # built-in ClusterRole system:auth-delegator grants, and no more)
        rules += [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                  {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
    return rules


def objects(params, operator=True):
    """Every object of the stack, in the order they are applied (the TLS Secret is separate)."""
    name, namespace = params["name"], params["namespace"]
    found = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_meta(params)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": object_meta(params, name="numa.kube:%s" % name, namespace=False), "rules": exporter_rules(params)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": object_meta(params, name="numa.kube:%s" % name, namespace=False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "numa.kube:%s" % name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        daemonset(params),
        {"apiVersion": "v1", "kind": "Service", "metadata": object_meta(params), "spec": {
            "clusterIP": "None",
            "selector": {"app": APP, "app.kubernetes.io/instance": name},
            "ports": [{"name": "https", "port": params["port"], "targetPort": "https", "protocol": "TCP"}]}},
    ]
    if operator and params["service_monitor"]:
        found.append(service_monitor(params))
    if operator and params["prometheus_rule"]:
        found.append(prometheus_rule(params))
    if params.get("dashboard"):
        found.append(dashboard_config_map(params))
    return found
