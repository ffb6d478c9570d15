# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml's preflight refuses a numa_kube_record_dir no part can use before any node is read or
changed (review 1 finding 3); one with trailing slashes is the same folder in every part.

Every case is a host of its own, its numa_kube_record_dir set as that host's variable (where an
inventory's group_vars or host_vars put it), in one run of site.yml: the check runs on each host
and its result is read per host. The preflight has any_errors_fatal, so the refused hosts end the
run right after the check, before any host is read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = "Check the folder of numa.kube's records (numa_kube_record_dir)"
REFUSED = ["var/lib/numa-kube", "/var/lib/../tmp/applied", "/var//lib/applied", "/var/lib/./applied"]
PASSING = ["/var/lib/numa-kube/applied/", "/srv/numa//", "", None]
# host name -> its numa_kube_record_dir
HOSTS = dict(("case%d" % index, record_dir) for index, record_dir in enumerate(REFUSED + PASSING))


def host_of(record_dir):
    return "case%d" % (REFUSED + PASSING).index(record_dir)


@pytest.fixture(scope="module")
def preflight(tmp_path_factory):
    """Run site.yml on the local hosts (in numa_nodes) up to the record folder's check (the topology
    read comes right after it, the first step that is not about the inventory); returns each host's
    result of that check."""
    tmp_path = tmp_path_factory.mktemp("record_dir")
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"numa_nodes": {"hosts": dict(
        (name, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "numa_kube_record_dir": record_dir}) for name, record_dir in HOSTS.items())}}))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
               os.path.join(ROOT, "playbooks", "site.yml"), "--check", "--start-at-task",
               "Check what is asked of the node (numa_kube_state)",
               "-e", json.dumps({"kernel_args_manage": False, "kubelet_manage": False,
                                 "containerd_nri_manage": False})]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(done.stdout)
    for task in report["plays"][0]["tasks"]:
        if task["task"]["name"] == CHECK:
            return task["hosts"]
    raise AssertionError("site.yml has no task %r: %s" % (CHECK, done.stdout[-2000:]))


def result_of(preflight, record_dir):
    host = host_of(record_dir)
    assert host in preflight, "the check did not run on %s (numa_kube_record_dir %r): %s" % (
        host, record_dir, sorted(preflight))
    return preflight[host]


@pytest.mark.parametrize("record_dir", REFUSED)
def test_a_record_dir_no_part_can_use_is_refused_first(preflight, record_dir):
    result = result_of(preflight, record_dir)
    assert result.get("failed") and json.dumps(record_dir) in result["msg"], result
    assert "must be an absolute path" in result["msg"]


@pytest.mark.parametrize("record_dir", PASSING)
def test_trailing_slashes_and_the_default_pass(preflight, record_dir):
    assert not result_of(preflight, record_dir).get("failed")
