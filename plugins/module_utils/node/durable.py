# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files on a node written so that a crash leaves the old bytes or the new, never half of either:
each written to a temporary file beside it, synced, renamed into place, its folder synced; read and
inspected without following a symbolic link unasked (mode, owner, extended attributes, link target),
and a folder locked with ``flock`` for a read-modify-write. The rollout's record (node/rollout.py)
keeps its marker and saved copies with it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import contextlib
import errno
import fcntl
import hashlib
import os
import re
import stat
import time

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError


LOCK_NAME = ".lock"
LOCK_WAIT = 30
# the record keeps configuration files, whole, in memory and on the node's disk
MAX_FILE_BYTES = 64 * 1024 * 1024
# extended attributes the kernel's security modules set on every new file: one the record lacks
# (the module was off when it was written) is left alone rather than removed
KERNEL_XATTR_PREFIX = "security."
TEMP_SUFFIX = ".numa-kube-restore"
# what may lie in the record's folder besides the marker and the lock: saved copies (saved_name) and
# temporary files of a write cut short; a finish sweeps those the marker no longer names
LEFTOVER = re.compile(r"^([0-9a-f]{16}-.+|\..+%s)$" % re.escape(TEMP_SUFFIX), re.DOTALL)


class DurableError(ProblemsError):
    """A file that cannot be read, written or locked as the record needs; the message says which."""


def saved_name(path):
    """The name under which a file's previous bytes are kept in the marker folder."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return "%s-%s" % (digest, os.path.basename(path) or "root")


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def kind_of(mode):
    """The file type of an ``st_mode`` in words: file, link, directory, ..."""
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISLNK, "link"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "file of unknown type"


def encode_xattrs(values):
    return dict((name, base64.b64encode(value).decode("ascii")) for name, value in values.items())


def decode_xattrs(values):
    return dict((name, base64.b64decode(value.encode("ascii"))) for name, value in values.items())


def xattrs_match(recorded, current):
    """Whether ``current`` (name -> bytes) holds what the record keeps (name -> base64; None: unknown)."""
    if recorded is None:
        return True
    wanted = decode_xattrs(recorded)
    extra = set(current) - set(wanted)
    return all(current.get(name) == value for name, value in wanted.items()) \
        and all(name.startswith(KERNEL_XATTR_PREFIX) for name in extra)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_synced(temp, data, mode=0o600, owner=None):
    """Write ``data`` into a new file ``temp`` (one left over by an interrupted run is replaced, a
    symbolic link there is not followed) and flush it to disk, for a caller that renames it into
    place next (file_update.replace, through Ansible's atomic move; files.py) and then calls
    sync_folder. With ``owner`` (uid, gid), the file gets that owner and exactly ``mode`` through
    the open file, before anyone else can reach it by its name."""
    try:
        os.unlink(temp)
    except FileNotFoundError:
        pass
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        _write_all(fd, data)
        if owner is not None:
            os.fchown(fd, *owner)
            os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder):
    """Flush a folder's entries to disk (after a rename into it)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Node(object):
    """File operations on the node, below ``root`` (``/`` on a node, a temporary folder in tests)."""

    def __init__(self, root="/"):
        self.root = root

    def path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def lstat(self, path):
        try:
            return os.lstat(self.path(path))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise

    def _read_bytes(self, real):
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None, info
            return handle.read(), info

    def read(self, path):
        """(bytes, mode, uid, gid) of a regular file (a link is not followed), or None."""
        info = self.lstat(path)
        if info is None or not stat.S_ISREG(info.st_mode):
            return None
        data, info = self._read_bytes(self.path(path))
        if data is None:
            return None
        return data, info.st_mode & 0o7777, info.st_uid, info.st_gid

    def xattrs(self, path):
        """The extended attributes of a file or link itself (name -> bytes); {} where unsupported."""
        real = self.path(path)
        try:
            names = os.listxattr(real, follow_symlinks=False)
        except OSError as exc:
            if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
                return {}
            raise
        values = {}
        for name in names:
            try:
                values[name] = os.getxattr(real, name, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
        return values

    def inspect(self, path):
        """What is at ``path`` now, not following a link: None when nothing, else a dict with ``type``
        (file, link, directory, ...), and for a file ``data``, ``mode``, ``uid``, ``gid``, ``links``,
        ``size``, ``xattrs``; for a link ``target``, ``uid``, ``gid``, ``xattrs``."""
        info = self.lstat(path)
        if info is None:
            return None
        kind = kind_of(info.st_mode)
        found = {"type": kind, "uid": info.st_uid, "gid": info.st_gid, "size": info.st_size}
        if kind == "file":
            found.update(mode=info.st_mode & 0o7777, links=info.st_nlink)
            if info.st_size <= MAX_FILE_BYTES:
                data, _info = self._read_bytes(self.path(path))
                found["data"] = data
            found["xattrs"] = self.xattrs(path)
        elif kind == "link":
            found.update(target=os.readlink(self.path(path)), xattrs=self.xattrs(path))
        return found

    def resolve(self, path):
        """Where a link at ``path`` finally leads, as a path on the node, or None (outside the root)."""
        real = os.path.realpath(self.path(path))
        root = os.path.realpath(self.root)
        if root == os.sep:
            return real
        if real.startswith(root + os.sep):
            return os.sep + os.path.relpath(real, root)
        return None

    def sync_folder(self, folder_real):
        sync_folder(folder_real)

    def makedirs(self, folder):
        """Create a node folder and its missing parents (mode 0700), each made durable in its parent."""
        real = self.path(folder)
        missing = []
        while not os.path.isdir(real):
            missing.append(real)
            parent = os.path.dirname(real)
            if parent == real:
                break
            real = parent
        for real in reversed(missing):
            try:
                os.mkdir(real, 0o700)
            except OSError as exc:
                if exc.errno != errno.EEXIST or not os.path.isdir(real):
                    raise
            self.sync_folder(os.path.dirname(real))

    def _finish_fd(self, fd, mode, uid, gid, xattrs):
        """Owner, extended attributes and mode of an open file (mode last: the owner change clears
        set-id bits)."""
        if uid is not None and gid is not None and os.geteuid() == 0:
            os.fchown(fd, uid, gid)
        if xattrs is not None:
            self._set_xattrs(fd, xattrs, follow=True)
        os.fchmod(fd, mode)

    def _set_xattrs(self, target, wanted, follow):
        """Make the extended attributes of ``target`` (fd or path) exactly ``wanted`` (name -> bytes),
        leaving alone what the kernel's security modules added that the record does not have."""
        try:
            current = os.listxattr(target, follow_symlinks=follow) if isinstance(target, str) \
                else os.listxattr(target)
        except OSError as exc:
            if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP) and not wanted:
                return  # a file system without extended attributes, and none to put back
            raise
        for name, value in wanted.items():
            if isinstance(target, str):
                os.setxattr(target, name, value, follow_symlinks=follow)
            else:
                os.setxattr(target, name, value)
        for name in current:
            if name in wanted or name.startswith(KERNEL_XATTR_PREFIX):
                continue
            try:
                if isinstance(target, str):
                    os.removexattr(target, name, follow_symlinks=follow)
                else:
                    os.removexattr(target, name)
            except OSError as exc:
                if exc.errno != errno.ENODATA:
                    raise

    def _temp(self, real, suffix=TEMP_SUFFIX):
        temp = os.path.join(os.path.dirname(real), ".%s%s" % (os.path.basename(real), suffix))
        if os.path.lexists(temp):
            os.unlink(temp)  # left by a run cut short
        return temp

    def write(self, path, data, mode, uid=None, gid=None, xattrs=None, temp_suffix=TEMP_SUFFIX):
        """Replace a file atomically (a temporary file in the same folder, named with
        ``temp_suffix``, fsync, rename, fsync of the folder). ``xattrs`` (name -> bytes) makes its
        extended attributes exactly those."""
        real = self.path(path)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            self.makedirs(os.path.dirname(path))
        temp = self._temp(real, temp_suffix)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            _write_all(fd, data)
            self._finish_fd(fd, mode, uid, gid, xattrs)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, real)
        self.sync_folder(folder)

    def write_in_place(self, path, data, mode, uid=None, gid=None, xattrs=None):
        """Rewrite a file's own inode (open, truncate, write, fsync), so that every hard link to it
        sees the new bytes."""
        real = self.path(path)
        fd = os.open(real, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise DurableError("%s is no longer a regular file; nothing was written to it" % path)
            os.ftruncate(fd, 0)
            _write_all(fd, data)
            self._finish_fd(fd, mode, uid, gid, xattrs)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.sync_folder(os.path.dirname(real))

    def write_link(self, path, target, uid=None, gid=None, xattrs=None):
        """Make ``path`` the symbolic link ``target`` (a temporary link, then rename: nothing is
        written through a link that is there now)."""
        real = self.path(path)
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            self.makedirs(os.path.dirname(path))
        temp = self._temp(real)
        os.symlink(target, temp)
        if uid is not None and gid is not None and os.geteuid() == 0:
            os.chown(temp, uid, gid, follow_symlinks=False)
        if xattrs is not None:
            self._set_xattrs(temp, xattrs, follow=False)
        os.rename(temp, real)
        self.sync_folder(folder)

    def sync_written(self, path, folders_done):
        """Make durable what a change left at ``path``: fsync it when it is a regular file (a link is not
        followed, nothing else is opened) and fsync its folder (a rename or removal there), once per
        folder in ``folders_done``."""
        real = self.path(path)
        info = self.lstat(path)
        if info is not None and stat.S_ISREG(info.st_mode):
            try:
                fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ELOOP):
                    raise
                fd = None  # replaced since the lstat: its folder's fsync below covers the rename
            if fd is not None:
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        os.fsync(fd)
                finally:
                    os.close(fd)
        folder = os.path.dirname(real)
        if folder not in folders_done and os.path.isdir(folder):
            self.sync_folder(folder)
            folders_done.add(folder)

    def leftovers(self, folder):
        """Saved copies and temporary files in the record's folder (regular files named as LEFTOVER)."""
        real = self.path(folder)
        try:
            names = os.listdir(real)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return []
            raise
        found = []
        for name in sorted(names):
            info = self.lstat(os.path.join(folder, name))
            if LEFTOVER.match(name) and info is not None and stat.S_ISREG(info.st_mode):
                found.append(name)
        return found

    def remove(self, path):
        real = self.path(path)
        if os.path.lexists(real):
            os.remove(real)
            self.sync_folder(os.path.dirname(real))
            return True
        return False

    @contextlib.contextmanager
    def lock(self, folder, exclusive=True, create=True, wait=LOCK_WAIT):
        """Hold ``flock`` on ``<folder>/.lock`` (exclusive, or shared for a reader) for the block.

        Waits up to ``wait`` seconds. Without ``create``, a folder or lock file that does not exist
        means no lock (nothing to read yet).
        """
        lock = os.path.join(folder, LOCK_NAME)
        real = self.path(lock)
        fd = None
        if create:
            self.makedirs(folder)
            fd = os.open(real, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        elif os.path.lexists(real):
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
        if fd is None:
            yield
            return
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                if time.monotonic() >= deadline:
                    raise DurableError(
                        "the node record's lock %s is still held by another process after %s s: another "
                        "numa.kube task is writing the record in %s (fuser %s names it). Run again once it is "
                        "done; the lock is released when that process ends" % (lock, wait, folder, lock))
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            yield
        finally:
            os.close(fd)


# checks -------------------------------------------------------------------------------------------
