# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API as the cluster-stack modules use it: one client, server-side apply with check
mode and diff, deletes, kubelet configuration through the nodes/proxy API, and waiting.

Authentication takes the options of kubernetes.core's modules (and their K8S_AUTH_* variables), so
that a playbook passes the cluster stacks what it already passes those modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import time

try:
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError
    HAS_KUBERNETES = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_KUBERNETES = False

    class DynamicApiError(Exception):
        """Stands in for the client's error class when the client is missing."""

try:  # the client's own port of client-go's Retry-After rule (kubernetes 37.0.0 and later)
    from kubernetes.utils.retry import is_retry_after_response, on_retry_after_error, retry_after_backoff
    from urllib3.util.retry import Retry
    HAS_RETRY_AFTER = True
except ImportError:  # older clients: every request is tried once
    HAS_RETRY_AFTER = False

FIELD_MANAGER = "numa.kube"

# The authentication options of every cluster-stack module (kubernetes.core's names and aliases).
AUTH_ARGUMENT_SPEC = {
    "kubeconfig": {"type": "raw", "fallback": (lambda: os.environ.get("K8S_AUTH_KUBECONFIG"),)},
    "context": {"type": "str", "fallback": (lambda: os.environ.get("K8S_AUTH_CONTEXT"),)},
    "host": {"type": "str", "fallback": (lambda: os.environ.get("K8S_AUTH_HOST"),)},
    "api_key": {"type": "str", "no_log": True, "fallback": (lambda: os.environ.get("K8S_AUTH_API_KEY"),)},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False},
    "proxy": {"type": "str"},
}

# apiVersion and kind -> (plural, namespaced) for what the stacks deploy; no discovery round trips.
KINDS = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ("servicemonitors", True),
    ("monitoring.coreos.com/v1", "PrometheusRule"): ("prometheusrules", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): ("mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): ("validatingwebhookconfigurations", False),
    ("nodeinfo.volcano.sh/v1alpha1", "Numatopology"): ("numatopologies", False),
}

# Fields the server sets that say nothing about what was asked for.
_SERVER_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")


class KubeApiError(Exception):
    """A request the API server refused or could not answer, with what was asked."""

    def __init__(self, message, status=None):
        super(KubeApiError, self).__init__(message)
        self.status = status


def object_path(api_version, kind, name=None, namespace=None):
    try:
        plural, namespaced = KINDS[(api_version, kind)]
    except KeyError:
        raise KubeApiError("numa.kube does not manage %s %s" % (api_version, kind))
    path = "/api/v1" if api_version == "v1" else "/apis/" + api_version
    if namespaced:
        if not namespace:
            raise KubeApiError("%s %s needs a namespace" % (kind, name))
        path += "/namespaces/" + namespace
    path += "/" + plural
    return path + "/" + name if name else path


def path_of(obj):
    meta = obj.get("metadata", {})
    return object_path(obj["apiVersion"], obj["kind"], meta.get("name"), meta.get("namespace"))


def describe(obj):
    meta = obj.get("metadata", {})
    where = "%s/" % meta["namespace"] if meta.get("namespace") else ""
    return "%s %s%s" % (obj["kind"], where, meta.get("name"))


def comparable(obj):
    """The object without status and server bookkeeping, Secret values hidden: what a diff shows."""
    if obj is None:
        return {}
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    meta = obj.get("metadata", {})
    for field in _SERVER_METADATA:
        meta.pop(field, None)
    if obj.get("kind") == "Secret":
        for field in ("data", "stringData"):
            if field in obj:
                obj[field] = dict((key, "(hidden)") for key in obj[field])
    return obj


def _error_text(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        message = json.loads(body).get("message")
    except (TypeError, ValueError, AttributeError):
        message = None
    return message or (body or str(exc)).strip()


class _NoDiscovery:
    def __init__(self, client, cache_file):
        self.client = client


class KubeApi:
    """A connection to the API server."""

    def __init__(self, params):
        configuration = kube_client.Configuration()
        kubeconfig = params.get("kubeconfig")
        context = params.get("context")
        try:
            if isinstance(kubeconfig, dict):
                kube_config.load_kube_config_from_dict(kubeconfig, context=context,
                                                       client_configuration=configuration)
            elif kubeconfig or not params.get("host"):
                path = os.path.expanduser(kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config").split(":")[0])
                if kubeconfig or os.path.exists(path) or context:
                    kube_config.load_kube_config(config_file=path, context=context,
                                                 client_configuration=configuration)
                else:
                    kube_config.load_incluster_config(client_configuration=configuration)
        except (kube_config.ConfigException, OSError, ValueError) as exc:
            raise KubeApiError("cannot load the cluster's credentials (kubeconfig %s, context %s): %s"
                               % (kubeconfig or "default", context or "current", exc))
        if params.get("host"):
            configuration.host = params["host"]
        if params.get("api_key"):
            configuration.api_key = {"authorization": "Bearer " + params["api_key"]}
        if params.get("validate_certs") is not None:
            configuration.verify_ssl = params["validate_certs"]
        for option, field in (("ca_cert", "ssl_ca_cert"), ("client_cert", "cert_file"),
                              ("client_key", "key_file"), ("proxy", "proxy")):
            if params.get(option):
                setattr(configuration, field, params[option])
        if HAS_RETRY_AFTER:  # statuses are request()'s to retry; urllib3 keeps its connection retries
            configuration.retries = Retry.DEFAULT.new(status=0, status_forcelist=(), respect_retry_after_header=False)
        # only its request() is used, with paths from KINDS: no discovery round trips, no cache file
        self.client = DynamicClient(kube_client.ApiClient(configuration), discoverer=_NoDiscovery)
        self.sleep = time.sleep

    def request(self, method, path, body=None, text=False, **params):
        """The decoded answer (a dict; the body as a string with ``text``), None for 404 on a GET
        or DELETE; KubeApiError otherwise. The body is decoded here: the dynamic client's own
        decoding wants a ``kind`` (kubelet's /configz has none) and turns a log that happens to be
        JSON into an object.

        An API server that is busy or briefly unable to serve (429, or a 5xx with Retry-After: max
        requests in flight, a timeout, etcd leader change) is asked again after the seconds it
        names, up to 10 times, for every verb, as client-go does; every request here may be
        repeated (GETs, server-side applies of the same object, DELETEs whose 404 counts as done).
        An answer without Retry-After is final. Connection resets on reads are urllib3's to retry."""
        def send():
            return self.client.request(method, path, body=body, serialize=False, **params)

        try:
            if HAS_RETRY_AFTER:
                answer = on_retry_after_error(retry_after_backoff(), is_retry_after_response, send,
                                              sleep_func=self.sleep)
            else:
                answer = send()
        except DynamicApiError as exc:
            status = getattr(exc, "status", None)
            if status == 404 and method.upper() in ("GET", "DELETE"):
                return None
            retried = " (the same after 10 retries)" if HAS_RETRY_AFTER and is_retry_after_response(exc) else ""
            raise KubeApiError("%s %s: %s %s%s" % (method.upper(), path, status, _error_text(exc), retried), status)
        except Exception as exc:  # connection refused, TLS, timeouts: name the server
            raise KubeApiError("%s %s on %s: %s" % (method.upper(), path, self.client.configuration.host, exc))
        data = answer.data.decode("utf-8", "replace")
        if text:
            return data
        try:
            return json.loads(data) if data.strip() else {}
        except ValueError:
            raise KubeApiError("%s %s: the answer is not JSON: %.200s" % (method.upper(), path, data))

    def get(self, path, **params):
        return self.request("GET", path, **params)

    def apply(self, obj, check_mode=False):
        """Server-side apply as numa.kube; (changed, before, after) with before/after comparable."""
        path = path_of(obj)
        before = self.get(path)
        params = {"content_type": "application/apply-patch+yaml", "field_manager": FIELD_MANAGER,
                  "force_conflicts": True}
        if check_mode:
            params["dry_run"] = "All"
        after = self.request("PATCH", path, body=obj, **params)
        if before is None:
            changed = True
        elif check_mode:
            changed = comparable(before) != comparable(after)
        else:
            changed = before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]
        return changed, comparable(before), comparable(after)

    def delete(self, obj, check_mode=False):
        """Delete if present (its dependents go in the background); (changed, before)."""
        path = path_of(obj)
        before = self.get(path)
        if before is None or check_mode:
            return before is not None, comparable(before)
        self.request("DELETE", path, propagation_policy="Background")
        return True, comparable(before)

    def nodes(self, selector=None):
        """The Nodes matching a label selector mapping (every Node for an empty one), by name."""
        params = {}
        if selector:
            params["label_selector"] = ",".join("%s=%s" % item for item in sorted(selector.items()))
        items = self.get("/api/v1/nodes", **params).get("items", [])
        return sorted(items, key=lambda node: node["metadata"]["name"])

    def kubelet_config(self, node):
        """The configuration the node's kubelet runs with (its /configz, through the API server)."""
        answer = self.get("/api/v1/nodes/%s/proxy/configz" % node)
        if not isinstance(answer, dict) or "kubeletconfig" not in answer:
            raise KubeApiError("the kubelet of %s answered /configz without a kubeletconfig: %r" % (node, answer))
        return answer["kubeletconfig"]


def wait_for(check, timeout, interval=2.0, clock=time.monotonic, sleep=time.sleep):
    """Call ``check`` (which returns (done, value)) until done or ``timeout`` seconds pass;
    returns (done, the last value, seconds waited)."""
    started = clock()
    while True:
        done, value = check()
        waited = clock() - started
        if done or waited >= timeout:
            return done, value, waited
        sleep(min(interval, max(timeout - waited, 0.1)))
