# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NodeResourceTopology scheduling path's options, its CRD file and its objects, checked and built
before any request but one (the live ``system:kube-scheduler`` rules the scheduler's role follows);
stacks/nrt_scheduler.py deploys them, waits for them and takes them out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import re

from ansible_collections.numa.kube.plugins.module_utils.stacks import publisher as node_publisher
from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    KubeApiError,
    check_labels,
    check_name,
    check_namespace,
    image_problem,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.numa.nrt import NRT_API, NRT_COLLECTION, NRT_KIND
from ansible_collections.numa.kube.plugins.module_utils.stacks.publisher import PUBLISHER_KUBELET_TLS, Published
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import share_problems

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module
    yaml = None
    HAS_YAML = False

# which of numa.kube's stacks this is (k8s.runner.connect's stack): its objects carry it, and the
# NodeResourceTopologies the publisher writes too
STACK = "topology"
NRT = Published(NRT_API.partition("/")[0], NRT_API.partition("/")[2], NRT_COLLECTION.rsplit("/", 1)[1], NRT_KIND)
CRD_NAME = "%s.%s" % (NRT.plural, NRT.group)
CRD_REF = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": CRD_NAME}}
SCHEDULER = "numa-topology-scheduler"
PUBLISHER = "numa-nrt-publisher"
PUBLISHER_POLICY = "numa-kube.nrt-publisher-own-node"
PLUGIN = "NodeResourceTopologyMatch"
SCHEDULER_BINARY = "/nrt-scheduler"
CONFIG_DIR = "/etc/numa-topology-scheduler"
CONFIG_KEY = "config.yaml"
# the digest of the configuration on the scheduler's pod template: a new configuration, a new pod
CONFIG_ANNOTATION = "numa.kube/scheduler-config-sha256"
# kube-scheduler's secure port (/readyz, /livez: always allowed, no credentials needed)
SCHEDULER_PORT = 10259
# a user and group without a name in any image: the scheduler needs no file of its image but itself
SCHEDULER_UID = 65532
# scheduler-plugins apis/config/v1 ScoringStrategyType; the first three score nodes only under the
# single-numa-node Topology Manager policy, LeastNUMANodes under any (pkg/noderesourcetopology/README.md)
SCORING_STRATEGIES = ("MostAllocated", "BalancedAllocation", "LeastAllocated", "LeastNUMANodes")
# cacheResyncPeriodSeconds: 0 (or unset) is the passthrough cache, which reads the objects as they
# are; above 0 (with the Reserve extension point on) the over-reserving cache, resynced that often.
# scheduler-plugins advises against less than 5 s; above an hour pods that ended stay counted too long
MIN_RESYNC, MAX_RESYNC = 5, 3600
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
# the cache's view of each node's pods (args cache.informerMode; podprovider.go): Shared is
# kube-scheduler's own pod informer, which leaves out Succeeded and Failed pods, and the cache
# counts the Running ones, as kubelet's PodResources List (the publisher's pods fingerprint) counts
# its active pods; Dedicated (scheduler-plugins' default) counts every bound pod that is not
# Pending, so a Failed pod left in the API (a TopologyAffinityError, a finished Job) keeps the
# fingerprints apart and the node refused until it is deleted
INFORMER_MODES = ("Shared", "Dedicated")
# which pods of other schedulers mark a node's cached object as stale until the next resync (args
# cache.foreignPodsDetect; cache/foreign_pods.go): OnlyExclusiveResources those that take exclusive
# CPUs or devices, the only ones a NodeResourceTopology's available counts; All (scheduler-plugins'
# default) any, a DaemonSet pod's status update included
FOREIGN_PODS_DETECT = ("OnlyExclusiveResources", "All", "None")
MAX_VERBOSITY = 10
# scheduler names already taken by the schedulers a numa.kube cluster runs: a second scheduler
# under one of them would place the same pods as the first
TAKEN_SCHEDULER_NAMES = {"default-scheduler": "the default scheduler's", "volcano": "Volcano's scheduler's"}
DEFAULT_SCHEDULER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")
# a zone of a NodeResourceTopology the plugin reads: type Node (ZONE_TYPE), named node-<NUMA id>
# (noderesourcetopology-api pkg/apis/topology/v1alpha2/helper: ZoneTypeNUMANode, numanode.NameToID)
ZONE_NAME = re.compile(r"^node-(0|[1-9][0-9]*)\Z")
CRD_SOURCE = "noderesourcetopology-api's manifests/crd.yaml (v0.1.2 is the one numa.kube is tested with)"
# the API server's own roles (its RBAC bootstrap policy, kept for its version): kube-scheduler's,
# whose rules numa.kube copies less the lease ones, and the volume binder's, bound as it is
KUBE_SCHEDULER_ROLE = "system:kube-scheduler"
VOLUME_SCHEDULER_ROLE = "system:volume-scheduler"
# leader election's group: Lease locks and LeaseCandidates (coordinated leader election). With
# leaderElect false kube-scheduler makes no elector and no lease candidate (kubernetes v1.34
# cmd/kube-scheduler/app/options/options.go Config: no LeaderElectionConfig; app/server.go Run:
# both only when it is set), so it needs none of them
LEASE_GROUP = "coordination.k8s.io"
LEASE_RESOURCES = ("leases", "leasecandidates")
_ROLE_REF = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
# what an earlier build of this module applied and this one no longer does: deleted when found
# (numa.kube's only); the binding of system:kube-scheduler, whose lease rights the scheduler's own
# ClusterRole now leaves out
RETIRED = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "numa-kube:%s:kube-scheduler" % SCHEDULER}}]


class NrtSchedulerError(ProblemsError):
    """The stack cannot be deployed or removed as asked; ``problems`` says why and what to do."""


def _labels(name):
    return {"app": name, "app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "numa.kube"}


# --- the options and the CRD file, checked before any request -----------------------------------------

def option_problems(params):
    """Every problem of the options, as sentences naming the value, the rule and the fix."""
    problems = []

    def check(callable_):
        try:
            callable_()
        except KubeApiError as exc:
            problems.append(str(exc))

    check(lambda: check_namespace(params.get("namespace"), "namespace"))
    check(lambda: check_labels(params.get("publisher_node_selector") or {}, "publisher_node_selector"))
    check(lambda: check_labels(params.get("scheduler_node_selector") or {}, "scheduler_node_selector"))
    name = params.get("scheduler_name")
    if not isinstance(name, str) or not _DNS_LABEL.match(name):
        problems.append("scheduler_name %r is not a DNS-1123 label (lower-case letters, digits and '-', starting and "
                        "ending with a letter or digit, at most 63 characters), as pods name their scheduler in "
                        "spec.schedulerName: fix it (e.g. numa-topology-scheduler)" % (name,))
    elif name in TAKEN_SCHEDULER_NAMES:
        problems.append("scheduler_name %r is %s name: two schedulers under one name both place the same pods; "
                        "choose another (e.g. numa-topology-scheduler)" % (name, TAKEN_SCHEDULER_NAMES[name]))
    strategy = params.get("scoring_strategy")
    if strategy not in SCORING_STRATEGIES:
        problems.append("scoring_strategy %r is not one of %s (NodeResourceTopologyMatch's scoringStrategy.type): "
                        "pick one; the first three score only nodes whose kubelet runs the single-numa-node "
                        "Topology Manager policy, LeastNUMANodes nodes of any policy"
                        % (strategy, ", ".join(SCORING_STRATEGIES)))
    period = params.get("cache_resync_period")
    if isinstance(period, bool) or not isinstance(period, int) or \
            not (period == 0 or MIN_RESYNC <= period <= MAX_RESYNC):
        problems.append("cache_resync_period must be 0 (no reserve cache: the plugin reads the NodeResourceTopologies "
                        "as they are) or %d to %d seconds (how often the over-reserving cache is resynced with them; "
                        "scheduler-plugins advises at least %d), got %r: set it to %d or more, or to 0"
                        % (MIN_RESYNC, MAX_RESYNC, MIN_RESYNC, period, MIN_RESYNC))
    for option, choices, what in (
            ("informer_mode", INFORMER_MODES, "the cache's informerMode: which pods it counts on a node"),
            ("foreign_pods_detect", FOREIGN_PODS_DETECT, "the cache's foreignPodsDetect: which pods of other "
                                                         "schedulers make a node's object stale")):
        if params.get(option, choices[0]) not in choices:
            problems.append("%s %r is not one of %s (%s): pick one" % (option, params.get(option), ", ".join(choices),
                                                                       what))
    verbosity = params.get("scheduler_verbosity", 2)
    if isinstance(verbosity, bool) or not isinstance(verbosity, int) or not 0 <= verbosity <= MAX_VERBOSITY:
        problems.append("scheduler_verbosity must be kube-scheduler's log level, 0 to %d (--v; 2 logs each binding and "
                        "the cache's reserves and foreign pods, 4 each resync and fingerprint mismatch), got %r: fix it"
                        % (MAX_VERBOSITY, verbosity))
    if params.get("image_pull_policy") not in PULL_POLICIES:
        problems.append("image_pull_policy %r is not one of %s: fix it"
                        % (params.get("image_pull_policy"), ", ".join(PULL_POLICIES)))
    if (params.get("publisher_kubelet_tls") or "node-cert") not in PUBLISHER_KUBELET_TLS:
        problems.append("publisher_kubelet_tls %r is not known: it must be one of %s"
                        % (params.get("publisher_kubelet_tls"), ", ".join(PUBLISHER_KUBELET_TLS)))
    problems.extend(_numa_nodes_problems(params.get("numa_nodes")))
    if params.get("state") == "present":
        for option, what in (("scheduler_image", "the image of kube-scheduler with NodeResourceTopologyMatch, whose "
                                                 "binary is at %s" % SCHEDULER_BINARY),
                             ("publisher_image", "the node agent image (agent/Containerfile) as you pushed it")):
            if not params.get(option):
                problems.append("%s is required with state present: set it to %s" % (option, what))
                continue
            problem = image_problem(params[option], option)
            if problem:
                problems.append("%s; set it to %s" % (problem, what))
    problems.extend(share_problems(params))
    return problems


def _numa_nodes_problems(numa_nodes):
    if numa_nodes is None:
        return []
    if not isinstance(numa_nodes, dict):
        return ["numa_nodes must map Node names to lists of NUMA node ids (numa_topology.node_ids of "
                "numa.kube.topology_facts), got %r: fix it or leave it empty" % (numa_nodes,)]
    bad = []
    for node, ids in sorted(numa_nodes.items(), key=lambda item: str(item[0])):
        try:
            check_name(node, "numa_nodes: the Node name")
        except KubeApiError as exc:
            bad.append(str(exc))
            continue
        if not isinstance(ids, list) or not ids or \
                any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
            bad.append("numa_nodes: %s has %r, not a list of NUMA node ids (whole numbers from 0, such as [0, 1], "
                       "from numa_topology.node_ids of numa.kube.topology_facts): fix it or leave the node out"
                       % (node, ids))
    return bad


def crd_problems(documents, where):
    """What keeps ``documents`` (the CRD file's) from being the NRT CRD numa.kube applies."""
    docs = [doc for doc in documents if doc is not None]
    fix = "give %s" % CRD_SOURCE
    if len(docs) != 1:
        return ["crd %s holds %d documents: it must hold the one CustomResourceDefinition %s; %s"
                % (where, len(docs), CRD_NAME, fix)]
    doc = docs[0]
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or doc.get("apiVersion") != "apiextensions.k8s.io/v1" or \
            doc.get("kind") != "CustomResourceDefinition" or meta.get("name") != CRD_NAME:
        what = "%s %s %s" % (doc.get("apiVersion"), doc.get("kind"), (meta or {}).get("name")) \
            if isinstance(doc, dict) else repr(doc)[:80]
        return ["crd %s is %s, not the apiextensions.k8s.io/v1 CustomResourceDefinition %s; %s"
                % (where, what, CRD_NAME, fix)]
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    problems = []
    names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
    if spec.get("group") != NRT.group or names.get("plural") != NRT.plural or names.get("kind") != NRT.kind or \
            spec.get("scope") != "Cluster":
        problems.append("crd %s defines group %r, plural %r, kind %r, scope %r: the scheduler reads the cluster-scoped "
                        "%s %s; %s" % (where, spec.get("group"), names.get("plural"), names.get("kind"),
                                       spec.get("scope"), NRT.group, NRT.kind, fix))
    if not serves(doc, NRT.version):
        problems.append("crd %s does not serve %s (it serves %s): NodeResourceTopologyMatch reads %s; give the CRD of "
                        "noderesourcetopology-api v0.1.0 or later (v0.1.2 is the one numa.kube is tested with)"
                        % (where, NRT.version, ", ".join(served_versions(doc)) or "no version", NRT.api_version))
    return problems


def served_versions(crd):
    spec = (crd or {}).get("spec") or {}
    return [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served")]


def serves(crd, version):
    return version in served_versions(crd)


def read_crd(path):
    """The NRT CRD from the file at ``path``, as numa.kube applies it (no status, no creation
    time); NrtSchedulerError naming the file, the rule and the fix."""
    if yaml is None:
        raise NrtSchedulerError("the PyYAML Python library is needed to read crd %s: install it where the module runs"
                                % path)
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        raise NrtSchedulerError("crd %s cannot be read (%s): give the path, on the host the module runs on, of %s"
                                % (path, exc, CRD_SOURCE))
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise NrtSchedulerError("crd %s is not valid YAML (%s): give %s" % (path, exc, CRD_SOURCE))
    problems = crd_problems(documents, path)
    if problems:
        raise NrtSchedulerError(problems)
    doc = copy.deepcopy([d for d in documents if d is not None][0])
    doc.pop("status", None)
    doc["metadata"].pop("creationTimestamp", None)
    return doc


def check_options(params):
    """The CRD to apply (None when not given or for absent), once every option is right;
    NrtSchedulerError listing every problem otherwise. Nothing is asked of the API server."""
    problems = option_problems(params)
    crd = None
    if params.get("state") == "present" and params.get("crd"):
        try:
            crd = read_crd(params["crd"])
        except NrtSchedulerError as exc:
            problems.extend(exc.problems)
    if problems:
        raise NrtSchedulerError(problems)
    return crd


# --- the objects ---------------------------------------------------------------------------------------

def scheduler_config(params):
    """The KubeSchedulerConfiguration: one profile under scheduler_name with NodeResourceTopologyMatch
    at every extension point it implements (multiPoint: filter, score, reserve...) besides
    kube-scheduler's defaults; its args scoringStrategy.type, cacheResyncPeriodSeconds and the
    cache's informerMode and foreignPodsDetect (scheduler-plugins apis/config/v1
    NodeResourceTopologyMatchArgs). One replica, so no leader
    election (nor the leases it would need). No clientConnection: the pod's service account."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{
            "schedulerName": params["scheduler_name"],
            "plugins": {"multiPoint": {"enabled": [{"name": PLUGIN}]}},
            "pluginConfig": [{"name": PLUGIN, "args": {
                "scoringStrategy": {"type": params["scoring_strategy"]},
                "cacheResyncPeriodSeconds": params["cache_resync_period"],
                "cache": {"informerMode": params.get("informer_mode") or INFORMER_MODES[0],
                          "foreignPodsDetect": params.get("foreign_pods_detect") or FOREIGN_PODS_DETECT[0]}}}],
        }],
    }


def config_text(params):
    """The configuration file's text: the same options give the same bytes (and digest)."""
    return yaml.safe_dump(scheduler_config(params), default_flow_style=False, sort_keys=False)


def config_digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def namespace_object(params):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": params["namespace"], "labels": _labels(SCHEDULER)}}


# --- the scheduler's rights -------------------------------------------------------------------------------

def _role_path(name):
    return path_of(dict(_ROLE_REF, metadata={"name": name}))


def covers_leases(rule):
    """Whether an RBAC ``rule`` grants anything on leases or leasecandidates."""
    groups = rule.get("apiGroups") or []
    if LEASE_GROUP not in groups and "*" not in groups:
        return False
    return any(str(resource).partition("/")[0] in ("*",) + LEASE_RESOURCES for resource in rule.get("resources") or [])


def without_leases(rules):
    """``rules`` (a ClusterRole's) less coordination.k8s.io: that group taken out of each rule, a
    rule left without a group dropped. NrtSchedulerError when a rule of every group (``*``) covers
    leases: no list of rules keeps it and leaves leases out."""
    kept = []
    for rule in rules or []:
        groups = rule.get("apiGroups")
        if not groups:  # a nonResourceURLs rule
            kept.append(copy.deepcopy(rule))
            continue
        if "*" in groups and covers_leases(rule):
            raise NrtSchedulerError(
                "ClusterRole %s has a rule for every API group that covers leases (%r): numa.kube gives the scheduler "
                "that role's rules less %s (leases, leasecandidates), which such a rule cannot leave out; nothing was "
                "applied. Put back the role the API server's bootstrap policy makes (it reconciles it at start while "
                "its annotation rbac.authorization.kubernetes.io/autoupdate is true)" % (KUBE_SCHEDULER_ROLE, rule,
                                                                                         LEASE_GROUP))
        rest = [group for group in groups if group != LEASE_GROUP]
        if rest:
            kept.append(dict(copy.deepcopy(rule), apiGroups=rest))
    return kept


def scheduler_rules(api):
    """The scheduler's rules besides reading NodeResourceTopologies: those of the live
    system:kube-scheduler less coordination.k8s.io (without_leases). NrtSchedulerError, before anything
    is applied, when that role or system:volume-scheduler (bound as it is) is missing, or when the
    latter grants anything of coordination.k8s.io."""
    found = {}
    for name in (KUBE_SCHEDULER_ROLE, VOLUME_SCHEDULER_ROLE):
        found[name] = api.get(_role_path(name))
        if found[name] is None:
            raise NrtSchedulerError(
                "ClusterRole %s is not in the cluster: the scheduler gets kube-scheduler's rights as the API server "
                "keeps them for its version (its RBAC bootstrap policy makes that role); nothing was applied. Check "
                "that the API server runs with RBAC authorization, and run again" % name)
    leasing = [rule for rule in found[VOLUME_SCHEDULER_ROLE].get("rules") or []
               if covers_leases(rule) or LEASE_GROUP in (rule.get("apiGroups") or [])]
    if leasing:
        raise NrtSchedulerError(
            "ClusterRole %s grants %s (%s): numa.kube binds that role to the scheduler as it is, and the scheduler "
            "takes no lease; nothing was applied. Put back the role the API server's bootstrap policy makes (it "
            "reconciles it at start while its annotation rbac.authorization.kubernetes.io/autoupdate is true)"
            % (VOLUME_SCHEDULER_ROLE, LEASE_GROUP, "; ".join(repr(rule) for rule in leasing)))
    return without_leases(found[KUBE_SCHEDULER_ROLE].get("rules"))


def _binding(name, role_kind, role, namespace=None, subject_namespace=None):
    meta = {"name": name, "labels": _labels(SCHEDULER)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": SCHEDULER, "namespace": subject_namespace}]}


def scheduler_objects(params, rules=()):
    """ServiceAccount, RBAC, ConfigMap and Deployment (last) of the scheduler, in apply order; its
    ClusterRole reads NodeResourceTopologies and has ``rules`` (scheduler_rules) besides."""
    namespace = params["namespace"]
    labels = _labels(SCHEDULER)
    meta = {"name": SCHEDULER, "namespace": namespace, "labels": labels}
    cluster = "numa-kube:" + SCHEDULER
    text = config_text(params)
    container = {
        "name": "scheduler",
        "image": params.get("scheduler_image"),
        "imagePullPolicy": params.get("image_pull_policy") or "IfNotPresent",
        "command": [SCHEDULER_BINARY],
        "args": ["--config=%s/%s" % (CONFIG_DIR, CONFIG_KEY), "--v=%d" % params.get("scheduler_verbosity", 2)],
        "ports": [{"name": "https", "containerPort": SCHEDULER_PORT, "protocol": "TCP"}],
        # ready once its informers have synced (kube-scheduler's /readyz); restarted when it hangs
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": SCHEDULER_PORT, "scheme": "HTTPS"},
                           "periodSeconds": 5, "timeoutSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/livez", "port": SCHEDULER_PORT, "scheme": "HTTPS"},
                          "initialDelaySeconds": 15, "periodSeconds": 10, "timeoutSeconds": 5},
        # kube-scheduler's own static pod requests CPU alone; its memory grows with the cluster's
        # pods and nodes, so no limit that a large cluster would hit
        "resources": DEFAULT_SCHEDULER_RESOURCES,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
    }
    pod_spec = {
        "serviceAccountName": SCHEDULER,
        "priorityClassName": "system-cluster-critical",
        "securityContext": {"runAsNonRoot": True, "runAsUser": SCHEDULER_UID, "runAsGroup": SCHEDULER_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": SCHEDULER}}],
    }
    if params.get("scheduler_node_selector"):
        pod_spec["nodeSelector"] = params["scheduler_node_selector"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        # the objects the plugin filters and scores on, then kube-scheduler's own rights as the API
        # server keeps them for its version, less leases (scheduler_rules)
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": cluster, "labels": labels},
         "rules": [{"apiGroups": [NRT.group], "resources": [NRT.plural], "verbs": ["get", "list", "watch"]}]
         + [copy.deepcopy(rule) for rule in rules]},
        _binding(cluster, "ClusterRole", cluster, subject_namespace=namespace),
        _binding(cluster + ":volume-scheduler", "ClusterRole", VOLUME_SCHEDULER_ROLE, subject_namespace=namespace),
        # the client CA its secure port checks requests with (delegated authentication)
        _binding(cluster + ":authentication-reader", "Role", "extension-apiserver-authentication-reader",
                 namespace="kube-system", subject_namespace=namespace),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": {CONFIG_KEY: text}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": dict(meta), "spec": {
            "replicas": 1,
            # never two at once: without leader election both would place the same pods
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": SCHEDULER}},
            "template": {"metadata": {"labels": dict(labels), "annotations": {CONFIG_ANNOTATION: config_digest(text)}},
                         "spec": pod_spec}}},
    ]


def leave_out(nodes):
    """The pod affinity that keeps the publisher off ``nodes`` (names); None for none."""
    if not nodes:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": sorted(nodes)}]}]}}}


def publisher_objects(params, foreign=()):
    """The publisher's objects (node_publisher.publisher_objects), its DaemonSet last, kept off
    the ``foreign`` nodes (whose NodeResourceTopology another publisher writes)."""
    return node_publisher.publisher_objects(params, PUBLISHER, "nrt-publisher", NRT, PUBLISHER_POLICY, NrtSchedulerError,
                                            affinity=leave_out(foreign))
