# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules that reach the API server form one action group (meta/runtime.yml): a play's
module_defaults for group/numa.kube.cluster reach each of them, as kubernetes.core's group/k8s
does. Proven here by a kubeconfig no one has: every module names it in its failure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# each module with only what it needs to get as far as connecting
TASKS = {
    "node_labels": {"name": "node01"},
    "numa_monitoring": {"state": "absent"},
    "numa_resource_plugin": {"state": "absent"},
    "topology_scheduler": {"state": "absent"},
    "volcano_numa_aware": {"state": "query"},
    "volcano_stack": {"state": "absent", "publisher_image": "registry.invalid/agent:1"},
}


def run_play(tmp_path, plays):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(plays))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "local", str(playbook)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)
    return done, json.loads(done.stdout)


def test_module_defaults_of_the_group_reach_every_module_that_talks_to_the_api_server(tmp_path):
    runtime = yaml.safe_load(open(os.path.join(ROOT, "meta", "runtime.yml")))
    assert sorted(runtime["action_groups"]["cluster"]) == sorted(TASKS)
    kubeconfig = str(tmp_path / "no-such.kubeconfig")
    _done, report = run_play(tmp_path, [{
        "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/numa.kube.cluster": {"kubeconfig": kubeconfig}},
        "tasks": [{"name": name, "numa.kube." + name: args, "ignore_errors": True} for name, args in sorted(TASKS.items())],
    }])
    results = dict((task["task"]["name"], task["hosts"]["localhost"]) for task in report["plays"][0]["tasks"])
    assert sorted(results) == sorted(TASKS)
    for name, result in sorted(results.items()):
        assert result.get("failed"), (name, result)
        assert "kubeconfig %s" % kubeconfig in result["msg"], (name, result["msg"])


def test_a_stack_roles_former_copy_of_a_shared_variable_stops_the_play_naming_the_new_one(tmp_path):
    """Review of the renovation: volcano_kubeconfig (the role's own copy until then) was ignored
    without a word, and the stack went to the default kubeconfig's cluster."""
    kubeconfig = str(tmp_path / "cluster-b.kubeconfig")
    done, report = run_play(tmp_path, [{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"volcano_kubeconfig": kubeconfig, "volcano_wait_timeout": 60, "numa_monitoring_adopt": True},
        "roles": [{"role": "numa.kube.volcano", "vars": {"volcano_manifest": str(tmp_path / "none.yaml")}}],
    }])
    assert done.returncode != 0
    failed = [(task["task"]["name"], host) for task in report["plays"][0]["tasks"]
              for host in task["hosts"].values() if host.get("failed")]
    assert len(failed) == 1 and failed[0][0].endswith("Check that no stack role's former copy of a shared variable is set")
    message = failed[0][1]["msg"]
    assert message.startswith("numa_monitoring_adopt, volcano_kubeconfig, volcano_wait_timeout are set"), message
    assert "cluster_stacks_adopt, cluster_stacks_kubeconfig, cluster_stacks_wait_timeout instead" in message, message
    # with the shared names the check passes, and the role goes on to its own work (which fails here on
    # the missing manifest, after the check)
    done, report = run_play(tmp_path, [{
        "hosts": "localhost", "gather_facts": False,
        "vars": {"cluster_stacks_kubeconfig": kubeconfig},
        "roles": [{"role": "numa.kube.volcano", "vars": {"volcano_manifest": str(tmp_path / "none.yaml")}}],
    }])
    names = [task["task"]["name"] for task in report["plays"][0]["tasks"]]
    check = [task for task in report["plays"][0]["tasks"]
             if task["task"]["name"].endswith("Check that no stack role's former copy of a shared variable is set")]
    assert check and not list(check[0]["hosts"].values())[0].get("failed"), names
