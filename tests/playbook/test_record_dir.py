# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml's preflight refuses a numa_kube_record_dir no part can use before any node is read or
changed (review 1 finding 3); one with trailing slashes is the same folder in every part."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = "Check the folder of numa.kube's records (numa_kube_record_dir)"


def preflight(tmp_path, record_dir):
    """Run site.yml on localhost (in numa_nodes) up to the record folder's check; the topology read
    right after it is the first step that is not about the inventory."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("numa_nodes:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               os.path.join(ROOT, "playbooks", "site.yml"), "--check", "--start-at-task",
               "Check what is asked of the node (numa_kube_state)",
               "-e", json.dumps({"numa_kube_record_dir": record_dir, "kernel_args_manage": False,
                                 "kubelet_manage": False, "containerd_nri_manage": False})]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(done.stdout)
    for task in report["plays"][0]["tasks"]:
        if task["task"]["name"] == CHECK:
            return task["hosts"]["localhost"]
    raise AssertionError("site.yml has no task %r: %s" % (CHECK, done.stdout[-2000:]))


@pytest.mark.parametrize("record_dir", ["var/lib/numa-kube", "/var/lib/../tmp/applied", "/var//lib/applied",
                                        "/var/lib/./applied"])
def test_a_record_dir_no_part_can_use_is_refused_first(tmp_path, record_dir):
    result = preflight(tmp_path, record_dir)
    assert result.get("failed") and json.dumps(record_dir) in result["msg"], result
    assert "must be an absolute path" in result["msg"]


@pytest.mark.parametrize("record_dir", ["/var/lib/numa-kube/applied/", "/srv/numa//", "", None])
def test_trailing_slashes_and_the_default_pass(tmp_path, record_dir):
    assert not preflight(tmp_path, record_dir).get("failed")
