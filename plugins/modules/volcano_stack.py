#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: volcano_stack
short_description: Deploy Volcano from its release manifest and the Numatopology publisher that feeds numa-aware
version_added: "0.1.0"
description:
  - Applies Volcano's own release manifest (C(installer/volcano-development.yaml) of a release, or a
    file rendered from its Helm chart), from a path on the controller or a URL, with server-side
    apply (field manager C(numa.kube)), then waits until its Deployments are available.
  - Changes to the manifest only what is asked, for registries you mirror the images to and
    clusters whose API server cannot reach webhooks; O(image_registry), O(image_tag),
    O(image_pull_policy), O(node_selector) for Volcano's own pods, and O(admission=false) to leave
    the admission webhook and everything that serves it out.
  - The scheduler's ConfigMap is created when missing and never overwritten, so what
    M(numa.kube.volcano_numa_aware) or you changed in the scheduler configuration stays.
  - Without O(manifest), an existing Volcano (for example from its Helm chart) is left alone.
  - With O(publisher_image), deploys the node agent's Numatopology publisher as a DaemonSet (one
    C(nodeinfo.volcano.sh/v1alpha1) C(Numatopology) per node, kept current from kubelet's
    C(/configz), its PodResources API and sysfs) and waits until every selected node has its object, with
    one list of the objects' metadata a round (a GET each once ten or fewer are left), each node
    looked at until its object is there and not again. Selected nodes that are NotReady, up to
    O(unavailable_nodes_allowed), are left out and named. The waits run while the rollouts move
    (see O(wait_timeout) and O(wait_ceiling)).
  - Every document of the manifest is checked before anything is applied, and every problem is
    named in one refusal - a kind numa.kube does not apply (with its document and apiVersion),
    an invalid name or namespace, a container without an image or whose image, after
    O(image_registry) and O(image_tag), is not an image reference.
  - The webhook configurations are applied last, once the Deployment that serves them (found
    through the webhook's Service and its selector; every Deployment of the manifest when that
    does not lead to one) is available. Volcano's webhooks fail closed; one registered before its
    server answers refuses every object it watches. When that Deployment does not become
    available in time, the webhooks are not applied and the task fails saying so.
  - O(state=absent) deletes only what numa.kube applied (objects with its managed-by label), the
    webhooks first, and the Numatopologies the publisher published once its DaemonSet is gone.
    Volcano's CRDs (and with them every Volcano Job, Queue and PodGroup in the cluster) go only
    with O(delete_crds), its Namespaces only with O(delete_namespace).
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
  - numa.kube.stack_rollout
  - numa.kube.publisher
options:
  state:
    description: Whether the stack is deployed or removed.
    type: str
    choices: [present, absent]
    default: present
  manifest:
    description:
      - Volcano's release manifest, a path on the controller or an C(https://) URL; omit it to leave
        an installed Volcano alone.
      - A URL must be C(https://) and come with O(manifest_checksum); plain C(http://) (or any other
        scheme) and a URL without checksum are refused before the download, which gives up after 60 s.
    type: str
  manifest_checksum:
    description:
      - The manifest's expected checksum, C(sha256:) then the 64 hex digits of its SHA-256 (what
        C(sha256sum) prints); a manifest that differs is refused.
      - Required with a URL O(manifest); optional with a path.
    type: str
  admission:
    description:
      - Whether Volcano's admission webhook is deployed. Without it Volcano jobs get no defaults
        filled in (queue, minAvailable...) and are not validated; plain pods and Deployments with
        Volcano's C(schedulerName) work the same.
      - Its webhook configurations are applied once their server is available, which takes O(wait);
        O(wait=false) with a manifest that has webhooks is refused (set O(admission=false) instead).
    type: bool
    default: true
  image_registry:
    description: Registry and path the images are taken from instead of the manifest's (e.g. C(registry.example/volcanosh)).
    type: str
  image_tag:
    description: Tag of every Volcano image instead of the manifest's.
    type: str
  image_pull_policy:
    description: The containers' C(imagePullPolicy) (the release manifest says C(Always)).
    type: str
    choices: [Always, IfNotPresent, Never]
  node_selector:
    description: Node labels Volcano's own pods (scheduler, controllers, admission) must match.
    type: dict
    default: {}
  namespace:
    description:
      - Namespace of the publisher, and of the manifest's namespaced objects that name none
        (Volcano's own objects keep the manifest's).
    type: str
    default: volcano-system
  publisher_image:
    description: The node agent image (the collection's C(agent/Containerfile)); no publisher without it.
    type: str
  publisher_node_selector:
    description:
      - Node labels the publisher's pods must match (the nodes numa-aware should use); every node
        when empty.
      - The default selects the nodes M(numa.kube.node_labels) labelled C(numa.kube/aligned=true),
        those whose kubelet was proven to align pods to a NUMA node (C(site.yml) labels every node
        it prepares). A task whose selector matches no node warns that the publisher runs nowhere.
    type: dict
    default: {numa.kube/aligned: "true"}
  publisher_nodes_proxy:
    description:
      - Also grant the publisher C(nodes/proxy), which kubelets before 1.33 (or with the
        C(KubeletFineGrainedAuthz) gate off) require for C(/configz). It allows much more than
        reading the configuration, so grant it only where needed.
    type: bool
    default: false
  publisher_kubelet_tls:
    description:
      - How the publisher checks kubelet's serving certificate before it sends its service account
        token to C($NODE_IP:10250).
      - V(node-cert) checks it against the node's own C(/var/lib/kubelet/pki/kubelet.crt), mounted
        read-only from the host (that file alone, not the folder with kubelet's keys), for the
        node's name. Use it where kubelet serves the self-signed certificate it makes for itself
        when neither C(tlsCertFile) nor C(serverTLSBootstrap) is set (kubeadm's default). kubelet
        never renews that certificate; once it has expired (a year after kubelet made it), remove
        C(kubelet.crt) and C(kubelet.key) and restart kubelet, then the publisher's pod.
      - V(cluster-ca) checks it against the cluster's CA (the service account's C(ca.crt)) for the
        node's address. Use it where the cluster signs kubelets' serving certificates
        (C(serverTLSBootstrap) with their CSRs approved, as on EKS) or another distribution
        keeps kubelet's certificate elsewhere and signs it with the cluster's CA.
      - V(insecure) checks nothing; whatever answers on the node's kubelet port receives the
        token. Only to diagnose, or where neither of the above can work.
    type: str
    choices: [node-cert, cluster-ca, insecure]
    default: node-cert
  delete_crds:
    description:
      - With O(state=absent), also delete the manifest's CustomResourceDefinitions that numa.kube
        applied. Deleting a CRD deletes every object of it in the cluster (Volcano Jobs, Queues,
        PodGroups...), so the task is refused, before anything is deleted, while any such object
        exists, naming up to 5 of each CRD with their count (the Numatopologies the publisher
        published do not count when O(publisher_image) is given, as they go with the publisher).
      - Off, the CRDs stay (listed in RV(objects) with C(kept)).
    type: bool
    default: false
  delete_namespace:
    description:
      - With O(state=absent), also delete the manifest's Namespaces that numa.kube applied. The task
        is refused, before anything is deleted, while one holds Pods, DaemonSets, Deployments,
        Services, ConfigMaps (but C(kube-root-ca.crt)) or Secrets (but service account tokens) that
        numa.kube did not make from this manifest or the publisher, for example the NUMA monitoring
        stack, which M(numa.kube.numa_monitoring) deploys in C(volcano-system) by default.
      - Off, the Namespaces stay (listed in RV(objects) with C(kept)).
    type: bool
    default: false
  wait:
    description: Whether to wait for the Deployments, the publisher and its Numatopology objects.
    type: bool
    default: true
  max_unavailable:
    description:
      - The publisher DaemonSet's C(maxUnavailable), how many nodes' publisher pods an update takes
        down at once. A count (at least 1) or a percentage of the nodes (C("1%") to C("100%")),
        which Kubernetes rounds up.
      - Volcano's own workloads are Deployments and keep the manifest's strategy.
notes:
  - Check mode applies with the API server's dry run (objects in a namespace the run would create
    are shown as they would be sent).
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost)).
seealso:
  - module: numa.kube.volcano_numa_aware
"""

EXAMPLES = r"""
- name: Volcano v1.14.1 from its release manifest, images from a mirror, with the publisher
  numa.kube.volcano_stack:
    manifest: https://raw.githubusercontent.com/volcano-sh/volcano/v1.14.1/installer/volcano-development.yaml
    manifest_checksum: sha256:b5fc426e0984856ba2d9a3f327fb207430094af30ddc8f37a8d8b39fe5500239
    image_registry: registry.example/volcanosh
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
  delegate_to: localhost
  run_once: true

- name: Only the publisher (on the nodes labelled numa.kube/aligned=true), next to a Volcano installed with Helm
  numa.kube.volcano_stack:
    namespace: volcano
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
  delegate_to: localhost

- name: The publisher on every node, so that numa-aware sees each node's policies, aligned or not
  numa.kube.volcano_stack:
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
    publisher_node_selector: {}
  delegate_to: localhost

- name: Remove Volcano, its CRDs (refused while Volcano Jobs, Queues... exist) and its Namespaces
  numa.kube.volcano_stack:
    state: absent
    manifest: /srv/volcano/volcano-development.yaml
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
    delete_crds: true
    delete_namespace: true
  delegate_to: localhost
"""

RETURN = r"""
kept:
  description:
    - Objects of the stack's names that numa.kube did not make (no C(app.kubernetes.io/managed-by=numa.kube)
      label), left alone by O(state=absent), each with its manager.
  returned: always
  type: list
  elements: str
  sample: ["DaemonSet kube-system/kube-proxy (field managers kubeadm)"]
objects:
  description:
    - Each object and whether it changed, in the order the run went through them.
    - The scheduler's ConfigMap has C(kept) when it was already there; with O(state=absent), a CRD or
      Namespace left in place has C(kept) and C(reason) (its switch is off).
  returned: always
  type: list
  elements: dict
  sample: [{object: Deployment volcano-system/volcano-scheduler, changed: true}]
scheduler_conf_created:
  description: Whether the scheduler's ConfigMap was (or in check mode would be) created by this run.
  returned: always
  type: bool
numatopologies:
  description: The nodes whose Numatopology the publisher wrote.
  returned: when the publisher is deployed, wait is true and not in check mode
  type: list
  elements: str
  sample: [worker-1, worker-2]
unavailable_nodes:
  description:
    - Selected nodes left out of the proof as unavailable (NotReady or unreachable), within
      O(unavailable_nodes_allowed), each with why; also given as a warning.
  returned: when the publisher is deployed, wait is true and not in check mode
  type: dict
  sample: {worker-17: "NotReady (Ready Unknown: NodeStatusUnknown)"}
wait_seconds:
  description: Seconds each Deployment took to become available.
  returned: when state is present, wait is true and not in check mode
  type: dict
  sample: {"Deployment volcano-system/volcano-scheduler": 21.5}
"""

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.numa.kube.plugins.module_utils.k8s.runner import (
    AUTH_ARGUMENT_SPEC,
    ROLLOUT_ARGUMENT_SPEC,
    connect,
    run_stack_module,
    stack_module,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import ALIGNED_SELECTOR
from ansible_collections.numa.kube.plugins.module_utils.stacks.publisher import PUBLISHER_OPTIONS
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_conf import HAS_YAML
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano import read_manifest, run


def main():
    argument_spec = dict(
        state=dict(type="str", choices=["present", "absent"], default="present"),
        manifest=dict(type="str"),
        manifest_checksum=dict(type="str"),
        admission=dict(type="bool", default=True),
        image_registry=dict(type="str"),
        image_tag=dict(type="str"),
        image_pull_policy=dict(type="str", choices=["Always", "IfNotPresent", "Never"]),
        node_selector=dict(type="dict", default={}),
        namespace=dict(type="str", default="volcano-system"),
        publisher_image=dict(type="str"),
        publisher_node_selector=dict(type="dict", default=dict(ALIGNED_SELECTOR)),
        publisher_resources=PUBLISHER_OPTIONS["publisher_resources"],
        publisher_nodes_proxy=dict(type="bool", default=False),
        publisher_kubelet_tls=dict(type="str", choices=["node-cert", "cluster-ca", "insecure"], default="node-cert"),
        delete_crds=dict(type="bool", default=False),
        delete_namespace=dict(type="bool", default=False),
        wait=dict(type="bool", default=True),
    )
    argument_spec.update(ROLLOUT_ARGUMENT_SPEC)
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True,
                          required_one_of=[("manifest", "publisher_image")])
    api = connect(module, "volcano")
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))

    def work():
        # a manifest refused or unreadable fails the task as every stack refusal does: its problems listed
        text = read_manifest(module.params)
        result = run(api, module.params, text, module.check_mode, api.wait_for)
        if result.get("numatopologies") == []:
            module.warn("no Node matches publisher_node_selector %s: the Numatopology publisher runs nowhere and "
                        "numa-aware has no node to use. Label the aligned nodes (numa.kube.node_labels, which "
                        "site.yml runs for every node it prepares) or change publisher_node_selector"
                        % (module.params["publisher_node_selector"],))
        return result

    run_stack_module(module, api, work)


if __name__ == "__main__":
    main()
