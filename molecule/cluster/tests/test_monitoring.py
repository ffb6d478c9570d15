# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA monitoring stack, deployed by site.yml's cluster phase (numa.kube.numa_monitoring) on both
nodes, proven with the real prometheus-operator and a real Prometheus.

prometheus-operator (v0.88.0, built from its Go module; a process on the host, control_plane.py)
turns the module's ServiceMonitor and PrometheusRule into the configuration of the test bed's
Prometheus (Debian's 2.53.3 in a pod the operator runs, resources/kube/prometheus.yaml.j2), which
scrapes each node's exporter over TLS across the guests' LAN, with its service account's token
(the exporter asks the API server whose token it is and whether it may get /metrics: the test bed's
Prometheus ClusterRole has that grant, as kube-prometheus's has). Prometheus' HTTP API is read from
numa-kubelet, which routes to every pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import gzip
import hashlib
import json
import os
import shlex
import ssl
import sys
import time
import urllib.parse

import kubernetes
import pytest
import testinfra
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import converge_vars, cpu_list, guest_get, run_module, wait  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KUBECONFIG = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane", "admin.kubeconfig")
DASHBOARD = os.path.join(ROOT, "roles", "numa_monitoring", "files", "numa-dashboard.json")
NAMESPACE = "volcano-system"
JOB = "serviceMonitor/%s/numa-exporter/0" % NAMESPACE
NODES = {"numa-kubelet": "192.168.77.11", "numa-uneven": "192.168.77.12"}
SECRET = "numa-exporter-tls"
SERVICE = "numa-exporter.%s.svc" % NAMESPACE
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# what converge.yml passes the cluster phase, besides the defaults
MODULE_ARGS = {"kubeconfig": KUBECONFIG, "image": "numa.kube/node-agent:test", "image_pull_policy": "Never",
               "service_monitor_labels": {"release": "numa-test"}, "rule_labels": {"release": "numa-test"}}
# the converge's container resources (no CPU request on the test bed), so that a run here changes nothing else
MODULE_ARGS["resources"] = converge_vars()["numa_monitoring_resources"]


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(KUBECONFIG)
    return kubernetes.client.CoreV1Api()


def exporter_on_the_converges_image():
    """Put the converge's image back on the exporter when it runs another: the file's last test
    leaves it on a second tag (no rollout back, to save the scenario that time). conftest.py calls
    this when a verify starts, before test_fleet.py's re-run of converge.yml, which would otherwise
    roll it back and count a change: a verify run again on the same fleet finds the stack as the
    converge left it. A verify right after the converge finds it so and does nothing here."""
    kubernetes.config.load_kube_config(KUBECONFIG)
    apps = kubernetes.client.AppsV1Api()
    daemonset = apps.read_namespaced_daemon_set("numa-exporter", NAMESPACE)
    if daemonset.spec.template.spec.containers[0].image != MODULE_ARGS["image"]:
        back = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=json.load(open(DASHBOARD))))
        assert not back.get("failed"), back.get("msg", back)


@pytest.fixture(scope="module")
def prometheus(host, api):
    """A function that GETs Prometheus' HTTP API (path and query) and returns its data."""
    def running():
        pods = api.list_namespaced_pod("monitoring", label_selector="app.kubernetes.io/name=prometheus").items
        ready = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip
                 and all(c.ready for c in p.status.container_statuses or [])]
        return ready[0] if ready else None

    # test bed readiness: the operator's pod comes up once (image import and start under TCG)
    start = time.time()
    pod = wait("the Prometheus pod prometheus-operator runs", running, timeout=600, interval=5)

    def get(path, **query):
        url = "http://%s:9090%s?%s" % (pod.status.pod_ip, path, urllib.parse.urlencode(query))
        answer = json.loads(guest_get(host, url, timeout=30))
        assert answer["status"] == "success", answer
        return answer["data"]

    # and a scrape of every exporter from now on: Prometheus runs on numa-uneven, which
    # test_kubelet.py holds stopped for minutes, and a target's last state (and last samples)
    # would otherwise be from before that (guest clocks follow the host's)
    wait("a scrape of every exporter after the tests before", lambda: len(get(
        "/api/v1/query", query='timestamp(up{job="numa-exporter"}) > %f' % start)["result"]) == len(NODES),
        timeout=300, interval=5)
    return get


def instant(prometheus, expr):
    return prometheus("/api/v1/query", query=expr)["result"]


def test_the_service_monitor_becomes_a_tls_scrape_job(api):
    secret = api.read_namespaced_secret("prometheus-numa", "monitoring")
    config = yaml.safe_load(gzip.decompress(base64.b64decode(secret.data["prometheus.yaml.gz"])))
    jobs = dict((job["job_name"], job) for job in config["scrape_configs"])
    assert JOB in jobs, sorted(jobs)
    job = jobs[JOB]
    assert job["scheme"] == "https" and job["scrape_interval"] == "30s"
    assert job["honor_labels"] is True, "the workload's namespace/pod/container labels must win"
    assert job["tls_config"]["server_name"] == "numa-exporter.%s.svc" % NAMESPACE
    assert job["tls_config"]["ca_file"].startswith("/etc/prometheus/certs/"), job["tls_config"]
    assert "insecure_skip_verify" not in job["tls_config"] or not job["tls_config"]["insecure_skip_verify"]
    # Prometheus sends its own service account's token, which the exporter has the API server review
    assert job["bearer_token_file"] == TOKEN_FILE, sorted(job)


def test_the_test_beds_config_reloader_runs_without_a_cpu_limit(api):
    """The operator runs with --config-reloader-cpu-limit=0 (control_plane.py says why: a test holds
    numa-uneven stopped, the pause is charged to the task on each vCPU, and a reloader limited to
    10m would then be throttled a hundred times as long, unkillable, its pod left terminating)."""
    pod = api.read_namespaced_pod("prometheus-numa-0", "monitoring")
    reloaders = [c for c in pod.spec.containers if c.name == "config-reloader"]
    assert len(reloaders) == 1, [c.name for c in pod.spec.containers]
    assert "cpu" not in ((reloaders[0].resources and reloaders[0].resources.limits) or {}), reloaders[0].resources


def test_prometheus_scrapes_every_nodes_exporter_over_tls(prometheus):
    def scraped():
        targets = [t for t in prometheus("/api/v1/targets", state="active")["activeTargets"]
                   if t["scrapePool"] == JOB]
        done = len(targets) == len(NODES) and all(t["health"] != "unknown" for t in targets)
        return targets if done else None

    targets = wait("both exporters scraped once", scraped, timeout=300, interval=5)
    for target in targets:
        print("%s: %s %s %s" % (target["labels"].get("node"), target["scrapeUrl"], target["health"],
                                target["lastError"]))
    assert sorted((t["labels"]["node"], t["scrapeUrl"], t["health"]) for t in targets) == sorted(
        (node, "https://%s:9201/metrics" % address, "up") for node, address in NODES.items())


def guest_request(host, url, token=None, timeout=20):
    """(status, WWW-Authenticate header, body) of a GET made inside the guest, with ``token`` as a
    bearer token when given (the exporter's certificate is not checked here: its chain is the
    ServiceMonitor's business, tested above)."""
    script = ("import json, ssl, sys, urllib.error, urllib.request\n"
              "headers = {'Authorization': 'Bearer ' + sys.argv[2]} if len(sys.argv) > 2 else {}\n"
              "try:\n"
              "    answer = urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers=headers), "
              "timeout=%d, context=ssl._create_unverified_context())\n"
              "except urllib.error.HTTPError as error:\n"
              "    answer = error\n"
              "print(json.dumps([answer.getcode(), answer.headers.get('WWW-Authenticate'), "
              "answer.read().decode()]))\n" % timeout)
    args = [url] + ([token] if token else [])
    command = "python3 -c %s %s" % (shlex.quote(script), " ".join(shlex.quote(arg) for arg in args))
    return tuple(json.loads(host.check_output(command)))


def service_account_token(api, name):
    """A short-lived token of a service account made for the test in the default namespace."""
    api.create_namespaced_service_account("default", {"metadata": {"name": name}})
    answer = api.create_namespaced_service_account_token(name, "default", {"spec": {"expirationSeconds": 600}})
    return answer.status.token


def may_get_metrics(user):
    """Whether the API server's authorizer lets ``user`` get /metrics now (the admin asks)."""
    review = kubernetes.client.AuthorizationV1Api().create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:serviceaccounts:default",
                                          "system:authenticated"],
                 "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    return review.status.allowed


def test_an_anonymous_scrape_gets_401_and_healthz_stays_open(host, api):
    """From a guest on the node network, as anyone there could: no token, or one that is not a
    service account's, gets 401 and no metrics; kubelet's probe path answers without one and names
    the Secret's certificate."""
    secret = api.read_namespaced_secret(SECRET, NAMESPACE)
    served = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"])).fingerprint(hashes.SHA256()).hex()
    for node, address in sorted(NODES.items()):
        status, challenge, body = guest_request(host, "https://%s:9201/metrics" % address)
        print("%s anonymous: %s %s %s" % (node, status, challenge, body.strip()))
        assert (status, challenge) == (401, 'Bearer realm="numa-exporter"'), (node, body)
        assert "numa_node" not in body
        status, _challenge, body = guest_request(host, "https://%s:9201/metrics" % address, token="not-a-token")
        assert (status, body) == (401, "numa-exporter: unauthorized: the token is not valid\n"), node
        status, _challenge, body = guest_request(host, "https://%s:9201/healthz" % address)
        assert (status, body) == (200, "ok\ncertificate-sha256: %s\n" % served), node
    # and through the API server's pod proxy, which passes on no credentials: what the module checks
    pod = api.list_namespaced_pod(NAMESPACE, label_selector="app=numa-exporter").items[0]
    with pytest.raises(kubernetes.client.ApiException) as caught:
        api.connect_get_namespaced_pod_proxy_with_path("https:%s:9201" % pod.metadata.name, NAMESPACE, "metrics")
    assert caught.value.status == 401, caught.value


def test_a_token_without_the_metrics_grant_gets_403_and_one_with_it_the_metrics(host, api):
    rbac = kubernetes.client.RbacAuthorizationV1Api()
    names = {"denied": "numa-test-unprivileged", "allowed": "numa-test-scraper"}
    try:
        denied = service_account_token(api, names["denied"])
        allowed = service_account_token(api, names["allowed"])
        rbac.create_cluster_role({"metadata": {"name": "numa-test-metrics-reader"},
                                  "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
        rbac.create_cluster_role_binding({
            "metadata": {"name": "numa-test-metrics-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "numa-test-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": names["allowed"], "namespace": "default"}]})
        # test bed readiness: the API server's RBAC cache has the new binding
        wait("the grant in force", lambda: may_get_metrics("system:serviceaccount:default:%s" % names["allowed"]),
             timeout=60, interval=2)
        assert not may_get_metrics("system:serviceaccount:default:%s" % names["denied"])
        for node, address in sorted(NODES.items()):
            status, _challenge, body = guest_request(host, "https://%s:9201/metrics" % address, token=denied)
            print("%s without the grant: %s %s" % (node, status, body.strip()))
            assert status == 403, (node, body)
            assert "system:serviceaccount:default:%s may not get /metrics" % names["denied"] in body
            assert "numa_node" not in body
            status, _challenge, body = guest_request(host, "https://%s:9201/metrics" % address, token=allowed)
            assert status == 200 and "numa_node_cpus_count{" in body, (node, status, body[:300])
    finally:
        for delete, name in ((rbac.delete_cluster_role_binding, "numa-test-metrics-reader"),
                             (rbac.delete_cluster_role, "numa-test-metrics-reader")):
            try:
                delete(name)
            except kubernetes.client.ApiException:
                pass
        for name in names.values():
            try:
                api.delete_namespaced_service_account(name, "default")
            except kubernetes.client.ApiException:
                pass


def test_the_exporter_may_list_pods_and_review_tokens_only(api):
    """Its ClusterRole as the module made it, and the API server's own word on what it may do."""
    role = kubernetes.client.RbacAuthorizationV1Api().read_cluster_role("numa.kube:numa-exporter")
    assert sorted((tuple(r.api_groups), tuple(r.resources), tuple(r.verbs)) for r in role.rules) == [
        (("",), ("pods",), ("list",)), (("authentication.k8s.io",), ("tokenreviews",), ("create",)),
        (("authorization.k8s.io",), ("subjectaccessreviews",), ("create",))]
    user = "system:serviceaccount:%s:numa-exporter" % NAMESPACE

    def may(verb, resource, group=""):
        review = kubernetes.client.AuthorizationV1Api().create_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:serviceaccounts:%s" % NAMESPACE,
                                              "system:authenticated"],
                     "resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                                            "namespace": "default"}}})
        return review.status.allowed

    assert may("list", "pods") and not may("get", "pods") and not may("watch", "pods")
    assert may("create", "tokenreviews", "authentication.k8s.io")
    assert not may("get", "secrets") and not may("list", "nodes")
    daemonset = kubernetes.client.AppsV1Api().read_namespaced_daemon_set("numa-exporter", NAMESPACE)
    host_paths = sorted(v.host_path.path for v in daemonset.spec.template.spec.volumes if v.host_path)
    assert host_paths == ["/sys/bus/pci/devices", "/sys/devices", "/sys/fs/cgroup", "/var/lib/kubelet/pod-resources"]


def test_the_guides_query_answers(prometheus):
    result = instant(prometheus, "numa_node_cpus_count")
    found = dict(((r["metric"]["node"], r["metric"]["numa_node"]), r["value"][1]) for r in result)
    assert found == {("numa-kubelet", "0"): "2", ("numa-kubelet", "1"): "2", ("numa-uneven", "0"): "2",
                     ("numa-uneven", "1"): "1", ("numa-uneven", "2"): "1", ("numa-uneven", "3"): "0"}, found


def test_a_pinned_pod_shows_its_cpus_and_memory_on_its_numa_node(host, api, prometheus):
    """A Guaranteed pod on numa-kubelet (static CPU manager, single-numa-node, Static memory
    manager) writes 48 MiB into its tmpfs: Prometheus shows its exclusive CPU, its assigned memory
    and where its pages are, all on the NUMA node kubelet gave it; and while it runs, every panel of
    the dashboard returns data (the per-pod ones need such a pod: a separate test after this one
    depended on its series not yet being marked stale)."""
    name = "numa-pinned-monitored"
    limits = {"cpu": "1", "memory": "128Mi"}
    script = ("dd if=/dev/zero of=/dev/shm/fill bs=1M count=48 2>/dev/null; echo cpus=$(cat "
              "/sys/fs/cgroup/cpuset.cpus.effective) mems=$(cat /sys/fs/cgroup/cpuset.mems.effective); sleep 3600")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": "numa-kubelet"}, "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1, "restartPolicy": "Never",
        "containers": [{"name": "app", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                        "command": ["sh", "-c", script], "resources": {"requests": limits, "limits": limits}}]}}
    api.create_namespaced_pod("default", pod)
    try:
        def report():
            if api.read_namespaced_pod(name, "default").status.phase != "Running":
                return None
            text = api.read_namespaced_pod_log(name, "default")
            return text if "mems=" in text else None

        log = wait("the pod's report", report, timeout=300, interval=2)
        got = dict(field.split("=", 1) for field in log.split())
        numa, cpus = got["mems"], cpu_list(got["cpus"])
        print("pinned pod: cpus=%s mems=%s" % (sorted(cpus), numa))
        assert len(cpus) == 1 and numa in ("0", "1"), got
        other = "1" if numa == "0" else "0"
        who = 'namespace="default",pod="%s",container="app"' % name

        def seen():
            cpus_seen = instant(prometheus, "numa_container_cpus_exclusive{%s}" % who)
            memory = instant(prometheus, "numa_container_memory_bytes{%s,type=\"file\"}" % who)
            assigned = instant(prometheus, "numa_container_memory_assigned_bytes{%s}" % who)
            return (cpus_seen, memory, assigned) if cpus_seen and len(memory) == 2 and assigned else None

        cpus_seen, memory, assigned = wait("Prometheus has scraped the pod", seen, timeout=180, interval=5)
        # The scrape seen first may have run while dd was still writing (the series exist from the
        # container's start), so read the page counts from a scrape taken after that first answer.
        stamp = 'timestamp(numa_container_memory_bytes{%s,type="file"})' % who
        first = max(float(r["value"][1]) for r in instant(prometheus, stamp))

        def scraped_again():
            rows = instant(prometheus, "numa_container_memory_bytes{%s,type=\"file\"} and on(numa_node) %s > %r" % (
                who, stamp, first))
            return rows if len(rows) == 2 else None

        memory = wait("a scrape after the pod's report", scraped_again, timeout=180, interval=5)
        assert [(r["metric"]["numa_node"], r["value"][1]) for r in cpus_seen] == [(numa, "1")]
        assert [(r["metric"]["numa_node"], r["metric"]["resource"], r["value"][1]) for r in assigned] == [
            (numa, "memory", str(128 * 2 ** 20))]
        pages = dict((r["metric"]["numa_node"], float(r["value"][1])) for r in memory)
        print("pinned pod's file pages per NUMA node: %s" % pages)
        assert pages[numa] >= 40 * 2 ** 20, pages
        assert pages[other] < 4 * 2 ** 20, pages
        node_level = instant(prometheus, 'numa_node_cpus_exclusive{node="numa-kubelet",numa_node="%s"}' % numa)
        assert float(node_level[0]["value"][1]) >= 1
        # every dashboard panel answers while a pinned pod runs (the per-pod panels need one)
        empty = empty_panels(prometheus)
        assert not empty, empty
    finally:
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_the_alert_rules_load(prometheus):
    groups = wait("the rules loaded", lambda: [g for g in prometheus("/api/v1/rules")["groups"]
                                               if g["name"] == "numa.kube.numa-exporter"], timeout=180, interval=5)
    rules = groups[0]["rules"]
    assert sorted(r["name"] for r in rules) == ["NumaExporterDown", "NumaHugePagesExhaustedOnOneNode",
                                                "NumaNodeMemoryNearlyExhausted", "NumaNodeMissRatioHigh"]
    assert all(r["health"] == "ok" for r in rules), rules
    down = [r for r in rules if r["name"] == "NumaExporterDown"][0]
    assert down["state"] == "inactive", down


def empty_panels(prometheus):
    """The dashboard's panels (title, query) that return no data now."""
    with open(DASHBOARD) as handle:
        panels = [p for p in json.load(handle)["panels"] if p["type"] != "row"]
    empty = []
    for panel in panels:
        for target in panel["targets"]:
            expr = target["expr"].replace("$node", ".*").replace("$__rate_interval", "2m")
            if not instant(prometheus, expr):
                empty.append((panel["title"], expr))
    return empty


def due_certificates(days_left=10):
    """A CA and a certificate for the Service ending in ``days_left`` days: what the module renews."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(days=800), now + datetime.timedelta(days=days_left)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "numa-test old CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True).sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVICE)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(SERVICE)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = {"ca.crt": ca.public_bytes(serialization.Encoding.PEM),
           "tls.crt": leaf.public_bytes(serialization.Encoding.PEM),
           "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())}
    return dict((name, base64.b64encode(value).decode()) for name, value in pem.items())


def bundle_names(api):
    """The subjects of the CAs in the Secret's ca.crt, in order, and its annotations."""
    secret = api.read_namespaced_secret(SECRET, NAMESPACE)
    text = base64.b64decode(secret.data["ca.crt"]).decode()
    blocks = [b + "-----END CERTIFICATE-----\n" for b in text.split("-----END CERTIFICATE-----") if "BEGIN" in b]
    names = [x509.load_pem_x509_certificate(b.strip().encode()).subject.rfc4514_string() for b in blocks]
    return names, secret.metadata.annotations or {}


def test_a_ca_rotation_keeps_the_old_ca_until_every_exporter_serves_the_new_certificate(host, api, prometheus):
    """A certificate within 30 days of its end (put in place here, as time would) is renewed with a
    new CA; the old CA stays in ca.crt while the run waits for every exporter to serve the new
    certificate (kubelet updates their Secret volume, the exporters read the files again); the next
    run takes the old CA out; Prometheus scrapes every exporter with the bundle that is left."""
    dashboard = json.load(open(DASHBOARD))
    api.patch_namespaced_secret(SECRET, NAMESPACE, {"data": due_certificates()})
    renewed = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=dashboard))
    assert not renewed.get("failed"), renewed.get("msg", renewed)
    print("renewal: %s" % renewed["tls"])
    assert renewed["tls"].startswith("Secret %s/%s renewed (its tls.crt ends on " % (NAMESPACE, SECRET))
    assert renewed["tls"].endswith("its old CA stays in ca.crt until every exporter serves the new certificate")
    assert renewed["nodes"] == dict((node, "serving") for node in NODES), "each serves the new certificate"
    names, annotations = bundle_names(api)
    assert len(names) == 2 and names[1] == "CN=numa-test old CA", names
    assert names[0].startswith("CN=numa.kube numa-exporter CA"), names
    assert "numa.kube/ca-rotation-started" in annotations
    secret = api.read_namespaced_secret(SECRET, NAMESPACE)
    current = hashlib.sha256(ssl.PEM_cert_to_DER_cert(base64.b64decode(secret.data["tls.crt"]).decode())).hexdigest()
    for node, address in sorted(NODES.items()):
        assert guest_request(host, "https://%s:9201/healthz" % address)[2].endswith(current + "\n"), node

    trimmed = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=dashboard))
    assert not trimmed.get("failed"), trimmed.get("msg", trimmed)
    print("next run: %s" % trimmed["tls"])
    assert trimmed["tls"].endswith("; the old CA left ca.crt (every exporter serves the new certificate)")
    assert [o["object"] for o in trimmed["objects"] if o["changed"]] == ["Secret %s/%s" % (NAMESPACE, SECRET)]
    names, annotations = bundle_names(api)
    assert len(names) == 1 and names[0].startswith("CN=numa.kube numa-exporter CA")
    assert "numa.kube/ca-rotation-started" not in annotations

    since = time.time()
    # test bed readiness: the operator copies the new ca.crt for Prometheus and kubelet updates its volume
    wait("a good scrape of every exporter after the rotation", lambda: len(prometheus(
        "/api/v1/query", query='timestamp(up{job="numa-exporter"} == 1) > %f' % since)["result"]) == len(NODES),
        timeout=300, interval=5)


def exporter_pods(api):
    """The exporter's pods that are not being deleted."""
    pods = api.list_namespaced_pod(NAMESPACE, label_selector="app=numa-exporter").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def test_a_second_run_changes_nothing_and_check_mode_previews():
    dashboard = json.load(open(DASHBOARD))
    result = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=dashboard))
    assert not result.get("failed"), result.get("msg", result)
    assert result["changed"] is False, [o for o in result["objects"] if o["changed"]]
    assert result["nodes"] == dict((node, "serving") for node in NODES)
    preview = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=dashboard, interval="15s"),
                         check=True, diff=True)
    assert not preview.get("failed"), preview.get("msg", preview)
    assert [o["object"] for o in preview["objects"] if o["changed"]] == ["ServiceMonitor %s/numa-exporter" % NAMESPACE]


@pytest.mark.last_in_file
def test_an_image_change_rolls_out_under_max_unavailable_and_the_module_waits_for_it(host, api):
    """A new image (a second tag of the agent's image, made in each guest's containerd: images are
    never pulled here) rolls out under the default max_unavailable "10%" (rounded up: one node of
    two at a time, so two waves); the module returns only once every node runs a ready pod of the
    new image, which the pods read right after it returns show. The file's last test (the mark says
    so: pytest would run the tests without ``host`` after it): the pods keep the second tag (the same
    image's bytes), which no later test reads, so no second rollout puts the first one back (it cost
    70-100 s of the scenario)."""
    original, second = MODULE_ARGS["image"], MODULE_ARGS["image"].rsplit(":", 1)[0] + ":rollout"
    uneven = testinfra.get_host("ansible://numa-uneven", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    guests = (host, uneven)
    for guest in guests:
        guest.run_expect([0], "ctr -n k8s.io images tag --force %s %s" % (original, second))
    dashboard = json.load(open(DASHBOARD))
    apps = kubernetes.client.AppsV1Api()
    started = time.time()
    result = run_module("numa.kube.numa_monitoring", dict(MODULE_ARGS, dashboard=dashboard, image=second))
    returned = time.time()
    assert not result.get("failed"), result.get("msg", result)
    assert [o["object"] for o in result["objects"] if o["changed"]] == ["DaemonSet %s/numa-exporter" % NAMESPACE]
    pods = exporter_pods(api)
    assert sorted(p.spec.node_name for p in pods) == sorted(NODES), [p.metadata.name for p in pods]
    for pod in pods:
        assert pod.spec.containers[0].image == second, (pod.metadata.name, pod.spec.containers[0].image)
        assert pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or []), \
            (pod.metadata.name, pod.status)
    daemonset = apps.read_namespaced_daemon_set("numa-exporter", NAMESPACE)
    assert daemonset.spec.update_strategy.rolling_update.max_unavailable == "10%"
    status = daemonset.status
    assert status.observed_generation == daemonset.metadata.generation
    assert status.updated_number_scheduled == status.number_available == status.desired_number_scheduled == 2
    print("image change on %d nodes, one at a time: the module returned %.1f s after it started (rollout %.1f s)"
          % (len(NODES), returned - started, result["rollout_seconds"]))
