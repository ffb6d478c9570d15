# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd removes whatever is at the NRI socket path before it listens: the path is bounded."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.numa.kube.plugins.module_utils.containerd_config import (
    ContainerdConfigError,
    check_socket_path,
    plan_nri,
)
from ansible_collections.numa.kube.plugins.modules import containerd_nri
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

CONTAINERD_17 = 'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'


class Stat(object):
    def __init__(self, mode):
        self.st_mode = mode


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
    assert check_socket_path(path, lstat=fake_lstat({path: stat.S_IFSOCK | 0o660}), realpath=same) == []


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

    monkeypatch.setattr(containerd_nri.os, "lstat", lstat)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"}, check_mode=True)
    assert failed and "a file is there, not a socket" in result["msg"] and path.read_text() == text
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24", "enabled": False},
                         check_mode=True)
    assert not failed, "with NRI off containerd does not touch the socket path"
