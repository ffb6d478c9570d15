# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command-line parameters: wanted present or absent, in /etc/default/grub or through grubby.

A parameter is ``name`` or ``name=value``. Present ``name=value`` replaces another value of the same
name; present ``name`` adds the bare flag. Absent ``name`` removes every ``name`` and ``name=...``;
absent ``name=value`` removes only that exact pair. grub.cfg is never edited: the caller
regenerates it (update-grub, grub2-mkconfig) or lets grubby update the boot entries.

Parameters that can take a node away (another init, another root, fewer CPUs or less memory, a
rescue target, blacklisted drivers...) are refused, added or removed, unless the caller names them
in an allow list: see DANGEROUS.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re
import shlex
import stat

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
# The grub defaults variable numa.kube writes: a shell identifier (the file is sourced as shell),
# and one of grub's kernel command-line variables (GRUB_CMDLINE_LINUX, ..._DEFAULT, ..._XEN...).
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_CMDLINE_VARIABLE = "GRUB_CMDLINE_"

# Parameters that can keep a node from booting, from reaching its network, or from running
# kubelet, each with why. Adding, changing or removing one needs its name in the allow list.
# Deliberately not here: isolcpus, nohz_full, rcu_nocbs, irqaffinity, hugepages (NUMA tuning this
# collection exists for), console (where boot messages go: a wrong one loses a log, not the node).
_ROOT = ("names the root file system or how the initramfs assembles it; a wrong or missing value stops the boot "
         "before anything runs, SSH included")
_PID1 = ("replaces the first program the kernel starts (systemd); a wrong one leaves the node without kubelet, "
         "SSH or any way back but its console")
_CPUS = ("limits the CPUs the kernel brings up; the node comes back with fewer CPUs than kubelet's CPU Manager "
         "state and reservations were planned for, and kubelet refuses to start on that state")
_MEMORY = ("limits or reshapes the memory the kernel uses; a wrong value leaves too little for kubelet's "
           "reservations and pods, or for the boot itself")
_RESCUE = ("boots into a rescue or emergency mode (or stops in the initramfs) instead of the normal target: no "
           "kubelet and usually no network")
_DRIVERS = ("keeps kernel modules from loading; a storage or network driver on the list leaves the node without "
            "its disk or its network")
DANGEROUS = {
    "init": _PID1,
    "rdinit": _PID1,
    "root": _ROOT,
    "rootflags": _ROOT,
    "rootfstype": _ROOT,
    "initrd": _ROOT,
    "rd.lvm.lv": _ROOT,
    "rd.lvm.vg": _ROOT,
    "rd.luks.uuid": _ROOT,
    "rd.luks.name": _ROOT,
    "rd.md.uuid": _ROOT,
    "rd.dm.uuid": _ROOT,
    "mem": _MEMORY,
    "memmap": _MEMORY,
    "maxcpus": _CPUS,
    "nr_cpus": _CPUS,
    "possible_cpus": _CPUS,
    "nosmp": _CPUS,
    "panic": ("decides whether the node restarts by itself after a kernel panic (0 waits forever); changing it "
              "changes whether a node that fails comes back without someone at its console"),
    "module_blacklist": _DRIVERS,
    "modprobe.blacklist": _DRIVERS,
    "rd.driver.blacklist": _DRIVERS,
    "systemd.unit": _RESCUE,
    "rd.systemd.unit": _RESCUE,
    "rd.break": _RESCUE,
    "rd.emergency": _RESCUE,
    "single": _RESCUE,
    "s": _RESCUE,
    "S": _RESCUE,
    "1": _RESCUE,
    "emergency": _RESCUE,
    "rescue": _RESCUE,
    "systemd.debug_shell": "gives anyone at a console a root shell without a password",
}


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


def check_dangerous(present, absent, allow=()):
    """Every parameter of ``present`` or ``absent`` that can take a node away and is not allowed."""
    allowed = set(allow or [])
    problems = []
    for what, params in (("present", present), ("absent", absent)):
        for param in params or []:
            if not isinstance(param, str):
                continue
            name = name_of(param)
            if name in DANGEROUS and name not in allowed:
                problems.append(
                    "%s: %r is refused: %s %s%s. If the node must have this, add %r to the allow option (role "
                    "variable kernel_args_allow) and make sure someone can reach the node's console"
                    % (what, param, name, DANGEROUS[name],
                       "; removing it is as risky as setting it" if what == "absent" else "", name))
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
    problems = check_variable(variable) + check_params(present, "present") + check_params(absent, "absent")
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
