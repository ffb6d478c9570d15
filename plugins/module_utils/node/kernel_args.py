# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command-line parameters: wanted present or absent, in /etc/default/grub or through grubby.

A parameter is ``name`` or ``name=value``. Present ``name=value`` replaces another value of the same
name; present ``name`` adds the bare flag. Absent ``name`` removes every ``name`` and ``name=...``;
absent ``name=value`` removes only that exact pair. grub.cfg is never edited: the caller
regenerates it (update-grub, grub2-mkconfig) or lets grubby update the boot entries.

Parameters that can take a node away (another init, another root, fewer CPUs or less memory, a
rescue target, blacklisted drivers, masked units, renamed interfaces, another cgroup layout...) are
refused, added or removed, unless the caller names them in an allow list: see DANGEROUS. Names are
compared as the kernel and systemd compare them: exactly and case-sensitively, but with ``-`` and
``_`` alike (``nr-cpus`` is ``nr_cpus``).

A name that occurs more than once on the current command line (``hugepagesz=1G hugepages=16
hugepagesz=2M hugepages=512``, read in order by the kernel) is not replaced or removed: which
occurrence is meant cannot be told, so the change is refused with the occurrences named.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import shlex
import stat

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args_denied import DANGEROUS

# The only characters numa.kube writes into a kernel command line. /etc/default/grub is a shell
# file that grub-mkconfig sources, so quotes, backslashes, $, backticks, ;, |, &, <, >, (, ),
# braces, globs, spaces and control characters could run commands or split a parameter there.
# Names are what the kernel and modules use (letters, digits, _ - .); values add the separators
# real parameters need (isolcpus=managed_irq,domain,2-5 root=UUID=... console=ttyS0,115200n8
# rd.lvm.lv=vg/root).
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_VALUE = r"[A-Za-z0-9_.,:/+=@%\-]*"
_PARAM = re.compile(r"^%s(=%s)?\Z" % (_NAME, _VALUE))
_MAX_LENGTH = 1024
# What an existing parameter in the grub defaults must not hold for numa.kube to rewrite the line.
_UNSAFE_EXISTING = re.compile(r"[\"\\`$]")
# The grub defaults variable numa.kube writes: a shell identifier (the file is sourced as shell),
# and one of grub's kernel command-line variables (GRUB_CMDLINE_LINUX, ..._DEFAULT, ..._XEN...).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_CMDLINE_VARIABLE = "GRUB_CMDLINE_"

# Parameters that can keep a node from booting, from reaching its network, or from running kubelet,
# each with why: kernel_args_denied.DANGEROUS.
# Names the kernel matches by their beginning (a __setup() handler registered without "="): any
# parameter whose name starts with one of these reaches that handler (noinitrdX turns the initrd off).
PREFIX_MATCHED = ("noinitrd",)


def canonical(name):
    """A parameter name as the kernel and systemd compare it: ``-`` and ``_`` are the same character."""
    return name.replace("-", "_")


def dangerous_name(name):
    """The DANGEROUS entry a parameter name reaches, or None: exact and case-sensitive, ``-`` read as
    ``_``, and by its beginning for the PREFIX_MATCHED names."""
    key = canonical(name)
    if key in DANGEROUS:
        return key
    for prefix in PREFIX_MATCHED:
        if key.startswith(prefix):
            return prefix
    return None


class KernelCmdlineError(ProblemsError):
    """A parameter or file that cannot be handled safely."""


def name_of(param):
    return param.split("=", 1)[0]


def check_params(params, what):
    """Every parameter that breaks the grammar, each with the rule and the fix."""
    problems = []
    for param in params or []:
        if not isinstance(param, str):
            problems.append("%s: %r is not a string; write each kernel parameter as name or name=value" % (what, param))
        elif len(param) > _MAX_LENGTH:
            problems.append("%s: %r... is %d characters long; numa.kube accepts at most %d per parameter"
                            % (what, param[:40], len(param), _MAX_LENGTH))
        elif not _PARAM.match(param):
            bad = sorted(set(c for c in param if not re.match(r"[A-Za-z0-9_.,:/+=@%\-]", c)))
            problems.append(
                "%s: %r is refused: a kernel parameter is name or name=value, the name of letters, digits, _ - . "
                "(not starting with - or .), the value of letters, digits and _ . , : / + = @ %% -%s. "
                "numa.kube writes it into a file the boot loader's tools run as shell, so anything else could "
                "run a command; fix the value or leave the parameter out"
                % (what, param, "; found %s" % " ".join(repr(c) for c in bad) if bad else ""))
    return problems


def check_allow(allow):
    """Problems with the allow list: parameter names only."""
    problems = []
    for name in allow or []:
        if not isinstance(name, str) or not re.match(r"^%s\Z" % _NAME, name):
            problems.append("allow: %r is not a kernel parameter name; list names such as 'init' or 'maxcpus' "
                            "(without =value)" % (name,))
    return problems


def check_dangerous(present, absent, allow=(), labels=("present", "absent")):
    """Every parameter of ``present`` or ``absent`` that can take a node away and is not allowed
    (names in ``allow`` compared as the kernel does, ``-`` as ``_``); ``labels`` name the two lists
    in the messages (a take-out puts back and takes out what a record says)."""
    allowed = set(canonical(name) for name in allow or [] if isinstance(name, str))
    problems = []
    for what, params in ((labels[0], present), (labels[1], absent)):
        for param in params or []:
            if not isinstance(param, str):
                continue
            name = name_of(param)
            key = dangerous_name(name)
            if key is None or key in allowed:
                continue
            if key == name:
                subject = name
            elif key == canonical(name):
                subject = "%s (the kernel and systemd read %s: - and _ are the same in a name)" % (key, name)
            else:
                subject = "%s (the kernel acts on every name that starts with %s)" % (key, key)
            problems.append(
                "%s: %r is refused: %s %s%s. If the node must have this, add %r to the allow option (role "
                "variable kernel_args_allow) and make sure someone can reach the node's console"
                % (what, param, subject, DANGEROUS[key],
                   "; removing it is as risky as setting it" if what == labels[1] else "", key))
    return problems


def check_variable(variable):
    """Problems with the name of the grub defaults variable to edit."""
    if not isinstance(variable, str) or not _IDENTIFIER.match(variable):
        return ["variable %r is refused: it must be a shell variable name (a letter or _ then letters, digits or _), "
                "since grub's tools source the grub defaults file as shell; use GRUB_CMDLINE_LINUX" % (variable,)]
    if not variable.startswith(_CMDLINE_VARIABLE):
        return ["variable %r is refused: numa.kube edits only grub's kernel command-line variables (%s...), such as "
                "GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT" % (variable, _CMDLINE_VARIABLE)]
    return []


def check_grub_default_path(path, lstat=os.lstat):
    """Problems with the grub defaults file's path: absolute, and a regular file when it exists
    (``lstat`` None checks the path's form only)."""
    if not isinstance(path, str) or not path or not os.path.isabs(path):
        return ["grub_default_path %r is refused: give the absolute path of the grub defaults file, such as "
                "/etc/default/grub" % (path,)]
    if os.path.normpath(path) != path:
        return ["grub_default_path %r is refused: write it without . or .. parts, doubled or trailing slashes (%s)"
                % (path, os.path.normpath(path))]
    if lstat is None:
        return []
    try:
        mode = lstat(path).st_mode
    except OSError:
        return []
    if stat.S_ISLNK(mode):
        return ["grub_default_path %s is a symbolic link; numa.kube replaces the file it edits, which would turn the "
                "link into a copy: give the path of the file it points to" % path]
    if not stat.S_ISREG(mode):
        return ["grub_default_path %s is not a regular file (a directory, device or socket); give the grub defaults "
                "file, such as /etc/default/grub" % path]
    return []


# Files grubby may write when it updates every kernel's arguments: the BLS entries, the command line
# new kernels get (/etc/kernel/cmdline), grub's environment block (kernelopts on RHEL 8), grub's
# defaults (RHEL 9 grubby keeps GRUB_CMDLINE_LINUX in step) and a grub.cfg that still holds the
# entries (before BLS). Symbolic links are followed: the file written is the one they point to.
GRUBBY_FILES = ("/etc/default/grub", "/etc/kernel/cmdline", "/boot/grub2/grubenv", "/boot/grub2/grub.cfg")
GRUBBY_GLOBS = ("/boot/loader/entries/*.conf", "/boot/efi/EFI/*/grubenv", "/boot/efi/EFI/*/grub.cfg")


def grubby_files(files=GRUBBY_FILES, globs=GRUBBY_GLOBS, root="/"):
    """The files (real paths, sorted) a grubby update may write; ``files`` are listed whether or not
    they exist (a rollback removes one that grubby created), ``globs`` only for what exists."""
    base = os.path.realpath(root)

    def real(inside):
        resolved = os.path.realpath(inside)
        return resolved if base == "/" else "/" + os.path.relpath(resolved, base)

    found = set(real(os.path.join(base, path.lstrip("/"))) for path in files)
    for pattern in globs:
        found.update(real(match) for match in glob.glob(os.path.join(base, pattern.lstrip("/"))) if os.path.isfile(match))
    return sorted(found)


_REPEATED_FIX = ("the kernel reads a repeated parameter in order (hugepagesz=1G hugepages=16 hugepagesz=2M "
                 "hugepages=512 makes a pool for each page size), so numa.kube cannot tell which occurrence to "
                 "change and changes none. Edit %s by hand, or leave %s out of present and absent (role variables "
                 "kernel_args_present, kernel_args_absent)")


def check_repeated(current, present=(), absent=(), where="the current command line"):
    """Every ``present`` or ``absent`` parameter that would replace or remove a name occurring more
    than once in ``current`` (``where`` says where that command line is, for the fix)."""
    problems = []
    for what, params in (("absent", absent), ("present", present)):
        for param in params or []:
            name = name_of(param)
            found = [p for p in current if name_of(p) == name]
            if len(found) < 2:
                continue
            if what == "absent":
                touched = any(_removes(param, p) for p in found)
            else:
                touched = "=" in param  # name=value replaces every occurrence; a bare name only adds itself
            if touched:
                problems.append("%s: %r is refused: %s occurs %d times in %s (%s); %s"
                                % (what, param, name, len(found), where, " ".join(found),
                                   _REPEATED_FIX % (where, name)))
    return problems


def check_repeated_wanted(present):
    """Problems with ``present`` naming one name with more than one value: each would replace the
    one before."""
    problems = []
    seen = {}
    for param in present or []:
        if isinstance(param, str) and "=" in param:
            seen.setdefault(name_of(param), []).append(param)
    for name, params in sorted(seen.items()):
        if len(set(params)) > 1:
            problems.append("present: %s is given %d times (%s), but numa.kube keeps one value per name and each "
                            "would replace the one before; write a repeated parameter, such as a huge page pool "
                            "for each page size, into the boot configuration by hand"
                            % (name, len(params), ", ".join(params)))
    return problems


def apply_params(current, present=(), absent=(), where="the current command line"):
    """Return the parameter list with ``present`` ensured and ``absent`` removed, order kept.

    Raises KernelCmdlineError when that would replace or remove a name occurring more than once."""
    problems = check_repeated(current, present, absent, where)
    if problems:
        raise KernelCmdlineError(problems)
    result = list(current)
    for param in absent:
        if "=" in param:
            result = [p for p in result if p != param]
        else:
            result = [p for p in result if name_of(p) != param]
    for param in present:
        name = name_of(param)
        if "=" in param:
            same = [i for i, p in enumerate(result) if name_of(p) == name]
            if same:
                result[same[0]] = param
                result = [p for i, p in enumerate(result) if i == same[0] or name_of(p) != name]
            else:
                result.append(param)
        elif param not in result:
            result.append(param)
    return result


def _removes(wanted_absent, param):
    return param == wanted_absent if "=" in wanted_absent else name_of(param) == wanted_absent


def satisfied(params, present=(), absent=()):
    """Whether a parameter list (e.g. /proc/cmdline) already has every ``present`` and no ``absent``."""
    return all(p in params for p in present) and not any(_removes(a, p) for a in absent for p in params)


_ASSIGNMENT = r"^(\s*(?:export\s+)?%s=)(.*)$"


def read_grub_variable(text, variable):
    """(line index, parameters) of ``variable`` in /etc/default/grub text; index None when absent."""
    pattern = re.compile(_ASSIGNMENT % re.escape(variable))
    found = None
    for index, line in enumerate((text or "").splitlines()):
        match = pattern.match(line)
        if match:
            found = (index, match.group(2))
    if found is None:
        return None, []
    index, raw = found
    try:
        words = shlex.split(raw, comments=True)
    except ValueError as exc:
        raise KernelCmdlineError("%s in the grub defaults cannot be read (%s): %s" % (variable, exc, raw))
    if len(words) > 1:
        raise KernelCmdlineError("%s=%s is not one quoted value; quote it like %s=\"a b\"" % (variable, raw, variable))
    if "$" in raw or "`" in raw:
        raise KernelCmdlineError("%s=%s refers to other variables or commands; numa.kube edits only plain values"
                                 % (variable, raw))
    params = words[0].split() if words else []
    unsafe = [p for p in params if _UNSAFE_EXISTING.search(p)]
    if unsafe:
        raise KernelCmdlineError("%s holds %s with quotes or backslashes, which numa.kube cannot write back safely; "
                                 "simplify that line by hand first" % (variable, ", ".join(repr(p) for p in unsafe)))
    return index, params


def plan_grub_default(text, variable, present=(), absent=(), where=None):
    """Return (new_text, old_params, new_params) for /etc/default/grub (``where`` names the variable
    and file in errors)."""
    problems = (check_variable(variable) + check_params(present, "present") + check_params(absent, "absent")
                + check_repeated_wanted(present))
    if problems:
        raise KernelCmdlineError(problems)
    index, params = read_grub_variable(text, variable)
    new_params = apply_params(params, present, absent, where=where or "%s in the grub defaults" % variable)
    if new_params == params:
        return text, params, new_params
    line = '%s="%s"' % (variable, " ".join(new_params))
    lines = (text or "").splitlines()
    if index is None:
        lines.append(line)
    else:
        prefix = re.match(_ASSIGNMENT % re.escape(variable), lines[index]).group(1)
        lines[index] = '%s"%s"' % (prefix, " ".join(new_params))
    return "\n".join(lines) + "\n", params, new_params


def parse_grubby_info(text):
    """``grubby --info=ALL`` output -> [{kernel, args}] (args as a list)."""
    entries = []
    current = None
    for line in (text or "").splitlines():
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key == "index":
            current = {"index": int(value) if value.isdigit() else value, "kernel": None, "args": []}
            entries.append(current)
        elif current is not None and key == "kernel":
            current["kernel"] = value
        elif current is not None and key == "args":
            current["args"] = value.split()
    return [e for e in entries if e["kernel"]]


# --- what numa.kube set, and taking it back out -----------------------------------------------------
#
# The record (kernel.json) keeps the parameters numa.kube ADDED - not on the command line before -
# and those it REMOVED, in the form they had. A parameter the node had already is never "added", so
# taking numa.kube back out never removes it. With grubby the kernels may differ: a parameter counts
# as added when no kernel had it before, as removed when some kernel had it and none has it after.

RECORD_METHODS = ("grub_default", "grubby")


def _ordered(lists):
    seen = []
    for params in lists:
        for param in params:
            if param not in seen:
                seen.append(param)
    return seen


def change_of(befores, afters):
    """(added, removed) between the command lines before and after a change (one list per kernel)."""
    before_any = _ordered(befores)
    after_any = _ordered(afters)
    added = [p for p in after_any if p not in before_any]
    removed = [p for p in before_any if p not in after_any]
    return added, removed


def merge_record(record, added, removed):
    """The record's (added, removed) after one more change: a parameter numa.kube removes that it
    had added is forgotten (the node never had it), one it puts back that it had removed too."""
    record = record or {}
    was_added = list(record.get("added") or [])
    was_removed = list(record.get("removed") or [])
    for param in removed:
        if param in was_added:
            was_added.remove(param)
        elif param not in was_removed:
            was_removed.append(param)
    for param in added:
        if param in was_removed:
            was_removed.remove(param)
        elif param not in was_added:
            was_added.append(param)
    return was_added, was_removed


def where_of(method, grub_default_path=None, variable=None):
    """Where a record's parameters live: grubby's kernels, or a variable in a grub defaults file."""
    if method == "grubby":
        return {"method": "grubby", "path": None, "variable": None}
    return {"method": "grub_default", "path": grub_default_path, "variable": variable}


def describe_where(where):
    if where.get("method") == "grubby":
        return "the kernels' arguments through grubby"
    return "%s in %s" % (where.get("variable"), where.get("path"))


def check_record(record, path):
    """Problems with a kernel.json read from ``path`` (version already checked): what is wrong, and
    what to do."""
    fix = ("numa.kube cannot tell what it set, so it takes nothing out. Put the file back as numa.kube wrote it "
           "(a copy, or the rollout record's), or remove it and take the parameters out by hand "
           "(kernel_args_absent)")
    if not isinstance(record, dict):
        return ["%s is damaged: it holds %s, not an object; %s" % (path, type(record).__name__, fix)]
    problems = []
    if record.get("method") not in RECORD_METHODS:
        problems.append("%s is damaged: method is %r, not one of %s"
                        % (path, record.get("method"), ", ".join(RECORD_METHODS)))
    elif record["method"] == "grub_default":
        if not isinstance(record.get("path"), str) or not isinstance(record.get("variable"), str):
            problems.append("%s is damaged: a grub_default record names the grub defaults file (path) and its "
                            "variable (variable) as strings" % path)
    for key in ("added", "removed"):
        value = record.get(key)
        if not isinstance(value, list):
            problems.append("%s is damaged: %s is %r, not a list of parameters" % (path, key, value))
            continue
        problems.extend("%s is damaged: %s" % (path, problem) for problem in check_params(value, key))
    if problems:
        problems[-1] = problems[-1] + "; " + fix
    return problems


def check_record_where(record, where, path):
    """A problem when the record was written for another place than this run changes."""
    recorded = dict((key, record.get(key)) for key in ("method", "path", "variable"))
    if recorded == where:
        return []
    return ["%s records parameters numa.kube set in %s, but this run works on %s; run with the same "
            "kernel_args_method and kernel_args_grub_default_path as the change was made with"
            % (path, describe_where(recorded), describe_where(where))]


def plan_withdraw(currents, added, removed):
    """What taking numa.kube back out does to the command lines ``currents`` (one list per kernel).

    Returns (remove, restore, notes): the parameters to take out (exactly as numa.kube set them), those
    to put back (as they were) and a note for each parameter left alone, with why. A parameter is left
    alone when the command line no longer has it as numa.kube set it (changed since), when its name
    occurs more than once there (which occurrence is meant cannot be told), and a removed one is not
    put back where the command line has that name again in another form."""
    remove, restore, notes = [], [], []
    for param in added:
        name = name_of(param)
        forms = _ordered([[p for p in current if name_of(p) == name] for current in currents])
        counts = [len([p for p in current if name_of(p) == name]) for current in currents]
        if not forms:
            notes.append("%s, which numa.kube added, is no longer there: nothing to take out" % param)
        elif forms != [param]:
            notes.append("%s, which numa.kube added, is now %s: left as it is (changed since numa.kube set it)"
                         % (param, " ".join(forms)))
        elif max(counts) > 1:
            notes.append("%s, which numa.kube added, occurs more than once now: left as it is, since which one "
                         "numa.kube set cannot be told" % param)
        else:
            remove.append(param)
    remaining = [[p for p in current if p not in remove] for current in currents]
    for param in removed:
        name = name_of(param)
        forms = _ordered([[p for p in current if name_of(p) == name] for current in remaining])
        if forms == [param]:
            continue  # back already
        if forms:
            notes.append("%s, which numa.kube removed, is not put back: the command line has %s now (set since)"
                         % (param, " ".join(forms)))
        elif [p for p in removed if name_of(p) == name and p != param]:
            notes.append("%s, which numa.kube removed, is not put back: numa.kube removed %s more than once "
                         "(%s) and which one comes back cannot be told; put them back by hand"
                         % (param, name, " ".join(p for p in removed if name_of(p) == name)))
        else:
            restore.append(param)
    return remove, restore, notes
