# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an object of the Kubernetes API is to numa.kube: the kinds the stacks deploy and their paths,
the checks of names, namespaces, labels and images (before any request), and ownership: the
managed-by label, the stack label, and what of an object the server set rather than numa.kube."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

try:
    from urllib.parse import quote
except ImportError:  # Python 2 (sanity's compile test only)
    from urllib import quote  # pylint: disable=no-name-in-module


FIELD_MANAGER = "numa.kube"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = {MANAGED_BY_LABEL: FIELD_MANAGER}
# which of numa.kube's stacks made an object: one stack never takes over or deletes another's
STACK_LABEL = "numa.kube/stack"
# kinds several stacks share (a Namespace holds the monitoring stack and Volcano by default)
SHARED_KINDS = ("Namespace",)

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
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): ("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"):
        ("validatingadmissionpolicybindings", False),
    ("nodeinfo.volcano.sh/v1alpha1", "Numatopology"): ("numatopologies", False),
    ("topology.node.k8s.io/v1alpha2", "NodeResourceTopology"): ("noderesourcetopologies", False),
}
# names of these kinds are path segments, not DNS names (system:..., numa.kube:...)
_PATH_SEGMENT_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

# Fields the server sets that say nothing about what was asked for.
_SERVER_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")


class KubeApiError(Exception):
    """A request the API server refused or could not answer, with what was asked."""

    def __init__(self, message, status=None, transient=False, deadline=False):
        super(KubeApiError, self).__init__(message)
        self.status = status
        # transient: the request may well succeed if sent again (a timeout, a reset connection,
        # 429 or a 5xx); deadline: it was not sent because the task's deadline had passed
        self.transient = transient
        self.deadline = deadline


class OwnershipError(KubeApiError):
    """An object is there that numa.kube did not make: it is not taken over unasked."""


# --- names, namespaces and label selectors --------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _subdomain_ok(value):
    return len(value) <= 253 and all(_DNS_LABEL.match(part) for part in value.split("."))


def check_name(value, what="name", kind=None):
    """``value`` if it may name an object (of ``kind``); KubeApiError naming the rule otherwise.

    Names end up in request paths: anything else could step into another object's path."""
    text = value if isinstance(value, str) else None
    if kind in _PATH_SEGMENT_KINDS:
        good = bool(text) and text not in (".", "..") and not any(c in text for c in "/%") and len(text) <= 253
        rule = "a name without '/' or '%', not '.' or '..', at most 253 characters"
    else:
        good = bool(text) and _subdomain_ok(text)
        rule = ("a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a "
                "letter or digit, at most 253 characters")
    if not good:
        raise KubeApiError("%s %r is not a valid Kubernetes object name: it must be %s; fix the value"
                           % (what, value, rule))
    return value


def check_namespace(value, what="namespace"):
    """``value`` if it may name a namespace (a DNS-1123 label); KubeApiError otherwise."""
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
        raise KubeApiError("%s %r is not a valid namespace name: it must be a DNS-1123 label (lower-case "
                           "letters, digits and '-', starting and ending with a letter or digit, at most 63 "
                           "characters); fix the value" % (what, value))
    return value


def _label_key_ok(key):
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or not _subdomain_ok(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def check_labels(mapping, what="labels"):
    """``mapping`` if every key and value is a valid label key and value; KubeApiError otherwise."""
    if not isinstance(mapping, dict):
        raise KubeApiError("%s must be a mapping of label keys to values, got %r" % (what, mapping))
    bad = []
    for key, value in sorted(mapping.items(), key=lambda item: str(item[0])):
        if not isinstance(key, str) or not _label_key_ok(key):
            bad.append("key %r" % (key,))
        if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME.match(value)):
            bad.append("value %r of %r" % (value, key))
    if bad:
        raise KubeApiError("%s: %s not valid: a label key is an optional DNS subdomain prefix and '/', then "
                           "a name of at most 63 letters, digits, '-', '_' or '.' starting and ending with a "
                           "letter or digit; a value is empty or such a name (quote values such as \"true\" "
                           "in YAML); fix them" % (what, ", ".join(bad)))
    return mapping


def label_selector(mapping, what="selector"):
    """An equality label selector (``k=v,k2=v2``) from a mapping whose keys and values are checked:
    a value such as ``true,zone!=x`` cannot widen or change the selection."""
    return ",".join("%s=%s" % item for item in sorted(check_labels(mapping or {}, what).items()))


# An image reference as container runtimes read it: [host[:port]/]path[:tag][@digest]
PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_REFERENCE = re.compile(r"^(?:%s/)?%s(?:/%s)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                        r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?\Z"
                        % (HOST, PATH_PART, PATH_PART))
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def image_problem(image, what):
    """A sentence when ``image`` is not an image reference a container runtime pulls, else None."""
    if not isinstance(image, str) or not image:
        return "%s is empty: it must name an image" % what
    if re.search(r"\s", image):
        why = "it holds whitespace"
    elif SCHEME.match(image):
        why = "it starts with a scheme (registries are named without https://)"
    elif not _REFERENCE.match(image):
        why = "it is not [registry[:port]/]repository[:tag][@digest] in lower case"
    else:
        return None
    return "%s: image %r is not an image reference: %s" % (what, image, why)


def check_image(image, option="image"):
    """``image`` if it is an image reference; KubeApiError with image_problem's sentence otherwise."""
    problem = image_problem(image, option)
    if problem:
        raise KubeApiError(problem)
    return image


def option_problems(params, label_options=(), more=()):
    """What is wrong with the options every stack module shares (``name``, ``namespace``, the label
    mappings named in ``label_options``, ``image`` when ``state`` is present) and with the ``more``
    checks (callables raising KubeApiError): every message, so that all are fixed in one go."""
    checks = [lambda: check_name(params["name"], "name"), lambda: check_namespace(params["namespace"])]
    checks.extend(lambda option=option: check_labels(params.get(option) or {}, option) for option in label_options)
    if params.get("state") == "present":
        checks.append(lambda: check_image(params.get("image")))
    problems = []
    for check in checks + list(more):
        try:
            check()
        except KubeApiError as exc:
            problems.append(str(exc))
    return problems


def object_path(api_version, kind, name=None, namespace=None):
    try:
        plural, namespaced = KINDS[(api_version, kind)]
    except KeyError:
        raise KubeApiError("numa.kube does not manage %s %s" % (api_version, kind))
    path = "/api/v1" if api_version == "v1" else "/apis/" + api_version
    if namespaced:
        if not namespace:
            raise KubeApiError("%s %s needs a namespace" % (kind, name))
        path += "/namespaces/" + quote(check_namespace(namespace, "the namespace of %s %s" % (kind, name)), safe="")
    path += "/" + plural
    if name:
        path += "/" + quote(check_name(name, "the name of %s" % kind, kind), safe=":")
    return path


def owned(obj, stack=None):
    """Whether a live object carries numa.kube's managed-by label and, given ``stack``, is that
    stack's (a shared kind, such as a Namespace, is any numa.kube stack's)."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != FIELD_MANAGER:
        return False
    # an object numa.kube made before its stacks were labelled names no stack: the stack that
    # applies it again labels it
    return (stack is None or (obj or {}).get("kind") in SHARED_KINDS or STACK_LABEL not in labels
            or labels[STACK_LABEL] == stack)


def manager_of(obj):
    """Who manages a live object, in words: its managed-by label, else its field managers."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    label = labels.get(MANAGED_BY_LABEL)
    if label == FIELD_MANAGER:
        return "numa.kube's %s stack" % labels.get(STACK_LABEL)
    if label:
        return "%s=%s" % (MANAGED_BY_LABEL, label)
    entries = meta.get("managedFields") if isinstance(meta.get("managedFields"), list) else []
    managers = sorted(set(entry["manager"] for entry in entries
                          if isinstance(entry, dict) and isinstance(entry.get("manager"), str) and entry["manager"]))
    return "field managers %s" % ", ".join(managers) if managers else "no managed-by label"


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
