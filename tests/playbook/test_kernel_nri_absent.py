# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel_args and containerd_nri roles run by ansible-playbook on this machine against files in a
temporary folder, with numa_kube_state absent: what they put back, the record they remove, the envelope
they go through, and a re-run that changes nothing. The Kubernetes API, systemctl and kubelet's health
are the stand-ins of test_rollout_envelope; grub's regeneration, containerd and its restart are
stand-ins here. No reboot is needed in these cases: the running kernel's command line (this
machine's /proc/cmdline) is already what the boot configuration gets."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import check_params, dangerous_name
# the fixture cluster: test_rollout_envelope's stand-ins for the Kubernetes API, systemctl and kubelet's health
from ansible_collections.numa.kube.tests.playbook.test_rollout_envelope import ROOT, cluster  # noqa: F401 pylint: disable=unused-import

RECORD_DIR = "applied"


def play(tmp_path, cluster, tasks, check=False, **variables):  # noqa: F811 (the fixture imported above)
    """One play on localhost; returns (exit code, {task name: [results]}, output)."""
    base = dict(cluster.variables, rollout_marker_dir=str(tmp_path / "record"),
                numa_kube_record_dir=str(tmp_path / RECORD_DIR))
    base.update(variables)
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "vars": base, "tasks": tasks}]))
    environment = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
                       ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([cluster.collections,
                                                                 os.path.join(ROOT, ".venv", "collections")]),
                       ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    environment.update(cluster.env)
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)] + (["--check"] if check else [])
    done = subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    results = {}
    report = json.loads(done.stdout)
    for each in report["plays"][0]["tasks"]:
        name = each["task"]["name"].split(" : ", 1)[-1]
        results.setdefault(name, []).append(each["hosts"].get("localhost", {}))
    return done.returncode, results, done.stdout + done.stderr, report["stats"]["localhost"]


def role(name):
    return {"name": "the role", "ansible.builtin.include_role": {"name": "numa.kube.%s" % name}}


def show(name, expression):
    return {"name": name, "ansible.builtin.debug": {"msg": "{{ %s }}" % expression}}


def ran(results, name):
    return [r for r in results.get(name, []) if not r.get("skipped")]


# --- kernel parameters --------------------------------------------------------------------------------

def running_param():
    """A parameter of this machine's running command line numa.kube may write back: plain, not refused,
    its name only once."""
    with open("/proc/cmdline") as handle:
        words = handle.read().split("--")[0].split()
    names = [w.split("=", 1)[0] for w in words]
    for word in words:
        name = word.split("=", 1)[0]
        if not check_params([word], "x") and dangerous_name(name) is None and names.count(name) == 1:
            return word
    pytest.skip("the running kernel's command line has no parameter numa.kube could put back")


@pytest.fixture
def grub(tmp_path):
    """The grub defaults and grub.cfg of a node where numa.kube once added numa_kube_test_flag
    (which the running kernel lacks) and removed a parameter the running kernel has: the record
    that change left, and the variables that point the role at them."""
    kept = running_param()
    path = tmp_path / "grub"
    path.write_text('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="console=ttyS0 numa_kube_test_flag"\n')
    cfg = tmp_path / "grub.cfg"
    cfg.write_text("generated once\n")
    record = tmp_path / RECORD_DIR / "kernel.json"
    record.parent.mkdir(mode=0o700)
    record.write_text(json.dumps({"version": 1, "method": "grub_default", "path": str(path),
                                  "variable": "GRUB_CMDLINE_LINUX", "added": ["numa_kube_test_flag"],
                                  "removed": [kept]}))
    variables = {"numa_kube_state": "absent", "kernel_args_method": "grub_default",
                 "kernel_args_grub_default_path": str(path), "kernel_args_grub_cfg_path": str(cfg),
                 "kernel_args_grub_update_command": "sh -c 'echo regenerated >> %s'" % cfg,
                 "kernel_args_backup": False}
    return path, cfg, record, kept, variables


def test_absent_without_a_reboot_allowed_writes_nothing_and_says_what_waits(tmp_path, cluster, grub):  # noqa: F811
    path, cfg, record, kept, variables = grub
    before = path.read_text()
    tasks = [role("kernel_args"), show("pending", "kernel_args_reboot_pending")]
    rc, results, output, _stats = play(tmp_path, cluster, tasks, **variables)
    assert rc == 0, output[-3000:]
    message = ran(results, "Say what waits for kernel_args_reboot_ok")[0]["msg"]
    assert "take out numa_kube_test_flag and put back %s" % kept in message, message
    assert path.read_text() == before and cfg.read_text() == "generated once\n" and record.exists()
    # the running kernel has the command line numa.kube would write already: no reboot is pending
    assert results["pending"][0]["msg"] is False
    assert not (tmp_path / "record").exists() or not os.listdir(str(tmp_path / "record")), "no envelope opened"


def test_absent_takes_out_what_numa_kube_set_inside_the_envelope_then_changes_nothing(tmp_path, cluster, grub):  # noqa: F811
    path, cfg, record, kept, variables = grub
    variables["kernel_args_reboot_ok"] = True
    # a trailing slash names the same folder (review 1 finding 3: the envelope refused the doubled one)
    variables["numa_kube_record_dir"] = str(tmp_path / RECORD_DIR) + "/"
    tasks = [role("kernel_args"), show("after", "[rollout_open | default(false), kernel_args_reboot_pending]")]
    rc, results, output, _stats = play(tmp_path, cluster, tasks, check=True, **variables)
    assert rc == 0, output[-3000:]
    assert record.exists() and "numa_kube_test_flag" in path.read_text(), "check mode changes nothing"

    rc, results, output, _stats = play(tmp_path, cluster, tasks, **variables)
    assert rc == 0, output[-3000:]
    assert 'GRUB_CMDLINE_LINUX="console=ttyS0 %s"\n' % kept in path.read_text()
    assert cfg.read_text() == "generated once\nregenerated\n", "grub.cfg regenerated from the defaults"
    assert not record.exists(), "the record went with the change"
    assert results["after"][0]["msg"] == [False, False], "the envelope closed, no reboot pending"
    assert not ran(results, "Reboot"), "the running kernel had the command line already"
    opened = ran(results, "Record the change on the node before anything disruptive")[0]["marker"]
    assert [entry["path"] for entry in opened["files"]] == [str(path), str(cfg), str(record)]
    assert opened["reason"] == "kernel parameters taken out"
    assert not os.listdir(str(tmp_path / "record")) or os.listdir(str(tmp_path / "record")) == [".lock"]

    after = path.read_text()
    rc, results, output, stats = play(tmp_path, cluster, [role("kernel_args")], **variables)
    assert rc == 0, output[-3000:]
    assert stats["changed"] == 0, "a second run changed something"
    said = ran(results, "Say that numa.kube set no kernel parameters here")[0]["msg"]
    assert "does not exist: numa.kube has no kernel parameters of its own" in said
    assert path.read_text() == after


def test_a_failure_in_the_envelope_puts_the_grub_files_and_the_record_back(tmp_path, cluster, grub):  # noqa: F811
    path, cfg, record, _kept, variables = grub
    variables.update(kernel_args_reboot_ok=True, kernel_args_grub_update_command="false")
    before = (path.read_text(), cfg.read_text(), record.read_text())
    rc, results, output, _stats = play(tmp_path, cluster, [role("kernel_args")], **variables)
    assert rc != 0
    failure = ran(results, "Fail with what went wrong")[0]["msg"]
    assert "back as it was" in failure, failure
    assert (path.read_text(), cfg.read_text(), record.read_text()) == before


def test_only_the_record_goes_when_everything_was_taken_out_by_hand(tmp_path, cluster, grub):  # noqa: F811
    path, cfg, record, kept, variables = grub
    path.write_text('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="console=ttyS0 %s"\n' % kept)
    rc, results, output, _stats = play(tmp_path, cluster, [role("kernel_args")], **variables)
    assert rc == 0, output[-3000:]
    assert not record.exists() and cfg.read_text() == "generated once\n"
    assert ran(results, "Set the kernel parameters for future boots")[0]["changed"] is True
    assert "numa_kube_test_flag, which numa.kube added, is no longer there" in output


# --- containerd NRI -----------------------------------------------------------------------------------

FAKE_CONTAINERD = '''#!/bin/sh
if [ "$1" = --version ]; then
  echo "containerd github.com/containerd/containerd v1.7.24 abcdef"
elif [ "$1" = config ] && [ "$2" = dump ]; then
  cat "$NUMA_KUBE_TEST_CONTAINERD_CONFIG"
else
  exit 1
fi
'''

# systemctl as test_rollout_envelope stands it in, and a containerd restart makes the NRI socket
FAKE_SYSTEMCTL = '''#!/bin/sh
echo "$*" >> "$(dirname "$0")/systemctl.log"
if [ "$1" = show ] && [ "$2" = -p ]; then
  echo 4242
elif [ "$1" = show ]; then
  printf 'Id=%%s\\nLoadState=loaded\\nActiveState=active\\nSubState=running\\nMainPID=4242\\n' "$2"
elif [ "$1" = restart ] && [ "$2" = containerd ] && [ ! -S "$NUMA_KUBE_TEST_NRI_SOCKET" ]; then
  %s -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$NUMA_KUBE_TEST_NRI_SOCKET"
fi
exit 0
'''

DISABLED = 'version = 2\n# the user keeps NRI off\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'


@pytest.fixture
def containerd(tmp_path, cluster):  # noqa: F811
    config = tmp_path / "containerd" / "config.toml"
    config.parent.mkdir()
    config.write_text(DISABLED)
    folder = "/run/numa-kube-test-%s" % uuid.uuid4().hex[:12]
    os.mkdir(folder)
    socket_path = os.path.join(folder, "nri.sock")
    (cluster.bin / "containerd").write_text(FAKE_CONTAINERD)
    (cluster.bin / "containerd").chmod(0o755)
    (cluster.bin / "systemctl").write_text(FAKE_SYSTEMCTL % sys.executable)
    cluster.env.update(NUMA_KUBE_TEST_CONTAINERD_CONFIG=str(config), NUMA_KUBE_TEST_NRI_SOCKET=socket_path)
    variables = {"containerd_nri_distribution": "containerd", "containerd_nri_config_path": str(config),
                 "containerd_nri_settings": {"socket_path": socket_path}, "containerd_nri_backup": False,
                 "containerd_nri_socket_timeout": 20}
    yield config, tmp_path / RECORD_DIR / "containerd-nri.json", socket_path, variables
    shutil.rmtree(folder)


def restarts(cluster):  # noqa: F811
    return [call for call in cluster.systemctl() if call.startswith("restart")]


def test_nri_is_put_back_as_it_was_inside_the_envelope(tmp_path, cluster, containerd):  # noqa: F811
    config, record, socket_path, variables = containerd
    rc, results, output, _stats = play(tmp_path, cluster, [role("containerd_nri")], **variables)
    assert rc == 0, output[-3000:]
    assert "disable = false" in config.read_text() and record.exists()
    assert restarts(cluster) == ["restart containerd"] and os.path.exists(socket_path)

    # trailing slashes name the same folder (review 1 finding 3)
    absent = dict(variables, numa_kube_state="absent", numa_kube_record_dir=str(tmp_path / RECORD_DIR) + "//")
    rc, results, output, _stats = play(tmp_path, cluster, [role("containerd_nri")], check=True, **absent)
    assert rc == 0, output[-3000:]
    assert "disable = false" in config.read_text() and record.exists(), "check mode changes nothing"
    assert restarts(cluster) == ["restart containerd"]

    rc, results, output, _stats = play(tmp_path, cluster, [role("containerd_nri"),
                                                           show("after", "rollout_open")], **absent)
    assert rc == 0, output[-3000:]
    assert config.read_text() == DISABLED, "config.toml is as the user had it"
    assert not record.exists()
    assert restarts(cluster) == ["restart containerd"] * 2, "containerd restarted on the previous configuration"
    proven = ran(results, "Fail when containerd does not run with the NRI setting written")
    assert proven and not proven[0].get("failed"), "containerd config dump was read back"
    assert not ran(results, "Wait for the NRI socket"), "NRI is off again: no socket to wait for"
    opened = ran(results, "Record the change on the node before anything disruptive")[0]["marker"]
    assert [entry["path"] for entry in opened["files"]] == [str(config), str(record)]
    assert opened["services"] == ["containerd"] and opened["reason"] == "containerd NRI put back"
    assert results["after"][0]["msg"] is False, "the envelope closed"

    rc, results, output, stats = play(tmp_path, cluster, [role("containerd_nri")], **absent)
    assert rc == 0, output[-3000:]
    assert stats["changed"] == 0 and restarts(cluster) == ["restart containerd"] * 2
    said = ran(results, "Say that numa.kube changed nothing in containerd's NRI settings here")[0]["msg"]
    assert "nothing was changed" in said


def test_a_damaged_record_stops_the_role_before_anything_changes(tmp_path, cluster, containerd):  # noqa: F811
    config, record, _socket_path, variables = containerd
    record.parent.mkdir()
    record.write_text('{"version": 1, "distribution": "containerd"')
    rc, results, output, _stats = play(tmp_path, cluster, [role("containerd_nri")],
                                       **dict(variables, numa_kube_state="absent"))
    assert rc != 0
    message = ran(results, "Work out the NRI change")[0]["msg"]
    assert re.search(r"record .*containerd-nri.json is not valid JSON", message), message
    assert config.read_text() == DISABLED and restarts(cluster) == []
