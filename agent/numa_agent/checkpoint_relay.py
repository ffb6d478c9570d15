# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoint relay of the systemd exporter (``numa-agent checkpoint-relay``).

It looks at kubelet's two checkpoint files every ``--interval`` seconds and copies each one that
changed into ``--into`` (mode 0640, group of the process), replacing the copy in one rename, so
that the exporter (``numa-agent exporter --kubelet-data=checkpoints``) reads them unprivileged.
kubelet keeps the files root's, mode 0600, and writes each one anew (a temporary file renamed over
the old one), so neither a capability nor an ACL on the file would give an unprivileged reader
lasting access; the relay runs as root without any capability, socket, network or write access
outside its folder, and copies only regular files, opened without following a symbolic link.
Standard library only.
"""

import argparse
import errno
import os
import signal
import stat
import sys
import threading

DEFAULT_CHECKPOINT_DIR = "/run/numa-exporter"
CHECKPOINTS = ("cpu_manager_state", "memory_manager_state")
# a checkpoint is a few KiB; anything near this is not one, and is not copied
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
ERROR_SUFFIX = ".error"


def stop_on_signals():
    """An Event set by SIGTERM or SIGINT (when called from the main thread)."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *unused: stop.set())
    return stop


def checkpoint_readable(folder, problems):
    """{name: 1 or 0} for each checkpoint that exists (or failed) in ``folder``: 0 when it could not
    be read or parsed, or when the relay left a ``<name>.error`` saying why it could not copy it."""
    broken = dict(problems)
    found = {}
    for name in CHECKPOINTS:
        failed = os.path.exists(os.path.join(folder, name + ERROR_SUFFIX))
        if failed or name in broken:
            found[name] = 0
        elif os.path.exists(os.path.join(folder, name)):
            found[name] = 1
    return found


def parse_relay_args(argv):
    parser = argparse.ArgumentParser(prog="numa-agent checkpoint-relay",
                                     description="Copy kubelet's CPU and Memory Manager checkpoints where the "
                                                 "exporter's user may read them.")
    parser.add_argument("--kubelet-root", default="/var/lib/kubelet", help="kubelet's root folder (default "
                                                                           "/var/lib/kubelet)")
    parser.add_argument("--into", default=DEFAULT_CHECKPOINT_DIR, help="folder of the copies (default %s)"
                        % DEFAULT_CHECKPOINT_DIR)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between two looks (default 2)")
    args = parser.parse_args(argv)
    if not 0.1 <= args.interval <= 3600:
        parser.error("--interval %s is not between 0.1 and 3600 seconds" % args.interval)
    return args


def _write_atomically(folder, name, data, mode=0o640):
    """Replace ``folder/name`` with ``data`` in one rename, the new file ``mode`` whatever the umask."""
    temporary = os.path.join(folder, ".%s.%d" % (name, os.getpid()))
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(handle, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view):]
    finally:
        os.close(handle)
    os.replace(temporary, os.path.join(folder, name))


def _remove(path):
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class NotRegular(Exception):
    """A checkpoint path that holds something other than a regular file."""

    def __init__(self, kind):
        Exception.__init__(self, kind)
        self.kind = kind


def _kind(mode):
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return kind
    return "a special file"


def _read_regular(path, limit):
    """(at most ``limit`` bytes, stamp) of the regular file at ``path``, opened without following a
    symbolic link and without waiting on a pipe; NotRegular for anything else, which is never read.
    The relay runs as root, so a link kubelet's folder holds must not lead it to root's other files."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise NotRegular("a symbolic link")
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(_kind(info.st_mode))
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(handle, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), (info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns)
    finally:
        os.close(handle)


class Relay(object):
    """Copies each checkpoint of ``source`` into ``target`` when it changed since the last copy."""

    def __init__(self, source, target, names=CHECKPOINTS, limit=MAX_CHECKPOINT_BYTES):
        self.source = source
        self.target = target
        self.names = names
        self.limit = limit
        self.copied = {}  # name: (inode, mtime, size, ctime) of the source last copied
        self.errors = {}  # name: the error last reported, so that a lasting one is logged once

    def _fail(self, name, message):
        """Drop the copy and leave the reason beside it; a lasting problem is logged and written once.
        Returns whether anything in the target changed."""
        self.copied.pop(name, None)
        removed = _remove(os.path.join(self.target, name))
        if self.errors.get(name) == message and os.path.exists(os.path.join(self.target, name + ERROR_SUFFIX)):
            return removed
        sys.stderr.write("numa-exporter relay: %s\n" % message)
        self.errors[name] = message
        _write_atomically(self.target, name + ERROR_SUFFIX, (message + "\n").encode("utf-8"))
        return True

    def once(self):
        """One look at every checkpoint; returns the names whose copy changed (copied or removed)."""
        changed = []
        for name in self.names:
            path = os.path.join(self.source, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                self.copied.pop(name, None)
                self.errors.pop(name, None)
                removed = _remove(os.path.join(self.target, name))
                if _remove(os.path.join(self.target, name + ERROR_SUFFIX)) or removed:
                    changed.append(name)
                continue
            except OSError as exc:
                if self._fail(name, "cannot look at %s: %s" % (path, exc.strerror)):
                    changed.append(name)
                continue
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns)
            if stamp == self.copied.get(name) and os.path.exists(os.path.join(self.target, name)):
                continue
            try:
                data, stamp = _read_regular(path, self.limit + 1)
            except NotRegular as exc:
                if self._fail(name, "%s is %s, not a regular file: kubelet writes its checkpoints as plain files, "
                              "so it is not copied" % (path, exc.kind)):
                    changed.append(name)
                continue
            except OSError as exc:
                if self._fail(name, "cannot read %s: %s" % (path, exc.strerror)):
                    changed.append(name)
                continue
            if len(data) > self.limit:
                if self._fail(name, "%s is larger than %d bytes: not a kubelet checkpoint, not copied"
                              % (path, self.limit)):
                    changed.append(name)
                continue
            _write_atomically(self.target, name, data)
            _remove(os.path.join(self.target, name + ERROR_SUFFIX))
            self.errors.pop(name, None)
            self.copied[name] = stamp
            changed.append(name)
        return changed


def main(argv, stop=None):
    args = parse_relay_args(argv)
    if not os.path.isdir(args.into):
        sys.stderr.write("numa-exporter relay: %s is not a folder (the service's RuntimeDirectory makes it)\n"
                         % args.into)
        return 2
    if not os.path.isdir(args.kubelet_root):
        # systemd starts the relay again (Restart=always) and, once kubelet made its folder, binds it in
        sys.stderr.write("numa-exporter relay: kubelet's folder %s does not exist (yet)\n" % args.kubelet_root)
        return 3
    stop = stop or stop_on_signals()
    worker = Relay(args.kubelet_root, args.into)
    while True:
        worker.once()
        if stop.wait(args.interval):
            return 0
