# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano's manifest as numa.kube applies it, and the publisher's objects.

The real release manifest runs against the real API server in the cluster scenario; here the
changes numa.kube makes to it, on a manifest of the same shape.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib

import pytest

from ansible_collections.numa.kube.plugins.module_utils.k8s import client as k8s_client
from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano as volcano_stack
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_conf import VolcanoError
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
metadata: {name: volcano-scheduler, namespace: volcano-system, labels: {app: volcano-scheduler}}
spec:
  selector: {matchLabels: {app: volcano-scheduler}}
  template:
    metadata: {labels: {app: volcano-scheduler}}
    spec:
      containers:
      - {name: s, image: "mirror.example/volcanosh/vc-scheduler:v1.14.0", imagePullPolicy: Always}
---
apiVersion: v1
kind: Service
metadata: {name: volcano-admission-service, namespace: volcano-system}
spec:
  selector: {app: volcano-admission}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: volcano-admission, namespace: volcano-system}
spec:
  selector: {matchLabels: {app: volcano-admission}}
  template:
    metadata: {labels: {app: volcano-admission}}
    spec:
      containers:
      - {name: a, image: "mirror.example/volcanosh/vc-webhook-manager:v1.14.0"}
      volumes:
      - {name: certs, secret: {secretName: volcano-admission-secret}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: volcano-admission-service-jobs-mutate}
webhooks:
- name: mutatejob.volcano.sh
  clientConfig:
    service: {name: volcano-admission-service, namespace: volcano-system, path: /jobs/mutate}
  failurePolicy: Fail
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
    assert len(kept) == 7 and kept[5]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "mirror.example/volcanosh/vc-webhook-manager:v1.14.0"


def test_adjust_keeps_every_label_and_leaves_pod_templates_alone():
    # numa.kube's own labels are added by the client's apply (k8s.client), for every object of every stack
    objects = volcano_stack.load_manifest(MANIFEST, "m")
    scheduler = volcano_stack.adjust(objects, PARAMS)[3]
    assert scheduler["metadata"]["labels"] == {"app": "volcano-scheduler"}
    # the selector and the pod labels it matches are the manifest's (a Deployment's selector is immutable)
    assert scheduler["spec"]["selector"] == {"matchLabels": {"app": "volcano-scheduler"}}
    assert scheduler["spec"]["template"]["metadata"] == {"labels": {"app": "volcano-scheduler"}}
    assert "labels" not in objects[0]["metadata"], "the input is untouched"


def test_a_namespaced_object_without_a_namespace_goes_to_the_modules():
    text = MANIFEST.replace("metadata: {name: volcano-scheduler-configmap, namespace: volcano-system}",
                            "metadata: {name: volcano-scheduler-configmap}")
    conf = volcano_stack.volcano_objects(text, dict(PARAMS, namespace="batch"))[2]
    assert conf["metadata"]["namespace"] == "batch"
    assert volcano_stack.volcano_objects(text, PARAMS)[0]["metadata"] == {"name": "volcano-system"}, \
        "cluster-scoped: none"


@pytest.mark.parametrize("text,match", [
    ("a: [", "(?s)^m is not valid YAML: .*; nothing was applied$"),
    ("kind: Namespace\n", r"document 1 is not a Kubernetes object with apiVersion, kind and metadata.name \(found "
                          r"\{'kind': 'Namespace'\}\): complete it or remove it"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", "the manifest has no scheduler Deployment: is it "
     r"Volcano's release manifest \(installer/volcano-development.yaml\)\? give that file"),
])
def test_a_manifest_that_is_not_volcanos_is_refused(text, match):
    with pytest.raises(VolcanoError, match=match):
        volcano_stack.volcano_objects(text, dict(PARAMS, manifest="m"))


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
    by_kind = _by_kind(objects)
    policy, binding = by_kind["ValidatingAdmissionPolicy"], by_kind["ValidatingAdmissionPolicyBinding"]
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
    assert rule["expression"] == ("variables.claimed && request.userInfo.extra"
                                  "['authentication.kubernetes.io/node-name'] == [variables.target]")
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
    """A list of Numatopologies by label selector (KubeApi.list: read page by page; a plain GET of
    the collection would be one unpaged answer, and fails here), and deletes."""

    def __init__(self, items):
        self.items, self.calls = items, []

    def get(self, path, **params):
        raise AssertionError("an unpaged GET of %s" % path)

    def list(self, path, **params):
        self.calls.append(("list", path, params))
        if self.items is None:  # no CRD: KubeApi.get answers None for the collection, list nothing
            return []
        wanted = dict(part.split("=") for part in params["label_selector"].split(","))
        return [obj for obj in self.items if all(obj["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]

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
    assert api.calls[0] == ("list", "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies",
                            {"label_selector": "app.kubernetes.io/managed-by=numa.kube"})
    assert api.calls[1:] == [("delete", "w1", True), ("delete", "w2", True)]
    assert [(obj["kind"], obj["metadata"]["name"], changed) for obj, changed, _before in done] == \
        [("Numatopology", "w1", True), ("Numatopology", "w2", True)]
    assert done[0][0]["apiVersion"] == "nodeinfo.volcano.sh/v1alpha1"


def test_absent_without_the_numatopology_crd_has_nothing_to_remove():
    api = ListingApi(None)
    assert volcano_stack.publisher_cleanup(api, check_mode=False) == []
    assert [call[0] for call in api.calls] == ["list"]


# --- checks before anything is applied, order, what absent may delete ------------------------------------

OWNED = {"app.kubernetes.io/managed-by": "numa.kube"}


class Cluster(object):
    """The API as the stack sees it, with what its order depends on: numa.kube's label on what it
    applies, deletes only of labelled objects (others in ``kept``), Deployments Available once
    their name is in ``available``, and lists (``lists``: path -> items) read with a limit.
    ``events`` records applies, deletes and each Deployment seen Available, in order."""

    def __init__(self, available=(), nodes=()):
        self.store, self.lists, self.events, self.kept = {}, {}, [], []
        self.available = set(available)
        self.node_list = [{"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
                          for name in nodes]

    def put(self, obj, owned=True):
        obj = copy.deepcopy(obj)
        if owned:
            obj["metadata"]["labels"] = dict(obj["metadata"].get("labels") or {}, **OWNED)
        self.store[k8s_objects.path_of(obj)] = obj

    def claim(self, objects):
        self.events.append(("claim", len(objects)))

    def apply(self, obj, check_mode=False):
        self.events.append(("apply", k8s_objects.describe(obj), check_mode))
        before = self.store.get(k8s_objects.path_of(obj))
        if not check_mode:
            self.put(obj)
        return before is None, k8s_objects.comparable(before), k8s_objects.comparable(obj)

    def delete(self, obj, check_mode=False):
        before = self.store.get(k8s_objects.path_of(obj))
        if before is not None and not k8s_objects.owned(before):
            self.kept.append(k8s_objects.describe(obj))
            return False, k8s_objects.comparable(before)
        self.events.append(("delete", k8s_objects.describe(obj), check_mode))
        if before is not None and not check_mode:
            del self.store[k8s_objects.path_of(obj)]
        return before is not None, k8s_objects.comparable(before)

    def nodes(self, selector=None):
        return self.node_list

    def named(self, list_path, names, **params):
        return dict((name, self.get("%s/%s" % (list_path, name))) for name in names)

    def list(self, path, **params):
        """KubeApi.list itself over this get: page by page, two items a page here."""
        return k8s_client.KubeApi.list(self, path, page=2, **params)

    def get(self, path, **params):
        if path in self.lists:
            items, limit = self.lists[path], params.get("limit", 10000)
            if params.get("label_selector"):
                key, _eq, value = params["label_selector"].partition("=")
                items = [i for i in items if (i["metadata"].get("labels") or {}).get(key) == value]
            start = int(params.get("_continue") or 0)  # the continue token: where the next page starts
            end = start + limit
            meta = {"remainingItemCount": len(items) - end, "continue": str(end)} if len(items) > end else {}
            return {"items": items[start:end], "metadata": meta}
        found = copy.deepcopy(self.store.get(path))
        if found and found["kind"] == "Deployment" and found["metadata"]["name"] in self.available:
            self.events.append(("available", found["metadata"]["name"]))
            found["status"] = {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        if found and found["kind"] == "DaemonSet":
            count = len(self.node_list)
            found["status"] = {"desiredNumberScheduled": count, "updatedNumberScheduled": count,
                               "numberAvailable": count}
        return found

    def applied(self):
        return [event[1] for event in self.events if event[0] == "apply"]


WEBHOOK = "MutatingWebhookConfiguration volcano-admission-service-jobs-mutate"
ADMISSION = dict(PARAMS, admission=True, wait=True, publisher_image=None)


def refusal(params, text=MANIFEST, api=None):
    """The problems of a refused run, after checking it changed nothing."""
    api = api or Cluster(available=("volcano-scheduler", "volcano-admission"))
    with pytest.raises(VolcanoError) as caught:
        volcano_stack.run(api, params, text, False, no_wait)
    assert [e for e in api.events if e[0] in ("apply", "delete")] == [], "nothing changed before the refusal"
    refusal.message = str(caught.value)
    return caught.value.problems


def test_unsupported_kinds_are_all_named_before_anything_is_applied():
    text = MANIFEST + """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: volcano-scheduler, namespace: volcano-system}
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingWebhookConfiguration
metadata: {name: volcano-admission-service-pods-validate}
"""
    problems = refusal(ADMISSION, text)
    # what was refused as a whole opens the message; the problems are problems alone
    assert refusal.message.startswith("the manifest volcano-development.yaml was refused, nothing was applied: ")
    assert problems[0].startswith(
        "the manifest holds kinds numa.kube does not apply: policy/v1 PodDisruptionBudget (document 8, "
        "volcano-scheduler), admissionregistration.k8s.io/v1beta1 ValidatingWebhookConfiguration (document 9, "
        "volcano-admission-service-pods-validate) [numa.kube applies ValidatingWebhookConfiguration as "
        "admissionregistration.k8s.io/v1]; it applies only ClusterRole, ClusterRoleBinding, ConfigMap, ")
    assert problems[0].endswith("Remove those documents from the manifest (and apply them yourself), or use "
                                "Volcano's release manifest (installer/volcano-development.yaml)")


def test_every_bad_document_is_listed_in_one_refusal():
    text = MANIFEST.replace("name: volcano-scheduler-configmap, namespace: volcano-system",
                            "name: Volcano_Conf, namespace: volcano-system") \
        .replace("metadata: {name: volcano-admission, namespace: volcano-system}",
                 "metadata: {name: volcano-admission, namespace: Volcano}") \
        .replace('image: "mirror.example/volcanosh/vc-webhook-manager:v1.14.0"', 'image: ""') \
        .replace("metadata: {name: volcano-system}", "metadata: {name: volcano.system}")
    problems = refusal(dict(ADMISSION, namespace="-x", publisher_image="https://r/agent:1"), text)
    assert problems == [
        "namespace (the option) '-x' is not a valid namespace name: it must be a DNS-1123 label (lower-case letters, "
        "digits and '-', starting and ending with a letter or digit, at most 63 characters); fix the value",
        "publisher_image: image 'https://r/agent:1' is not an image reference: it starts with a scheme (registries "
        "are named without https://); set it to the node agent image as you pushed it",
        "document 1 (Namespace volcano.system): the name 'volcano.system' is not a valid namespace name: it must "
        "be a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit, at "
        "most 63 characters); fix the value",
        "document 3 (ConfigMap volcano-system/Volcano_Conf): the name 'Volcano_Conf' is not a valid Kubernetes "
        "object name: it must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and "
        "ending with a letter or digit, at most 253 characters; fix the value",
        "document 6 (Deployment Volcano/volcano-admission): the namespace 'Volcano' is not a valid namespace name: "
        "it must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or "
        "digit, at most 63 characters); fix the value",
        "document 6 (Deployment Volcano/volcano-admission) container 'a' has no image: every container needs one; "
        "set it in the manifest",
    ]


@pytest.mark.parametrize("image,why", [
    ("mirror.example/volcanosh/vc-scheduler :v1", "it holds whitespace"),
    ("https://mirror.example/volcanosh/vc-scheduler:v1", "it starts with a scheme (registries are named without https://)"),
    ("mirror.example/VolcanoSH/vc-scheduler:v1", "it is not [registry[:port]/]repository[:tag][@digest] in lower case"),
])
def test_a_malformed_image_in_the_manifest_is_refused(image, why):
    text = MANIFEST.replace("mirror.example/volcanosh/vc-scheduler:v1.14.0", image)
    problems = refusal(dict(ADMISSION, image_registry=None, image_tag=None), text)
    assert problems == ["document 4 (Deployment volcano-system/volcano-scheduler) container 's': image %r is not "
                        "an image reference: %s; fix the manifest" % (image, why)]


def test_images_are_checked_as_adjusted():
    text = MANIFEST.replace("mirror.example/volcanosh/vc-scheduler:v1.14.0", "https://mirror.example/volcanosh/vc-scheduler")
    applied = volcano_stack.volcano_objects(text, dict(ADMISSION, image_registry="mirror.example/vc", image_tag=None))
    assert applied[3]["spec"]["template"]["spec"]["containers"][0]["image"] == "mirror.example/vc/vc-scheduler"
    text = MANIFEST.replace("mirror.example/volcanosh/vc-scheduler:v1.14.0", "mirror.example/volcanosh/VC-scheduler:v1")
    problems = refusal(dict(ADMISSION, image_registry="mirror.example", image_tag=None), text)
    assert problems == [
        "document 4 (Deployment volcano-system/volcano-scheduler) container 's' ('mirror.example/volcanosh/VC-scheduler:v1' "
        "with image_registry 'mirror.example', image_tag None): image 'mirror.example/VC-scheduler:v1' is not an image "
        "reference: it is not [registry[:port]/]repository[:tag][@digest] in lower case; fix the manifest, or "
        "image_registry or image_tag"]


def test_image_options_are_checked_once_not_for_each_container():
    problems = refusal(dict(ADMISSION, image_registry="https://registry.example", image_tag="v1 .2"))
    assert problems == [
        "image_registry 'https://registry.example' is not a registry and path: it must read host[:port][/path] in "
        "lower case, without whitespace or a scheme (e.g. registry.example/volcanosh); fix it",
        "image_tag 'v1 .2' is not an image tag: it must be letters, digits, '_', '.' and '-' (not first), at most "
        "128 characters (e.g. v1.14.1); fix it"]


def test_images_pinned_by_digest_and_registries_with_ports_pass():
    digest = "@sha256:" + "a" * 64
    text = MANIFEST.replace("mirror.example/volcanosh/vc-scheduler:v1.14.0", "localhost:5000/volcanosh/vc-scheduler" + digest)
    applied = volcano_stack.volcano_objects(text, dict(ADMISSION, image_registry=None, image_tag=None))
    assert applied[3]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "localhost:5000/volcanosh/vc-scheduler" + digest


def test_absent_checks_names_and_kinds_but_not_images():
    text = MANIFEST.replace('image: "mirror.example/volcanosh/vc-webhook-manager:v1.14.0"', 'image: ""')
    assert volcano_stack.volcano_objects(text, dict(ADMISSION, state="absent"))
    problems = refusal(dict(ADMISSION, state="absent"), text.replace("kind: Service", "kind: Sevrice"))
    assert refusal.message.startswith("the manifest volcano-development.yaml was refused, nothing was deleted: ")
    assert problems[0].startswith("the manifest holds kinds numa.kube does not apply: v1 Sevrice (document 5, "
                                  "volcano-admission-service); ")


def test_webhooks_are_applied_last_once_their_server_is_available():
    api = Cluster(available=("volcano-scheduler", "volcano-admission"))
    documents = MANIFEST.split("---\n")
    webhook_first = "---\n".join(documents[-1:] + documents[:-1])  # wherever the manifest puts it
    result = volcano_stack.run(api, ADMISSION, webhook_first, False, no_wait)
    applied = api.applied()
    assert applied[-1] == WEBHOOK and applied.count(WEBHOOK) == 1
    webhook = api.events.index(("apply", WEBHOOK, False))
    assert api.events.index(("available", "volcano-admission")) < webhook, "its server was seen Available first"
    assert api.events.index(("available", "volcano-scheduler")) > webhook, "no need to wait for the others first"
    assert api.events[0] == ("claim", 6), "every object but the scheduler's ConfigMap claimed before the first apply"
    assert set(result["wait_seconds"]) == {"Deployment volcano-system/volcano-admission",
                                           "Deployment volcano-system/volcano-scheduler"}


def test_webhooks_are_not_applied_when_their_server_does_not_become_available():
    api = Cluster(available=("volcano-scheduler",))
    with pytest.raises(VolcanoError) as caught:
        volcano_stack.run(api, ADMISSION, MANIFEST, False, no_wait)
    assert str(caught.value) == (
        "Deployment volcano-system/volcano-admission did not become available (not done within 0 s; 0 of 1 replicas updated, "
        "0 available, 0 in all): the webhook configurations (%s) were not applied, so nothing fails closed on "
        "them; see kubectl -n volcano-system describe deployment volcano-admission, and run again once it can "
        "start" % WEBHOOK)
    assert WEBHOOK not in api.applied()
    assert "Deployment volcano-system/volcano-admission" in api.applied()


def test_without_wait_admission_webhooks_are_refused_before_anything_is_applied():
    problems = refusal(dict(ADMISSION, wait=False))
    assert problems == [
        "wait is false, but the manifest has admission webhooks (%s): they fail closed, so numa.kube applies them "
        "only once the Deployment that serves them is Available, which takes waiting; nothing was applied. Set "
        "wait: true, or admission: false to leave the webhooks out" % WEBHOOK]
    api = Cluster()
    volcano_stack.run(api, dict(ADMISSION, wait=False, admission=False), MANIFEST, False, no_wait)
    assert len(api.applied()) == 4


def test_a_dry_run_shows_the_webhooks_last_without_waiting():
    api = Cluster()
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "volcano-system"}})
    volcano_stack.run(api, ADMISSION, MANIFEST, True, no_wait)
    assert api.events[-1] == ("apply", WEBHOOK, True)
    assert not [e for e in api.events if e[0] == "available"]


def test_webhook_servers_are_traced_through_the_service_or_are_every_deployment():
    objects = volcano_stack.volcano_objects(MANIFEST, ADMISSION)
    assert [d["metadata"]["name"] for d in volcano_stack.webhook_servers(objects)] == ["volcano-admission"]
    by_url = copy.deepcopy(objects)
    by_url[-1]["webhooks"][0]["clientConfig"] = {"url": "https://admission.example/jobs"}
    assert [d["metadata"]["name"] for d in volcano_stack.webhook_servers(by_url)] == [
        "volcano-scheduler", "volcano-admission"]
    unmatched = copy.deepcopy(objects)
    unmatched[4]["spec"]["selector"] = {"app": "elsewhere"}
    assert len(volcano_stack.webhook_servers(unmatched)) == 2


@pytest.mark.parametrize("source,checksum,problem", [
    ("http://example.com/volcano.yaml", "sha256:" + "0" * 64,
     "manifest 'http://example.com/volcano.yaml' is not an https:// URL: a manifest from a URL must come over "
     "https (plain http, or any other scheme, lets anything on the way change what is applied with cluster-wide "
     "rights); use its https:// address, or download it, review it and give its path"),
    ("ftp://example.com/volcano.yaml", None, "manifest 'ftp://example.com/volcano.yaml' is not an https:// URL"),
    ("https://example.com/volcano.yaml", None,
     "manifest 'https://example.com/volcano.yaml' is a URL without manifest_checksum: a manifest from a URL must be "
     "pinned (what is served there can change); set manifest_checksum to 'sha256:' and the sha256sum of the "
     "manifest you reviewed"),
    ("/srv/volcano.yaml", "md5:abc",
     "manifest_checksum must read sha256:<64 hex digits>, got 'md5:abc'; set it to 'sha256:' and the output of "
     "sha256sum for the manifest"),
])
def test_a_manifest_source_that_is_not_pinned_is_refused(source, checksum, problem):
    with pytest.raises(VolcanoError) as caught:
        volcano_stack.check_source(source, checksum)
    assert caught.value.problems[0].startswith(problem)


def test_a_pinned_https_url_and_a_path_without_checksum_are_accepted_and_checksums_compared():
    digest = hashlib.sha256(b"manifest").hexdigest()
    volcano_stack.check_source("https://example.com/volcano.yaml", "sha256:" + digest.upper())
    volcano_stack.check_source("/srv/volcano.yaml", None)
    volcano_stack.check_checksum(b"manifest", "sha256:" + digest.upper(), "/srv/volcano.yaml")
    volcano_stack.check_checksum(b"anything", None, "/srv/volcano.yaml")
    with pytest.raises(VolcanoError, match="the manifest m has sha256 %s, not the %s manifest_checksum names: "
                                           "nothing was applied" % (hashlib.sha256(b"other").hexdigest(), digest)):
        volcano_stack.check_checksum(b"other", "sha256:" + digest, "m")


def deployed(params=None):
    api = Cluster(available=("volcano-scheduler", "volcano-admission"), nodes=("w1",))
    api.put({"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {"name": "w1"}})
    volcano_stack.run(api, params or ADMISSION, MANIFEST, False, no_wait)
    api.events = []
    return api


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/numatopologies.nodeinfo.volcano.sh"
NUMATOPOLOGIES = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"


def served(api):
    """The manifest's CRD as the API server serves it."""
    api.store[CRD_PATH]["spec"].update(names={"plural": "numatopologies", "kind": "Numatopology"},
                                       versions=[{"name": "v1alpha1", "served": True, "storage": True}])


def test_absent_keeps_crds_and_namespaces_unless_asked_and_deletes_webhooks_first():
    api = deployed()
    result = volcano_stack.run(api, dict(ADMISSION, state="absent"), MANIFEST, False, no_wait)
    deleted = [e[1] for e in api.events if e[0] == "delete"]
    assert deleted[0] == WEBHOOK
    assert "CustomResourceDefinition numatopologies.nodeinfo.volcano.sh" not in deleted
    assert "Namespace volcano-system" not in deleted
    assert {"object": "Namespace volcano-system", "changed": False, "kept": True,
            "reason": "delete_namespace is false"} in result["objects"]
    assert {"object": "CustomResourceDefinition numatopologies.nodeinfo.volcano.sh", "changed": False, "kept": True,
            "reason": "delete_crds is false"} in result["objects"]
    assert CRD_PATH in api.store


def test_a_crd_is_not_deleted_while_custom_resources_of_it_exist():
    api = deployed()
    served(api)
    api.lists[NUMATOPOLOGIES] = [{"metadata": {"name": "node-%d" % i}} for i in range(7)]
    problems = refusal(dict(ADMISSION, state="absent", delete_crds=True), api=api)
    assert problems == [
        "nothing was deleted",
        "CRD numatopologies.nodeinfo.volcano.sh still has 7 Numatopology objects in the cluster (node-0, node-1, "
        "node-2, node-3, node-4 and 2 more): deleting it deletes them all. Delete them first (kubectl delete "
        "numatopologies.nodeinfo.volcano.sh --all -A) and run again, or leave delete_crds off"]


def test_a_crd_without_custom_resources_is_deleted_when_asked():
    api = deployed()
    served(api)
    api.lists[NUMATOPOLOGIES] = []
    volcano_stack.run(api, dict(ADMISSION, state="absent", delete_crds=True), MANIFEST, False, no_wait)
    assert CRD_PATH not in api.store


def test_numatopologies_the_publisher_made_do_not_hold_the_crd_when_the_publisher_goes_too():
    api = deployed(dict(ADMISSION, publisher_image="r/agent:1"))
    served(api)
    ours = {"metadata": {"name": "w1", "labels": OWNED}}
    api.lists[NUMATOPOLOGIES] = [ours]
    params = dict(ADMISSION, state="absent", delete_crds=True, publisher_image="r/agent:1")
    result = volcano_stack.run(api, params, MANIFEST, True, no_wait)
    done = [(o["object"], o["changed"]) for o in result["objects"]]
    crd = ("CustomResourceDefinition numatopologies.nodeinfo.volcano.sh", True)
    assert crd in done and done.index(("Numatopology w1", True)) < done.index(crd), "published ones go first"
    api.events = []
    api.lists[NUMATOPOLOGIES] = [ours, {"metadata": {"name": "w2"}}]
    problems = refusal(params, api=api)
    assert problems[1].startswith("CRD numatopologies.nodeinfo.volcano.sh still has 1 Numatopology object in the "
                                  "cluster (w2): ")


def pods_going(api, path, rounds=1):
    """A wait_for that calls its check until done, the pods at ``path`` gone after ``rounds`` calls
    (as the garbage collector takes a deleted DaemonSet's pods), marking that moment in ``events``."""
    def wait_for(check, timeout, progress=None):
        for call in range(rounds + 1):
            if call == rounds and api.lists.get(path):
                api.lists[path] = []
                api.events.append(("pods gone",))
            done, value = check()
            if done:
                return done, value, float(call)
        return done, value, float(rounds)
    return wait_for


def test_absent_takes_the_publishers_rights_before_its_policy_and_its_objects_once_its_pods_are_gone():
    api = deployed(dict(ADMISSION, publisher_image="r/agent:1"))
    served(api)
    pods = "/api/v1/namespaces/volcano-system/pods"
    api.lists[pods] = [{"metadata": {"name": "numa-topology-publisher-%d" % i, "labels": {"app": "numa-topology-publisher"}}}
                       for i in range(3)]
    api.lists[NUMATOPOLOGIES] = [{"metadata": {"name": "w1", "labels": OWNED}}]
    params = dict(ADMISSION, state="absent", publisher_image="r/agent:1")
    volcano_stack.run(api, params, MANIFEST, False, pods_going(api, pods))
    order = [e[1] if e[0] == "delete" else e[0] for e in api.events if e[0] in ("delete", "pods gone")]
    publisher = order[order.index("DaemonSet volcano-system/numa-topology-publisher"):]
    assert publisher[:7] == [
        "DaemonSet volcano-system/numa-topology-publisher", "ClusterRoleBinding numa-kube:numa-topology-publisher",
        "ValidatingAdmissionPolicyBinding numa-kube.publisher-own-node", "ValidatingAdmissionPolicy "
        "numa-kube.publisher-own-node", "ClusterRole numa-kube:numa-topology-publisher",
        "ServiceAccount volcano-system/numa-topology-publisher", "pods gone"], \
        "no new pod, then no rights, and only then no own-node policy; its objects once its pods are gone"
    assert publisher[7] == "Numatopology w1"
    # pods that stay (a node down) have no rights left: the objects go anyway, and a warning says so
    api.events = []
    api.lists[pods] = [{"metadata": {"name": "numa-topology-publisher-x", "labels": {"app": "numa-topology-publisher"}}}]
    result = volcano_stack.run(api, params, MANIFEST, False, no_wait)
    assert result["warnings"][0].startswith("1 pod of the publisher was still there after waiting "
                                            "(numa-topology-publisher-x; 5s without progress at most): it has no rights")
    assert ("delete", "Numatopology w1", False) in api.events
    api.events = []
    volcano_stack.run(api, params, MANIFEST, True, pods_going(api, pods, rounds=5))
    assert ("pods gone",) not in api.events, "check mode deletes nothing, so waits for nothing"


def test_a_crd_numa_kube_did_not_make_is_neither_checked_nor_deleted():
    api = deployed()
    api.put(dict(api.store[CRD_PATH], metadata={"name": "numatopologies.nodeinfo.volcano.sh"}), owned=False)
    volcano_stack.run(api, dict(ADMISSION, state="absent", delete_crds=True), MANIFEST, False, no_wait)
    assert CRD_PATH in api.store and api.kept == ["CustomResourceDefinition numatopologies.nodeinfo.volcano.sh"]


def namespace_lists(api, **extra):
    base = "/api/v1/namespaces/volcano-system/"
    lists = {base + "pods": [], "/apis/apps/v1/namespaces/volcano-system/daemonsets": [],
             "/apis/apps/v1/namespaces/volcano-system/deployments": [], base + "services": [],
             base + "configmaps": [], base + "secrets": []}
    for name, items in extra.items():
        path = [p for p in lists if p.endswith("/" + name)][0]
        lists[path] = items
    api.lists.update(lists)


def test_the_namespace_is_not_deleted_while_it_holds_objects_numa_kube_did_not_make():
    api = deployed()
    namespace_lists(api, daemonsets=[{"metadata": {"name": "numa-exporter"}}],
                    configmaps=[{"metadata": {"name": "volcano-scheduler-configmap"}},
                                {"metadata": {"name": "volcano-scheduler-configmap-2", "labels": OWNED}}],
                    pods=[{"metadata": {"name": "numa-exporter-x1", "ownerReferences": [
                        {"kind": "DaemonSet", "name": "numa-exporter"}]}}])
    problems = refusal(dict(ADMISSION, state="absent", delete_namespace=True), api=api)
    assert problems == [
        "nothing was deleted",
        "Namespace volcano-system holds 4 objects numa.kube did not make from this manifest (Pod numa-exporter-x1, "
        "DaemonSet numa-exporter, ConfigMap volcano-scheduler-configmap, ConfigMap volcano-scheduler-configmap-2): "
        "deleting the Namespace deletes them. Move or delete them first and run again, or leave delete_namespace "
        "off"]


def test_the_namespace_holding_only_what_the_manifest_made_is_deleted_when_asked():
    api = deployed()
    owned = dict(labels=OWNED)
    namespace_lists(
        api, pods=[{"metadata": {"name": "volcano-admission-5d9f-x", "labels": {"pod-template-hash": "5d9f"},
                                 "ownerReferences": [{"kind": "ReplicaSet", "name": "volcano-admission-5d9f"}]}}],
        deployments=[{"metadata": dict(owned, name="volcano-admission")}],
        services=[{"metadata": dict(owned, name="volcano-admission-service")}],
        configmaps=[{"metadata": {"name": "kube-root-ca.crt"}}],
        secrets=[{"metadata": {"name": "volcano-admission-secret"}, "type": "Opaque"},
                 {"metadata": {"name": "token"}, "type": "kubernetes.io/service-account-token"}])
    volcano_stack.run(api, dict(ADMISSION, state="absent", delete_namespace=True), MANIFEST, False, no_wait)
    assert "/api/v1/namespaces/volcano-system" not in api.store
    assert api.events[-1] == ("delete", "Namespace volcano-system", False)


def test_a_pod_of_a_deployment_with_a_longer_name_is_not_taken_for_ours():
    ours = {("Deployment", "volcano-admission")}
    pod = {"metadata": {"name": "p", "labels": {"pod-template-hash": "5d9f"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "volcano-admission-extra-5d9f"}]}}
    assert volcano_stack._foreign(dict(pod, kind="Pod"), ours)
    pod["metadata"]["ownerReferences"][0]["name"] = "volcano-admission-5d9f"
    assert not volcano_stack._foreign(dict(pod, kind="Pod"), ours)


def test_a_namespace_is_read_page_by_page_and_too_many_objects_to_read_hold_it():
    api = deployed()
    pods = [{"metadata": {"name": "p%d" % i, "labels": {"pod-template-hash": "h"},
                          "ownerReferences": [{"kind": "ReplicaSet", "name": "volcano-scheduler-h"}]}} for i in range(1200)]
    namespace_lists(api, pods=pods[:1000] + [{"metadata": {"name": "stray"}}] + pods[1000:])
    problems = refusal(dict(ADMISSION, state="absent", delete_namespace=True), api=api)
    assert problems[1].startswith("Namespace volcano-system holds 1 object numa.kube did not make from this manifest "
                                  "(Pod stray): ")
    namespace_lists(api, pods=pods * 9)
    problems = refusal(dict(ADMISSION, state="absent", delete_namespace=True), api=api)
    assert problems[1].startswith("Namespace volcano-system holds 0 objects numa.kube did not make from this manifest "
                                  "(none of those read), and over 10000 objects of one kind, not all read: ")


def test_without_a_manifest_the_options_are_still_checked_first():
    api = Cluster()
    with pytest.raises(VolcanoError, match="^namespace \\(the option\\) 'Volcano' is not a valid namespace name"):
        volcano_stack.run(api, dict(ADMISSION, manifest=None, namespace="Volcano", publisher_image="r/agent:1"),
                          None, False, no_wait)
    assert api.events == []


@pytest.mark.parametrize("option", ["node_selector", "publisher_node_selector"])
def test_node_selectors_are_checked_before_anything_is_applied(option):
    api = Cluster()
    with pytest.raises(VolcanoError, match="%s: value 'a,zone!=b' of 'zone'" % option):
        volcano_stack.run(api, dict(ADMISSION, manifest=None, publisher_image="r/agent:1", **{option: {"zone": "a,zone!=b"}}),
                          None, False, no_wait)
    assert api.events == []


def test_a_manifest_download_is_bounded_in_time_and_size():
    import io

    class Trickle(object):
        def __init__(self):
            self.sent = 0

        def read1(self, size):
            self.sent += 1
            return b"x"  # one byte a read, for ever

    now = [0.0]

    def clock():
        now[0] += 1.0
        return now[0]

    with pytest.raises(VolcanoError, match=r"took more than 60 s to download \(\d+ bytes so far\)"):
        volcano_stack.read_bounded(Trickle(), "https://example/v.yaml", clock=clock)
    with pytest.raises(VolcanoError, match="is larger than 10 bytes"):
        volcano_stack.read_bounded(io.BytesIO(b"y" * 100), "https://example/v.yaml", limit=10)
    assert volcano_stack.read_bounded(io.BytesIO(b"kind: Namespace\n"), "https://example/v.yaml") == b"kind: Namespace\n"


@pytest.mark.parametrize("source, checksum, words", [
    ("http://example.com/volcano.yaml", None, "is not an https:// URL"),
    ("https://example.com/volcano.yaml", None, "is a URL without manifest_checksum"),
    ("/nonexistent/volcano.yaml", None, "cannot read the manifest /nonexistent/volcano.yaml"),
])
def test_a_manifest_refused_or_unreadable_fails_the_module_with_its_problems(monkeypatch, source, checksum, words):
    """Review of the renovation: volcano_stack's manifest refusals ended the task with a message alone,
    where every other stack refusal lists its problems."""
    from ansible_collections.numa.kube.plugins.modules import volcano_stack as module
    from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run as run_module

    class Offline(object):
        def wait_for(self, *args, **kwargs):
            raise AssertionError("nothing is waited for")

    monkeypatch.setattr(module, "connect", lambda module_, stack=None: Offline())
    failed, result = run_module(module, {"manifest": source, "manifest_checksum": checksum})
    assert failed and words in result["msg"], result
    assert result["problems"] and words in result["problems"][0], result
