# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml picks its scheduling stacks in one place: numa_kube_schedulers (volcano, topology;
none by default) turns numa.kube.volcano and numa.kube.topology_scheduler on in the cluster phase,
an explicit volcano_manage or topology_scheduler_manage still wins, and an unknown entry stops the
run in the preflight, before any node is read or changed. One local host, every node part off,
in check mode; a role that runs is seen failing its argument check on a state no role accepts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OFF = {"kernel_args_manage": False, "kubelet_manage": False, "containerd_nri_manage": False, "rollout_drain": False,
       "numa_exporter_manage": False, "volcano_state": "not-a-state", "topology_scheduler_state": "not-a-state"}
ROLES = {"volcano": "numa.kube.volcano", "topology": "numa.kube.topology_scheduler"}


def play(tmp_path, extra, hosts=None, tags=("--tags", "cluster_stacks")):
    """site.yml in check mode on local hosts (``hosts``: name -> its own variables; node01 alone by
    default), with ``tags`` (the cluster phase alone by default)."""
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "rollout_marker_dir": str(tmp_path / "record")}
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"all": {"children": {"numa_nodes": {"hosts": dict(
        # local hosts share this machine's host name: each names a Node of its own (site.yml's preflight
        # refuses two hosts working on one Node)
        (name, dict(host, rollout_node_name=name, **own)) for name, own in (hosts or {"node01": {}}).items())}}}}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               os.path.join(ROOT, "playbooks", "site.yml"), "--check"]
    command += list(tags) + ["-e", json.dumps(dict(OFF, **extra))]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    return done, json.loads(done.stdout)


def entered(report):
    """The scheduling stacks whose role ran: its argument check was not skipped by site.yml's switch."""
    found = set()
    for entry in report["plays"]:
        for task in entry["tasks"]:
            for stack, role in ROLES.items():
                if task["task"]["name"].startswith(role + " : Validating arguments"):
                    result = task["hosts"]["node01"]
                    if not result.get("skipped"):
                        found.add(stack)
                    else:
                        assert result["false_condition"] == "__numa_kube_scheduling.%s" % stack, result
    return found


@pytest.mark.parametrize("extra, stacks", [
    ({"numa_kube_schedulers": ["topology"]}, {"topology"}),
    ({"numa_kube_schedulers": ["volcano", "topology"], "volcano_manage": False}, {"topology"}),
    ({"numa_kube_schedulers": [], "volcano_manage": True}, {"volcano"}),
], ids=["topology", "explicit-manage-wins", "manage-alone"])
def test_the_chosen_stack_runs_and_the_other_does_not(tmp_path, extra, stacks):
    done, report = play(tmp_path, extra)
    assert done.returncode != 0, "the role that runs refuses the state no role accepts"
    assert entered(report) == stacks
    assert "not-a-state" in json.dumps(report["plays"][-1]), done.stdout[-2000:]


def test_no_stack_by_default_and_the_report_says_so(tmp_path):
    done, report = play(tmp_path, {})
    assert done.returncode == 0, done.stdout[-3000:]
    assert entered(report) == set()
    shown = [task["hosts"]["node01"]["msg"] for task in report["plays"][-1]["tasks"]
             if task["task"]["name"] == "Show what each node has now"][0]
    assert "scheduling stacks: none" in shown, shown


@pytest.mark.parametrize("value, problem", [
    (["volcano", "numa-aware"], 'unknown entries "numa-aware"'),
    ("topology", "it must be a list, not a single value"),
])
def test_the_preflight_refuses_an_unknown_scheduling_stack(tmp_path, value, problem):
    done, report = play(tmp_path, {"numa_kube_schedulers": value})
    assert done.returncode != 0
    assert len(report["plays"]) == 1, "no node was changed and no stack deployed"
    task = [task for task in report["plays"][0]["tasks"]
            if task["task"]["name"] == "Check the scheduling stacks asked for (numa_kube_schedulers)"][0]
    message = task["hosts"]["node01"]["msg"]
    assert message.startswith("numa_kube_schedulers is %s: %s" % (json.dumps(value), problem)), message
    assert "each volcano" in message and "or topology" in message and "[volcano, topology]" in message, message


def test_the_preflight_refuses_hosts_that_resolve_to_different_stacks_naming_them(tmp_path):
    """The stacks are deployed once (run_once): hosts that disagree would leave the choice to the
    first host, so --limit or the host order would change what is deployed or removed."""
    hosts = {"node01": {"numa_kube_schedulers": ["topology"]}, "node02": {"numa_kube_schedulers": ["volcano"]},
             "node03": {"numa_kube_schedulers": ["volcano"], "volcano_manage": False, "topology_scheduler_manage": True}}
    done, report = play(tmp_path, {}, hosts)
    assert done.returncode != 0
    assert len(report["plays"]) == 1, "no node was changed and no stack deployed"
    task = [task for task in report["plays"][0]["tasks"]
            if task["task"]["name"] == "Check that every node resolves to the same scheduling stacks"][0]
    (result,) = [result for result in task["hosts"].values() if result.get("failed")]
    assert result["msg"].startswith(
        "the scheduling stacks are one choice for the whole cluster, but the hosts of this play resolve "
        "numa_kube_schedulers, volcano_manage and topology_scheduler_manage to different ones: topology for node01, "
        "node03; volcano for node02. Set them once for every host"), result["msg"]
    done, report = play(tmp_path, {"numa_kube_schedulers": []}, dict((name, {}) for name in hosts))
    assert done.returncode == 0, done.stdout[-3000:]


# --- the preflight plans only the node parts the run changes ------------------------------------------

PLANS = {"kernel_args": "Plan the kernel parameter change", "containerd_nri": "Plan the containerd NRI change"}


@pytest.mark.parametrize("tags, planned", [
    (("--tags", "kubelet"), set()),
    (("--tags", "kubelet,containerd_nri"), {"containerd_nri"}),
    (("--skip-tags", "kernel_args"), {"containerd_nri"}),
    (("--tags", "cluster_stacks,kernel_args"), {"kernel_args"}),
    ((), {"kernel_args", "containerd_nri"}),
    (("--tags", "tagged"), {"kernel_args", "containerd_nri"}),
    # a tag of a playbook that imports site.yml (tags: [numa]) runs every part: each is planned
    (("--tags", "numa"), {"kernel_args", "containerd_nri"}),
], ids=["kubelet", "kubelet-and-nri", "skip-kernel", "kernel", "untagged", "tagged", "a-wrappers-tag"])
def test_the_preflight_plans_a_node_part_only_when_the_run_changes_it(tmp_path, tags, planned):
    """--tags kubelet asks a node nothing about its kernel parameters or containerd (seconds per node
    and run); a part the run may change is planned before any node changes, as always: only tags that
    name nothing but numa.kube's other parts leave a plan out."""
    extra = {"kernel_args_manage": True, "containerd_nri_manage": True, "numa_kube_schedulers": []}
    _done, report = play(tmp_path, extra, tags=tags)
    seen = set()
    for task in report["plays"][0]["tasks"]:
        for part, name in PLANS.items():
            if task["task"]["name"] == name:
                result = task["hosts"]["node01"]
                if result.get("skipped"):
                    assert part in result["false_condition"], result
                else:
                    seen.add(part)
    assert seen == planned
