# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the numa.kube.kubelet_config module does on a node, behind its argument spec: its inputs
checked, the record of what numa.kube changed loaded, the side files (the boot guard) planned, and
the change made (present) or taken back out (absent), each file replaced whole, with diff and backup."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat


from ansible_collections.numa.kube.plugins.module_utils.errors import fail_with_problems
from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node import file_update
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import KubeletConfigError, plan_change
from ansible_collections.numa.kube.plugins.module_utils.kubelet.withdraw import (
    EMPTY_RECORD,
    RECORD_NAME,
    check_record,
    flag_mode_problem,
    plan_withdraw,
    record_present,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import (
    LAYOUTS,
    KubeletNodeError,
    config_dir_from_flags,
    with_config_dir,
)
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import MAX_CPUS, parse_cpu_list


# Linux's MAX_NUMNODES at its largest (NODES_SHIFT 10)
MAX_NUMA_NODES = 1024
NEW_FLAG_FILE_MODE = 0o600


def path_problem(what, path, must_exist=False):
    """Why ``path`` cannot be the kubelet configuration file to read or write, or None."""
    if not path:
        return "%s is empty: give the absolute path of the kubelet configuration file" % what
    if not os.path.isabs(path):
        return ("%s %r is relative: give an absolute path (a relative one would depend on the directory the module "
                "runs in)" % (what, path))
    if os.path.isdir(path):
        return ("%s %s is a directory: point it at the kubelet configuration file itself (for a drop-in, a file "
                "ending in .conf inside kubelet's --config-dir)" % (what, path))
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        return "%s %s is not a regular file (a device, socket or pipe): point it at the kubelet configuration file" % (
            what, path)
    if must_exist and not os.path.exists(path):
        return "%s %s does not exist" % (what, path)
    return None


def read(module, what, path):
    try:
        return file_update.read_text(path)
    except (IOError, OSError, UnicodeError) as exc:
        module.fail_json(msg="%s %s cannot be read: %s" % (what, path, exc))


def own_flag_files(params):
    """The flag files a record may name: the module's flag_file, or else every file kubelet's extra
    flags live in (KUBELET_EXTRA_ARGS, the only place numa.kube adds --config-dir)."""
    if params["flag_file"]:
        return [params["flag_file"]]
    return sorted(set(name for layout in LAYOUTS.values() for name in layout.get("extra_args_files", [])))


def load_record(module, path):
    """The kubelet record at ``path`` (None when there is none or records are off); a damaged one,
    one in a folder others could write, or one naming files this run does not own stops the module
    before anything changes."""
    if not path:
        return None
    params = module.params
    try:
        # with a drop-in, the files kubelet reads before it (base_path) are only read: a record may name
        # the drop-in alone, so that it cannot make 'absent' remove or rewrite kubelet's own configuration
        bases = list(params["base_path"] or [])
        return check_record(applied_record.load(path), path,
                            own_files=[params["path"]] if params["dropin"] else [params["path"]] + bases,
                            own_flag_files=own_flag_files(params), read_only_files=bases if params["dropin"] else (),
                            dropin=params["path"] if params["dropin"] else None)
    except applied_record.RecordError as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)


def flag_config_dir(params):
    """The folder the flag file's new text gives kubelet as --config-dir: the drop-in's."""
    if params["dropin"]:
        return os.path.dirname(params["path"])
    return config_dir_from_flags([params["flag_file_text"]])


def completed_flag_record(record, path, dropin):
    """A record of an earlier build names no text numa.kube wrote in the flag file: work it out from
    the previous text, as numa.kube wrote it then (previous text with --config-dir added). Returns
    (record, note or None)."""
    flag = (record or {}).get("flag_file")
    if not flag or flag.get("after") is not None:
        return record, None
    config_dir = flag.get("config_dir") or (os.path.dirname(path) if dropin else None)
    if not config_dir:
        return record, None
    try:
        written = with_config_dir(flag["text"], config_dir)
    except KubeletNodeError:
        return record, None
    record = dict(record, flag_file=dict(flag, after=written, config_dir=config_dir))
    return record, ("%s: the record (from an earlier build) holds not the text numa.kube wrote; taken as the previous "
                    "text with --config-dir=%s added" % (flag["path"], config_dir))


def replace_file(module, path, text, mode=None, backup=False, result=None):
    """Write ``text`` to ``path`` through a temporary file in its folder; an existing file keeps its
    owner, mode and context, a new one gets ``mode``."""
    if backup and os.path.exists(path) and result is not None:
        result.setdefault("backup_files", []).append(module.backup_local(path))
    existed = os.path.exists(path)
    file_update.replace(module, path, text)
    if mode is not None or not existed:
        os.chmod(path, int(mode, 8) if mode else NEW_FLAG_FILE_MODE)


def remove_file(module, path, backup=False, result=None):
    if not os.path.lexists(path):
        return
    if backup and result is not None:
        result.setdefault("backup_files", []).append(module.backup_local(path))
    os.unlink(path)


def removal_diff(path, before):
    return dict(before=before or "", after="", before_header=path, after_header="/dev/null")


def check_inputs(module):
    params = module.params
    problems = [p for p in [path_problem("path", params["path"])] + [
        path_problem("base_path", base, must_exist=True) for base in params["base_path"] or []] if p]
    if params["path"] and os.path.realpath(params["path"]) in [os.path.realpath(b) for b in params["base_path"] or []
                                                               if isinstance(b, str)]:
        problems.append("path %s is also in base_path (or leads to the same file): base_path names the files kubelet "
                        "reads before numa.kube's "
                        "drop-in, which numa.kube only reads; give the drop-in a path of its own (such as "
                        "<kubelet's --config-dir>/50-numa-kube.conf)" % params["path"])
    if params["state"] == "present" and params["settings"] is None:
        problems.append("settings is required with state=present: give the KubeletConfiguration fields to set")
    if params["state"] == "present" and (params["flag_file"] is None) != (params["flag_file_text"] is None):
        problems.append("flag_file and flag_file_text go together with state=present: give both (the flag file and "
                        "what it must hold, from numa.kube.kubelet_facts) or neither")
    if params["flag_file"] is not None and params["state"] == "present":
        problem = path_problem("flag_file", params["flag_file"])
        if problem:
            problems.append(problem.replace("the kubelet configuration file", "kubelet's environment file"))
    if params["record"] and not os.path.isabs(params["record"]):
        problems.append("record %r is relative: give an absolute path, or \"\" to keep no record" % params["record"])
    elif params["record"] and os.path.isdir(params["record"]):
        problems.append("record %s is a directory: give the path of the record file (%s)"
                        % (params["record"], os.path.join(params["record"], RECORD_NAME)))
    if params["numa_node_count"] is not None and not 1 <= params["numa_node_count"] <= MAX_NUMA_NODES:
        problems.append("numa_node_count %d is not a number of NUMA nodes (1 to %d)"
                        % (params["numa_node_count"], MAX_NUMA_NODES))
    online = None
    if params["online_cpus"]:
        try:
            online = parse_cpu_list(params["online_cpus"])
        except ValueError as exc:
            problems.append("online_cpus %r is not a CPU list such as 0-15: %s" % (params["online_cpus"], exc))
    for index, cpu in enumerate(params["cpus"] or []):
        number = cpu.get("id")
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < MAX_CPUS:
            problems.append("cpus[%d]: id %r is not a CPU id (0 to %d); pass numa_topology.cpus from "
                            "numa.kube.topology_facts" % (index, number, MAX_CPUS - 1))
    if params["extra_files"] and params["state"] == "absent":
        problems.append("extra_files goes with state=present only: leave it out, or list the files in remove_files "
                        "to take them out")
    problems.extend(file_update.side_file_problems(params["extra_files"], params["remove_files"]))
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    return online


def found_at(path):
    """What is at ``path``, as file_update.plan_side_files asks: None, or (kind, text, mode bits)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", None, None)
    if stat.S_ISDIR(info.st_mode):
        return ("directory", None, None)
    if not stat.S_ISREG(info.st_mode):
        return ("device, socket or pipe", None, None)
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeError:
        text = None
    return ("file", text, stat.S_IMODE(info.st_mode))


def plan_side_files(module):
    """The writes and removals of O(extra_files) and O(remove_files); a path that cannot be written
    or removed stops the module before anything changes."""
    params = module.params
    writes, removals, problems = file_update.plan_side_files(params["extra_files"], params["remove_files"], found_at)
    if problems:
        module.fail_json(msg=" | ".join(problems), problems=problems)
    return writes, removals


def side_files(module, result, side):
    """Write O(extra_files) and remove O(remove_files) as planned (not in check mode), and say so in
    ``result``: changed, differs, files, diff, extra_written, removed."""
    writes, removals = side
    result["extra_written"] = [path for path, _before, _text, _mode in writes]
    result["removed"] = [path for path, _before in removals]
    done = result["removed"] + result["extra_written"]
    if done:
        result["changed"] = result["differs"] = True
        result["files"] = result["files"] + [path for path in done if path not in result["files"]]
    if module._diff and done:
        diffs = result.get("diff")
        diffs = [] if diffs is None else (list(diffs) if isinstance(diffs, list) else [diffs])
        diffs.extend(removal_diff(path, before) for path, before in removals)
        diffs.extend(file_update.diff(path, before, text) for path, before, text, _mode in writes)
        result["diff"] = diffs if len(diffs) > 1 else diffs[0]
    if module.check_mode:
        return
    for path, _before in removals:
        remove_file(module, path)
    for path, _before, text, mode in writes:
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        replace_file(module, path, text, mode="%04o" % mode)


def machine_of(params):
    return dict(numa_node_memory=params["numa_node_memory"], memory_capacity=params["memory_capacity"],
                distribution=params["eviction_distribution"], cpus=params["cpus"])


def refused(module, exc):
    fail_with_problems(module, exc.problems, "kubelet would refuse this configuration: ")


def present(module, online, record_file, record, side):
    params = module.params
    path = params["path"]
    current = read(module, "path", path)
    mode = "dropin" if params["dropin"] else "merge"
    if current is None and mode == "merge" and not params["create"]:
        module.fail_json(msg="%s does not exist; point path at the kubelet configuration in use, or set "
                             "create=true to start a new one" % path)
    bases = [(base, read(module, "base_path", base)) for base in params["base_path"] or []]
    try:
        plan = plan_change(path, current, params["settings"], mode, params["format"],
                           numa_node_count=params["numa_node_count"], online_cpus=online, bases=bases,
                           check=params["validate"], machine=machine_of(params))
    except KubeletConfigError as exc:
        refused(module, exc)
    flag_file = params["flag_file"]
    flag_before = read(module, "flag_file", flag_file) if flag_file else None
    flag_changes = bool(flag_file) and flag_before != params["flag_file_text"]
    new_record = record
    if record_file and (plan["changed"] or flag_changes):
        flag = None
        if flag_changes:
            flag_mode = "%04o" % stat.S_IMODE(os.stat(flag_file).st_mode) if flag_before is not None else None
            problem = flag_mode_problem(int(flag_mode, 8), flag_file) if flag_mode else None
            if problem:
                fail_with_problems(module, [problem])
            flag = (flag_file, flag_before, flag_mode, params["flag_file_text"], flag_config_dir(params))
        new_record = record_present(record, path, mode, plan["before"] if mode == "merge" else {},
                                    plan["config"] if mode == "merge" else {},
                                    created=current is None, flag=flag)
    record_text = read(module, "record", record_file) if record_file else None
    record_changes = new_record is not record and applied_record.render(new_record) != record_text
    result = dict(
        changed=plan["changed"] or flag_changes or record_changes,
        differs=plan["changed"] or flag_changes or record_changes,
        config=plan["config"],
        format=plan["format"],
        restart_required=plan["restart_required"] or flag_changes,
        remove_cpu_manager_state=plan["remove_cpu_manager_state"],
        remove_memory_manager_state=plan["remove_memory_manager_state"],
        files=[p for p, changes in ((path, plan["changed"]), (flag_file, flag_changes),
                                    (record_file, record_changes)) if changes],
        notes=[], fallback=[], record=new_record,
    )
    if module._diff:
        diffs = [file_update.diff(path, current, plan["text"])]
        if flag_changes:
            diffs.append(file_update.diff(flag_file, flag_before, params["flag_file_text"]))
        result["diff"] = diffs if len(diffs) > 1 else diffs[0]
    if not module.check_mode:
        # the record first: it never lags behind what it lets 'absent' undo
        if record_changes:
            applied_record.write(record_file, new_record)
        if flag_changes:
            replace_file(module, flag_file, params["flag_file_text"], backup=params["backup"], result=result)
    # a drop-in may be the first file of its folder (kubelet's --config-dir on a kubeadm node)
    written = file_update.apply(module, path, current, plan["text"], plan["changed"], result,
                                backup=params["backup"], make_dirs=params["dropin"])
    result["changed"] = written or flag_changes or record_changes
    if result["record"] is not None:
        result["record"] = dict(result["record"], version=applied_record.VERSION)
    side_files(module, result, side)
    module.exit_json(**result)


def absent(module, online, record_file, record, side):
    params = module.params
    path = params["path"]
    mode = "dropin" if params["dropin"] else "merge"
    record, record_note = completed_flag_record(record, path, params["dropin"])
    involved = [path] + list(params["base_path"] or []) + sorted((record or {}).get("files", {}))
    if record and record.get("flag_file"):
        involved.append(record["flag_file"]["path"])
    texts = {}
    for where in involved:
        problem = path_problem("file", where)
        if problem and where != path:
            module.fail_json(msg="cannot take numa.kube's change back out of %s: %s" % (where, problem))
        texts[where] = read(module, "file", where)
    try:
        plan = plan_withdraw(path, mode, texts, record, params["format"], params["base_path"] or [],
                             check=params["validate"], numa_node_count=params["numa_node_count"],
                             online_cpus=online, machine=machine_of(params))
    except KubeletConfigError as exc:
        refused(module, exc)
    record_text = read(module, "record", record_file) if record_file else None
    # a record there was goes, or is emptied where the node keeps NUMA values of its own (see
    # EMPTY_RECORD); none is made where there was none
    keep = record is not None and plan["keep_empty_record"]
    record_changes = record is not None and (applied_record.render(EMPTY_RECORD) != record_text if keep else True)
    writes = plan["writes"]
    files = sorted(writes) + ([record_file] if record_changes else [])
    result = dict(
        changed=bool(files), differs=bool(files),
        config=plan["config"],
        restart_required=plan["restart_required"],
        remove_cpu_manager_state=plan["remove_cpu_manager_state"],
        remove_memory_manager_state=plan["remove_memory_manager_state"],
        files=files, notes=plan["notes"], fallback=plan["fallback"],
        record=dict(EMPTY_RECORD, version=applied_record.VERSION) if keep else None,
    )
    if record is None and record_file:
        why = "the drop-in is numa.kube's by its name" if mode == "dropin" else "fallback for merged files"
        result["notes"] = ["no record at %s: %s" % (record_file, why)] + result["notes"]
    if record_note:
        result["notes"] = [record_note] + result["notes"]
    for warning in plan["warnings"]:
        module.warn(warning)
    if module._diff:
        diffs = [removal_diff(where, texts[where]) if text is None else file_update.diff(where, texts[where], text)
                 for where, text in sorted(writes.items())]
        if len(diffs) == 1:
            result["diff"] = diffs[0]
        elif diffs:
            result["diff"] = diffs
    if not module.check_mode:
        flag_path = (record or {}).get("flag_file", {}) or {}
        for where, text in sorted(writes.items()):
            if text is None:
                remove_file(module, where, backup=params["backup"], result=result)
            else:
                replace_file(module, where, text, mode=plan["flag_mode"] if where == flag_path.get("path") else None,
                             backup=params["backup"], result=result)
        # the record last: a run cut short before here still knows what to undo
        if record_changes and keep:
            applied_record.write(record_file, EMPTY_RECORD)
        elif record_changes:
            applied_record.remove(record_file)
    side_files(module, result, side)
    module.exit_json(**result)
