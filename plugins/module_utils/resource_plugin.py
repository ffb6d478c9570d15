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

from ansible_collections.numa.kube.plugins.module_utils.kube_api import (
    check_namespace,
    label_selector,
    option_problems,
)
from ansible_collections.numa.kube.plugins.module_utils.kube_wait import daemonset_ready

APP = "numa-resource-plugin"
RESOURCE_PREFIX = "numa-align/numa-"
ALIGNING_POLICIES = ("single-numa-node", "restricted")
DEFAULT_SOCKET_DIR = "/var/lib/kubelet/device-plugins"
DEFAULT_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                       {"operator": "Exists", "effect": "NoSchedule"}]
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
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(meta["labels"])}, "spec": pod_spec}}},
    ]


def alignment_gaps(config):
    """The one rule for "this kubelet aligns pods to a NUMA node", shared by the device plugin's
    refusal (alignment_problems) and the Node label numa.kube/aligned (node_labels): the settings of
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


class PluginError(Exception):
    """The stack cannot be deployed as asked; ``problems`` says why, node by node."""

    def __init__(self, problems, result=None):
        super(PluginError, self).__init__("; ".join(problems))
        self.problems = problems
        self.result = result or {}


def check_params(params):
    """Every option that ends up in an object, a URL or a selector, checked before any request."""
    problems = option_problems(params, ("node_selector", "labels"))
    if not 1 <= params["capacity"] <= MAX_CAPACITY:
        problems.append("capacity must be between 1 and %d devices per NUMA node (the most pods or containers "
                        "one NUMA node can take; kubelet lists every device), got %d" % (MAX_CAPACITY, params["capacity"]))
    if not str(params.get("socket_dir") or "").startswith("/"):
        problems.append("socket_dir must be an absolute path on the nodes, got %r" % params.get("socket_dir"))
    if problems:
        raise PluginError(problems)


def planned_selection(nodes, selector, planned):
    """The Nodes of ``nodes`` that ``selector`` (label: value) will match once the same run's node
    phase is done: a node in ``planned`` (name: the kubelet configuration it will run) then carries
    the numa.kube labels the rollout sets from that configuration, in place of the ones it has."""
    # node_labels builds on this module's alignment rule, so it is imported here, not at the top
    from ansible_collections.numa.kube.plugins.module_utils import node_labels

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
            done, _value, waited = wait_for(lambda: (not _pods_of(api, params), None), params["wait_timeout"])
            if not done:
                raise PluginError(["the plugin's pods were still there %d s after the DaemonSet was deleted"
                                   % waited], result)
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
    problems = []
    for name in names:
        config = planned[name] if name in planned else api.kubelet_config(name)
        problems.extend(alignment_problems(name, config))
    if problems:
        raise PluginError(problems)

    api.claim(stack)
    for obj in stack:
        changed, before, after = api.apply(obj, check_mode)
        result["objects"].append({"object": describe_ref(obj), "changed": changed})
        if changed:
            result["changed"] = True
            result["diff"].append({"before": before, "after": after, "before_header": describe_ref(obj),
                                   "after_header": describe_ref(obj)})
    if check_mode or not params["wait"]:
        return result

    daemonset = stack[-1]
    ds_path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (params["namespace"], params["name"])
    done, text, waited = wait_for(lambda: daemonset_ready(api.get(ds_path), len(names)), params["wait_timeout"])
    if not done:
        raise PluginError(["the DaemonSet %s/%s did not roll out within %d s: %s"
                           % (params["namespace"], daemonset["metadata"]["name"], waited, text)], result)
    result["rollout_seconds"] = round(waited, 1)

    def advertised():
        found = {}
        missing = []
        for node in api.nodes(params.get("node_selector")):
            name = node["metadata"]["name"]
            found[name] = dict(("%s%d" % (RESOURCE_PREFIX, numa), count)
                               for numa, count in sorted(numa_resources(node).items()))
            missing.extend(allocatable_problems(node, params["capacity"], _expected_ids(params, name)))
        return not missing, (found, missing)

    done, (found, missing), waited = wait_for(advertised, params["wait_timeout"])
    result["nodes"] = found
    if not done:
        raise PluginError(["the plugin runs but kubelet does not show its resources within %d s: %s"
                           % (waited, "; ".join(missing))], result)
    return result


def _pods_of(api, params):
    answer = api.get("/api/v1/namespaces/%s/pods" % check_namespace(params["namespace"]),
                     label_selector=label_selector({"app.kubernetes.io/instance": params["name"], "app": APP}))
    return (answer or {}).get("items", [])


def describe_ref(obj):
    meta = obj["metadata"]
    return "%s %s/%s" % (obj["kind"], meta["namespace"], meta["name"]) if meta.get("namespace") else \
        "%s %s" % (obj["kind"], meta["name"])
