# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd removes whatever is at the NRI socket path before it listens: the path is bounded."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import socket
import stat
import tempfile

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    ContainerdConfigError,
    check_socket_path,
    in_force_socket_path,
    plan_nri,
    socket_listening,
)
from ansible_collections.numa.kube.plugins.module_utils.node import containerd_nri_apply
from ansible_collections.numa.kube.plugins.modules import containerd_nri
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

CONTAINERD_17 = 'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'


class Stat(object):
    def __init__(self, mode, inode=7):
        self.st_mode, self.st_dev, self.st_ino = mode, 1, inode


def fake_lstat(found):
    def lstat(path):
        if path in found:
            return Stat(found[path])
        raise OSError(2, "No such file or directory", path)
    return lstat


def same(path):
    return path


@pytest.mark.parametrize("path,message", [
    ("", "it is empty"), ("   ", "it is empty"), (None, "it is empty"),
    ("/etc/passwd", "outside /run and /var/run"), ("/var/lib/nri.sock", "outside /run and /var/run"),
    ("/run", "outside /run and /var/run"), ("/runx/nri.sock", "outside /run and /var/run"),
    ("nri/nri.sock", "absolute path"), ("/run/../etc/passwd", "without . or .. parts"),
    ("/var/run//nri.sock", "without . or .. parts"), ("/run/nri/", "without . or .. parts"),
])
def test_socket_paths_containerd_could_use_to_remove_something_else_are_refused(path, message):
    problems = check_socket_path(path)
    assert len(problems) == 1 and message in problems[0] and repr(path) in problems[0], problems
    assert "/var/run/nri/nri.sock" in problems[0], "the fix names the default"


@pytest.mark.parametrize("path", ["/var/run/nri/nri.sock", "/run/nri/nri.sock", "/run/k3s/containerd/nri.sock"])
def test_runtime_folders_are_accepted(path):
    assert check_socket_path(path, lstat=fake_lstat({}), realpath=same) == []
    assert check_socket_path(path, lstat=fake_lstat({path: stat.S_IFSOCK | 0o660}), realpath=same,
                             in_force=path) == [], "the NRI socket containerd made there itself"


SOCKET = stat.S_IFSOCK | 0o666


@pytest.mark.parametrize("path", ["/run/containerd/containerd.sock", "/run/dbus/system_bus_socket",
                                  "/run/systemd/private", "/var/run/nri/nri.sock"])
@pytest.mark.parametrize("in_force", [None, "/var/run/nri/nri.sock", "/run/nri/other.sock"])
def test_another_programs_socket_is_refused(path, in_force):
    """The review's cases: containerd's own API socket, D-Bus's, systemd's - sockets, inside /run - were
    accepted, and containerd would have removed them to listen there."""
    if in_force == path:
        return
    problems = check_socket_path(path, lstat=fake_lstat({path: SOCKET}), realpath=same, in_force=in_force)
    assert len(problems) == 1, problems
    assert problems[0].startswith("NRI socket_path %r is refused: a socket is there that containerd's NRI did not "
                                  "make" % path), problems[0]
    assert ("has NRI off" if in_force is None else "puts NRI's socket at %s" % in_force) in problems[0]
    assert "/var/run/nri/nri.sock" in problems[0], "the fix names the default"


@pytest.mark.parametrize("in_force", [None, "/run/nri/other.sock"])
def test_a_socket_nobody_listens_on_is_a_leftover_and_accepted(in_force):
    """containerd leaves its NRI socket behind when it stops: one restarted with NRI off (numa.kube
    taken out, a change rolled back, an interrupted run finished) left a socket that blocked every later
    run. Nobody answers there, so it is nobody's: containerd may replace it."""
    path = "/var/run/nri/nri.sock"
    found = fake_lstat({path: SOCKET})
    assert check_socket_path(path, lstat=found, realpath=same, in_force=in_force,
                             listening=lambda name: False) == []
    problems = check_socket_path(path, lstat=found, realpath=same, in_force=in_force, listening=lambda name: True)
    assert len(problems) == 1 and "a program listens on it" in problems[0], problems


@pytest.fixture
def short_dir():
    """A folder whose sockets' paths fit a unix address (108 bytes)."""
    folder = tempfile.mkdtemp(prefix="nk-", dir="/tmp")
    yield folder
    shutil.rmtree(folder)


def test_socket_listening_tells_a_program_from_a_leftover(short_dir):
    """Real unix sockets: the file a closed socket leaves (what a containerd that stopped leaves) is
    nobody's; a listening one, one bound and not yet listening (in /proc/net/unix, though a connection
    is refused), a datagram one (wrong type) are a program's."""
    left, live, bound, datagram = (os.path.join(short_dir, name)
                                   for name in ("left.sock", "live.sock", "bound.sock", "dgram.sock"))
    closed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    closed.bind(left)
    closed.close()
    sockets = []
    try:
        for path, kind, listen in ((live, socket.SOCK_STREAM, True), (bound, socket.SOCK_STREAM, False),
                                   (datagram, socket.SOCK_DGRAM, False)):
            sock = socket.socket(socket.AF_UNIX, kind)
            sock.bind(path)
            if listen:
                sock.listen(1)
            sockets.append(sock)
        assert stat.S_ISSOCK(os.lstat(left).st_mode), "the closed socket's file stays"
        assert socket_listening(left) is False
        assert socket_listening(live) is True
        assert socket_listening(bound) is True, "bound by a live program, listening or not yet"
        assert socket_listening(bound, table=os.devnull) is False, "a connection alone cannot tell"
        assert socket_listening(datagram) is True
        assert socket_listening(os.path.join(short_dir, "gone.sock")) is False
    finally:
        for sock in sockets:
            sock.close()


def test_the_socket_in_force_is_recognised_through_var_run():
    """/var/run is a link to /run on current systems: the same socket under either name."""
    def realpath(path):
        return "/run" + path[len("/var/run"):] if path.startswith("/var/run/") else path
    found = fake_lstat({"/run/nri/nri.sock": SOCKET})
    assert check_socket_path("/run/nri/nri.sock", lstat=found, realpath=realpath,
                             in_force="/var/run/nri/nri.sock") == []
    assert check_socket_path("/run/nri/nri.sock", lstat=found, realpath=same, in_force="/var/run/nri/nri.sock") != []


@pytest.mark.parametrize("text,version,expected", [
    ("", (1, 7, 24), None), ("", (2, 1, 4), "/var/run/nri/nri.sock"),
    (CONTAINERD_17, (1, 7, 24), None),
    (CONTAINERD_17.replace("true", "false"), (1, 7, 24), "/var/run/nri/nri.sock"),
    (CONTAINERD_17.replace("true", "false") + '  socket_path = "/run/nri/x.sock"  # ours\n', (1, 7, 24),
     "/run/nri/x.sock"),
    ('version = 3\n[plugins."io.containerd.nri.v1.nri"]\n  socket_path = "/run/k3s/nri.sock"\n', (2, 0, 0),
     "/run/k3s/nri.sock"),
    (CONTAINERD_17 + '  socket_path = "/run/nri/x.sock"\n', (1, 7, 24), None),
])
def test_the_socket_path_in_force_is_the_configurations_with_nri_on(text, version, expected):
    assert in_force_socket_path(text, version) == expected


@pytest.mark.parametrize("mode,kind", [(stat.S_IFREG | 0o644, "a file"), (stat.S_IFDIR | 0o755, "a directory"),
                                       (stat.S_IFLNK | 0o777, "a symbolic link")])
def test_something_other_than_a_socket_at_the_path_is_refused(mode, kind):
    path = "/run/nri/nri.sock"
    problems = check_socket_path(path, lstat=fake_lstat({path: mode}), realpath=same)
    assert len(problems) == 1 and "%s is there, not a socket" % kind in problems[0]


def test_a_link_that_leads_out_of_the_runtime_folders_is_refused():
    def realpath(path):
        return path.replace("/run/evil", "/etc") if path.startswith("/run/evil") else path
    problems = check_socket_path("/run/evil/passwd", lstat=fake_lstat({}), realpath=realpath)
    assert len(problems) == 1 and "symbolic links lead it to /etc/passwd" in problems[0]


def test_plan_refuses_a_bad_socket_path_among_the_other_problems():
    with pytest.raises(ContainerdConfigError) as caught:
        plan_nri(CONTAINERD_17, (1, 7, 24), True, {"socket_path": "/etc/passwd", "plugin_path": 5})
    assert len(caught.value.problems) == 2 and "'/etc/passwd' is refused" in str(caught.value)


@pytest.mark.parametrize("socket_path,message", [("/etc/passwd", "outside /run and /var/run"), ("", "it is empty")])
def test_the_module_refuses_and_writes_nothing(tmp_path, socket_path, message):
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_17)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24",
                                          "settings": {"socket_path": socket_path}})
    assert failed and message in result["msg"] and result["problems"] == [result["msg"]]
    assert path.read_text() == CONTAINERD_17


def test_the_module_checks_the_path_in_the_file_on_the_node(tmp_path, monkeypatch):
    """A socket path the file holds already is checked too, on the node: here a regular file sits there."""
    path = tmp_path / "config.toml"
    text = CONTAINERD_17 + '  socket_path = "/run/numa-kube-test/nri.sock"\n'
    path.write_text(text)
    real_lstat = os.lstat

    def lstat(name, *args, **kwargs):
        if name == "/run/numa-kube-test/nri.sock":
            return Stat(stat.S_IFREG | 0o644)
        return real_lstat(name, *args, **kwargs)

    monkeypatch.setattr(containerd_nri_apply.os, "lstat", lstat)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"}, check_mode=True)
    assert failed and "a file is there, not a socket" in result["msg"] and path.read_text() == text
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24", "enabled": False},
                         check_mode=True)
    assert not failed, "with NRI off containerd does not touch the socket path"


def socket_at(monkeypatch, *paths, **kwargs):
    """os.lstat of the module sees a socket at each of ``paths`` (sockets in /run cannot be made in a
    test), and a program listening on each unless ``listening=False``."""
    real_lstat = os.lstat
    listening = kwargs.get("listening", True)

    def lstat(name, *args, **kwargs):
        if name in paths:
            return Stat(SOCKET)
        return real_lstat(name, *args, **kwargs)

    monkeypatch.setattr(containerd_nri_apply.os, "lstat", lstat)
    monkeypatch.setattr(containerd_nri_apply, "socket_listening", lambda path: listening and path in paths)


def unlinks_of(monkeypatch, path):
    """The module's removals of ``path``, recorded instead of made (a socket in /run cannot be made in
    a test); other files are removed as usual."""
    removed, real_unlink = [], os.unlink

    def unlink(name, *args, **kwargs):
        if name == path:
            removed.append(name)
            return None
        return real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(containerd_nri_apply.os, "unlink", unlink)
    return removed


@pytest.mark.parametrize("socket_path", ["/run/containerd/containerd.sock", "/run/dbus/system_bus_socket"])
def test_the_module_refuses_another_programs_socket_and_writes_nothing(tmp_path, monkeypatch, socket_path):
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_17)
    socket_at(monkeypatch, socket_path)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24",
                                          "settings": {"socket_path": socket_path}})
    assert failed and "NRI socket_path %r is refused: a socket is there that containerd's NRI did not make" \
        % socket_path in result["msg"], result["msg"]
    assert path.read_text() == CONTAINERD_17


@pytest.mark.parametrize("swap", ["another socket", "a program", "unlink refused"])
def test_a_leftover_that_changed_before_its_removal_stops_the_run_with_nothing_written(tmp_path, monkeypatch, swap):
    """Review: the socket was removed after the file was written, without a second look: one that a
    program took (or replaced) between the check and the removal went too, and a removal that failed
    left the file written and the run unable to ask for the restart again."""
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_17)
    socket_at(monkeypatch, "/var/run/nri/nri.sock", listening=False)
    seen = []
    real_lstat, real_unlink = containerd_nri_apply.os.lstat, os.unlink

    def lstat(name, *args, **kwargs):
        if name == "/var/run/nri/nri.sock":
            seen.append(name)
            # the second look (the removal's) finds another inode
            return Stat(SOCKET, inode=8 if swap == "another socket" and len(seen) > 2 else 7)
        return real_lstat(name, *args, **kwargs)

    def unlink(name, *args, **kwargs):
        if name == "/var/run/nri/nri.sock":
            raise OSError(1, "Operation not permitted", name)
        return real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(containerd_nri_apply.os, "lstat", lstat)
    monkeypatch.setattr(containerd_nri_apply.os, "unlink", unlink)
    calls = []

    def listening(name):
        calls.append(name)
        return swap == "a program" and len(calls) > 1

    monkeypatch.setattr(containerd_nri_apply, "socket_listening", listening)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"})
    assert failed and "nothing was changed" in result["msg"], result
    assert ("could not be removed (Operation not permitted)" in result["msg"]) == (swap == "unlink refused"), result
    assert path.read_text() == CONTAINERD_17, "the file is left as it was"


@pytest.mark.parametrize("check_mode", [True, False])
def test_the_module_turns_nri_on_over_a_leftover_socket_and_removes_it(tmp_path, monkeypatch, check_mode):
    """NRI off in the file, a socket at the default path nobody listens on (a containerd that had NRI on
    left it): enabling is not refused, and the socket goes (as containerd would take it away), so that
    the role's wait for the socket after the restart cannot pass on it."""
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_17)
    socket_at(monkeypatch, "/var/run/nri/nri.sock", listening=False)
    removed = unlinks_of(monkeypatch, "/var/run/nri/nri.sock")
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"}, check_mode=check_mode)
    assert not failed and result["changed"] and result["leftover_socket_removed"], result
    assert removed == ([] if check_mode else ["/var/run/nri/nri.sock"])
    assert ("disable = false" in path.read_text()) != check_mode
    if check_mode:
        return
    # the socket NRI made itself (NRI on in the file in force) stays: containerd's own
    del removed[:]
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24",
                                          "settings": {"plugin_request_timeout": "3s"}})
    assert not failed and result["changed"] and not result["leftover_socket_removed"] and removed == [], result


def test_the_module_accepts_the_socket_nri_made_and_a_rerun_changes_nothing(tmp_path, monkeypatch):
    """NRI on with its socket at the configured path (containerd made it): enabling again passes."""
    path = tmp_path / "config.toml"
    text = CONTAINERD_17.replace("true", "false") + '  socket_path = "/run/nri/nri.sock"\n'
    path.write_text(text)
    socket_at(monkeypatch, "/run/nri/nri.sock", "/run/containerd/containerd.sock")
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24",
                                          "settings": {"socket_path": "/run/nri/nri.sock"}})
    assert not failed and not result["changed"], result
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"})
    assert not failed and not result["changed"], "the path from the file, not given again"
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24",
                                          "settings": {"socket_path": "/run/containerd/containerd.sock"}})
    assert failed and "puts NRI's socket at /run/nri/nri.sock" in result["msg"], "moving onto another socket"
    assert path.read_text() == text


@pytest.mark.parametrize("forged", ["/run/containerd/containerd.sock", "/etc/passwd", "relative.sock",
                                    "/run/containerd/containerd\\u002esock", "/run/\\u002e\\u002e/etc/passwd"])
def test_absent_checks_the_socket_path_it_would_put_back(tmp_path, monkeypatch, forged):
    """Hostile review: 'absent' restored a recorded socket_path without the check 'present' applies, so a
    record could point NRI at containerd's own socket."""
    path, record = tmp_path / "config.toml", tmp_path / "applied" / "containerd-nri.json"
    path.write_text(CONTAINERD_17.replace("true", "false"))
    socket_at(monkeypatch, "/run/containerd/containerd.sock")
    args = {"path": str(path), "containerd_version": "1.7.24", "record": str(record)}
    failed, result = run(containerd_nri, dict(args, settings={"socket_path": "/run/nri/numa.sock"}))
    assert not failed and result["changed"], result
    kept = json.loads(record.read_text())
    assert "socket_path" in kept["keys"], kept
    # a TOML basic string as the record holds it (escapes written as they are: containerd decodes them)
    kept["keys"]["socket_path"]["before"] = '"%s"' % forged
    record.write_text(json.dumps(kept))
    written = path.read_text()
    failed, result = run(containerd_nri, dict(args, state="absent"))
    assert failed and "NRI socket_path" in result["msg"] and "is refused" in result["msg"], result
    assert "the value %s would put back" % record in result["msg"]
    assert path.read_text() == written and record.exists()


@pytest.mark.parametrize("before", ["1", "true", '["/run/containerd/containerd.sock"]'])
def test_absent_refuses_a_socket_path_that_is_no_string(tmp_path, monkeypatch, before):
    """Third review: a record whose socket_path before is 1 or true was put back unchecked (the
    check took only strings)."""
    path, record = tmp_path / "config.toml", tmp_path / "applied" / "containerd-nri.json"
    path.write_text(CONTAINERD_17.replace("true", "false"))
    args = {"path": str(path), "containerd_version": "1.7.24", "record": str(record)}
    failed, result = run(containerd_nri, dict(args, settings={"socket_path": "/run/nri/numa.sock"}))
    assert not failed and result["changed"], result
    kept = json.loads(record.read_text())
    kept["keys"]["socket_path"]["before"] = before
    record.write_text(json.dumps(kept))
    written = path.read_text()
    failed, result = run(containerd_nri, dict(args, state="absent"))
    assert failed and "containerd would read the NRI settings of this configuration as {'disable': False, " \
        "'socket_path': " in result["msg"], result
    assert path.read_text() == written and record.exists()


@pytest.mark.parametrize("key", ["'socket_path'", '"socket\\u005fpath"'])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_key_written_in_a_form_numa_kube_does_not_edit_is_refused(tmp_path, monkeypatch, key, state):
    """Third review: a literal-quoted 'socket_path' hid containerd's own socket from the check in both
    present and absent (numa.kube reported its default path while containerd read the other)."""
    path, record = tmp_path / "config.toml", tmp_path / "applied" / "containerd-nri.json"
    text = CONTAINERD_17 + '  %s = "/run/containerd/containerd.sock"\n' % key
    path.write_text(text)
    socket_at(monkeypatch, "/run/containerd/containerd.sock")
    args = {"path": str(path), "containerd_version": "1.7.24", "record": str(record)}
    if state == "absent":
        # NRI on with the key in that form; numa.kube turned NRI off (containerd_nri_enabled false):
        # taking that out turns it on again, on whatever socket the key names
        path.write_text(text.replace("disable = true", "disable = false"))
        failed, result = run(containerd_nri, dict(args, enabled=False))
        assert not failed and result["changed"], result
    written = path.read_text()
    failed, result = run(containerd_nri, dict(args, state=state))
    assert failed, result
    assert ("containerd would read the NRI settings" in result["msg"]
            or "a socket is there that containerd's NRI did not make" in result["msg"]), result["msg"]
    assert path.read_text() == written


def test_an_nri_table_that_is_only_text_in_a_string_is_not_taken_for_one(tmp_path):
    """Fourth review: an NRI table header inside a multi-line string of another table looked like the
    NRI table to numa.kube's reading, so a file containerd reads with NRI off (1.7) was reported on
    and left unchanged: the reading is checked against a TOML reader's whether the file changes or not."""
    path = tmp_path / "config.toml"
    text = ("version = 2\n[plugins.\"x\"]\n  note = '''\n[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = false\n"
            "'''\n")
    path.write_text(text)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"})
    assert failed and "containerd would read the NRI settings of this configuration as {'disable': True}" \
        in result["msg"], result
    assert path.read_text() == text


def test_absent_turning_nri_on_again_removes_a_leftover_socket_there(tmp_path, monkeypatch):
    """Review: taking numa.kube out can turn NRI on again (it was on before numa.kube turned it off);
    a socket nobody listens on at the path put back was accepted but left, so the wait for containerd's
    socket after the restart passed on it."""
    path, record = tmp_path / "config.toml", tmp_path / "applied" / "containerd-nri.json"
    path.write_text(CONTAINERD_17.replace("true", "false") + '  socket_path = "/run/nri/orig.sock"\n')
    args = {"path": str(path), "containerd_version": "1.7.24", "record": str(record)}
    failed, result = run(containerd_nri, dict(args, enabled=False))
    assert not failed and result["changed"], result
    socket_at(monkeypatch, "/run/nri/orig.sock", listening=False)
    removed = unlinks_of(monkeypatch, "/run/nri/orig.sock")
    failed, result = run(containerd_nri, dict(args, state="absent"))
    assert not failed and result["changed"] and result["nri_enabled"], result
    assert result["leftover_socket_removed"] and removed == ["/run/nri/orig.sock"], result


@pytest.mark.parametrize("held", [False, True])
def test_absent_removing_the_file_on_containerd_2_checks_the_default_socket(tmp_path, monkeypatch, held):
    """Second review: where numa.kube created config.toml, absent removes it and containerd 2.x runs its
    defaults - NRI on at /var/run/nri/nri.sock - without the check: a leftover there stayed (the wait
    for the socket passed on it) and a program's socket there was not refused."""
    path, record = tmp_path / "config.toml", tmp_path / "applied" / "containerd-nri.json"
    args = {"path": str(path), "containerd_version": "2.0.1", "record": str(record)}
    failed, result = run(containerd_nri, dict(args, enabled=False))
    assert not failed and result["changed"] and path.exists(), result
    socket_at(monkeypatch, "/var/run/nri/nri.sock", listening=held)
    removed = unlinks_of(monkeypatch, "/var/run/nri/nri.sock")
    failed, result = run(containerd_nri, dict(args, state="absent"))
    if held:
        assert failed and "a program listens on it" in result["msg"] and path.exists(), result
        return
    assert not failed and result["removed_file"] and result["nri_enabled"], result
    assert result["leftover_socket_removed"] and removed == ["/var/run/nri/nri.sock"], result


def test_a_bound_socket_is_found_in_the_table_whatever_the_other_names(tmp_path):
    """Second review: the table was read as text (one name that is not UTF-8 crashed the module), its
    lines split on form feeds too, and a socket bound by a relative name was missed."""
    from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import _held_by_a_bound_socket
    head = b"Num       RefCount Protocol Flags    Type St Inode Path\n"

    def table(*paths):
        lines = [b"0000: 00000002 00000000 00010000 0001 01 %d %s" % (n, p) for n, p in enumerate(paths)]
        where = tmp_path / "unix"
        where.write_bytes(head + b"\n".join(lines) + b"\n")
        return str(where)

    same = os.path.realpath
    target = "/var/run/nri/nri.sock"
    real = os.path.realpath(target)
    assert _held_by_a_bound_socket(target, table(b"@\xff\xfe", b"/run/a\x0cb", real.encode()), same)
    assert _held_by_a_bound_socket(target, table(b"nri.sock"), same), "bound by a relative name: held"
    assert not _held_by_a_bound_socket(target, table(b"@nri.sock", b"/run/other/nri.sock.x", b"/elsewhere/x.sock"),
                                       same)
    assert not _held_by_a_bound_socket(target, str(tmp_path / "missing"), same)
