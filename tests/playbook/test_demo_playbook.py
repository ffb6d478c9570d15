# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the demo playbook through ansible-playbook: the modules as Ansible ships them to a host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import four_nodes_with_memory_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_playbook(tmp_path, *extra):
    env = dict(os.environ)
    env.update(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
               "-i", os.path.join(ROOT, "inventories/localhost/hosts.yml"),
               os.path.join(ROOT, "playbooks/demo_local.yml")] + list(extra)
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return done.returncode, json.loads(done.stdout), done.stderr


def task_result(report, name):
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                return task["hosts"]["localhost"]
    raise AssertionError("no task %r in the report" % name)


def test_demo_on_a_recorded_four_node_machine(tmp_path):
    sys_root, proc_root = four_nodes_with_memory_only().write(str(tmp_path / "machine"))
    rc, report, stderr = run_playbook(tmp_path, "-e", "demo_sysfs_root=%s demo_procfs_root=%s" % (sys_root, proc_root))
    assert rc == 0, stderr
    reservation = task_result(report, "Compute the Memory Manager reservation kubelet will demand")
    # 1636Mi spread over nodes 0 (4Gi), 1 (2Gi), 3 (1Gi), 5 (16Gi) in proportion to their memory
    assert reservation["reserved_memory_flag"] == "0:memory=285Mi;1:memory=142Mi;3:memory=71Mi;5:memory=1138Mi"
    lines = task_result(report, "Print the report")["msg"]
    assert lines[0].startswith("NUMA: yes, 4 node(s), 8 CPU(s)")


def test_demo_stops_on_a_bad_quantity(tmp_path):
    sys_root, proc_root = four_nodes_with_memory_only().write(str(tmp_path / "machine"))
    extra = "demo_sysfs_root=%s demo_procfs_root=%s" % (sys_root, proc_root)
    rc, report, dummy = run_playbook(tmp_path, "-e", extra, "-e", '{"demo_kube_reserved": {"memory": "1GB"}}')
    assert rc != 0
    failure = task_result(report, "Compute the Memory Manager reservation kubelet will demand")
    assert failure["failed"] and "kubeReserved.memory" in failure["msg"]
