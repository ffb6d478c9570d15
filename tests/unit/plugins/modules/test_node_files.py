# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_files: folders and whole files in one run, only what differs written; check mode and diff;
a secret never shown; links refused; an owner check mode cannot see yet is a change, not a failure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import getpass
import json
import os
import stat

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.files import problems
from ansible_collections.numa.kube.plugins.modules import node_files
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

ME = getpass.getuser()
KEY = "-----BEGIN PRIVATE KEY-----\nsecret-bytes\n-----END PRIVATE KEY-----\n"


def layout(root):
    program = bytes(range(256)) * 4
    return {
        "folders": [{"path": str(root / "opt" / "app"), "mode": "0755", "owner": ME, "group": None},
                    {"path": str(root / "etc" / "app" / "tls"), "mode": "0750"}],
        "files": [{"path": str(root / "opt" / "app" / "app.pyz"), "content": base64.b64encode(program).decode(),
                   "encoding": "base64", "mode": "0644"},
                  {"path": str(root / "opt" / "app" / "app.service"), "content": "[Service]\nExecStart=/bin/true\n",
                   "mode": "0644", "owner": ME},
                  {"path": str(root / "etc" / "app" / "tls" / "tls.key"), "secret_content": KEY, "mode": "0400"}],
    }


def mode_of(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


def test_a_fresh_node_is_previewed_then_set_up_then_left_alone(tmp_path):
    args = layout(tmp_path)
    failed, preview = run(node_files, args, check_mode=True, diff=True)
    assert not failed, preview
    assert preview["changed"] and len(preview["changed_paths"]) == 5
    assert not (tmp_path / "opt").exists(), "check mode wrote nothing"

    failed, made = run(node_files, args, diff=True)
    assert not failed, made
    assert made["changed_paths"] == preview["changed_paths"]
    assert (tmp_path / "opt" / "app" / "app.pyz").read_bytes() == bytes(range(256)) * 4
    assert (tmp_path / "opt" / "app" / "app.service").read_text() == "[Service]\nExecStart=/bin/true\n"
    assert (tmp_path / "etc" / "app" / "tls" / "tls.key").read_text() == KEY
    assert mode_of(tmp_path / "etc" / "app" / "tls" / "tls.key") == 0o400
    assert mode_of(tmp_path / "etc" / "app" / "tls") == 0o750
    assert mode_of(tmp_path / "etc" / "app") == 0o755, "a missing parent is made as the file module makes it"
    assert not [name for name in os.listdir(str(tmp_path / "opt" / "app")) if name.endswith(".tmp")]

    failed, again = run(node_files, args, diff=True)
    assert not failed and again["changed"] is False and again["changed_paths"] == [] and again["diff"] == []


def test_the_secret_never_shows_and_the_binary_shows_by_size(tmp_path):
    failed, made = run(node_files, layout(tmp_path), diff=True)
    assert not failed, made
    shown = json.dumps(made)
    assert "secret-bytes" not in shown
    diffs = dict((d["after_header"], d) for d in made["diff"])
    assert diffs[str(tmp_path / "etc" / "app" / "tls" / "tls.key")]["after"] == "(secret, changed)\n"
    assert diffs[str(tmp_path / "opt" / "app" / "app.pyz")]["after"] == "(1024 bytes, changed)\n"
    assert diffs[str(tmp_path / "opt" / "app" / "app.service")]["after"] == "[Service]\nExecStart=/bin/true\n"


def test_only_what_differs_is_written_and_a_mode_alone_is_set_without_a_write(tmp_path):
    args = layout(tmp_path)
    run(node_files, args)
    service = tmp_path / "opt" / "app" / "app.service"
    program = tmp_path / "opt" / "app" / "app.pyz"
    program_inode = os.stat(str(program)).st_ino
    os.chmod(str(service), 0o600)
    service_inode = os.stat(str(service)).st_ino
    args["files"][1]["content"] = "[Service]\nExecStart=/bin/false\n"
    failed, result = run(node_files, args, diff=True)
    assert not failed, result
    assert result["changed_paths"] == [str(service)]
    entry = [f for f in result["files"] if f["path"] == str(service)][0]
    assert entry["content_changed"] and not entry["created"]
    assert os.stat(str(program)).st_ino == program_inode, "the unchanged program was not rewritten"
    assert os.stat(str(service)).st_ino != service_inode, "a changed file is replaced whole"
    assert mode_of(service) == 0o644
    os.chmod(str(program), 0o600)
    failed, result = run(node_files, args, diff=True)
    assert result["changed_paths"] == [str(program)] and mode_of(program) == 0o644
    assert os.stat(str(program)).st_ino == program_inode, "a mode is set in place"
    assert "mode 0600 -> 0644" in result["diff"][0]["before_header"]
    assert "mode: 0600\n" in result["diff"][0]["before"] and "mode: 0644\n" in result["diff"][0]["after"]


def test_a_link_where_a_file_goes_is_refused_and_not_followed(tmp_path):
    args = layout(tmp_path)
    run(node_files, args)
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    service = tmp_path / "opt" / "app" / "app.service"
    service.unlink()
    service.symlink_to(target)
    failed, result = run(node_files, args)
    assert failed and "is a link, not a file" in result["msg"]
    assert target.read_text() == "keep\n"


def test_an_owner_the_node_lacks_is_a_change_in_check_mode_and_a_clear_failure_otherwise(tmp_path):
    args = layout(tmp_path)
    args["files"][1]["owner"] = "numa-kube-no-such-user"
    failed, preview = run(node_files, args, check_mode=True)
    assert not failed and str(tmp_path / "opt" / "app" / "app.service") in preview["changed_paths"]
    run(node_files, layout(tmp_path))
    failed, preview = run(node_files, args, check_mode=True, diff=True)
    assert not failed and preview["changed_paths"] == [str(tmp_path / "opt" / "app" / "app.service")]
    failed, result = run(node_files, args)
    assert failed and "owner numa-kube-no-such-user or group None does not exist on this node" in result["msg"]


def test_the_new_file_has_its_final_mode_before_anyone_else_owns_it(tmp_path, monkeypatch):
    """The owner is set through the open temporary file, which already has the final mode: a key is
    never readable by more than its mode allows, and nothing is set through a path a link could replace."""
    seen = []
    real = os.fchown

    def spy(fd, uid, gid):
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real(fd, uid, gid)

    monkeypatch.setattr(os, "fchown", spy)
    monkeypatch.setattr(os, "chown", lambda *a: pytest.fail("a chown through a path"))
    monkeypatch.setattr(os, "chmod", lambda *a: pytest.fail("a chmod through a path"))
    run(node_files, layout(tmp_path))
    assert sorted(seen) == [0o400, 0o644, 0o644, 0o750, 0o755]


def test_an_unset_owner_keeps_the_files_own_when_its_bytes_change(tmp_path, monkeypatch):
    args = layout(tmp_path)
    run(node_files, args)
    service = tmp_path / "opt" / "app" / "app.service"
    given = []
    real = os.fchown
    monkeypatch.setattr(os, "fchown", lambda fd, uid, gid: given.append((uid, gid)) or real(fd, uid, gid))
    args["files"][1] = dict(args["files"][1], owner=None, content="[Service]\nExecStart=/bin/false\n")
    before = os.stat(str(service))
    failed, result = run(node_files, args)
    assert not failed and result["changed_paths"] == [str(service)]
    assert given == [(before.st_uid, before.st_gid)], "the file's owner and group, not root's"


def test_nothing_is_written_when_one_item_cannot_be_put_in_place(tmp_path):
    args = layout(tmp_path)
    (tmp_path / "opt" / "app").mkdir(parents=True)
    (tmp_path / "opt" / "app" / "app.service").mkdir()
    failed, result = run(node_files, args)
    assert failed and result["msg"].startswith("node_files: nothing was written: ")
    assert "app.service is a folder, not a file" in result["msg"]
    assert not (tmp_path / "opt" / "app" / "app.pyz").exists() and not (tmp_path / "etc").exists()


def test_an_unquoted_mode_is_refused_not_misread(tmp_path):
    args = layout(tmp_path)
    args["files"][2]["mode"] = 0o400   # what YAML makes of mode: 0400 (256)
    failed, result = run(node_files, args)
    assert failed and "mode 256 is not an octal mode in quotes" in result["msg"]
    assert not (tmp_path / "opt").exists()


@pytest.mark.parametrize("change, problem", [
    ({"path": "relative/file"}, "is not an absolute, normal path"),
    ({"path": "/etc/../etc/x"}, "is not an absolute, normal path"),
    ({"mode": "0689"}, "is not an octal mode in quotes such as"),
    ({"mode": "rw-r--r--"}, "is not an octal mode in quotes such as"),
    ({"content": None}, "give exactly one of content and secret_content"),
    ({"secret_content": "x"}, "give exactly one of content and secret_content"),
    ({"encoding": "base64", "content": "not base64!"}, "is not base64 although encoding is base64"),
])
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, change, problem):
    args = layout(tmp_path)
    args["files"][1] = dict(args["files"][1], **change)
    found = problems(args["folders"], args["files"])
    assert len(found) == 1 and problem in found[0] and found[0].startswith("files[1]: "), found
    failed, result = run(node_files, args)
    assert failed and problem in result["msg"]
    assert not (tmp_path / "opt").exists()


def test_a_path_given_twice_is_refused(tmp_path):
    args = layout(tmp_path)
    args["files"].append(dict(args["files"][1]))
    assert problems(args["folders"], args["files"]) == [
        "files[3]: %s is given twice: give each path once" % args["files"][1]["path"]]
