# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A restore puts back what was there, as it was: links as links, hard links shared, extended
attributes, nothing written through a link; what cannot be put back is refused at begin; every
write reaches the disk (fsync of the file and of its folder)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import errno
import os
import shutil
import socket
import stat
import tempfile

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.modules import rollout_state
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_rollout import put
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

FOLDER = "/var/lib/numa-kube/rollout"
OWNER = {"run_id": "ctl:1:2", "controller": "ctl", "user": "u", "pid": 1, "pid_start": "2"}


@pytest.fixture
def node(tmp_path):
    return durable.Node(str(tmp_path))


def read(node, path):
    with open(node.path(path), "rb") as handle:
        return handle.read()


def call(node, state, **kwargs):
    return rollout.run_state(node, state, folder=FOLDER, owner=OWNER, **kwargs)


# symbolic links -----------------------------------------------------------------------------------

def test_a_link_is_recorded_as_a_link_and_where_it_leads_too(node):
    put(node, "/etc/k/real.conf", b"real\n")
    os.symlink("real.conf", node.path("/etc/k/config"))
    marker = call(node, "begin", files=["/etc/k/config"])["marker"]
    entries = dict((e["path"], e) for e in marker["files"])
    assert entries["/etc/k/config"]["type"] == "link" and entries["/etc/k/config"]["target"] == "real.conf"
    assert "saved" not in entries["/etc/k/config"]
    assert entries["/etc/k/real.conf"]["type"] == "file", "a change writing through the link is put back too"


def test_a_link_replaced_by_a_file_comes_back_as_the_same_link(node):
    put(node, "/etc/k/real.conf", b"real\n")
    os.symlink("real.conf", node.path("/etc/k/config"))
    call(node, "begin", files=["/etc/k/config"])
    os.unlink(node.path("/etc/k/config"))
    put(node, "/etc/k/config", b"a regular file now\n")
    result = call(node, "restore")
    assert result["restored"] == ["/etc/k/config"]
    assert os.path.islink(node.path("/etc/k/config")) and os.readlink(node.path("/etc/k/config")) == "real.conf"
    assert read(node, "/etc/k/real.conf") == b"real\n"
    assert call(node, "query")["differs"] == []


def test_a_retargeted_link_is_pointed_back(node):
    put(node, "/etc/k/real.conf", b"real\n")
    put(node, "/etc/k/other.conf", b"other\n")
    os.symlink("real.conf", node.path("/etc/k/config"))
    call(node, "begin", files=["/etc/k/config"])
    os.unlink(node.path("/etc/k/config"))
    os.symlink("other.conf", node.path("/etc/k/config"))
    call(node, "restore")
    assert os.readlink(node.path("/etc/k/config")) == "real.conf"
    assert read(node, "/etc/k/other.conf") == b"other\n", "nothing was written through the link"


def test_a_change_written_through_a_link_is_put_back_in_its_target(node):
    put(node, "/etc/k/real.conf", b"real\n")
    os.symlink("real.conf", node.path("/etc/k/config"))
    call(node, "begin", files=["/etc/k/config"])
    with open(node.path("/etc/k/config"), "wb") as handle:
        handle.write(b"changed through the link\n")
    assert call(node, "restore")["restored"] == ["/etc/k/real.conf"]
    assert os.readlink(node.path("/etc/k/config")) == "real.conf" and read(node, "/etc/k/real.conf") == b"real\n"


def test_a_file_turned_into_a_link_is_put_back_without_writing_through_it(node):
    put(node, "/etc/k/config", b"mine\n")
    put(node, "/etc/victim", b"not mine\n")
    call(node, "begin", files=["/etc/k/config"])
    os.unlink(node.path("/etc/k/config"))
    os.symlink(node.path("/etc/victim"), node.path("/etc/k/config"))
    call(node, "restore")
    assert not os.path.islink(node.path("/etc/k/config")) and read(node, "/etc/k/config") == b"mine\n"
    assert read(node, "/etc/victim") == b"not mine\n"


def test_a_dangling_link_records_its_future_target_as_absent(node):
    os.makedirs(node.path("/etc/k"))
    os.symlink("later.conf", node.path("/etc/k/config"))
    call(node, "begin", files=["/etc/k/config"])
    put(node, "/etc/k/later.conf", b"created through the link\n")
    assert call(node, "restore")["restored"] == ["/etc/k/later.conf"]
    assert not os.path.exists(node.path("/etc/k/later.conf")) and os.path.islink(node.path("/etc/k/config"))


# hard links -------------------------------------------------------------------------------------

def test_a_hard_linked_file_is_restored_in_place_for_every_link(node):
    put(node, "/etc/k/config", b"before\n", 0o640)
    os.link(node.path("/etc/k/config"), node.path("/etc/other-name"))
    inode = os.stat(node.path("/etc/k/config")).st_ino
    marker = call(node, "begin", files=["/etc/k/config"])["marker"]
    assert marker["files"][0]["links"] == 2
    with open(node.path("/etc/k/config"), "r+b") as handle:  # the change writes the shared inode
        handle.write(b"AFTER, and longer than before\n")
    os.chmod(node.path("/etc/k/config"), 0o600)
    call(node, "restore")
    assert read(node, "/etc/k/config") == b"before\n" and read(node, "/etc/other-name") == b"before\n"
    info = os.stat(node.path("/etc/k/config"))
    assert info.st_ino == inode and info.st_nlink == 2, "the link is not split"
    assert stat.S_IMODE(info.st_mode) == 0o640


def test_a_single_file_is_replaced_atomically(node, monkeypatch):
    put(node, "/etc/k/config", b"before\n")
    inode = os.stat(node.path("/etc/k/config")).st_ino
    call(node, "begin", files=["/etc/k/config"])
    put(node, "/etc/k/config", b"after\n")
    in_place = []
    monkeypatch.setattr(durable.Node, "write_in_place", lambda *args, **kwargs: in_place.append(args))
    call(node, "restore")
    assert in_place == [] and read(node, "/etc/k/config") == b"before\n"
    assert os.stat(node.path("/etc/k/config")).st_ino != inode, "a new inode renamed into place"


# extended attributes ----------------------------------------------------------------------------

def user_xattrs_work(path):
    try:
        os.setxattr(path, "user.numa-kube-probe", b"1")
        os.removexattr(path, "user.numa-kube-probe")
        return True
    except OSError:
        return False


def test_extended_attributes_are_recorded_and_put_back(node):
    put(node, "/etc/k/config", b"before\n")
    real = node.path("/etc/k/config")
    if not user_xattrs_work(real):
        pytest.skip("the test folder's file system takes no user.* extended attributes")
    os.setxattr(real, "user.numa", b"\x00binary\xff")
    marker = call(node, "begin", files=["/etc/k/config"])["marker"]
    assert marker["files"][0]["xattrs"]["user.numa"] == base64.b64encode(b"\x00binary\xff").decode()
    os.removexattr(real, "user.numa")
    os.setxattr(real, "user.added", b"by the change")
    assert call(node, "query")["differs"] == ["/etc/k/config"], "attributes alone are a difference"
    call(node, "restore")
    assert os.getxattr(real, "user.numa") == b"\x00binary\xff"
    assert "user.added" not in os.listxattr(real)
    assert call(node, "query")["differs"] == []


def test_extended_attributes_of_a_hard_linked_file_restored_in_place(node):
    put(node, "/etc/k/config", b"before\n")
    real = node.path("/etc/k/config")
    if not user_xattrs_work(real):
        pytest.skip("the test folder's file system takes no user.* extended attributes")
    os.link(real, node.path("/etc/k/second"))
    os.setxattr(real, "user.numa", b"1")
    call(node, "begin", files=["/etc/k/config"])
    os.setxattr(real, "user.numa", b"2")
    call(node, "restore")
    assert os.getxattr(node.path("/etc/k/second"), "user.numa") == b"1"


def test_the_selinux_label_is_put_back(node, monkeypatch):
    """Whatever the test machine runs, the label in the record is what the restore sets."""
    put(node, "/etc/k/config", b"before\n")
    label = b"system_u:object_r:container_config_t:s0\x00"
    real_get, real_list = os.getxattr, os.listxattr

    def listxattr(path, follow_symlinks=True):
        names = real_list(path, follow_symlinks=follow_symlinks) if isinstance(path, str) else real_list(path)
        return [n for n in names if n != "security.selinux"] + ["security.selinux"]

    def getxattr(path, name, follow_symlinks=True):
        return label if name == "security.selinux" else real_get(path, name, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "listxattr", listxattr)
    monkeypatch.setattr(os, "getxattr", getxattr)
    marker = call(node, "begin", files=["/etc/k/config"])["marker"]
    assert base64.b64decode(marker["files"][0]["xattrs"]["security.selinux"]) == label
    put(node, "/etc/k/config", b"after\n")
    set_calls = []
    monkeypatch.setattr(os, "setxattr", lambda target, name, value, **kw: set_calls.append((name, value)))
    call(node, "restore")
    assert ("security.selinux", label) in set_calls


def test_a_kernel_label_the_record_lacks_is_no_difference():
    assert durable.xattrs_match({}, {"security.selinux": b"x"})
    assert not durable.xattrs_match({}, {"user.x": b"x"})
    assert durable.xattrs_match(None, {"user.x": b"x"}), "unknown (a version 1 record): left alone"


def test_a_file_system_without_extended_attributes(node, monkeypatch):
    def unsupported(*args, **kwargs):
        raise OSError(errno.ENOTSUP, "Operation not supported")

    put(node, "/etc/k/config", b"before\n")
    monkeypatch.setattr(os, "listxattr", unsupported)
    marker = call(node, "begin", files=["/etc/k/config"])["marker"]
    assert marker["files"][0]["xattrs"] == {}
    put(node, "/etc/k/config", b"after\n")
    call(node, "restore")
    assert read(node, "/etc/k/config") == b"before\n"


# what cannot be recorded, refused at begin --------------------------------------------------------

@pytest.fixture
def short_root():
    root = tempfile.mkdtemp(prefix="nk", dir="/tmp")  # a socket path must stay under 108 bytes
    yield root
    shutil.rmtree(root)


def test_folders_fifos_sockets_and_devices_are_refused_by_name(short_root):
    node = durable.Node(short_root)
    os.makedirs(node.path("/etc/dir"))
    os.mkfifo(node.path("/etc/fifo"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(node.path("/etc/sock"))
    put(node, "/etc/fine", b"x\n")
    try:
        with pytest.raises(rollout.RolloutError) as caught:
            call(node, "begin", files=["/etc/fine", "/etc/dir", "/etc/fifo", "/etc/sock"])
    finally:
        sock.close()
    problems = caught.value.problems
    assert len(problems) == 3, problems
    assert "rollout file /etc/dir is a directory: only regular files and symbolic links" in problems[0]
    assert "list the files inside it instead" in problems[0]
    assert "rollout file /etc/fifo is a FIFO" in problems[1] and "rollout file /etc/sock is a socket" in problems[2]
    assert not os.path.exists(node.path(FOLDER)), "nothing was created"


def test_a_device_is_refused(tmp_path):
    folder = str(tmp_path / "rollout")
    with pytest.raises(rollout.RolloutError, match="rollout file /dev/null is a character device"):
        rollout.run_state(durable.Node("/"), "begin", folder=folder, files=["/dev/null"])
    assert not os.path.exists(folder)


def test_a_file_too_big_to_be_a_configuration_is_refused(node, monkeypatch):
    monkeypatch.setattr(durable, "MAX_FILE_BYTES", 10)
    put(node, "/var/big", b"x" * 11)
    with pytest.raises(rollout.RolloutError, match="rollout file /var/big has 11 bytes, more than the 10"):
        call(node, "begin", files=["/var/big"])
    assert rollout.load_marker(node, FOLDER) is None


@pytest.mark.parametrize("folder,words", [
    ("", "folder '' is empty"),
    ("   ", "is empty"),
    ("var/lib/rollout", "is not an absolute path"),
    ("/", "is the root folder"),
    ("//", "is the root folder"),
    ("/var/lib/../lib/rollout", "not in normal form"),
    ("/var//lib", "not in normal form"),
])
def test_bad_folders_are_refused(tmp_path, folder, words):
    node = durable.Node(str(tmp_path))
    for state in ("query", "begin", "finish"):
        with pytest.raises(rollout.RolloutError, match=words.replace("(", r"\(")):
            rollout.run_state(node, state, folder=folder)
    assert os.listdir(str(tmp_path)) == []


def test_a_folder_that_is_a_file_or_a_dangling_link_is_refused(node):
    put(node, "/var/lib/numa", b"x\n")
    with pytest.raises(rollout.RolloutError, match="folder /var/lib/numa is a file, not a folder"):
        rollout.run_state(node, "begin", folder="/var/lib/numa")
    os.symlink("nowhere", node.path("/var/lib/dangling"))
    with pytest.raises(rollout.RolloutError, match="folder /var/lib/dangling is a link, not a folder"):
        rollout.run_state(node, "query", folder="/var/lib/dangling")


@pytest.mark.parametrize("path,words", [
    ("etc/x", "is not an absolute path"),
    ("", "is empty"),
    ("/etc/x/", "not in normal form"),
    ("/etc/../etc/x", "not in normal form"),
])
def test_bad_file_paths_are_refused(node, path, words):
    with pytest.raises(rollout.RolloutError, match=words):
        call(node, "begin", files=[path])
    assert not os.path.exists(node.path(FOLDER))


def test_the_module_refuses_an_empty_folder_and_a_directory_with_their_names(tmp_path):
    failed, result = run(rollout_state, {"folder": "", "state": "begin"})
    assert failed and "folder '' is empty" in result["msg"]
    failed, result = run(rollout_state, {"folder": str(tmp_path / "r"), "state": "begin", "files": [str(tmp_path)]})
    assert failed and "rollout file %s is a directory" % tmp_path in result["msg"]


# fsync ------------------------------------------------------------------------------------------

@pytest.fixture
def synced(monkeypatch):
    """Every fsync as (kind, path) of what the descriptor was open on."""
    calls = []
    real = os.fsync

    def fsync(fd):
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        calls.append((kind, os.readlink("/proc/self/fd/%d" % fd)))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_begin_syncs_the_copies_the_marker_and_their_folder(node, synced):
    put(node, "/etc/k/config", b"before\n")
    call(node, "begin", files=["/etc/k/config"])
    folder = node.path(FOLDER)
    copy = os.path.join(folder, ".%s%s" % (durable.saved_name("/etc/k/config"), durable.TEMP_SUFFIX))
    marker = os.path.join(folder, ".%s%s" % (rollout.MARKER_NAME, durable.TEMP_SUFFIX))
    assert ("file", copy) in synced and ("file", marker) in synced
    assert synced.index(("file", copy)) < synced.index(("file", marker)), "the copy is on disk before the marker"
    assert synced.count(("folder", folder)) >= 2, "each rename made durable"
    assert ("folder", os.path.dirname(folder)) in synced, "the new folder made durable in its parent"


def test_restore_syncs_each_file_and_its_folder(node, synced):
    put(node, "/etc/k/config", b"before\n")
    put(node, "/etc/h/shared", b"before\n")
    os.link(node.path("/etc/h/shared"), node.path("/etc/h/second"))
    call(node, "begin", files=["/etc/k/config", "/etc/h/shared"])
    put(node, "/etc/k/config", b"after\n")
    with open(node.path("/etc/h/shared"), "r+b") as handle:
        handle.write(b"AFTER\n")
    del synced[:]
    call(node, "restore")
    etc_k = node.path("/etc/k")
    assert ("file", os.path.join(etc_k, ".config%s" % durable.TEMP_SUFFIX)) in synced
    assert ("folder", etc_k) in synced
    assert ("file", node.path("/etc/h/shared")) in synced, "the in-place write is synced"
    assert ("folder", node.path("/etc/h")) in synced


def test_finish_syncs_the_folder_after_removing(node, synced):
    put(node, "/etc/k/config", b"before\n")
    call(node, "begin", files=["/etc/k/config", "/etc/k/new"])
    put(node, "/etc/k/new", b"new\n")
    del synced[:]
    call(node, "restore")
    assert ("folder", node.path("/etc/k")) in synced, "the removal of a new file is durable"
    del synced[:]
    call(node, "finish")
    assert synced.count(("folder", node.path(FOLDER))) >= 2, "copy and marker removals made durable"


@pytest.fixture
def events(monkeypatch):
    """Every fsync as (kind, path) and every removal as ("remove", path), in order."""
    calls = []
    real_fsync, real_remove = os.fsync, os.remove

    def fsync(fd):
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        calls.append((kind, os.readlink("/proc/self/fd/%d" % fd)))
        return real_fsync(fd)

    def remove(path, *args, **kwargs):
        calls.append(("remove", path))
        return real_remove(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "remove", remove)
    return calls


def test_finish_makes_the_changed_files_durable_before_the_record_goes(node, events):
    """The change writes its files without fsync (file_update's atomic_move): a power cut after
    finish must not find an empty file and no record to undo it."""
    put(node, "/etc/k/config", b"before\n")
    put(node, "/etc/l/real", b"before\n")
    os.symlink("real", node.path("/etc/l/link"))
    call(node, "begin", files=["/etc/k/config", "/etc/l/link", "/etc/m/new"])
    put(node, "/etc/k/config", b"after\n")  # what the change wrote, not yet synced
    put(node, "/etc/l/real", b"after\n")
    del events[:]
    call(node, "finish")
    marker = events.index(("remove", node.path(os.path.join(FOLDER, rollout.MARKER_NAME))))
    before = events[:marker]
    assert ("file", node.path("/etc/k/config")) in before and ("folder", node.path("/etc/k")) in before
    assert ("file", node.path("/etc/l/real")) in before, "the file behind the link"
    assert ("folder", node.path("/etc/l")) in before
    assert ("file", node.path("/etc/l/link")) not in events, "a link is not followed"
    assert before.count(("folder", node.path("/etc/l"))) == 1, "each folder once"
    assert not any(path.startswith(node.path("/etc/m")) for _kind, path in events), "an absent folder is skipped"


def test_finish_leaves_no_fifo_or_device_opened(node, events):
    put(node, "/etc/k/config", b"before\n")
    call(node, "begin", files=["/etc/k/config"])
    os.remove(node.path("/etc/k/config"))
    os.mkfifo(node.path("/etc/k/config"))  # opened for reading, a FIFO would block without O_NONBLOCK
    del events[:]
    call(node, "finish")
    assert ("file", node.path("/etc/k/config")) not in events and ("folder", node.path("/etc/k")) in events


class CutShortNode(durable.Node):
    """A node whose run ends (power cut, kill) right after the first removal in the record's folder."""

    def remove(self, path):
        durable.Node.remove(self, path)
        raise KeyboardInterrupt("cut short after removing %s" % path)


def test_a_finish_cut_short_leaves_no_record_pointing_at_missing_copies(node, tmp_path):
    """The marker goes first: cut short after it, the next run finds no change under way instead of
    a record whose copies are gone ('missing or damaged')."""
    put(node, "/etc/k/config", b"before\n")
    put(node, "/etc/k/other", b"before\n")
    call(node, "begin", files=["/etc/k/config", "/etc/k/other"])
    with pytest.raises(KeyboardInterrupt):
        rollout.run_state(CutShortNode(str(tmp_path)), "finish", folder=FOLDER, owner=OWNER)
    query = call(node, "query")
    assert not query["active"] and query["differs"] == []
    folder = node.path(FOLDER)
    orphans = sorted(name for name in os.listdir(folder) if name != durable.LOCK_NAME)
    assert orphans == sorted([durable.saved_name("/etc/k/config"), durable.saved_name("/etc/k/other")])
    # a later change opens and finishes normally, and its finish sweeps the orphans
    put(node, "/etc/n/third", b"x\n")
    call(node, "begin", files=["/etc/n/third"])
    assert call(node, "finish")["changed"]
    assert os.listdir(folder) == [durable.LOCK_NAME]


def test_finish_sweeps_only_what_the_record_leaves(node):
    call(node, "begin", files=[])
    folder = node.path(FOLDER)
    keep = ["notes.txt", "0123456789abcdef", ".lock"]
    sweep = ["0123456789abcdef-config.yaml", ".config.yaml%s" % durable.TEMP_SUFFIX,
             ".%s%s" % (rollout.MARKER_NAME, durable.TEMP_SUFFIX)]
    for name in keep + sweep:
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(b"x")
    os.mkdir(os.path.join(folder, "fedcba9876543210-folder"))
    call(node, "finish")
    assert sorted(os.listdir(folder)) == sorted(keep + ["fedcba9876543210-folder"])
