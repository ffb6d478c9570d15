# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout record: what a first opening keeps, what a later opening may add, what a restore does."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.modules import rollout_state
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

FOLDER = "/var/lib/numa-kube/rollout"


@pytest.fixture
def node(tmp_path):
    return durable.Node(str(tmp_path))


def put(node, path, data, mode=0o644):
    real = node.path(path)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "wb") as handle:
        handle.write(data)
    os.chmod(real, mode)


def begin(node, marker, files, unschedulable=False, services=("kubelet",)):
    new, copies = rollout.plan_begin(marker, files, list(services), unschedulable, "test", node, FOLDER, now=0)
    for _path, name, data in copies:
        node.write(os.path.join(FOLDER, name), data, 0o600)
    node.write(os.path.join(FOLDER, rollout.MARKER_NAME), json.dumps(new).encode(), 0o600)
    return new


def test_first_opening_records_bytes_mode_and_schedulability(node):
    put(node, "/etc/k/config.yaml", b"a: 1\n", 0o640)
    marker = begin(node, None, ["/etc/k/config.yaml", "/var/lib/kubelet/cpu_manager_state"], unschedulable=True)
    entries = dict((e["path"], e) for e in marker["files"])
    assert entries["/etc/k/config.yaml"]["existed"] and entries["/etc/k/config.yaml"]["mode"] == 0o640
    assert entries["/var/lib/kubelet/cpu_manager_state"] == {"path": "/var/lib/kubelet/cpu_manager_state",
                                                             "existed": False}
    assert marker["unschedulable"] is True
    assert rollout.load_marker(node, FOLDER) == marker


def test_a_resumed_opening_keeps_the_first_bytes_and_schedulability(node):
    """The run that is resumed finds the node cordoned by itself and the file half changed: neither
    may replace what the first opening saw."""
    put(node, "/etc/k/config.yaml", b"before\n")
    first = begin(node, None, ["/etc/k/config.yaml"], unschedulable=False)
    put(node, "/etc/k/config.yaml", b"after\n")
    put(node, "/etc/containerd/config.toml", b"version = 2\n")
    second = begin(node, rollout.load_marker(node, FOLDER), ["/etc/k/config.yaml", "/etc/containerd/config.toml"],
                   unschedulable=True, services=("kubelet", "containerd"))
    assert second["unschedulable"] is False
    assert second["files"][0] == first["files"][0]
    assert [e["path"] for e in second["files"]] == ["/etc/k/config.yaml", "/etc/containerd/config.toml"]
    assert second["services"] == ["kubelet", "containerd"]
    assert second["steps"] == ["test"], "the same part opened twice is one step"


def test_each_part_that_opens_the_envelope_is_a_step(node):
    first, _copies = rollout.plan_begin(None, [], [], False, "kubelet configuration", node, FOLDER)
    second, _copies = rollout.plan_begin(first, [], [], None, "reboot for kernel parameters", node, FOLDER)
    assert second["steps"] == ["kubelet configuration", "reboot for kernel parameters"]
    assert "last step 'reboot for kernel parameters'" in rollout.describe(second)


def test_begin_records_the_next_step_in_its_own_write(node):
    """The rollout role's drain: the record says the drain cordons the node before it does, in the
    write that opens the change; a later part's opening adds its reason after it."""
    first, _copies = rollout.plan_begin(None, [], [], False, "kubelet configuration", node, FOLDER,
                                        step="cordoning and draining")
    assert first["steps"] == ["kubelet configuration", "cordoning and draining"]
    second, _copies = rollout.plan_begin(first, [], [], None, "reboot for kernel parameters", node, FOLDER)
    assert second["steps"] == ["kubelet configuration", "cordoning and draining", "reboot for kernel parameters"]


def test_unknown_schedulability_is_filled_by_the_first_answer(node):
    marker = begin(node, None, [], unschedulable=None)
    assert begin(node, marker, [], unschedulable=True)["unschedulable"] is True


def test_restore_writes_back_removes_new_files_and_keeps_equal_ones(node):
    put(node, "/etc/k/config.yaml", b"before\n", 0o600)
    put(node, "/etc/k/same", b"same\n")
    begin(node, None, ["/etc/k/config.yaml", "/etc/k/dropin.conf", "/etc/k/same"])
    put(node, "/etc/k/config.yaml", b"after\n", 0o644)
    put(node, "/etc/k/dropin.conf", b"new\n")
    actions = rollout.plan_restore(rollout.load_marker(node, FOLDER), node, FOLDER)
    assert [(a, e["path"]) for a, e, _d in actions] == [
        ("write", "/etc/k/config.yaml"), ("remove", "/etc/k/dropin.conf"), ("keep", "/etc/k/same")]
    assert actions[0][2] == b"before\n"


def test_restore_refuses_a_damaged_copy(node):
    put(node, "/etc/k/config.yaml", b"before\n")
    marker = begin(node, None, ["/etc/k/config.yaml"])
    put(node, os.path.join(FOLDER, marker["files"][0]["saved"]), b"tampered\n")
    with pytest.raises(rollout.RolloutError, match="missing or damaged"):
        rollout.plan_restore(marker, node, FOLDER)


@pytest.mark.parametrize("content,match", [(b"{not json", "damaged"), (b'{"version": 99}', "version 99")])
def test_a_marker_that_cannot_be_trusted_is_an_error(node, content, match):
    put(node, os.path.join(FOLDER, rollout.MARKER_NAME), content)
    with pytest.raises(rollout.RolloutError, match=match):
        rollout.load_marker(node, FOLDER)


def test_relative_paths_are_refused(node):
    with pytest.raises(rollout.RolloutError, match="not an absolute path"):
        rollout.plan_begin(None, ["etc/x"], [], None, "", node, FOLDER)


def test_describe_names_the_step_and_the_prior_schedulability(node):
    marker = dict(begin(node, None, ["/etc/x"], unschedulable=True), steps=["drained", "kubelet stopped"])
    text = rollout.describe(marker)
    assert "'kubelet stopped'" in text and "cordoned before" in text and "/etc/x" in text
    assert rollout.describe(None) == "no change under way"


# the module, on real files in a temporary folder --------------------------------------------------

def test_module_begin_restore_finish_round_trip(tmp_path):
    target = tmp_path / "config.yaml"
    target.write_bytes(b"cpuManagerPolicy: none\n")
    os.chmod(str(target), 0o600)
    folder = str(tmp_path / "rollout")
    common = {"folder": folder}
    failed, result = run(rollout_state, dict(common, state="begin", files=[str(target), str(tmp_path / "new.conf")],
                                             services=["kubelet"], unschedulable=False, reason="kubelet"))
    assert not failed and result["changed"] and not result["resumed"] and result["active"]
    assert oct(os.stat(folder).st_mode & 0o777) == oct(0o700)
    target.write_bytes(b"cpuManagerPolicy: static\n")
    os.chmod(str(target), 0o644)
    (tmp_path / "new.conf").write_bytes(b"x\n")
    failed, result = run(rollout_state, dict(common, state="step", step="kubelet stopped"))
    assert result["marker"]["steps"] == ["kubelet", "kubelet stopped"]
    failed, result = run(rollout_state, dict(common, state="restore"), check_mode=True)
    assert result["changed"] and target.read_bytes() == b"cpuManagerPolicy: static\n", "check mode wrote"
    failed, result = run(rollout_state, dict(common, state="restore"))
    assert not failed and sorted(result["restored"]) == sorted([str(target), str(tmp_path / "new.conf")])
    assert target.read_bytes() == b"cpuManagerPolicy: none\n"
    assert os.stat(str(target)).st_mode & 0o777 == 0o600
    assert not (tmp_path / "new.conf").exists()
    failed, result = run(rollout_state, dict(common, state="restore"))
    assert not result["changed"], "a second restore has nothing to do"
    failed, result = run(rollout_state, dict(common, state="finish"))
    assert result["changed"] and not result["active"] and os.listdir(folder) == [durable.LOCK_NAME], \
        "the copies and the marker are gone; the lock stays (a waiting run holds it open)"
    failed, result = run(rollout_state, dict(common, state="query"))
    assert not result["active"] and result["summary"] == "no change under way"


def test_module_step_without_a_marker_fails(tmp_path):
    failed, result = run(rollout_state, {"folder": str(tmp_path), "state": "step", "step": "x"})
    assert failed and "open one with state=begin" in result["msg"]


def test_module_begin_in_check_mode_writes_nothing(tmp_path):
    folder = tmp_path / "rollout"
    failed, result = run(rollout_state, {"folder": str(folder), "state": "begin", "files": [str(tmp_path / "x")]},
                         check_mode=True)
    assert not failed and result["changed"] and not folder.exists()


def test_module_query_tells_whether_the_change_reached_its_files(tmp_path):
    """A drain that failed before anything was written needs no service stopped or restarted; a restore
    cut short after its first write does, even though the files then match the record."""
    target = tmp_path / "config.yaml"
    target.write_bytes(b"before\n")
    common = {"folder": str(tmp_path / "rollout")}
    run(rollout_state, dict(common, state="begin", files=[str(target)], services=["kubelet"], unschedulable=False))
    failed, result = run(rollout_state, dict(common, state="query"))
    assert not failed and result["differs"] == [] and result["restore_started"] is False, result
    failed, result = run(rollout_state, dict(common, state="restore"))
    assert not result["changed"] and "restoring files" not in result["marker"]["steps"], "nothing to put back"
    target.write_bytes(b"after\n")
    failed, result = run(rollout_state, dict(common, state="query"))
    assert result["differs"] == [str(target)] and result["restore_started"] is False
    failed, result = run(rollout_state, dict(common, state="restore"), check_mode=True)
    assert result["restored"] == [str(target)] and "restoring files" not in result["marker"]["steps"]
    failed, result = run(rollout_state, dict(common, state="restore"))
    assert result["changed"] and result["marker"]["steps"][-1] == "restoring files"
    failed, result = run(rollout_state, dict(common, state="query"))
    assert result["differs"] == [] and result["restore_started"] is True, "the next run restarts the services"


def test_module_restore_records_its_start_before_the_first_write(tmp_path):
    """A restore that dies while writing (here: the file's folder has become a plain file) leaves the
    step behind, so the next run restarts the services even if it finds the files back as before."""
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "config.yaml").write_bytes(b"before\n")
    common = {"folder": str(tmp_path / "rollout")}
    run(rollout_state, dict(common, state="begin", files=[str(folder / "config.yaml")], services=["kubelet"]))
    (folder / "config.yaml").unlink()
    folder.rmdir()
    folder.write_bytes(b"not a folder\n")
    failed, result = run(rollout_state, dict(common, state="restore"))
    assert failed, result
    failed, result = run(rollout_state, dict(common, state="query"))
    assert result["restore_started"] is True, result["marker"]
