# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the containerd_nri module does on a node: containerd's NRI table set as ``present`` asks
(in config.toml, or in the template RKE2 and k3s render it from) or put back as the record says
with ``absent``, the record kept. Planning is in ``containerd_nri``; the module only parses its
arguments and calls ``record.run_change(module, present, absent)``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.plugins.module_utils.errors import fail_with_problems as fail

from ansible_collections.numa.kube.plugins.module_utils.node import file_update, record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    NRI_DEFAULTS,
    TEMPLATE_V2,
    TEMPLATE_V3,
    ContainerdConfigError,
    check_nri_record,
    check_nri_record_path,
    check_reading,
    check_socket_path,
    check_toml,
    check_toml_text,
    config_version,
    in_force_socket_path,
    leftover_socket,
    merge_nri_record,
    nri_disabled,
    parse_containerd_version,
    parse_distribution_version,
    plan_nri,
    plan_nri_withdraw,
    plan_template,
    socket_listening,
)
from ansible_collections.numa.kube.plugins.module_utils.node.distribution import detect_distribution


# the units that run each distribution's containerd, server flavour first
SERVICES = {"rke2": ["rke2-server", "rke2-agent"], "k3s": ["k3s", "k3s-agent"]}


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


def check_socket_on_node(path, in_force):
    """check_socket_path on this node (links followed, a socket there probed for a program), and the
    identity of the leftover socket there that containerd would replace (see leftover_socket)."""
    problems = check_socket_path(path, lstat=os.lstat, realpath=os.path.realpath, in_force=in_force,
                                 listening=socket_listening)
    return problems, None if problems else leftover_socket(path, in_force, lstat=os.lstat)


def remove_leftover(module, path, identity):
    """Unlink the socket nobody listened on that planning found at ``path`` (``identity``: its device
    and inode), before anything is written: only when the same socket is still there and still
    nobody's, else the run stops with nothing changed. Whether it was removed (in check mode, would
    be)."""
    if identity is None:
        return False
    if module.check_mode:
        return True
    held = socket_listening(path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        fail(module, ["NRI socket_path %r could not be read again before its leftover socket was removed (%s); "
                      "nothing was changed, run again" % (path, exc.strerror)])
    if held or (found.st_dev, found.st_ino) != identity:
        fail(module, ["NRI socket_path %r holds another socket than the one nobody listened on moments ago, or a "
                      "program took it meanwhile; nothing was changed, run again" % path])
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        fail(module, ["the socket nobody listens on at NRI socket_path %r could not be removed (%s); nothing was "
                      "changed: remove it and run again" % (path, exc.strerror)])
    return True


def present(module):
    params = module.params
    record = applied_record.load_checked(module, module.params["record"], check_nri_record)
    distribution = detect(module)
    data_dir = params["data_dir"] or "/var/lib/rancher/%s" % distribution
    folder = os.path.join(data_dir, "agent", "etc", "containerd")
    leftover = None
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
        if distribution == "containerd" and new_text is not None:
            # what numa.kube reports and checks must be what containerd reads, changed file or not
            check_reading(new_text, version)
        if params["enabled"]:
            # the path containerd will take over, on this node: links followed, nothing there, the
            # NRI socket of the configuration containerd runs with now, or a socket nobody listens on
            in_force = in_force_socket_path(current if distribution == "containerd" else rendered, version)
            problems, leftover = check_socket_on_node(effective["socket_path"], in_force)
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
    # the socket an earlier containerd left (nobody listens on it): containerd removes it as it starts
    # with NRI on; gone first, the wait for the socket after the restart sees containerd's own
    result["leftover_socket_removed"] = changed and remove_leftover(module, effective["socket_path"], leftover)
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
                    removed_file=False, left=[], leftover_socket_removed=False,
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
    leftover = None
    try:
        version = containerd_version(module, distribution, data_dir)
        new_text, left = plan_nri_withdraw(current, record)
        if new_text is not None and new_text != current and distribution == "containerd":
            check_toml_text(new_text, path)
            check_reading(new_text, version)
        # the file removed (numa.kube created it), containerd runs its defaults: NRI on in 2.x
        after = "" if new_text is None and current is not None and distribution == "containerd" else new_text
        if after is not None and after != current:
            # the socket path put back is checked as present checks one: a record cannot point NRI at
            # containerd's own socket, or any other program's
            socket_path = in_force_socket_path(after, version)
            if socket_path is not None:
                rendered_now = current if distribution == "containerd" else file_update.read_text(rendered_path)
                problems, leftover = check_socket_on_node(socket_path, in_force_socket_path(rendered_now, version))
                if problems:
                    raise ContainerdConfigError([p + " (the value %s would put back)" % params["record"]
                                                 for p in problems])
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
    result["leftover_socket_removed"] = remove_leftover(module, result["socket_path"], leftover)
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
