# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths, diffs and waiting of the cluster-stack modules' API layer (its requests run against the
real API server of the cluster scenario)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.k8s import runner as k8s_runner
from ansible_collections.numa.kube.plugins.module_utils.k8s.client import KubeApi
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    KubeApiError,
    comparable,
    describe,
    object_path,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import wait_for


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

        do_GET = do_PATCH = do_DELETE = do_POST = answer

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
NODE = (200, '{"kind": "Node", "metadata": {"name": "w1", "resourceVersion": "7", '
        '"labels": {"app.kubernetes.io/managed-by": "numa.kube"}}}')


def test_a_busy_server_is_asked_again_after_its_retry_after_for_every_verb(http_api):
    # client-go's rule (rest/with_retry.go): 429 or 5xx with Retry-After, any verb, 10 retries
    api, routes, hits = http_api
    waits = []
    api.sleep = waits.append
    routes["/api/v1/nodes/w1"] = [BUSY, (503, "{}", {"Retry-After": "2"}), NODE]
    assert api.get("/api/v1/nodes/w1")["metadata"]["name"] == "w1"
    assert hits == [("GET", "/api/v1/nodes/w1")] * 3 and waits == [1.0, 2.0]
    del hits[:]
    routes["/api/v1/nodes/w1"] = [NODE, BUSY, (200, NODE[1].replace('"7"', '"8"').replace('"labels": {', '"labels": {"x": "y", '))]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w1"}}
    assert api.apply(node)[0] is True
    assert hits == [("GET", "/api/v1/nodes/w1")] + [("PATCH", "/api/v1/nodes/w1")] * 2
    del hits[:]
    routes["/api/v1/nodes/w1"] = [NODE, (504, "{}", {"Retry-After": "0"}), (200, "{}")]
    assert api.delete(node) == (True, {"kind": "Node", "metadata": {
        "name": "w1", "labels": {"app.kubernetes.io/managed-by": "numa.kube"}}})
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


FOREIGN = (200, '{"kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system", '
                '"resourceVersion": "3", "labels": {"k8s-app": "kube-proxy"}, '
                '"managedFields": [{"manager": "kubeadm"}]}}')
PROXY_DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"}}


def test_an_object_numa_kube_did_not_make_is_neither_taken_over_nor_deleted(http_api):
    api, routes, hits = http_api
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"
    routes[path] = FOREIGN
    with pytest.raises(k8s_objects.OwnershipError, match=r"DaemonSet kube-system/kube-proxy exists and numa.kube did "
                       r"not make it \(field managers kubeadm\): nothing was changed.*"
                       r"set adopt: true"):
        api.apply(PROXY_DS)
    assert hits == [("GET", path)], "refused before any write"
    del hits[:]
    assert api.delete(PROXY_DS)[0] is False
    assert hits == [("GET", path)], "no DELETE"
    assert api.kept == ["DaemonSet kube-system/kube-proxy (field managers kubeadm)"]


def test_adopt_takes_an_object_over_and_every_applied_object_carries_the_label(http_api):
    import json
    api, routes, hits = http_api
    path = "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"
    sent = []
    routes[path] = [FOREIGN, (200, FOREIGN[1].replace('"3"', '"4"').replace(
        '"labels": {', '"labels": {"app.kubernetes.io/managed-by": "numa.kube", '))]
    api.client.request = _recording(api.client.request, sent)
    api.adopt = True
    assert api.apply(PROXY_DS)[0] is True
    assert sent[-1]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "numa.kube"}
    assert PROXY_DS["metadata"] == {"name": "kube-proxy", "namespace": "kube-system"}, "the caller's object untouched"
    assert json.loads(FOREIGN[1])  # the route's answer is plain JSON


def _recording(request, sent):
    def wrapper(method, path, body=None, **params):
        if body is not None:
            sent.append(body)
        return request(method, path, body=body, **params)
    return wrapper


@pytest.mark.parametrize("name,namespace,words", [
    ("x/../../../api/v1/namespaces/prod/secrets/db-password", "kube-system", "not a valid Kubernetes object name"),
    ("..", "kube-system", "not a valid Kubernetes object name"),
    ("Plugin", "kube-system", "DNS-1123 subdomain"),
    ("ok", "prod/secrets", "not a valid namespace name"),
    ("ok", "a" * 64, "at most 63"),
])
def test_names_that_would_step_into_another_path_are_refused(http_api, name, namespace, words):
    api, _routes, hits = http_api
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    with pytest.raises(KubeApiError, match=words):
        api.apply(obj)
    with pytest.raises(KubeApiError, match=words):
        api.delete(obj)
    assert hits == [], "nothing was sent"


def test_rbac_names_may_hold_colons_but_never_slashes():
    assert object_path("rbac.authorization.k8s.io/v1", "ClusterRole", "numa.kube:numa-exporter") == \
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/numa.kube:numa-exporter"
    with pytest.raises(KubeApiError, match="without '/'"):
        object_path("rbac.authorization.k8s.io/v1", "ClusterRole", "a/../b")


def test_label_selectors_are_built_from_checked_keys_and_values():
    assert k8s_objects.label_selector({"b": "2", "example.com/a": ""}) == "b=2,example.com/a="
    for bad in ({"zone": "true,zone!=x"}, {"a b": "c"}, {"k": True}, {"/k": "v"}, {"k": "x" * 64}):
        with pytest.raises(KubeApiError, match="not valid: a label key"):
            k8s_objects.label_selector(bad, "node_selector")


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_a_silent_server_ends_the_request_at_the_read_timeout():
    import socket
    import time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts connections, never answers
    try:
        api = KubeApi({"host": "http://127.0.0.1:%d" % listener.getsockname()[1], "api_key": "t"})
        api.timeout = (2, 1)
        started = time.monotonic()
        with pytest.raises(KubeApiError, match="GET /api/v1/nodes on http://127.0.0.1.*[Tt]imed? ?out"):
            api.nodes()
        assert time.monotonic() - started < 5, "one attempt, cut at the read timeout"
    finally:
        listener.close()


def test_retry_after_never_waits_past_the_tasks_deadline(http_api):
    api, routes, hits = http_api
    waits = []
    api.sleep = waits.append
    routes["/api/v1/nodes/w1"] = [(429, '{"message": "slow down"}', {"Retry-After": "3600"}), NODE]
    with pytest.raises(KubeApiError, match=r"429 slow down; the server asks to be asked again in 3600 s, past the "
                                           r"task's deadline \(wait_timeout 300 s\)"):
        api.get("/api/v1/nodes/w1")
    assert waits == [] and len(hits) == 1


def test_waits_share_one_deadline():
    now = [0.0]
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 30}, clock=lambda: now[0])
    api.sleep = lambda seconds: now.__setitem__(0, now[0] + seconds)
    assert api.wait_for(lambda: (False, 1), 20)[2] == 20
    assert api.wait_for(lambda: (False, 2), 20)[2] == 10, "only what the first wait left"
    assert api.wait_for(lambda: (False, 3), 20)[2] == 0


def test_credentials_inside_options_are_found_for_masking():
    kubeconfig = {"users": [{"name": "u", "user": {"token": "sekret-token", "client-key-data": "S0VZ",
                                                   "exec": {"env": [{"name": "X", "value": "env-secret"}]}}}],
                  "clusters": [{"name": "c", "cluster": {"server": "https://api.example:6443"}}]}
    found = k8s_runner.secret_values({"kubeconfig": kubeconfig, "proxy": "http://me:pa%24s@proxy.example:3128"})
    assert {"sekret-token", "S0VZ", "env-secret", "pa$s", "pa%24s"} <= set(found)
    assert "https://api.example:6443" not in found and "u" not in found
    assert k8s_runner.secret_values({"kubeconfig": "/path", "proxy": None}) == []


def test_connect_checks_the_shared_bounds_before_any_request():
    class Module(object):
        def __init__(self, params):
            self.params, self.no_log_values = params, set()

        def fail_json(self, msg):
            raise RuntimeError(msg)

    for value in (0, -5, 3601):
        with pytest.raises(RuntimeError, match="wait_timeout must be between 1 and 3600 seconds .* got %d" % value):
            k8s_runner.connect(Module({"wait_timeout": value, "host": "http://127.0.0.1:9"}))
    module = Module({"wait_timeout": 5, "host": "http://127.0.0.1:9", "proxy": "http://u:hidden@p:1"})
    assert k8s_runner.connect(module).deadline > 0
    assert "hidden" in module.no_log_values


def test_claim_names_every_foreign_object_before_anything_is_applied(http_api):
    api, routes, hits = http_api
    routes["/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"] = FOREIGN
    routes["/api/v1/namespaces/kube-system/configmaps/kube-proxy"] = (
        200, '{"kind": "ConfigMap", "metadata": {"name": "kube-proxy", "labels": {"app.kubernetes.io/managed-by": '
             '"Helm"}}}')
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-proxy", "namespace": "kube-system"}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kube-proxy", "namespace": "kube-system"}}
    with pytest.raises(k8s_objects.OwnershipError, match=r"^ConfigMap kube-system/kube-proxy \(app.kubernetes.io/"
                       r"managed-by=Helm\), DaemonSet kube-system/kube-proxy \(field "
                       r"managers kubeadm\) exist and numa.kube did not make them"):
        api.claim([account, configmap, PROXY_DS])
    assert all(method == "GET" for method, _path in hits)
    api.adopt = True
    del hits[:]
    api.claim([account, configmap, PROXY_DS])
    assert hits == [], "adopting asks nothing"


def test_one_numa_kube_stack_never_takes_over_or_deletes_another_stacks_objects(http_api):
    # the review's case: the device plugin named like the monitoring stack's exporter
    api, routes, hits = http_api
    api.stack = "numa-resource-plugin"
    path = "/apis/apps/v1/namespaces/volcano-system/daemonsets/numa-exporter"
    routes[path] = (200, '{"kind": "DaemonSet", "metadata": {"name": "numa-exporter", "namespace": "volcano-system", '
                         '"resourceVersion": "5", "labels": {"app.kubernetes.io/managed-by": "numa.kube", '
                         '"numa.kube/stack": "numa-monitoring"}}}')
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "numa-exporter", "namespace": "volcano-system"}}
    with pytest.raises(k8s_objects.OwnershipError, match=r"\(numa.kube's numa-monitoring stack\)"):
        api.claim([daemonset])
    assert api.delete(daemonset)[0] is False and api.kept == [
        "DaemonSet volcano-system/numa-exporter (numa.kube's numa-monitoring stack)"]
    assert all(method == "GET" for method, _path in hits)
    # a Namespace is shared: any numa.kube stack's counts
    routes["/api/v1/namespaces/volcano-system"] = (
        200, '{"kind": "Namespace", "metadata": {"name": "volcano-system", "labels": '
             '{"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "numa-monitoring"}}}')
    api.claim([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}}])


def test_applied_objects_carry_the_stack_label(http_api):
    api, routes = http_api[:2]
    sent = []
    api.stack = "volcano"
    api.client.request = _recording(api.client.request, sent)
    routes["/api/v1/namespaces/ns/configmaps/c"] = [(404, "{}"), (200, '{"kind": "ConfigMap", "metadata": '
                                                                  '{"name": "c", "resourceVersion": "1"}}')]
    api.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}})
    assert sent[-1]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "volcano"}


def test_an_answer_that_is_not_a_json_object_is_an_error(http_api):
    api, routes = http_api[:2]
    routes["/api/v1/nodes"] = (200, "[1, 2, 3]")
    with pytest.raises(KubeApiError, match=r"GET /api/v1/nodes: the answer is not a JSON object: \[1, 2, 3\]"):
        api.nodes()


def test_requests_are_cut_to_what_is_left_of_the_deadline_and_a_rollback_gets_time_of_its_own():
    now = [0.0]
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 30}, clock=lambda: now[0])
    assert api.request_timeout() == (10, 30)
    now[0] = 28.0
    assert api.request_timeout() == (2, 2), "what is left of the deadline, no more (third review: a 5 s floor let a " \
        "request outlive a 3 s task by 2 s)"
    now[0] = 29.9
    assert api.request_timeout() == (0.5, 0.5), "a wait's last look, on the deadline, still gets half a second"
    now[0] = 29.0
    api.extend_deadline(30)
    assert api.remaining() == 31 and api.request_timeout() == (10, 31), "30 s more than the deadline left"


def test_kubeconfig_credentials_are_masked_and_ordinary_values_are_not():
    # Ansible masks each value wherever it appears: masking "volcano" or "0" would blot out messages
    kubeconfig = {"users": [{"name": "admin", "user": {
        "username": "admin", "password": "abc",
        "auth-provider": {"name": "oidc", "config": {"id-token": "ID-TOKEN", "idp-issuer-url": "https://idp"}},
        "exec": {"command": "aws", "args": ["--cluster-name", "volcano", "--secret-key", "XYZ1", "--token=T0KEN"],
                 "env": [{"name": "AWS_SECRET", "value": "ENVSECRET"}, {"name": "DEBUG", "value": "0"}]}}}],
        "contexts": [{"name": "c", "context": {"user": "admin", "namespace": "volcano-system"}}]}
    found = set(k8s_runner.secret_values({"kubeconfig": kubeconfig}))
    assert {"abc", "ID-TOKEN", "XYZ1", "T0KEN", "ENVSECRET"} <= found
    assert not {"admin", "aws", "volcano", "0", "volcano-system", "--secret-key", "oidc"} & found, found


def test_no_request_is_sent_once_the_deadline_has_passed():
    now = [0.0]
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 2}, clock=lambda: now[0])
    now[0] = 7.5  # a wait's last look at the deadline itself (2 s) still goes out; 5 s later nothing does
    with pytest.raises(KubeApiError, match=r"GET /api/v1/nodes was not sent: the task's deadline \(wait_timeout 2 s\) "
                                           r"has passed"):
        api.nodes()


def test_an_object_numa_kube_made_before_stacks_were_labelled_is_any_stacks(http_api):
    api, routes = http_api[:2]
    api.stack = "volcano"
    routes["/api/v1/namespaces/ns/configmaps/c"] = (200, '{"kind": "ConfigMap", "metadata": {"name": "c", '
                                                         '"labels": {"app.kubernetes.io/managed-by": "numa.kube"}}}')
    api.claim([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}])


def test_stack_modules_mask_credentials_before_logging_their_invocation(monkeypatch):
    from ansible.module_utils import basic
    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append(msg))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    import json as json_module
    from ansible.module_utils.common.text.converters import to_bytes
    args = {"ANSIBLE_MODULE_ARGS": {"kubeconfig": {"users": [{"name": "u", "user": {"token": "SUPERSECRETTOKEN"}}]}}}
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json_module.dumps(args)))
    module = k8s_runner.stack_module(argument_spec={"kubeconfig": {"type": "raw"}})
    assert "SUPERSECRETTOKEN" in module.no_log_values
    assert logged and not any("SUPERSECRETTOKEN" in line for line in logged), logged


def test_an_apply_the_server_stores_only_for_its_bookkeeping_is_no_change(http_api):
    # a status writer's managedFields entry came in after numa.kube's: the same apply again makes
    # the server reorder the entries and move resourceVersion, though nothing asked for changed
    api, routes = http_api[:2]
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p"

    def policy(version, managers, failure="Fail"):
        return (200, json.dumps({"kind": "ValidatingAdmissionPolicy", "metadata": {
            "name": "p", "resourceVersion": version, "labels": {"app.kubernetes.io/managed-by": "numa.kube"},
            "managedFields": [{"manager": name} for name in managers]}, "spec": {"failurePolicy": failure}}))

    routes[path] = [policy("5", ["numa.kube", "status"]), policy("6", ["status", "numa.kube"])]
    obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": "p"}, "spec": {"failurePolicy": "Fail"}}
    assert api.apply(obj)[0] is False
    routes[path] = [policy("6", ["numa.kube"]), policy("7", ["numa.kube"], failure="Ignore")]
    assert api.apply(obj)[0] is True, "a value that moved is a change"


@pytest.mark.parametrize("kubeletconfig", ['["static"]', '"static"', "null", "42"])
def test_a_configz_whose_kubeletconfig_is_no_object_is_an_api_error_not_a_crash(http_api, kubeletconfig):
    """Hostile review: a /configz whose kubeletconfig was a list or a string raised AttributeError in
    node_labels."""
    api, routes = http_api[:2]
    routes["/api/v1/nodes/w1/proxy/configz"] = (200, '{"kubeletconfig": %s}' % kubeletconfig)
    with pytest.raises(KubeApiError, match="w1 answered /configz without a kubeletconfig object"):
        api.kubelet_config("w1")


@pytest.mark.parametrize("depth", [129, 5000, 200000])
def test_an_answer_nested_too_deep_is_refused_where_it_is_parsed(http_api, depth):
    """Hostile review: a deeply nested answer raised RecursionError out of every GET (the client caught
    only ValueError)."""
    api, routes = http_api[:2]
    routes["/api/v1/nodes/w1"] = (200, '{"a": %s1%s}' % ("[" * depth, "]" * depth))
    with pytest.raises(KubeApiError, match="GET /api/v1/nodes/w1: the answer (nests deeper|is not JSON)"):
        api.get("/api/v1/nodes/w1")
    # an ordinary object of some depth is read as it is
    routes["/api/v1/nodes/w2"] = (200, '{"a": %s1%s}' % ("[" * 100, "]" * 100))
    assert api.get("/api/v1/nodes/w2")["a"] is not None


def test_a_request_takes_at_most_the_stall_window_where_wait_timeout_is_one():
    """Hostile review: with wait_timeout 20 (and the default wait_ceiling 3600) one request to a silent
    server waited 60 s, longer than the whole window the user gave."""
    now = [0.0]
    api = KubeApi({"host": "http://127.0.0.1:9", "api_key": "t", "wait_timeout": 20, "wait_ceiling": 3600},
                  clock=lambda: now[0])
    assert api.request_budget() == 20 and api.request_timeout() == (10, 20)
    now[0] = 3590.0
    assert api.request_budget() == 10, "and never more than what is left of the task"


@pytest.fixture
def trickling_server():
    """A loopback server that answers every request a byte at a time, one every 0.2 s, for ever
    (``where``: in its headers or in its body)."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve(where):
        while not stop.is_set():
            try:
                connection, _address = listener.accept()
            except OSError:
                return
            connection.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            if where == "body":
                connection.sendall(head + b"Content-Length: 100000\r\n\r\n")
            else:
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.is_set():
                try:
                    connection.sendall(b" " if where == "body" else b"X")
                except OSError:
                    break
                time.sleep(0.2)
            connection.close()

    def start(where):
        threading.Thread(target=serve, args=(where,), daemon=True).start()
        return listener.getsockname()[1]

    yield start
    stop.set()
    listener.close()


@pytest.mark.parametrize("where", ["headers", "body"])
@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_a_server_trickling_its_answer_is_given_up_on_within_the_requests_budget(trickling_server, where):
    """Hostile review: a server trickling one byte at a time kept a request past the task's deadline
    (each read came within the read timeout)."""
    port = trickling_server(where)
    api = KubeApi({"host": "http://127.0.0.1:%d" % port, "api_key": "t", "wait_timeout": 6, "wait_ceiling": 60})
    started = time.monotonic()
    with pytest.raises(KubeApiError, match="no complete answer within 6 s") as caught:
        api.get("/api/v1/nodes/w1")
    assert time.monotonic() - started < 9, "the request outlived its budget"
    assert caught.value.transient


@pytest.mark.parametrize("status", [403, 409, 422, 429, 500])
def test_an_error_answer_nested_too_deep_is_named_not_a_crash(http_api, status):
    """Review of the fixes: an error body {"message": [[[...]]]} raised RecursionError out of a GET."""
    api, routes = http_api[:2]
    routes["/api/v1/nodes/w1"] = (status, '{"message": %s1%s}' % ("[" * 200000, "]" * 200000))
    with pytest.raises(KubeApiError, match="GET /api/v1/nodes/w1: %d" % status) as caught:
        api.get("/api/v1/nodes/w1")
    assert len(str(caught.value)) < 2200


@pytest.mark.parametrize("value", ["\u00b2", "1\u00b9", "\u0665", "99999999", "-1", "1.5"])
def test_a_retry_after_that_is_no_whole_number_of_seconds_is_an_answer_not_a_crash(http_api, value):
    """Review of the fixes: Retry-After "²" (str.isdigit() takes it, int() does not) raised ValueError."""
    api, routes = http_api[:2]
    routes["/api/v1/nodes/w1"] = (429, '{"message": "slow down"}', {"Retry-After": value.encode("latin-1", "replace")
                                                                    .decode("latin-1")})
    with pytest.raises(KubeApiError, match="GET /api/v1/nodes/w1: 429 slow down"):
        api.get("/api/v1/nodes/w1")
