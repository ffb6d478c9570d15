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
        only thing accepted there is the socket containerd's NRI made itself - the path is the NRI
        socket path of the configuration in force (the file, or RKE2's and k3s's rendered
        config.toml), with NRI on in it; another socket (C(/run/containerd/containerd.sock),
        C(/run/dbus/system_bus_socket)) is refused. The socket path containerd will use (from the
        file when not given here) is checked the same way whenever NRI is on; nothing is written
        otherwise.
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

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.errors import fail_with_problems as fail

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node import file_update
from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    NRI_DEFAULTS,
    TEMPLATE_V2,
    TEMPLATE_V3,
    ContainerdConfigError,
    check_nri_record,
    check_nri_record_path,
    check_socket_path,
    check_toml,
    check_toml_text,
    config_version,
    in_force_socket_path,
    merge_nri_record,
    nri_disabled,
    parse_containerd_version,
    parse_distribution_version,
    plan_nri,
    plan_nri_withdraw,
    plan_template,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import detect_distribution

# the units that run each distribution's containerd, server flavour first
SERVICES = {"rke2": ["rke2-server", "rke2-agent"], "k3s": ["k3s", "k3s-agent"]}
RECORD = "/var/lib/numa-kube/applied/containerd-nri.json"


def run_version(module, candidates):
    """The output of ``<first existing candidate> --version``."""
    for binary in candidates:
        path = binary if os.path.isabs(binary) else module.get_bin_path(binary, opt_dirs=["/usr/local/bin"])
        if path and os.path.exists(path):
            rc, out, err = module.run_command([path, "--version"])
            if rc != 0:
                module.fail_json(msg="%s --version failed: %s" % (path, err or out))
            return out
    module.fail_json(msg="none of %s was found; give the version as an option" % ", ".join(candidates))


def detect(module):
    """The distribution asked for; with auto, RKE2 or k3s where kubelet_facts would find them, else
    containerd on its own (kubeadm and EKS nodes)."""
    distribution = module.params["distribution"]
    if distribution == "auto":
        found = detect_distribution(os.path.exists)
        distribution = found if found in SERVICES else "containerd"
    return distribution


def running_service(module, distribution):
    if distribution == "containerd":
        return "containerd"
    systemctl = module.get_bin_path("systemctl")
    for unit in SERVICES[distribution]:
        if systemctl and module.run_command([systemctl, "is-active", "--quiet", unit])[0] == 0:
            return unit
    return SERVICES[distribution][-1]


def containerd_version(module, distribution, data_dir):
    version_text = module.params["containerd_version"]
    if not version_text:
        candidates = ["containerd"]
        if distribution != "containerd":
            candidates = [os.path.join(data_dir, "bin", "containerd"),
                          os.path.join(data_dir, "data", "current", "bin", "containerd")]
        version_text = run_version(module, candidates)
    return parse_containerd_version(version_text)


def present(module):
    params = module.params
    record = applied_record.load_checked(module, module.params["record"], check_nri_record)
    distribution = detect(module)
    data_dir = params["data_dir"] or "/var/lib/rancher/%s" % distribution
    folder = os.path.join(data_dir, "agent", "etc", "containerd")
    try:
        version = containerd_version(module, distribution, data_dir)
        if distribution == "containerd":
            path = rendered_path = params["path"]
            current = file_update.read_text(path)
            new_text, effective = plan_nri(current, version, params["enabled"], params["settings"])
            file_version = config_version(current)
        else:
            rendered_path = os.path.join(folder, "config.toml")
            rendered = file_update.read_text(rendered_path)
            templates = dict((name, file_update.read_text(os.path.join(folder, name)))
                             for name in (TEMPLATE_V2, TEMPLATE_V3))
            release = parse_distribution_version(params["distribution_version"] or run_version(
                module, [distribution, "/var/lib/rancher/%s/bin/%s" % (distribution, distribution)]))
            name, new_text, effective = plan_template(distribution, release, version, rendered, templates,
                                                      params["enabled"], params["settings"])
            path = os.path.join(folder, name)
            current = templates[name]
            new_text = current if new_text is None else new_text
            file_version = config_version(rendered)
        changed = new_text != (current or "")
        if changed and distribution == "containerd":
            check_toml(new_text, params["enabled"])
        if params["enabled"]:
            # the path containerd will take over, on this node: links followed, nothing there or the
            # NRI socket of the configuration containerd runs with now
            in_force = in_force_socket_path(current if distribution == "containerd" else rendered, version)
            problems = check_socket_path(effective["socket_path"], lstat=os.lstat, realpath=os.path.realpath,
                                         in_force=in_force)
            if problems:
                raise ContainerdConfigError(problems)
        if changed and record is not None and record["path"] != path:
            raise ContainerdConfigError(
                "%s records NRI settings numa.kube wrote into %s, but this run would write %s; take the first "
                "change back out (numa_kube_state: absent, containerd_nri_config_path as it was) before numa.kube "
                "changes another file" % (params["record"], record["path"], path))
    except ContainerdConfigError as exc:
        fail(module, exc.problems)
    result = dict(
        changed=changed,
        path=path,
        distribution=distribution,
        rendered_path=rendered_path,
        service=running_service(module, distribution),
        containerd_version=".".join(str(p) for p in version),
        config_version=file_version,
        nri=effective,
        nri_enabled=not effective["disable"],
        socket_path=effective["socket_path"],
        restart_required=changed,
        record=params["record"],
        record_found=record is not None,
        msg="%s %s" % (path, "changed" if changed else "has NRI as wanted already"),
    )
    if module._diff:
        result["diff"] = file_update.diff(path, current, new_text)
    result["changed"] = file_update.apply(module, path, current, new_text, changed, result,
                                          backup=params["backup"], make_dirs=True)
    if changed:
        applied_record.save_for(module, module.params["record"], merge_nri_record(record, distribution, path, current, new_text))
    return result


def absent(module):
    params = module.params
    record = applied_record.load_checked(module, module.params["record"], check_nri_record)
    if record is None:
        return dict(changed=False, record=params["record"], record_found=False, restart_required=False,
                    removed_file=False, left=[],
                    msg="%s does not exist: numa.kube has changed nothing in containerd's NRI settings on this node "
                        "(or an older release changed them without a record); nothing was changed" % params["record"])
    problems = check_nri_record_path(record, params["record"], params["path"], params["data_dir"])
    if problems:
        fail(module, problems)
    distribution, path = record["distribution"], record["path"]
    folder = os.path.dirname(path)
    rendered_path = path if distribution == "containerd" else os.path.join(folder, "config.toml")
    data_dir = params["data_dir"] or "/var/lib/rancher/%s" % distribution
    current = file_update.read_text(path)
    try:
        version = containerd_version(module, distribution, data_dir)
        new_text, left = plan_nri_withdraw(current, record)
        if new_text is not None and new_text != current and distribution == "containerd":
            check_toml_text(new_text, path)
    except ContainerdConfigError as exc:
        fail(module, exc.problems)
    removes = current is not None and new_text is None
    changed = removes or (new_text is not None and new_text != current)
    result = dict(
        path=path,
        distribution=distribution,
        rendered_path=rendered_path,
        service=running_service(module, distribution),
        containerd_version=".".join(str(p) for p in version),
        config_version=config_version(file_update.read_text(rendered_path)),
        nri_enabled=not nri_disabled(new_text or "", version),
        socket_path=in_force_socket_path(new_text or "", version) or NRI_DEFAULTS["socket_path"],
        restart_required=changed,
        record=params["record"],
        record_found=True,
        removed_file=removes,
        left=left,
    )
    if module._diff:
        result["diff"] = dict(file_update.diff(path, current, new_text or ""),
                              after_header="/dev/null" if new_text is None else path)
    for note in left:
        module.warn(note)
    if removes:
        if not module.check_mode:
            if params["backup"]:
                result["backup_file"] = module.backup_local(path)
            os.unlink(path)
    elif changed:
        changed = file_update.apply(module, path, current, new_text, changed, result, backup=params["backup"])
    result["msg"] = ("%s %s; NRI %s once %s restarts%s" % (
        path, "goes (numa.kube created it)" if removes else "gets its previous NRI settings back" if changed
        else "needs nothing put back", "on" if result["nri_enabled"] else "off", result["service"],
        "; left as they are: %s" % "; ".join(left) if left else ""))
    result["changed"] = applied_record.save_for(module, module.params["record"], None) or changed
    return result


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
    if module.params["state"] == "absent":
        module.exit_json(**absent(module))
    module.exit_json(**present(module))


if __name__ == "__main__":
    main()
