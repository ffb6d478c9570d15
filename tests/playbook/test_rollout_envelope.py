# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's entry points run by ansible-playbook on this machine (no drain: no API), with
the record in a temporary folder: what they write, the facts they set, and that a record another
live run holds is left alone."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import getpass
import hashlib
import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_play(tmp_path, tasks, extra_vars=None):
    """One play on localhost around ``tasks``; returns (exit code, {task name: result}, output)."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": dict({"rollout_drain": False, "rollout_marker_dir": str(tmp_path / "record")}, **(extra_vars or {})),
             "tasks": tasks}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    results = {}
    for each in json.loads(done.stdout)["plays"][0]["tasks"]:
        name = each["task"]["name"].split(" : ", 1)[-1]  # without the role's prefix
        results.setdefault(name, []).append(each["hosts"].get("localhost", {}))
    return done.returncode, results, done.stdout + done.stderr


def include(entry, **variables):
    task = {"name": entry, "ansible.builtin.include_role": {"name": "numa.kube.rollout", "tasks_from": entry}}
    if variables:
        task["vars"] = variables
    return task


def show(name, expression):
    return {"name": name, "ansible.builtin.debug": {"msg": "{{ %s }}" % expression}}


def record(tmp_path):
    path = tmp_path / "record" / "marker.json"
    return json.loads(path.read_text()) if path.exists() else None


def digest(tmp_path):
    return hashlib.sha256((tmp_path / "record" / "marker.json").read_bytes()).hexdigest()


@pytest.fixture
def changed_file(tmp_path):
    path = tmp_path / "kubelet.conf"
    path.write_text("cpuManagerPolicy: none\n")
    return str(path)


def test_begin_records_the_change_as_this_run_and_end_closes_it(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [
        include("recover"),
        include("begin", rollout_change_files=[changed_file], rollout_change_services=["kubelet"],
                rollout_change_disruptive=False, rollout_change_reason="kubelet configuration"),
        show("opened", "[rollout_record, rollout_open, rollout_drained, rollout_recovered,"
                       " lookup('numa.kube.rollout_owner')]"),
        {"name": "proven", "ansible.builtin.set_fact": {"rollout_kubelet_healthy": True}},
        include("end"),
        show("closed", "[rollout_record, rollout_open, rollout_drained, rollout_kubelet_healthy]"),
    ])
    assert rc == 0, output[-3000:]
    opened, is_open, drained, recovered, me = results["opened"][0]["msg"]
    assert is_open is True and drained is False and recovered is False
    assert opened["reason"] == "kubelet configuration" and opened["services"] == ["kubelet"]
    assert [entry["path"] for entry in opened["files"]] == [changed_file]
    assert opened["owner"]["run_id"] == me["run_id"] and opened["owner"]["lease"] == 3600
    assert results["closed"][0]["msg"] == [{}, False, False, False]
    assert record(tmp_path) is None, "end removes the record"


def test_begin_refuses_a_call_without_a_reason_before_its_first_task(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [include("begin", rollout_change_files=[changed_file])])
    assert rc != 0
    validation = [name for name in results if name.startswith("Validating arguments against arg spec 'begin'")]
    assert validation and "rollout_change_reason" in results[validation[0]][0]["msg"], output[-3000:]
    assert not (tmp_path / "record").exists(), "nothing is written"


def test_recover_leaves_the_record_this_run_holds(tmp_path, changed_file):
    rc, results, output = run_play(tmp_path, [
        include("begin", rollout_change_files=[changed_file], rollout_change_reason="kubelet configuration"),
        include("recover"),
        show("after", "[rollout_recovered, rollout_open]"),
    ])
    assert rc == 0, output[-3000:]
    assert results["after"][0]["msg"] == [False, True]
    assert record(tmp_path) is not None, "this run's own record is not undone"


@pytest.fixture
def live_owner(tmp_path, changed_file):
    """A record held by another run on this controller whose process still runs (a sleep)."""
    live = subprocess.Popen(["sleep", "300"])
    with open("/proc/%d/stat" % live.pid) as handle:
        start = handle.read().rsplit(")", 1)[1].split()[19]
    owner = {"run_id": "other-run", "controller": socket.gethostname(), "user": getpass.getuser(), "pid": live.pid,
             "pid_start": start}
    rc, _results, output = run_play(tmp_path, [{"name": "plant", "numa.kube.rollout_state": {
        "state": "begin", "folder": str(tmp_path / "record"), "files": [changed_file], "reason": "planted",
        "owner": owner}}])
    assert rc == 0, output[-3000:]
    yield owner
    live.kill()
    live.wait()


def test_recover_stops_at_a_record_a_live_run_holds_and_changes_nothing(tmp_path, live_owner):
    before = digest(tmp_path)
    rc, results, output = run_play(tmp_path, [include("recover")])
    assert rc != 0
    message = results["Stop when another run that may still be alive owns the change"][0]["msg"]
    holder = "belongs to run other-run (%s@%s, pid %d)" % (live_owner["user"], live_owner["controller"], live_owner["pid"])
    assert holder in message, message
    assert "s ago (lease 3600 s)" in message and "rollout_force=true" in message, message
    assert digest(tmp_path) == before, "the live run's record was changed"


def test_a_part_whose_begin_is_refused_does_not_undo_the_other_runs_change(tmp_path, live_owner, changed_file):
    """A run that skipped recover meets the live run at begin: the module refuses, and the part's
    rescue (rollback) leaves the other run's record and node alone."""
    before = digest(tmp_path)
    rc, results, output = run_play(tmp_path, [{
        "name": "part",
        "block": [include("begin", rollout_change_files=[changed_file], rollout_change_reason="racing change")],
        "rescue": [include("rollback"), show("after", "[rollout_recovered, ansible_failed_result.msg]")],
    }])
    assert rc == 0, output[-3000:]
    recovered, failure = results["after"][0]["msg"]
    assert recovered is False
    assert "belongs to run other-run" in failure, failure
    assert digest(tmp_path) == before, "the live run's record was changed"
    assert "Stop kubelet while its files are put back" not in results or \
        all(result.get("skipped") for result in results["Stop kubelet while its files are put back"])
