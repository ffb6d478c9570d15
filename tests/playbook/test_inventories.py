# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The example inventories parse, name only variables the roles know, and compute what they say."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
INVENTORIES = sorted(d for d in glob.glob(os.path.join(ROOT, "inventories", "*"))
                     if os.path.basename(d) != "localhost")
# Switches of site.yml itself, and variables that belong to other tools (the lablabs RKE2 role).
PLAYBOOK_VARIABLES = {"kubelet_manage", "kernel_args_manage", "containerd_nri_manage", "numa_exporter_manage",
                      "prometheus_targets_manage", "numa_kube_batch_size", "numa_kube_max_fail_percentage", "kernel_args_present", "kernel_args_absent",
                      "kernel_args_method", "kubelet_numa", "rke2_agent_options", "rke2_server_options"}


def env(tmp_path):
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1")


def role_variables():
    names = set()
    for spec in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(spec) as handle:
            names.update(yaml.safe_load(handle)["argument_specs"]["main"]["options"])
    return names


@pytest.mark.parametrize("inventory", INVENTORIES, ids=os.path.basename)
def test_inventory_parses_and_names_known_variables(inventory, tmp_path):
    done = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", inventory, "--list"], env=env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert listing["numa_nodes"]["hosts"], "every example has NUMA workers"
    known = role_variables() | PLAYBOOK_VARIABLES
    for host, values in listing["_meta"]["hostvars"].items():
        unknown = sorted(name for name in values if not name.startswith("ansible_") and name not in known)
        assert not unknown, "%s sets variables no role knows: %s" % (host, unknown)


def test_rke2_agent_options_carry_a_reservation_kubelet_accepts(tmp_path):
    inventory = os.path.join(ROOT, "inventories", "rke2-agent-options")
    done = subprocess.run([os.path.join(BIN, "ansible"), "agent-1.example.internal", "-i", inventory, "-m",
                           "ansible.builtin.debug", "-a", "var=rke2_agent_options"], env=env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kubelet-arg=cpu-manager-policy=static" in done.stdout
    assert "kubelet-arg=reserved-memory=0:memory=512Mi;1:memory=512Mi" in done.stdout
    assert "node-label=numa.kube/aligned=true" in done.stdout
    # What the rendered flags say, read back from them (not typed again here), checked by
    # numa.kube.reserved_memory against RKE2's eviction defaults and the kube-reserved flag.
    flags = dict(arg[len("kubelet-arg="):].split("=", 1) for arg in json.loads(
        done.stdout[done.stdout.index("{"):])["rke2_agent_options"] if arg.startswith("kubelet-arg="))
    reserved = [{"numaNode": int(node), "limits": dict(limit.split("=", 1) for limit in limits.split(","))}
                for node, limits in (entry.split(":", 1) for entry in flags["reserved-memory"].split(";"))]
    kube_reserved = dict(item.split("=", 1) for item in flags["kube-reserved"].split(","))
    assert sorted(entry["numaNode"] for entry in reserved) == [0, 1]
    args = {"distribution": "rke2", "numa_nodes": [0, 1], "kube_reserved": kube_reserved,
            "reserved_memory": reserved}
    checked = subprocess.run([os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-m",
                              "numa.kube.reserved_memory", "-a", json.dumps(args)], env=env(tmp_path),
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout
