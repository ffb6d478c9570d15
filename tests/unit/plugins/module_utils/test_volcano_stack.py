# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano's manifest as numa.kube applies it, and the publisher's objects.

The real release manifest runs against the real API server in the cluster scenario; here the
changes numa.kube makes to it, on a manifest of the same shape.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.numa.kube.plugins.module_utils import volcano_stack
from ansible_collections.numa.kube.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.volcano_conf import VolcanoError
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_resource_plugin import MemoryApi, no_wait

MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata: {name: volcano-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: numatopologies.nodeinfo.volcano.sh}
spec:
  group: nodeinfo.volcano.sh
  validation:
    =: {type: string}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: volcano-scheduler-configmap, namespace: volcano-system}
data: {volcano-scheduler.conf: "actions: allocate"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: volcano-scheduler, namespace: volcano-system}
spec:
  template:
    spec:
      containers:
      - {name: s, image: "docker.io/volcanosh/vc-scheduler:v1.14.0", imagePullPolicy: Always}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: volcano-admission, namespace: volcano-system}
spec:
  template:
    spec:
      containers:
      - {name: a, image: "docker.io/volcanosh/vc-webhook-manager:v1.14.0"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: volcano-admission-service-jobs-mutate}
"""
PARAMS = {"state": "present", "manifest": "volcano-development.yaml", "admission": False,
          "image_registry": "numa.kube", "image_tag": "v1.14.1", "image_pull_policy": "IfNotPresent",
          "node_selector": {"infra": "true"}, "namespace": "volcano-system", "publisher_image": "r/agent:1",
          "publisher_node_selector": {}, "publisher_nodes_proxy": False, "wait": False, "wait_timeout": 5}


def test_the_manifest_loads_with_helms_equals_keys_and_is_adjusted_as_asked():
    objects = volcano_stack.load_manifest(MANIFEST, "m")
    assert objects[1]["spec"]["validation"] == {"=": {"type": "string"}}
    applied = volcano_stack.adjust(objects, PARAMS)
    assert [o["metadata"]["name"] for o in applied] == [
        "volcano-system", "numatopologies.nodeinfo.volcano.sh", "volcano-scheduler-configmap", "volcano-scheduler"]
    pod = applied[-1]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "numa.kube/vc-scheduler:v1.14.1"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert pod["nodeSelector"] == {"infra": "true"}
    assert objects[3]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always", "input untouched"
    kept = volcano_stack.adjust(objects, dict(PARAMS, admission=True, image_registry=None, image_tag=None))
    assert len(kept) == 6 and kept[4]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "docker.io/volcanosh/vc-webhook-manager:v1.14.0"


@pytest.mark.parametrize("text,match", [
    ("a: [", "not valid YAML"),
    ("kind: Namespace\n", "apiVersion, kind and metadata.name"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", "no scheduler Deployment"),
])
def test_a_manifest_that_is_not_volcanos_is_refused(text, match):
    with pytest.raises(VolcanoError, match=match):
        volcano_stack.load_manifest(text, "m")


def test_the_scheduler_configuration_is_created_but_never_overwritten():
    api = MemoryApi([{"metadata": {"name": "w1"}}], {})
    volcano_stack.run(api, PARAMS, MANIFEST, False, no_wait)
    conf_path = "/api/v1/namespaces/volcano-system/configmaps/volcano-scheduler-configmap"
    assert api.store[conf_path]["data"] == {"volcano-scheduler.conf": "actions: allocate"}
    api.store[conf_path] = dict(api.store[conf_path], data={"volcano-scheduler.conf": "edited"})
    result = volcano_stack.run(api, PARAMS, MANIFEST, False, no_wait)
    assert api.store[conf_path]["data"] == {"volcano-scheduler.conf": "edited"}
    assert {"object": "ConfigMap volcano-system/volcano-scheduler-configmap", "changed": False, "kept": True} \
        in result["objects"]


def test_the_publisher_may_read_configz_and_write_numatopologies_and_nothing_more():
    objects = volcano_stack.publisher_objects(PARAMS)
    role = objects[1]
    resources = sorted(r for rule in role["rules"] for r in rule["resources"])
    assert resources == ["nodes", "nodes/configz", "numatopologies"]
    assert "nodes/proxy" in str(volcano_stack.publisher_objects(dict(PARAMS, publisher_nodes_proxy=True))[1])
    container = objects[-1]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "topology-publisher"
    assert container["volumeMounts"][0]["readOnly"] is True


def test_without_a_manifest_volcano_must_already_be_installed():
    api = MemoryApi([{"metadata": {"name": "w1"}}], {})
    with pytest.raises(VolcanoError, match="no Numatopology CRD"):
        volcano_stack.run(api, dict(PARAMS, manifest=None), None, False, no_wait)
    assert [c for c in api.calls if c[0] == "apply"] == []


def test_crd_schemas_show_in_a_diff_as_digests():
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "jobs.batch.volcano.sh"},
           "spec": {"versions": [{"name": "v1alpha1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    other = copy.deepcopy(crd)
    other["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = "string"
    short = volcano_stack.summarised(crd)
    assert short["spec"]["versions"][0]["name"] == "v1alpha1"
    assert short["spec"]["versions"][0]["schema"].startswith("(")
    assert short["spec"]["versions"][0]["schema"] != volcano_stack.summarised(other)["spec"]["versions"][0]["schema"]
    assert crd["spec"]["versions"][0]["schema"] == {"openAPIV3Schema": {"type": "object"}}, "the input is untouched"
    assert volcano_stack.summarised({"kind": "Deployment"}) == {"kind": "Deployment"}


# --- the publisher: its own node only, kubelet's certificate checked, its objects removed ---------------

def _by_kind(objects):
    return dict((obj["kind"], obj) for obj in objects)


def test_the_publisher_gets_creates_and_updates_numatopologies_and_nothing_more():
    role = _by_kind(volcano_stack.publisher_objects(PARAMS))["ClusterRole"]
    verbs = [rule["verbs"] for rule in role["rules"] if rule["resources"] == ["numatopologies"]]
    assert verbs == [["get", "create", "update"]], "no list, watch, patch or delete: the publisher does not use them"


def test_a_publisher_may_write_only_the_numatopology_of_its_tokens_node():
    objects = volcano_stack.publisher_objects(dict(PARAMS, namespace="numa"))
    kinds = [obj["kind"] for obj in objects]
    assert kinds.index("ValidatingAdmissionPolicyBinding") < kinds.index("DaemonSet") == len(kinds) - 1, \
        "the policy binds before any publisher runs; the DaemonSet stays last (run() waits on it)"
    policy, binding = _by_kind(objects)["ValidatingAdmissionPolicy"], _by_kind(objects)["ValidatingAdmissionPolicyBinding"]
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == "numa-kube.publisher-own-node"
    assert policy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "numa.kube"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["nodeinfo.volcano.sh"], "apiVersions": ["*"], "resources": ["numatopologies"],
        "operations": ["CREATE", "UPDATE", "DELETE"]}]
    assert [c["expression"] for c in spec["matchConditions"]] == [
        "request.userInfo.username == 'system:serviceaccount:numa:numa-topology-publisher'"]
    variables = dict((v["name"], v["expression"]) for v in spec["variables"])
    assert "'authentication.kubernetes.io/node-name' in request.userInfo.extra" in variables["claimed"]
    assert variables["target"] == "request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name"
    (rule,) = spec["validations"]
    assert rule["expression"] == ("variables.claimed && "
                                  "request.userInfo.extra['authentication.kubernetes.io/node-name'] == [variables.target]")
    assert rule["reason"] == "Forbidden", "a 403, not the 422 the API server answers without a reason"
    assert "(policy numa-kube.publisher-own-node)" in rule["message"]
    assert "(policy numa-kube.publisher-own-node)" in rule["messageExpression"]
    assert binding["spec"] == {"policyName": "numa-kube.publisher-own-node", "validationActions": ["Deny"]}


def test_a_namespace_that_cannot_name_a_service_account_is_refused_before_it_reaches_the_policy():
    with pytest.raises(KubeApiError, match="namespace \"x' || true || '\" is not a valid namespace name"):
        volcano_stack.publisher_objects(dict(PARAMS, namespace="x' || true || '"))


def _publisher_pod(params):
    pod = _by_kind(volcano_stack.publisher_objects(params))["DaemonSet"]["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def test_by_default_the_publisher_checks_kubelet_against_the_nodes_own_certificate_file_alone():
    pod, container = _publisher_pod(PARAMS)
    assert "--kubelet-tls=node-cert" in container["args"]
    assert {"name": "kubelet-cert", "hostPath": {"path": "/var/lib/kubelet/pki/kubelet.crt", "type": "File"}} \
        in pod["volumes"], "the certificate file, not /var/lib/kubelet/pki with kubelet's keys"
    assert {"name": "kubelet-cert", "mountPath": "/var/lib/kubelet/pki/kubelet.crt", "readOnly": True} \
        in container["volumeMounts"]
    assert all(mount["readOnly"] for mount in container["volumeMounts"])


@pytest.mark.parametrize("mode", ["cluster-ca", "insecure"])
def test_the_other_kubelet_tls_modes_mount_no_host_certificate(mode):
    pod, container = _publisher_pod(dict(PARAMS, publisher_kubelet_tls=mode))
    assert "--kubelet-tls=" + mode in container["args"]
    assert [v["name"] for v in pod["volumes"]] == ["pod-resources"]


def test_an_unknown_kubelet_tls_mode_is_refused():
    with pytest.raises(VolcanoError, match="publisher_kubelet_tls 'off' is not known: it must be one of "
                                           "node-cert, cluster-ca, insecure"):
        volcano_stack.publisher_objects(dict(PARAMS, publisher_kubelet_tls="off"))


class ListingApi(object):
    """A list of Numatopologies by label selector, and deletes that honour numa.kube's label."""

    def __init__(self, items):
        self.items, self.calls = items, []

    def get(self, path, **params):
        self.calls.append(("get", path, params))
        if self.items is None:  # no CRD
            return None
        wanted = dict(part.split("=") for part in params["label_selector"].split(","))
        return {"items": [obj for obj in self.items
                          if all(obj["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]}

    def delete(self, obj, check_mode=False):
        self.calls.append(("delete", obj["metadata"]["name"], check_mode))
        return True, {"metadata": {"name": obj["metadata"]["name"]}}


def _numatopology(name, labels):
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
            "metadata": {"name": name, "labels": labels}}


def test_absent_removes_the_numatopologies_the_publisher_wrote_and_no_other():
    ours = {"app.kubernetes.io/managed-by": "numa.kube"}
    api = ListingApi([_numatopology("w2", ours), _numatopology("exporter-node", {"app": "resource-exporter"}),
                      _numatopology("w1", ours)])
    done = volcano_stack.publisher_cleanup(api, check_mode=True)
    assert api.calls[0] == ("get", "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies",
                            {"label_selector": "app.kubernetes.io/managed-by=numa.kube"})
    assert api.calls[1:] == [("delete", "w1", True), ("delete", "w2", True)]
    assert [(obj["kind"], obj["metadata"]["name"], changed) for obj, changed, _before in done] == \
        [("Numatopology", "w1", True), ("Numatopology", "w2", True)]
    assert done[0][0]["apiVersion"] == "nodeinfo.volcano.sh/v1alpha1"


def test_absent_without_the_numatopology_crd_has_nothing_to_remove():
    api = ListingApi(None)
    assert volcano_stack.publisher_cleanup(api, check_mode=False) == []
    assert [call[0] for call in api.calls] == ["get"]
