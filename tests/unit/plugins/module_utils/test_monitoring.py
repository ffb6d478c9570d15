# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring stack's objects, its TLS Secret and the order of the module's steps.

Against a real API server, prometheus-operator and Prometheus it is proven in the cluster scenario
(molecule/cluster/tests/test_monitoring.py); here the pure parts, with an in-memory stand-in for
the API so that a refusal provably comes before any change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import ssl

import pytest
from cryptography import x509

from ansible_collections.numa.kube.plugins.module_utils import monitoring
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_resource_plugin import MemoryApi, no_wait, node

PARAMS = {"state": "present", "name": "numa-exporter", "namespace": "volcano-system", "image": "r/agent:1",
          "image_pull_policy": "IfNotPresent", "port": 9201, "tls_secret": "", "interval": "30s",
          "service_monitor": True, "service_monitor_labels": {"release": "kps"}, "prometheus_rule": True,
          "rule_labels": {}, "memory_threshold": 0.9, "miss_ratio_threshold": 0.1, "dashboard": {"title": "NUMA"},
          "dashboard_labels": {"grafana_dashboard": "1"}, "dashboard_namespace": "", "without_operator": "fail",
          "node_selector": {}, "tolerations": None, "priority_class_name": "system-node-critical",
          "resources": None, "labels": {}, "wait": True, "wait_timeout": 5}


class StackApi(MemoryApi):
    """MemoryApi plus the discovery answer for monitoring.coreos.com/v1 and the exporters' answers."""

    def __init__(self, nodes, operator=True):
        super(StackApi, self).__init__(nodes, {})
        self.operator = operator

    def get(self, path, **params):
        if path == "/apis/monitoring.coreos.com/v1":
            self.calls.append(("get", path))
            return {"resources": [{"name": "servicemonitors"}, {"name": "prometheusrules"}]} if self.operator else None
        if path.endswith("/pods") and "volcano-system" in path:
            return {"items": [{"metadata": {"name": "x-" + n["metadata"]["name"]},
                               "spec": {"nodeName": n["metadata"]["name"]}, "status": {"phase": "Running"}}
                              for n in self.node_list]}
        return super(StackApi, self).get(path, **params)

    def request(self, method, path, body=None, **params):
        self.calls.append(("request", method, path))
        return "# HELP numa_node_cpus_count x\nnuma_node_cpus_count{numa_node=\"0\"} 2\n"


def kinds(api, verb="apply"):
    return [call[1] for call in api.calls if call[0] == verb]


def test_objects_follow_the_guides_conventions():
    found = dict((o["kind"], o) for o in monitoring.objects(PARAMS))
    service = found["Service"]
    assert service["metadata"]["name"] == "numa-exporter" and service["metadata"]["labels"]["app"] == "numa-exporter"
    assert service["spec"]["ports"][0]["name"] == "https" and service["spec"]["clusterIP"] == "None"
    endpoint = found["ServiceMonitor"]["spec"]["endpoints"][0]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https" and endpoint["interval"] == "30s"
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "numa-exporter-tls", "key": "ca.crt"}},
                                     "serverName": "numa-exporter.volcano-system.svc"}
    # the workload's namespace/pod/container labels, as the exporter writes them, win over the
    # exporter pod's own target labels (else queries by pod find nothing: seen on the test bed)
    assert endpoint["honorLabels"] is True
    assert found["ServiceMonitor"]["metadata"]["labels"]["release"] == "kps"
    assert found["ServiceMonitor"]["spec"]["selector"]["matchLabels"]["app"] == "numa-exporter"
    # the job label is the stack's name, the job the alert rules select
    job_label = found["ServiceMonitor"]["spec"]["jobLabel"]
    assert service["metadata"]["labels"][job_label] == "numa-exporter"
    pod = found["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    args = pod["containers"][0]["args"]
    assert "--listen-address=$(NODE_IP)" in args and any(a.startswith("--tls-cert-file") for a in args)
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert all(m.get("readOnly") for m in pod["containers"][0]["volumeMounts"])
    assert found["ConfigMap"]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert set(found) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service",
                          "ServiceMonitor", "PrometheusRule", "ConfigMap"}
    plain = [o["kind"] for o in monitoring.objects(dict(PARAMS, dashboard=None), operator=False)]
    assert "ServiceMonitor" not in plain and "PrometheusRule" not in plain and "ConfigMap" not in plain


def test_the_certificate_verifies_under_the_service_name(tmp_path):
    names = ["numa-exporter.volcano-system.svc"]
    pem = monitoring.make_certificates(names)
    for key, value in pem.items():
        (tmp_path / key).write_bytes(value)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client_side, server_side = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = client.wrap_bio(server_side, client_side, server_hostname=names[0])
    peer = server.wrap_bio(client_side, server_side, server_side=True)
    for _round in range(10):  # a handshake in memory: raises if the name or chain do not verify
        for end in (conn, peer):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
    assert conn.getpeercert()["subjectAltName"] == (("DNS", names[0]),)
    secret = {"data": dict((k, base64.b64encode(v).decode()) for k, v in pem.items())}
    assert monitoring.certificate_problems(secret, names) == []
    assert "does not name other.svc" in monitoring.certificate_problems(secret, ["other.svc"])[0]
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=monitoring.CERTIFICATE_DAYS - 10)
    assert "within 30 days" in monitoring.certificate_problems(secret, names, now=later)[0]
    assert monitoring.certificate_problems({"data": {"tls.crt": "x"}}, names) == ["it has no ca.crt, tls.key"]
    leaf = x509.load_pem_x509_certificate(pem["tls.crt"])
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_without_the_operator_the_run_stops_before_anything_is_applied():
    api = StackApi([node("w1")], operator=False)
    with pytest.raises(monitoring.MonitoringError) as caught:
        monitoring.run(api, PARAMS, False, no_wait)
    assert "does not serve monitoring.coreos.com/v1" in caught.value.problems[0]
    assert "without_operator: service" in caught.value.problems[0]
    assert kinds(api) == []


def test_without_the_operator_service_mode_deploys_the_exporter_alone():
    api = StackApi([node("w1")], operator=False)
    result = monitoring.run(api, dict(PARAMS, without_operator="service"), False, no_wait)
    assert "ServiceMonitor" not in kinds(api) and "PrometheusRule" not in kinds(api)
    assert "DaemonSet" in kinds(api) and result["nodes"] == {"w1": "serving"}


def test_a_second_run_keeps_the_secret_and_changes_nothing():
    api = StackApi([node("w1"), node("w2")])
    first = monitoring.run(api, PARAMS, False, no_wait)
    assert first["changed"] and first["nodes"] == {"w1": "serving", "w2": "serving"}
    assert kinds(api)[:2] == ["Namespace", "Secret"]
    secret = dict(api.store["/api/v1/namespaces/volcano-system/secrets/numa-exporter-tls"])
    api.calls = []
    second = monitoring.run(api, PARAMS, False, no_wait)
    assert "Secret" not in kinds(api) and "Namespace" not in kinds(api)
    assert not second["changed"], second["objects"]
    assert api.store["/api/v1/namespaces/volcano-system/secrets/numa-exporter-tls"] == secret
    proxied = [call[2] for call in api.calls if call[0] == "request"]
    assert proxied == ["/api/v1/namespaces/volcano-system/pods/https:x-%s:9201/proxy/metrics" % n for n in ("w1", "w2")]


def test_a_users_secret_that_cannot_serve_is_refused_and_never_replaced():
    api = StackApi([node("w1")])
    api.store["/api/v1/namespaces/volcano-system/secrets/mine"] = {"kind": "Secret", "data": {"tls.crt": "eA=="}}
    with pytest.raises(monitoring.MonitoringError) as caught:
        monitoring.run(api, dict(PARAMS, tls_secret="mine"), False, no_wait)
    assert "tls_secret" in caught.value.problems[0] and "no ca.crt, tls.key" in caught.value.problems[0]
    assert "Secret" not in kinds(api) and "DaemonSet" not in kinds(api)


class StrictApi(StackApi):
    """Refuses a dry run into a namespace that does not exist, as the API server does (404)."""

    def apply(self, obj, check_mode=False):
        namespace = obj["metadata"].get("namespace")
        if namespace and "/api/v1/namespaces/%s" % namespace not in self.store:
            raise monitoring.KubeApiError("PATCH %s: 404 namespaces %r not found" % (obj["kind"], namespace), 404)
        return super(StrictApi, self).apply(obj, check_mode)


def test_check_mode_applies_nothing_and_absent_removes_what_was_made():
    api = StrictApi([node("w1")])
    preview = monitoring.run(api, dict(PARAMS, dashboard_namespace="grafana"), True, no_wait)
    assert preview["changed"] and api.store == {}
    previewed = [o["object"] for o in preview["objects"] if o["changed"]]
    assert previewed[:2] == ["Namespace grafana", "Namespace volcano-system"]
    assert "ConfigMap grafana/numa-exporter-dashboard" in previewed and "Secret volcano-system/numa-exporter-tls" in previewed
    assert preview["tls"] == "Secret volcano-system/numa-exporter-tls would be made"
    made = monitoring.run(api, dict(PARAMS, dashboard_namespace="grafana"), False, no_wait)
    assert "/api/v1/namespaces/grafana/configmaps/numa-exporter-dashboard" in api.store, made["objects"]
    api = StackApi([node("w1")])
    monitoring.run(api, PARAMS, False, no_wait)
    gone = monitoring.run(api, dict(PARAMS, state="absent"), False, no_wait)
    assert gone["changed"]
    assert not [path for path in api.store if "numa-exporter" in path]
    assert not monitoring.run(api, dict(PARAMS, state="absent"), False, no_wait)["changed"]


def test_rules_use_the_thresholds_and_the_job():
    groups = monitoring.rule_groups(dict(PARAMS, memory_threshold=0.8, name="numa"))
    rules = dict((r["alert"], r) for r in groups[0]["rules"])
    assert set(rules) == {"NumaNodeMemoryNearlyExhausted", "NumaNodeMissRatioHigh",
                          "NumaHugePagesExhaustedOnOneNode", "NumaExporterDown"}
    assert rules["NumaNodeMemoryNearlyExhausted"]["expr"].endswith(' numa_node_memory_total_bytes{job="numa"} > 0.8')
    assert 'up{job="numa"} == 0' == rules["NumaExporterDown"]["expr"]
