# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A kernel command-line change booted once on trial before it becomes the default.

The trial is a menu entry of its own, written as a grub.d script that prints it: a copy of the
entry grub boots by default (the first of grub.cfg) whose ``linux`` line carries the new command
line, plus what brings the node back by itself: ``panic=<seconds>`` (the kernel, and Debian's
initramfs, reboot instead of stopping) and systemd's runtime watchdog (``systemd.watchdog_sec``,
with ``modules-load=softdog`` where the node has no watchdog device), so a hang reboots too.
``grub-reboot`` names it in grub's environment block (``next_entry``), which grub clears as it boots
it: whatever happens in that boot, the next one is the default again, the previous command line.
Only after the node proves healthy on the trial does the change reach the grub defaults.

That holds only where grub can write its environment block at boot. Where it cannot (``/boot/grub``
on LVM or another disk filter such as md-RAID, encrypted, or on a file system grub cannot write),
``next_entry`` would stay set and every boot would be a trial: refused (grub's own 00_header makes
the same test before it relies on ``save_env``).

Pure functions over texts the module reads (grub.cfg, grub-probe's answers, /proc/cmdline).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import apply_params, name_of, plan_grub_default

ENTRY_ID = "numa-kube-trial"
ENTRY_PATH = "/etc/grub.d/45_numa_kube_trial"
# on the trial's command line only: tells a trial boot from any other (a parameter with a dot is a
# module's, which the kernel keeps from init and ignores when no such module exists)
MARKER = "numa_kube.trial=1"
# what grub-probe answers for the folder of grub's environment block where grub cannot write it
# (--target=abstraction; --target=fs): as grub's 00_header tests before it relies on save_env, and
# the encrypted disks, which grub reads but never writes
UNWRITABLE_ABSTRACTIONS = ("diskfilter", "lvm", "cryptodisk", "luks", "luks2", "geli")
UNWRITABLE_FS = ("btrfs", "cpiofs", "newc", "odc", "romfs", "squash4", "tarfs", "zfs")
# the parameters the trial adds, which the user's own list may not hold as well
TRIAL_NAMES = ("panic", "systemd.watchdog_sec", "modules-load", "numa_kube.trial")
_TRIAL_KEYS = set(name.replace("-", "_") for name in TRIAL_NAMES)
# grub variables an entry may pass on, which grub.cfg sets before the entries (Ubuntu's 10_linux
# sets vt_handoff for GRUB_CMDLINE_LINUX_DEFAULT's splash); the trial entry copies them as they are
_GRUB_VARIABLES = ("$vt_handoff",)

_MENUENTRY = re.compile(r"^menuentry\s")
_LINUX = re.compile(r"^(\s*)(linux|linuxefi|linux16)(\s+)(\S+)(.*)$")
_DEFAULT = re.compile(r"^\s*set\s+default=[\"']?([^\"'\s]*)[\"']?\s*$")
# what an argument copied from the default entry may hold: grub's own quoting or variables in it
# would change meaning in a line numa.kube writes
_PLAIN_ARGUMENT = re.compile(r"^[^\"'\\$`;{}|&<>]+\Z")


class KernelTrialError(ProblemsError):
    """A trial boot that cannot be made safe on this node."""


def grubenv_values(text):
    """grub's environment block (``grub-editenv list`` or the file itself) as {name: value}."""
    return dict(line.split("=", 1) for line in (text or "").splitlines() if "=" in line and not line.startswith("#"))


def default_entry(grub_cfg, grubenv=""):
    """(lines of the first top-level menu entry, its kernel path, its arguments) of grub.cfg's text.

    The first entry is the one grub boots with ``set default="0"`` (or ``saved`` with nothing saved
    yet): the previous command line."""
    problems = []
    lines = (grub_cfg or "").splitlines()
    defaults = [match.group(1) for match in (_DEFAULT.match(line) for line in lines) if match]
    # 00_header writes 'set default="${next_entry}"' for a one-time boot and then the default proper
    chosen = [value for value in defaults if value != "${next_entry}"]
    default = chosen[-1] if chosen else "0"
    env = grubenv_values(grubenv)
    if default == "${saved_entry}":
        default = env.get("saved_entry") or "0"
    if default != "0":
        problems.append('grub boots entry %r by default, not the first of grub.cfg; the trial boots a copy of the first '
                        'entry and could not tell the previous command line. Set GRUB_DEFAULT=0 in /etc/default/grub '
                        '(or grub-set-default 0) and run update-grub, or set kernel_args_trial: false' % default)
    # numa.kube's own one-time choice is what an interrupted run left: the rollout's recover puts the
    # environment block back before the change is made again
    if env.get("next_entry") and env["next_entry"] != ENTRY_ID:
        problems.append("grub's environment block already names a one-time boot (next_entry=%s): a trial would replace "
                        "it. Boot it or clear it first (grub-editenv <grubenv> unset next_entry)" % env["next_entry"])
    blocks = entries(lines)
    if not blocks:
        raise KernelTrialError(problems + ["grub.cfg has no top-level menuentry to copy (a BLS or blscfg menu?); the "
                                           "trial is made for grub menus that update-grub or grub-mkconfig write; set "
                                           "kernel_args_trial: false to change the default directly"])
    block = blocks[0]
    try:
        kernel, args = linux_of(block)
    except KernelTrialError as exc:
        raise KernelTrialError(problems + exc.problems)
    odd = [arg for arg in args if not _PLAIN_ARGUMENT.match(arg) and arg not in _GRUB_VARIABLES]
    if odd:
        problems.append("the default entry's command line holds %s, with quotes or grub variables numa.kube cannot copy "
                        "safely; simplify GRUB_CMDLINE_LINUX by hand first, or set kernel_args_trial: false"
                        % ", ".join(repr(arg) for arg in odd))
    if problems:
        raise KernelTrialError(problems)
    return block, kernel, args


def entries(lines):
    """The top-level menu entries of grub.cfg's lines, each as its lines (submenus are left out)."""
    found, index = [], 0
    while index < len(lines):
        if _MENUENTRY.match(lines[index]):
            depth = 0
            for end in range(index, len(lines)):
                depth += lines[end].count("{") - lines[end].count("}")
                if depth == 0:
                    found.append(lines[index:end + 1])
                    index = end
                    break
            else:
                raise KernelTrialError("grub.cfg's menuentry at line %d never closes" % (index + 1))
        index += 1
    return found


def linux_of(block):
    """(kernel path, arguments) of a menu entry's one linux line."""
    found = [match for match in (_LINUX.match(line) for line in block) if match]
    if len(found) != 1:
        raise KernelTrialError("grub.cfg's menuentry %r has %d linux lines, not one: cannot tell its command line"
                               % (block[0][:80], len(found)))
    return found[0].group(4), found[0].group(5).split()


def replace_run(previous, before, after):
    """``previous`` (the default entry's arguments) with the run of grub-defaults parameters ``before``
    (GRUB_CMDLINE_LINUX as it is) replaced by ``after`` (as it will be), where update-grub puts them:
    after ``root=... ro`` and before GRUB_CMDLINE_LINUX_DEFAULT. None when grub.cfg does not hold
    that run (it was generated from other defaults)."""
    base = next((index + 1 for index, arg in enumerate(previous) if arg in ("ro", "rw")), None)
    starts = [base] if base is not None else []
    if before:
        starts += [index for index in range(len(previous)) if index != base]
    for start in starts:
        if previous[start:start + len(before)] == list(before):
            return previous[:start] + list(after) + previous[start + len(before):]
    return None


def running_args(cmdline):
    """The running kernel's arguments as grub passed them: without BOOT_IMAGE= and, on a boot of a trial
    entry, without the trial's own parameters."""
    words = [word for word in (cmdline or "").split() if not word.startswith("BOOT_IMAGE=")]
    if MARKER in words:
        words = [word for word in words if name_of(word).replace("-", "_") not in _TRIAL_KEYS]
    return words


def trial_args(previous, present, absent, panic_seconds, watchdog_seconds, softdog, linux=None):
    """The trial's command line: the previous one as it will be (``linux``: GRUB_CMDLINE_LINUX before
    and after the change, put where update-grub puts it; without it, ``present`` ensured and
    ``absent`` removed in place), then what brings the node back by itself."""
    clash = sorted(set(name_of(param).replace("-", "_") for param in list(present) + list(absent)) & _TRIAL_KEYS)
    if clash:
        raise KernelTrialError("%s: the trial boot sets these itself (panic=, its watchdog, its marker), so a change "
                               "that sets or removes them cannot be booted on trial; set kernel_args_trial: false for it"
                               % ", ".join(clash))
    if linux is None:
        wanted = apply_params(previous, present, absent, where="the default entry of grub.cfg")
    else:
        wanted = replace_run(previous, linux[0], linux[1])
        if wanted is None:
            raise KernelTrialError("grub.cfg's default entry (%s) does not hold GRUB_CMDLINE_LINUX as the grub defaults "
                                   "have it (%s): grub.cfg was made from other defaults. Run update-grub and reboot onto "
                                   "it first, or set kernel_args_trial: false"
                                   % (" ".join(previous), " ".join(linux[0]) or "empty"))
    extra = ["panic=%d" % panic_seconds]
    if watchdog_seconds:
        extra.append("systemd.watchdog_sec=%d" % watchdog_seconds)
        if softdog:
            extra.append("modules-load=softdog")
    return wanted, wanted + extra + [MARKER]


def entry_script(block, kernel, args):
    """The grub.d script that prints the trial entry: ``block`` (default_entry's lines) with its first
    line replaced by the trial's own (the default's title after ``numa.kube trial:``, the trial's id)
    and its linux line by the trial's arguments."""
    body = []
    for line in block[1:]:
        match = _LINUX.match(line)
        body.append("%s%s%s%s %s" % (match.group(1), match.group(2), match.group(3), kernel, " ".join(args))
                    if match else line)
    title = re.match(r"^menuentry\s+'([^']*)'", block[0])
    safe_title = re.sub(r"[^A-Za-z0-9 ._:,()/+-]", "", title.group(1) if title else "")[:120] or "the new command line"
    text = ["#!/bin/sh",
            "# numa.kube: the trial entry of a kernel command-line change, booted once by grub-reboot and",
            "# removed when the change is kept or undone. Written by numa.kube's kernel_args role; do not edit.",
            'exec tail -n +5 "$0"',
            "menuentry 'numa.kube trial: %s' --id %s {" % (safe_title, ENTRY_ID)]
    return "\n".join(text + body) + "\n"


def check_grub_probe(abstractions, fs, folder):
    """The reason a trial cannot be made safe, from grub-probe's answers for ``folder``, or None."""
    bad = sorted(set((abstractions or "").split()) & set(UNWRITABLE_ABSTRACTIONS))
    if bad:
        return ("%s lies on %s, where grub cannot write its environment block at boot: the trial's next_entry would "
                "never be cleared and every boot would be a trial. Set kernel_args_trial: false to change the default "
                "entry directly (no fallback), or keep /boot on a plain partition" % (folder, " and ".join(bad)))
    if (fs or "").strip() in UNWRITABLE_FS:
        return ("%s is on %s, which grub cannot write at boot: the trial's next_entry would never be cleared and every "
                "boot would be a trial. Set kernel_args_trial: false to change the default entry directly (no "
                "fallback), or keep /boot on a file system grub writes (ext4, xfs, vfat)" % (folder, fs.strip()))
    return None


def booted(cmdline):
    """``trial`` when the running kernel was booted from the trial entry, else ``previous``."""
    return "trial" if MARKER in (cmdline or "").split() else "previous"


def shown(cmdline):
    """A command line as the report shows it: without grub's BOOT_IMAGE= and the trial's marker."""
    words = cmdline.split() if isinstance(cmdline, str) else list(cmdline or [])
    return " ".join(word for word in words if not word.startswith("BOOT_IMAGE=") and word != MARKER)


def trial_entries(grub_cfg):
    """The top-level menu entries of grub.cfg that carry the trial's id."""
    return [block for block in entries((grub_cfg or "").splitlines())
            if re.search(r"--id\s+['\"]?%s\b" % ENTRY_ID, block[0])]


def check_staged(grub_cfg, grubenv, previous, trial):
    """Problems with grub.cfg regenerated with the trial entry, before grub is told to boot it: the
    default entry unchanged (what the node falls back to) and the trial entry booting ``trial``."""
    problems = []
    try:
        args = default_entry(grub_cfg, grubenv)[2]
    except KernelTrialError as exc:
        return exc.problems
    if args != list(previous):
        problems.append("grub.cfg regenerated with the trial entry boots %r by default, not the %r planned: the node "
                        "would fall back to a command line it never ran" % (" ".join(args), " ".join(previous)))
    found = trial_entries(grub_cfg)
    if len(found) != 1:
        problems.append("grub.cfg regenerated holds %d trial entries (id %s), not one: is %s executable?"
                        % (len(found), ENTRY_ID, ENTRY_PATH))
    elif linux_of(found[0])[1] != list(trial):
        booting = " ".join(linux_of(found[0])[1])
        problems.append("grub.cfg's trial entry boots %r, not the %r planned" % (booting, " ".join(trial)))
    return problems


def check_committed(grub_cfg, grubenv, wanted):
    """Problems with grub.cfg once the change is kept: its default entry must boot ``wanted`` (what
    the trial booted, without the trial's own parameters) and the trial entry must be gone."""
    problems = []
    try:
        args = default_entry(grub_cfg, grubenv)[2]
    except KernelTrialError as exc:
        return exc.problems
    if args != list(wanted):
        problems.append("grub.cfg's default entry boots %r, not the %r the trial booted (was grub.cfg older than "
                        "/etc/default/grub?); the change is undone" % (" ".join(args), " ".join(wanted)))
    if trial_entries(grub_cfg):
        problems.append("grub.cfg still holds the trial entry %s after it was taken out of %s" % (ENTRY_ID, ENTRY_PATH))
    return problems


# --- on the node (the kernel_args_trial module) ---------------------------------------------------

GRUB_CFG_PATHS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _read(path, what):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        raise KernelTrialError("%s (%s) cannot be read: %s" % (what, path, exc))


def _grub_cfg_path(module):
    path = module.params["grub_cfg_path"]
    if path:
        return path
    return next((candidate for candidate in GRUB_CFG_PATHS if os.path.exists(candidate)), GRUB_CFG_PATHS[0])


def _reboot_command(module):
    return (module.params["grub_reboot"] or module.get_bin_path("grub-reboot")
            or module.get_bin_path("grub2-reboot"))


def _grubenv_path(module, reboot):
    """Where grub-reboot writes the one-time choice: its boot folder's grub (or grub2) folder, whatever
    grub.cfg is read."""
    if module.params["grubenv_path"]:
        return module.params["grubenv_path"]
    return "/boot/grub2/grubenv" if reboot and os.path.basename(reboot).startswith("grub2-") else "/boot/grub/grubenv"


def _grubenv(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""  # grub-editenv makes it; an absent block holds no default and no one-time boot


def _probe(module, folder):
    """grub-probe's abstraction and fs for ``folder``; the refusal it leads to, or None."""
    probe = module.get_bin_path("grub-probe") or module.get_bin_path("grub2-probe")
    if not probe:
        raise KernelTrialError("neither grub-probe nor grub2-probe is installed: cannot tell whether grub can write its "
                               "environment block; install grub's tools or set kernel_args_trial: false")
    answers = []
    for target in ("abstraction", "fs"):
        rc, out, err = module.run_command([probe, "--target=%s" % target, folder])
        if rc != 0:
            raise KernelTrialError("%s --target=%s %s failed: %s" % (probe, target, folder, (err or out).strip()))
        answers.append(out.strip())
    return check_grub_probe(answers[0], answers[1], folder)


def _grub_linux(module, present, absent):
    """GRUB_CMDLINE_LINUX in the grub defaults as it is and as the change will write it."""
    params = module.params
    text = _read(params["grub_default_path"], "the grub defaults")
    _new_text, before, after = plan_grub_default(text, params["variable"], present, absent)
    return before, after


def plan_on_node(module):
    params = module.params
    if params["method"] != "grub_default":
        raise KernelTrialError("the trial boot is made for grub menus that update-grub or grub-mkconfig write "
                               "(method grub_default); this node's kernel parameters go through %s, for which it is "
                               "not built yet: set kernel_args_trial: false to change the default entry directly"
                               % params["method"])
    reboot = _reboot_command(module)
    if not reboot:
        raise KernelTrialError("neither grub-reboot nor grub2-reboot is installed: the trial cannot be booted once; "
                               "install grub's tools or set kernel_args_trial: false")
    cfg_path = _grub_cfg_path(module)
    env_path = _grubenv_path(module, reboot)
    refusal = _probe(module, os.path.dirname(env_path)) if params["probe"] else None
    if refusal:
        raise KernelTrialError(refusal)
    block, kernel, previous = default_entry(_read(cfg_path, "grub.cfg"), _grubenv(env_path))
    running = running_args(_read(params["proc_cmdline_path"], "the running kernel's command line"))
    if running != previous:
        raise KernelTrialError("the node runs %r, not the %r grub boots by default: a trial that fell back would boot a "
                               "command line this node has not run. Reboot onto the default first (or bring grub.cfg "
                               "back to what runs), or set kernel_args_trial: false"
                               % (" ".join(running), " ".join(previous)))
    softdog = not (os.path.isdir(params["watchdog_sysfs"]) and os.listdir(params["watchdog_sysfs"]))
    wanted, trial = trial_args(previous, params["present"], params["absent"], params["panic_seconds"],
                               params["watchdog_seconds"], softdog,
                               linux=_grub_linux(module, params["present"], params["absent"]))
    return dict(grub_cfg=cfg_path, grubenv=env_path, previous=previous, wanted=wanted, trial=trial,
                entry_path=params["entry_path"], entry_id=ENTRY_ID,
                entry_text=entry_script(block, kernel, trial), reboot_command=[reboot, ENTRY_ID], softdog=softdog)


def booted_on_node(module):
    running = _read(module.params["proc_cmdline_path"], "the running kernel's command line")
    return dict(booted=booted(running), running=shown(running), boot_id=_read(BOOT_ID, "the boot id").strip())


def staged_on_node(module):
    cfg_path = _grub_cfg_path(module)
    problems = check_staged(_read(cfg_path, "grub.cfg"), "", module.params["previous"], module.params["trial"])
    if problems:
        raise KernelTrialError(problems)
    return dict(grub_cfg=cfg_path)


def committed_on_node(module):
    cfg_path = _grub_cfg_path(module)
    problems = check_committed(_read(cfg_path, "grub.cfg"), "", module.params["wanted"])
    if problems:
        raise KernelTrialError(problems)
    return dict(grub_cfg=cfg_path, default=list(module.params["wanted"]))


def run(module):
    """The module's result for its state (every state only reads the node)."""
    for name in ("panic_seconds", "watchdog_seconds"):
        value = module.params[name]
        low = 1 if name == "panic_seconds" else 0
        if not low <= value <= 3600:
            raise KernelTrialError("%s: %d must be from %d to 3600 seconds" % (name, value, low))
    state = module.params["state"]
    result = {"plan": plan_on_node, "booted": booted_on_node, "staged": staged_on_node,
              "committed": committed_on_node}[state](module)
    return dict(result, changed=False)
