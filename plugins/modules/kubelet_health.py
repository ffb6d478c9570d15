#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_health
short_description: Wait until a restarted kubelet stays healthy, or fail with its own error lines
version_added: "0.1.0"
description:
  - Polls kubelet's C(/healthz) and the main PID of its systemd service. The kubelet counts as
    healthy once C(/healthz) has answered C(ok) for O(settle) seconds with the same process
    throughout - kubelet answers before its CPU Manager restores its checkpoint, and a stale
    C(cpu_manager_state) makes it exit a moment later, so one good answer is not enough.
  - The settle period counts from the start of the process (its age, from C(/proc)), not from the
    first good answer. A kubelet restarted earlier in the change (or at boot) has spent part of it
    already, and one that has run O(settle) seconds is proven by one good answer.
  - When O(timeout) passes first, fails with the error lines kubelet wrote to the journal since
    O(since) (klog error and fatal lines, such as the Memory Manager's
    C(is not equal to the value ... determined by Node Allocatable feature)).
  - Fails before O(timeout) when a kubelet process it saw ends and that process's own lines refuse
    kubelet's configuration or state files in a way no restart gets past (the Memory Manager's
    reservation that does not add up, a NUMA node the machine lacks, C(invalid configuration), a
    CPU or Memory Manager checkpoint of another policy). Every start would refuse it again, so
    waiting out the timeout would only keep the node without a kubelet longer. A process that
    ends for another reason (the container runtime not answering yet, say) is waited on.
author:
  - numa.kube contributors (@numa-kube)
options:
  url:
    description: kubelet's health endpoint.
    type: str
    default: http://127.0.0.1:10248/healthz
  service:
    description: The systemd unit that runs kubelet (C(kubelet), C(rke2-agent), C(k3s), ...).
    type: str
    default: kubelet
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 300
  settle:
    description: Seconds the same process must have run, answering C(/healthz) ok.
    type: int
    default: 20
  process:
    description:
      - Follow the process of this name (its process ID) instead of the service's main process,
        for distributions that run kubelet as a child of their own service (RKE2, whose service
        keeps its main process when kubelet restarts). Empty follows the service.
    type: str
    default: ""
  log_file:
    description:
      - Read kubelet's error lines from the end of this file instead of the service's journal
        (RKE2 - C(/var/lib/rancher/rke2/agent/logs/kubelet.log)). Empty reads the journal.
    type: path
    default: ""
  since:
    description:
      - Read the journal from this time (seconds since the epoch) for error lines; defaults to
        when the module started.
    type: float
  log_lines:
    description: How many error lines to return at most.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    description: In check mode nothing is waited for; the result says so.
  diff_mode:
    support: none
    description: The module changes nothing.
seealso:
  - module: numa.kube.kubelet_config
"""

EXAMPLES = r"""
- name: Wait for kubelet after a restart
  numa.kube.kubelet_health:
    service: kubelet
    timeout: 300

- name: RKE2 agent, reading errors since the restart began
  numa.kube.kubelet_health:
    service: rke2-agent
    since: "{{ restart_started }}"
  register: kubelet_health
  ignore_errors: true
"""

RETURN = r"""
healthy:
  description: Whether kubelet became healthy and stayed so; null in check mode.
  returned: always
  type: bool
  sample: true
waited:
  description: Seconds waited.
  returned: always
  type: float
  sample: 34.2
detail:
  description: The last answer of the health endpoint, or the error reaching it.
  returned: always
  type: str
  sample: ok
restarts:
  description: How many times the service's main process changed while waiting (a crash loop shows here).
  returned: always
  type: int
  sample: 0
refused:
  description:
    - The line with which kubelet refused its configuration or state, when that ended the wait
      before O(timeout); null otherwise.
  returned: always
  type: str
  sample: 'E1122 10:00:01.000000 1234 run.go:72] "command failed" err="failed to run Kubelet: the total amount ...'
log_lines:
  description:
    - kubelet's own error lines, oldest first - from the journal since O(since), or from what
      O(log_file) gained while the module waited.
  returned: always
  type: list
  elements: str
  sample: ['E1122 10:00:01.000000 1234 run.go:72] "command failed" err="failed to run Kubelet: ..."']
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.kubelet.health import run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:10248/healthz"),
            service=dict(type="str", default="kubelet"),
            timeout=dict(type="int", default=300),
            settle=dict(type="int", default=20),
            process=dict(type="str", default=""),
            log_file=dict(type="path", default=""),
            since=dict(type="float"),
            log_lines=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    run(module)


if __name__ == "__main__":
    main()
