# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet benchmark's API stand-in answers as the modules expect (pages, rollouts, proofs), so
that its figures count what a real API server would be asked. Behaviour only, never time."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import sys

import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench_fleet.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fleet", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get(fleet, target, accept=None):
    status, data = fleet.answer("GET", target, b"", accept)
    return status, json.loads(data) if data[:1] == b"{" else data.decode()


def test_node_lists_come_in_pages_that_cover_every_node_once(bench):
    fleet = bench.Fleet(7, bench.VirtualClock())
    seen, token, pages = [], "", 0
    while True:
        status, answer = get(fleet, "/api/v1/nodes?limit=3&labelSelector=numa.kube%%2Faligned%%3Dtrue%s"
                             % ("&continue=" + token if token else ""))
        assert status == 200
        seen += [item["metadata"]["name"] for item in answer["items"]]
        pages += 1
        token = answer["metadata"].get("continue")
        if not token:
            break
        assert answer["metadata"]["remainingItemCount"] == 7 - len(seen)
    assert pages == 3 and seen == ["node-%04d" % n for n in range(7)]
    assert get(fleet, "/api/v1/nodes?labelSelector=numa.kube%2Faligned%3Dfalse")[1]["items"] == []
    assert fleet.requests == 4 and fleet.kinds == {"list": 4}


def apply_daemonset(fleet, image, max_unavailable=1, program="device-plugin"):
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": max_unavailable}},
                     "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {
                         "containers": [{"name": "c", "image": image, "args": [program]}]}}}}
    return fleet.answer("PATCH", "/apis/apps/v1/namespaces/kube-system/daemonsets/ds", json.dumps(body).encode(), None)


def test_a_daemonset_rolls_out_as_the_virtual_clock_moves_and_a_late_node_holds_it(bench):
    clock = bench.VirtualClock()
    fleet = bench.Fleet(4, clock, late_pods=["node-0002"])
    assert apply_daemonset(fleet, "a:1")[0] == 201
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/ds"
    assert get(fleet, path)[1]["status"]["numberAvailable"] == 0
    clock.sleep(bench.STARTUP + 3)
    status = get(fleet, path)[1]["status"]
    assert status["numberAvailable"] == 3 and status["desiredNumberScheduled"] == 4
    # the plugin's resources show on the nodes whose pod runs, not on the late one
    assert "numa-align/numa-0" in get(fleet, "/api/v1/nodes/node-0001")[1]["status"]["allocatable"]
    assert "numa-align/numa-0" not in get(fleet, "/api/v1/nodes/node-0002")[1]["status"]["allocatable"]
    clock.sleep(bench.LATE_SECONDS)
    assert get(fleet, path)[1]["status"]["numberAvailable"] == 4
    # each sleep ended a round, with the requests sent before it
    assert [count for _moment, count in clock.rounds] == [2, 5]


def test_an_update_replaces_pods_max_unavailable_at_a_time(bench):
    clock = bench.VirtualClock()
    fleet = bench.Fleet(5, clock)
    apply_daemonset(fleet, "a:1", "30%")
    clock.sleep(60)
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/ds"
    # the same apply again changes nothing
    assert apply_daemonset(fleet, "a:1", "30%")[1] == json.dumps(get(fleet, path)[1], separators=(",", ":")).encode()
    apply_daemonset(fleet, "a:2", "30%")  # 30 % of 5 rounds up to 2 pods at a time
    seen = []
    for _step in range(4):
        status = get(fleet, path)[1]["status"]
        seen.append((status["updatedNumberScheduled"], status["numberAvailable"]))
        clock.sleep(bench.UPDATE_SECONDS)
    assert seen == [(2, 3), (4, 3), (5, 4), (5, 5)]
    assert get(fleet, path)[1]["metadata"]["generation"] == 2


def test_proofs_follow_the_pods_or_come_late(bench):
    clock = bench.VirtualClock()
    fleet = bench.Fleet(3, clock, late_proofs=["node-0001"])
    apply_daemonset(fleet, "a:1", program="topology-publisher")
    clock.sleep(bench.STARTUP + 3)
    listed = get(fleet, "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies",
                 "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")[1]
    assert listed["kind"] == "PartialObjectMetadataList"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["node-0000", "node-0002"]
    assert "spec" not in listed["items"][0]
    assert get(fleet, "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies/node-0001")[0] == 404
    clock.sleep(bench.LATE_SECONDS)
    assert get(fleet, "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies/node-0001")[0] == 200


def test_pods_carry_their_template_generation_and_come_in_pages(bench):
    # wait_daemonset proves a rollout pod by pod by the controller's pod-template-generation label
    # against the DaemonSet's annotation: without them every node would look pending
    clock = bench.VirtualClock()
    fleet = bench.Fleet(3, clock)
    apply_daemonset(fleet, "a:1")
    clock.sleep(60)
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/ds"
    assert get(fleet, path)[1]["metadata"]["annotations"][bench.TEMPLATE_GENERATION] == "1"
    apply_daemonset(fleet, "a:1")  # the same template: the annotation stays
    apply_daemonset(fleet, "a:2")
    assert get(fleet, path)[1]["metadata"]["annotations"][bench.TEMPLATE_GENERATION] == "2"
    page = get(fleet, "/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dds&limit=2")[1]
    assert page["metadata"]["continue"] and len(page["items"]) == 2
    # the first node's pod is being replaced (new template, not ready), the others still run the old one
    seen = [(pod["metadata"]["labels"][bench.POD_TEMPLATE_GENERATION], pod["status"]["conditions"][0]["status"])
            for pod in page["items"]]
    assert seen == [("2", "False"), ("1", "True")]


def test_node_resource_topologies_are_served_once_their_crd_is_and_stay_through_an_update(bench):
    bench.importable()
    from ansible_collections.numa.kube.plugins.module_utils.numa import nrt as noderesourcetopology

    clock = bench.VirtualClock()
    fleet = bench.Fleet(2, clock, late_proofs=["node-0001"])
    assert get(fleet, bench.NRT_PATH)[0] == 404  # no CRD yet
    with open(bench.nrt_crd_file()) as handle:
        crd = json.load(handle)
    fleet.answer("PATCH", bench.CRDS + crd["metadata"]["name"], json.dumps(crd).encode(), None)
    status = get(fleet, bench.CRDS + crd["metadata"]["name"])[1]["status"]
    assert {"type": "Established", "status": "False"}.items() <= status["conditions"][1].items()
    clock.sleep(bench.CRD_ESTABLISHING)
    assert get(fleet, bench.NRT_PATH)[1]["items"] == []
    apply_daemonset(fleet, "a:1", program="nrt-publisher")
    clock.sleep(bench.STARTUP + 3)
    assert get(fleet, bench.NRT_PATH + "/node-0001")[0] == 404  # its proof is late
    found = get(fleet, bench.NRT_PATH + "/node-0000")[1]
    # the publisher's own object, as the module's ownership test reads it
    assert noderesourcetopology.is_ours(found) and found["metadata"]["labels"]["numa.kube/stack"] == "topology"
    clock.sleep(bench.LATE_SECONDS)
    apply_daemonset(fleet, "a:2", program="nrt-publisher")
    # while the new pods replace the old ones, the objects the old ones wrote are still there
    listed = get(fleet, bench.NRT_PATH, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")[1]
    assert [item["metadata"]["name"] for item in listed["items"]] == ["node-0000", "node-0001"]


def test_the_scheduler_deployment_is_replaced_whole(bench):
    clock = bench.VirtualClock()
    fleet = bench.Fleet(1, clock)
    path = "/apis/apps/v1/namespaces/kube-system/deployments/sched"

    def apply(image):
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "sched", "namespace": "kube-system"},
                "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "template": {
                    "metadata": {"labels": {"app": "sched"}}, "spec": {"containers": [{"name": "s", "image": image}]}}}}
        fleet.answer("PATCH", path, json.dumps(body).encode(), None)
        return get(fleet, path)[1]["status"].get("availableReplicas", 0)

    assert apply("s:1") == 0
    clock.sleep(bench.SCHEDULER_STARTUP)
    assert get(fleet, path)[1]["status"]["availableReplicas"] == 1
    assert apply("s:2") == 0 and get(fleet, path)[1]["status"]["observedGeneration"] == 2
    clock.sleep(bench.UPDATE_SECONDS)
    assert get(fleet, path)[1]["status"]["availableReplicas"] == 1


def test_the_plugin_module_runs_to_the_end_against_the_stand_in(bench):
    bench.importable()
    clock = bench.VirtualClock()
    fleet = bench.Fleet(3, clock)
    server = bench.serve(fleet)
    try:
        name, args, program = bench.MODULES[0]
        figures = bench.measure(name, args, program, fleet, "http://127.0.0.1:%d" % server.server_port)
    finally:
        server.shutdown()
        server.server_close()
    assert not figures["failed"], figures["message"]
    # every node's kubelet asked once, the objects applied, the rollout waited for on the virtual clock
    assert fleet.kinds["proxy"] == 3 and fleet.kinds["write"] >= 3
    assert figures["rounds"] >= 1 and figures["virtual"] >= bench.STARTUP
    assert figures["requests"] == fleet.requests and figures["sent"] > 0


@pytest.mark.parametrize("index", [1, 2, 3], ids=["numa_monitoring", "volcano_stack", "topology_scheduler"])
def test_the_other_modules_finish_against_the_stand_in_with_a_few_requests(bench, index):
    # a stand-in a module cannot finish against prints failures as figures: each module must end ok
    # here (numa_monitoring's proof needs the exporter's own 401 through the proxy, for one)
    bench.importable()
    clock = bench.VirtualClock()
    fleet = bench.Fleet(3, clock)
    server = bench.serve(fleet)
    try:
        name, args, program = bench.MODULES[index]
        figures = bench.measure(name, args, program, fleet, "http://127.0.0.1:%d" % server.server_port)
    finally:
        server.shutdown()
        server.server_close()
    assert not figures["failed"], figures["message"]
    assert fleet.kinds["write"] >= 2 and figures["virtual"] >= bench.STARTUP
    # a healthy rollout of 3 nodes is over in a few rounds, not a stalled wait's 150
    assert figures["rounds"] <= 10, figures


def test_importable_takes_its_own_link_again_and_refuses_one_to_elsewhere(bench, tmp_path, monkeypatch):
    """Runs side by side find the link another made and use it; a link there to another tree is
    refused by name instead of going first on sys.path."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    bench.importable()
    bench.importable()  # the link is there already
    [lib] = [path for path in tmp_path.iterdir() if path.name.startswith("numa-kube-bench-")]
    link = lib / "ansible_collections" / "numa" / "kube"
    assert os.path.realpath(str(link)) == os.path.realpath(bench.ROOT)
    link.unlink()
    link.symlink_to(tmp_path)
    with pytest.raises(SystemExit, match="is not this user's link"):
        bench.importable()
