# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's exporter: one look at the cgroup tree per scrape, shared by the names and the locality."""

from __future__ import absolute_import, division, print_function

import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent import __main__ as agent  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent import authn, exporter, pods  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.kube import Client  # noqa: E402 pylint: disable=wrong-import-position

from numa_agent.metrics import server as metrics_server  # noqa: E402
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring  # noqa: E402
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring_objects
from numa_agent.metrics import locality as numa_metrics_locality  # noqa: E402
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved  # noqa: E402

CID = "ab" * 32

# these tests time real threads, sockets or processes: they run in the foreground (tools/run-tiers timed)
pytestmark = pytest.mark.wall_clock


class Names(object):
    def __init__(self):
        self.asked = []

    def lookup(self, container_ids):
        self.asked.append(sorted(container_ids))
        return {CID: ("prod", "db-0", "db")}


class Kubelet(object):
    def assigned(self, timeout=None):
        return [{"namespace": "prod", "name": "db-0", "containers": [{"name": "db", "cpu_ids": [2], "memory": [],
                                                                      "devices": []}]}]

    def allocatable(self, timeout=None):
        return {"cpu_ids": [1, 2, 3], "memory": []}


class SlowKubelet(Kubelet):
    """A kubelet that answers only after ``delay`` seconds: a call gives up at its timeout (5 s, the
    PodResources default, unless the caller gives one) with the error gRPC raises then."""

    def __init__(self, delay):
        self.delay, self.timeouts = delay, []

    def _answer(self, timeout, value):
        timeout = 5.0 if timeout is None else timeout
        self.timeouts.append(timeout)
        time.sleep(min(self.delay, timeout))
        if self.delay > timeout:
            raise Deadline()
        return value

    def assigned(self, timeout=None):
        return self._answer(timeout, Kubelet.assigned(self))

    def allocatable(self, timeout=None):
        return self._answer(timeout, Kubelet.allocatable(self))


class Deadline(Exception):
    def code(self):
        return "DEADLINE_EXCEEDED"


def exporter_for(tmp_path, *options):
    folder = tmp_path / "cgroup" / "kubepods" / ("pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0") / CID
    folder.mkdir(parents=True)
    (folder / "memory.numa_stat").write_text("anon N0=4096 N1=0\nfile N0=0 N1=0\n")
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    args = agent.parse_args(["exporter", "--sysfs", sys_root, "--cgroup-root", str(tmp_path / "cgroup"),
                             "--pod-resources-socket=", "--authentication=none"] + list(options))
    made = exporter.Exporter(args)
    made.pod_resources, made.pod_names = Kubelet(), Names()
    return made


def test_each_scrape_looks_at_the_tree_once_and_names_what_it_found(tmp_path, monkeypatch):
    made = exporter_for(tmp_path)
    walks = []
    real_walk = numa_metrics_locality.walk
    monkeypatch.setattr(numa_metrics_locality, "walk", lambda root: walks.append(root) or real_walk(root))
    for _scrape in range(2):
        text = made.render()
    assert len(walks) == 1, "the names and the locality share the scrape's map (and it is kept)"
    assert made.pod_names.asked == [[CID], [CID]]
    assert 'numa_container_memory_bytes{namespace="prod",pod="db-0",container="db",numa_node="0",type="anon"} 4096' \
        in text
    assert "numa_exporter_pod_resources_up 1" in text


def test_containers_none_reads_no_tree_and_asks_for_no_names(tmp_path):
    made = exporter_for(tmp_path, "--containers", "none")
    text = made.render()
    assert made.pod_names.asked == [] and "numa_container_" not in text
    assert 'numa_node_cpus_exclusive{numa_node="0"} 1' in text


# Prometheus' scrape timeout when the ServiceMonitor sets none (monitoring_objects.service_monitor sets none)
SCRAPE_TIMEOUT = 10.0


def test_the_waits_of_a_scrape_add_up_to_well_inside_the_scrape_timeout():
    """What a scrape may wait for besides the node's own files: the token's review, kubelet's
    PodResources, the pod list. A guest three times slower still has room for the files."""
    assert "scrapeTimeout" not in monitoring_objects.service_monitor({
        "name": "numa-exporter", "namespace": "monitoring", "interval": "30s",
        "exporter_authentication": True})["spec"]["endpoints"][0]
    review = agent.parse_args(["exporter"]).review_timeout
    names = pods.PodNames("w1", client=Client("https://api.example")).wait
    waits = (review, exporter.KUBELET_SECONDS, names)
    assert sum(waits) <= 0.75 * SCRAPE_TIMEOUT, waits


def test_a_slow_kubelet_costs_the_scrape_at_most_its_share(tmp_path, monkeypatch):
    monkeypatch.setattr(exporter, "KUBELET_SECONDS", 0.3, raising=False)
    made = exporter_for(tmp_path)
    made.rpc_error = Deadline
    made.pod_resources = SlowKubelet(delay=0.2)  # each call in time, both together not
    started = time.monotonic()
    text = made.render()
    assert time.monotonic() - started < 0.6
    assert "numa_exporter_pod_resources_up 0" in text
    made.pod_resources = SlowKubelet(delay=30)  # a kubelet that does not answer
    started = time.monotonic()
    text = made.render()
    assert time.monotonic() - started < 0.6, made.pod_resources.timeouts
    assert "numa_exporter_pod_resources_up 0" in text and 'numa_node_cpus_count{numa_node="0"}' in text
    made.pod_resources = SlowKubelet(delay=0.01)
    assert "numa_exporter_pod_resources_up 1" in made.render()


class HangingList(pods.PodNames):
    """The API server's pod list, answered once ``gate`` is set."""

    def __init__(self, token_file):
        super(HangingList, self).__init__("w1", client=Client("https://api.example", token_file=token_file), wait=0.2)
        self.gate, self.lists = threading.Event(), 0

    def _list(self):
        self.lists += 1
        self.gate.wait(30)
        return {"items": [{"metadata": {"namespace": "prod", "name": "db-0"},
                           "status": {"containerStatuses": [{"name": "db", "containerID": "containerd://" + CID}]}}]}


def test_a_pod_list_that_hangs_does_not_hold_the_scrape(tmp_path):
    made = exporter_for(tmp_path)
    token = tmp_path / "token"
    token.write_text("t")
    made.pod_names = HangingList(str(token))
    started = time.monotonic()
    text = made.render()
    assert time.monotonic() - started < 1.0
    assert "numa_container_memory_bytes{" not in text, "not named yet: no series rather than a late scrape"
    made.pod_names.gate.set()
    for _attempt in range(100):
        if made.pod_names.listing is None:
            break
        time.sleep(0.02)
    assert 'numa_container_memory_bytes{namespace="prod",pod="db-0",container="db"' in made.render()
    assert made.pod_names.lists == 1


class SlowReviews(object):
    """The API server's reviews, each answered ``delay`` seconds late; ``timeout`` as the client's."""

    def __init__(self, delay, timeout):
        self.delay, self.timeout = delay, timeout

    def usable(self):
        return True

    def request(self, method, path, body=None):
        time.sleep(self.delay)
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": {"username": "prometheus"}}}
        return {"status": {"allowed": True}}


def test_an_https_scrape_answers_in_time_when_everything_it_asks_is_slow(tmp_path, monkeypatch):
    """The whole scrape as Prometheus makes it (a new TLS connection, its bearer token), with the
    reviews, kubelet and the pod list all slower than their shares: the answer (a 503 while the
    review is late, then the metrics) still comes within the sum of the shares, scaled down here
    as in a guest ten times faster than the real budget."""
    monkeypatch.setattr(exporter, "KUBELET_SECONDS", 0.3, raising=False)
    made = exporter_for(tmp_path)
    made.rpc_error = Deadline
    made.pod_resources = SlowKubelet(delay=30)
    token = tmp_path / "token"
    token.write_text("t")
    made.pod_names = HangingList(str(token))
    pem = monitoring.make_certificates(["localhost"])
    for key, value in pem.items():
        (tmp_path / key).write_bytes(value)
    bound, stop, port = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=metrics_server.serve, args=(
        made.render, "127.0.0.1", 0, str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")),
        kwargs=dict(ready=lambda p: (port.append(p), bound.set()), stop=stop,
                    authorize=authn.TokenReviewer(SlowReviews(delay=0.25, timeout=0.4))))
    thread.start()
    assert bound.wait(30)
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    budget = 0.4 + 0.3 + 0.2 + 0.5  # the review, kubelet, the pod list, and the files, TLS and Python

    def scrape():
        request = urllib.request.Request("https://localhost:%d/metrics" % port[0],
                                         headers={"Authorization": "Bearer prometheus-token"})
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:
                status = answer.status
                answer.read()
        except urllib.error.HTTPError as exc:
            status = exc.code
        return status, time.monotonic() - started

    try:
        status, spent = scrape()
        assert status == 503 and spent < budget, (status, spent)
        time.sleep(0.4)  # the review comes in meanwhile, and is kept
        status, spent = scrape()
        assert status == 200 and spent < budget, (status, spent)
    finally:
        made.pod_names.gate.set()
        stop.set()
        thread.join(30)
