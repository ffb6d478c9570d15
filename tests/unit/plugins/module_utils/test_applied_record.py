# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-part record files: what is read back, what is refused, how they are written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import record as applied_record
from ansible_collections.numa.kube.plugins.module_utils.node.record import RecordError


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_missing_record_is_none(tmp_path):
    assert applied_record.load(str(tmp_path / "kubelet.json")) is None


def test_written_then_read_back_with_its_version(tmp_path):
    path = applied_record.record_path(str(tmp_path / "applied"), "kubelet.json")
    assert applied_record.write(path, {"mode": "merge", "fields": {"a": 1}}) is True
    assert applied_record.load(path) == {"version": 1, "mode": "merge", "fields": {"a": 1}}
    assert mode(path) == 0o600
    assert mode(str(tmp_path / "applied")) == 0o700
    assert not [name for name in os.listdir(str(tmp_path / "applied")) if name != "kubelet.json"], "no temp file left"


def test_the_same_record_is_not_rewritten(tmp_path):
    path = str(tmp_path / "kernel.json")
    applied_record.write(path, {"added": ["a"]})
    inode = os.stat(path).st_ino
    assert applied_record.write(path, {"added": ["a"], "version": 1}) is False
    assert os.stat(path).st_ino == inode
    assert applied_record.write(path, {"added": ["b"]}) is True
    assert applied_record.load(path)["added"] == ["b"]


def test_a_widened_mode_is_put_back(tmp_path):
    path = str(tmp_path / "kernel.json")
    applied_record.write(path, {"added": []})
    os.chmod(path, 0o644)
    assert applied_record.write(path, {"added": []}) is True
    assert mode(path) == 0o600


def test_render_is_what_write_stores(tmp_path):
    path = str(tmp_path / "x.json")
    applied_record.write(path, {"b": 1, "a": None})
    with open(path) as handle:
        assert handle.read() == applied_record.render({"a": None, "b": 1})
    with pytest.raises(ValueError):
        applied_record.render({"version": 2})


def test_remove(tmp_path):
    path = str(tmp_path / "x.json")
    assert applied_record.remove(path) is False
    applied_record.write(path, {})
    assert applied_record.remove(path) is True
    assert not os.path.exists(path)


def test_default_folder():
    assert applied_record.record_path("", "kubelet.json") == "/var/lib/numa-kube/applied/kubelet.json"


@pytest.mark.parametrize("text, words", [
    ("{\"version\": 1, ", "not valid JSON"),
    ("[1, 2]", "not an object"),
    ("{\"mode\": \"merge\"}", "no \"version\""),
    ("{\"version\": 2}", "version 2"),
    ("{\"version\": \"1\"}", "version \"1\""),
    ("{\"version\": true}", "version true"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_a_damaged_record_is_refused_naming_the_file_and_the_way_out(tmp_path, text, words):
    path = str(tmp_path / "kubelet.json")
    with open(path, "wb") as handle:
        handle.write(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(RecordError) as caught:
        applied_record.load(path)
    message = str(caught.value)
    assert path in message and words in message
    assert "remove the file" in message


def test_check_fields_names_every_problem(tmp_path):
    record = {"version": 1, "mode": 3, "fields": {}, "flag": None}
    applied_record.check_fields(record, "r.json", {"fields": dict, "flag": (str, None)})
    with pytest.raises(RecordError) as caught:
        applied_record.check_fields(record, "r.json", {"mode": str, "path": str, "fields": dict, "count": int})
    problems = caught.value.problems
    assert any("'mode' is 3, expected string" in p for p in problems)
    assert any("no 'path' field" in p for p in problems)
    assert any("no 'count' field" in p for p in problems)
    assert not any("'fields'" in p for p in problems)


def test_check_fields_booleans_are_not_integers():
    with pytest.raises(RecordError):
        applied_record.check_fields({"n": True}, "r.json", {"n": int})
    applied_record.check_fields({"n": 2}, "r.json", {"n": int})


def test_the_file_is_json_a_person_can_read(tmp_path):
    path = str(tmp_path / "x.json")
    applied_record.write(path, {"path": "/etc/x"})
    with open(path) as handle:
        assert json.load(handle) == {"path": "/etc/x", "version": 1}


def test_a_record_folder_or_file_others_could_write_is_refused(tmp_path):
    """Review 1 finding 5: what a record says decides which files 'absent' changes."""
    folder = tmp_path / "applied"
    path = str(folder / "kubelet.json")
    applied_record.write(path, {"files": {}})
    assert applied_record.load(path)["files"] == {}
    os.chmod(str(folder), 0o770)
    with pytest.raises(applied_record.RecordError) as caught:
        applied_record.load(path)
    assert "record folder %s has mode 0770" % folder in str(caught.value) and "chmod go-w" in str(caught.value)
    with pytest.raises(applied_record.RecordError):
        applied_record.write(path, {"files": {"x": 1}})
    os.chmod(str(folder), 0o700)
    os.chmod(path, 0o622)
    with pytest.raises(applied_record.RecordError) as caught:
        applied_record.load(path)
    assert "record file %s has mode 0622" % path in str(caught.value)
    os.chmod(path, 0o600)
    # a missing folder is fine (nothing recorded yet), a link in place of it is not
    assert applied_record.load(str(tmp_path / "none" / "kubelet.json")) is None
    os.symlink(str(folder), str(tmp_path / "link"))
    with pytest.raises(applied_record.RecordError) as caught:
        applied_record.load(str(tmp_path / "link" / "kubelet.json"))
    assert "is a symbolic link" in str(caught.value)


def test_as_root_a_record_folder_of_another_owner_is_refused(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    folder = tmp_path / "applied"
    path = str(folder / "kubelet.json")
    applied_record.write(path, {"files": {}})
    os.chown(str(folder), 65534, 65534)
    with pytest.raises(applied_record.RecordError) as caught:
        applied_record.load(path)
    assert "owned by uid 65534, not root" in str(caught.value) and "chown root:root" in str(caught.value)
    monkeypatch.setattr(applied_record, "_running_as_root", lambda: False)
    assert applied_record.load(path) is not None, "without root the owner is not checked, the mode is"


def test_save_writes_removes_and_in_check_mode_only_says(tmp_path):
    path = str(tmp_path / "applied" / "part.json")
    record = {"version": applied_record.VERSION, "files": {}}
    assert applied_record.save(path, record, check_mode=True) is True and not os.path.exists(path)
    assert applied_record.save(path, record) is True and os.path.exists(path)
    assert applied_record.save(path, record, check_mode=True) is False
    assert applied_record.save(path, None, check_mode=True) is True and os.path.exists(path)
    assert applied_record.save(path, None) is True and not os.path.exists(path)
    assert applied_record.save(path, None) is False
