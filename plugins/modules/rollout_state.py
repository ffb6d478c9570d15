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
    reboot) is under way, holding the exact previous bytes, mode and owner of every file the change
    may touch, whether the node was unschedulable before, the services involved and the steps
    reached.
  - The marker survives the controller. A later run finds it with O(state=query), puts every
    recorded file back with O(state=restore), restores the services and schedulability, and closes
    it with O(state=finish).
  - Opening a marker that exists already keeps what was recorded first and only adds new files and
    services, so an interrupted run never replaces the true previous state with a half-done one.
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
        may be running on files that are no longer on disk. C(finish) removes the
        marker and the saved copies.
    type: str
    choices: [query, begin, step, restore, finish]
    default: query
  folder:
    description: Where the marker and the saved copies live (created mode 0700).
    type: path
    default: /var/lib/numa-kube/rollout
  files:
    description: With O(state=begin), absolute paths of the files the change may write or remove.
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
    description: With O(state=begin), what the change is, for messages.
    type: str
    default: ""
  step:
    description: With O(state=step), the step reached.
    type: str
attributes:
  check_mode:
    support: full
    description: Nothing is written; the results tell what a real run would do.
  diff_mode:
    support: none
    description: The record is shown in the results, not as a diff.
seealso:
  - module: numa.kube.kubelet_config
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

- name: Put the previous files back
  numa.kube.rollout_state:
    state: restore
"""

RETURN = r"""
active:
  description: Whether a marker exists (after the action).
  returned: always
  type: bool
  sample: true
marker:
  description:
    - The marker - C(unschedulable) before the change (null when unknown), C(services), C(files)
      (path, existed, mode, owner, checksum), C(steps), C(started), C(reason). Empty when none.
  returned: always
  type: dict
  sample: {unschedulable: false, services: [kubelet], steps: [drained]}
resumed:
  description: With O(state=begin), whether an earlier, unfinished change was found and extended.
  returned: state is begin
  type: bool
  sample: false
differs:
  description:
    - With O(state=query) or O(state=restore), the recorded files whose bytes, mode or owner differ
      from what they were before the change (before the restore, for O(state=restore)). Empty when
      the change never reached its files, so nothing needs to stop or restart.
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
  description: One sentence about the change under way.
  returned: always
  type: str
  sample: change started at 2026-11-23 10:00:00 UTC (kubelet configuration), last step 'drained', ...
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils import rollout


def _write_marker(node, folder, marker):
    node.write(os.path.join(folder, rollout.MARKER_NAME), json.dumps(marker, indent=1, sort_keys=True).encode(),
               0o600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="query", choices=["query", "begin", "step", "restore", "finish"]),
            folder=dict(type="path", default=rollout.DEFAULT_DIR),
            files=dict(type="list", elements="path", default=[]),
            services=dict(type="list", elements="str", default=[]),
            unschedulable=dict(type="bool"),
            reason=dict(type="str", default=""),
            step=dict(type="str"),
        ),
        required_if=[("state", "step", ["step"])],
        supports_check_mode=True,
    )
    params = module.params
    folder = params["folder"]
    node = rollout.Node("/")
    state = params["state"]
    try:
        marker = rollout.load_marker(node, folder)
        result = dict(changed=False)
        if state == "begin":
            new, copies = rollout.plan_begin(marker, params["files"], params["services"], params["unschedulable"],
                                             params["reason"], node, folder)
            result["resumed"] = marker is not None
            result["changed"] = new != marker
            if result["changed"] and not module.check_mode:
                for _path, name, data in copies:
                    node.write(os.path.join(folder, name), data, 0o600)
                _write_marker(node, folder, new)  # after the copies: a marker never points at a missing copy
            marker = new
        elif state == "step":
            if marker is None:
                module.fail_json(msg="no rollout marker in %s: open one with state=begin first" % folder)
            marker = dict(marker, steps=marker.get("steps", []) + [params["step"]])
            result["changed"] = True
            if not module.check_mode:
                _write_marker(node, folder, marker)
        elif state in ("query", "restore"):
            plan = [item for item in (rollout.plan_restore(marker, node, folder) if marker else [])
                    if item[0] != "keep"]
            result.update(differs=[entry["path"] for _action, entry, _data in plan],
                          restore_started=rollout.restore_started(marker))
            if state == "restore":
                result.update(restored=result["differs"], changed=bool(plan))
                if plan and not module.check_mode:
                    if not result["restore_started"]:
                        marker = dict(marker, steps=marker.get("steps", []) + [rollout.RESTORING_STEP])
                        _write_marker(node, folder, marker)  # before the first file is written back
                    for action, entry, data in plan:
                        if action == "remove":
                            node.remove(entry["path"])
                        else:
                            node.write(entry["path"], data, entry["mode"], entry["uid"], entry["gid"])
        elif state == "finish":
            result["changed"] = marker is not None
            if marker is not None and not module.check_mode:
                for entry in marker.get("files", []):
                    if entry.get("saved"):
                        node.remove(os.path.join(folder, entry["saved"]))
                node.remove(os.path.join(folder, rollout.MARKER_NAME))
            marker = None
    except rollout.RolloutError as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)
    except (IOError, OSError) as exc:
        module.fail_json(msg="rollout marker in %s: %s" % (folder, exc))
    result.update(active=marker is not None, marker=marker or {}, summary=rollout.describe(marker))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
