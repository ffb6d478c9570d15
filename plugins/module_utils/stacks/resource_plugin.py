# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA device plugin stack: its objects, and what a node needs for the plugin to align pods.

The plugin (the node agent's ``device-plugin`` program) advertises ``numa-align/numa-N`` per NUMA
node with CPUs. A pod asking for one gets the node's devices, and only the Topology Manager turns
that into CPUs and memory of node N: with kubelet's static CPU Manager and the policy
``single-numa-node`` or ``restricted``. Under any other policy the resource is handed out and
nothing is aligned, which is worse than no plugin, so such nodes are refused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.client import bounded_map
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    check_namespace,
    label_selector,
    option_problems,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    max_unavailable,
    node_ready,
    wait_daemonset,
    wait_pending,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet import labels as node_labels
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import (
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
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import ALIGNING_POLICIES, alignment_gaps

APP = "numa-resource-plugin"
RESOURCE_PREFIX = "numa-align/numa-"
DEFAULT_SOCKET_DIR = "/var/lib/kubelet/device-plugins"
DEFAULT_RESOURCES = {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "128Mi"}}
# kubelet lists every device of a resource in the Node's status and in each ListAndWatch answer;
# far more slots than pods a node can run (110 by default, 250 at most on EKS) only costs
MAX_CAPACITY = 1000


def labels(name, extra=None):
    found = {"app": APP, "app.kubernetes.io/name": APP,
             "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "numa.kube"}
    found.update(extra or {})
    return found


def objects(params):
    """ServiceAccount, ConfigMap and DaemonSet of the stack, in the order they are applied."""
    name, namespace = params["name"], params["namespace"]
    meta = {"name": name, "namespace": namespace, "labels": labels(name, params.get("labels"))}
    selector = {"app": meta["labels"]["app"], "app.kubernetes.io/instance": name}
    socket_dir = params["socket_dir"]
    container = {
        "name": "plugin",
        "image": params["image"],
        "imagePullPolicy": params["image_pull_policy"],
        "args": ["device-plugin", "--sysfs=/sys"],
        "envFrom": [{"configMapRef": {"name": name}}],
        "resources": params.get("resources") or DEFAULT_RESOURCES,
        # root only to write into kubelet's folder (root's own, no capability needed); nothing else
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "device-plugins", "mountPath": socket_dir}],
    }
    pod_spec = {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,  # the plugin talks to kubelet only
        "priorityClassName": params["priority_class_name"],
        "nodeSelector": params.get("node_selector") or {},
        "tolerations": DEFAULT_TOLERATIONS if params.get("tolerations") is None else params["tolerations"],
        "terminationGracePeriodSeconds": 10,
        "containers": [container],
        "volumes": [{"name": "device-plugins", "hostPath": {"path": socket_dir, "type": "Directory"}}],
    }
    if not pod_spec["nodeSelector"]:
        del pod_spec["nodeSelector"]
    if not pod_spec["priorityClassName"]:
        del pod_spec["priorityClassName"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta), "automountServiceAccountToken": False},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta),
         "data": {"NUMA_CAPACITY": str(params["capacity"]), "NUMA_SOCKET_DIR": socket_dir}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": dict(meta), "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable(
                params.get("max_unavailable", DEFAULT_MAX_UNAVAILABLE))}},
            "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": pod_spec}}},
    ]


def alignment_problems(node, config):
    """Why the kubelet of ``node``, running ``config``, would not align pods to the resource."""
    problems = []
    for field, value, _aligning in alignment_gaps(config):
        if field == "cpuManagerPolicy":
            problems.append("%s: kubelet runs cpuManagerPolicy %r; numa-align/numa-N pins a pod's CPUs to its "
                            "NUMA node only under the static CPU Manager: set kubelet_cpu_manager_policy static "
                            "(numa.kube.kubelet) or leave this node out with node_selector" % (node, value))
        else:
            problems.append("%s: kubelet runs topologyManagerPolicy %r; only %s make the Topology Manager put a "
                            "pod on the NUMA node of its numa-align/numa-N devices: set "
                            "kubelet_topology_manager_policy (numa.kube.kubelet) or leave this node out with "
                            "node_selector" % (node, value, " or ".join(ALIGNING_POLICIES)))
    return problems


def numa_resources(node, prefix=RESOURCE_PREFIX):
    """{NUMA id: allocatable count} of the plugin's resources on a Node object."""
    found = {}
    for name, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            try:
                found[int(name[len(prefix):])] = int(value)
            except ValueError:
                found[int(name[len(prefix):])] = value
    return found


def allocatable_problems(node, capacity, expected=None, prefix=RESOURCE_PREFIX):
    """What is missing from a Node's allocatable: every NUMA node with CPUs at ``capacity``.

    ``expected`` lists the NUMA ids with CPUs when the caller knows them (the node phase's facts);
    without it, at least one resource must be there and every one at capacity.
    """
    name = node["metadata"]["name"]
    found = numa_resources(node, prefix)
    ids = sorted(expected) if expected is not None else sorted(found)
    if not ids:
        return ["%s: no %sN in allocatable yet" % (name, prefix)]
    return ["%s: %s%d is %s in allocatable, expected %d" % (name, prefix, numa, found.get(numa, "absent"), capacity)
            for numa in ids if found.get(numa) != capacity]


class PluginError(ProblemsError):
    """The stack cannot be deployed as asked; ``problems`` says why, node by node."""


def check_params(params):
    """Every option that ends up in an object, a URL or a selector, checked before any request."""
    problems = option_problems(params, ("node_selector", "labels"))
    if not 1 <= params["capacity"] <= MAX_CAPACITY:
        problems.append("capacity must be between 1 and %d devices per NUMA node (the most pods or containers "
                        "one NUMA node can take; kubelet lists every device), got %d" % (MAX_CAPACITY, params["capacity"]))
    if not str(params.get("socket_dir") or "").startswith("/"):
        problems.append("socket_dir must be an absolute path on the nodes, got %r" % params.get("socket_dir"))
    problems.extend(share_problems(params))
    if problems:
        raise PluginError(problems)


def planned_selection(nodes, selector, planned):
    """The Nodes of ``nodes`` that ``selector`` (label: value) will match once the same run's node
    phase is done: a node in ``planned`` (name: the kubelet configuration it will run) then carries
    the numa.kube labels the rollout sets from that configuration, in place of the ones it has."""

    chosen = []
    for node in nodes:
        name = node["metadata"]["name"]
        labels = dict((node["metadata"].get("labels") or {}))
        if name in planned:
            for key in node_labels.OWNED_KEYS:
                labels.pop(key, None)
            labels.update(node_labels.labels_from_config(planned[name]))
        if all(labels.get(key) == value for key, value in selector.items()):
            chosen.append(node)
    return chosen


def _expected_ids(params, node):
    expected = (params.get("numa_nodes") or {}).get(node)
    return None if expected is None else [int(numa) for numa in expected]


def run(api, params, check_mode, wait_for):
    """Apply (or remove) the stack and prove it; returns the module's result (changed, diff...)."""
    result = {"changed": False, "objects": [], "nodes": {}, "diff": []}
    stack = objects(params)
    if params["state"] == "absent":
        for obj in reversed(stack):
            changed, before = api.delete(obj, check_mode)
            result["objects"].append({"object": describe_ref(obj), "changed": changed})
            if changed:
                result["changed"] = True
                result["diff"].append({"before": before, "after": {}, "before_header": describe_ref(obj)})
        if params["wait"] and not check_mode and result["changed"]:
            def gone():
                left = len(_pods_of(api, params))
                return not left, left

            outcome = wait_for(gone, params["wait_timeout"], progress=lambda left: -left)
            if not outcome[0]:
                raise PluginError(["%d of the plugin's pods were still there after the DaemonSet was deleted: %s"
                                   % (outcome[1], why_waiting_ended(outcome, params["wait_timeout"]))], result)
        return result

    # a preview reads what the same run's node phase would leave, where the caller knows it
    planned = (params.get("kubelet_plan") or {}) if check_mode else {}
    if planned:
        nodes = planned_selection(api.nodes(), params.get("node_selector") or {}, planned)
    else:
        nodes = api.nodes(params.get("node_selector"))
    names = [node["metadata"]["name"] for node in nodes]
    if not names:
        raise PluginError(["no Node matches node_selector %r: the plugin would run nowhere; label the nodes "
                           "that should advertise numa-align/numa-N or change node_selector"
                           % (params.get("node_selector") or {})])
    allowed = allowed_down(params, len(names))
    down = dict((name, why) for name, why in not_ready(nodes).items() if name not in planned)
    # each kubelet's configuration, a few at a time; one that does not answer is unavailable
    asked = [name for name in names if name not in planned and name not in down]
    remaining = getattr(api, "remaining", None)
    answers = bounded_map(api.kubelet_config, asked, stop=(lambda: remaining() <= 0) if remaining else None)
    problems, late = [], []
    for name in names:
        if name in down:
            continue
        config, error = (planned[name], None) if name in planned else answers[name]
        if error is not None and getattr(error, "deadline", False):
            late.append(name)  # not asked in time: nothing is known of it, it is not "unavailable"
            continue
        if error is not None:
            down[name] = "its kubelet's /configz does not answer: %s" % error
            continue
        problems.extend(alignment_problems(name, config))
    if late:
        problems.append("the task's deadline passed before the kubelets of %d selected nodes were asked for /configz "
                        "(%s%s): nothing was applied; raise wait_ceiling (the task's hard limit) for a cluster "
                        "this size" % (len(late), ", ".join(late[:10]), ", ..." if len(late) > 10 else ""))
    if problems:
        raise PluginError(problems)
    if len(down) > allowed:
        raise PluginError([too_many_down(down, allowed, len(names), "Nothing was applied")])

    api.claim(stack)
    for obj in stack:
        changed, before, after = api.apply(obj, check_mode)
        result["objects"].append({"object": describe_ref(obj), "changed": changed})
        if changed:
            result["changed"] = True
            result["diff"].append({"before": before, "after": after, "before_header": describe_ref(obj),
                                   "after_header": describe_ref(obj)})
    warn_down(result, down)
    if check_mode or not params["wait"]:
        return result

    stall = params["wait_timeout"]
    daemonset = stack[-1]
    ds_path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (params["namespace"], params["name"])
    outcome = wait_daemonset(lambda: api.get(ds_path), names, wait_for, stall, down, allowed,
                             daemonset_pods(api, params["namespace"], daemonset["spec"]["selector"]["matchLabels"]),
                             nodes_by_name(api, params.get("node_selector") or {}))
    done, text, waited = outcome
    if not done:
        raise PluginError(["the DaemonSet %s/%s did not roll out: %s; %s"
                           % (params["namespace"], daemonset["metadata"]["name"], why_waiting_ended(outcome, stall),
                              text)], result)
    result["rollout_seconds"] = round(waited, 1)

    found = result["nodes"]
    selector = params.get("node_selector") or {}

    def advertised(pending):
        """Each pending node's allocatable: one list of Nodes (a GET each when few are left)."""
        answers = {}
        params_ = {"label_selector": label_selector(selector, "node_selector")} if selector else {}
        for name, node in api.named("/api/v1/nodes", pending, **params_).items():
            if node is None:
                answers[name] = "%s: the Node is gone" % name
            elif not node_ready(node) and (name in down or len(down) < allowed):
                down[name] = not_ready([node])[name]
                answers[name] = None
            else:
                missing = allocatable_problems(node, params["capacity"], _expected_ids(params, name))
                answers[name] = "; ".join(missing) or None
                if not missing:
                    found[name] = dict(("%s%d" % (RESOURCE_PREFIX, numa), count)
                                       for numa, count in sorted(numa_resources(node).items()))
        return answers

    outcome = wait_pending([name for name in names if name not in down], advertised, wait_for, stall)
    warn_down(result, down)
    if not outcome[0]:
        raise PluginError(["the plugin runs but kubelet does not show its resources: %s; %s"
                           % (why_waiting_ended(outcome, stall), "; ".join(v for _k, v in sorted(outcome[1].items())))],
                          result)
    return result


def _pods_of(api, params):
    answer = api.get("/api/v1/namespaces/%s/pods" % check_namespace(params["namespace"]),
                     label_selector=label_selector({"app.kubernetes.io/instance": params["name"], "app": APP}))
    return (answer or {}).get("items", [])


def describe_ref(obj):
    meta = obj["metadata"]
    return "%s %s/%s" % (obj["kind"], meta["namespace"], meta["name"]) if meta.get("namespace") else \
        "%s %s" % (obj["kind"], meta["name"])
