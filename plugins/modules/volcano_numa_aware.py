#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: volcano_numa_aware
short_description: Switch Volcano's numa-aware scheduling plugin on or off, and see which nodes it could use
version_added: "0.1.0"
description:
  - Reads Volcano's scheduler configuration (C(volcano-scheduler.conf) in the ConfigMap
    C(volcano-scheduler-configmap)) as YAML and, with O(state=enabled), adds the C(numa-aware)
    plugin with its C(weight) to the tier that holds C(predicates) and C(nodeorder); with
    O(state=disabled), takes it out of every tier. Every other plugin, argument, tier and key stays
    as it was. O(state=query) changes nothing and returns what the openFuyao scheduling service's
    C(GET /rest/scheduling/v1/numaaware) answers (C(status) C(open) or C(close)).
  - A configuration that is not valid YAML, or not Volcano's shape, is refused with the parse error
    and nothing is changed.
  - The scheduler watches its configuration folder and loads the file again when kubelet refreshes
    the ConfigMap volume. With O(activation=reload) the module marks each scheduler pod (which makes
    kubelet refresh the volume at once) and waits until each pod's log shows the configuration load
    with C(numa-aware) in or out and the pod then kept running for 10 seconds (a plugin that fails
    in the scheduling sessions ends the container; the module then names the restarts and the
    command that shows the failed container's log). O(activation=restart) rolls the scheduler
    Deployment instead (for installations that mount the file with C(subPath), which never
    refreshes, or log below C(-v=2)).
  - The switch is one transaction. Everything is checked before anything is written (the names,
    O(weight), the syntax of O(scheduler_selector), the configuration itself, and the scheduler as the
    activation needs it, that is its pods can be listed for C(reload) and its Deployment exists for
    C(restart)); a refusal names the value, the rule and the fix, and nothing is changed. The new
    configuration is written only if the ConfigMap still has the resourceVersion that was read.
  - Any failure after the write (an API error, the scheduler not taking in the new configuration within
    O(wait_timeout), a scheduler that crashes after loading it) puts the previous configuration back,
    byte for byte, with a merge patch carrying the resourceVersion the write produced, and makes the
    scheduler read it again (its pods marked for C(reload), its Deployment rolled again for C(restart);
    not waited for). The task then fails naming both what went wrong and what became of the previous
    configuration. If someone else changed the ConfigMap after the write, their change is kept (the
    precondition fails) and the failure says so; the previous configuration is then in the failed
    result's C(rollback.previous), to put back by hand if needed.
  - Reports the nodes the plugin would never place a NUMA-annotated pod on (no C(Numatopology),
    CPU Manager not C(static), Topology Manager C(none) or not the policy the pods will ask for).
author:
  - numa.kube contributors (@numa-kube)
extends_documentation_fragment:
  - numa.kube.kube_auth
options:
  state:
    description:
      - C(enabled) and C(disabled) switch the plugin; C(query) only reports.
    type: str
    choices: [enabled, disabled, query]
    required: true
  weight:
    description:
      - The plugin's C(weight) argument with O(state=enabled) (how much its node score counts against
        the other scoring plugins). An enabled plugin with another weight gets this one.
      - From 1 to 100. Volcano reads any whole number and multiplies the plugin's 0-100 node score by
        it; below 1 the score is off or reversed, above 100 numa-aware alone decides every placement.
    type: int
    default: 1
  namespace:
    description: Namespace of Volcano's scheduler (its ConfigMap, pods and Deployment).
    type: str
    default: volcano-system
  configmap:
    description: The scheduler's ConfigMap (a Helm release names it C(<release>-scheduler-configmap)).
    type: str
    default: volcano-scheduler-configmap
  config_key:
    description: The ConfigMap key holding the scheduler configuration.
    type: str
    default: volcano-scheduler.conf
  activation:
    description:
      - How the scheduler is made to run a changed configuration. C(reload) waits for its own reload
        (see the description); C(restart) rolls the Deployment O(scheduler_deployment) and waits for it;
        C(none) only writes the ConfigMap.
    type: str
    choices: [reload, restart, none]
    default: reload
  scheduler_selector:
    description:
      - Label selector of the scheduler's pods (for C(reload)), as C(kubectl get -l) takes it
        (C(key=value), C(key!=value), C(key in (a,b)), C(key notin (a,b)), C(key), C(!key),
        comma-separated) or as a mapping of label keys to values (all must match). Checked before
        anything is written; an empty selector is refused.
    type: raw
    default: app=volcano-scheduler
  scheduler_deployment:
    description: The scheduler's Deployment (for C(restart)).
    type: str
    default: volcano-scheduler
  wait:
    description: With O(activation=reload), whether to wait until the scheduler logged the new configuration.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds each wait may take (1 to 3600), as in every numa.kube module that reaches the API
        server - here the wait for the scheduler to log the new configuration (C(reload)) or to finish
        its restart (C(restart)). When it passes before the scheduler runs the new configuration, the
        previous one is put back (see the description).
    type: int
    default: 180
  wait_ceiling:
    description:
      - Seconds the whole task may take (1 to 86400, at least O(wait_timeout)); the requests, the
        write and the waits share this one deadline. Putting the previous configuration back after a
        failure takes a few more requests beyond it.
    type: int
    default: 3600
  topology_policy:
    description:
      - The C(volcano.sh/numa-topology-policy) your pods will ask for; nodes whose kubelet runs
        another Topology Manager policy are reported. Without it, only nodes that can serve no
        policy at all are.
    type: str
    choices: [best-effort, restricted, single-numa-node]
  node_selector:
    description: Label selector (a mapping) of the Nodes to report on; every Node when empty.
    type: dict
    default: {}
notes:
  - The plugin needs one C(nodeinfo.volcano.sh/v1alpha1) C(Numatopology) per node, kept current; the
    numa.kube node agent's C(topology-publisher) writes them (the role P(numa.kube.volcano#role) deploys it).
  - Check mode and diff show the configuration before and after; nothing is written. The checks
    before the write (reads only) run in check mode too.
  - Runs where the C(kubernetes) Python client is, usually the controller (C(delegate_to=localhost)).
seealso:
  - name: Volcano's numa-aware plugin
    description: How the plugin chooses nodes (Volcano's user guide).
    link: https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_numa_aware.md
"""

EXAMPLES = r"""
- name: Turn NUMA-aware scheduling on and wait until Volcano's scheduler runs it
  numa.kube.volcano_numa_aware:
    state: enabled
    weight: 10
    topology_policy: single-numa-node
  delegate_to: localhost
  run_once: true

- name: What the openFuyao service's GET would answer
  numa.kube.volcano_numa_aware:
    state: query
  delegate_to: localhost
  register: numa_aware

- name: A Helm-installed Volcano whose file is mounted with subPath
  numa.kube.volcano_numa_aware:
    state: disabled
    namespace: volcano
    configmap: vc-scheduler-configmap
    activation: restart
    scheduler_deployment: vc-scheduler
  delegate_to: localhost
"""

RETURN = r"""
status:
  description: C(open) when the plugin is in the configuration (after the change), C(close) when not.
  returned: always
  type: str
  sample: open
weight:
  description: The plugin's weight argument, when it is enabled and has one.
  returned: always
  type: int
  sample: 10
before:
  description: Status, weight and tier index (0 for the first tier) before the module ran.
  returned: always
  type: dict
  sample: {status: close, weight: null, tier: null}
activation:
  description: How the scheduler took in the change, its pods and the seconds it took.
  returned: when the configuration changed and not in check mode
  type: dict
  sample: {how: reload, pods: [volcano-scheduler-5d8f7c9b4-x2x7k], seconds: 4.1}
rollback:
  description:
    - What became of the previous configuration after a failure that came after the write. C(restored)
      true with the C(resource_version) the put-back produced; or false, with C(conflict) true when
      someone else had changed the ConfigMap (theirs is kept), and C(previous), the configuration this
      task replaced, to put back by hand.
  returned: when the task failed after writing the new configuration
  type: dict
  sample: {restored: true, resource_version: "48213"}
nodes:
  description: Per node the plugin would never use for NUMA-annotated pods, the reasons.
  returned: always
  type: dict
  sample: {worker-2: ["worker-2: no Numatopology object, so numa-aware rejects every pod that asks for a NUMA policy"]}
"""

import time

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.k8s.runner import AUTH_ARGUMENT_SPEC, connect, stack_module
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_conf import HAS_YAML, VolcanoError
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_numa_aware import run


def main():
    argument_spec = dict(
        state=dict(type="str", choices=["enabled", "disabled", "query"], required=True),
        weight=dict(type="int", default=1),
        namespace=dict(type="str", default="volcano-system"),
        configmap=dict(type="str", default="volcano-scheduler-configmap"),
        config_key=dict(type="str", default="volcano-scheduler.conf", no_log=False),  # a file name, not a secret
        activation=dict(type="str", choices=["reload", "restart", "none"], default="reload"),
        scheduler_selector=dict(type="raw", default="app=volcano-scheduler"),
        scheduler_deployment=dict(type="str", default="volcano-scheduler"),
        wait=dict(type="bool", default=True),
        wait_timeout=dict(type="int", default=180),
        wait_ceiling=dict(type="int", default=3600),
        topology_policy=dict(type="str", choices=["best-effort", "restricted", "single-numa-node"]),
        node_selector=dict(type="dict", default={}),
    )
    argument_spec.update(AUTH_ARGUMENT_SPEC)
    module = stack_module(argument_spec=argument_spec, supports_check_mode=True)
    api = connect(module)
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    try:
        result = run(api, module.params, module.check_mode, api.wait_for, time.monotonic)
    except VolcanoError as exc:
        module.fail_json(msg=str(exc), **exc.details)
    except KubeApiError as exc:
        module.fail_json(msg=str(exc))
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    if result.get("node_report_error"):
        module.warn(result.pop("node_report_error"))
    for problems in result["nodes"].values():
        for problem in problems:
            module.warn(problem)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
