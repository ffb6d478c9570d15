# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The example inventories parse, name only variables the roles know, and compute what they say.

The lablabs RKE2 inventory is checked the way RKE2 would see it: its variables, rendered by
Ansible, are written into config.yaml following that role's documented contract, the file is
parsed as YAML and merged with config.yaml.d as RKE2 and k3s merge them, and the kubelet flags
that come out must be numa.kube's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet.rke2 import config_files, merge_config, option_values

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
INVENTORIES = sorted(d for d in glob.glob(os.path.join(ROOT, "inventories", "*"))
                     if os.path.basename(d) != "localhost")
LABLABS = os.path.join(ROOT, "inventories", "rke2-lablabs")
CONFIG = "/etc/rancher/rke2/config.yaml"
# Switches of site.yml itself, and variables that belong to other tools (the lablabs RKE2 role).
PLAYBOOK_VARIABLES = {"kubelet_manage", "kernel_args_manage", "containerd_nri_manage", "numa_exporter_manage",
                      "prometheus_targets_manage", "numa_kube_batch_size", "numa_kube_max_fail_percentage", "numa_kube_schedulers",
                      "kernel_args_present", "kernel_args_absent",
                      "kernel_args_method", "kubelet_numa", "rke2_agent_options", "rke2_server_options",
                      "rke2_kubelet_arg", "rke2_download_kubeconf"}

# What each host of the lablabs inventory gives that role, rendered by Ansible. Groups and their
# names are the role's defaults (rke2_servers_group_name masters, rke2_agents_group_name workers).
VIEW = """
numa_kube_test_view:
  server: "{{ inventory_hostname in groups[rke2_servers_group_name | default('masters')] }}"
  agent: "{{ inventory_hostname in groups[rke2_agents_group_name | default('workers')] | default([]) }}"
  server_options: "{{ rke2_server_options | default(None) }}"
  agent_options: "{{ rke2_agent_options | default(None) }}"
  kubelet_arg: "{{ rke2_kubelet_arg | default(None) }}"
  numa_kube_flags: "{{ kubelet_numa | numa.kube.kubelet_arg }}"
  address: "{{ ansible_host }}"
"""


def env(tmp_path):
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1")


def role_variables():
    names = set()
    for spec in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(spec) as handle:
            names.update(yaml.safe_load(handle)["argument_specs"]["main"]["options"])
    return names


def render_config(view, name):
    """config.yaml as the lablabs role's contract says it is written: a few lines of the role's own,
    then each string entry of rke2_server_options (servers) and rke2_agent_options (agents) as one
    line just as it is, then rke2_kubelet_arg under kubelet-arg:, each entry one list item as it is."""
    lines = ["token: an-example-token", "node-name: %s" % name]
    for kind in ("server", "agent"):
        entries = view["%s_options" % kind]
        if view[kind] and entries is not None:
            assert all(isinstance(entry, str) for entry in entries), "the role takes string entries: %r" % entries
            lines.extend(entries)
    if view["kubelet_arg"] is not None:
        lines.append("kubelet-arg:")
        lines.extend("  - %s" % entry for entry in view["kubelet_arg"])
    return "\n".join(lines) + "\n"


def load_pairs(text):
    """A config file's top-level (key, value) pairs in file order, a repeated key kept (YAML 1.1,
    as RKE2's yaml.v2 reads it); raises yaml.YAMLError where RKE2 could not read the file."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if not isinstance(node, yaml.MappingNode):
            return None if node is None else loader.construct_document(node)
        return [(loader.construct_object(key, deep=True), loader.construct_object(value, deep=True))
                for key, value in node.value]
    finally:
        loader.dispose()


def kubelet_flags(files):
    """What RKE2 passes to kubelet from kubelet-arg, files given as {path: text} (config.yaml and
    config.yaml.d/*): read in RKE2's order, merged by its rules, the leading dashes RKE2 drops
    from each entry dropped too."""
    dropins = [path[len(CONFIG + ".d/"):] for path in files if path.startswith(CONFIG + ".d/")]
    documents = [load_pairs(files[path]) for path in config_files(CONFIG, dropins)]
    merged = merge_config(documents)
    return merged, [re.sub(r"^--", "", value) for value in option_values(merged, "kubelet-arg")]


def group_hosts(listing, group):
    """The hosts of a group of ``ansible-inventory --list`` output, its child groups' included."""
    entry = listing.get(group, {})
    hosts = set(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts |= group_hosts(listing, child)
    return hosts


@pytest.fixture(scope="module")
def lablabs_hosts(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("lablabs")
    view = tmp_path / "view.yml"
    view.write_text(VIEW)
    done = subprocess.run([os.path.join(BIN, "ansible"), "k8s_cluster", "-i", LABLABS, "-m", "ansible.builtin.debug",
                           "-a", "var=numa_kube_test_view", "-e", "@%s" % view], env=env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = {}
    decoder = json.JSONDecoder()
    for match in re.finditer(r"^(\S+) \| SUCCESS => ", done.stdout, re.M):
        hosts[match.group(1)] = decoder.raw_decode(done.stdout, match.end())[0]["numa_kube_test_view"]
    assert sorted(hosts) == ["agent-1.example.internal", "agent-2.example.internal", "server-1.example.internal"]
    return hosts


@pytest.mark.parametrize("inventory", INVENTORIES, ids=os.path.basename)
def test_inventory_parses_and_names_known_variables(inventory, tmp_path):
    done = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", inventory, "--list"], env=env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert group_hosts(listing, "numa_nodes"), "every example has NUMA workers"
    known = role_variables() | PLAYBOOK_VARIABLES
    for host, values in listing["_meta"]["hostvars"].items():
        unknown = sorted(name for name in values if not name.startswith("ansible_") and name not in known)
        assert not unknown, "%s sets variables no role knows: %s" % (host, unknown)


def test_lablabs_config_gives_kubelet_numa_kubes_flags_on_servers_and_agents(lablabs_hosts):
    kinds = set()
    for name, view in lablabs_hosts.items():
        text = render_config(view, name)
        pairs = load_pairs(text)
        keys = [key for key, _value in pairs]
        assert len(keys) == len(set(keys)), "%s: config.yaml writes a key twice:\n%s" % (name, text)
        merged, flags = kubelet_flags({CONFIG: text})
        assert flags == view["numa_kube_flags"], text
        assert any(flag.startswith("reserved-memory=") for flag in flags)
        assert merged["node-ip"] == view["address"]
        if view["server"]:
            kinds.add("server")
            # a string to RKE2, not YAML 1.1's number 384
            assert merged["write-kubeconfig-mode"] == "0600"
        else:
            kinds.add("agent")
            assert "write-kubeconfig-mode" not in merged
    assert kinds == {"server", "agent"}, "the example shows servers that run workloads and agents"


def test_lablabs_config_keeps_numa_kubes_flags_when_a_dropin_appends(lablabs_hosts):
    view = lablabs_hosts["agent-1.example.internal"]
    files = {CONFIG: render_config(view, "agent-1.example.internal"),
             CONFIG + ".d/50-site.yaml": "kubelet-arg+:\n  - max-pods=250\nnode-ip: 198.51.100.7\n",
             CONFIG + ".d/README.txt": "kubelet-arg: [ignored=true]\n"}
    merged, flags = kubelet_flags(files)
    assert flags == view["numa_kube_flags"] + ["max-pods=250"]
    assert merged["node-ip"] == "198.51.100.7"
    # without the '+' a later file replaces numa.kube's flags altogether
    files[CONFIG + ".d/60-other.yml"] = "kubelet-arg:\n  - max-pods=110\n"
    assert kubelet_flags(files)[1] == ["max-pods=110"]


def test_the_old_kubelet_arg_option_lines_are_not_yaml(lablabs_hosts):
    # The form this inventory had: kubelet flags and a node label as rke2_agent_options entries.
    view = dict(lablabs_hosts["agent-1.example.internal"])
    view["agent_options"] = (["node-label=numa.kube/aligned=true"]
                             + ["kubelet-arg=" + flag for flag in view["numa_kube_flags"]])
    view["kubelet_arg"] = None
    with pytest.raises(yaml.YAMLError, match="while scanning a simple key"):
        kubelet_flags({CONFIG: render_config(view, "agent-1.example.internal")})


def test_lablabs_flags_carry_a_reservation_kubelet_accepts(lablabs_hosts, tmp_path):
    checks = []
    for name, view in sorted(lablabs_hosts.items()):
        _merged, flags = kubelet_flags({CONFIG: render_config(view, name)})
        # What the flags in force say, read back from them (not typed again here), checked by
        # numa.kube.reserved_memory against RKE2's eviction defaults and the kube-reserved flag.
        values = dict(flag.split("=", 1) for flag in flags)
        reserved = [{"numaNode": int(node), "limits": dict(limit.split("=", 1) for limit in limits.split(","))}
                    for node, limits in (entry.split(":", 1) for entry in values["reserved-memory"].split(";"))]
        kube_reserved = dict(item.split("=", 1) for item in values["kube-reserved"].split(","))
        assert sorted(entry["numaNode"] for entry in reserved) == [0, 1]
        checks.append({"host": name, "args": {"distribution": "rke2", "numa_nodes": [0, 1],
                                              "kube_reserved": kube_reserved, "reserved_memory": reserved}})
    # one ansible-playbook run checks every host's flags: the module once per host, each failure kept
    playbook = tmp_path / "check.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "vars": {"checks": checks},
                                     "tasks": [{"name": "check", "ignore_errors": True, "loop": "{{ checks }}",
                                                "numa.kube.reserved_memory": {
                                                    key: "{{ item.args.%s }}" % key for key in checks[0]["args"]}}]}]))
    done = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e",
                           "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
                          env=dict(env(tmp_path), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (task,) = json.loads(done.stdout)["plays"][0]["tasks"]
    results = task["hosts"]["localhost"]["results"]
    assert [result["item"]["host"] for result in results] == [check["host"] for check in checks]
    for result in results:
        assert not result.get("failed"), "%s: %s" % (result["item"]["host"], result)


@pytest.mark.parametrize("inventory", INVENTORIES, ids=os.path.basename)
def test_site_yml_lists_its_hosts_on_each_example_without_a_warning(inventory, tmp_path):
    """The new-user walk: five of six examples warned "Could not match supplied host pattern:
    prometheus"; the group is optional, and a play for it skips quietly where there is none."""
    done = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "--list-hosts",
                           os.path.join(ROOT, "playbooks", "site.yml")], env=env(tmp_path), cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Could not match supplied host pattern" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "play #1 (numa_nodes)" in done.stdout
