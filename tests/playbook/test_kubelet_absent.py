# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet role run by ansible-playbook on this machine, against a kubelet configuration in a
temporary folder: present, then numa_kube_state absent (check mode first), then absent again.
The Kubernetes API, systemctl and kubelet's health are the stand-ins of test_rollout_envelope;
kubelet's state folder and the boot guard's systemd drop-in are the machine's own paths, which
this machine does not have (the test stops if it does)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.numa.kube.tests.playbook.test_rollout_envelope import cluster  # noqa: F401 pylint: disable=unused-import

KUBEADM = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
cpuManagerPolicy: none
kubeReserved:
  cpu: 500m
maxPods: 110
"""
# one NUMA node, four CPUs: what topology_facts would report
TOPOLOGY = {"node_count": 1, "numa_node_memory": {"0": 8 * 2 ** 30}, "memory_total_bytes": 8 * 2 ** 30, "cpu_count": 4,
            "cpus": [{"id": n, "numa_node": 0, "socket": 0, "core": n, "die": 0, "thread_siblings": [n]}
                     for n in range(4)]}
GUARD_DROPIN = "/etc/systemd/system/kubelet.service.d/50-numa-kube-memory-state.conf"


@pytest.fixture
def kubelet(tmp_path, cluster):  # noqa: F811 (the fixture imported above)
    for path in ("/var/lib/kubelet", "/etc/default/kubelet", "/etc/sysconfig/kubelet", GUARD_DROPIN,
                 "/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf", "/usr/local/libexec/numa-kube"):
        if os.path.exists(path):
            pytest.skip("this machine has %s: the role would read or change it" % path)
    (tmp_path / "config.yaml").write_text(KUBEADM)
    (tmp_path / "guard").write_text("#!/bin/sh\n")  # the boot guard a release installed
    return tmp_path


def role(state, **variables):
    return [{"name": "topology", "ansible.builtin.set_fact": {"numa_topology": TOPOLOGY}},
            {"name": "kubelet role", "ansible.builtin.import_role": {"name": "numa.kube.kubelet"},
             "vars": dict(variables, numa_kube_state=state)}]


@pytest.fixture
def check_mode(monkeypatch):
    """Runs the next plays as ansible-playbook --check --diff (a task's own check_mode would leave
    ansible_check_mode false, which the envelope reads)."""
    real = subprocess.run

    def run(command, **kwargs):
        return real(command[:-1] + ["--check", "--diff", command[-1]], **kwargs)  # pylint: disable=subprocess-run-check

    def switch(on):
        monkeypatch.setattr(subprocess, "run", run if on else real)
    return switch


def variables(tmp_path, **more):
    return dict({"kubelet_distribution": "kubeadm", "kubelet_config_path": str(tmp_path / "config.yaml"),
                 "kubelet_kubeadm_config_dir": "",
                 "kubelet_memory_manager_policy": "None", "kubelet_topology_manager_policy": "restricted",
                 "kubelet_boot_guard": False, "kubelet_boot_guard_path": str(tmp_path / "guard"),
                 "kubelet_backup": False, "numa_kube_record_dir": str(tmp_path / "applied"),
                 "rollout_marker_dir": str(tmp_path / "record")}, **more)


def changed(results):
    return sorted(name for name, runs in results.items() for run in runs if run.get("changed"))


def played(results, name):
    return [run for run in results.get(name, []) if not run.get("skipped")]


def test_merge_mode_present_then_absent_then_absent_again(kubelet, cluster, check_mode):  # noqa: F811
    tmp_path = kubelet
    config, record = tmp_path / "config.yaml", tmp_path / "applied" / "kubelet.json"
    rc, results, output = cluster.run(tmp_path, role("present"), **variables(tmp_path))
    assert rc == 0, output[-4000:]
    assert yaml.safe_load(config.read_text())["cpuManagerPolicy"] == "static"
    assert json.loads(record.read_text())["files"][str(config)]["before"] == {"cpuManagerPolicy": "none"}
    written, requests = config.read_text(), cluster.read()["requests"]
    assert requests == ["cordon", "uncordon"], "none -> static makes cpu_manager_state stale: a drain"

    # check mode: the plan and the diff, nothing written, no drain
    check_mode(True)
    rc, results, output = cluster.run(tmp_path, role("absent"), **variables(tmp_path))
    check_mode(False)
    assert rc == 0, output[-4000:]
    plan = results["Check the configuration kubelet will get"][0]
    assert plan["differs"] and plan["remove_cpu_manager_state"] and plan["config"]["cpuManagerPolicy"] == "none"
    assert sorted(plan["files"]) == sorted([str(config), str(record)])
    write = played(results, "Write the kubelet configuration")[0]
    # one module run: the configuration's diff, then the boot guard's removal
    assert [d["before_header"] for d in write["diff"]] == [str(config), str(tmp_path / "guard")], write["diff"]
    assert "topologyManagerPolicy: restricted" in write["diff"][0]["before"]
    assert "topologyManagerPolicy" not in write["diff"][0]["after"]
    assert write["diff"][1]["after_header"] == "/dev/null"
    assert config.read_text() == written and record.exists() and (tmp_path / "guard").exists()
    assert cluster.read()["requests"] == requests

    rc, results, output = cluster.run(tmp_path, role("absent"), **variables(tmp_path))
    assert rc == 0, output[-4000:]
    assert yaml.safe_load(config.read_text()) == yaml.safe_load(KUBEADM)
    assert not record.exists(), "the record goes once the part is out"
    assert not (tmp_path / "guard").exists(), "the boot guard goes"
    assert "daemon-reload" in cluster.systemctl()
    assert cluster.read()["requests"] == requests + ["cordon", "uncordon"], "static -> none: drained again"
    opened = played(results, "Record the change on the node before anything disruptive")
    saved = [entry["path"] for entry in opened[0]["marker"]["files"]]
    assert str(record) in saved and str(config) in saved, "the envelope saves the record and the file: %s" % saved
    assert not os.listdir(str(tmp_path / "record")) or os.listdir(str(tmp_path / "record")) == [".lock"]

    restored = config.read_text()
    rc, results, output = cluster.run(tmp_path, role("absent"), **variables(tmp_path))
    assert rc == 0, output[-4000:]
    assert changed(results) == [], "a second absent changed %s" % changed(results)
    assert not played(results, "Write the kubelet configuration")
    assert config.read_text() == restored and not record.exists()
    assert cluster.read()["requests"] == requests + ["cordon", "uncordon"]


def test_merge_mode_absent_leaves_a_field_changed_by_hand_since(kubelet, cluster):  # noqa: F811
    """Review 1 finding 2: a field numa.kube set and the operator changed since keeps the operator's
    value, with a warning; the fields still at numa.kube's values are put back."""
    tmp_path = kubelet
    config = tmp_path / "config.yaml"
    settings = variables(tmp_path, numa_kube_record_dir=str(tmp_path / "applied") + "/")
    rc, results, output = cluster.run(tmp_path, role("present"), **settings)
    assert rc == 0, output[-4000:]
    record = json.loads((tmp_path / "applied" / "kubelet.json").read_text())
    assert record["files"][str(config)]["after"]["topologyManagerPolicy"] == "restricted"
    config.write_text(config.read_text().replace("topologyManagerPolicy: restricted",
                                                 "topologyManagerPolicy: best-effort"))
    rc, results, output = cluster.run(tmp_path, role("absent"), **settings)
    assert rc == 0, output[-4000:]
    after = yaml.safe_load(config.read_text())
    assert after["cpuManagerPolicy"] == "none" and after["topologyManagerPolicy"] == "best-effort"
    write = played(results, "Write the kubelet configuration")[0]
    assert any("topologyManagerPolicy changed since numa.kube set it" in w for w in write.get("warnings", [])), write
    # the value left is the node's own now: an empty record stops a later absent from falling back on it
    assert json.loads((tmp_path / "applied" / "kubelet.json").read_text()) == {"version": 1, "files": {}}


def test_dropin_mode_absent_removes_only_numa_kubes_drop_in(kubelet, cluster):  # noqa: F811
    tmp_path = kubelet
    config, dropin = tmp_path / "config.yaml", tmp_path / "conf.d" / "50-numa-kube.conf"
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "10-site.conf").write_text("apiVersion: kubelet.config.k8s.io/v1beta1\n"
                                                      "kind: KubeletConfiguration\nmaxPods: 90\n")
    settings = variables(tmp_path, kubelet_config_dir=str(tmp_path / "conf.d"))
    rc, results, output = cluster.run(tmp_path, role("present"), **settings)
    assert rc == 0, output[-4000:]
    assert "cpuManagerPolicy: static" in dropin.read_text()
    rc, results, output = cluster.run(tmp_path, role("absent"), **settings)
    assert rc == 0, output[-4000:]
    assert not dropin.exists() and config.read_text() == KUBEADM
    assert (tmp_path / "conf.d" / "10-site.conf").exists(), "another drop-in stays"
    plan = results["Check the configuration kubelet will get"][0]
    assert plan["config"]["maxPods"] == 90 and plan["config"]["cpuManagerPolicy"] == "none"
    rc, results, output = cluster.run(tmp_path, role("absent"), **settings)
    assert rc == 0 and changed(results) == [], output[-4000:]


def test_a_static_memory_change_writes_the_boot_guard_with_the_configuration(kubelet, cluster, check_mode):  # noqa: F811
    """The boot guard goes with the configuration's own write (one module run, its files saved by
    the envelope first), not in a task of its own; check mode, as the machine's systemd folder is
    the real one."""
    tmp_path = kubelet
    guard = tmp_path / "new-guard"
    check_mode(True)
    rc, results, output = cluster.run(tmp_path, role("present"), **variables(
        tmp_path, kubelet_memory_manager_policy="Static", kubelet_boot_guard=True, kubelet_boot_guard_path=str(guard)))
    check_mode(False)
    assert rc == 0, output[-4000:]
    assert not played(results, "Install the guard and run it before kubelet starts"), "no task of its own"
    write = played(results, "Write the kubelet configuration")[0]
    assert write["extra_written"] == [str(guard), GUARD_DROPIN], write
    assert write["removed"] == [] and write["changed"], write
    shown = [d["after_header"] for d in write["diff"]]
    assert shown == [str(tmp_path / "config.yaml"), str(guard), GUARD_DROPIN], shown
    assert "ExecStartPre=-%s" % guard in write["diff"][2]["after"]
    assert not guard.exists() and not os.path.exists(GUARD_DROPIN), "check mode writes nothing"
    assert "daemon-reload" not in " ".join(cluster.systemctl())


def test_a_node_profile_reaches_kubelet_and_what_disagrees_with_it_is_refused_first(kubelet, cluster, check_mode):  # noqa: F811
    """The node profile is planned in the kubelet role's preflight from this machine's own topology
    (CPU 0 reserved, given as YAML reads a bare 0, the rest isolated) and goes into the role's write:
    its fields beside the role's own options, its files (systemd's CPUAffinity here) in the same
    module run. Check mode: the profile's files are the machine's own systemd paths. The role's own
    settings that disagree with it stop the run before anything changes."""
    tmp_path = kubelet
    config = tmp_path / "config.yaml"
    profile = {"node_profile_reserved": 0, "node_profile_full_pcpus_only": False,
               "node_profile_kubelet_version": "v1.36.3"}
    settings = variables(tmp_path, kubelet_cpu_manager_policy_options={"distribute-cpus-across-numa": "true"},
                         **profile)
    check_mode(True)
    rc, results, output = cluster.run(tmp_path, role("present"), **settings)
    check_mode(False)
    assert rc == 0, output[-4000:]
    plan = played(results, "Plan the node's performance profile from its topology")[0]
    assert plan["reserved"] == "0" and plan["kubelet"]["reservedSystemCPUs"] == "0", plan
    write = played(results, "Write the kubelet configuration")[0]
    after = yaml.safe_load(write["diff"][0]["after"])
    print("kubelet with the profile: %s" % json.dumps(dict((k, after[k]) for k in (
        "cpuManagerPolicy", "reservedSystemCPUs", "cpuManagerPolicyOptions"))))
    assert after["cpuManagerPolicy"] == "static" and after["reservedSystemCPUs"] == "0"
    # the profile's CPU Manager options beside the role's own
    assert after["cpuManagerPolicyOptions"] == dict(plan["kubelet"]["cpuManagerPolicyOptions"],
                                                    **{"distribute-cpus-across-numa": "true"})
    assert after["cpuManagerPolicyOptions"]["strict-cpu-reservation"] == "true"
    assert "/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf" in write["extra_written"], write
    assert yaml.safe_load(config.read_text()) == yaml.safe_load(KUBEADM), "check mode writes nothing"
    assert not os.path.exists("/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf")

    before, requests = config.read_text(), cluster.read()["requests"]
    for clash, expected in (
            ({"kubelet_reserved_system_cpus": "1"},
             'kubelet_reserved_system_cpus is "1" and the node profile reserves 0: the profile decides the reserved '
             'CPUs; leave kubelet_reserved_system_cpus empty.'),
            ({"kubelet_cpu_manager_policy_options": {"strict-cpu-reservation": "false"}},
             'kubelet_cpu_manager_policy_options sets strict-cpu-reservation to "false", the node profile to "true"'),
            ({"kubelet_extra_settings": {"reservedSystemCPUs": "1"}},
             "kubelet_extra_settings sets reservedSystemCPUs, which the node profile decides")):
        rc, results, output = cluster.run(tmp_path, role("present"), **dict(settings, **clash))
        assert rc != 0, output[-4000:]
        refused = played(results, "Check that the kubelet role's own settings agree with the profile")[0]
        assert expected in refused["msg"], refused
        assert not played(results, "Write the kubelet configuration")
        assert config.read_text() == before and cluster.read()["requests"] == requests
