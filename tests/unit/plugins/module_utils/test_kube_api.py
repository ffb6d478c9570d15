# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths, diffs and waiting of the cluster-stack modules' API layer (its requests run against the
real API server of the cluster scenario)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kube_api import (
    KubeApi,
    KubeApiError,
    comparable,
    describe,
    object_path,
    path_of,
    wait_for,
)


def test_paths_of_core_and_group_kinds():
    assert object_path("v1", "Node", "w1") == "/api/v1/nodes/w1"
    assert object_path("v1", "ConfigMap", "c", "ns") == "/api/v1/namespaces/ns/configmaps/c"
    assert object_path("apps/v1", "DaemonSet", namespace="ns") == "/apis/apps/v1/namespaces/ns/daemonsets"
    assert path_of({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                    "metadata": {"name": "m", "namespace": "mon"}}) == \
        "/apis/monitoring.coreos.com/v1/namespaces/mon/servicemonitors/m"
    with pytest.raises(KubeApiError, match="does not manage v1 Widget"):
        object_path("v1", "Widget", "w")
    with pytest.raises(KubeApiError, match="needs a namespace"):
        object_path("v1", "Secret", "s")


def test_comparable_drops_server_bookkeeping_and_hides_secrets():
    meta = {"name": "s", "namespace": "n", "uid": "u", "resourceVersion": "9", "managedFields": [{}],
            "labels": {"a": "b"}}
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "data": {"tls.crt": "c2VjcmV0"}, "status": {}}
    assert comparable(live) == {"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "s", "namespace": "n", "labels": {"a": "b"}},
                                "data": {"tls.crt": "(hidden)"}}
    assert live["data"]["tls.crt"] == "c2VjcmV0", "the live object is left alone"
    assert comparable(None) == {}
    assert describe(live) == "Secret n/s"
    assert describe({"kind": "Node", "metadata": {"name": "w1"}}) == "Node w1"


def test_wait_for_returns_as_soon_as_done_or_after_the_timeout():
    now = [0.0]
    answers = iter([(False, 1), (False, 2), (True, 3)])
    assert wait_for(lambda: next(answers), 60, interval=5, clock=lambda: now[0],
                    sleep=lambda s: now.__setitem__(0, now[0] + s)) == (True, 3, 10.0)
    now[0] = 0.0
    assert wait_for(lambda: (False, "x"), 12, interval=5, clock=lambda: now[0],
                    sleep=lambda s: now.__setitem__(0, now[0] + s)) == (False, "x", 12.0)


def test_credentials_that_cannot_load_are_named(tmp_path):
    with pytest.raises(KubeApiError, match="cannot load the cluster's credentials .kubeconfig .*missing"):
        KubeApi({"kubeconfig": str(tmp_path / "missing")})


def test_a_server_that_does_not_answer_is_named(tmp_path):
    api = KubeApi({"host": "https://127.0.0.1:9", "api_key": "t", "validate_certs": False})
    with pytest.raises(KubeApiError, match=r"GET /api/v1/nodes on https://127.0.0.1:9"):
        api.nodes()


@pytest.fixture
def http_api():
    """A KubeApi whose requests go through the real kubernetes client to a loopback HTTP server
    answering ``routes`` (path -> (status, body) or a list of (status, body, headers) given in
    turn, the last one repeated); ``hits`` lists each request's method and path."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    routes, hits = {}, []

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            path = self.path.split("?")[0]
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.append((self.command, path))
            route = routes.get(path, (404, json.dumps({"kind": "Status", "code": 404})))
            if isinstance(route, list):
                route = route.pop(0) if len(route) > 1 else route[0]
            status, body, headers = (tuple(route) + ({},))[:3]
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_DELETE = answer

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        api = KubeApi({"host": "http://127.0.0.1:%d" % server.server_port, "api_key": "t"})
        api.sleep = lambda seconds: None
        yield api, routes, hits
    finally:
        server.shutdown()
        server.server_close()


def test_answers_without_a_kind_are_decoded(http_api):
    # kubelet's /configz answers {"kubeletconfig": ...} with no kind: the client's own decoding fails on it
    api, routes = http_api[:2]
    routes["/api/v1/nodes/w1/proxy/configz"] = (200, '{"kubeletconfig": {"cpuManagerPolicy": "static"}}')
    assert api.kubelet_config("w1") == {"cpuManagerPolicy": "static"}
    routes["/api/v1/nodes/w2/proxy/configz"] = (200, '{"status": "odd"}')
    with pytest.raises(KubeApiError, match="w2 answered /configz without a kubeletconfig"):
        api.kubelet_config("w2")


def test_text_answers_stay_text_and_missing_objects_are_none(http_api):
    api, routes = http_api[:2]
    routes["/api/v1/namespaces/ns/pods/p/log"] = (200, '{"looks": "like json"}\n')
    assert api.request("GET", "/api/v1/namespaces/ns/pods/p/log", text=True) == '{"looks": "like json"}\n'
    assert api.get("/api/v1/namespaces/ns/pods/gone") is None
    routes["/api/v1/nodes"] = (500, '{"kind": "Status", "message": "etcd is down"}')
    with pytest.raises(KubeApiError, match="GET /api/v1/nodes: 500"):
        api.nodes()
    routes["/metrics"] = (200, "# HELP x\nx 1\n")
    with pytest.raises(KubeApiError, match="the answer is not JSON"):
        api.get("/metrics")


BUSY = (429, '{"kind": "Status", "message": "too many requests, please try again later"}', {"Retry-After": "1"})
NODE = (200, '{"kind": "Node", "metadata": {"name": "w1", "resourceVersion": "7"}}')


def test_a_busy_server_is_asked_again_after_its_retry_after_for_every_verb(http_api):
    # client-go's rule (rest/with_retry.go): 429 or 5xx with Retry-After, any verb, 10 retries
    api, routes, hits = http_api
    waits = []
    api.sleep = waits.append
    routes["/api/v1/nodes/w1"] = [BUSY, (503, "{}", {"Retry-After": "2"}), NODE]
    assert api.get("/api/v1/nodes/w1")["metadata"]["name"] == "w1"
    assert hits == [("GET", "/api/v1/nodes/w1")] * 3 and waits == [1.0, 2.0]
    del hits[:]
    routes["/api/v1/nodes/w1"] = [NODE, BUSY, (200, NODE[1].replace('"7"', '"8"'))]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"}}
    assert api.apply(node)[0] is True
    assert hits == [("GET", "/api/v1/nodes/w1")] + [("PATCH", "/api/v1/nodes/w1")] * 2
    del hits[:]
    routes["/api/v1/nodes/w1"] = [NODE, (504, "{}", {"Retry-After": "0"}), (200, "{}")]
    assert api.delete(node) == (True, {"kind": "Node", "metadata": {"name": "w1"}})
    assert hits == [("GET", "/api/v1/nodes/w1")] + [("DELETE", "/api/v1/nodes/w1")] * 2


def test_answers_without_retry_after_are_final_and_retries_end(http_api):
    api, routes, hits = http_api
    routes["/api/v1/nodes"] = [(500, '{"kind": "Status", "message": "etcd is down"}'), (200, '{"items": []}')]
    with pytest.raises(KubeApiError, match=r"GET /api/v1/nodes: 500 etcd is down$"):
        api.nodes()
    routes["/api/v1/nodes/w1"] = [(409, '{"message": "conflict"}', {"Retry-After": "1"}), NODE]
    with pytest.raises(KubeApiError, match="409 conflict$"):
        api.get("/api/v1/nodes/w1")
    assert len(hits) == 2, "a 500 without Retry-After and a 409 are not asked again"
    del hits[:]
    routes["/api/v1/nodes/w2"] = [BUSY]
    exhausted = r"429 too many requests, please try again later \(the same after 10 retries\)"
    with pytest.raises(KubeApiError, match=exhausted):
        api.get("/api/v1/nodes/w2")
    assert len(hits) == 11
