# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""change_nodes.yml runs its nodes in the batches numa_kube_batch_size asks for - a number, a
percentage or a ramp, templated into the play keyword serial by the pinned ansible-core - stops at
a failure in a ramp's first batch of one, and refuses a value given where serial cannot see it;
site.yml's preflight refuses a batch size serial would misread, naming it. Six local hosts, every
part off and no API: only the envelope's own read (recover) and the batch check run per node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTS = ["node%02d" % index for index in range(1, 7)]
OFF = {"kernel_args_manage": False, "kubelet_manage": False, "containerd_nri_manage": False, "rollout_drain": False}


def play(tmp_path, playbook, extra, inventory_vars=None, host_vars=None, more=()):
    hosts = dict((name, dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                              "rollout_marker_dir": str(tmp_path / "record" / name)}, **(host_vars or {}).get(name, {})))
                 for name in HOSTS)
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"all": {"vars": inventory_vars or {}, "children": {"numa_nodes": {"hosts": hosts}}}}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS="10",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               os.path.join(ROOT, "playbooks", playbook), "-e", json.dumps(dict(OFF, **extra))] + list(more)
    if playbook == "change_nodes.yml":
        command += ["--tags", "no_part"]  # only the tasks tagged always: the batch check and the envelope's own
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    return done, json.loads(done.stdout)


def batches(report):
    """The hosts of each batch, in order: the json callback starts a play entry per batch."""
    found = []
    for entry in report["plays"]:
        hosts = sorted(set(host for task in entry["tasks"] for host in task["hosts"]))
        if hosts:
            found.append(hosts)
    return found


def test_nodes_change_in_the_batches_of_a_ramp(tmp_path):
    # a number, a percentage (34 % of 6 is 2) and the last item repeated; the sizes of every other
    # value are compared with ansible-core's own batching in tests/unit (test_rollout_batches.py)
    done, report = play(tmp_path, "change_nodes.yml", {"numa_kube_batch_size": [1, "34%", "25%"]})
    assert done.returncode == 0, done.stdout[-3000:]
    seen = batches(report)
    assert [len(batch) for batch in seen] == [1, 2, 1, 1, 1], seen
    assert sum(seen, []) == HOSTS, "every node once, in inventory order"


def test_a_failure_in_the_first_batch_of_a_ramp_stops_the_run_whatever_the_percentage(tmp_path):
    # node01's record folder is refused by the envelope's first read: its batch of one fails whole,
    # and ansible-core ends the play then, even with 99 % of failures tolerated
    ramp = {"numa_kube_batch_size": [1, "50%"], "numa_kube_max_fail_percentage": 99}
    done, report = play(tmp_path, "change_nodes.yml", ramp,
                        host_vars={"node01": {"rollout_marker_dir": "relative/folder"}})
    assert done.returncode != 0
    assert batches(report) == [["node01"]], batches(report)
    assert report["stats"]["node01"]["failures"] == 1 and "node02" not in report["stats"]


def test_a_tolerated_failure_lets_the_next_batches_run(tmp_path):
    done, report = play(tmp_path, "change_nodes.yml", {"numa_kube_batch_size": 3, "numa_kube_max_fail_percentage": 34},
                        host_vars={"node02": {"rollout_marker_dir": "relative/folder"}})
    assert [len(batch) for batch in batches(report)] == [3, 3], batches(report)
    assert done.returncode != 0 and report["stats"]["node02"]["failures"] == 1
    assert all(report["stats"][name]["failures"] == 0 for name in HOSTS if name != "node02")


def test_a_batch_size_from_the_inventory_is_refused_at_the_first_batch(tmp_path):
    """serial is templated before any host's variables: from group_vars it would silently be 1."""
    done, report = play(tmp_path, "change_nodes.yml", {}, inventory_vars={"numa_kube_batch_size": 3})
    assert done.returncode != 0
    check = [task for task in report["plays"][0]["tasks"]
             if task["task"]["name"] == "Check that this batch is as numa_kube_batch_size asks"][0]
    message = check["hosts"]["node01"]["msg"]
    assert "This batch has 1 node(s)" in message and "asks for 3" in message and "with -e" in message, message
    assert len(batches(report)) == 1, "nothing ran after the refusal"


@pytest.mark.parametrize("size", [0, "150%", "five", [1, 2.5], "5% ", "5%\n"])
def test_the_preflight_refuses_a_batch_size_serial_would_misread(tmp_path, size):
    done, report = play(tmp_path, "site.yml", {"numa_kube_batch_size": size},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "numa_kube_batch_size is" in message and "a whole number of nodes of 1 or more" in message, message
    assert len(report["plays"]) == 1, "no node was read or changed"


def test_the_preflight_shows_the_batches_and_the_forks_they_need(tmp_path):
    # a record folder refused by the next check ends the run right after the batches are shown
    done, report = play(tmp_path, "site.yml", {"numa_kube_batch_size": [1, "50%"], "numa_kube_max_fail_percentage": "10%",
                                               "numa_kube_record_dir": "relative"},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0 and len(report["plays"]) == 1
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Show the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "6 worker(s) in batches of 1, 3, 2" in message and "at least 3 fork(s)" in message, message


def test_the_preflight_refuses_a_failure_percentage_above_100(tmp_path):
    done, report = play(tmp_path, "site.yml", {"numa_kube_max_fail_percentage": 150},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert message.startswith("numa_kube_max_fail_percentage is 150: it must be a number from 0 to 100"), message


def test_the_preflight_refuses_its_own_control_plane_batch_from_the_command_line(tmp_path):
    """Hostile review: -e numa_kube_serial=100% overrode the one-at-a-time rule for control-plane nodes
    (change_nodes.yml took it before numa_kube_batch_size, and the preflight did not check it)."""
    done, report = play(tmp_path, "site.yml", {"__numa_kube_control_plane_serial": "100%"},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "__numa_kube_control_plane_serial is set (\"100%\")" in message and "one at a time" in message, message
    assert len(report["plays"]) == 1, "no node was read or changed"


def test_the_preflight_refuses_one_node_name_for_several_hosts(tmp_path):
    """The new-user walk: the EKS inventories set rollout_node_name for the whole group; copied to a
    fleet, every host would drain and label the same Node."""
    done, report = play(tmp_path, "site.yml", {}, inventory_vars={"rollout_node_name": "ip-10-0-1-10.ec2.internal"},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check that no two hosts")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "ip-10-0-1-10.ec2.internal for %s" % ", ".join(HOSTS) in message, message
    assert len(report["plays"]) == 1, "no node was read or changed"
    # one name a host, or none (the host name), passes
    names = dict((host, {"rollout_node_name": "n-%s" % host}) for host in HOSTS[:3])
    done, report = play(tmp_path, "site.yml", {}, host_vars=names,
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check that no two hosts")][0]
    assert not list(task["hosts"].values())[0].get("failed"), task


def test_the_preflight_refuses_hosts_whose_host_name_is_one_node(tmp_path):
    """Review of the fix: the check compared only the names given, where the Node a host works on is
    rollout_node_name or else its host name; local hosts here share this machine's host name."""
    done, report = play(tmp_path, "site.yml", {}, more=["--check", "--tags", "no_part"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check that no two hosts")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "%s for %s" % (os.uname()[1], ", ".join(HOSTS)) in message, message
    names = dict((host, {"rollout_node_name": "n-%s" % host}) for host in HOSTS)
    done, report = play(tmp_path, "site.yml", {}, host_vars=names, more=["--check", "--tags", "no_part"])
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check that no two hosts")][0]
    assert not list(task["hosts"].values())[0].get("failed"), task


def test_the_preflight_refuses_the_variable_site_yml_no_longer_reads(tmp_path):
    """Review of the fixes: numa_kube_serial, which change_nodes.yml used to read before
    numa_kube_batch_size, was ignored without a word."""
    done, report = play(tmp_path, "site.yml", {"numa_kube_serial": 3},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "numa_kube_serial is set (3), which site.yml no longer reads: set numa_kube_batch_size" in message, message


def test_the_preflight_refuses_its_own_targets_from_the_command_line(tmp_path):
    """Third review: -e numa_kube_targets=numa_nodes put the control-plane nodes into the workers'
    batch (and changed every node twice); site.yml's own variable is private now, and refused."""
    done, report = play(tmp_path, "site.yml", {"__numa_kube_targets": "numa_nodes"},
                        more=["--check", "--start-at-task", "Check what is asked of the node (numa_kube_state)"])
    assert done.returncode != 0
    task = [task for task in report["plays"][0]["tasks"] if task["task"]["name"].startswith("Check the batches")][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "__numa_kube_targets is set (\"numa_nodes\"), with -e: it is site.yml's own" in message, message
    assert len(report["plays"]) == 1, "no node was read or changed"


def test_a_run_started_past_the_preflight_still_changes_control_plane_nodes_one_at_a_time(tmp_path):
    """Third review: --start-at-task past the preflight let -e __numa_kube_control_plane_serial=100%
    through; the batch check in change_nodes.yml refuses it too."""
    done, report = play(tmp_path, "change_nodes.yml", {"__numa_kube_control_plane_serial": "100%"})
    assert done.returncode != 0
    task = report["plays"][0]["tasks"][0]
    message = list(task["hosts"].values())[0]["msg"]
    assert "__numa_kube_control_plane_serial is \"100%\": site.yml sets it for its control-plane nodes" in message, \
        message


def test_a_take_out_of_other_parts_leaves_the_labels_alone(tmp_path):
    """Third review: numa_kube_state=absent with --tags kernel_args took every node's numa.kube labels
    off while kubelet, not taken out, still aligned. The labels say what kubelet runs: they come off
    only in a run that takes kubelet's part out (fourth review: --tags tagged runs it too)."""
    absent = {"numa_kube_state": "absent", "kubelet_manage": True}

    def label_off(report):
        return [result for entry in report["plays"] for task in entry["tasks"]
                if task["task"]["name"] == "Take the Node's numa.kube labels off before the node is taken out"
                for result in task["hosts"].values()]

    done, report = play(tmp_path, "change_nodes.yml", absent, more=["--tags", "kernel_args"])
    assert done.returncode == 0, done.stdout[-3000:]
    seen = label_off(report)
    assert len(seen) == len(HOSTS) and all(result.get("skipped") and "__numa_kube_kubelet_part" in
                                           result.get("false_condition", "") for result in seen), seen
    # the same take-out with kubelet's part in it (it then fails here, with no kubelet on this machine)
    for tags in ("kubelet", "tagged"):
        done, report = play(tmp_path, "change_nodes.yml", absent, more=["--tags", tags])
        seen = label_off(report)
        assert seen and not any(result.get("skipped") for result in seen), (tags, seen)
