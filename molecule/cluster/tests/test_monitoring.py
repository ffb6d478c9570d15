# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA monitoring stack, deployed by site.yml's cluster phase (numa.kube.numa_monitoring) on both
nodes, proven with the real prometheus-operator and a real Prometheus.

prometheus-operator (v0.88.0, built from its Go module; a process on the host, control_plane.py)
turns the module's ServiceMonitor and PrometheusRule into the configuration of the test bed's
Prometheus (Debian's 2.53.3 in a pod the operator runs, resources/kube/prometheus.yaml.j2), which
scrapes each node's exporter over TLS across the guests' LAN. Prometheus' HTTP API is read from
numa-kubelet, which routes to every pod.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import gzip
import json
import os
import sys
import time
import urllib.parse

import kubernetes
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import cpu_list, guest_get, run_module, wait  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KUBECONFIG = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane", "admin.kubeconfig")
DASHBOARD = os.path.join(ROOT, "roles", "numa_monitoring", "files", "numa-dashboard.json")
NAMESPACE = "volcano-system"
JOB = "serviceMonitor/%s/numa-exporter/0" % NAMESPACE
NODES = {"numa-kubelet": "192.168.77.11", "numa-uneven": "192.168.77.12"}
# what converge.yml passes the cluster phase, besides the defaults
MODULE_ARGS = {"kubeconfig": KUBECONFIG, "image": "numa.kube/node-agent:test", "image_pull_policy": "Never",
               "service_monitor_labels": {"release": "numa-test"}, "rule_labels": {"release": "numa-test"}}


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(KUBECONFIG)
    return kubernetes.client.CoreV1Api()


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


def test_the_guides_query_answers(prometheus):
    result = instant(prometheus, "numa_node_cpus_count")
    found = dict(((r["metric"]["node"], r["metric"]["numa_node"]), r["value"][1]) for r in result)
    assert found == {("numa-kubelet", "0"): "2", ("numa-kubelet", "1"): "2", ("numa-uneven", "0"): "2",
                     ("numa-uneven", "1"): "1", ("numa-uneven", "2"): "1", ("numa-uneven", "3"): "0"}, found


def test_a_pinned_pod_shows_its_cpus_and_memory_on_its_numa_node(host, api, prometheus):
    """A Guaranteed pod on numa-kubelet (static CPU manager, single-numa-node, Static memory
    manager) writes 48 MiB into its tmpfs: Prometheus shows its exclusive CPU, its assigned memory
    and where its pages are, all on the NUMA node kubelet gave it."""
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
        assert [(r["metric"]["numa_node"], r["value"][1]) for r in cpus_seen] == [(numa, "1")]
        assert [(r["metric"]["numa_node"], r["metric"]["resource"], r["value"][1]) for r in assigned] == [
            (numa, "memory", str(128 * 2 ** 20))]
        pages = dict((r["metric"]["numa_node"], float(r["value"][1])) for r in memory)
        print("pinned pod's file pages per NUMA node: %s" % pages)
        assert pages[numa] >= 40 * 2 ** 20, pages
        assert pages[other] < 4 * 2 ** 20, pages
        node_level = instant(prometheus, 'numa_node_cpus_exclusive{node="numa-kubelet",numa_node="%s"}' % numa)
        assert float(node_level[0]["value"][1]) >= 1
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


def test_every_dashboard_panel_returns_data(prometheus):
    with open(DASHBOARD) as handle:
        panels = [p for p in json.load(handle)["panels"] if p["type"] != "row"]
    empty = []
    for panel in panels:
        for target in panel["targets"]:
            expr = target["expr"].replace("$node", ".*").replace("$__rate_interval", "2m")
            if not instant(prometheus, expr):
                empty.append((panel["title"], expr))
    assert not empty, empty


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
