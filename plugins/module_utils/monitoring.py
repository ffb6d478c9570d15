# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA monitoring stack: the node agent's exporter as a DaemonSet, its Service, TLS Secret,
ServiceMonitor, PrometheusRule and Grafana dashboard ConfigMap, and the proof that it serves.

Conventions of the openFuyao guide unless overridden: Service ``numa-exporter`` labelled
``app: numa-exporter`` with a port named ``https`` served over TLS, a ServiceMonitor scraping it
every 30 s, everything in ``volcano-system``. The exporter runs in the node's network namespace (as
node exporters do), listening on the node's address only; Prometheus verifies its certificate
against the CA in the Secret, under the Service's DNS name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import json

from ansible_collections.numa.kube.plugins.module_utils.kube_api import KubeApiError, comparable, describe
from ansible_collections.numa.kube.plugins.module_utils.kube_wait import daemonset_ready
from ansible_collections.numa.kube.plugins.module_utils.resource_plugin import DEFAULT_TOLERATIONS

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # reported by the module when it must make a certificate
    HAS_CRYPTOGRAPHY = False

APP = "numa-exporter"
MONITORING_GROUP = "monitoring.coreos.com/v1"
DEFAULT_RESOURCES = {"requests": {"cpu": "20m", "memory": "40Mi"}, "limits": {"memory": "96Mi"}}
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
CERTIFICATE_DAYS = 825
RENEW_DAYS = 30


class MonitoringError(Exception):
    """The stack cannot be deployed as asked; ``problems`` says why."""

    def __init__(self, problems, result=None):
        super(MonitoringError, self).__init__("; ".join(problems))
        self.problems = problems
        self.result = result or {}


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

def _meta(params, name=None, namespace=True, extra_labels=None):
    meta = {"name": name or params["name"], "labels": labels(params, extra_labels)}
    if namespace:
        meta["namespace"] = params["namespace"]
    return meta


def daemonset(params):
    port = params["port"]
    scheme_args = ["--tls-cert-file=/etc/numa-exporter/tls/tls.crt", "--tls-key-file=/etc/numa-exporter/tls/tls.key"]
    container = {
        "name": "exporter",
        "image": params["image"],
        "imagePullPolicy": params["image_pull_policy"],
        "args": ["exporter", "--listen-address=$(NODE_IP)", "--port=%d" % port, "--sysfs=/host/sys",
                 "--cgroup-root=/host/sys/fs/cgroup",
                 "--pod-resources-socket=%s/kubelet.sock" % POD_RESOURCES_DIR] + scheme_args,
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
        "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTPS"},
                           "periodSeconds": 10, "timeoutSeconds": 5},
        "resources": params.get("resources") or DEFAULT_RESOURCES,
        # root only to open kubelet's PodResources socket (root's, mode 0600); no capability at all
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "sys", "mountPath": "/host/sys", "readOnly": True},
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
        "volumes": [{"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}},
                    {"name": "pod-resources", "hostPath": {"path": POD_RESOURCES_DIR, "type": "DirectoryOrCreate"}},
                    {"name": "tls", "secret": {"secretName": tls_secret_name(params), "defaultMode": 0o400}}],
    }
    for field in ("nodeSelector", "priorityClassName"):
        if not pod_spec[field]:
            del pod_spec[field]
    meta = _meta(params)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": {"app": APP, "app.kubernetes.io/instance": params["name"]}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
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
    return {"apiVersion": MONITORING_GROUP, "kind": "ServiceMonitor",
            "metadata": _meta(params, extra_labels=params.get("service_monitor_labels")),
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
            "metadata": _meta(params, extra_labels=params.get("rule_labels")),
            "spec": {"groups": rule_groups(params)}}


def dashboard_config_map(params):
    namespace = params.get("dashboard_namespace") or params["namespace"]
    meta = _meta(params, name="%s-dashboard" % params["name"], extra_labels=params.get("dashboard_labels"))
    meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"numa-kube-numa.json": json.dumps(params["dashboard"], indent=2, sort_keys=True)}}


def objects(params, operator=True):
    """Every object of the stack, in the order they are applied (the TLS Secret is separate)."""
    name, namespace = params["name"], params["namespace"]
    found = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(params)},
        # the exporter names containers through the API server's list of its node's pods
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": _meta(params, name="numa.kube:%s" % name, namespace=False),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": _meta(params, name="numa.kube:%s" % name, namespace=False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "numa.kube:%s" % name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        daemonset(params),
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(params), "spec": {
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


# --- the TLS Secret ------------------------------------------------------------------------------

def _pem(obj):
    return obj.public_bytes(serialization.Encoding.PEM)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certificates(names, now=None):
    """A CA of its own and a serving certificate for ``names`` (DNS names): {ca.crt, tls.crt, tls.key}."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=CERTIFICATE_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"numa.kube numa-exporter CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {"ca.crt": _pem(ca), "tls.crt": _pem(leaf), "tls.key": _key_pem(key)}


def certificate_problems(secret, names, now=None):
    """Why a Secret's certificate cannot serve ``names`` (missing keys, names, near its end)."""
    data = (secret or {}).get("data") or {}
    missing = [key for key in ("ca.crt", "tls.crt", "tls.key") if not data.get(key)]
    if missing:
        return ["it has no %s" % ", ".join(missing)]
    if not HAS_CRYPTOGRAPHY:
        return []
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        leaf = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    except ValueError as exc:
        return ["its tls.crt is not a PEM certificate: %s" % exc]
    problems = []
    try:
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        sans = []
    absent = [n for n in names if n not in sans]
    if absent:
        problems.append("its certificate does not name %s (it names %s)" % (", ".join(absent), ", ".join(sans) or "nothing"))
    end = getattr(leaf, "not_valid_after_utc", None) or leaf.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    if end - now < datetime.timedelta(days=RENEW_DAYS):
        problems.append("its certificate ends %s, within %d days" % (end.date().isoformat(), RENEW_DAYS))
    return problems


def tls_secret(api, params, check_mode):
    """Make sure the TLS Secret is usable: (changed, before, after, note)."""
    name = tls_secret_name(params)
    path = "/api/v1/namespaces/%s/secrets/%s" % (params["namespace"], name)
    current = api.get(path)
    names = [server_name(params), "%s.%s.svc.cluster.local" % (params["name"], params["namespace"])]
    problems = certificate_problems(current, names[:1]) if current is not None else ["it does not exist"]
    if not problems:
        return False, None, None, "Secret %s/%s serves %s" % (params["namespace"], name, names[0])
    if params.get("tls_secret"):  # the user's own: never replaced
        raise MonitoringError(["the TLS Secret %s/%s given as tls_secret cannot serve the exporter: %s; give it "
                               "ca.crt, tls.crt and tls.key for %s, or leave tls_secret unset and the module makes one"
                               % (params["namespace"], name, "; ".join(problems), names[0])])
    if not HAS_CRYPTOGRAPHY:
        raise MonitoringError(["making the TLS Secret needs the Python library cryptography on the controller"])
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": _meta(params, name=name),
              "data": dict((key, base64.b64encode(value).decode("ascii"))
                           for key, value in make_certificates(names).items())}
    changed, before, after = api.apply(secret, check_mode)
    return changed, before, after, "Secret %s/%s made (%s)" % (params["namespace"], name, "; ".join(problems))


# --- the run -------------------------------------------------------------------------------------

def operator_installed(api):
    """Whether the API server serves Prometheus Operator's ServiceMonitor and PrometheusRule."""
    resources = api.get("/apis/%s" % MONITORING_GROUP)
    names = set(r.get("name") for r in (resources or {}).get("resources") or [])
    return {"servicemonitors", "prometheusrules"} <= names


def exporter_answers(api, params, pod):
    """None when the exporter in ``pod`` serves its metrics (through the API server), else why not."""
    path = "/api/v1/namespaces/%s/pods/https:%s:%d/proxy/metrics" % (
        params["namespace"], pod["metadata"]["name"], params["port"])
    try:
        text = api.request("GET", path, text=True)
    except KubeApiError as exc:
        return str(exc)
    return None if "numa_node_cpus_count" in text else "its /metrics has no numa_node_cpus_count"


def run(api, params, check_mode, wait_for):
    result = {"changed": False, "objects": [], "diff": [], "nodes": {}}

    def record(obj_name, changed, before, after):
        result["objects"].append({"object": obj_name, "changed": changed})
        if changed:
            result["changed"] = True
            result["diff"].append({"before": before, "after": after, "before_header": obj_name,
                                   "after_header": obj_name})

    operator = operator_installed(api)
    result["operator"] = operator
    if params["state"] == "absent":
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(params, name=tls_secret_name(params))}
        owned = objects(params, operator) + ([] if params.get("tls_secret") else [secret])
        for obj in reversed(owned):
            changed, before = api.delete(obj, check_mode)
            record(describe(obj), changed, before, {})
        return result

    if not operator and (params["service_monitor"] or params["prometheus_rule"]) and not params["without_operator"] == "service":
        raise MonitoringError(["the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule: "
                               "install Prometheus Operator (e.g. kube-prometheus-stack) first, set "
                               "without_operator: service to deploy the exporter and its Service alone, or turn "
                               "service_monitor and prometheus_rule off"])
    nodes = api.nodes(params.get("node_selector"))
    names = [node["metadata"]["name"] for node in nodes]
    if not names:
        raise MonitoringError(["no Node matches node_selector %r: the exporter would run nowhere"
                               % (params.get("node_selector") or {})])

    # the namespaces the stack lives in, made when missing; a preview cannot ask the API server
    # to dry-run objects into a namespace that does not exist yet, so it shows them as they are
    missing = set()
    for name in sorted(set([params["namespace"], params.get("dashboard_namespace") or params["namespace"]])):
        if api.get("/api/v1/namespaces/%s" % name) is None:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            changed, before, after = api.apply(namespace, check_mode)
            record(describe(namespace), changed, before, after)
            missing.add(name)

    def apply(obj):
        if check_mode and obj["metadata"].get("namespace") in missing:
            return True, {}, comparable(obj)
        return api.apply(obj, check_mode)

    if check_mode and params["namespace"] in missing:
        changed, before, after = True, {}, {"kind": "Secret", "metadata": _meta(params, name=tls_secret_name(params))}
        result["tls"] = "Secret %s/%s would be made" % (params["namespace"], tls_secret_name(params))
    else:
        changed, before, after, result["tls"] = tls_secret(api, params, check_mode)
    record("Secret %s/%s" % (params["namespace"], tls_secret_name(params)), changed, before, after)
    for obj in objects(params, operator):
        changed, before, after = apply(obj)
        record(describe(obj), changed, before, after)
    if check_mode or not params["wait"]:
        return result

    ds_path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (params["namespace"], params["name"])
    done, text, waited = wait_for(lambda: daemonset_ready(api.get(ds_path), len(names)), params["wait_timeout"])
    if not done:
        raise MonitoringError(["the DaemonSet %s/%s did not roll out within %d s: %s"
                               % (params["namespace"], params["name"], waited, text)], result)
    result["rollout_seconds"] = round(waited, 1)

    def serving():
        pods = (api.get("/api/v1/namespaces/%s/pods" % params["namespace"],
                        label_selector="app=%s,app.kubernetes.io/instance=%s" % (APP, params["name"])) or {}).get("items", [])
        state = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in names and (pod.get("status") or {}).get("phase") == "Running":
                why = exporter_answers(api, params, pod)
                state[node] = "serving" if why is None else why
        for node in names:
            state.setdefault(node, "no running exporter pod")
        return all(value == "serving" for value in state.values()), state

    done, state, waited = wait_for(serving, params["wait_timeout"])
    result["nodes"] = state
    if not done:
        raise MonitoringError(["the exporter does not serve on every selected node within %d s: %s"
                               % (waited, "; ".join("%s: %s" % item for item in sorted(state.items())
                                                    if item[1] != "serving"))], result)
    return result
