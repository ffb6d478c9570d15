# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The way back out of a kubelet configuration numa.kube changed: the record of what it merged or
wrote (which fields, their values before, which files it made), checked before it is trusted, and the
plan that puts each file back as it was, leaving what someone else changed since."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import re

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import (
    DEFAULTS,
    KubeletConfigError,
    detect_format,
    dump_text,
    load_text,
    merge_patch,
    state_changes,
    validate,
)

RECORD_NAME = "kubelet.json"
# What ``absent`` removes from a merged file when there is no record (a node changed by a release
# that kept none): the NUMA managers' policies, their options and the memory reservation, where
# they differ from kubelet's defaults. The reservations (kubeReserved, systemReserved,
# reservedSystemCPUs, evictionHard) stay: they may be the node's own, and kubelet runs its default
# policies with them.
FALLBACK_FIELDS = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy", "reservedMemory",
                   "topologyManagerPolicy", "topologyManagerPolicyOptions", "topologyManagerScope")
_ENVELOPE = ("apiVersion", "kind")
# the widest mode a flag file numa.kube puts back may get: permission bits only (no setuid, setgid
# or sticky bit), and nobody but its owner and group writing it. numa.kube makes a new one 0600 and
# otherwise keeps the mode the file had, which the record holds; it refuses to edit a flag file
# whose mode is wider (see flag_mode_problem), so it never records one.
FLAG_MODE_LIMIT = 0o775
_MODE_TEXT = re.compile(r"^0?[0-7]{3}\Z")


def flag_mode_problem(mode, where):
    """Why a flag file's mode (an int) is wider than numa.kube keeps or puts back, or None."""
    if mode & ~FLAG_MODE_LIMIT:
        return ("%s has mode %04o: a file that sets kubelet's flags must not be writable by others than its owner and "
                "group, nor carry a setuid, setgid or sticky bit (numa.kube keeps and puts back modes within %04o); "
                "chmod it (such as chmod 0644) and run again" % (where, mode, FLAG_MODE_LIMIT))
    return None


_MISSING = object()

# 'absent' removes the record once the part is out, except where a file kubelet reads still holds
# such a field with a value of the node's own (one the record put back, or one numa.kube never
# changed): there it leaves an empty record (no files), so that a second 'absent' knows numa.kube
# has nothing left on the node and leaves that value alone instead of falling back.
EMPTY_RECORD = {"files": {}}


def _own_numa_fields(document):
    """The FALLBACK_FIELDS of a configuration document that differ from kubelet's defaults."""
    return [f for f in FALLBACK_FIELDS if f in document and document[f] not in (None, "", {}, [], DEFAULTS.get(f))]


def _field_list(value):
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def check_record(record, where, own_files=None, own_flag_files=None, read_only_files=(), dropin=None):
    """Refuse a kubelet record (applied_record.load's dict, or None) whose fields this release cannot
    undo from, or that names a file this run does not own; returns it.

    Version 1 holds ``files`` (path -> ``{"kind": "owned"}`` for a file numa.kube wrote whole, or
    ``{"kind": "merged", "before": {field: value}, "missing": [field], "after": {field: value},
    "after_missing": [field]}``: the value each field numa.kube changed had before it first changed
    it, or that it had none, and the value numa.kube last wrote, or that it removed the field;
    ``after`` and ``after_missing`` are absent in records of earlier builds) and, when numa.kube
    edited kubelet's flag file, ``flag_file`` (``path``; previous ``text`` and ``mode``, null when
    the file did not exist; ``after``, the text numa.kube wrote, and ``config_dir``, the folder it
    added as ``--config-dir=``; the last two absent in records of earlier builds).

    ``own_files`` (the module's ``path`` and ``base_path``) and ``own_flag_files`` (its
    ``flag_file``, or the files kubelet's extra flags live in): when given, a record naming any
    other file is refused, so that a record cannot point 'absent' at a file numa.kube never
    changed. ``read_only_files`` (with a drop-in, the files kubelet reads before it) are refused
    with their own reason: numa.kube only reads them then. ``dropin``, the drop-in's path: numa.kube
    only ever records it as its own whole file, so an entry of another kind for it is refused."""
    if record is None:
        return None
    applied_record.check_fields(record, where, {"files": dict})
    problems = []
    fix = ("numa.kube writes this file itself: put back the copy the last run saved, or remove the file to let "
           "'absent' use its fallback")
    for path, entry in sorted(record["files"].items()):
        if not isinstance(entry, dict) or entry.get("kind") not in ("owned", "merged"):
            problems.append("record %s: files[%r] is %s, not {\"kind\": \"owned\"} or {\"kind\": \"merged\", ...}"
                            % (where, path, json.dumps(entry)[:80]))
            continue
        if not path.startswith("/"):
            problems.append("record %s: files[%r] is not an absolute path" % (where, path))
        elif path in read_only_files:
            problems.append("record %s says numa.kube %s %s, but with a drop-in that file (kubelet's configuration, "
                            "read before the drop-in) is only read, never written or removed. If an earlier run "
                            "without the drop-in merged fields into it, take that change out first with the same "
                            "settings (kubelet_kubeadm_config_dir: \"\" and numa_kube_state: absent); otherwise the "
                            "record is not numa.kube's: remove it"
                            % (where, "wrote" if entry["kind"] == "owned" else "merged fields into", path))
        elif own_files is not None and path not in own_files:
            problems.append("record %s names %s, which is not a file this run changes (%s): numa.kube acts only on "
                            "the kubelet configuration it is given. Run with the kubelet_config_path/"
                            "kubelet_config_dir/kubelet_kubeadm_config_dir the change was made with, or take that "
                            "file's change out by hand and remove the record"
                            % (where, path, ", ".join(own_files) or "none"))
        if dropin is not None and path == dropin and entry["kind"] != "owned":
            problems.append("record %s says numa.kube merged fields into %s, but that is the drop-in, which numa.kube "
                            "writes whole and records as its own ({\"kind\": \"owned\"}): the record is not "
                            "numa.kube's; remove it" % (where, path))
            continue
        if entry["kind"] == "merged":
            if not isinstance(entry.get("before"), dict):
                problems.append("record %s: files[%r].before is not an object of field values" % (where, path))
            if not _field_list(entry.get("missing")):
                problems.append("record %s: files[%r].missing is not a list of field names" % (where, path))
            if "after" in entry and not isinstance(entry["after"], dict):
                problems.append("record %s: files[%r].after is not an object of field values" % (where, path))
            if not isinstance(entry.get("created", False), bool):
                problems.append("record %s: files[%r].created is not true or false" % (where, path))
            if "after_missing" in entry and not _field_list(entry["after_missing"]):
                problems.append("record %s: files[%r].after_missing is not a list of field names" % (where, path))
    flag = record.get("flag_file")
    if flag is not None:
        if not isinstance(flag, dict) or not isinstance(flag.get("path"), str) or not flag["path"].startswith("/") \
                or not isinstance(flag.get("text"), (str, type(None))) \
                or not isinstance(flag.get("mode"), (str, type(None))) \
                or not isinstance(flag.get("after"), (str, type(None))) \
                or not isinstance(flag.get("config_dir"), (str, type(None))) \
                or not (flag.get("config_dir") or "/").startswith("/"):
            problems.append("record %s: flag_file is %s, not {\"path\": absolute path, \"text\": string or null, "
                            "\"mode\": string or null, \"after\": string, \"config_dir\": absolute path}"
                            % (where, json.dumps(flag)[:120]))
        elif flag["mode"] is not None and (not _MODE_TEXT.match(flag["mode"])
                                           or int(flag["mode"], 8) & ~FLAG_MODE_LIMIT):
            problems.append("record %s: flag_file.mode is %r; the flag file's mode before numa.kube is kept as three "
                            "or four octal digits with no bit beyond %04o (no setuid, setgid or sticky bit, nobody "
                            "but its owner and group writing), as numa.kube records it. Set the mode it should have in the "
                            "record (such as \"0644\"), or remove the record and put the file back by hand"
                            % (where, flag["mode"], FLAG_MODE_LIMIT))
        elif own_flag_files is not None and flag["path"] not in own_flag_files:
            problems.append("record %s says numa.kube edited %s, which is not one of kubelet's flag files (%s): "
                            "numa.kube only ever adds --config-dir to one of those. Take that change out by hand and "
                            "remove the record" % (where, flag["path"], ", ".join(own_flag_files)))
    if problems:
        raise applied_record.RecordError(problems + [fix])
    return record


def record_present(record, path, mode, before, after, created=False, flag=None):
    """The record after a ``present`` change, or ``record`` itself when it gains nothing.

    ``before``/``after`` are the documents of the file at ``path`` (not the effective
    configuration). A drop-in is recorded as numa.kube's own; a merge file numa.kube ``created`` as
    merged with ``created`` true (``absent`` takes its fields out and removes the file only when
    nothing else is left in it); a merge records, for each top-level field it changes, the value the file had or that it
    had none - only the first time, so the original survives later changes - and the value it
    writes (``after``) or that it removes the field (``after_missing``), each time. ``flag`` is
    ``(path, text, mode)`` of kubelet's flag file before numa.kube edits it, or ``(path, text,
    mode, written_text, config_dir)``: taken each time numa.kube edits the file, so that the
    previous bytes kept are always the written text without numa.kube's --config-dir."""
    result = copy.deepcopy(record) if record else {"files": {}}
    result.pop("version", None)
    entry = result["files"].get(path)
    if mode == "dropin":
        if entry is None:
            result["files"][path] = {"kind": "owned"}
    else:
        if entry is None:
            entry = result["files"][path] = {"kind": "merged", "before": {}, "missing": [], "after": {},
                                             "after_missing": []}
            if created:
                # numa.kube's fields come out again, the file goes only when nothing else is left in it
                entry["created"] = True
        if entry["kind"] == "merged":
            known = set(entry["before"]) | set(entry["missing"])
            written, removed = entry.setdefault("after", {}), entry.setdefault("after_missing", [])
            for field in sorted(set(before) | set(after)):
                if field in _ENVELOPE or before.get(field, _MISSING) == after.get(field, _MISSING):
                    continue
                if field not in known:
                    if field in before:
                        entry["before"][field] = copy.deepcopy(before[field])
                    else:
                        entry["missing"].append(field)
                written.pop(field, None)
                if field in removed:
                    removed.remove(field)
                if field in after:
                    written[field] = copy.deepcopy(after[field])
                else:
                    removed.append(field)
            entry["missing"].sort()
            removed.sort()
    if flag is not None:
        entry = {"path": flag[0], "text": flag[1], "mode": flag[2]}
        if len(flag) > 3:
            entry.update(after=flag[3], config_dir=flag[4])
        result["flag_file"] = entry
    if record:
        comparable = dict(record)
        comparable.pop("version", None)
        if comparable == result:
            return record
    return result


def _restored(document, entry):
    """(document with the fields of a merged ``entry`` put back, fields left as they are because they
    changed since numa.kube wrote them, fields put back without knowing what numa.kube wrote)."""
    restored = copy.deepcopy(document)
    written, removed = entry.get("after"), entry.get("after_missing")
    left, unknown = [], []
    targets = sorted(entry["before"].items()) + [(field, _MISSING) for field in sorted(entry["missing"])]
    for field, value in targets:
        now = document.get(field, _MISSING)
        if now == value:
            continue  # as it was already
        if written is not None and field in written:
            ours = now == written[field]
        elif removed is not None and field in removed:
            ours = now is _MISSING
        else:
            ours = True
            unknown.append(field)
        if not ours:
            left.append(field)
        elif value is _MISSING:
            restored.pop(field, None)
        else:
            restored[field] = copy.deepcopy(value)
    return restored, left, unknown


_EXTRA_ARGS_LINE = re.compile(r"""^(\s*KUBELET_EXTRA_ARGS\s*=\s*)(?:"([^"]*)"|'([^']*)'|(\S*))(\s*)$""")


def without_config_dir(text, config_dir):
    """``text`` (kubelet's environment file) with the ``--config-dir=<config_dir>`` numa.kube added
    to KUBELET_EXTRA_ARGS taken out, every other line and argument kept; None when no
    KUBELET_EXTRA_ARGS line holds that exact argument."""
    flag = re.compile(r"(?:^|\s+)--config-dir=%s(?=\s|$)" % re.escape(config_dir))
    lines = (text or "").splitlines(True)
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _EXTRA_ARGS_LINE.match(body)
        if not match:
            continue
        quote = '"' if match.group(2) is not None else "'" if match.group(3) is not None else ""
        value = next(group for group in match.groups()[1:4] if group is not None)
        if not flag.search(value):
            continue
        value = flag.sub("", value, count=1).strip()
        lines[index] = "%s%s%s%s%s%s" % (match.group(1), quote, value, quote, match.group(5), line[len(body):])
        return "".join(lines)
    return None


def _settings_only(config):
    return dict((k, v) for k, v in config.items() if k not in _ENVELOPE)


def plan_withdraw(path, mode, texts, record, fmt="auto", base_paths=(), check=True, numa_node_count=None,
                  online_cpus=None, machine=None):
    """Work out how to take numa.kube's kubelet change back out, without touching anything.

    ``texts`` maps every file involved to its text (None when missing): ``path``, ``base_paths``,
    each file of the record and its flag file. Drop-in mode removes the drop-in at ``path`` (its
    name is numa.kube's), with or without a record; every file the record holds is put back:
    numa.kube's own files removed, merged fields restored (those that were missing removed), and
    the flag file given its previous bytes. In merge mode without any record, FALLBACK_FIELDS are
    removed from ``path`` unless they hold kubelet's default already (``none``, empty options);
    with a record that has no entry for ``path``, it is left alone.

    Returns ``writes`` (path -> new text, None to remove; only files that change), ``flag_mode``
    (the mode to give a restored flag file), ``before`` and ``config`` (the effective
    configuration kubelet reads, before and after), ``restart_required``, the state files that
    must go, ``fallback`` (the fields the fallback removes, or []), ``keep_empty_record`` (a file
    kubelet reads keeps NUMA manager values of its own, see EMPTY_RECORD) and ``notes`` (what is
    done, in words).
    """
    if mode not in ("merge", "dropin"):
        raise KubeletConfigError("mode %r is not one of merge, dropin" % (mode,))
    files = dict((record or {}).get("files") or {})
    writes, notes, fallback = {}, [], []

    def parse(where):
        text = texts.get(where)
        if text is None:
            return None
        file_format = fmt if fmt != "auto" and where == path else detect_format(where, text)
        try:
            document = load_text(text, file_format)
        except Exception as exc:  # yaml's errors do not derive from ValueError
            raise KubeletConfigError("%s could not be parsed as %s: %s" % (where, file_format.upper(), exc))
        if not isinstance(document, dict):
            raise KubeletConfigError("%s does not hold a KubeletConfiguration mapping" % where)
        return document, file_format

    warnings = []

    def merged_file(where, entry, what):
        parsed = parse(where)
        if parsed is None:
            notes.append("%s does not exist: nothing to restore in it" % where)
            return
        document, file_format = parsed
        restored, left, unknown = _restored(document, entry)
        if entry.get("created") and not _settings_only(restored):
            writes[where] = None
            notes.append("%s removed (numa.kube created it, and nothing else is left in it)" % where)
            return
        if restored != document:
            writes[where] = dump_text(restored, file_format)
            done = [f for f in sorted(entry["before"]) + sorted(entry["missing"]) if f not in left
                    and restored.get(f, _MISSING) != document.get(f, _MISSING)]
            notes.append("%s: %s (%s)" % (where, what, ", ".join(done)))
        if left:
            warnings.append("%s: %s changed since numa.kube set %s, so %s left as %s (put back by hand what "
                            "should be there)" % (where, ", ".join(left), "it" if len(left) == 1 else "them",
                                                  "it is" if len(left) == 1 else "they are",
                                                  "it is" if len(left) == 1 else "they are"))
        if unknown and entry is not None and "kind" in entry:
            notes.append("%s: the record (from an earlier build) does not say what numa.kube wrote in %s, so %s put "
                         "back whatever %s now" % (where, ", ".join(unknown), "it is" if len(unknown) == 1
                                                   else "they are", "it holds" if len(unknown) == 1 else "they hold"))

    if mode == "dropin":
        files.setdefault(path, {"kind": "owned"})
    for where, entry in sorted(files.items()):
        if entry["kind"] == "owned" and mode == "merge":
            # a file kubelet reads in merge mode is never numa.kube's whole: a record saying so (earlier
            # builds recorded a file they created that way) gets numa.kube's NUMA manager fields taken
            # out, and the file goes only when nothing else is left in it
            parsed = parse(where)
            merged_file(where, {"before": {}, "missing": _own_numa_fields(parsed[0]) if parsed else [],
                                "created": True},
                        "numa.kube's NUMA manager fields taken out (the record says numa.kube wrote the file)")
        elif entry["kind"] == "owned":
            if texts.get(where) is not None:
                writes[where] = None
                notes.append("%s removed (numa.kube wrote it)" % where)
        elif entry["before"] or entry["missing"]:
            merged_file(where, entry, "fields put back as they were before numa.kube")
    if mode == "merge" and record is None:
        parsed = parse(path)
        present_fields = _own_numa_fields(parsed[0]) if parsed is not None else []
        if present_fields:
            fallback = present_fields
            merged_file(path, {"before": {}, "missing": present_fields},
                        "no record of what numa.kube changed: its NUMA manager fields removed, so kubelet runs its "
                        "defaults")
    elif mode == "merge" and path not in files:
        notes.append("%s: the record holds no change of numa.kube there; left alone" % path)
    flag = (record or {}).get("flag_file")
    flag_mode = None
    if flag is not None:
        where, now, before_text = flag["path"], texts.get(flag["path"]), flag["text"]
        config_dir = flag.get("config_dir") or (os.path.dirname(path) if mode == "dropin" else None)
        token = "--config-dir=%s" % config_dir
        if now == before_text:
            pass  # as it was before numa.kube already
        elif flag.get("after") is not None and now == flag["after"]:
            # still byte for byte what numa.kube wrote: the previous bytes back, or the file it created goes
            writes[where] = before_text
            flag_mode = flag["mode"]
            notes.append("%s %s" % (where, "put back as it was before numa.kube added %s" % token
                                    if before_text is not None else "removed (numa.kube created it)"))
        elif now is None:
            notes.append("%s is gone: no %s left to take out" % (where, token))
        else:
            edited = without_config_dir(now, config_dir) if config_dir else None
            if edited is None:
                warnings.append("%s no longer holds %s in KUBELET_EXTRA_ARGS (changed since numa.kube added it): "
                                "left as it is; check kubelet's --config-dir yourself" % (where, token))
            else:
                # changed by hand since: only numa.kube's argument comes out, the rest stays
                writes[where] = edited
                notes.append("%s: %s taken out of KUBELET_EXTRA_ARGS; the rest of the file, changed since numa.kube "
                             "edited it, left as it is" % (where, token))
        if flag.get("after") is None and where in writes:
            notes.append("%s: the record (from an earlier build) does not hold the text numa.kube wrote, so only "
                         "%s is taken out" % (where, token))

    def effective(contents):
        result = {}
        for where in list(base_paths) + [path]:
            text = contents.get(where)
            if text:
                document = load_text(text, detect_format(where, text) if where != path or fmt == "auto" else fmt)
                result = merge_patch(result, document if isinstance(document, dict) else {})
        return result

    after_texts = dict(texts)
    after_texts.update(writes)
    try:
        before, after = effective(texts), effective(after_texts)
        kept = []  # what a later fallback could take for numa.kube's: NUMA values left in the files kubelet reads
        for where in sorted(set([path] + list(base_paths) + [w for w, e in files.items() if e["kind"] == "merged"])):
            text = after_texts.get(where)
            document = {}
            if text:
                document = load_text(text, fmt if where == path and fmt != "auto" else detect_format(where, text))
            own = _own_numa_fields(document if isinstance(document, dict) else {})
            kept.extend("%s in %s" % (field, where) for field in own)
    except Exception as exc:  # yaml's errors do not derive from ValueError
        raise KubeletConfigError("a kubelet configuration file could not be parsed: %s" % exc)
    if check:
        validate(after, numa_node_count=numa_node_count, online_cpus=online_cpus, machine=machine)
    effective_changed = _settings_only(before) != _settings_only(after)
    result = {
        "writes": writes,
        "flag_mode": flag_mode,
        "before": before,
        "config": after,
        "restart_required": effective_changed or (flag is not None and flag["path"] in writes),
        "fallback": fallback,
        "keep_empty_record": bool(kept),
        "notes": notes + warnings + (["the node's own %s stay; an empty record says numa.kube has nothing left here"
                                      % ", ".join(kept)] if kept and record is not None else []),
        "warnings": warnings,
    }
    result.update(state_changes(before, after) if effective_changed else
                  {"remove_cpu_manager_state": False, "remove_memory_manager_state": False})
    return result
