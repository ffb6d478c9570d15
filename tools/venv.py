# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make a checkout's virtual environment from pinned requirements: PYTHON tools/venv.py VENV REQUIREMENTS

pip's install of requirements-dev.txt takes 80-90 s here even with every wheel in pip's cache: the
first minute and a half of every run from a fresh clone. So a newly built environment is kept, as
pip left it, in $NUMA_KUBE_CACHE/venvs/<key> (default ~/.cache/numa-kube; the key: the requirements,
this file, the interpreter running it, pip's settings in the environment), and a fresh clone's
environment is a copy of it (about 7 s): the copy's scripts name their new interpreter on their first
lines, pip checks the copy against the requirements, and a copy that fails any of that is thrown away
with the kept environment, and built anew. An existing environment is brought up to date in place
by pip, as before. NUMA_KUBE_VENV_CACHE=0 leaves the cache alone.

The cache is only a speed-up: if it cannot be read or written, the environment is built as without
it. Two set-ups of one checkout at once take turns (a lock on the checkout's folder, where its file
system allows one); set-ups of different checkouts share the cache (a shared lock to copy, an
exclusive one to add or prune). A copy or build cut short is marked as such and made anew by the
next set-up; a folder that is no environment (no pyvenv.cfg) is never removed.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile

KEEP = 3                     # environments kept, the most recently used first
INCOMPLETE = ".numa-kube-incomplete"   # inside an environment whose copy or build is not finished
SHEBANG_MAX = 127            # the kernel's limit on a script's first line (as pip's launcher knows)


def log(message):
    sys.stderr.write("venv: %s\n" % message)
    sys.stderr.flush()


@contextlib.contextmanager
def locked(path, mode):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def checkout_locked(folder):
    """The checkout's folder locked where its file system allows it (a network one may refuse a lock
    on a folder opened to read): two set-ups of one checkout take turns; without a lock, each goes on."""
    fd = None
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as exc:
        log("%s cannot be locked (%s): going on without a lock" % (folder, exc))
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def cache_key(requirements, this_file):
    digest = hashlib.sha256()
    for path in (requirements, this_file):
        with open(path, "rb") as handle:
            digest.update(handle.read())
    digest.update(("%s\n%s\n%s\n" % (sys.version, os.path.realpath(sys.executable), platform.machine())).encode())
    for name in sorted(os.environ):
        if name.startswith("PIP_"):
            digest.update(("%s=%s\n" % (name, os.environ[name])).encode())
    return digest.hexdigest()[:16]


def run(args, **kwargs):
    try:
        return subprocess.run(args, check=False, **kwargs).returncode == 0
    except OSError:          # (a program that is not there, or cannot run)
        return False


def pip_install(venv, requirements):
    return run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "-r", requirements])


def first_lines_for(interpreter):
    """A script's first line naming INTERPRETER; the /bin/sh form pip itself writes where the path
    has a space or the line would be too long for the kernel (its limit counts the #! and the
    newline)."""
    line = b"#!" + interpreter + b"\n"
    if b" " not in interpreter and len(line) <= SHEBANG_MAX:
        return line
    quoted = interpreter.replace(b"'", b"'\"'\"'")
    return SH_FORM + b"'" + quoted + b"'" + SH_TAIL


SH_FORM = b"#!/bin/sh\n'''exec' "
SH_TAIL = b" \"$0\" \"$@\"\n' '''\n"


def split_interpreter(data):
    """(interpreter, the rest) of a script in either form first_lines_for writes (or pip's own
    /bin/sh form, the path unquoted); None for another first line."""
    if data.startswith(SH_FORM) and SH_TAIL in data:
        named, rest = data[len(SH_FORM):].split(SH_TAIL, 1)
        if named.startswith(b"'") and named.endswith(b"'"):
            named = named[1:-1].replace(b"'\"'\"'", b"'")
        return named, rest
    if data.startswith(b"#!") and not data.startswith(b"#!/bin/sh"):
        line, rest = data.split(b"\n", 1) if b"\n" in data else (data, b"")
        return line[2:].strip(), rest
    return None


def repoint(venv, origin):
    """Name VENV instead of ORIGIN in the text files of bin/ (the scripts' interpreter lines, written
    again in the form the new path needs, and the activate files), as literal text."""
    old, new = origin.encode(), venv.encode()
    folder = os.path.join(venv, "bin")
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if old not in data or b"\0" in data[:4096]:
            continue
        split = split_interpreter(data)
        if split and split[0].startswith(old + b"/"):
            data = first_lines_for(new + split[0][len(old):]) + split[1].replace(old, new)
        else:
            data = data.replace(old, new)
        with open(path, "wb") as handle:
            handle.write(data)


def under(path, folder):
    """Whether PATH (as pip prints it) lies in FOLDER."""
    return os.path.abspath(path).startswith(folder.rstrip(os.sep) + os.sep)


def restore(venv, entry, requirements):
    """Copy the kept environment ENTRY to VENV. True when the copy works; False when the entry is at
    fault (nothing to copy, or its copy fails pip's check); OSError for a fault on this side (a full
    or unwritable checkout), and the entry is kept. VENV is gone after either failure."""
    try:
        with open(os.path.join(entry, "origin")) as handle:
            origin = handle.read().strip()
        if not os.path.exists(os.path.join(entry, "venv", "bin", "python")):
            return False
        os.makedirs(venv)
        open(os.path.join(venv, INCOMPLETE), "w").close()
        if not run(["cp", "-a", os.path.join(entry, "venv") + "/.", venv]):
            raise OSError("could not copy %s to %s" % (entry, venv))
        repoint(venv, origin)
        try:
            pip = subprocess.run([os.path.join(venv, "bin", "pip"), "--version"], capture_output=True, text=True,
                                 check=False)
        except OSError:
            pip = None
        # "pip X from <folder> (python Y)", the folder perhaps with spaces: the copy's own pip, not the kept one's
        said = pip.stdout.strip() if pip is not None and pip.returncode == 0 else ""
        folder = said.partition(" from ")[2].rpartition(" (python ")[0]
        works = bool(folder) and under(folder, os.path.join(venv, "lib"))
        if not works or not pip_install(venv, requirements):
            shutil.rmtree(venv, ignore_errors=True)
            return False
        os.remove(os.path.join(venv, INCOMPLETE))
    except OSError:
        shutil.rmtree(venv, ignore_errors=True)
        raise
    try:
        os.utime(os.path.join(entry, "done"))   # (the most recently used are kept)
    except OSError:
        pass
    return True


def save(venv, venvs, key):
    """Keep VENV, as pip left it, under KEY; the newest KEEP entries stay."""
    with locked(os.path.join(venvs, ".lock"), fcntl.LOCK_EX):
        for name in os.listdir(venvs):
            if name.startswith(".new."):        # left by a save that was killed
                shutil.rmtree(os.path.join(venvs, name), ignore_errors=True)
        entry = os.path.join(venvs, key)
        if os.path.exists(os.path.join(entry, "done")):
            return
        work = tempfile.mkdtemp(prefix=".new.", dir=venvs)
        if not run(["cp", "-a", venv, os.path.join(work, "venv")]):
            shutil.rmtree(work, ignore_errors=True)
            raise OSError("could not copy %s" % venv)
        with open(os.path.join(work, "origin"), "w") as handle:
            handle.write(venv + "\n")
        open(os.path.join(work, "done"), "w").close()
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(work, entry)
        entries = [os.path.join(venvs, name) for name in os.listdir(venvs) if not name.startswith(".")]
        entries.sort(key=lambda path: os.stat(os.path.join(path, "done")).st_mtime
                     if os.path.exists(os.path.join(path, "done")) else 0, reverse=True)
        for stale in entries[KEEP:]:
            shutil.rmtree(stale, ignore_errors=True)
    log("kept in %s" % entry)


def from_cache(venv, venvs, key, requirements):
    entry = os.path.join(venvs, key)
    with locked(os.path.join(venvs, ".lock"), fcntl.LOCK_SH):
        if not os.path.exists(os.path.join(entry, "done")):
            return False
        if restore(venv, entry, requirements):
            log("copied from %s" % entry)
            return True
    log("the copy of %s did not work: it is thrown away, and the environment built" % entry)
    with locked(os.path.join(venvs, ".lock"), fcntl.LOCK_EX):
        shutil.rmtree(entry, ignore_errors=True)
    return False


def ours(venv):
    """Whether VENV may be removed to be made again: an environment (pyvenv.cfg), one whose copy or
    build was cut short, an empty folder or a link; never another folder a wrong argument named."""
    if os.path.islink(venv) or not os.path.isdir(venv):
        return True
    names = os.listdir(venv)
    return not names or INCOMPLETE in names or "pyvenv.cfg" in names


def remove(venv):
    if os.path.islink(venv) or os.path.isfile(venv):
        os.remove(venv)
    else:
        shutil.rmtree(venv, ignore_errors=True)


def build(venv, requirements):
    """python -m venv and pip, the folder marked incomplete until both are done."""
    os.makedirs(venv, exist_ok=True)
    open(os.path.join(venv, INCOMPLETE), "w").close()
    if not run([sys.executable, "-m", "venv", venv]) or not pip_install(venv, requirements):
        sys.exit("could not make %s from %s (it is made anew next time)" % (venv, requirements))
    os.remove(os.path.join(venv, INCOMPLETE))


def main(argv):
    if len(argv) != 3 or not argv[1].strip():
        sys.exit("usage: %s VENV REQUIREMENTS" % argv[0])
    venv, requirements = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    use_cache = os.environ.get("NUMA_KUBE_VENV_CACHE", "1") != "0"
    cache = os.environ.get("NUMA_KUBE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "numa-kube")
    venvs = os.path.join(cache, "venvs")
    key = cache_key(requirements, os.path.abspath(__file__))
    if not ours(venv):
        sys.exit("%s has files but no pyvenv.cfg: it is no virtual environment, and is left alone. Name the "
                 "environment's own folder, or move this one away first" % venv)
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with checkout_locked(os.path.dirname(venv)):
        if os.path.exists(os.path.join(venv, INCOMPLETE)) or (
                os.path.lexists(venv) and not os.path.exists(os.path.join(venv, "bin", "python"))):
            remove(venv)   # a copy or build that was cut short
        if os.path.lexists(venv):
            if pip_install(venv, requirements):
                return
            # (an environment whose interpreter moved or was upgraded away, say: made anew)
            log("pip could not bring %s up to date with %s: it is made anew" % (venv, requirements))
            remove(venv)
        if use_cache:
            try:
                os.makedirs(venvs, exist_ok=True)
                if from_cache(venv, venvs, key, requirements):
                    return
            except OSError as exc:
                log("the cache %s is not usable (%s): the environment is built" % (venvs, exc))
        build(venv, requirements)
        if use_cache:
            try:
                save(venv, venvs, key)
            except OSError as exc:
                log("not kept in %s (%s): the environment itself is made" % (venvs, exc))


if __name__ == "__main__":
    main(sys.argv)
