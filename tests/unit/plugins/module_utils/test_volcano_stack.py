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
