# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command-line parameters: wanted present or absent, in /etc/default/grub or through grubby.

A parameter is ``name`` or ``name=value``. Present ``name=value`` replaces another value of the same
name; present ``name`` adds the bare flag. Absent ``name`` removes every ``name`` and ``name=...``;
absent ``name=value`` removes only that exact pair. grub.cfg is never edited: the caller
regenerates it (update-grub, grub2-mkconfig) or lets grubby update the boot entries.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

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


def apply_params(current, present=(), absent=()):
    """Return the parameter list with ``present`` ensured and ``absent`` removed, order kept."""
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


def plan_grub_default(text, variable, present=(), absent=()):
    """Return (new_text, old_params, new_params) for /etc/default/grub."""
    problems = check_params(present, "present") + check_params(absent, "absent")
    if problems:
        raise KernelCmdlineError(problems)
    index, params = read_grub_variable(text, variable)
    new_params = apply_params(params, present, absent)
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
