# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the kernel_args module does on a node: its input checked, the grub defaults or grubby's
boot entries changed as ``present`` asks or put back as the record says with ``absent``, the record
kept. Planning is in ``kernel_args``; the module only parses its arguments and calls
``record.run_change(module, present, absent, [check_inputs])``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.plugins.module_utils.errors import fail_with_problems as fail

from ansible_collections.numa.kube.plugins.module_utils.node import file_update, record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import (
    KernelCmdlineError,
    apply_params,
    change_of,
    check_allow,
    check_dangerous,
    check_grub_default_path,
    check_params,
    check_record,
    check_record_where,
    check_repeated_wanted,
    check_variable,
    grubby_files,
    merge_record,
    parse_grubby_info,
    plan_grub_default,
    plan_withdraw,
    read_grub_variable,
    satisfied,
    where_of,
)


def _grubby_kernels(module):
    grubby = module.get_bin_path("grubby", required=True)
    rc, out, err = module.run_command([grubby, "--info=ALL"])
    if rc != 0:
        module.fail_json(msg="grubby --info=ALL failed: %s" % (err or out))
    kernels = parse_grubby_info(out)
    if not kernels:
        module.fail_json(msg="grubby lists no kernels; is this host booted through a grubby-managed loader?")
    return grubby, kernels


def _grubby(module, present, absent, result, kernels=None):
    """Ensure ``present`` and ``absent`` on every kernel grubby knows; returns (changed, before, after)
    with the arguments of each kernel."""
    grubby, found = _grubby_kernels(module)
    kernels = kernels or found
    try:
        after = [dict(kernel=k["kernel"], args=apply_params(k["args"], present, absent,
                                                            where="the arguments grubby keeps for %s" % k["kernel"]))
                 for k in kernels]
    except KernelCmdlineError as exc:
        fail(module, exc.problems)
    changed = any(a["args"] != k["args"] for a, k in zip(after, kernels))
    if module._diff:
        result["diff"] = dict(before="".join("%s: %s\n" % (k["kernel"], " ".join(k["args"])) for k in kernels),
                              after="".join("%s: %s\n" % (k["kernel"], " ".join(k["args"])) for k in after))
    if changed and not module.check_mode:
        command = [grubby, "--update-kernel=ALL"]
        if present:
            command.append("--args=%s" % " ".join(present))
        if absent:
            command.append("--remove-args=%s" % " ".join(absent))
        rc, out, err = module.run_command(command)
        if rc != 0:
            module.fail_json(msg="%s failed: %s" % (" ".join(command), err or out))
    result.update(kernels=after, params=after[0]["args"], grub_update_required=False, files=grubby_files(),
                  differs=changed)
    return changed, [k["args"] for k in kernels], [a["args"] for a in after]


def _grub_default(module, present, absent, result):
    """Ensure ``present`` and ``absent`` in the grub defaults; returns (changed, before, after)."""
    params = module.params
    path = params["grub_default_path"]
    current = _grub_text(module)
    try:
        new_text, old_params, new_params = plan_grub_default(current, params["variable"], present, absent,
                                                             where="%s in %s" % (params["variable"], path))
    except KernelCmdlineError as exc:
        fail(module, exc.problems)
    changed = new_text != current
    if module._diff:
        result["diff"] = file_update.diff(path, current, new_text)
    changed = file_update.apply(module, path, current, new_text, changed, result, backup=params["backup"])
    result.update(params=new_params, grub_update_required=new_text != current, files=[path],
                  differs=new_text != current)
    return changed, [old_params], [new_params]


def _grub_text(module):
    path = module.params["grub_default_path"]
    current = file_update.read_text(path)
    if current is None:
        module.fail_json(msg="%s does not exist; is grub installed? Set method or grub_default_path" % path)
    return current


def _present(module, method, where, result):
    params = module.params
    # a record made for another boot configuration (grub defaults or grubby) is refused too
    checks = [check_record] + ([lambda found, path: check_record_where(found, where, path)] if where is not None else [])
    record = applied_record.load_checked(module, params["record"], *checks)
    present_params, absent_params = params["present"], params["absent"]
    if method == "grubby":
        changed, before, after = _grubby(module, present_params, absent_params, result)
    else:
        changed, before, after = _grub_default(module, present_params, absent_params, result)
    added, removed = list((record or {}).get("added", [])), list((record or {}).get("removed", []))
    if result["differs"]:
        added, removed = merge_record(record, *change_of(before, after))
        kept = dict(where, added=added, removed=removed) if added or removed else None
        applied_record.save_for(module, module.params["record"], kept)
    result.update(record_found=record is not None, added=added, removed=removed,
                  msg="the boot configuration %s" % ("changed" if result["differs"] else "is as wanted already"))
    running = (file_update.read_text(params["proc_cmdline_path"]) or "").split()
    result["active"] = satisfied(running, present_params, absent_params)
    return changed


def _absent(module, method, where, result):
    params = module.params
    record = applied_record.load_checked(module, module.params["record"], check_record)
    result.update(record_found=record is not None, added=[], removed=[], restored=[], left=[], differs=False,
                  grub_update_required=False, active=True, files=[], params=[])
    if record is None:
        result["msg"] = ("%s does not exist: numa.kube has no kernel parameters of its own on this node to take out "
                         "(none were set, or an older release set them without a record); nothing was changed"
                         % params["record"])
        return False
    problems = check_record_where(record, where, params["record"])
    if problems:
        fail(module, problems)
    if method == "grubby":
        kernels = _grubby_kernels(module)[1]
        currents = [k["args"] for k in kernels]
    else:
        kernels = None
        try:
            currents = [read_grub_variable(_grub_text(module), params["variable"])[1]]
        except KernelCmdlineError as exc:
            fail(module, exc.problems)
    remove, restore, left = plan_withdraw(currents, record["added"], record["removed"])
    problems = check_dangerous(restore, remove, params["allow"],
                               ("to put back from the record", "to take out as the record says"))
    if problems:
        fail(module, problems)
    if method == "grubby":
        changed = _grubby(module, restore, remove, result, kernels)[0]
    else:
        changed = _grub_default(module, restore, remove, result)[0]
    for note in left:
        module.warn(note)
    changed = applied_record.save_for(module, module.params["record"], None) or changed
    result.update(removed=remove, restored=restore, left=left,
                  msg="took out %s, put back %s%s" % (" ".join(remove) or "nothing", " ".join(restore) or "nothing",
                                                      "; left as they are: %s" % "; ".join(left) if left else ""))
    running = (file_update.read_text(params["proc_cmdline_path"]) or "").split()
    result["active"] = satisfied(running, restore, remove)
    return changed


def method_of(module):
    """The boot configuration to change: the method asked for, or with auto grubby where it is
    installed and grub's defaults file otherwise."""
    method = module.params["method"]
    if method == "auto":
        method = "grubby" if module.get_bin_path("grubby") else "grub_default"
    return method


def check_inputs(module):
    """Every problem with the module's input, before anything on the node is read."""
    params = module.params
    present_params, absent_params = params["present"], params["absent"]
    problems = check_params(present_params, "present") + check_params(absent_params, "absent")
    problems += check_allow(params["allow"])
    if params["state"] == "absent" and (present_params or absent_params):
        problems.append("present and absent are for state=present; state=absent takes out what %s says numa.kube "
                        "set: leave both lists out" % params["record"])
    clash = sorted(set(present_params) & set(absent_params))
    if clash:
        problems.append("%s cannot be both present and absent" % ", ".join(clash))
    problems += check_dangerous(present_params, absent_params, params["allow"]) + check_repeated_wanted(present_params)
    method = method_of(module)
    problems += check_variable(params["variable"])
    # the file's type matters only where it is written; its path's form always
    problems += check_grub_default_path(params["grub_default_path"],
                                        lstat=os.lstat if method == "grub_default" else None)
    return problems


def _run(module, change):
    params = module.params
    method = method_of(module)
    result = dict(method=method, record=params["record"])
    where = where_of(method, params["grub_default_path"], params["variable"])
    result["changed"] = change(module, method, where, result)
    result["reboot_required"] = not result["active"]
    return result


def present(module):
    """State present: the parameters set as asked, the record merged; the module's result."""
    return _run(module, _present)


def absent(module):
    """State absent: what the record says numa.kube set taken back out; the module's result."""
    return _run(module, _absent)
