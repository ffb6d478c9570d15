# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Node labels that say which NUMA policies a node's kubelet runs.

The values come from what the kubelet answers on ``/configz`` (through the API server), never from
what a file on the node says: a label is set only for a kubelet that runs the policy, on a Node
that is Ready. ``numa.kube/aligned: "true"`` marks a kubelet that aligns pods to a NUMA node, by
the same rule the NUMA device plugin applies before it deploys (alignment_gaps, here);
elsewhere the label is absent, never ``"false"``, so that a selector on it picks aligned nodes only.

Only the keys in OWNED_KEYS are ever written or removed, with one JSON merge patch (RFC 7386) of
``metadata.labels``: every other label of the Node, other ``numa.kube/*`` keys included, stays as
it is, whoever set it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    FIELD_MANAGER,
    KubeApiError,
    check_labels,
    check_name,
    object_path,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import DEFAULTS as KUBELET_DEFAULTS

# the Topology Manager policies under which a pod's CPUs and devices share one NUMA node
ALIGNING_POLICIES = ("single-numa-node", "restricted")
ALIGNED_LABEL = "numa.kube/aligned"
# the default node selector of the stacks that only make sense where kubelet aligns (the device
# plugin, Volcano's Numatopology publisher)
ALIGNED_SELECTOR = {ALIGNED_LABEL: "true"}
# label key -> the kubelet configuration field whose value in force it carries
POLICY_LABELS = (
    ("numa.kube/cpu-manager-policy", "cpuManagerPolicy"),
    ("numa.kube/memory-manager-policy", "memoryManagerPolicy"),
    ("numa.kube/topology-manager-policy", "topologyManagerPolicy"),
    ("numa.kube/topology-manager-scope", "topologyManagerScope"),
)
OWNED_KEYS = (ALIGNED_LABEL,) + tuple(key for key, _field in POLICY_LABELS)
MERGE_PATCH = "application/merge-patch+json"
# statuses of /configz that no wait cures: the task's credentials may not read it
_REFUSED = (401, 403)


class NodeLabelsError(ProblemsError):
    """The labels cannot be put right; the message says what, why and the fix. Nothing was changed
    unless ``result`` says so."""


def in_force(config, field):
    """The value of ``field`` kubelet runs with: /configz carries every field after kubelet's
    defaulting, and a field it leaves out (a kubelet older than the field) runs the default."""
    value = (config or {}).get(field)
    return KUBELET_DEFAULTS[field] if value in (None, "") else value


def alignment_gaps(config):
    """The one rule for "this kubelet aligns pods to a NUMA node", shared by the device plugin's
    refusal (stacks.resource_plugin.alignment_problems) and the Node label numa.kube/aligned: the settings of
    ``config`` (kubelet's /configz) that keep it from aligning, as (field, value in force, what
    aligns); empty when it aligns. A field kubelet leaves out is its default, ``none``."""
    gaps = []
    cpu = config.get("cpuManagerPolicy") or "none"
    topology = config.get("topologyManagerPolicy") or "none"
    if cpu != "static":
        gaps.append(("cpuManagerPolicy", cpu, ("static",)))
    if topology not in ALIGNING_POLICIES:
        gaps.append(("topologyManagerPolicy", topology, ALIGNING_POLICIES))
    return gaps


def aligns(config):
    """Whether a kubelet running ``config`` aligns pods to a NUMA node (the device plugin's rule)."""
    return not alignment_gaps(config or {})


def labels_from_config(config):
    """The numa.kube labels a Node whose kubelet runs ``config`` carries; KubeApiError when a value
    cannot be a label value (it names the field)."""
    wanted = dict((key, in_force(config, field)) for key, field in POLICY_LABELS)
    for key, field in POLICY_LABELS:
        if not isinstance(wanted[key], str):
            raise KubeApiError("kubelet's /configz has %s %r, which is not a policy name: numa.kube cannot "
                               "label it; check the kubelet's configuration" % (field, wanted[key]))
    check_labels(wanted, "the labels from kubelet's /configz")
    if aligns(config):
        wanted[ALIGNED_LABEL] = "true"
    return wanted


def owned_labels(node):
    """The labels of the Node object ``node`` under OWNED_KEYS (the others are never looked at)."""
    metadata = node.get("metadata") if isinstance(node, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    labels = labels if isinstance(labels, dict) else {}
    return dict((key, labels[key]) for key in OWNED_KEYS if key in labels)


def stale_labels(current, wanted):
    """The labels in ``current`` that disagree with what kubelet runs (``wanted``): each as
    {key, label: the value on the Node, running: the value kubelet runs, None where the label must
    not be there (numa.kube/aligned on a kubelet that does not align)}. A missing label is not stale."""
    return [{"key": key, "label": current[key], "running": wanted.get(key)}
            for key in OWNED_KEYS if key in current and current[key] != wanted.get(key)]


def label_patch(current, wanted, uid=None, resource_version=None):
    """The JSON merge patch that turns the owned labels ``current`` into ``wanted``: only the keys
    that differ, None for a key to remove; None when nothing differs (no request then). With ``uid``
    and ``resource_version`` (the Node's as it was read) the patch carries them as preconditions: the
    API server refuses it (409) when the Node of that name is another object by then, or was written
    since (a cordon, kubelet's status after a restart, another run's labels)."""
    changes = {}
    for key in OWNED_KEYS:
        if key in wanted and current.get(key) != wanted[key]:
            changes[key] = wanted[key]
        elif key not in wanted and key in current:
            changes[key] = None
    if not changes:
        return None
    metadata = {"labels": changes}
    if uid:
        metadata["uid"] = uid
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


def node_ready(node):
    """(True, "") when the Node's condition Ready is True, else (False, what its condition says)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return True, ""
            return False, "Ready=%s%s" % (condition.get("status"),
                                          " (%s: %s)" % (condition.get("reason"), condition.get("message"))
                                          if condition.get("reason") or condition.get("message") else "")
    return False, "no Ready condition yet (kubelet has not reported the Node's status)"


def stale_warning(name, stale):
    """The warning for labels that disagreed with the running kubelet, each named; None for none."""
    if not stale:
        return None
    found = ", ".join("%s=%s while kubelet runs %s"
                      % (item["key"], item["label"], "no NUMA alignment" if item["running"] is None else item["running"])
                      for item in stale)
    return ("Node %s carried numa.kube labels that disagree with what its kubelet runs (read from /configz): "
            "%s. They are put right now. Expected when this run changed kubelet's policies; otherwise kubelet "
            "was changed outside numa.kube (by hand, or a restored configuration) since the labels were set, "
            "and pods may have been placed on the old labels' word" % (name, found))


def _without_diff(result, **changes):
    return dict([(key, value) for key, value in result.items() if key != "diff"] + list(changes.items()))


def _describe_kubelet_error(exc):
    status = getattr(exc, "status", None)
    return "%s%s" % ("HTTP %s: " % status if status else "", exc)


def _observe(api, path, name):
    """One look at the Node and its kubelet: (True, (node, config)) or (False, (why, kind))."""
    node = api.get(path)
    if node is None:
        raise NodeLabelsError("Node %s does not exist: numa.kube.node_labels labels a registered Node, named as "
                              "kubelet registers it (kubectl get nodes); fix name or let the node join first; "
                              "nothing was changed" % name)
    ready, why = node_ready(node)
    if not ready:
        return False, (why, "ready")
    try:
        config = api.kubelet_config(name)
    except KubeApiError as exc:
        if getattr(exc, "status", None) in _REFUSED:
            raise NodeLabelsError("the API server refused to pass the request for kubelet's /configz of Node %s "
                                  "(%s): the task's credentials need get on nodes/proxy (and get and patch on "
                                  "nodes); grant them, or run the task with a kubeconfig that has them; nothing "
                                  "was changed" % (name, _describe_kubelet_error(exc)))
        if getattr(exc, "status", None) is None and not (exc.transient or exc.deadline):
            # an answer that is there but is not a configuration (not JSON, no kubeletconfig
            # object): kubelet is up, and asking again brings the same
            raise NodeLabelsError("kubelet of Node %s answered /configz with something that is not its configuration "
                                  "(%s): no wait cures that; check what answers on the node's kubelet port and that "
                                  "nothing between the API server and kubelet rewrites its answers; nothing was "
                                  "changed" % (name, exc))
        return False, (_describe_kubelet_error(exc), "configz")
    return True, (node, config)


# how often a patch refused because the Node was written since it was read is read and tried again
CONFLICT_RETRIES = 5
# what the API server says when a precondition (uid, resourceVersion) does not hold, as opposed to
# another 409 (an admission webhook's, say), which no read again cures
_CONFLICT_TEXT = ": 409 Operation cannot be fulfilled on "
_UID_CHANGED_TEXT = ": 422 Node "


class _Conflict(Exception):
    """The label patch met a Node written since it was read (409): read it again."""


def run(api, params, check_mode, wait_for):
    """Put the Node's numa.kube labels right (or take them off); the module's result.

    ``wait_for(check)`` repeats ``check`` until done or the task's deadline (KubeApi.wait_for).

    The patch is pinned to the Node's uid and resourceVersion as read together with /configz, so
    labels computed from a kubelet that has restarted since (another run taking the node out, say)
    never land: the API server refuses the patch, and the Node and kubelet are read again."""
    name = check_name(params["name"], "name")
    path = object_path("v1", "Node", name)
    first_uid = conflict = None
    for _attempt in range(CONFLICT_RETRIES + 1):
        try:
            return _label_once(api, params, name, path, check_mode, wait_for, first_uid, conflict)
        except _Conflict as exc:
            first_uid, conflict = exc.args
    raise NodeLabelsError("the patch of Node %s's numa.kube labels was refused %d times as the Node was written "
                          "between each read and the patch (%s): something writes it without pause; find what "
                          "(kubectl get node %s --show-managed-fields) and run again; nothing was changed"
                          % (name, CONFLICT_RETRIES + 1, conflict, name), {"changed": False, "labels": {}})


def _label_once(api, params, name, path, check_mode, wait_for, first_uid, conflict):
    """One read of the Node (and its kubelet) and at most one patch; _Conflict on a 409."""
    result = {"changed": False, "labels": {}, "stale": [], "aligned": False}
    if params["state"] == "absent":
        node = api.get(path)
        if node is None:
            result["warning"] = "Node %s does not exist: there are no labels to take off" % name
            result["diff"] = {"before": {}, "after": {}}
            return result
        current, wanted = owned_labels(node), {}
    else:
        done, found, waited = wait_for(lambda: _observe(api, path, name))
        if not done:
            why, kind = found
            if kind == "ready":
                raise NodeLabelsError(
                    "Node %s is not Ready after %d s (%s): its labels must say what a running kubelet runs, and "
                    "this one is not proven to run; fix the kubelet (journalctl -u kubelet on the node, kubectl "
                    "describe node %s) or raise wait_timeout; nothing was changed" % (name, waited, why, name))
            raise NodeLabelsError(
                "kubelet of Node %s did not answer /configz through the API server within %d s (%s): nothing "
                "else proves which policies it runs; check that the API server reaches the kubelet's port "
                "(10250) and that kubelet serves /configz (enableDebuggingHandlers), or raise wait_timeout; "
                "nothing was changed" % (name, waited, why))
        node, config = found
        current, wanted = owned_labels(node), labels_from_config(config)
        result["stale"] = stale_labels(current, wanted)
        result["aligned"] = ALIGNED_LABEL in wanted
    metadata = node.get("metadata") if isinstance(node, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    if not (isinstance(metadata.get("uid"), str) and metadata["uid"]
            and isinstance(metadata.get("resourceVersion"), str) and metadata["resourceVersion"]):
        raise NodeLabelsError("the API server's answer for Node %s has no uid or resourceVersion (metadata: %.200r), "
                              "which every Kubernetes object has and the label patch is pinned to; check that "
                              "the kubeconfig names a Kubernetes API server; nothing was changed"
                              % (name, metadata), {"changed": False, "labels": {}})
    if first_uid is not None and metadata.get("uid") != first_uid:
        raise NodeLabelsError("the patch of Node %s's numa.kube labels failed: %s; 409: the Node was deleted and "
                              "registered again since it was read (uid %s, now %s): run again to label the new one "
                              "from its own kubelet; nothing was changed"
                              % (name, conflict, first_uid, metadata.get("uid")), {"changed": False, "labels": {}})
    result["labels"] = wanted
    result["diff"] = {"before": current, "after": wanted}
    patch = label_patch(current, wanted, metadata.get("uid"), metadata.get("resourceVersion"))
    if patch is None:
        return result
    result["changed"] = True
    if check_mode:
        return result
    try:
        answer = api.request("PATCH", path, body=patch, content_type=MERGE_PATCH, field_manager=FIELD_MANAGER)
    except KubeApiError as exc:
        if getattr(exc, "status", None) == 409 and _CONFLICT_TEXT in str(exc):
            raise _Conflict(metadata.get("uid"), exc)
        if getattr(exc, "status", None) == 422 and _UID_CHANGED_TEXT in str(exc):
            # the API server's answer to a merge patch whose uid is not the object's (measured on
            # kube-apiserver 1.36: 422 "metadata.uid: Invalid value ... field is immutable")
            raise NodeLabelsError("the patch of Node %s's numa.kube labels failed: %s; the Node was deleted and "
                                  "registered again since it was read (uid %s): run again to label the new one from "
                                  "its own kubelet; nothing was changed" % (name, exc, metadata.get("uid")),
                                  _without_diff(result, changed=False))
        raise NodeLabelsError("the patch of Node %s's numa.kube labels %s failed: %s; fix what it names (403: the "
                              "task's credentials need patch on nodes) and run again, which sends only what is "
                              "still not right"
                              % (name, patch["metadata"]["labels"], exc), _without_diff(result, changed=False))
    after = owned_labels(answer)
    if after != wanted:
        raise NodeLabelsError("Node %s was patched but its numa.kube labels are %s, not %s: something rewrote "
                              "them (an admission webhook or policy on Nodes?); find it, then run again"
                              % (name, after, wanted), _without_diff(result, changed=True))
    return result
