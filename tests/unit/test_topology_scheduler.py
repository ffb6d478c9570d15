# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube.topology_scheduler: the objects it builds, and its steps against an in-memory cluster.

The real scheduler, publisher and API server run in the cluster scenario; here the objects, the
CRD's ownership cases, the nodes another publisher covers, check mode, idempotence and absent,
against a stand-in that keeps numa.kube's ownership rules (labels, stack, adopt) and whose
DaemonSet covers exactly the nodes its template's selector and affinity admit (and publishes
there, as the node agent would).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.numa import nrt as noderesourcetopology
from ansible_collections.numa.kube.plugins.module_utils.stacks import nrt_scheduler as ts
from ansible_collections.numa.kube.plugins.module_utils.stacks import nrt_scheduler_objects as nrt_objects
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    MANAGED_BY_LABEL,
    STACK_LABEL,
    OwnershipError,
    comparable,
    describe,
    owned,
    path_of,
)

CRD_TEXT = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    api-approved.kubernetes.io: https://github.com/kubernetes/enhancements/pull/1870
  creationTimestamp: null
  name: noderesourcetopologies.topology.node.k8s.io
spec:
  group: topology.node.k8s.io
  names: {kind: NodeResourceTopology, listKind: NodeResourceTopologyList, plural: noderesourcetopologies,
          singular: noderesourcetopology}
  scope: Cluster
  versions:
  - {name: v1alpha1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1alpha2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
status: {acceptedNames: {kind: "", plural: ""}, conditions: [], storedVersions: []}
"""
NRT_LIST = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/noderesourcetopologies.topology.node.k8s.io"
DEPLOYMENT = "/apis/apps/v1/namespaces/numa-kube-topology/deployments/numa-topology-scheduler"
DAEMONSET = "/apis/apps/v1/namespaces/numa-kube-topology/daemonsets/numa-nrt-publisher"
CONFIGMAP = "/api/v1/namespaces/numa-kube-topology/configmaps/numa-topology-scheduler"
NFD = {"managedFields": [{"manager": "nfd-topology-updater"}]}
# an object numa.kube's publisher made that NFD's topology-updater, started later, now writes too:
# it keeps the labels it found, and the API server records its writes of zones and attributes
CO_WRITTEN = {"managedFields": [
    {"manager": "numa-kube-nrt-publisher", "operation": "Update", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:zones": {}, "f:attributes": {}}},
    {"manager": "nfd-topology-updater", "operation": "Update", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:zones": {}, "f:attributes": {}}}]}
ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
PODS = "/api/v1/namespaces/numa-kube-topology/pods"
LEASES = "coordination.k8s.io"
# system:kube-scheduler and system:volume-scheduler as the API server's bootstrap policy makes them
# (kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), shortened
KUBE_SCHEDULER_RULES = [
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    {"apiGroups": [LEASES], "resources": ["leases"], "verbs": ["create"]},
    {"apiGroups": [LEASES], "resources": ["leases"], "resourceNames": ["kube-scheduler"],
     "verbs": ["get", "update", "list", "watch"]},
    {"apiGroups": [LEASES], "resources": ["leasecandidates"],
     "verbs": ["create", "delete", "deletecollection", "patch", "update", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["bindings", "pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
]
VOLUME_SCHEDULER_RULES = [
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "patch", "update", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
]


def cluster_role(name, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
                         "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules}


def grants_leases(rule):
    """Whether an RBAC rule lets its holder do anything to a Lease or a LeaseCandidate (the test's own reading)."""
    groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
    return bool(set(groups) & {LEASES, "*"}) and bool(set(resources) & {"leases", "leasecandidates", "*"})


@pytest.fixture
def crd_file(tmp_path):
    path = tmp_path / "noderesourcetopology-crd.yaml"
    path.write_text(CRD_TEXT)
    return str(path)


def params(crd, **changes):
    found = {"state": "present", "crd": crd, "namespace": "numa-kube-topology", "scheduler_image": "r/nrt-scheduler:1",
             "scheduler_name": "numa-topology-scheduler", "scoring_strategy": "LeastAllocated",
             "cache_resync_period": 5, "publisher_image": "r/agent:1", "publisher_node_selector": {},
             "publisher_kubelet_tls": "node-cert", "publisher_nodes_proxy": False, "image_pull_policy": "IfNotPresent",
             "numa_nodes": {}, "scheduler_node_selector": {}, "informer_mode": "Shared",
             "foreign_pods_detect": "OnlyExclusiveResources", "scheduler_verbosity": 2, "wait": True,
             "max_unavailable": "10%", "unavailable_nodes_allowed": "5%", "wait_timeout": 5, "wait_ceiling": 60, "adopt": False}
    found.update(changes)
    return found


def no_wait(check, timeout, progress=None):
    done, value = check()
    return done, value, 0.0


def topology(name, zones=2, labels=None, meta=None):
    """A NodeResourceTopology as the node agent (labels None: numa.kube's) or another publisher writes it."""
    metadata = dict(meta or {}, name=name)
    metadata["labels"] = {MANAGED_BY_LABEL: "numa.kube", STACK_LABEL: "topology"} if labels is None else labels
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": metadata,
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
            "zones": [{"name": "node-%d" % i, "type": "Node", "resources": []} for i in range(zones)]}


class Cluster(object):
    """The API as the module sees it, with the ownership rules of k8s.objects (numa.kube's labels and the
    stack's on what it applies, refusals and ``kept`` for others' objects, ``adopt``: a delete
    goes by the label alone, as k8s.client's does), CRDs Established once applied, Deployments
    available, the API server's own ClusterRoles (``system``), and a DaemonSet that covers the
    Nodes its template's nodeSelector and node affinity admit and, like the node agent, writes
    their NodeResourceTopology (never one noderesourcetopology.is_ours refuses)."""

    def __init__(self, nodes=("w1", "w2", "w3"), zones=2, adopt=False):
        self.store, self.calls, self.kept, self.adopt, self.zones = {}, [], [], adopt, zones
        # what the API server makes itself: read, never applied nor deleted by the stack
        self.system = {ROLES + "system:kube-scheduler": cluster_role("system:kube-scheduler", KUBE_SCHEDULER_RULES),
                       ROLES + "system:volume-scheduler": cluster_role("system:volume-scheduler",
                                                                       VOLUME_SCHEDULER_RULES)}
        self.node_list = [{"metadata": {"name": name, "labels": {}},
                           "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for name in nodes]

    # what the tests set up
    def put(self, obj):
        self.store[path_of(obj)] = copy.deepcopy(obj)

    def objects(self, kind):
        return dict((o["metadata"]["name"], o) for o in self.store.values() if o["kind"] == kind)

    def changes(self):
        return [c for c in self.calls if c[0] in ("apply", "delete") and not c[2]]

    # the methods of k8s.client.KubeApi the module uses
    def nodes(self, selector=None):
        self.calls.append(("nodes", selector))
        return [n for n in self.node_list if all(n["metadata"]["labels"].get(k) == v for k, v in (selector or {}).items())]

    def get(self, path, **params):
        self.calls.append(("get", path))
        if path in self.store:
            return self._with_status(copy.deepcopy(self.store[path]))
        if path in self.system:
            return copy.deepcopy(self.system[path])
        items = [copy.deepcopy(o) for p, o in sorted(self.store.items()) if p.rsplit("/", 1)[0] == path]
        if not items and not any(p.startswith(path + "/") for p in self.store) and "/noderesourcetopologies" in path \
                and CRD_PATH not in self.store:
            return None  # no CRD, no such collection
        if path.rsplit("/", 1)[-1] not in ("noderesourcetopologies", "pods", "daemonsets", "deployments", "services",
                                           "configmaps", "secrets"):
            return None
        for part in [p for p in params.get("label_selector", "").split(",") if p]:
            key, unlike, value = part.partition("!=")
            if not unlike:
                key, _eq, value = part.partition("=")
            items = [i for i in items if ((i["metadata"].get("labels") or {}).get(key) == value) != bool(unlike)]
        return {"items": items, "metadata": {}}

    def list(self, path, **params):
        return (self.get(path, **params) or {}).get("items", [])

    def named(self, list_path, names, **params):
        return dict((name, self.get("%s/%s" % (list_path, name))) for name in names)

    def claim(self, objects):
        self.calls.append(("claim", [describe(o) for o in objects], None))
        foreign = [describe(o) for o in objects if path_of(o) in self.store
                   and not owned(self.store[path_of(o)], "topology")]
        if foreign and not self.adopt:
            raise OwnershipError("%s exist and numa.kube did not make them" % ", ".join(foreign))

    def apply(self, obj, check_mode=False):
        self.calls.append(("apply", describe(obj), check_mode))
        obj = copy.deepcopy(obj)
        obj["metadata"]["labels"] = dict(obj["metadata"].get("labels") or {}, **{MANAGED_BY_LABEL: "numa.kube",
                                                                                 STACK_LABEL: "topology"})
        before = self.store.get(path_of(obj))
        if before is not None and not owned(before, "topology") and not self.adopt:
            raise OwnershipError("%s exists and numa.kube did not make it" % describe(obj))
        if not check_mode:
            self.store[path_of(obj)] = obj
            if obj["kind"] == "DaemonSet":
                self._publish(obj)
        return comparable(before) != comparable(obj), comparable(before), comparable(obj)

    def delete(self, obj, check_mode=False):
        self.calls.append(("delete", describe(obj), check_mode))
        before = self.store.get(path_of(obj))
        if before is not None and not owned(before, "topology"):
            self.kept.append(describe(obj))
            return False, comparable(before)
        if before is not None and not check_mode:
            del self.store[path_of(obj)]
        return before is not None, comparable(before)

    # what the controllers and the node agent do
    def covered(self, daemonset):
        spec = daemonset["spec"]["template"]["spec"]
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        left_out = set(v for term in terms for field in term.get("matchFields") or []
                       if field["key"] == "metadata.name" and field["operator"] == "NotIn" for v in field["values"])
        return [n["metadata"]["name"] for n in self.nodes(spec.get("nodeSelector"))
                if n["metadata"]["name"] not in left_out]

    def _publish(self, daemonset):
        for name in self.covered(daemonset):
            live = self.store.get("%s/%s" % (NRT_LIST, name))
            if live is not None and not noderesourcetopology.is_ours(live):
                live["zones"] = []  # the node agent would never; a test sees it if it ran there
                continue
            self.store["%s/%s" % (NRT_LIST, name)] = topology(name, self.zones)

    def _with_status(self, obj):
        if obj["kind"] == "CustomResourceDefinition" and owned(obj):
            obj["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
        if obj["kind"] == "Deployment":
            obj["status"] = {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        if obj["kind"] == "DaemonSet":
            count = len(self.covered(obj))
            obj["status"] = {"desiredNumberScheduled": count, "updatedNumberScheduled": count, "numberAvailable": count}
        return obj


def deployed(crd_file, api=None, **changes):
    api = api or Cluster()
    result = ts.run(api, params(crd_file, **changes), False, no_wait)
    return api, result


# --- the objects ------------------------------------------------------------------------------------------

def by_kind(objects):
    found = {}
    for obj in objects:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def test_the_scheduler_configuration_runs_the_plugin_at_every_point_with_its_args(crd_file):
    config = yaml.safe_load(nrt_objects.config_text(params(crd_file, scoring_strategy="LeastNUMANodes", cache_resync_period=30)))
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    assert config["leaderElection"] == {"leaderElect": False}, "one replica: no leader election, no leases"
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "numa-topology-scheduler"
    assert profile["plugins"] == {"multiPoint": {"enabled": [{"name": "NodeResourceTopologyMatch"}]}}, \
        "filter, score and reserve (the cache needs reserve): nothing disabled"
    assert profile["pluginConfig"] == [{"name": "NodeResourceTopologyMatch", "args": {
        "scoringStrategy": {"type": "LeastNUMANodes"}, "cacheResyncPeriodSeconds": 30,
        # the pods kubelet's List counts (not a Failed pod's), and only foreign pods that take what NRT counts
        "cache": {"informerMode": "Shared", "foreignPodsDetect": "OnlyExclusiveResources"}}}]
    other = yaml.safe_load(nrt_objects.config_text(params(crd_file, informer_mode="Dedicated", foreign_pods_detect="All")))
    assert other["profiles"][0]["pluginConfig"][0]["args"]["cache"] == {"informerMode": "Dedicated",
                                                                        "foreignPodsDetect": "All"}
    assert "clientConnection" not in config, "the pod's own service account"


def test_the_deployment_runs_the_binary_with_the_mounted_configuration_and_carries_its_digest(crd_file):
    objects = by_kind(nrt_objects.scheduler_objects(params(crd_file)))
    (configmap,), (deployment,) = objects["ConfigMap"], objects["Deployment"]
    text = configmap["data"]["config.yaml"]
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "numa.kube/scheduler-config-sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}, \
        "never two schedulers of one name at once"
    (container,) = template["spec"]["containers"]
    assert container["command"] == ["/nrt-scheduler"]
    assert container["args"] == ["--config=/etc/numa-topology-scheduler/config.yaml", "--v=2"]
    assert "nodeSelector" not in template["spec"]
    pinned = by_kind(nrt_objects.scheduler_objects(params(crd_file, scheduler_node_selector={"infra": "true"},
                                                          scheduler_verbosity=4)))["Deployment"][0]["spec"]["template"]["spec"]
    assert pinned["nodeSelector"] == {"infra": "true"} and pinned["containers"][0]["args"][-1] == "--v=4"
    assert container["volumeMounts"] == [{"name": "config", "mountPath": "/etc/numa-topology-scheduler",
                                          "readOnly": True}], "the folder, not a subPath: kubelet keeps it current"
    assert template["spec"]["volumes"] == [{"name": "config", "configMap": {"name": "numa-topology-scheduler"}}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 10259, "scheme": "HTTPS"}
    assert template["spec"]["securityContext"]["runAsNonRoot"] is True
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_the_scheduler_has_kube_schedulers_rights_less_leases_and_reads_topologies(crd_file):
    objects = by_kind(nrt_objects.scheduler_objects(params(crd_file), nrt_objects.without_leases(KUBE_SCHEDULER_RULES)))
    (role,) = objects["ClusterRole"]
    assert role["rules"][0] == {"apiGroups": ["topology.node.k8s.io"], "resources": ["noderesourcetopologies"],
                                "verbs": ["get", "list", "watch"]}
    assert role["rules"][1:] == [rule for rule in KUBE_SCHEDULER_RULES if rule["apiGroups"] != [LEASES]], \
        "every rule of kube-scheduler's but the lease ones, as they are"
    assert not [rule for rule in role["rules"] if grants_leases(rule)]
    bound = sorted((b["kind"], b["metadata"].get("namespace"), b["roleRef"]["kind"], b["roleRef"]["name"])
                   for b in objects["ClusterRoleBinding"] + objects["RoleBinding"])
    assert bound == [("ClusterRoleBinding", None, "ClusterRole", "numa-kube:numa-topology-scheduler"),
                     ("ClusterRoleBinding", None, "ClusterRole", "system:volume-scheduler"),
                     ("RoleBinding", "kube-system", "Role", "extension-apiserver-authentication-reader")], \
        "system:kube-scheduler itself is not bound: it grants the default scheduler's lease"
    for binding in objects["ClusterRoleBinding"] + objects["RoleBinding"]:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "numa-topology-scheduler",
                                        "namespace": "numa-kube-topology"}]


def test_the_lease_group_is_taken_out_of_a_mixed_rule_and_a_wildcard_over_leases_is_refused():
    mixed = {"apiGroups": ["", LEASES], "resources": ["events", "leases"], "verbs": ["create"]}
    urls = {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}
    assert nrt_objects.without_leases([mixed, urls]) == [dict(mixed, apiGroups=[""]), urls]
    assert mixed["apiGroups"] == ["", LEASES], "the live rules are not changed in place"
    assert nrt_objects.without_leases([{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]) == [
        {"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}], "a wildcard group over other resources stays"
    for resources in (["*"], ["leasecandidates"]):
        with pytest.raises(nrt_objects.NrtSchedulerError, match="ClusterRole system:kube-scheduler has a rule for every API group "
                           "that covers leases"):
            nrt_objects.without_leases([{"apiGroups": ["*"], "resources": resources, "verbs": ["get"]}])


def test_the_scheduler_role_is_read_from_the_live_one_and_shown_in_the_diff(crd_file):
    api = Cluster()
    extra = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]}
    api.system[ROLES + "system:kube-scheduler"]["rules"].append(extra)  # a newer server's rule
    api.put(dict(nrt_objects.RETIRED[0], roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": "system:kube-scheduler"},
                 metadata=dict(nrt_objects.RETIRED[0]["metadata"], labels={MANAGED_BY_LABEL: "numa.kube",
                                                                           STACK_LABEL: "topology"})))
    result = ts.run(api, params(crd_file), True, no_wait)
    role = [d for d in result["diff"] if d["after_header"] == "ClusterRole numa-kube:numa-topology-scheduler"][0]
    assert extra in role["after"]["rules"] and not [r for r in role["after"]["rules"] if grants_leases(r)]
    assert {"object": "ClusterRoleBinding numa-kube:numa-topology-scheduler:kube-scheduler", "changed": True} in \
        result["objects"], "the binding of system:kube-scheduler an earlier build made goes"
    ts.run(api, params(crd_file), False, no_wait)
    live = api.store[ROLES + "numa-kube:numa-topology-scheduler"]
    assert extra in live["rules"] and not [r for r in live["rules"] if grants_leases(r)]
    assert path_of(nrt_objects.RETIRED[0]) not in api.store
    assert not [p for p in api.store if "kube-scheduler" in p.rsplit("/", 1)[1]]


@pytest.mark.parametrize("role,rules,words", [
    ("system:kube-scheduler", None, "ClusterRole system:kube-scheduler is not in the cluster"),
    ("system:volume-scheduler", None, "ClusterRole system:volume-scheduler is not in the cluster"),
    ("system:volume-scheduler", VOLUME_SCHEDULER_RULES + [{"apiGroups": [LEASES], "resources": ["leases"],
                                                           "verbs": ["get"]}],
     "ClusterRole system:volume-scheduler grants coordination.k8s.io"),
])
def test_a_missing_or_leasing_system_role_is_refused_before_anything_changes(crd_file, role, rules, words):
    api = Cluster()
    if rules is None:
        del api.system[ROLES + role]
    else:
        api.system[ROLES + role]["rules"] = rules
    with pytest.raises(nrt_objects.NrtSchedulerError, match=words + ".*nothing was applied"):
        ts.run(api, params(crd_file), False, no_wait)
    assert api.changes() == []


def test_the_publisher_writes_only_its_own_nodes_topology(crd_file):
    objects = by_kind(nrt_objects.publisher_objects(params(crd_file, publisher_node_selector={"numa.kube/aligned": "true"},
                                                           max_unavailable=3)))
    (role,) = objects["ClusterRole"]
    assert [(r["resources"], r["verbs"]) for r in role["rules"]] == [
        (["noderesourcetopologies"], ["get", "create", "update"]), (["nodes"], ["get"]), (["nodes/configz"], ["get"])]
    (policy,) = objects["ValidatingAdmissionPolicy"]
    assert policy["metadata"]["name"] == "numa-kube.nrt-publisher-own-node"
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["noderesourcetopologies"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["apiGroups"] == ["topology.node.k8s.io"]
    assert policy["spec"]["matchConditions"][0]["expression"] == \
        "request.userInfo.username == 'system:serviceaccount:numa-kube-topology:numa-nrt-publisher'"
    assert "NodeResourceTopology" in policy["spec"]["validations"][0]["message"]
    (daemonset,) = objects["DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"][0] == "nrt-publisher"
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in pod["containers"][0]["env"]
    assert pod["nodeSelector"] == {"numa.kube/aligned": "true"} and "affinity" not in pod
    assert daemonset["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 3}
    assert [o["kind"] for o in nrt_objects.publisher_objects(params(crd_file))][-1] == "DaemonSet"
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "10m", "memory": "40Mi"}


def test_the_publishers_resources_are_the_users_where_given(crd_file):
    """A node whose CPUs are all reserved or allocatable to pods (a node profile) may want no CPU
    request from a DaemonSet: the resources given replace the default whole."""
    given = {"requests": {"memory": "40Mi"}, "limits": {"memory": "96Mi"}}
    (daemonset,) = by_kind(nrt_objects.publisher_objects(params(crd_file, publisher_resources=given)))["DaemonSet"]
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["resources"] == given


# --- present: check mode, idempotence, the configuration rolls the scheduler ------------------------------

def test_present_deploys_proves_each_node_and_a_second_run_changes_nothing(crd_file):
    api, result = deployed(crd_file)
    assert result["changed"] is True and result["topology_nodes"] == ["w1", "w2", "w3"]
    assert result["crd"] == {"name": "noderesourcetopologies.topology.node.k8s.io", "numa_kube": True,
                             "manager": "numa.kube"}
    assert result["foreign_topology_nodes"] == {}
    crd = api.store[CRD_PATH]
    assert "creationTimestamp" not in crd["metadata"] and "status" not in crd
    assert crd["metadata"]["labels"][STACK_LABEL] == "topology"
    applied = [c[1] for c in api.calls if c[0] == "apply"]
    assert applied[:2] == ["Namespace numa-kube-topology", "CustomResourceDefinition "
                           "noderesourcetopologies.topology.node.k8s.io"], "the CRD before the scheduler that reads it"
    assert applied.index("Deployment numa-kube-topology/numa-topology-scheduler") < \
        applied.index("DaemonSet numa-kube-topology/numa-nrt-publisher") == len(applied) - 1
    api.calls = []
    before = copy.deepcopy(api.store)
    again = ts.run(api, params(crd_file), False, no_wait)
    assert again["changed"] is False and again["diff"] == []
    assert [o for o in again["objects"] if o["changed"]] == [] and api.store == before


def test_check_mode_changes_nothing_and_shows_every_object(crd_file):
    api = Cluster()
    result = ts.run(api, params(crd_file), True, no_wait)
    assert api.store == {} and api.changes() == []
    assert result["changed"] is True and "topology_nodes" not in result
    assert "Deployment numa-kube-topology/numa-topology-scheduler" in [d["after_header"] for d in result["diff"]]
    crd_diff = [d for d in result["diff"] if d["after_header"].startswith("CustomResourceDefinition")][0]
    assert crd_diff["after"]["spec"]["versions"][1]["schema"].startswith("("), "schemas as digests in a diff"


def test_a_new_configuration_rolls_the_scheduler_and_only_what_it_touches(crd_file):
    api, first = deployed(crd_file)
    before = api.store[DEPLOYMENT]["spec"]["template"]["metadata"]["annotations"]["numa.kube/scheduler-config-sha256"]
    assert before == first["scheduler_config_sha256"]
    result = ts.run(api, params(crd_file, scoring_strategy="MostAllocated"), False, no_wait)
    after = api.store[DEPLOYMENT]["spec"]["template"]["metadata"]["annotations"]["numa.kube/scheduler-config-sha256"]
    assert after != before and after == result["scheduler_config_sha256"]
    assert "type: MostAllocated" in api.store[CONFIGMAP]["data"]["config.yaml"]
    changed = [o["object"] for o in result["objects"] if o["changed"]]
    assert changed == ["ConfigMap numa-kube-topology/numa-topology-scheduler",
                       "Deployment numa-kube-topology/numa-topology-scheduler"]


# --- the CRD: numa.kube's, another manager's, none -------------------------------------------------------

def foreign_crd(versions=("v1alpha2",)):
    crd = yaml.safe_load(CRD_TEXT)
    crd["metadata"] = dict(NFD, name=crd["metadata"]["name"], managedFields=[{"manager": "nfd-master"}])
    crd["spec"]["versions"] = [{"name": v, "served": True, "storage": v == versions[-1]} for v in versions]
    crd.pop("status")
    return crd


def test_another_managers_crd_serving_v1alpha2_is_used_as_it_is_without_a_file(crd_file):
    api = Cluster()
    api.put(foreign_crd(("v1alpha1", "v1alpha2")))
    original = copy.deepcopy(api.store[CRD_PATH])
    result = ts.run(api, params(None), False, no_wait)
    assert api.store[CRD_PATH] == original
    assert result["crd"] == {"name": "noderesourcetopologies.topology.node.k8s.io", "numa_kube": False,
                             "manager": "field managers nfd-master"}
    assert {"object": "CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io", "changed": False,
            "kept": True, "reason": "numa.kube did not make it (field managers nfd-master): used as it is, it serves "
                                    "v1alpha2"} in result["objects"]
    assert result["topology_nodes"] == ["w1", "w2", "w3"]


def test_another_managers_crd_without_v1alpha2_is_refused_naming_it_before_anything_changes(crd_file):
    api = Cluster()
    api.put(foreign_crd(("v1alpha1",)))
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(api, params(crd_file), False, no_wait)
    assert str(caught.value).startswith(
        "CRD noderesourcetopologies.topology.node.k8s.io is installed and numa.kube did not make it (field managers "
        "nfd-master); it serves v1alpha1, and NodeResourceTopologyMatch reads topology.node.k8s.io/v1alpha2: nothing "
        "was applied. Upgrade what installed it")
    assert api.changes() == [] and not [c for c in api.calls if c[0] == "claim"]


def test_adopt_takes_another_managers_crd_over_from_the_file(crd_file):
    api = Cluster(adopt=True)
    api.put(foreign_crd(("v1alpha1",)))
    result = ts.run(api, params(crd_file, adopt=True), False, no_wait)
    assert result["crd"]["numa_kube"] is True and nrt_objects.serves(api.store[CRD_PATH], "v1alpha2")
    assert owned(api.store[CRD_PATH], "topology")


@pytest.mark.parametrize("installed", [False, True], ids=["no CRD", "numa.kube's CRD"])
def test_without_another_managers_crd_the_file_is_required(crd_file, installed):
    api = Cluster()
    if installed:
        deployed(crd_file, api)
        api.calls = []
    with pytest.raises(nrt_objects.NrtSchedulerError, match=r"^crd is required here: (no CRD|numa.kube installed CRD) "
                       r"noderesourcetopologies.topology.node.k8s.io.*nothing was applied. Set "
                       r"crd to the path of noderesourcetopology-api's manifests/crd.yaml"):
        ts.run(api, params(None), False, no_wait)
    assert api.changes() == []


@pytest.mark.parametrize("text,words", [
    (CRD_TEXT.replace("  - {name: v1alpha2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}\n",
                      ""), "does not serve v1alpha2 (it serves v1alpha1): NodeResourceTopologyMatch reads "
                           "topology.node.k8s.io/v1alpha2; give the CRD of noderesourcetopology-api v0.1.0 or later"),
    (CRD_TEXT + "---\n" + CRD_TEXT,
     "holds 2 documents: it must hold the one CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io; "
     "give noderesourcetopology-api's"),
    (CRD_TEXT.replace("name: noderesourcetopologies.topology.node.k8s.io", "name: numatopologies.nodeinfo.volcano.sh"),
     "is apiextensions.k8s.io/v1 CustomResourceDefinition numatopologies.nodeinfo.volcano.sh, not the "
     "apiextensions.k8s.io/v1 CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io"),
    (CRD_TEXT.replace("scope: Cluster", "scope: Namespaced"), "scope 'Namespaced': the scheduler reads the "
                                                              "cluster-scoped topology.node.k8s.io NodeResourceTopology"),
    ("a: [", "is not valid YAML"),
])
def test_a_crd_file_that_is_not_the_nrt_crd_is_refused_before_any_request(tmp_path, text, words):
    path = tmp_path / "crd.yaml"
    path.write_text(text)
    api = Cluster()
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(api, params(str(path)), False, no_wait)
    assert "crd %s " % path in str(caught.value) and words in str(caught.value)
    assert api.calls == []


# --- another publisher's NodeResourceTopologies ---------------------------------------------------------

def test_nodes_another_publisher_covers_are_left_out_named_and_untouched(crd_file):
    api = Cluster()
    api.put(foreign_crd())  # NFD's CRD and its topology-updater's object for w2
    nfd = topology("w2", zones=1, labels={"app": "nfd"}, meta=NFD)
    api.put(nfd)
    result = ts.run(api, params(None), False, no_wait)
    assert result["foreign_topology_nodes"] == {"w2": "field managers nfd-topology-updater"}
    assert api.store[NRT_LIST + "/w2"] == nfd, "its object is as its publisher wrote it"
    pod = api.store[DAEMONSET]["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w2"]}]}]}
    assert result["topology_nodes"] == ["w1", "w3"]
    assert any("w2 (field managers nfd-topology-updater)" in w for w in result["warnings"])
    assert not [c for c in api.calls if c[0] in ("apply", "delete") and "w2" in c[1]]


def test_a_topology_that_another_publisher_takes_over_mid_run_fails_the_proof_naming_it(crd_file):
    class Racing(Cluster):
        def _publish(self, daemonset):
            Cluster._publish(self, daemonset)
            self.put(topology("w3", labels={}, meta=NFD))

    with pytest.raises(nrt_objects.NrtSchedulerError, match="the NodeResourceTopology of 1 node is not as the scheduler needs it: w3: "
                       r"its NodeResourceTopology is written by another publisher \(field "
                       "managers nfd-topology-updater\\), not numa.kube's"):
        ts.run(Racing(), params(crd_file), False, no_wait)


def test_each_numa_node_needs_its_zone(crd_file):
    api = Cluster(zones=1)
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(api, params(crd_file, numa_nodes={"w1": [0, 1], "w3": [0]}), False, no_wait)
    assert str(caught.value).startswith("the NodeResourceTopology of 1 node is not as the scheduler needs it: w1: its "
                                        "zones of type Node are node-0, not one per NUMA node (node-0, node-1)")
    assert ts.zone_problem(topology("w", zones=0)) == "no zone of type Node yet"
    assert ts.zone_problem(None) == "no NodeResourceTopology yet"
    odd = topology("w")
    odd["zones"][1]["name"] = "numa-1"
    assert ts.zone_problem(odd) == "zones numa-1 of type Node are not named node-<NUMA id>"
    assert ts.zone_problem(topology("w", zones=11), list(range(11))) is None


def test_topologies_numa_kube_wrote_for_nodes_it_no_longer_covers_are_deleted(crd_file):
    api, _result = deployed(crd_file)
    api.node_list[2]["metadata"]["labels"]["pool"] = "other"
    api.put(topology("gone", labels={"app": "nfd"}, meta=NFD))  # another publisher's, for a node not selected
    result = ts.run(api, params(crd_file, publisher_node_selector={"pool": "other"}), False, no_wait)
    assert result["stale_topology_nodes"] == ["w1", "w2"]
    assert sorted(api.objects("NodeResourceTopology")) == ["gone", "w3"]


def test_a_topology_another_updater_co_writes_under_numa_kubes_label_is_named_left_out_and_untouched(crd_file):
    """NFD's topology-updater started after numa.kube's publisher: it updates the object it finds,
    labels and all; managedFields show it writing zones and attributes (review finding 1)."""
    api, _result = deployed(crd_file)
    shared = copy.deepcopy(api.store[NRT_LIST + "/w2"])
    shared["metadata"].update(copy.deepcopy(CO_WRITTEN))
    shared["zones"] = shared["zones"][:1]
    api.put(shared)
    assert owned(shared, "topology"), "the label alone would call it numa.kube's"
    api.calls = []
    result = ts.run(api, params(crd_file), False, no_wait)
    writer = "numa.kube's label, but its zones or attributes written by field managers nfd-topology-updater"
    assert result["foreign_topology_nodes"] == {"w2": writer}
    assert api.store[NRT_LIST + "/w2"] == shared
    pod = api.store[DAEMONSET]["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w2"]}]}]
    assert result["topology_nodes"] == ["w1", "w3"]
    assert not [c for c in api.calls if c[0] in ("apply", "delete") and c[1].endswith(" w2")]
    assert ts.zone_problem(shared) == "its NodeResourceTopology is written by another publisher (%s), not " \
                                      "numa.kube's" % writer
    # the node leaves the selection: the stale clean-up names it and leaves it
    api.node_list[1]["metadata"]["labels"]["pool"] = "b"
    for node in (api.node_list[0], api.node_list[2]):
        node["metadata"]["labels"]["pool"] = "a"
    result = ts.run(api, params(crd_file, publisher_node_selector={"pool": "a"}), False, no_wait)
    assert api.store[NRT_LIST + "/w2"] == shared and "stale_topology_nodes" not in result
    assert result["foreign_topology_nodes"] == {"w2": writer}
    # absent keeps it, names it, and it holds numa.kube's CRD as any other publisher's object does
    result = ts.run(api, params(None, state="absent"), False, no_wait)
    assert sorted(api.objects("NodeResourceTopology")) == ["w2"] and api.store[NRT_LIST + "/w2"] == shared
    assert result["foreign_topology_nodes"] == {"w2": writer}
    assert any(w.startswith("1 NodeResourceTopology with numa.kube's label that another manager writes kept: w2 (")
               for w in result["warnings"])
    assert CRD_PATH in api.store
    assert [o["reason"] for o in result["objects"] if o.get("kept")] == [
        "it still serves 1 NodeResourceTopology object numa.kube did not write (w2), which deleting it would delete: "
        "it stays until they are gone"]


def test_the_stale_clean_up_reads_the_nodes_again_right_before_deleting(crd_file):
    """A node that gets the selector's label while the run waits keeps the object its new publisher
    pod wrote (review finding 4: the run's first node list is minutes old by then)."""
    api, _result = deployed(crd_file)
    for node in api.node_list[:2]:
        node["metadata"]["labels"]["pool"] = "a"

    def joining(check, timeout, progress=None):
        api.node_list[2]["metadata"]["labels"]["pool"] = "a"  # labelled while the scheduler starts
        return no_wait(check, timeout, progress)

    result = ts.run(api, params(crd_file, publisher_node_selector={"pool": "a"}), False, joining)
    assert sorted(api.objects("NodeResourceTopology")) == ["w1", "w2", "w3"]
    assert "stale_topology_nodes" not in result


def publisher_pod(node, ready=True, deleting=False):
    meta = {"name": "numa-nrt-publisher-" + node, "namespace": "numa-kube-topology",
            "labels": {"app": "numa-nrt-publisher"},
            "ownerReferences": [{"kind": "DaemonSet", "name": "numa-nrt-publisher"}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T06:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@pytest.mark.parametrize("wait", [True, False], ids=["wait", "no wait"])
def test_a_node_still_running_a_publisher_pod_keeps_its_topology_until_the_pod_is_gone(crd_file, wait):
    api, _result = deployed(crd_file)
    for node in api.node_list[:1]:
        node["metadata"]["labels"]["pool"] = "a"
    api.put(publisher_pod("w2"))
    api.put(publisher_pod("w3", ready=False, deleting=True))  # terminating: it may still write
    changes = {"publisher_node_selector": {"pool": "a"}, "wait": wait}
    result = ts.run(api, params(crd_file, **changes), False, no_wait)
    assert sorted(api.objects("NodeResourceTopology")) == ["w1", "w2", "w3"] and "stale_topology_nodes" not in result
    assert any(w.startswith("2 NodeResourceTopology of nodes no longer selected kept for now: a publisher pod still "
                            "runs there and could write it again (w2 (pod numa-nrt-publisher-w2); w3 (pod "
                            "numa-nrt-publisher-w3))") for w in result["warnings"])
    api.put(publisher_pod("w2", ready=False))  # no longer Ready, not being deleted: writes nothing
    del api.store[PODS + "/numa-nrt-publisher-w3"]
    result = ts.run(api, params(crd_file, **changes), False, no_wait)
    assert result["stale_topology_nodes"] == ["w2", "w3"], "with wait false too (against the nodes as they are now)"
    assert sorted(api.objects("NodeResourceTopology")) == ["w1"]


def test_a_preview_names_the_stale_topologies_without_deleting_them(crd_file):
    api, _result = deployed(crd_file)
    api.node_list[0]["metadata"]["labels"]["pool"] = "a"
    before = copy.deepcopy(api.store)
    result = ts.run(api, params(crd_file, publisher_node_selector={"pool": "a"}, wait=False), True, no_wait)
    assert result["stale_topology_nodes"] == ["w2", "w3"] and api.store == before


# --- the namespace ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_run_in_another_namespace_than_the_deployed_stack_is_refused_naming_it(crd_file, state):
    api, _result = deployed(crd_file)
    before = copy.deepcopy(api.store)
    api.calls = []
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(api, params(crd_file, namespace="numa-kube-nrt", state=state), False, no_wait)
    message = str(caught.value)
    assert message.startswith(
        "numa.kube's topology scheduler and publisher are deployed in namespace numa-kube-topology (ClusterRoleBinding "
        "numa-kube:numa-topology-scheduler names ServiceAccount numa-kube-topology/numa-topology-scheduler; "
        "ClusterRoleBinding numa-kube:numa-nrt-publisher names ServiceAccount numa-kube-topology/numa-nrt-publisher; "
        "Deployment numa-kube-topology/numa-topology-scheduler, DaemonSet numa-kube-topology/numa-nrt-publisher still "
        "there), not in namespace numa-kube-nrt as this run asks"), message
    assert message.endswith("Keep namespace numa-kube-topology, or remove the stack there first (state absent with "
                            "namespace numa-kube-topology) and run again")
    assert ("nothing was applied" if state == "present" else "nothing was deleted") in message
    assert api.store == before and api.changes() == []
    ts.run(api, params(None, state="absent"), False, no_wait)
    ts.run(api, params(crd_file, namespace="numa-kube-nrt"), False, no_wait)
    assert api.store[ROLES.replace("clusterroles", "clusterrolebindings") + "numa-kube:numa-nrt-publisher"][
        "subjects"][0]["namespace"] == "numa-kube-nrt"


# --- absent ----------------------------------------------------------------------------------------------

def test_absent_removes_what_numa_kube_made_and_keeps_the_crd_others_still_use(crd_file):
    api, _result = deployed(crd_file)
    api.put(topology("w9", labels={}, meta=NFD))  # another publisher uses numa.kube's CRD
    api.calls = []
    result = ts.run(api, params(None, state="absent", scheduler_image=None, publisher_image=None), False, no_wait)
    assert sorted(api.objects("NodeResourceTopology")) == ["w9"], "numa.kube's objects go, the other's stays"
    assert CRD_PATH in api.store
    kept = [o for o in result["objects"] if o.get("kept")]
    assert kept == [{"object": "CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io", "changed": False,
                     "kept": True, "reason": "it still serves 1 NodeResourceTopology object numa.kube did not write "
                                             "(w9), which deleting it would delete: it stays until they are gone"}]
    assert sorted(p for p in api.store) == [CRD_PATH, NRT_LIST + "/w9"], "everything else of the stack is gone"
    deleted = [c[1] for c in api.changes()]
    assert deleted[:3] == ["DaemonSet numa-kube-topology/numa-nrt-publisher",
                           "ClusterRoleBinding numa-kube:numa-nrt-publisher",
                           "ValidatingAdmissionPolicyBinding numa-kube.nrt-publisher-own-node"], \
        "no new pod, then no rights, and only then no own-node policy"
    assert deleted.index("ClusterRoleBinding numa-kube:numa-nrt-publisher") < deleted.index("NodeResourceTopology w1"), \
        "the publisher loses its rights before its objects go"
    assert deleted[-1] == "Namespace numa-kube-topology"
    again = ts.run(api, params(None, state="absent"), False, no_wait)
    assert [o["object"] for o in again["objects"] if o["changed"]] == []


def test_absent_deletes_numa_kubes_crd_once_nothing_else_needs_it_and_never_anothers(crd_file):
    api, _result = deployed(crd_file)
    preview = ts.run(api, params(None, state="absent"), True, no_wait)
    assert CRD_PATH in api.store and preview["changed"] is True, "check mode deletes nothing"
    assert {"object": "CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io", "changed": True} \
        in preview["objects"], "numa.kube's own objects do not hold the CRD"
    ts.run(api, params(None, state="absent"), False, no_wait)
    assert api.store == {}
    api = Cluster()
    api.put(foreign_crd())
    ts.run(api, params(None, state="absent"), False, no_wait)
    assert CRD_PATH in api.store and api.kept == ["CustomResourceDefinition noderesourcetopologies.topology.node.k8s.io"]


def test_a_namespace_numa_kube_did_not_make_is_used_and_never_deleted(crd_file):
    api = Cluster()
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    result = ts.run(api, params(crd_file, namespace="kube-system"), False, no_wait)
    assert {"object": "Namespace kube-system", "changed": False, "kept": True,
            "reason": "numa.kube did not make it (no managed-by label): used as it is"} in result["objects"]
    assert "labels" not in api.store["/api/v1/namespaces/kube-system"]["metadata"]
    ts.run(api, params(None, namespace="kube-system", state="absent"), False, no_wait)
    assert list(api.store) == ["/api/v1/namespaces/kube-system"]


def test_absent_keeps_a_namespace_that_holds_others_objects(crd_file):
    api, _result = deployed(crd_file)
    api.put({"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "someone-else", "namespace": "numa-kube-topology"}})
    result = ts.run(api, params(None, state="absent"), False, no_wait)
    assert "/api/v1/namespaces/numa-kube-topology" in api.store
    assert any(w.startswith("Namespace numa-kube-topology holds 1 object numa.kube did not make for this stack "
                            "(Deployment someone-else)") for w in result["warnings"])


# --- options ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes,words", [
    ({"scoring_strategy": "Balanced"}, "scoring_strategy 'Balanced' is not one of MostAllocated, BalancedAllocation, "
                                       "LeastAllocated, LeastNUMANodes (NodeResourceTopologyMatch's scoringStrategy"
                                       ".type): pick one"),
    ({"cache_resync_period": 2}, "cache_resync_period must be 0 (no reserve cache: the plugin reads the "
                                 "NodeResourceTopologies as they are) or 5 to 3600 seconds"),
    ({"cache_resync_period": 86400}, "got 86400: set it to 5 or more, or to 0"),
    ({"cache_resync_period": True}, "got True"),
    ({"scheduler_name": "NUMA_sched"}, "scheduler_name 'NUMA_sched' is not a DNS-1123 label"),
    ({"scheduler_name": "default-scheduler"}, "scheduler_name 'default-scheduler' is the default scheduler's name: "
                                              "two schedulers under one name both place the same pods; choose another"),
    ({"scheduler_name": "volcano"}, "is Volcano's scheduler's name"),
    ({"namespace": "Numa Kube"}, "namespace 'Numa Kube' is not a valid namespace name"),
    ({"scheduler_image": None}, "scheduler_image is required with state present: set it to the image of "
                                "kube-scheduler with NodeResourceTopologyMatch, whose binary is at /nrt-scheduler"),
    ({"publisher_image": "https://r/agent:1"}, "publisher_image: image 'https://r/agent:1' is not an image reference"),
    ({"publisher_node_selector": {"a": "b,c!=d"}}, "publisher_node_selector: value 'b,c!=d' of 'a'"),
    ({"numa_nodes": {"w1": ["0"]}}, "numa_nodes: w1 has ['0'], not a list of NUMA node ids"),
    ({"informer_mode": "shared"}, "informer_mode 'shared' is not one of Shared, Dedicated (the cache's informerMode"),
    ({"foreign_pods_detect": "Some"}, "foreign_pods_detect 'Some' is not one of OnlyExclusiveResources, All, None"),
    ({"scheduler_verbosity": 11}, "scheduler_verbosity must be kube-scheduler's log level, 0 to 10"),
    ({"scheduler_node_selector": {"a": "b,c"}}, "scheduler_node_selector: value 'b,c' of 'a'"),
    ({"image_pull_policy": "Sometimes"}, "image_pull_policy 'Sometimes' is not one of Always, IfNotPresent, Never"),
    ({"publisher_kubelet_tls": "off"}, "publisher_kubelet_tls 'off' is not known"),
    ({"max_unavailable": 0}, "max_unavailable must be a count of nodes"),
    ({"crd": "/nonexistent/crd.yaml"}, "crd /nonexistent/crd.yaml cannot be read"),
])
def test_each_wrong_option_is_named_with_the_rule_and_the_fix_before_any_request(crd_file, changes, words):
    api = Cluster()
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(api, dict(params(crd_file), **changes), False, no_wait)
    assert words in str(caught.value)
    assert api.calls == []


def test_every_problem_is_named_at_once_and_zero_turns_the_cache_off(crd_file):
    with pytest.raises(nrt_objects.NrtSchedulerError) as caught:
        ts.run(Cluster(), params(crd_file, scoring_strategy="x", cache_resync_period=1, scheduler_image=""), False,
               no_wait)
    assert len(caught.value.problems) == 3
    assert nrt_objects.check_options(params(crd_file, cache_resync_period=0))["kind"] == "CustomResourceDefinition"
    assert nrt_objects.check_options(params(crd_file, state="absent", scheduler_image=None, publisher_image=None)) is None


def test_the_nrt_kind_is_one_requests_can_name():
    assert k8s_objects.object_path("topology.node.k8s.io/v1alpha2", "NodeResourceTopology", "w1") == NRT_LIST + "/w1"


# --- the module around run() ---------------------------------------------------------------------------

def test_the_module_connects_as_the_topology_stack_and_returns_warnings_diff_and_kept(crd_file, monkeypatch):
    from ansible.module_utils import basic
    from ansible_collections.numa.kube.plugins.modules import topology_scheduler as module
    from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run as run_module

    api = Cluster()
    api.wait_for = no_wait
    api.put(topology("w2", labels={}, meta=NFD))
    api.put(foreign_crd())
    connected = []

    def connect(ansible_module, stack=None):
        connected.append(stack)
        return api

    monkeypatch.setattr(module, "connect", connect)
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    args = {"scheduler_image": "r/nrt-scheduler:1", "publisher_image": "r/agent:1", "publisher_node_selector": {},
            "cache_resync_period": "10"}
    failed, result = run_module(module, args, check_mode=True, diff=True)
    assert not failed and connected == ["topology"]
    assert result["changed"] is True and result["diff"] and api.changes() == []
    assert result["foreign_topology_nodes"] == {"w2": "field managers nfd-topology-updater"}
    assert any("w2 (field managers nfd-topology-updater)" in w for w in warned) and "warnings" not in result
    assert "cacheResyncPeriodSeconds: 10" in [d for d in result["diff"] if "ConfigMap" in d["after_header"]][0][
        "after"]["data"]["config.yaml"]
    assert result["kept"] == []
    failed, result = run_module(module, dict(args, scoring_strategy="Fastest"))
    assert failed and "scoring_strategy" in result["msg"] and connected == ["topology"], "refused before connecting"


@pytest.mark.parametrize("obj", [{"metadata": ["x"]}, {"metadata": {"labels": ["x"]}}, {"metadata": {"managedFields": "x"}},
                                 {"metadata": {"managedFields": [{"manager": ["a"]}, "x", {"manager": "kubectl"}]}}])
def test_who_manages_an_object_of_the_wrong_shape_is_said_without_a_crash(obj):
    """Fourth review: objects.manager_of (the stacks' word on an object that is not theirs) raised
    AttributeError on metadata, labels or managedFields of a shape no API server gives."""
    said = k8s_objects.manager_of(obj)
    assert said in ("no managed-by label", "field managers kubectl"), said
