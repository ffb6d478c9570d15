# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A DaemonSet of the node agent that writes one cluster-scoped object per node, named as the node
(Volcano's Numatopology, the NodeResourceTopology), and what keeps each of its pods to its own
node's object. Shared by the stacks that deploy such a publisher (volcano_stack,
topology_scheduler): the objects, which nodes it runs on, and its rollout."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    MANAGED_BY,
    check_namespace,
    label_selector,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    max_unavailable,
    wait_daemonset,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import (
    DEFAULT_MAX_UNAVAILABLE,
    DEFAULT_TOLERATIONS,
    allowed_down,
    daemonset_pods,
    nodes_by_name,
    not_ready,
    too_many_down,
)

PUBLISHER_RESOURCES = {"requests": {"cpu": "10m", "memory": "40Mi"}, "limits": {"memory": "96Mi"}}
# the options every module that runs the publisher takes alike (doc_fragments/publisher.py)
PUBLISHER_OPTIONS = {"publisher_resources": dict(type="dict", default={})}
# the user extra the API server sets from a pod-bound service account token's node claim
# (ServiceAccountTokenPodNodeInfo: beta and on from 1.30, GA and locked on from 1.32)
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# how the publisher checks kubelet's serving certificate (its --kubelet-tls)
PUBLISHER_KUBELET_TLS = ("node-cert", "cluster-ca", "insecure")
# kubelet's self-signed serving certificate, where it writes it without tlsCertFile (kubeadm's default)
KUBELET_CERT = "/var/lib/kubelet/pki/kubelet.crt"


class Published(object):
    """The kind of object a publisher writes: cluster-scoped, one per node, named as the node."""

    def __init__(self, group, version, plural, kind):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version)

    @property
    def list_path(self):
        return "/apis/%s/%s" % (self.api_version, self.plural)

    def ref(self, name):
        """The object named ``name`` as a request names it (for a delete)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": name}}


NUMATOPOLOGY = Published("nodeinfo.volcano.sh", "v1alpha1", "numatopologies", "Numatopology")


def own_node_policy(policy, namespace, service_account, published, labels):
    """The ValidatingAdmissionPolicy and its binding that let the publisher (``service_account`` in
    ``namespace``) write only the ``published`` object named as its own node.

    RBAC cannot say this: a rule's resourceNames does not apply to ``create`` (the name is not in
    the request's path when it is authorized), and every pod of a DaemonSet runs as the same
    service account, so each node would need an account and a role of its own. A pod's projected
    token names the node the pod was bound to; the API server puts that name in the request's user
    extra ``authentication.kubernetes.io/node-name``, which a pod cannot choose. The policy compares
    it with the object's name (the old object's for a DELETE; a PATCH is admitted as an UPDATE) and
    refuses a request whose token names no node (a legacy Secret token, or one requested without a
    pod): failurePolicy Fail, action Deny."""
    user = "system:serviceaccount:%s:%s" % (check_namespace(namespace), service_account)
    extra = "request.userInfo.extra['%s']" % NODE_NAME_EXTRA
    kind = published.kind
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [published.group], "apiVersions": ["*"], "resources": [published.plural],
            "operations": ["CREATE", "UPDATE", "DELETE"]}]},
        "matchConditions": [{"name": service_account, "expression": "request.userInfo.username == '%s'" % user}],
        "variables": [
            {"name": "claimed",
             "expression": "has(request.userInfo.extra) && '%s' in request.userInfo.extra" % NODE_NAME_EXTRA},
            {"name": "target",
             "expression": "request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name"},
        ],
        "validations": [{
            "expression": "variables.claimed && %s == [variables.target]" % extra,
            "reason": "Forbidden",
            "message": "%s may write only the %s named as the node its pod-bound service account "
                       "token names (policy %s); a token without a node claim is refused" % (user, kind, policy),
            "messageExpression": "'%s may write only the %s of the node its token is bound to (policy %s): "
                                 "the token names ' + (variables.claimed ? 'node ' + %s[0] : 'no node (only a "
                                 "token bound to a pod does)') + ', the request %s ' + variables.target"
                                 % (user, kind, policy, extra, kind),
        }],
    }
    meta = {"name": policy, "labels": dict(labels)}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": dict(meta), "spec": spec},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": dict(meta), "spec": {"policyName": policy, "validationActions": ["Deny"]}},
    ]


def publisher_objects(params, name, program, published, policy, error=ProblemsError, affinity=None):
    """ServiceAccount, ClusterRole, ClusterRoleBinding, the own-node admission policy and its
    binding, and the DaemonSet (last) of a publisher: the node agent's ``program`` in
    ``params["namespace"]``, on the nodes of ``publisher_node_selector`` (and ``affinity``, a pod
    affinity, when given), writing ``published`` objects. ``error`` is raised for an unknown
    publisher_kubelet_tls."""
    namespace = params["namespace"]
    tls = params.get("publisher_kubelet_tls") or "node-cert"
    if tls not in PUBLISHER_KUBELET_TLS:
        raise error("publisher_kubelet_tls %r is not known: it must be one of %s"
                    % (tls, ", ".join(PUBLISHER_KUBELET_TLS)))
    labels = {"app": name, "app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "numa.kube"}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    configz = ["nodes/configz"] + (["nodes/proxy"] if params.get("publisher_nodes_proxy") else [])
    rules = [
        # the publisher reads and writes one object, named as its node: get it, create it when
        # missing, replace it (PUT, with its resourceVersion). No list or watch, no patch, no
        # delete (the Node's ownerReference removes it with the Node). Which object: RBAC cannot
        # tell (no resourceNames for create), the own-node policy does.
        {"apiGroups": [published.group], "resources": [published.plural], "verbs": ["get", "create", "update"]},
        # the Node's uid, for that ownerReference
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        # kubelet's /configz: its own subresource since Kubernetes 1.33 (KubeletFineGrainedAuthz),
        # nodes/proxy before (which also allows far more; hence an option)
        {"apiGroups": [""], "resources": configz, "verbs": ["get"]},
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
        "name": "publisher", "image": params.get("publisher_image"),
        "imagePullPolicy": params.get("image_pull_policy") or "IfNotPresent",
        "args": [program, "--sysfs=/sys", "--kubelet-tls=" + tls], "env": env,
        "resources": params.get("publisher_resources") or PUBLISHER_RESOURCES,
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
    if affinity:
        pod_spec["affinity"] = affinity
    cluster_meta = {"name": "numa-kube:" + name, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": dict(cluster_meta),
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": dict(cluster_meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_meta["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ] + own_node_policy(policy, namespace, name, published, labels) + [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": dict(meta), "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable(
                params.get("max_unavailable", DEFAULT_MAX_UNAVAILABLE))}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}}},
    ]


def selected_nodes(api, params, published, error=ProblemsError):
    """The Nodes publisher_node_selector matches; ``error`` naming the selector when none does."""
    nodes = api.nodes(params.get("publisher_node_selector"))
    if not nodes:
        raise error("no Node matches publisher_node_selector %r: the publisher would run nowhere and no %s could be "
                    "proven; nothing was applied. Change publisher_node_selector"
                    % (params.get("publisher_node_selector") or {}, published.kind))
    return nodes


def unavailable(params, nodes, error=ProblemsError):
    """(the names of ``nodes``, {node: why} of those unavailable, how many may be); ``error``
    naming them when more are unavailable than unavailable_nodes_allowed accepts."""
    names = [n["metadata"]["name"] for n in nodes]
    allowed = allowed_down(params, len(names))
    down = not_ready(nodes)
    if len(down) > allowed:
        raise error(too_many_down(down, allowed, len(names), "Nothing was applied"))
    return names, down, allowed


def wait_rollout(api, params, daemonset, selection, wait_for, error=ProblemsError):
    """Wait until the publisher ``daemonset`` runs on the ``selection`` (from unavailable); ``error``
    saying why when it does not."""
    names, down, allowed = selection
    stall = params["wait_timeout"]
    outcome = wait_daemonset(lambda: api.get(path_of(daemonset)), names, wait_for, stall, down, allowed,
                             daemonset_pods(api, params["namespace"], daemonset["spec"]["selector"]["matchLabels"]),
                             nodes_by_name(api, params.get("publisher_node_selector") or {}))
    if not outcome[0]:
        raise error("the publisher DaemonSet did not roll out: %s; %s" % (why_waiting_ended(outcome, stall), outcome[1]))


def removal_order(objects):
    """A publisher's objects (publisher_objects) in the order absent deletes them: the DaemonSet
    (no new pod), then the ClusterRoleBinding (a pod still terminating can write nothing more),
    then the own-node policy's binding and the policy, the ClusterRole and the ServiceAccount. The
    policy goes only after the rights: between the two, a pod could write any node's object."""
    first = [obj for kind in ("DaemonSet", "ClusterRoleBinding") for obj in objects if obj["kind"] == kind]
    return first + [obj for obj in reversed(objects) if obj not in first]


def _runs_there(pod):
    """Whether ``pod`` may still write: Ready, or being deleted and not yet finished (a pod keeps
    its token and its rights through its grace period)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def publisher_pods(api, namespace, daemonset_name):
    """{node: pod name} of the publisher DaemonSet's pods that may still write (Ready, or
    terminating), read now (paged, by the DaemonSet's pod label)."""
    pods = daemonset_pods(api, namespace, {"app": daemonset_name})()
    return dict(((pod.get("spec") or {}).get("nodeName"), pod["metadata"]["name"]) for pod in pods
                if (pod.get("spec") or {}).get("nodeName") and _runs_there(pod))


def wait_pods_gone(api, params, daemonset_name, wait_for):
    """Wait until no pod of the publisher DaemonSet is left (progress: fewer of them), at most
    wait_timeout seconds without progress; the names of those still there when the wait ended."""
    pods = daemonset_pods(api, params["namespace"], {"app": daemonset_name})

    def check():
        left = sorted(pod["metadata"]["name"] for pod in pods())
        return not left, left

    outcome = wait_for(check, params["wait_timeout"], progress=lambda left: -len(left))
    return [] if outcome[0] else outcome[1]


def publisher_pods_left(pods, params):
    """The warning when absent's wait for the publisher's pods ended with ``pods`` still there."""
    return ("%d pod%s of the publisher %s still there after waiting (%s; %ds without progress at most): %s no "
            "rights left to write, and the objects the publisher wrote were deleted after the wait; see kubectl -n %s "
            "get pods (a node that is down keeps its pods until it is back or its Node is deleted)"
            % (len(pods), "" if len(pods) == 1 else "s", "was" if len(pods) == 1 else "were",
               ", ".join(pods[:10]) + (" and %d more" % (len(pods) - 10) if len(pods) > 10 else ""),
               params["wait_timeout"], "it has" if len(pods) == 1 else "they have", params["namespace"]))


def remove_publisher(api, params, objects, published, check_mode, wait_for, result, ours=None):
    """absent for a publisher: its ``objects`` deleted in removal_order, then (with wait, not in
    check mode) its pods waited for until gone, then the ``published`` objects it wrote deleted
    (published_cleanup, with ``ours``); each recorded in ``result`` (a StackResult). Returns
    (the names of the objects ``ours`` refused, kept; the publisher's pods still there when the
    wait ended: they have no rights left, but may still run)."""
    name = objects[-1]["metadata"]["name"]
    for obj in removal_order(objects):
        changed, before = api.delete(obj, check_mode)
        result.record(obj, changed, before, {})
    left = []
    if params.get("wait", True) and not check_mode:
        left = wait_pods_gone(api, params, name, wait_for)
    skipped = []
    for obj, changed, before in published_cleanup(api, published, check_mode, ours, skipped):
        result.record(obj, changed, before, {})
    return skipped, left


def published_cleanup(api, published, check_mode, ours=None, skipped=None):
    """Delete the ``published`` objects a publisher wrote (those with numa.kube's managed-by label:
    any other publisher's stay; of those, only the ones ``ours`` accepts when given, the others'
    names appended to ``skipped``); a list of (object, changed, before) for the module's result.

    Call it after the publisher's DaemonSet and ClusterRoleBinding are gone, so that no publisher
    still running writes its object again. Without the kind's CRD there is nothing to do. The
    objects are read page by page (one a node: a large cluster has thousands)."""
    found = api.list(published.list_path, label_selector=label_selector(MANAGED_BY))
    done = []
    for item in sorted(found or [], key=lambda obj: obj["metadata"]["name"]):
        if ours is not None and not ours(item):
            if skipped is not None:
                skipped.append(item["metadata"]["name"])
            continue
        obj = published.ref(item["metadata"]["name"])
        changed, before = api.delete(obj, check_mode)
        done.append((obj, changed, before))
    return done
