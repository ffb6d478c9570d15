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
    C(/configz), its PodResources API and sysfs) and waits until every selected node has its object.
  - O(state=absent) deletes what the manifest and the publisher hold (Volcano's CRDs, and with them
    its jobs and queues, included).
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
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
    type: str
  manifest_checksum:
    description: The manifest's expected checksum, C(sha256) then a colon and the hex digest; a manifest that differs is refused.
    type: str
  admission:
    description:
      - Whether Volcano's admission webhook is deployed. Without it Volcano jobs get no defaults
        filled in (queue, minAvailable...) and are not validated; plain pods and Deployments with
        Volcano's C(schedulerName) work the same.
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
    description: Namespace of the publisher (Volcano's own objects keep the manifest's).
    type: str
    default: volcano-system
  publisher_image:
    description: The node agent image (the collection's C(agent/Containerfile)); no publisher without it.
    type: str
  publisher_node_selector:
    description: Node labels the publisher's pods must match (the nodes numa-aware should use).
    type: dict
    default: {}
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
  wait:
    description: Whether to wait for the Deployments, the publisher and its Numatopology objects.
    type: bool
    default: true
  wait_timeout:
    description: Seconds each wait may take.
    type: int
    default: 300
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
    image_registry: registry.example/volcanosh
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
  delegate_to: localhost
  run_once: true

- name: Only the publisher, next to a Volcano installed with Helm
  numa.kube.volcano_stack:
    namespace: volcano
    publisher_image: registry.example/numa-kube/node-agent:0.1.0
    publisher_node_selector: {numa.kube/aligned: "true"}
  delegate_to: localhost
"""

RETURN = r"""
objects:
  description: Each object and whether it changed; the scheduler's ConfigMap has C(kept) when it was already there.
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
wait_seconds:
  description: Seconds each Deployment took to become available.
  returned: when state is present, wait is true and not in check mode
  type: dict
  sample: {"Deployment volcano-system/volcano-scheduler": 21.5}
"""

import hashlib
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.urls import open_url

from ansible_collections.numa.kube.plugins.module_utils.kube_api import (
    AUTH_ARGUMENT_SPEC,
    HAS_KUBERNETES,
    KubeApi,
    KubeApiError,
    wait_for,
)
from ansible_collections.numa.kube.plugins.module_utils.volcano_conf import HAS_YAML, VolcanoError
from ansible_collections.numa.kube.plugins.module_utils.volcano_stack import run


def read_manifest(module):
    source = module.params["manifest"]
    if source is None:
        return None
    try:
        if source.startswith(("https://", "http://")):
            data = open_url(source, timeout=60).read()
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except Exception as exc:  # pylint: disable=broad-except  # any failure to read is the user's to fix
        module.fail_json(msg="cannot read the manifest %s: %s" % (source, exc))
    expected = module.params["manifest_checksum"]
    if expected:
        algorithm, _sep, digest = expected.partition(":")
        if algorithm != "sha256" or not digest:
            module.fail_json(msg="manifest_checksum must read sha256:<hex digest>, got %r" % expected)
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest.lower():
            module.fail_json(msg="the manifest %s has sha256 %s, not the %s manifest_checksum names: nothing "
                                 "was applied" % (source, actual, digest))
    return data.decode("utf-8")


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
        publisher_node_selector=dict(type="dict", default={}),
        publisher_nodes_proxy=dict(type="bool", default=False),
        publisher_kubelet_tls=dict(type="str", choices=["node-cert", "cluster-ca", "insecure"], default="node-cert"),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=300),
    )
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True,
                           required_one_of=[("manifest", "publisher_image")])
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=traceback.format_exc())
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    text = read_manifest(module)
    try:
        result = run(KubeApi(module.params), module.params, text, module.check_mode, wait_for)
    except (VolcanoError, KubeApiError) as exc:
        module.fail_json(msg=str(exc))
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
