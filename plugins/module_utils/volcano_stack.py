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

Every document is checked before the first request that changes anything (kind, name, namespace,
images), and all problems are reported together. The webhook configurations go last, once the
Deployment that serves them is Available: Volcano's webhooks fail closed, and one registered
before its server answers refuses every object it watches.

``absent`` removes only what numa.kube applied; Volcano's CRDs (and with them every Volcano Job,
Queue and PodGroup) and its Namespaces only when asked, and never over someone else's objects.

The publisher is a DaemonSet of the node agent's ``topology-publisher``: one Numatopology per
node, from kubelet's /configz, its PodResources API and sysfs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json
import re
import time

from ansible_collections.numa.kube.plugins.module_utils.kube_api import (
    HOST,
    KINDS,
    MANAGED_BY,
    PATH_PART,
    SCHEME,
    KubeApiError,
    check_labels,
    check_name,
    check_namespace,
    describe,
    image_problem,
    label_selector,
    owned,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.kube_wait import (
    deployment_progress,
    deployment_ready,
    max_unavailable,
    wait_daemonset,
    wait_pending,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.numatopology import NUMATOPOLOGY_API
from ansible_collections.numa.kube.plugins.module_utils.resource_plugin import (
    DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_TOLERATIONS,
    allowed_down,
    daemonset_pods,
    nodes_by_name,
    not_ready,
    share_problems,
    too_many_down,
    warn_down,
)
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
POD_TEMPLATE_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
DOWNLOAD_TIMEOUT = 60  # seconds for the manifest's download, connection and reading together
MAX_MANIFEST_BYTES = 32 * 1024 * 1024  # Volcano's release manifest is about 2 MB
LISTED = 5  # objects named in a refusal, per CRD or Namespace; the count says how many there are
_PAGE, _PAGES = 500, 20  # a list is read 500 objects a request, at most 20 requests

_REGISTRY = re.compile(r"^%s(?:/%s)*/?\Z" % (HOST, PATH_PART))
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_CHECKSUM = re.compile(r"^sha256:[0-9a-fA-F]{64}\Z")


def read_bounded(response, where, seconds=DOWNLOAD_TIMEOUT, limit=MAX_MANIFEST_BYTES, clock=time.monotonic):
    """The whole body of ``response`` (a file-like HTTP answer), read a chunk at a time: VolcanoError
    once it has taken ``seconds`` in all or grown past ``limit`` bytes (a server that trickles bytes
    never ends a per-read timeout)."""
    give_up = clock() + seconds
    read = getattr(response, "read1", None) or response.read
    data = bytearray()
    while True:
        chunk = read(65536)
        if not chunk:
            return bytes(data)
        data.extend(chunk)
        if len(data) > limit:
            raise VolcanoError("the manifest %s is larger than %d bytes: is it Volcano's release manifest? nothing "
                               "was applied" % (where, limit))
        if clock() > give_up:
            raise VolcanoError("the manifest %s took more than %d s to download (%d bytes so far): try again, or "
                               "download it and give its path; nothing was applied" % (where, seconds, len(data)))


def _loader():
    class Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        pass

    # Helm-rendered CRDs carry keys such as "=" that YAML 1.1 reads as the value tag
    Loader.add_constructor("tag:yaml.org,2002:value", Loader.construct_yaml_str)
    return Loader


# --- where the manifest comes from -------------------------------------------------------------------

def is_url(source):
    return bool(SCHEME.match(source or ""))


def check_source(source, checksum):
    """VolcanoError unless the manifest may be read from ``source``: a URL only as https:// and
    pinned by ``checksum`` (whatever answers there decides what runs with cluster-wide rights), a
    checksum only as sha256:<64 hex digits>. Checked before the download."""
    problems = []
    if checksum is not None and not _CHECKSUM.match(checksum):
        problems.append("manifest_checksum must read sha256:<64 hex digits>, got %r; set it to 'sha256:' and "
                        "the output of sha256sum for the manifest" % checksum)
    if is_url(source):
        if not source.lower().startswith("https://"):
            problems.append("manifest %r is not an https:// URL: a manifest from a URL must come over https "
                            "(plain http, or any other scheme, lets anything on the way change what is "
                            "applied with cluster-wide rights); use its https:// address, or download it, "
                            "review it and give its path" % source)
        elif not checksum:
            problems.append("manifest %r is a URL without manifest_checksum: a manifest from a URL must be "
                            "pinned (what is served there can change); set manifest_checksum to 'sha256:' and "
                            "the sha256sum of the manifest you reviewed" % source)
    if problems:
        raise VolcanoError(problems)


def check_checksum(data, checksum, source):
    """VolcanoError when the manifest's bytes do not have the sha256 ``checksum`` names."""
    if not checksum:
        return
    actual = hashlib.sha256(data).hexdigest()
    expected = checksum.partition(":")[2].lower()
    if actual != expected:
        raise VolcanoError("the manifest %s has sha256 %s, not the %s manifest_checksum names: nothing was "
                           "applied; check where it comes from, then set manifest_checksum to what you "
                           "reviewed" % (source, actual, expected))


# --- the manifest's documents ------------------------------------------------------------------------

def load_manifest(text, where):
    """The documents of a multi-document manifest, in order (empty ones as None, so that each
    keeps its position); VolcanoError when it is not YAML."""
    try:
        return list(yaml.load_all(text, Loader=_loader()))  # nosec: SafeLoader underneath
    except yaml.YAMLError as exc:
        raise VolcanoError("%s is not valid YAML: %s; nothing was applied" % (where, exc))


def _label(index, doc):
    """How a problem names a document: its position and, when it has them, its kind and name."""
    if isinstance(doc, dict) and doc.get("kind") and isinstance(doc.get("metadata"), dict):
        return "document %d (%s)" % (index, describe(doc))
    return "document %d" % index


def _is_object(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str)
            and isinstance(doc.get("metadata"), dict) and isinstance(doc["metadata"].get("name"), str))


def _kind_problem(unknown):
    """One sentence for every document of a kind numa.kube does not apply."""
    known = sorted(set(kind for _version, kind in KINDS))
    items = []
    for index, doc in unknown:
        where = "%s %s (document %d, %s)" % (doc["apiVersion"], doc["kind"], index, doc["metadata"]["name"])
        versions = sorted(version for version, kind in KINDS if kind == doc["kind"])
        if versions:
            where += " [numa.kube applies %s as %s]" % (doc["kind"], " or ".join(versions))
        items.append(where)
    return ("the manifest holds kinds numa.kube does not apply: %s; it applies only %s. Remove those documents "
            "from the manifest (and apply them yourself), or use Volcano's release manifest "
            "(installer/volcano-development.yaml)" % (", ".join(items), ", ".join(known)))


def _pod_specs(obj):
    """The pod specs of ``obj`` (a workload's template, a Pod's own spec), as they are (not copies)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if obj.get("kind") == "Pod":
        return [spec]
    if obj.get("kind") in POD_TEMPLATE_KINDS:
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            return [template["spec"]]
    return []


def _containers(obj):
    for pod_spec in _pod_specs(obj):
        for field in ("initContainers", "containers"):
            for container in pod_spec.get(field) or []:
                if isinstance(container, dict):
                    yield container


def manifest_problems(documents, params):
    """Every problem of the manifest's documents and of the options that shape them, as sentences
    (empty when it can be applied): structure, kinds, names, namespaces, images (only for state
    present: absent pulls nothing), the scheduler Deployment."""
    problems, unknown, objects = [], [], []
    for index, doc in enumerate(documents, 1):
        if doc is None:
            continue
        if not _is_object(doc):
            problems.append("%s is not a Kubernetes object with apiVersion, kind and metadata.name (found %.200r): "
                            "complete it or remove it" % (_label(index, doc), doc))
            continue
        key = (doc["apiVersion"], doc["kind"])
        if key not in KINDS:
            unknown.append((index, doc))
            continue
        objects.append((index, doc))
        meta = doc["metadata"]
        try:
            if doc["kind"] == "Namespace":
                check_namespace(meta["name"], "%s: the name" % _label(index, doc))
            else:
                check_name(meta["name"], "%s: the name" % _label(index, doc), doc["kind"])
        except KubeApiError as exc:
            problems.append(str(exc))
        if KINDS[key][1] and meta.get("namespace") is not None:
            try:
                check_namespace(meta["namespace"], "%s: the namespace" % _label(index, doc))
            except KubeApiError as exc:
                problems.append(str(exc))
    if unknown:
        problems.append(_kind_problem(unknown))
    if not any(doc["kind"] == "Deployment" and "scheduler" in doc["metadata"]["name"] for _i, doc in objects):
        problems.append("the manifest has no scheduler Deployment: is it Volcano's release manifest "
                        "(installer/volcano-development.yaml)? give that file")
    if params["state"] == "present":
        image_options_bad = bool(_image_option_problems(params))
        for index, doc in objects:
            if not params["admission"] and is_admission(doc):
                continue
            for container in _containers(doc):
                what = "%s container %r" % (_label(index, doc), container.get("name"))
                given = container.get("image")
                if not isinstance(given, str) or not given:
                    problems.append("%s has no image: every container needs one; set it in the manifest" % what)
                    continue
                if image_options_bad:
                    continue  # said once, for the option
                image = _image(given, params.get("image_registry"), params.get("image_tag"))
                if image == given:
                    problem, fix = image_problem(image, what), "fix the manifest"
                else:
                    problem = image_problem(image, "%s (%r with image_registry %r, image_tag %r)" % (
                        what, given, params.get("image_registry"), params.get("image_tag")))
                    fix = "fix the manifest, or image_registry or image_tag"
                if problem:
                    problems.append("%s; %s" % (problem, fix))
    return problems


def _image_option_problems(params):
    problems = []
    registry, tag = params.get("image_registry"), params.get("image_tag")
    if registry and not _REGISTRY.match(registry):
        problems.append("image_registry %r is not a registry and path: it must read host[:port][/path] in lower case, "
                        "without whitespace or a scheme (e.g. registry.example/volcanosh); fix it" % registry)
    if tag and not _TAG.match(tag):
        problems.append("image_tag %r is not an image tag: it must be letters, digits, '_', '.' and '-' (not "
                        "first), at most 128 characters (e.g. v1.14.1); fix it" % tag)
    return problems


def option_problems(params):
    """The options of the module that this file checks, as sentences."""
    problems = _image_option_problems(params)
    try:
        check_namespace(params["namespace"], "namespace (the option)")
    except KubeApiError as exc:
        problems.append(str(exc))
    for option in ("node_selector", "publisher_node_selector"):
        try:
            check_labels(params.get(option) or {}, option)
        except KubeApiError as exc:
            problems.append(str(exc))
    if params.get("publisher_image"):
        problem = image_problem(params["publisher_image"], "publisher_image")
        if problem:
            problems.append(problem + "; set it to the node agent image as you pushed it")
    problems.extend(share_problems(params))
    return problems


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


def adjust(objects, params):
    """The manifest's objects as they will be applied (copies; the input is not touched).

    Each object's own labels stay and numa.kube's managed-by label is added to them; pod template
    labels are left as they are (a Deployment's selector cannot change). A namespaced object that
    names no namespace goes to the module's ``namespace``."""
    result = []
    for obj in objects:
        if obj is None or (not params["admission"] and is_admission(obj)):
            continue
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        if KINDS.get((obj["apiVersion"], obj["kind"]), (None, False))[1] and not meta.get("namespace"):
            meta["namespace"] = params["namespace"]
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


def volcano_objects(text, params):
    """The manifest's objects as numa.kube applies (or deletes) them, in the manifest's order;
    VolcanoError listing every problem of the manifest and options when there is one."""
    documents = load_manifest(text, params["manifest"])
    problems = option_problems(params) + manifest_problems(documents, params)
    if problems:
        verb = "applied" if params["state"] == "present" else "deleted"
        raise VolcanoError(["the manifest %s was refused, nothing was %s" % (params["manifest"], verb)] + problems)
    return adjust(documents, params)


def webhook_servers(objects):
    """The Deployments of ``objects`` that serve its webhook configurations: a webhook's
    clientConfig.service, that Service's selector, the Deployments whose pod labels it selects.
    Every Deployment when a webhook's server cannot be traced that way (a URL, a Service from
    elsewhere, a selector nothing matches)."""
    services = dict(((o["metadata"].get("namespace"), o["metadata"]["name"]), o)
                    for o in objects if o["kind"] == "Service")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    wanted = []
    for config in objects:
        if config["kind"] not in WEBHOOK_KINDS:
            continue
        for hook in config.get("webhooks") or []:
            ref = (hook.get("clientConfig") or {}).get("service") or {}
            service = services.get((ref.get("namespace"), ref.get("name")))
            selector = ((service or {}).get("spec") or {}).get("selector") or {}
            found = [d for d in deployments if selector and d["metadata"].get("namespace") == ref.get("namespace")
                     and _selects(selector, d)]
            if not found:
                return deployments
            wanted.extend(d for d in found if d not in wanted)
    return [d for d in deployments if d in wanted]


def _selects(selector, deployment):
    labels = ((((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
    return all(labels.get(key) == value for key, value in selector.items())


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
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable(
                params.get("max_unavailable", DEFAULT_MAX_UNAVAILABLE))}},
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


# --- what absent may delete ---------------------------------------------------------------------------

def _listed(api, path, **params):
    """The items at ``path``, page by page; (items, whether more were left unread)."""
    items, token = [], None
    for _page in range(_PAGES):
        query = dict(params, limit=_PAGE)
        if token:
            query["_continue"] = token
        answer = api.get(path, **query) or {}
        items.extend(answer.get("items") or [])
        token = (answer.get("metadata") or {}).get("continue")
        if not token:
            return items, False
    return items, True


def _named(items, total):
    names = ["%s/%s" % (i["metadata"]["namespace"], i["metadata"]["name"]) if i["metadata"].get("namespace")
             else i["metadata"]["name"] for i in items[:LISTED]]
    more = total - len(names)
    return ", ".join(names) + (" and %d more" % more if more > 0 else "")


def crd_problem(api, crd, skip_owned=False):
    """A sentence when custom resources of ``crd`` (as the manifest names it) exist anywhere in the
    cluster, else None; objects numa.kube made are not counted with ``skip_owned`` (the
    Numatopologies the publisher's removal takes with it)."""
    live = api.get(path_of(crd))
    if live is None or not owned(live):
        return None  # nothing to delete (api.delete leaves a CRD numa.kube did not make)
    spec = live.get("spec") or {}
    versions = [v["name"] for v in spec.get("versions") or [] if v.get("served") and v.get("storage")] or \
        [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    plural, group = (spec.get("names") or {}).get("plural"), spec.get("group")
    if not versions or not plural or not group:
        return None  # not served: no object of it can be listed, nor exists for clients
    what = "CRD %s" % crd["metadata"]["name"]
    path = "/apis/%s/%s/%s" % (check_name(group, "the group of " + what), check_name(versions[0], "a version of " + what),
                               check_name(plural, "the plural of " + what))
    answer = api.get(path, limit=_PAGE) or {}
    items = answer.get("items") or []
    meta = answer.get("metadata") or {}
    left = meta.get("remainingItemCount") or 0
    if skip_owned:
        items = [i for i in items if not owned(i)]
    if not items and not left and not meta.get("continue"):
        return None
    total = len(items) + left
    count = "%d" % total if left or not meta.get("continue") else "more than %d" % len(items)
    kind = (spec.get("names") or {}).get("kind") or plural
    return ("%s still has %s %s object%s in the cluster (%s): deleting it deletes them all. Delete them first "
            "(kubectl delete %s.%s --all -A) and run again, or leave delete_crds off" % (
                what, count, kind, "" if total == 1 else "s", _named(items, total), plural, group))


_NAMESPACE_KINDS = (("v1", "Pod"), ("apps/v1", "DaemonSet"), ("apps/v1", "Deployment"), ("v1", "Service"),
                    ("v1", "ConfigMap"), ("v1", "Secret"))


def _ours_in(namespace, objects):
    """What numa.kube applies in ``namespace`` (kind, name), and the Secrets its pods mount."""
    ours = set()
    for obj in objects:
        if obj["metadata"].get("namespace") != namespace:
            continue
        ours.add((obj["kind"], obj["metadata"]["name"]))
        for pod_spec in _pod_specs(obj):
            for volume in pod_spec.get("volumes") or []:
                secret = (volume.get("secret") or {}).get("secretName")
                if secret:
                    ours.add(("mounted Secret", secret))
    return ours


def _pod_is_ours(pod, ours):
    """Whether one of our Deployments (through its ReplicaSet), DaemonSets or Jobs made ``pod``."""
    pod_hash = (pod["metadata"].get("labels") or {}).get("pod-template-hash")
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("DaemonSet", "Job") and (ref["kind"], ref.get("name")) in ours:
            return True
        if ref.get("kind") == "ReplicaSet" and pod_hash and (ref.get("name") or "").endswith("-" + pod_hash) \
                and ("Deployment", ref["name"][:-len(pod_hash) - 1]) in ours:
            return True
    return False


def _foreign(obj, ours):
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == "Pod":
        return not _pod_is_ours(obj, ours)
    if kind == "ConfigMap" and name == "kube-root-ca.crt":
        return False
    if kind == "Secret" and (obj.get("type") == "kubernetes.io/service-account-token"
                             or ("mounted Secret", name) in ours):
        return False
    return not ((kind, name) in ours and owned(obj))


def namespace_problem(api, namespace_obj, objects):
    """A sentence when the Namespace holds objects that numa.kube did not make from this manifest
    (or the publisher), else None: deleting the Namespace would delete them."""
    name = namespace_obj["metadata"]["name"]
    live = api.get(path_of(namespace_obj))
    if live is None or not owned(live):
        return None
    ours = _ours_in(name, objects)
    foreign, unread = [], False
    for version, kind in _NAMESPACE_KINDS:
        items, more = _listed(api, "%s/namespaces/%s/%s" % ("/api/v1" if version == "v1" else "/apis/" + version,
                                                            check_namespace(name), KINDS[(version, kind)][0]))
        unread = unread or more
        foreign.extend("%s %s" % (kind, i["metadata"]["name"]) for i in items if _foreign(dict(i, kind=kind), ours))
    if not foreign and not unread:
        return None
    total = len(foreign)
    listed = ", ".join(foreign[:LISTED]) + (" and %d more" % (total - LISTED) if total > LISTED else "")
    unread_note = (", and over %d objects of one kind, not all read" % (_PAGE * _PAGES)) if unread else ""
    return ("Namespace %s holds %d object%s numa.kube did not make from this manifest (%s)%s: deleting the "
            "Namespace deletes them. Move or delete them first and run again, or leave delete_namespace off"
            % (name, total, "" if total == 1 else "s", listed or "none of those read", unread_note))


def absent_problems(api, params, volcano, publisher):
    """Why the CRDs and Namespaces asked to go cannot, as sentences (read-only requests)."""
    problems = []
    if params.get("delete_crds"):
        for obj in volcano:
            if obj["kind"] == "CustomResourceDefinition":
                skip = bool(publisher) and obj["metadata"]["name"] == "numatopologies.nodeinfo.volcano.sh"
                problems.append(crd_problem(api, obj, skip_owned=skip))
    if params.get("delete_namespace"):
        for obj in volcano:
            if obj["kind"] == "Namespace":
                problems.append(namespace_problem(api, obj, volcano + publisher))
    return [p for p in problems if p]


# --- run --------------------------------------------------------------------------------------------

class _Result(dict):
    """The module's result, with each object's change recorded as it happens."""

    def __init__(self):
        dict.__init__(self, changed=False, objects=[], diff=[], scheduler_conf_created=False)

    def record(self, obj, changed, before, after):
        self["objects"].append({"object": describe(obj), "changed": changed})
        if changed:
            self["changed"] = True
            self["diff"].append({"before": summarised(before), "after": summarised(after),
                                 "before_header": describe(obj), "after_header": describe(obj)})

    def keep(self, obj, **why):
        self["objects"].append(dict({"object": describe(obj), "changed": False, "kept": True}, **why))


def run(api, params, manifest_text, check_mode, wait_for):
    """Apply (or remove) Volcano and the publisher, and wait for them; the module's result.

    Nothing is changed before every check passed: the manifest and the options, and for absent
    whether the CRDs and Namespaces asked to go hold anything numa.kube did not make."""
    if manifest_text is not None:
        volcano = volcano_objects(manifest_text, params)
    else:
        problems = option_problems(params)
        if problems:
            raise VolcanoError(problems)
        volcano = []
    publisher = publisher_objects(params) if params.get("publisher_image") else []
    if params["state"] == "absent":
        return _remove(api, params, volcano, publisher, check_mode)
    return _deploy(api, params, volcano, publisher, check_mode, wait_for)


def _remove(api, params, volcano, publisher, check_mode):
    """absent: the reverse of present's order. The webhooks before their server, the publisher's
    DaemonSet before the Numatopologies it would otherwise write again, CRDs and Namespaces (when
    their switch is on) last."""
    problems = absent_problems(api, params, volcano, publisher)
    if problems:
        raise VolcanoError(["nothing was deleted"] + problems)
    result = _Result()

    def remove(obj):
        changed, before = api.delete(obj, check_mode)
        result.record(obj, changed, before, {})

    webhooks = [obj for obj in volcano if obj["kind"] in WEBHOOK_KINDS]
    for obj in list(reversed(webhooks)) + list(reversed(publisher)):
        remove(obj)
    if publisher:
        for obj, changed, before in publisher_cleanup(api, check_mode):
            result.record(obj, changed, before, {})
    for obj in reversed(volcano):
        switch = {"CustomResourceDefinition": "delete_crds", "Namespace": "delete_namespace"}.get(obj["kind"])
        if obj["kind"] in WEBHOOK_KINDS:
            continue
        if switch and not params.get(switch):
            result.keep(obj, reason="%s is false" % switch)
            continue
        remove(obj)
    return result


def _deploy(api, params, volcano, publisher, check_mode, wait_for):
    """present: every object but the webhook configurations, then (with wait) the Deployments that
    serve the webhooks, the webhooks, the other Deployments, the publisher and its Numatopologies."""
    webhooks = [obj for obj in volcano if obj["kind"] in WEBHOOK_KINDS]
    if webhooks and not params["wait"]:
        raise VolcanoError(
            "wait is false, but the manifest has admission webhooks (%s): they fail closed, so numa.kube "
            "applies them only once the Deployment that serves them is Available, which takes waiting; nothing "
            "was applied. Set wait: true, or admission: false to leave the webhooks out"
            % ", ".join(describe(obj) for obj in webhooks))
    if not volcano and api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                               "numatopologies.nodeinfo.volcano.sh") is None:
        raise VolcanoError("the cluster has no Numatopology CRD (numatopologies.nodeinfo.volcano.sh): install "
                           "Volcano first, or give manifest (Volcano's release manifest) to install it")
    # the publisher's nodes, and too many of them unavailable refused, before anything is applied
    selection = publisher_selection(api, params) if publisher and params["wait"] else None
    # every object of another manager named at once, before anything is applied (the scheduler's
    # ConfigMap is never applied over an existing one, whoever made it)
    api.claim([obj for obj in volcano + publisher if not is_scheduler_conf(obj)])
    result = _Result()

    def apply(obj):
        if is_scheduler_conf(obj):
            if api.get(path_of(obj)) is not None:
                result.keep(obj)
                return
            result["scheduler_conf_created"] = True
        if check_mode and obj["kind"] != "Namespace" and obj["metadata"].get("namespace") and \
                api.get("/api/v1/namespaces/%s" % check_namespace(obj["metadata"]["namespace"])) is None:
            # a dry run cannot place objects in a namespace the same run has not made yet
            result.record(obj, True, {}, obj)
            return
        changed, before, after = api.apply(obj, check_mode)
        result.record(obj, changed, before, after)

    for obj in volcano + publisher:
        if obj["kind"] not in WEBHOOK_KINDS:
            apply(obj)
    if check_mode or not params["wait"]:
        for obj in webhooks:  # only a dry run gets here with webhooks (refused above without wait)
            apply(obj)
        return result

    waits = result["wait_seconds"] = {}

    def wait_available(deployment, held):
        def check():
            live = api.get(path_of(deployment))
            done, text = deployment_ready(live)
            return done, (text, deployment_progress(live))

        outcome = wait_for(check, params["wait_timeout"], progress=lambda value: value[1])
        done, (text, _score), waited = outcome
        if not done:
            text = "%s; %s" % (why_waiting_ended(outcome, params["wait_timeout"]), text)
            why = (": the webhook configurations (%s) were not applied, so nothing fails closed on them; see "
                   "kubectl -n %s describe deployment %s, and run again once it can start"
                   % (", ".join(describe(o) for o in held), deployment["metadata"]["namespace"],
                      deployment["metadata"]["name"])) if held else ""
            raise VolcanoError("%s did not become available (%s)%s" % (describe(deployment), text, why))
        waits[describe(deployment)] = round(waited, 1)

    servers = webhook_servers(volcano) if webhooks else []
    for deployment in servers:
        wait_available(deployment, webhooks)
    for obj in webhooks:
        apply(obj)
    for deployment in volcano:
        if deployment["kind"] == "Deployment" and deployment not in servers:
            wait_available(deployment, [])
    if publisher:
        result["numatopologies"] = _wait_publisher(api, params, publisher, wait_for, result, selection)
    return result


def publisher_selection(api, params):
    """(the publisher's selected node names, {node: why} of those unavailable, how many may be),
    read before anything is applied; VolcanoError naming them when too many are unavailable."""
    nodes = api.nodes(params.get("publisher_node_selector"))
    names = [n["metadata"]["name"] for n in nodes]
    if not names:
        raise VolcanoError("no Node matches publisher_node_selector %r: the publisher would run nowhere and no "
                           "Numatopology could be proven; nothing was applied. Change publisher_node_selector"
                           % (params.get("publisher_node_selector") or {}))
    allowed = allowed_down(params, len(names))
    down = not_ready(nodes)
    if len(down) > allowed:
        raise VolcanoError(too_many_down(down, allowed, len(names), "Nothing was applied"))
    return names, down, allowed


def _wait_publisher(api, params, publisher, wait_for, result, selection=None):
    """The selected nodes, once the publisher runs on each and each has its Numatopology (but for
    the unavailable ones unavailable_nodes_allowed accepts, named in the result)."""
    names, down, allowed = selection or publisher_selection(api, params)
    stall = params["wait_timeout"]
    daemonset = publisher[-1]
    outcome = wait_daemonset(lambda: api.get(path_of(daemonset)), names, wait_for, stall, down, allowed,
                             daemonset_pods(api, params["namespace"], daemonset["spec"]["selector"]["matchLabels"]),
                             nodes_by_name(api, params.get("publisher_node_selector") or {}))
    if not outcome[0]:
        raise VolcanoError("the publisher DaemonSet did not roll out: %s; %s"
                           % (why_waiting_ended(outcome, stall), outcome[1]))

    def published(pending):
        # one list of the objects' metadata a round (a GET each when few are left): existence is the proof
        found = api.named("/apis/%s/numatopologies" % NUMATOPOLOGY_API, pending, metadata_only=True)
        return dict((name, None if obj is not None else "no Numatopology yet") for name, obj in found.items())

    outcome = wait_pending([name for name in names if name not in down], published, wait_for, stall)
    warn_down(result, down)
    if not outcome[0]:
        raise VolcanoError("no Numatopology for %s: %s; see the publisher's logs (kubectl -n %s logs ds/%s)"
                           % (", ".join(sorted(outcome[1])), why_waiting_ended(outcome, stall), params["namespace"],
                              PUBLISHER))
    return [name for name in names if name not in down]
