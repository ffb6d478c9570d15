#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: containerd_nri
short_description: Switch containerd's NRI plugin on or off, keeping the rest of config.toml
version_added: "0.1.0"
description:
  - Sets C(disable) (and optionally other settings) in the C([plugins."io.containerd.nri.v1.nri"])
    table of containerd's C(config.toml), editing only those lines so comments, order and every
    other setting survive. A missing table is appended; a missing file is created with only what
    NRI needs.
  - Knows the defaults - NRI is off in containerd 1.7 (config version 2) and on in containerd 2.x
    (config version 3) - so a file already in the wanted state is left alone.
  - Refuses containerd older than 1.7, which has no NRI, and config version 1 files.
  - Does not restart containerd; C(restart_required) tells the caller to.
author:
  - numa.kube contributors (@numa-kube)
options:
  path:
    description: containerd's configuration file.
    type: path
    default: /etc/containerd/config.toml
  enabled:
    description: Whether NRI should be on.
    type: bool
    default: true
  settings:
    description:
      - Other NRI settings - C(disable_connections), C(plugin_config_path), C(plugin_path),
        C(plugin_registration_timeout), C(plugin_request_timeout), C(socket_path).
    type: dict
    default: {}
  containerd_version:
    description:
      - containerd's version (C(1.7.24), or the whole output of C(containerd --version)). When
        omitted, the module runs C(containerd --version).
    type: str
  backup:
    description: Keep a timestamped copy of the previous file next to it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
    description: Nothing is written in check mode; the results are those a real run would give.
  diff_mode:
    support: full
    description: Shows the file before and after.
notes:
  - containerd lists the NRI plugin as ok in C(ctr plugins ls) even when it is disabled; whether NRI is
    really on shows in C(containerd config dump) and in the socket (C(socket_path), by default
    C(/var/run/nri/nri.sock)) existing once containerd has restarted.
seealso:
  - name: containerd NRI
    description: NRI configuration in containerd.
    link: https://github.com/containerd/containerd/blob/main/docs/NRI.md
"""

EXAMPLES = r"""
- name: Enable NRI
  numa.kube.containerd_nri:
    backup: true
  register: nri
  notify: Restart containerd

- name: Disable NRI on a host whose containerd version is known
  numa.kube.containerd_nri:
    enabled: false
    containerd_version: 2.1.4
"""

RETURN = r"""
containerd_version:
  description: The containerd version the decision was based on.
  returned: success
  type: str
  sample: 1.7.24
config_version:
  description: The file's config version (2 or 3), or null for a new file.
  returned: success
  type: int
  sample: 2
nri:
  description: The NRI settings containerd will run with after a restart, defaults included.
  returned: success
  type: dict
  sample: {disable: false, socket_path: /var/run/nri/nri.sock, plugin_path: /opt/nri/plugins}
socket_path:
  description: Where the NRI socket will be.
  returned: success
  type: str
  sample: /var/run/nri/nri.sock
restart_required:
  description: Whether containerd must restart for the change to take effect.
  returned: success
  type: bool
  sample: true
backup_file:
  description: The copy made of the previous file.
  returned: changed and backup is true and the file existed
  type: str
problems:
  description: On failure, every problem found.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils import file_update
from ansible_collections.numa.kube.plugins.module_utils.containerd_config import (
    ContainerdConfigError,
    check_toml,
    config_version,
    parse_containerd_version,
    plan_nri,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/containerd/config.toml"),
            enabled=dict(type="bool", default=True),
            settings=dict(type="dict", default={}),
            containerd_version=dict(type="str"),
            backup=dict(type="bool", default=False),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    version_text = params["containerd_version"]
    if not version_text:
        binary = module.get_bin_path("containerd", required=True)
        rc, out, err = module.run_command([binary, "--version"])
        if rc != 0:
            module.fail_json(msg="containerd --version failed: %s" % (err or out))
        version_text = out
    current = file_update.read_text(path)
    try:
        version = parse_containerd_version(version_text)
        new_text, effective = plan_nri(current, version, params["enabled"], params["settings"])
        changed = new_text != (current or "")
        if changed:
            check_toml(new_text, params["enabled"])
    except ContainerdConfigError as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)
    result = dict(
        changed=changed,
        containerd_version=".".join(str(p) for p in version),
        config_version=config_version(current),
        nri=effective,
        socket_path=effective["socket_path"],
        restart_required=changed,
    )
    if module._diff:
        result["diff"] = file_update.diff(path, current, new_text)
    result["changed"] = file_update.apply(module, path, current, new_text, changed, result,
                                          backup=params["backup"], make_dirs=True)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
