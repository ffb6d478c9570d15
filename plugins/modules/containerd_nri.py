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
  - On RKE2 and k3s, which write containerd's C(config.toml) themselves at every start, the change
    goes into their containerd template instead - C(config.toml.tmpl), or C(config-v3.toml.tmpl)
    with containerd 2.x - as C({{ template "base" . }}) followed by the NRI table, so that the
    distribution's own configuration stays in force. A template of the user's that includes C(base)
    gets its NRI table edited; a whole template of the user's, a release without C(base) (before
    the September 2023 releases v1.24.17, v1.25.13, v1.26.8, v1.27.5, v1.28.1), or a
    C(config.toml.tmpl) that a new C(config-v3.toml.tmpl) would displace are refused with the fix.
  - Does not restart containerd; C(restart_required) tells the caller to, and C(service) names the
    unit to restart.
  - Keeps in O(record) what numa.kube changed - the file it edited, whether it created that file and
    its NRI table, and for each NRI setting the value it wrote and the one before - merged with the
    record of earlier runs, and written with the file, only when the file changes.
  - O(state=absent) puts back what the record says numa.kube changed - each setting still at the
    value numa.kube wrote gets its previous value again (or goes, where it was not set), the NRI
    table goes where numa.kube created it and nothing else is left in it, the file (the RKE2/k3s
    template numa.kube wrote, or a config.toml it created) goes where nothing else is left in it -
    then removes the record. A setting changed since is left as it is, with a warning. Without a
    record there is nothing to put back - nothing is read or written, and RV(record_found) is false.
  - A damaged record is refused before anything is written, naming the file, what is wrong and what
    to do; so is a record that names a file numa.kube's NRI change cannot be in (with
    C(containerd), other than O(path); with RKE2 or k3s, other than the C(config.toml.tmpl) or
    C(config-v3.toml.tmpl) under O(data_dir)), and one whose folder or file another user than root
    could have written (a symbolic link, group- or world-writable, or not owned by root when the
    module runs as root).
author:
  - numa.kube contributors (@numa-kube)
options:
  state:
    description:
      - C(present) sets NRI as O(enabled) and O(settings) say. C(absent) puts back what numa.kube
        changed, as O(record) says, in the file the record names, which must be O(path) (or
        the RKE2/k3s template under O(data_dir)); O(distribution) and O(enabled) are not used then.
    type: str
    choices: [present, absent]
    default: present
  record:
    description:
      - The JSON file that keeps what numa.kube changed (C(version) 1, C(distribution), C(path),
        C(created_file), C(created_table), C(keys)). Its folder is created with mode 0700 when
        missing.
    type: path
    default: /var/lib/numa-kube/applied/containerd-nri.json
  path:
    description: containerd's configuration file (with O(distribution=containerd)).
    type: path
    default: /etc/containerd/config.toml
  distribution:
    description:
      - Who writes containerd's configuration. C(containerd) - the file at O(path). C(rke2) and C(k3s) -
        the distribution, from its template in C(<data_dir>/agent/etc/containerd). C(auto) - RKE2 or k3s
        where their folders under C(/etc/rancher) or C(/var/lib/rancher) exist, else C(containerd).
    type: str
    choices: [auto, containerd, rke2, k3s]
    default: auto
  data_dir:
    description: The RKE2 or k3s data folder; by default C(/var/lib/rancher/rke2) or C(/var/lib/rancher/k3s).
    type: path
  distribution_version:
    description:
      - The RKE2 or k3s version (C(v1.30.4+rke2r1), or the output of C(rke2 --version)); when omitted, the
        module runs C(rke2 --version) or C(k3s --version).
    type: str
  enabled:
    description: Whether NRI should be on.
    type: bool
    default: true
  settings:
    description:
      - Other NRI settings - C(disable_connections), C(plugin_config_path), C(plugin_path),
        C(plugin_registration_timeout), C(plugin_request_timeout), C(socket_path).
      - C(socket_path) must be an absolute path inside C(/run) or C(/var/run) (RKE2's and k3s's own
        containerd state, C(/run/k3s), is inside them), still inside once symbolic links are
        followed, and hold nothing - containerd removes what is at that path before it listens. The
        only things accepted there are the socket containerd's NRI made itself - the path is the NRI
        socket path of the configuration in force (the file, or RKE2's and k3s's rendered
        config.toml), with NRI on in it - and a socket no program listens on (a connection to it is
        refused), such as the NRI socket a containerd restarted with NRI off leaves behind (removed
        when the file changes, see RV(leftover_socket_removed)); a socket a program listens on
        (C(/run/containerd/containerd.sock), C(/run/dbus/system_bus_socket)) is refused. The socket
        path containerd will use (from the file when not given here) is checked the same way
        whenever NRI is on; nothing is written otherwise.
    type: dict
    default: {}
  containerd_version:
    description:
      - containerd's version (C(1.7.24), or the whole output of C(containerd --version)). When
        omitted, the module runs C(containerd --version) (on RKE2 and k3s, the containerd they ship,
        in C(<data_dir>/bin) or C(<data_dir>/data/current/bin)).
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

- name: Enable NRI on an RKE2 node, through the containerd template RKE2 renders
  numa.kube.containerd_nri:
    distribution: rke2
  register: nri   # nri.path is the template written, nri.service the unit to restart

- name: Put NRI back as it was before numa.kube changed it
  numa.kube.containerd_nri:
    state: absent
  register: nri   # nri.restart_required, nri.service, nri.nri_enabled

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
path:
  description: The file the change goes into (O(path), or the RKE2/k3s template).
  returned: success
  type: str
  sample: /var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl
distribution:
  description: Who writes containerd's configuration (C(containerd), C(rke2) or C(k3s)).
  returned: success
  type: str
  sample: rke2
rendered_path:
  description: The configuration containerd reads, which RKE2 and k3s render from the template at start.
  returned: success
  type: str
  sample: /var/lib/rancher/rke2/agent/etc/containerd/config.toml
service:
  description: The unit whose restart applies the change (C(containerd), or the RKE2/k3s service that runs).
  returned: success
  type: str
  sample: rke2-agent
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
leftover_socket_removed:
  description:
    - Whether a socket nobody listens on (none bound to it, a connection refused) was at the NRI
      socket path when this change turned NRI on (one a containerd restarted with NRI off leaves
      behind), and is removed (in check mode, would be) before the file is written, as containerd
      itself removes it when it starts with NRI on. A wait for the socket after the restart then sees
      containerd's own. With I(state=absent), the same for the path of the NRI settings put back.
    - When another socket, or a program, is found there at the moment of removal, nothing is changed
      and the module fails.
  returned: success
  type: bool
  sample: false
nri_enabled:
  description: Whether NRI is on once containerd runs with the file as this run leaves it.
  returned: success
  type: bool
  sample: true
record:
  description: The record file (O(record)).
  returned: success
  type: str
  sample: /var/lib/numa-kube/applied/containerd-nri.json
record_found:
  description: Whether the record existed when the module started.
  returned: success
  type: bool
  sample: true
removed_file:
  description: With O(state=absent), whether the file numa.kube had created goes (or would go, in check mode).
  returned: success
  type: bool
  sample: false
left:
  description: With O(state=absent), each setting left as it is, with why (also given as warnings).
  returned: success
  type: list
  elements: str
msg:
  description: What was done, in a sentence.
  returned: success
  type: str
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
from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri_apply import absent, present

# where the record goes when O(record) is not given (tests point it elsewhere)
RECORD = applied_record.record_path(applied_record.DEFAULT_DIR, "containerd-nri.json")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            record=dict(type="path", default=RECORD),
            path=dict(type="path", default="/etc/containerd/config.toml"),
            distribution=dict(type="str", default="auto", choices=["auto", "containerd", "rke2", "k3s"]),
            data_dir=dict(type="path"),
            distribution_version=dict(type="str"),
            enabled=dict(type="bool", default=True),
            settings=dict(type="dict", default={}),
            containerd_version=dict(type="str"),
            backup=dict(type="bool", default=False),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    applied_record.run_change(module, present, absent)


if __name__ == "__main__":
    main()
