#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_labels
short_description: Label a Node with the NUMA policies its kubelet runs, numa.kube/aligned where it aligns
version_added: "0.1.0"
description:
  - Keeps five labels of one Node true to what its kubelet runs, read from the kubelet's own
    C(/configz) (through the API server's C(nodes/proxy)), never from a file on the node -
    C(numa.kube/cpu-manager-policy) (C(cpuManagerPolicy), V(none) or V(static)),
    C(numa.kube/memory-manager-policy) (C(memoryManagerPolicy), V(None) or V(Static)),
    C(numa.kube/topology-manager-policy) (C(topologyManagerPolicy)),
    C(numa.kube/topology-manager-scope) (C(topologyManagerScope)),
    and C(numa.kube/aligned=true) only where the kubelet aligns pods to a NUMA node.
  - A kubelet aligns with the static CPU Manager and the Topology Manager policy V(restricted) or
    V(single-numa-node), the rule M(numa.kube.numa_resource_plugin) applies before it deploys.
    Elsewhere (V(best-effort) included, which places pods across NUMA nodes when it must)
    C(numa.kube/aligned) is removed, never set to V(false), so a selector on it picks aligned
    nodes only; M(numa.kube.numa_resource_plugin) and the publisher of M(numa.kube.volcano_stack)
    select it by default.
  - With O(state=present) the Node must exist, be Ready (condition C(Ready=True)) and its kubelet
    must answer C(/configz), proof that a running kubelet runs the policies. The module waits for
    both within O(wait_timeout) (a kubelet just restarted takes a few seconds), then fails naming
    what is missing and the fix, having changed nothing.
  - Labels of those keys that disagree with the running kubelet are returned in RV(stale) and
    named in a warning, then put right - after this run changed kubelet's policies that is expected;
    otherwise kubelet was changed outside numa.kube since the labels were set.
  - Changes are one JSON merge patch of C(metadata.labels) (field manager C(numa.kube)) that
    names only those keys (V(null) removes one); every other label, other C(numa.kube/*) keys
    included, is left as it is. No patch is sent when the labels are right.
  - The patch is pinned to the Node's uid and C(resourceVersion) as read with C(/configz). When the
    Node was written in between (a kubelet restarted by a concurrent take-out writes its status, a
    drain cordons it) the API server refuses the patch and the module reads the Node and its
    kubelet again, up to 6 times; labels computed from a kubelet that has changed since never land.
  - O(state=absent) removes those five keys only, whatever the kubelet runs and whether the Node is
    Ready (a node being taken out loses its labels first, so the stacks that select them leave it
    before its kubelet stops aligning). A Node that does not exist has nothing to remove.
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
options:
  name:
    description: The Node's name, as its kubelet registers it (C(kubectl get nodes)).
    type: str
    required: true
  state:
    description: V(present) sets the labels to what the kubelet runs; V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  wait_timeout:
    description:
      - Seconds the whole task may take (1-3600), its wait for the Node to be Ready and its kubelet
        to answer C(/configz) included.
    type: int
    default: 300
notes:
  - Check mode sends no patch; the task's C(changed) and its diff say what the patch would change.
  - The task's credentials need C(get) and C(patch) on C(nodes) and C(get) on C(nodes/proxy).
  - O(adopt) is ignored, this module makes no object.
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost)).
seealso:
  - module: numa.kube.kubelet_config
  - module: numa.kube.numa_resource_plugin
  - module: numa.kube.volcano_stack
"""

EXAMPLES = r"""
- name: Label the node with the policies its kubelet runs, once it is Ready again
  numa.kube.node_labels:
    name: "{{ ansible_facts.nodename }}"
    wait_timeout: 180
  delegate_to: localhost
  register: labels

- name: Say when the node does not align
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }} runs {{ labels.labels['numa.kube/topology-manager-policy'] }}: not aligned"
  when: not labels.aligned

- name: Take the labels off before the node is taken out of NUMA alignment
  numa.kube.node_labels:
    name: "{{ ansible_facts.nodename }}"
    state: absent
  delegate_to: localhost

- name: Pods that need alignment select it
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Pod
      metadata: {name: pinned}
      spec:
        nodeSelector: {numa.kube/aligned: "true"}
        containers:
          - name: app
            image: busybox
            command: [sleep, infinity]
            resources:
              limits: {cpu: "2", memory: 256Mi}
  delegate_to: localhost
"""

RETURN = r"""
labels:
  description:
    - The Node's labels of the five keys after the task (in check mode, what they would be); empty
      with O(state=absent).
  returned: always
  type: dict
  sample:
    numa.kube/aligned: "true"
    numa.kube/cpu-manager-policy: static
    numa.kube/memory-manager-policy: Static
    numa.kube/topology-manager-policy: single-numa-node
    numa.kube/topology-manager-scope: container
stale:
  description:
    - The labels found that disagreed with the running kubelet, each with its key, the value it
      had (C(label)) and what kubelet runs (C(running); V(null) for C(numa.kube/aligned) on a
      kubelet that does not align). Empty with O(state=absent).
  returned: always
  type: list
  elements: dict
  sample: [{key: numa.kube/topology-manager-policy, label: single-numa-node, running: best-effort},
           {key: numa.kube/aligned, label: "true", running: null}]
aligned:
  description: Whether the kubelet aligns, so the Node carries C(numa.kube/aligned=true); V(false) with O(state=absent).
  returned: always
  type: bool
  sample: true
"""

from ansible_collections.numa.kube.plugins.module_utils.k8s.client import DEFAULT_WAIT_TIMEOUT
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.k8s.runner import AUTH_ARGUMENT_SPEC, connect, stack_module
from ansible_collections.numa.kube.plugins.module_utils.kubelet.labels import (
    NodeLabelsError,
    run,
    stale_warning,
)


def main():
    argument_spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        wait_timeout=dict(type="int", default=DEFAULT_WAIT_TIMEOUT),
    )
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True)
    api = connect(module)
    try:
        result = run(api, module.params, module.check_mode, api.wait_for)
    except NodeLabelsError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    except KubeApiError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    diff = result.pop("diff")
    diff.update(before_header="Node %s numa.kube labels" % module.params["name"],
                after_header="Node %s numa.kube labels" % module.params["name"])
    if module._diff:
        result["diff"] = diff
    for warning in (result.pop("warning", None), stale_warning(module.params["name"], result["stale"])):
        if warning:
            module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
