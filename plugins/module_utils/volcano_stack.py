# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano from its own release manifest, and the Numatopology publisher that feeds numa-aware.

The manifest is Volcano's (``installer/volcano-development.yaml`` of a release, or a file rendered
from its Helm chart), applied as it is apart from what the user asks to change: the images'
registry and tag, their pull policy, a node selector for Volcano's own pods, and, with admission
off, the admission webhook and everything that serves it left out. The scheduler's ConfigMap is
only created, never overwritten: its content is the scheduler configuration, which
``numa.kube.volcano_numa_aware`` (or the user) edits, and a later deployment must not undo that.

The publisher is a DaemonSet of the node agent's ``topology-publisher``: one Numatopology per
node, from kubelet's /configz, its PodResources API and sysfs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import re

from ansible_collections.numa.kube.plugins.module_utils.kube_api import (
    MANAGED_BY,
    check_namespace,
    describe,
    label_selector,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.kube_wait import daemonset_ready, deployment_ready
from ansible_collections.numa.kube.plugins.module_utils.numatopology import NUMATOPOLOGY_API
from ansible_collections.numa.kube.plugins.module_utils.resource_plugin import DEFAULT_TOLERATIONS
from ansible_collections.numa.kube.plugins.module_utils.volcano_conf import VolcanoError

try:
    import yaml
except ImportError:  # reported by the module (volcano_conf.HAS_YAML)
    yaml = None

PUBLISHER = "numa-topology-publisher"
PUBLISHER_RESOURCES = {"requests": {"cpu": "10m", "memory": "40Mi"}, "limits": {"memory": "96Mi"}}
# the ValidatingAdmissionPolicy (and its binding) that keeps each publisher to its own node's object
PUBLISHER_POLICY = "numa-kube.publisher-own-node"
# the user extra the API server sets from a pod-bound service account token's node claim
# (ServiceAccountTokenPodNodeInfo: beta and on from 1.30, GA and locked on from 1.32)
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# how the publisher checks kubelet's serving certificate (its --kubelet-tls)
PUBLISHER_KUBELET_TLS = ("node-cert", "cluster-ca", "insecure")
# kubelet's self-signed serving certificate, where it writes it without tlsCertFile (kubeadm's default)
KUBELET_CERT = "/var/lib/kubelet/pki/kubelet.crt"
_IMAGE = re.compile(r"^(?P<repo>.*/)?(?P<name>[^/:@]+)(?::(?P<tag>[^/@]+))?(?P<digest>@.+)?$")
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _loader():
    class Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        pass

    # Helm-rendered CRDs carry keys such as "=" that YAML 1.1 reads as the value tag
    Loader.add_constructor("tag:yaml.org,2002:value", Loader.construct_yaml_str)
    return Loader


def load_manifest(text, where):
    """The objects of a multi-document manifest, in order; VolcanoError naming the problem."""
    try:
        documents = list(yaml.load_all(text, Loader=_loader()))  # nosec: SafeLoader underneath
    except yaml.YAMLError as exc:
        raise VolcanoError("%s is not valid YAML: %s; nothing was applied" % (where, exc))
    objects = [doc for doc in documents if doc]
    bad = [doc for doc in objects if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion")
           or not (doc.get("metadata") or {}).get("name")]
    if bad:
        raise VolcanoError("%s: every document must be a Kubernetes object with apiVersion, kind and "
                           "metadata.name, found %r; nothing was applied" % (where, bad[0]))
    if not any(doc["kind"] == "Deployment" and "scheduler" in doc["metadata"]["name"] for doc in objects):
        raise VolcanoError("%s has no scheduler Deployment: is it Volcano's release manifest "
                           "(installer/volcano-development.yaml)? nothing was applied" % where)
    return objects


def is_admission(obj):
    """Whether the object belongs to Volcano's admission webhook (left out with admission off)."""
    return obj["kind"] in WEBHOOK_KINDS or "admission" in obj["metadata"]["name"]


def _image(image, registry, tag):
    match = _IMAGE.match(image)
    if not match:
        return image
    repo = registry.rstrip("/") + "/" if registry else (match.group("repo") or "")
    if tag:
        return "%s%s:%s" % (repo, match.group("name"), tag)
    return "%s%s%s%s" % (repo, match.group("name"), ":" + match.group("tag") if match.group("tag") else "",
                         match.group("digest") or "")


def _pod_specs(obj):
    spec = obj.get("spec") or {}
    if obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        yield spec.setdefault("template", {}).setdefault("spec", {})


def adjust(objects, params):
    """The manifest's objects as they will be applied (copies; the input is not touched)."""
    result = []
    for obj in objects:
        if not params["admission"] and is_admission(obj):
            continue
        obj = copy.deepcopy(obj)
        for pod_spec in _pod_specs(obj):
            for container in pod_spec.get("initContainers", []) + pod_spec.get("containers", []):
                container["image"] = _image(container.get("image", ""), params.get("image_registry"),
                                            params.get("image_tag"))
                if params.get("image_pull_policy"):
                    container["imagePullPolicy"] = params["image_pull_policy"]
            if params.get("node_selector"):
                pod_spec["nodeSelector"] = dict(pod_spec.get("nodeSelector") or {}, **params["node_selector"])
        result.append(obj)
    return result


def is_scheduler_conf(obj):
    return obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("scheduler-configmap")


def publisher_policy(namespace, labels):
    """The ValidatingAdmissionPolicy and its binding that let the publisher write only the
    Numatopology named as its own node.

    RBAC cannot say this: a rule's resourceNames does not apply to ``create`` (the name is not in
    the request's path when it is authorized), and every pod of a DaemonSet runs as the same
    service account, so each node would need an account and a role of its own. A pod's projected
    token names the node the pod was bound to; the API server puts that name in the request's user
    extra ``authentication.kubernetes.io/node-name``, which a pod cannot choose. The policy compares
    it with the object's name (the old object's for a DELETE; a PATCH is admitted as an UPDATE) and
    refuses a request whose token names no node (a legacy Secret token, or one requested without a
    pod): failurePolicy Fail, action Deny."""
    user = "system:serviceaccount:%s:%s" % (check_namespace(namespace), PUBLISHER)
    extra = "request.userInfo.extra['%s']" % NODE_NAME_EXTRA
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": ["nodeinfo.volcano.sh"], "apiVersions": ["*"], "resources": ["numatopologies"],
            "operations": ["CREATE", "UPDATE", "DELETE"]}]},
        "matchConditions": [{"name": "numa-topology-publisher",
                             "expression": "request.userInfo.username == '%s'" % user}],
        "variables": [
            {"name": "claimed",
             "expression": "has(request.userInfo.extra) && '%s' in request.userInfo.extra" % NODE_NAME_EXTRA},
            {"name": "target",
             "expression": "request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name"},
        ],
        "validations": [{
            "expression": "variables.claimed && %s == [variables.target]" % extra,
            "reason": "Forbidden",
            "message": "%s may write only the Numatopology named as the node its pod-bound service account "
                       "token names (policy %s); a token without a node claim is refused" % (user, PUBLISHER_POLICY),
            "messageExpression": "'%s may write only the Numatopology of the node its token is bound to (policy %s): "
                                 "the token names ' + (variables.claimed ? 'node ' + %s[0] : 'no node (only a "
                                 "token bound to a pod does)') + ', the request Numatopology ' + variables.target"
                                 % (user, PUBLISHER_POLICY, extra),
        }],
    }
    meta = {"name": PUBLISHER_POLICY, "labels": dict(labels)}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": dict(meta), "spec": spec},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": dict(meta), "spec": {"policyName": PUBLISHER_POLICY, "validationActions": ["Deny"]}},
    ]


def publisher_objects(params):
    """ServiceAccount, ClusterRole, ClusterRoleBinding, the own-node admission policy and its binding,
    and the DaemonSet (last) of the Numatopology publisher."""
    name, namespace = PUBLISHER, params["namespace"]
    tls = params.get("publisher_kubelet_tls") or "node-cert"
    if tls not in PUBLISHER_KUBELET_TLS:
        raise VolcanoError("publisher_kubelet_tls %r is not known: it must be one of %s"
                           % (tls, ", ".join(PUBLISHER_KUBELET_TLS)))
    labels = {"app": name, "app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "numa.kube"}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    rules = [
        # the publisher reads and writes one object, named as its node: get it, create it when
        # missing, replace it (PUT, with its resourceVersion). No list or watch, no patch, no
        # delete (the Node's ownerReference removes it with the Node). Which object: RBAC cannot
        # tell (no resourceNames for create), PUBLISHER_POLICY does.
        {"apiGroups": ["nodeinfo.volcano.sh"], "resources": ["numatopologies"], "verbs": ["get", "create", "update"]},
        # the Node's uid, for that ownerReference
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        # kubelet's /configz: its own subresource since Kubernetes 1.33 (KubeletFineGrainedAuthz),
        # nodes/proxy before (which also allows far more; hence an option)
        {"apiGroups": [""], "resources": ["nodes/configz"] + (["nodes/proxy"] if params["publisher_nodes_proxy"] else []),
         "verbs": ["get"]},
    ]
    env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
           {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
    mounts = [{"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources", "readOnly": True}]
    volumes = [{"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}}]
    if tls == "node-cert":
        # kubelet's serving certificate alone, not its folder: /var/lib/kubelet/pki also holds
        # kubelet's private keys, its client credential (the node's identity) among them. A
        # single-file mount keeps the file the pod started with; kubelet writes a new one only
        # when it is missing (then restart the pod).
        mounts.append({"name": "kubelet-cert", "mountPath": KUBELET_CERT, "readOnly": True})
        volumes.append({"name": "kubelet-cert", "hostPath": {"path": KUBELET_CERT, "type": "File"}})
    container = {
        "name": "publisher", "image": params["publisher_image"],
        "imagePullPolicy": params.get("image_pull_policy") or "IfNotPresent",
        "args": ["topology-publisher", "--sysfs=/sys", "--kubelet-tls=" + tls], "env": env,
        "resources": PUBLISHER_RESOURCES,
        # root only to open kubelet's PodResources socket (root's own); nothing else
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": mounts,
    }
    pod_spec = {
        "serviceAccountName": name, "priorityClassName": "system-node-critical",
        "tolerations": DEFAULT_TOLERATIONS, "terminationGracePeriodSeconds": 5, "containers": [container],
        "volumes": volumes,
    }
    if params.get("publisher_node_selector"):
        pod_spec["nodeSelector"] = params["publisher_node_selector"]
    cluster_meta = {"name": "numa-kube:" + name, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": dict(cluster_meta),
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": dict(cluster_meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_meta["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ] + publisher_policy(namespace, labels) + [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": dict(meta), "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}},
    ]


def publisher_cleanup(api, check_mode):
    """Delete the Numatopologies the publisher wrote (those with numa.kube's managed-by label: any
    other exporter's stay); a list of (object, changed, before) for the module's result.

    Call it after the publisher's DaemonSet and ClusterRoleBinding are gone, so that no publisher
    still running writes its object again. Without the Numatopology CRD there is nothing to do."""
    found = api.get("/apis/%s/numatopologies" % NUMATOPOLOGY_API, label_selector=label_selector(MANAGED_BY))
    done = []
    for item in sorted((found or {}).get("items") or [], key=lambda obj: obj["metadata"]["name"]):
        obj = {"apiVersion": NUMATOPOLOGY_API, "kind": "Numatopology", "metadata": {"name": item["metadata"]["name"]}}
        changed, before = api.delete(obj, check_mode)
        done.append((obj, changed, before))
    return done


def summarised(obj):
    """``obj`` for a diff: a CRD's schemas (tens of thousands of lines in Volcano's manifest) stand
    as a digest of each, so a changed schema still shows as a changed line."""
    if not obj or obj.get("kind") != "CustomResourceDefinition":
        return obj
    obj = copy.deepcopy(obj)
    for version in obj.get("spec", {}).get("versions") or []:
        schema = version.get("schema")
        if schema:
            digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode("utf-8")).hexdigest()
            version["schema"] = "(%d bytes, sha256:%s)" % (len(json.dumps(schema)), digest[:16])
    return obj


def run(api, params, manifest_text, check_mode, wait_for):
    """Apply (or remove) Volcano and the publisher, and wait for them; the module's result."""
    result = {"changed": False, "objects": [], "diff": [], "scheduler_conf_created": False}

    def record(obj, changed, before, after):
        result["objects"].append({"object": describe(obj), "changed": changed})
        if changed:
            result["changed"] = True
            result["diff"].append({"before": summarised(before), "after": summarised(after),
                                   "before_header": describe(obj),
                                   "after_header": describe(obj)})

    volcano = adjust(load_manifest(manifest_text, params["manifest"]), params) if manifest_text is not None else []
    publisher = publisher_objects(params) if params.get("publisher_image") else []
    if params["state"] == "absent":
        for obj in reversed(volcano + publisher):
            changed, before = api.delete(obj, check_mode)
            record(obj, changed, before, {})
        return result

    if not volcano and api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                               "numatopologies.nodeinfo.volcano.sh") is None:
        raise VolcanoError("the cluster has no Numatopology CRD (numatopologies.nodeinfo.volcano.sh): install "
                           "Volcano first, or give manifest (Volcano's release manifest) to install it")
    for obj in volcano + publisher:
        if is_scheduler_conf(obj):
            if api.get(path_of(obj)) is not None:
                result["objects"].append({"object": describe(obj), "changed": False, "kept": True})
                continue
            result["scheduler_conf_created"] = True
        if check_mode and obj["kind"] != "Namespace" and obj["metadata"].get("namespace") and \
                api.get("/api/v1/namespaces/%s" % obj["metadata"]["namespace"]) is None:
            # a dry run cannot place objects in a namespace the same run has not made yet
            record(obj, True, {}, obj)
            continue
        changed, before, after = api.apply(obj, check_mode)
        record(obj, changed, before, after)
    if check_mode or not params["wait"]:
        return result

    waits = {}
    for obj in volcano:
        if obj["kind"] == "Deployment":
            done, text, waited = wait_for(lambda o=obj: deployment_ready(api.get(path_of(o))), params["wait_timeout"])
            if not done:
                raise VolcanoError("Deployment %s did not become available within %d s: %s"
                                   % (describe(obj)[len("Deployment "):], waited, text))
            waits[describe(obj)] = round(waited, 1)
    if publisher:
        nodes = [n["metadata"]["name"] for n in api.nodes(params.get("publisher_node_selector"))]
        daemonset = publisher[-1]
        done, text, waited = wait_for(lambda: daemonset_ready(api.get(path_of(daemonset)), len(nodes)),
                                      params["wait_timeout"])
        if not done:
            raise VolcanoError("the publisher DaemonSet did not roll out within %d s: %s" % (waited, text))

        def published():
            missing = [n for n in nodes if api.get("/apis/%s/numatopologies/%s" % (NUMATOPOLOGY_API, n)) is None]
            return not missing, missing

        done, missing, waited = wait_for(published, params["wait_timeout"])
        if not done:
            raise VolcanoError("no Numatopology for %s within %d s of the publisher running: see its logs "
                               "(kubectl -n %s logs ds/%s)" % (", ".join(missing), waited, params["namespace"],
                                                               PUBLISHER))
        result["numatopologies"] = nodes
    result["wait_seconds"] = waits
    return result
