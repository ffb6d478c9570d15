# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns a node's rollout record, and who the run asking is.

A node's record (see ``rollout``) belongs to the run that opened it: its ``run_id``, controller,
user and the controller process (pid and start time). The owner refreshes a heartbeat with every
change it makes; it keeps the record for ``lease`` seconds after the last one. Another run may
change the record only when it has no owner, when that lease has run out, or when it names the
owner in ``take_over`` (it established the owner is gone) or passes ``*`` (the operator's force).

The controller side finds its own identity from ``/proc``: lookups run in a worker forked from
the ``ansible-playbook`` process, whose command line the worker shares, so the main process is the
topmost of the chain of ancestors running that same command line. Without a ``/proc`` of its own
(another operating system, or a ``/proc`` of another pid namespace) the main process is the one
that started the worker through ``multiprocessing`` and its start time comes from ``ps``. The
identity also names the controller's boot and pid namespace, so that a run is judged gone only from
the very machine and namespace where it ran. Everything here but ``ps_start`` is pure: the
functions that read ``/proc`` take its location, and the rules take the clock as an argument.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import getpass
import math
import os
import socket
import subprocess
import time

LEASE_DEFAULT = 3600
LEASE_MIN = 60
LEASE_MAX = 86400
TAKE_OVER_ANY = "*"
OWNER_KEYS = ("run_id", "controller", "user", "pid", "pid_start", "boot_id", "pid_ns")
# a heartbeat this far ahead of the node's clock means the clock went back: the lease counts as run out
CLOCK_SLACK = 300
# times in a record are epoch seconds from 1970 to the end of year 9999 (what time.gmtime can show)
TIME_MAX = 253402300799
# the longest text accepted in an owner field: identities are short, a record is not a dump
MAX_FIELD = 256
# programs whose process is a run's main process (python -m ansible <command> counts too)
ANSIBLE_PROGRAMS = ("ansible-playbook", "ansible", "ansible-console")
PROC = "/proc"


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_time(value):
    """Whether ``value`` is a finite time in epoch seconds a record can hold (not NaN, not infinite,
    not before 1970 nor after year 9999)."""
    return is_number(value) and math.isfinite(value) and 0 <= value <= TIME_MAX


# checks of the module's options -------------------------------------------------------------------

def owner_problems(owner):
    """What is wrong with an ``owner`` option (None is no owner: nothing wrong)."""
    if owner is None:
        return []
    if not isinstance(owner, dict):
        return ["owner must be a mapping with run_id, controller, user, pid, pid_start, boot_id and pid_ns, not %r; "
                "pass lookup('numa.kube.rollout_owner')" % (owner,)]
    problems = []
    unknown = sorted(set(owner) - set(OWNER_KEYS))
    if unknown:
        problems.append("owner has unknown keys %s; it takes only %s" % (", ".join(unknown), ", ".join(OWNER_KEYS)))
    run_id = owner.get("run_id")
    if not isinstance(run_id, str) or not run_id.strip():
        problems.append("owner.run_id %r must be a non-empty string naming the run (lookup('numa.kube.rollout_owner') "
                        "gives one)" % (run_id,))
    for key in ("run_id", "controller", "user", "pid_start", "boot_id"):
        value = owner.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_FIELD):
            problems.append("owner.%s %r must be a string of at most %d characters" % (key, value, MAX_FIELD))
    pid = owner.get("pid")
    if pid is not None and (not is_int(pid) or pid < 1):
        problems.append("owner.pid %r must be a process id (an integer of 1 or more)" % (pid,))
    pid_ns = owner.get("pid_ns")
    if pid_ns is not None and (not is_int(pid_ns) or pid_ns < 1):
        problems.append("owner.pid_ns %r must be the inode number of a pid namespace (an integer of 1 or more, "
                        "as lookup('numa.kube.rollout_owner') gives it)" % (pid_ns,))
    return problems


def lease_problems(lease):
    if not is_int(lease) or not LEASE_MIN <= lease <= LEASE_MAX:
        return ["lease %r must be a whole number of seconds from %d to %d: how long a run keeps the node's record "
                "without a heartbeat" % (lease, LEASE_MIN, LEASE_MAX)]
    return []


def take_over_problems(take_over):
    if not isinstance(take_over, str) or len(take_over) > MAX_FIELD:
        return ["take_over %r must be the run_id of the record's owner (a string of at most %d characters) or '*'"
                % (take_over, MAX_FIELD)]
    return []


def clean_owner(owner):
    """The owner option without unset keys (Ansible fills missing sub-options with None)."""
    if not owner or not isinstance(owner, dict):
        return owner or None
    return dict((key, value) for key, value in owner.items() if value is not None)


# the rules ----------------------------------------------------------------------------------------

def age(owner, now):
    """Whole seconds since the owner's heartbeat (0 when the node's clock went back), None without owner
    or without a usable heartbeat."""
    if not owner or not is_time(owner.get("heartbeat")) or not is_time(now):
        return None
    return max(0, int(now - owner["heartbeat"]))


def ahead(owner, now):
    """Whole seconds the owner's heartbeat is ahead of ``now`` beyond CLOCK_SLACK (the node's clock went
    back since it was written), else 0."""
    if not owner or not is_time(owner.get("heartbeat")) or not is_time(now):
        return 0
    beyond = int(owner["heartbeat"] - now)
    return beyond if beyond > CLOCK_SLACK else 0


def owner_lease(owner, default=LEASE_DEFAULT):
    lease = (owner or {}).get("lease")
    return lease if is_int(lease) else default


def expired(owner, now, default_lease=LEASE_DEFAULT):
    """Whether a record with this owner is free: no owner, or no heartbeat within the owner's lease."""
    if not owner or not owner.get("run_id"):
        return True
    if ahead(owner, now):
        return True  # a clock that went back would otherwise keep the record owned for as long as it went back
    heard = age(owner, now)
    return heard is None or heard > owner_lease(owner, default_lease)


def describe_owner(owner):
    """'run R (user@controller, pid P)' with what is known."""
    if not owner:
        return "no run"
    where = owner.get("controller") or "unknown controller"
    if owner.get("user"):
        where = "%s@%s" % (owner["user"], where)
    if owner.get("pid"):
        where = "%s, pid %s" % (where, owner["pid"])
    return "run %s (%s)" % (owner.get("run_id"), where)


def record(owner, lease, now):
    """The owner as the record keeps it: the caller's identity, its lease and a fresh heartbeat."""
    if not owner:
        return {}
    return dict(clean_owner(owner), heartbeat=int(now), lease=lease)


def claim(current, caller, lease, take_over, now, folder):
    """Decide whether ``caller`` may change a record owned by ``current``.

    Returns ``(owner, replaced, refusal)``: the owner to record (with a fresh heartbeat; ``{}``
    when the caller has no identity), the owner it replaces (None when it was the caller itself or
    nobody) and, when the change is not allowed, a message naming the owner (the other two are then
    None). ``current`` and ``caller`` may be empty.
    """
    caller = clean_owner(caller)
    mine = record(caller, lease, now)
    if not current or not current.get("run_id"):
        return mine, None, None
    if caller and caller["run_id"] == current["run_id"]:
        return mine, None, None
    if expired(current, now, lease) or take_over == TAKE_OVER_ANY or (take_over and take_over == current["run_id"]):
        return mine, current, None
    heard = age(current, now)
    text = ("node record %s belongs to %s, last heard from %s s ago (lease %d s): another numa.kube run is changing "
            "this node. Wait for it; if that run is gone, run again with take_over set to its run id or '*' "
            "(rollout_force=true in the numa.kube.rollout role)"
            % (folder, describe_owner(current), "?" if heard is None else heard, owner_lease(current, lease)))
    if take_over:
        text += "; take_over names run %s, which is not the owner" % take_over
    return None, None, text


# who this run is (controller side) ----------------------------------------------------------------

def parse_stat(text):
    """``{pid, ppid, start}`` from the text of /proc/<pid>/stat (start: field 22, clock ticks after boot)."""
    try:
        head, tail = text.rsplit(")", 1)
        pid = int(head.split("(", 1)[0])
        fields = tail.split()
        return {"pid": pid, "ppid": int(fields[1]), "start": fields[19]}
    except (ValueError, IndexError):
        return None


def read_stat(pid, proc=PROC):
    try:
        with open(os.path.join(proc, str(int(pid)), "stat"), "rb") as handle:
            return parse_stat(handle.read().decode("utf-8", "surrogateescape"))
    except (IOError, OSError, ValueError):
        return None


def read_cmdline(pid, proc=PROC):
    try:
        with open(os.path.join(proc, str(int(pid)), "cmdline"), "rb") as handle:
            raw = handle.read()
    except (IOError, OSError, ValueError):
        return None
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")[:-1 if raw.endswith(b"\0") else None]]


def is_ansible(argv):
    """Whether a command line runs an Ansible program (python <path>/ansible-playbook, python -m ansible ...)."""
    if not argv:
        return False
    head = list(argv[:3])
    if any(os.path.basename(part) in ANSIBLE_PROGRAMS for part in head):
        return True
    return any(head[i] == "-m" and head[i + 1] == "ansible" for i in range(len(head) - 1))


def main_process(pid, cmdline_of, stat_of, depth=64):
    """The pid of the run's main process seen from ``pid``.

    The nearest ancestor-or-self that runs an Ansible program, then up through parents running the
    very same command line (workers are forked from the main process and share its command line;
    a nested ansible-playbook started by a task has a module's process in between). None when
    neither ``pid`` nor an ancestor runs Ansible (or the chain cannot be read).
    """
    chain = []
    current = pid
    while current and current > 0 and len(chain) < depth and current not in [p for p, _a in chain]:
        chain.append((current, cmdline_of(current)))
        stat = stat_of(current)
        current = stat["ppid"] if stat else None
    for index, (_pid, argv) in enumerate(chain):
        if is_ansible(argv):
            while index + 1 < len(chain) and chain[index + 1][1] == argv:
                index += 1
            return chain[index][0]
    return None


def this_controller():
    return socket.gethostname()


def this_user():
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):
        return str(os.getuid())


def proc_is_mine(proc=PROC):
    """Whether ``proc`` is a /proc of this process's own pid namespace (``self`` names this pid): only
    then do the pids the walk reads there mean what they mean here."""
    try:
        return os.readlink(os.path.join(proc, "self")) == str(os.getpid())
    except (IOError, OSError):
        return False


def boot_id(proc=PROC):
    try:
        with open(os.path.join(proc, "sys", "kernel", "random", "boot_id")) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return ""


def pid_namespace(proc=PROC):
    """The inode number of this process's pid namespace, or None where it cannot be read."""
    try:
        return os.stat(os.path.join(proc, "self", "ns", "pid")).st_ino or None
    except (IOError, OSError):
        return None


def run_process():
    """The run's main process seen from a controller without a /proc of its own.

    Ansible starts each worker through ``multiprocessing`` from the main process, so the worker (and
    any process forked below it, which inherits what the worker knows) names the main process as its
    multiprocessing parent; the main process itself has none and is this process.
    """
    import multiprocessing  # only the controller asks
    parent_process = getattr(multiprocessing, "parent_process", None)
    if parent_process is None:
        return os.getppid()  # Python before 3.8: a worker is a direct child of the main process
    parent = parent_process()
    return parent.pid if parent is not None and parent.pid else os.getpid()


def parse_lstart(text):
    """``@<epoch seconds>`` from the start time ``ps -o lstart=`` prints in the C locale and UTC
    (``Tue Nov 25 20:37:01 2026``); the text itself, spaces squeezed, when it has another form."""
    text = " ".join((text or "").split())
    try:
        return "@%d" % calendar.timegm(time.strptime(text, "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return text


def ps_start(pid):
    """A process's start time from ``ps`` (C locale, UTC, so every run reads the same text), or ""."""
    try:
        done = subprocess.run(["ps", "-o", "lstart=", "-p", str(int(pid))], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C", TZ="UTC0"), timeout=30,
                              check=False)
    except (IOError, OSError, ValueError, subprocess.SubprocessError):
        return ""
    if done.returncode != 0:
        return ""
    return parse_lstart(done.stdout.decode("ascii", "replace"))


def identity(controller, user, pid, pid_start, boot="", pid_ns=None):
    """The owner dict of a run; run_id is unique per process start, and per boot and pid namespace
    when they are known."""
    run_id = "%s:%s:%s" % (controller, pid, pid_start or "?")
    if boot:
        run_id += ":" + boot.replace("-", "")[:8]
    if pid_ns:
        run_id += ":%d" % pid_ns
    return {"run_id": run_id, "controller": controller, "user": user, "pid": pid, "pid_start": pid_start or "",
            "boot_id": boot or "", "pid_ns": pid_ns or None}


def my_identity(proc=PROC, start_of=ps_start):
    """This run's owner dict.

    With a /proc of this pid namespace: the main process found by walking up from this process
    (``main_process``), its start time from its stat, the boot id and the pid namespace. Without:
    the multiprocessing parent (``run_process``), its start time from ``start_of`` (``ps``), no boot
    id and no namespace - such an owner is never judged gone by ``owner_gone``, its lease decides.
    """
    if proc_is_mine(proc):
        me = os.getpid()
        main = main_process(me, lambda p: read_cmdline(p, proc), lambda p: read_stat(p, proc))
        if main is None:
            # no ancestor runs an Ansible program (a wrapper that renamed it): trust multiprocessing
            main = run_process()
        stat = read_stat(main, proc)
        return identity(this_controller(), this_user(), main, stat["start"] if stat else "", boot_id(proc),
                        pid_namespace(proc))
    main = run_process()
    return identity(this_controller(), this_user(), main, start_of(main))


def owner_gone(owner, controller=None, proc=PROC):
    """True when ``owner`` is empty, or provably ran here and its process (pid, start) is gone.

    "Here" is this controller's host name, boot (``boot_id``) and pid namespace (``pid_ns``) all
    at once: a run of another machine with the same host name, of the same machine before a reboot,
    or of another container is not judged from this /proc. False for those, for an owner without a
    pid, boot id or namespace, and where ``proc`` is not this namespace's (the record's lease decides
    then).
    """
    if not owner:
        return True
    if owner.get("controller") != (controller if controller is not None else this_controller()):
        return False
    pid = owner.get("pid")
    if not is_int(pid) or pid < 1 or not proc_is_mine(proc):
        return False
    here_boot = boot_id(proc)
    if not here_boot or owner.get("boot_id") != here_boot:
        return False
    here_ns = pid_namespace(proc)
    if here_ns is None or owner.get("pid_ns") != here_ns:
        return False
    stat = read_stat(pid, proc)
    if stat is None:
        return True
    start = owner.get("pid_start")
    return bool(start) and str(start) != stat["start"]
