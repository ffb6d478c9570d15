# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who owns a node's rollout record: the rules, who the run is, whether a run is gone, and two runs
at once on one node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import multiprocessing
import os
import shutil
import time

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner
from ansible_collections.numa.kube.plugins.modules import rollout_state
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_rollout import put
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

FOLDER = "/var/lib/numa-kube/rollout"
A = {"run_id": "ctl-a:100:5000", "controller": "ctl-a", "user": "alice", "pid": 100, "pid_start": "5000"}
B = {"run_id": "ctl-b:200:6000", "controller": "ctl-b", "user": "bob", "pid": 200, "pid_start": "6000"}


# the rules, pure ----------------------------------------------------------------------------------

def test_a_record_without_owner_is_anyones():
    owner, replaced, refusal = rollout_owner.claim({}, A, 600, "", 1000, FOLDER)
    assert refusal is None and replaced is None
    assert owner == dict(A, heartbeat=1000, lease=600)


def test_the_owner_refreshes_its_heartbeat():
    current = rollout_owner.record(A, 600, 1000)
    owner, replaced, refusal = rollout_owner.claim(current, A, 600, "", 1500, FOLDER)
    assert refusal is None and replaced is None and owner["heartbeat"] == 1500


def test_another_live_run_is_refused_with_the_owner_named():
    current = rollout_owner.record(A, 600, 1000)
    owner, replaced, refusal = rollout_owner.claim(current, B, 600, "", 1042, FOLDER)
    assert owner is None and replaced is None
    for words in ("node record %s belongs to run ctl-a:100:5000" % FOLDER, "alice@ctl-a, pid 100",
                  "last heard from 42 s ago (lease 600 s)", "another numa.kube run is changing this node",
                  "rollout_force=true"):
        assert words in refusal, refusal


def test_the_recorded_lease_decides_not_the_callers():
    current = rollout_owner.record(A, 600, 1000)
    assert rollout_owner.claim(current, B, 60, "", 1500, FOLDER)[2], "A asked for 600 s: still A's"
    owner, replaced, refusal = rollout_owner.claim(current, B, 60, "", 1601, FOLDER)
    assert refusal is None and replaced == current and owner["run_id"] == B["run_id"]


@pytest.mark.parametrize("take_over", ["*", A["run_id"]])
def test_take_over_by_force_or_by_the_owners_run_id(take_over):
    current = rollout_owner.record(A, 3600, 1000)
    owner, replaced, refusal = rollout_owner.claim(current, B, 3600, take_over, 1001, FOLDER)
    assert refusal is None and replaced == current and owner == dict(B, heartbeat=1001, lease=3600)


def test_take_over_naming_another_run_is_refused():
    current = rollout_owner.record(A, 3600, 1000)
    refusal = rollout_owner.claim(current, B, 3600, "ctl-c:1:1", 1001, FOLDER)[2]
    assert "take_over names run ctl-c:1:1, which is not the owner" in refusal


def test_a_caller_without_identity():
    current = rollout_owner.record(A, 600, 1000)
    assert rollout_owner.claim(current, None, 600, "", 1001, FOLDER)[2], "a live owner is kept"
    assert rollout_owner.claim(current, None, 600, "", 1601, FOLDER) == ({}, current, None)
    assert rollout_owner.claim({}, None, 600, "", 1601, FOLDER) == ({}, None, None)


def test_age_and_expiry():
    current = rollout_owner.record(A, 600, 1000)
    assert rollout_owner.age(current, 1600) == 600 and not rollout_owner.expired(current, 1600)
    assert rollout_owner.expired(current, 1601)
    assert rollout_owner.age(current, 900) == 0, "a clock that went back gives no negative age"
    assert rollout_owner.age({}, 5) is None and rollout_owner.expired({}, 5)


def test_a_heartbeat_ahead_of_the_clock_counts_as_run_out():
    """The node's clock went back (or the record was edited): the record must not stay owned for as
    long as the clock went back."""
    current = rollout_owner.record(A, 3600, 100000)
    assert not rollout_owner.expired(current, 100000 - rollout_owner.CLOCK_SLACK), "within the slack: still A's"
    assert rollout_owner.ahead(current, 100000 - 301) == 301
    assert rollout_owner.expired(current, 100000 - 301)
    owner, replaced, refusal = rollout_owner.claim(current, B, 3600, "", 100000 - 5000, FOLDER)
    assert refusal is None and replaced == current and owner["run_id"] == B["run_id"]


@pytest.mark.parametrize("heartbeat", [float("inf"), float("-inf"), float("nan"), 1e400, 1e20, -5, True, "5"])
def test_a_heartbeat_that_is_no_time_gives_no_age_and_no_crash(heartbeat):
    owner = dict(A, heartbeat=heartbeat, lease=600)
    assert rollout_owner.age(owner, 1000) is None and rollout_owner.ahead(owner, 1000) == 0
    assert rollout_owner.expired(owner, 1000)


@pytest.mark.parametrize("owner,words", [
    ("ctl-a:1:2", "must be a mapping"),
    ({"controller": "x"}, "owner.run_id None must be a non-empty string"),
    ({"run_id": ""}, "owner.run_id '' must be a non-empty string"),
    ({"run_id": "r", "pid": 0}, "owner.pid 0 must be a process id"),
    ({"run_id": "r", "pid": True}, "owner.pid True must be a process id"),
    ({"run_id": "r", "user": "x" * 300}, "owner.user"),
    ({"run_id": "r", "pid_start": 5}, "owner.pid_start 5 must be a string"),
    ({"run_id": "r", "heartbeat": 5}, "unknown keys heartbeat"),
    ({"run_id": "r", "boot_id": 5}, "owner.boot_id 5 must be a string"),
    ({"run_id": "r", "pid_ns": 0}, "owner.pid_ns 0 must be the inode number of a pid namespace"),
    ({"run_id": "r", "pid_ns": "4026531836"}, "owner.pid_ns '4026531836'"),
])
def test_bad_owners_are_named(owner, words):
    problems = rollout_owner.owner_problems(owner)
    assert problems and words in " ".join(problems), problems


@pytest.mark.parametrize("lease,good", [(60, True), (86400, True), (59, False), (86401, False), (True, False),
                                        ("600", False), (-1, False)])
def test_lease_bounds(lease, good):
    problems = rollout_owner.lease_problems(lease)
    assert (problems == []) == good
    if not good:
        assert "from 60 to 86400" in problems[0]


# who this run is -------------------------------------------------------------------------------

def test_stat_is_read_past_a_command_name_with_spaces_and_parentheses():
    text = "4242 (ansible (x) y) S 4200 4242 4242 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1 2 3\n"
    assert rollout_owner.parse_stat(text) == {"pid": 4242, "ppid": 4200, "start": "987654"}
    assert rollout_owner.parse_stat("garbage") is None


@pytest.mark.parametrize("argv,ansible", [
    (["/usr/bin/python3", "/usr/bin/ansible-playbook", "-i", "x", "site.yml"], True),
    (["/venv/bin/python", ".venv/bin/ansible-playbook", "site.yml"], True),
    (["ansible-playbook", "site.yml"], True),
    (["/usr/bin/python3", "/usr/bin/ansible", "all", "-m", "ping"], True),
    (["python3", "-m", "ansible", "playbook", "site.yml"], True),
    (["/bin/sh", "-c", "ansible-playbook site.yml"], False),
    (["/usr/bin/python3", "/root/.ansible/tmp/AnsiballZ_command.py"], False),
    (["bash"], False),
    ([], False),
    (None, False),
])
def test_ansible_command_lines(argv, ansible):
    assert rollout_owner.is_ansible(argv) is ansible


PLAYBOOK = ["/usr/bin/python3", "/usr/bin/ansible-playbook", "site.yml"]


def tree(table):
    """cmdline_of and stat_of over {pid: (ppid, argv)}."""
    return (lambda pid: table[pid][1] if pid in table else None,
            lambda pid: {"pid": pid, "ppid": table[pid][0], "start": str(pid * 10)} if pid in table else None)


def test_a_worker_finds_the_main_process_it_was_forked_from():
    cmdline_of, stat_of = tree({30: (20, PLAYBOOK), 20: (10, PLAYBOOK), 10: (1, ["bash"]), 1: (0, ["init"])})
    assert rollout_owner.main_process(30, cmdline_of, stat_of) == 20
    assert rollout_owner.main_process(20, cmdline_of, stat_of) == 20, "the main process itself"


def test_a_lookup_in_a_process_forked_below_the_worker_finds_the_main_process():
    cmdline_of, stat_of = tree({40: (30, ["python3", "helper.py"]), 30: (20, PLAYBOOK), 20: (10, PLAYBOOK),
                                10: (0, ["bash"])})
    assert rollout_owner.main_process(40, cmdline_of, stat_of) == 20


def test_a_playbook_run_by_a_task_is_a_run_of_its_own():
    inner = ["/usr/bin/python3", "/usr/bin/ansible-playbook", "inner.yml"]
    cmdline_of, stat_of = tree({60: (50, inner), 50: (40, inner), 40: (30, ["python3", "AnsiballZ_command.py"]),
                                30: (20, PLAYBOOK), 20: (10, PLAYBOOK), 10: (0, ["bash"])})
    assert rollout_owner.main_process(60, cmdline_of, stat_of) == 50


def test_without_ansible_the_walk_finds_no_main_process():
    cmdline_of, stat_of = tree({7: (5, ["pytest"]), 5: (0, ["bash"])})
    assert rollout_owner.main_process(7, cmdline_of, stat_of) is None
    assert rollout_owner.main_process(7, lambda pid: None, lambda pid: None) is None
    looped = tree({7: (8, ["x"]), 8: (7, ["y"])})
    assert rollout_owner.main_process(7, *looped) is None, "a cycle ends the walk"


BOOT = "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9"


def fake_proc(tmp_path, table, boot=BOOT, self_pid=None):
    """A /proc with stat and cmdline for {pid: (ppid, argv, start)}, whose ``self`` names this process
    (or ``self_pid``: a /proc of another pid namespace) and which has a pid namespace file."""
    proc = tmp_path / "proc"
    proc.mkdir()
    me = os.getpid() if self_pid is None else self_pid
    os.symlink(str(me), str(proc / "self"))
    for pid, (ppid, argv, start) in table.items():
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "stat").write_text("%d (python3) S %d 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %s 1 2\n"
                                              % (pid, ppid, start))
        (proc / str(pid) / "cmdline").write_bytes(b"".join(part.encode() + b"\0" for part in argv))
    (proc / str(me) / "ns").mkdir(parents=True)
    (proc / str(me) / "ns" / "pid").write_text("")
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(boot + "\n")
    return str(proc)


def fake_ns(proc):
    return os.stat(os.path.join(proc, "self", "ns", "pid")).st_ino


def test_my_identity_names_the_main_process_its_start_boot_and_namespace(tmp_path, monkeypatch):
    me = os.getpid()
    proc = fake_proc(tmp_path, {me: (4242, PLAYBOOK, "111"), 4242: (77, PLAYBOOK, "98765"), 77: (0, ["bash"], "5")})
    monkeypatch.setattr(rollout_owner, "this_controller", lambda: "ctl-a")
    monkeypatch.setattr(rollout_owner, "this_user", lambda: "alice")
    ns = fake_ns(proc)
    assert rollout_owner.my_identity(proc) == {"run_id": "ctl-a:4242:98765:0f1e2d3c:%d" % ns, "controller": "ctl-a",
                                               "user": "alice", "pid": 4242, "pid_start": "98765", "boot_id": BOOT,
                                               "pid_ns": ns}


def test_without_proc_the_process_itself_when_not_started_by_multiprocessing(tmp_path, monkeypatch):
    """pytest is no worker: it is the main process of its own run, its start time from ps."""
    monkeypatch.setattr(rollout_owner, "this_controller", lambda: "ctl-a")
    found = rollout_owner.my_identity(str(tmp_path / "nowhere"), start_of=lambda pid: "@%d" % (pid * 10))
    me = os.getpid()
    assert found["pid"] == me and found["pid_start"] == "@%d" % (me * 10)
    assert found["run_id"] == "ctl-a:%d:@%d" % (me, me * 10)
    assert found["boot_id"] == "" and found["pid_ns"] is None


def _identities_in_a_worker(proc, answers):
    """A worker as Ansible starts one (multiprocessing, fork), and a process forked below it, without
    a /proc of their own."""
    first = rollout_owner.my_identity(proc)
    read_end, write_end = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(read_end)
        os.write(write_end, json.dumps(rollout_owner.my_identity(proc)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        helped = json.loads(handle.read().decode())
    os.waitpid(helper, 0)
    answers.put(("helper", helped))
    answers.put(("worker", first))


@pytest.mark.skipif(shutil.which("ps") is None, reason="needs ps")
@pytest.mark.parametrize("kind", ["no /proc", "a /proc of another pid namespace"])
def test_without_its_own_proc_every_worker_names_the_main_process(tmp_path, kind):
    """Workers are forked per task: naming the worker gave each task another run id, and a run was
    refused by its own record."""
    proc = str(tmp_path / "nowhere") if kind == "no /proc" else fake_proc(tmp_path, {}, self_pid=1)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    found = {}
    for _task in range(2):
        worker = context.Process(target=_identities_in_a_worker, args=(proc, answers))
        worker.start()
        for _answer in range(2):
            name, identity = answers.get(timeout=60)
            found.setdefault(name, []).append(identity)
        worker.join(30)
    identities = found["worker"] + found["helper"]
    assert all(identity == identities[0] for identity in identities), identities
    assert identities[0]["pid"] == os.getpid(), "the main process, not the worker"
    assert identities[0]["pid_start"] == rollout_owner.ps_start(os.getpid())
    assert identities[0]["pid_start"].startswith("@") and identities[0]["pid_start"][1:].isdigit()
    assert identities[0]["boot_id"] == "" and identities[0]["pid_ns"] is None


def test_a_proc_without_ansible_in_the_chain_trusts_multiprocessing(tmp_path, monkeypatch):
    """Run through a wrapper whose command line names no Ansible program: the walk finds nothing and
    the worker must not name itself."""
    me = os.getpid()
    proc = fake_proc(tmp_path, {me: (4242, ["wrapper"], "111"), 4242: (1, ["wrapper"], "98765")})
    monkeypatch.setattr(rollout_owner, "run_process", lambda: 4242)
    found = rollout_owner.my_identity(proc)
    assert found["pid"] == 4242 and found["pid_start"] == "98765" and found["boot_id"] == BOOT


@pytest.mark.parametrize("text,start", [
    ("Wed Nov 25 20:37:01 2026\n", "@1795639021"),
    ("  Thu Jan  1 00:00:05 1970 ", "@5"),
    ("25 Nov 2026 20:37", "25 Nov 2026 20:37"),
    ("", ""),
])
def test_ps_start_times(text, start):
    assert rollout_owner.parse_lstart(text) == start


def test_ps_start_of_a_process_that_does_not_exist():
    assert rollout_owner.ps_start(2 ** 22 + 7) == ""


def test_my_identity_on_this_machine_is_stable_and_names_a_live_process():
    first, second = rollout_owner.my_identity(), rollout_owner.my_identity()
    assert first == second
    assert rollout_owner.read_stat(first["pid"])["start"] == first["pid_start"]
    assert first["boot_id"] and first["pid_ns"] == os.stat("/proc/self/ns/pid").st_ino
    assert not rollout_owner.owner_gone(first), "this very process runs"


def here(proc, **changes):
    """An owner of this fake controller (host ctl-a, its boot and namespace), with ``changes``."""
    return dict(dict(A, boot_id=BOOT, pid_ns=fake_ns(proc)), **changes)


@pytest.mark.parametrize("make,gone", [
    (lambda proc: {}, True),
    (lambda proc: None, True),
    (lambda proc: here(proc, controller="elsewhere"), False),
    (lambda proc: here(proc, pid=4242, pid_start="98765"), False),
    (lambda proc: here(proc, pid=4242, pid_start="11111"), True),
    (lambda proc: here(proc, pid=999999, pid_start="98765"), True),
    (lambda proc: here(proc, pid=4242, pid_start=""), False),
    (lambda proc: {"run_id": "x", "controller": "ctl-a"}, False),
    # the same host name on another machine, or this one before a reboot: not judged from this /proc
    (lambda proc: here(proc, pid=999999, boot_id="a-different-boot"), False),
    # another container of this machine (same boot, other pid namespace)
    (lambda proc: here(proc, pid=999999, pid_ns=fake_ns(proc) + 1), False),
    # an owner recorded without boot or namespace (a controller without /proc)
    (lambda proc: dict(A, pid=999999), False),
    (lambda proc: here(proc, pid=999999, pid_ns=None), False),
])
def test_owner_gone(tmp_path, make, gone):
    proc = fake_proc(tmp_path, {4242: (1, PLAYBOOK, "98765")})
    assert rollout_owner.owner_gone(make(proc), controller="ctl-a", proc=proc) is gone


def test_owner_gone_cannot_tell_without_proc(tmp_path):
    assert rollout_owner.owner_gone(A, controller="ctl-a", proc=str(tmp_path / "nowhere")) is False


def test_owner_gone_cannot_tell_from_a_proc_of_another_namespace(tmp_path):
    proc = fake_proc(tmp_path, {4242: (1, PLAYBOOK, "98765")}, self_pid=1)
    assert rollout_owner.owner_gone(here(proc, pid=999999), controller="ctl-a", proc=proc) is False


# the rules on the node's record -------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    return durable.Node(str(tmp_path))


def begin(node, owner, files, now, **kwargs):
    return rollout.run_state(node, "begin", folder=FOLDER, files=files, services=["kubelet"], unschedulable=False,
                             reason="test", owner=owner, now=now, **kwargs)


def marker_bytes(node):
    with open(node.path(os.path.join(FOLDER, rollout.MARKER_NAME)), "rb") as handle:
        return handle.read()


def test_the_same_run_extends_its_record(node):
    put(node, "/etc/a", b"a\n")
    put(node, "/etc/b", b"b\n")
    begin(node, A, ["/etc/a"], now=1000)
    result = begin(node, A, ["/etc/b"], now=1100)
    assert result["resumed"] and result["changed"] and result["taken_over"] == {}
    assert [e["path"] for e in result["marker"]["files"]] == ["/etc/a", "/etc/b"]
    assert result["owner"] == dict(A, heartbeat=1100, lease=3600) and result["owner_age"] == 0
    assert result["owner_expired"] is False


def test_another_live_run_changes_nothing(node):
    put(node, "/etc/a", b"a\n")
    put(node, "/etc/b", b"b\n")
    begin(node, A, ["/etc/a"], now=1000)
    before = marker_bytes(node)
    files_before = sorted(os.listdir(node.path(FOLDER)))
    for state, extra in (("begin", {"files": ["/etc/b"]}), ("step", {"step": "x"}), ("restore", {}), ("finish", {})):
        with pytest.raises(rollout.OwnerRefused, match="belongs to run ctl-a:100:5000") as caught:
            rollout.run_state(node, state, folder=FOLDER, owner=B, now=1010, **extra)
        assert caught.value.owner["run_id"] == A["run_id"] and caught.value.owner_age == 10
        assert marker_bytes(node) == before, "%s wrote the record" % state
        assert sorted(os.listdir(node.path(FOLDER))) == files_before, "%s saved a copy" % state


def test_an_expired_lease_lets_another_run_take_over(node):
    put(node, "/etc/a", b"a\n")
    begin(node, A, ["/etc/a"], now=1000, lease=60)
    with pytest.raises(rollout.OwnerRefused):
        begin(node, B, [], now=1060)
    result = begin(node, B, [], now=1061)
    assert result["owner"]["run_id"] == B["run_id"] and result["taken_over"]["run_id"] == A["run_id"]
    assert result["changed"], "a new owner is a change of the record"
    previous = result["marker"]["previous_owners"]
    assert [p["run_id"] for p in previous] == [A["run_id"]] and previous[0]["replaced_by"] == B["run_id"]
    assert json.loads(marker_bytes(node).decode())["owner"]["run_id"] == B["run_id"]


@pytest.mark.parametrize("take_over", ["*", A["run_id"]])
def test_take_over_of_a_live_owner(node, take_over):
    begin(node, A, [], now=1000)
    result = rollout.run_state(node, "restore", folder=FOLDER, owner=B, take_over=take_over, now=1001)
    assert result["owner"]["run_id"] == B["run_id"] and result["taken_over"]["run_id"] == A["run_id"]
    result = rollout.run_state(node, "finish", folder=FOLDER, owner=B, now=1002)
    assert result["changed"] and not result["active"] and result["owner"] == {} and result["owner_expired"]


def test_a_record_of_the_previous_release_has_no_owner_and_is_taken_over(node):
    """Version 1 markers (no owner, regular files only) stay readable and become the caller's."""
    put(node, "/etc/a", b"before\n")
    put(node, os.path.join(FOLDER, durable.saved_name("/etc/a")), b"before\n")
    v1 = {"version": 1, "started": 5, "reason": "kubelet configuration", "unschedulable": False,
          "services": ["kubelet"], "steps": ["kubelet configuration"],
          "files": [{"path": "/etc/a", "existed": True, "saved": durable.saved_name("/etc/a"), "mode": 0o644,
                     "uid": os.getuid(), "gid": os.getgid(), "sha256": durable.sha256_bytes(b"before\n")},
                    {"path": "/etc/new", "existed": False}]}
    put(node, os.path.join(FOLDER, rollout.MARKER_NAME), json.dumps(v1).encode())
    os.chmod(node.path("/etc/a"), 0o644)
    query = rollout.run_state(node, "query", folder=FOLDER, now=1000)
    assert query["active"] and query["owner"] == {} and query["owner_expired"] is True and query["owner_age"] is None
    put(node, "/etc/a", b"after\n")
    put(node, "/etc/new", b"x\n")
    result = rollout.run_state(node, "restore", folder=FOLDER, owner=B, now=1000)
    assert sorted(result["restored"]) == ["/etc/a", "/etc/new"] and result["taken_over"] == {}
    assert result["owner"]["run_id"] == B["run_id"]
    with open(node.path("/etc/a"), "rb") as handle:
        assert handle.read() == b"before\n"
    written = json.loads(marker_bytes(node).decode())
    assert written["version"] == rollout.MARKER_VERSION and written["owner"]["run_id"] == B["run_id"]


def test_query_reports_the_owner_and_its_age(node):
    begin(node, A, [], now=1000, lease=120)
    result = rollout.run_state(node, "query", folder=FOLDER, now=1100)
    assert result["owner"]["run_id"] == A["run_id"] and result["owner_age"] == 100
    assert result["owner_expired"] is False and "owned by run ctl-a:100:5000" in result["summary"]
    assert rollout.run_state(node, "query", folder=FOLDER, now=1121)["owner_expired"] is True
    assert rollout.run_state(node, "query", folder=FOLDER + "-none", now=1)["owner_expired"] is True


def test_every_call_of_the_owner_refreshes_the_heartbeat(node):
    begin(node, A, [], now=1000)
    rollout.run_state(node, "step", folder=FOLDER, step="drained", owner=A, now=1200)
    assert json.loads(marker_bytes(node).decode())["owner"]["heartbeat"] == 1200
    result = rollout.run_state(node, "restore", folder=FOLDER, owner=A, now=1300)
    assert not result["changed"], "a heartbeat alone is no change"
    assert json.loads(marker_bytes(node).decode())["owner"]["heartbeat"] == 1300
    result = rollout.run_state(node, "begin", folder=FOLDER, owner=A, now=1400)
    assert not result["changed"] and json.loads(marker_bytes(node).decode())["owner"]["heartbeat"] == 1400


def test_check_mode_refuses_the_same_and_writes_nothing(node):
    begin(node, A, [], now=1000)
    before = marker_bytes(node)
    with pytest.raises(rollout.OwnerRefused):
        rollout.run_state(node, "begin", folder=FOLDER, owner=B, check_mode=True, now=1001)
    rollout.run_state(node, "step", folder=FOLDER, step="x", owner=A, check_mode=True, now=1001)
    assert marker_bytes(node) == before


def test_the_module_fails_with_the_owner_in_its_result(tmp_path):
    folder = str(tmp_path / "rollout")
    failed, result = run(rollout_state, {"folder": folder, "state": "begin", "owner": A, "lease": 600})
    assert not failed and result["owner"]["run_id"] == A["run_id"] and result["owner"]["lease"] == 600
    failed, result = run(rollout_state, {"folder": folder, "state": "begin", "owner": B})
    assert failed and "belongs to run ctl-a:100:5000 (alice@ctl-a, pid 100)" in result["msg"]
    assert result["owner"]["run_id"] == A["run_id"] and result["owner_expired"] is False
    assert isinstance(result["owner_age"], int)
    failed, result = run(rollout_state, {"folder": folder, "state": "begin", "owner": B, "take_over": "*"})
    assert not failed and result["taken_over"]["run_id"] == A["run_id"] and result["owner"]["run_id"] == B["run_id"]


def test_the_module_takes_the_lookups_identity_as_it_is(tmp_path):
    """The role passes lookup('numa.kube.rollout_owner') straight to the owner option."""
    folder = str(tmp_path / "rollout")
    me = rollout_owner.my_identity()
    failed, result = run(rollout_state, {"folder": folder, "state": "begin", "owner": me})
    assert not failed, result
    assert result["owner"]["boot_id"] == me["boot_id"] and result["owner"]["pid_ns"] == me["pid_ns"]
    assert result["owner"]["run_id"] == me["run_id"]
    failed, result = run(rollout_state, {"folder": folder, "state": "step", "step": "x", "owner": me})
    assert not failed and result["owner"]["pid_ns"] == me["pid_ns"]
    written = json.loads(open(os.path.join(folder, rollout.MARKER_NAME)).read())
    assert written["owner"]["boot_id"] == me["boot_id"]


def test_the_module_takes_an_identity_of_a_controller_without_proc(tmp_path):
    folder = str(tmp_path / "rollout")
    owner = rollout_owner.identity("ctl-a", "alice", 4242, "@1764000000")
    failed, result = run(rollout_state, {"folder": folder, "state": "begin", "owner": owner})
    assert not failed, result
    assert "pid_ns" not in result["owner"] and result["owner"]["boot_id"] == ""


def test_a_record_whose_clock_went_back_is_taken_over_and_says_so(node):
    begin(node, A, [], now=100000)
    result = rollout.run_state(node, "query", folder=FOLDER, now=90000)
    assert result["owner_expired"] is True and result["owner_age"] == 0
    assert "its heartbeat is 10000 s ahead of the node's clock: the clock went back" in result["summary"]
    result = rollout.run_state(node, "restore", folder=FOLDER, owner=B, now=90000)
    assert result["taken_over"]["run_id"] == A["run_id"] and result["owner"]["run_id"] == B["run_id"]


@pytest.mark.parametrize("args,words", [
    ({"lease": 10}, "lease 10 must be a whole number of seconds from 60 to 86400"),
    ({"owner": {"run_id": "r", "pid": -3}}, "owner.pid -3 must be a process id"),
    ({"owner": {"pid": 3}}, "run_id"),
])
def test_the_module_refuses_bad_owner_options(tmp_path, args, words):
    folder = tmp_path / "rollout"
    failed, result = run(rollout_state, dict({"folder": str(folder), "state": "begin"}, **args))
    assert failed and words in result["msg"], result
    assert not folder.exists(), "nothing was created"


# two runs at once ---------------------------------------------------------------------------------

class SlowNode(durable.Node):
    """A node whose marker write waits: the run holding the lock is caught in the middle of it."""

    def __init__(self, root, started, pause):
        durable.Node.__init__(self, root)
        self.started = started
        self.pause = pause

    def write(self, path, *args, **kwargs):
        if path.endswith(rollout.MARKER_NAME):
            self.started.set()
            time.sleep(self.pause)
        return durable.Node.write(self, path, *args, **kwargs)


def _begin_in_child(root, owner, files, started, pause, answers):
    try:
        result = rollout.run_state(SlowNode(root, started, pause), "begin", folder=FOLDER, files=files,
                                   owner=owner)
        answers.put((owner["run_id"], "ok", time.time(), result["marker"]["owner"]["run_id"]))
    except rollout.RolloutError as exc:
        answers.put((owner["run_id"], "refused", time.time(), str(exc)))


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_two_runs_at_once_serialise_and_the_second_names_the_first(tmp_path):
    node = durable.Node(str(tmp_path))
    put(node, "/etc/a", b"a\n")
    put(node, "/etc/b", b"b\n")
    context = multiprocessing.get_context("fork")
    started, answers = context.Event(), context.Queue()
    one = context.Process(target=_begin_in_child, args=(str(tmp_path), A, ["/etc/a"], started, 1.0, answers))
    one.start()
    assert started.wait(10), "the first run never reached its marker write"
    two = context.Process(target=_begin_in_child, args=(str(tmp_path), B, ["/etc/b"], context.Event(), 0, answers))
    two.start()
    results = dict((answer[0], answer[1:]) for answer in (answers.get(timeout=60), answers.get(timeout=60)))
    one.join(10)
    two.join(10)
    assert results[A["run_id"]][0] == "ok"
    assert results[B["run_id"]][0] == "refused", results
    assert "belongs to run %s" % A["run_id"] in results[B["run_id"]][2]
    # (no comparison of the two answers' clocks: each is taken after the lock is let go, in either order)
    marker = rollout.load_marker(node, FOLDER)
    assert [e["path"] for e in marker["files"]] == ["/etc/a"] and marker["owner"]["run_id"] == A["run_id"]


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_two_calls_of_one_run_at_once_lose_nothing(tmp_path):
    """Without the lock the second call reads no marker while the first is writing, and the first's
    write then drops the second's file."""
    node = durable.Node(str(tmp_path))
    put(node, "/etc/a", b"a\n")
    put(node, "/etc/b", b"b\n")
    context = multiprocessing.get_context("fork")
    started, answers = context.Event(), context.Queue()
    one = context.Process(target=_begin_in_child, args=(str(tmp_path), A, ["/etc/a"], started, 1.0, answers))
    one.start()
    assert started.wait(10)
    two = context.Process(target=_begin_in_child, args=(str(tmp_path), A, ["/etc/b"], context.Event(), 0, answers))
    two.start()
    outcomes = [answers.get(timeout=60)[1], answers.get(timeout=60)[1]]
    one.join(10)
    two.join(10)
    assert outcomes == ["ok", "ok"]
    assert sorted(e["path"] for e in rollout.load_marker(node, FOLDER)["files"]) == ["/etc/a", "/etc/b"]


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_a_lock_held_too_long_is_named_and_nothing_is_written(tmp_path):
    node = durable.Node(str(tmp_path))
    begin(node, A, [], now=1000)
    before = marker_bytes(node)
    lock = node.path(os.path.join(FOLDER, durable.LOCK_NAME))
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(durable.DurableError, match=r"lock %s is still held by another process after 0.3 s"
                           % os.path.join(FOLDER, durable.LOCK_NAME)):
            rollout.run_state(node, "step", folder=FOLDER, step="x", owner=A, lock_wait=0.3)
        assert 0.3 <= time.monotonic() - started < 5
    finally:
        os.close(fd)
    assert marker_bytes(node) == before
    assert rollout.run_state(node, "step", folder=FOLDER, step="x", owner=A, lock_wait=0.3)["changed"]
