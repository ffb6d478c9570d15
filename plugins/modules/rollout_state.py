#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rollout_state
short_description: Record a disruptive change on a node, and undo an unfinished one
version_added: "0.1.0"
description:
  - Keeps a marker on the node for the time a disruptive change (kubelet or containerd restart,
    reboot) is under way, holding every file the change may touch as it was, whether the node was
    unschedulable before, the services involved, the steps reached and the run that owns the change.
  - A regular file is kept with its bytes, mode, owner and extended attributes (C(security.selinux)
    and ACLs included). A symbolic link is kept as the link (its target); where it leads is recorded
    too (a regular file, or nothing yet), so a change that writes through the link is put back as
    well. Directories, devices, FIFOs and sockets are refused by O(state=begin), naming each, and
    so are regular files over 64 MiB.
  - The marker survives the controller. A later run finds it with O(state=query), puts every
    recorded file back with O(state=restore), restores the services and schedulability, and closes
    it with O(state=finish).
  - Opening a marker that exists already keeps what was recorded first and only adds new files and
    services, so an interrupted run never replaces the true previous state with a half-done one.
  - One run owns the record. O(state=begin) records O(owner); every call of the owner that changes
    the record (O(state=begin), O(state=step), O(state=restore), O(state=finish)) refreshes the
    owner's heartbeat. Another run may change the record only when it has no owner (a record of an
    older release, or one planted by hand), when the owner's lease has run out (no heartbeat for
    the O(lease) the owner asked for), or with O(take_over). Otherwise the module fails without
    changing anything, naming the owner, and returns it in RV(owner).
  - Every reading and writing of the record holds C(flock) on C(<folder>/.lock) (exclusive to
    change it, shared to read it), waiting up to 30 seconds for another task to let go; then it
    fails naming the lock.
  - Saved copies, the marker and every restored file are written to a temporary file that is
    fsynced and renamed into place, and the folder is fsynced after the rename (and after every
    removal). A restored regular file that has other hard links is rewritten in place (truncated,
    written, fsynced) instead, so every link sees it; a hard link the change itself split stays
    split.
  - A marker written by the previous release (version 1) is read as a record without owner whose
    extended attributes are unknown (left as they are); it is written back as version 2. A marker
    that is valid JSON but lacks what a record has (or has it of the wrong type) is refused with
    what is wrong, where the saved copies are and what to do.
  - The roles of this collection use it through the C(numa.kube.rollout) role; it is rarely called
    directly.
author:
  - numa.kube contributors (@numa-kube)
options:
  state:
    description:
      - C(query) reads the marker. C(begin) opens it (or extends an open one) and saves the files.
        C(step) records a step. C(restore) puts every recorded file back as it was before the
        change (files that did not exist are removed) and keeps the marker; before it writes the
        first file it records the step C(restoring files), so that a later run knows the services
        may be running on files that are no longer on disk. C(finish) first makes the change durable
        (fsync of every recorded file that is a regular file now, and of each one's folder), then
        removes the marker, then the saved copies and whatever copies or temporary files an earlier
        finish or write cut short left in the folder (the lock file C(.lock) stays). Cut short
        between the two, it leaves only copies that no marker names, which nothing reads.
    type: str
    choices: [query, begin, step, restore, finish]
    default: query
  folder:
    description:
      - Where the marker, the saved copies and the lock live (created mode 0700).
      - Must be an absolute path in normal form (no C(.), C(..) or C(//)), not C(/), and not
        something other than a folder.
    type: path
    default: /var/lib/numa-kube/rollout
  files:
    description:
      - With O(state=begin), absolute paths (in normal form) of the files the change may write or
        remove. Each must be a regular file, a symbolic link or absent.
    type: list
    elements: path
    default: []
  services:
    description: With O(state=begin), the systemd units the change stops or restarts.
    type: list
    elements: str
    default: []
  unschedulable:
    description:
      - With O(state=begin), whether the Node was unschedulable (cordoned) before the change; omit
        when the API cannot be asked. Kept from the first opening.
    type: bool
  reason:
    description: With O(state=begin), what the change is, for messages (at most 1000 characters).
    type: str
    default: ""
  step:
    description:
      - With O(state=step), the step reached (at most 1000 characters).
      - With O(state=begin), a step recorded after O(reason) in the same write - the step the change
        takes next (the rollout role's drain, so that the record says so before the drain cordons
        the node).
    type: str
  owner:
    description:
      - The run making the change, usually C(lookup('numa.kube.rollout_owner')). Recorded by
        O(state=begin) with a heartbeat (the node's clock) and O(lease); refreshed by every call of
        the same run that changes the record.
      - Omitted, the call has no identity - it may change only a record without owner, or one
        whose lease ran out, or with O(take_over); a record it takes over is left without owner.
    type: dict
    suboptions:
      run_id:
        description: Names the run; unique per ansible-playbook process.
        type: str
        required: true
      controller:
        description: The controller's host name.
        type: str
      user:
        description: The user running the play.
        type: str
      pid:
        description: The ansible-playbook main process on the controller.
        type: int
      pid_start:
        description:
          - That process's start time - field 22 of C(/proc/<pid>/stat), or on a controller without
            C(/proc) C(@) and the epoch seconds C(ps) reports.
        type: str
      boot_id:
        description:
          - The controller's boot id (C(/proc/sys/kernel/random/boot_id)); empty or omitted where
            unknown. Recorded only, so that P(numa.kube.rollout_owner_gone#filter) judges a run
            from the very boot it ran in.
        type: str
      pid_ns:
        description:
          - The inode number of the controller process's pid namespace (C(/proc/self/ns/pid));
            omitted where unknown. Recorded only, for the same reason as O(owner.boot_id).
        type: int
  lease:
    description:
      - Seconds the record stays owned by O(owner) without a heartbeat, from 60 to 86400. The lease
        recorded with the owner is the one that counts for others.
    type: int
    default: 3600
  take_over:
    description:
      - The C(run_id) of the record's owner, which the caller established is gone (for example
        with P(numa.kube.rollout_owner_gone#filter)), or C(*) to take the record from whatever run
        owns it (an operator's force switch). The old owner goes to C(previous_owners) in the
        marker. A run id that is not the owner's takes nothing over.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Nothing is written; the results tell what a real run would do (refusals included).
  diff_mode:
    support: none
    description: The record is shown in the results, not as a diff.
seealso:
  - module: numa.kube.kubelet_config
  - plugin: numa.kube.rollout_owner
    plugin_type: lookup
  - plugin: numa.kube.rollout_owner_gone
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Finish or undo what an interrupted run left
  numa.kube.rollout_state:
    state: query
  register: rollout

- name: Open the change before cordoning
  numa.kube.rollout_state:
    state: begin
    files: [/var/lib/kubelet/config.yaml, /var/lib/kubelet/cpu_manager_state]
    services: [kubelet]
    unschedulable: false
    reason: kubelet configuration
    owner: "{{ lookup('numa.kube.rollout_owner') }}"
    lease: 3600

- name: Put the previous files back, taking over from a run of this controller that died
  numa.kube.rollout_state:
    state: restore
    owner: "{{ lookup('numa.kube.rollout_owner') }}"
    take_over: "{{ rollout.owner.run_id if rollout.owner | numa.kube.rollout_owner_gone else '' }}"
"""

RETURN = r"""
active:
  description: Whether a marker exists (after the action).
  returned: always
  type: bool
  sample: true
marker:
  description:
    - The marker - C(version) (2), C(unschedulable) before the change (null when unknown),
      C(services), C(files), C(steps), C(started), C(reason), C(owner) (as RV(owner)) and
      C(previous_owners) (owners taken over, each with C(replaced), the time, and C(replaced_by),
      the run id that took over). Empty when none.
    - A marker whose times are not finite epoch seconds up to year 9999, whose owner lease is
      outside 60 to 86400, whose user or group ids are out of range or whose extended attribute
      names lack a namespace (C(user.), C(trusted.), C(security.), C(system.)) is refused as
      damaged, naming what is wrong.
    - Each of C(files) has C(path) and C(existed); a regular file also C(type=file), C(saved) (its
      copy in the folder), C(mode), C(uid), C(gid), C(links) (hard links then), C(sha256) and
      C(xattrs) (name to base64 value); a link C(type=link), C(target), C(uid), C(gid) and
      C(xattrs).
  returned: always
  type: dict
  sample: {version: 2, unschedulable: false, services: [kubelet], steps: [drained], owner: {run_id: "ctl:4242:98765"}}
owner:
  description:
    - The owner of the record after the action - C(run_id), C(controller), C(user), C(pid),
      C(pid_start), C(boot_id), C(pid_ns) as given in O(owner), with C(heartbeat) (epoch seconds,
      node clock) and C(lease) (seconds). Empty when the record has none or there is no record.
    - When the module fails because another live run owns the record, that run.
  returned: always
  type: dict
  sample: {run_id: "ctl:4242:98765:1a2b3c4d:4026531836", controller: ctl, user: ops, pid: 4242, pid_start: "98765",
           boot_id: 1a2b3c4d-0000-4000-8000-000000000000, pid_ns: 4026531836, heartbeat: 1764000000, lease: 3600}
owner_expired:
  description:
    - True when there is no owner or its lease has run out (another run may take over).
    - Also true when the heartbeat is more than 300 s ahead of the node's clock (the clock went back
      since it was written; RV(summary) says so), so that a clock set back cannot hold the record.
  returned: always
  type: bool
  sample: false
owner_age:
  description: Seconds since the owner's heartbeat; null without owner.
  returned: always
  type: int
  sample: 42
taken_over:
  description: The owner this call replaced (lease run out or O(take_over)); empty when none.
  returned: success
  type: dict
  sample: {}
resumed:
  description: With O(state=begin), whether an earlier, unfinished change was found and extended.
  returned: state is begin
  type: bool
  sample: false
differs:
  description:
    - With O(state=query) or O(state=restore), the recorded files whose type, bytes, link target,
      mode, owner or extended attributes differ from what they were before the change (before the
      restore, for O(state=restore)). Empty when the change never reached its files, so nothing
      needs to stop or restart.
  returned: state is query or restore
  type: list
  elements: str
  sample: [/var/lib/kubelet/config.yaml]
restore_started:
  description:
    - With O(state=query) or O(state=restore), whether a restore had already begun writing files
      back (a run cut short during a rollback); the services must then be restarted even when
      RV(differs) is empty.
  returned: state is query or restore
  type: bool
  sample: false
restored:
  description: With O(state=restore), the files written back or removed.
  returned: state is restore
  type: list
  elements: str
  sample: [/var/lib/kubelet/config.yaml]
summary:
  description: One sentence about the change under way, with its owner.
  returned: always
  type: str
  sample: change started at 2026-11-23 10:00:00 UTC (kubelet configuration), last step 'drained', ...
problems:
  description: When the module fails on its input or the record, every problem found.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="query", choices=list(rollout.STATES)),
            folder=dict(type="path", default=rollout.DEFAULT_DIR),
            files=dict(type="list", elements="path", default=[]),
            services=dict(type="list", elements="str", default=[]),
            unschedulable=dict(type="bool"),
            reason=dict(type="str", default=""),
            step=dict(type="str"),
            owner=dict(type="dict", options=dict(
                run_id=dict(type="str", required=True),
                controller=dict(type="str"),
                user=dict(type="str"),
                pid=dict(type="int"),
                pid_start=dict(type="str"),
                boot_id=dict(type="str"),
                pid_ns=dict(type="int"),
            )),
            lease=dict(type="int", default=rollout_owner.LEASE_DEFAULT),
            take_over=dict(type="str", default=""),
        ),
        required_if=[("state", "step", ["step"])],
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = rollout.run_state(
            durable.Node("/"), params["state"], folder=params["folder"], files=params["files"],
            services=params["services"], unschedulable=params["unschedulable"], reason=params["reason"],
            step=params["step"], owner=params["owner"], lease=params["lease"], take_over=params["take_over"],
            check_mode=module.check_mode)
    except rollout.OwnerRefused as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems, owner=exc.owner or {},
                         owner_expired=False, owner_age=exc.owner_age)
    except durable.DurableError as exc:  # RolloutError too (a marker that cannot be read or trusted)
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)
    except (IOError, OSError) as exc:
        module.fail_json(msg="rollout record in %s: %s" % (params["folder"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
