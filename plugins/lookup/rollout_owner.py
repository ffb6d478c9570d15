# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: rollout_owner
author:
  - numa.kube contributors (@numa-kube)
version_added: "0.1.0"
short_description: The identity of this ansible-playbook run, to own a node's rollout record
description:
  - Returns who is running the play, for the O(numa.kube.rollout_state#module:owner) option - the
    run id, the controller's host name, the user, the main C(ansible-playbook) process with its
    start time, the controller's boot id and the pid namespace the run lives in.
  - Lookups run in a worker process forked for each task. The main process is found from C(/proc)
    - the nearest process, this one or an ancestor, that runs an Ansible program, then up through
    its parents as long as they run the very same command line (the workers share the main
    process's). Every task of one run therefore gets the same value, and a later run a different
    one.
  - Where C(/proc) is missing, or is not the C(/proc) of this process's pid namespace, or no
    ancestor runs an Ansible program, the main process is the one that started the worker through
    Python's C(multiprocessing) (how Ansible starts its workers; the main process itself when the
    lookup runs there), and its start time is read with C(ps -o lstart=) in the C locale and UTC.
    The value is the same for every task of the run there too.
  - C(pid_start) is field 22 of C(/proc/<pid>/stat) (the start time in clock ticks after boot), or
    C(@) and epoch seconds where it comes from C(ps), so the pair C(pid), C(pid_start) names one
    process even after the pid is reused; P(numa.kube.rollout_owner_gone#filter) uses it to tell
    whether that run still runs.
  - C(boot_id) is C(/proc/sys/kernel/random/boot_id) and C(pid_ns) the inode number of
    C(/proc/self/ns/pid) (empty and null without C(/proc)). The filter judges a run gone only when
    both are this controller's - not a run of another machine with the same host name, of an
    earlier boot or of another container.
  - C(run_id) is C(<controller>:<pid>:<pid_start>), followed by C(:) and the first 8 hex digits of
    the boot id and by C(:) and the pid namespace where they are known.
options: {}
notes:
  - Takes no terms.
seealso:
  - module: numa.kube.rollout_state
  - plugin: numa.kube.rollout_owner_gone
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Open the change as this run
  numa.kube.rollout_state:
    state: begin
    files: [/var/lib/kubelet/config.yaml]
    owner: "{{ lookup('numa.kube.rollout_owner') }}"

- name: Show who this run is
  ansible.builtin.debug:
    msg: "{{ lookup('numa.kube.rollout_owner').run_id }}"
"""

RETURN = r"""
_raw:
  description:
    - A one-element list holding this run's identity - C(run_id) (str), C(controller) (host name),
      C(user), C(pid) (int, the ansible-playbook main process), C(pid_start) (str), C(boot_id) (str,
      empty where unknown) and C(pid_ns) (int, null where unknown).
    - Every key is an option of O(numa.kube.rollout_state#module:owner), so the dict is passed as it is.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleLookupError("numa.kube.rollout_owner takes no terms, got %r" % (terms,))
        self.set_options(var_options=variables, direct=kwargs)
        return [rollout_owner.my_identity()]
