# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the demo playbook through ansible-playbook: the modules as Ansible ships them to a host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet import reservation
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


def flags(text):
    """{flag name: value} of kubelet flags written --name=value (kubelet-arg entries are name=value)."""
    result = {}
    for item in text:
        name, _sep, value = item.lstrip("-").partition("=")
        result[name] = value
    return result


def reserved_memory_of(flag):
    """kubelet's --reserved-memory text (0:memory=285Mi;1:memory=142Mi) as reservedMemory entries."""
    entries = []
    for part in flag.split(";"):
        node, _sep, limits = part.partition(":")
        entries.append({"numaNode": int(node), "limits": dict(item.split("=", 1) for item in limits.split(","))})
    return entries


def pairs(text):
    """--kube-reserved's cpu=80m,memory=893Mi as a mapping."""
    return dict(item.split("=", 1) for item in text.split(",")) if text else {}


def test_demo_on_a_recorded_four_node_machine(tmp_path):
    """Every line the demo prints for a distribution is that distribution's own reservation: run
    through reserved_memory for it, each is exactly what kubelet there demands (the review of a new
    user found the RKE2 line carrying kubeadm's sum, which RKE2's kubelet refuses, and an EKS line
    with kubeadm's variable name and not the EKS formula)."""
    sys_root, proc_root = four_nodes_with_memory_only().write(str(tmp_path / "machine"))
    rc, report, stderr = run_playbook(tmp_path, "-e", "demo_sysfs_root=%s demo_procfs_root=%s" % (sys_root, proc_root))
    assert rc == 0, stderr
    results = task_result(report, "Compute the Memory Manager reservation kubelet will demand")["results"]
    by = dict((item["item"], item) for item in results)
    # 1636Mi spread over nodes 0 (4Gi), 1 (2Gi), 3 (1Gi), 5 (16Gi) in proportion to their memory
    assert by["kubeadm"]["reserved_memory_flag"] == "0:memory=285Mi;1:memory=142Mi;3:memory=71Mi;5:memory=1138Mi"
    assert by["rke2"]["required"] != by["kubeadm"]["required"], "RKE2's eviction default differs from kubeadm's"
    lines = task_result(report, "Print the report")["msg"]
    assert lines[0].startswith("NUMA: yes, 4 node(s), 8 CPU(s), ") and " socket(s) (ids " in lines[0], lines[0]
    topology = task_result(report, "Read the NUMA topology")["ansible_facts"]["numa_topology"]
    memory = topology["numa_node_memory"]

    kubeadm = json.loads([line for line in lines if line.startswith("kubeadm KubeletConfiguration: ")][0]
                         .split(": ", 1)[1])
    reservation.plan(numa_node_memory=memory, kube_reserved=kubeadm["kubeReserved"],
                     system_reserved=kubeadm["systemReserved"], distribution="kubeadm",
                     reserved_memory=kubeadm["reservedMemory"])

    rke2 = flags(json.loads([line for line in lines if line.startswith("RKE2 and k3s kubelet-arg: ")][0]
                            .split(": ", 1)[1]))
    for distribution in ("rke2", "k3s"):
        reservation.plan(numa_node_memory=memory, kube_reserved=pairs(rke2.get("kube-reserved")),
                         system_reserved=pairs(rke2.get("system-reserved")), distribution=distribution,
                         reserved_memory=reserved_memory_of(rke2["reserved-memory"]))
    with pytest.raises(reservation.ReservationError, match="not equal"):
        reservation.plan(numa_node_memory=memory, kube_reserved=pairs(rke2.get("kube-reserved")),
                         system_reserved=pairs(rke2.get("system-reserved")), distribution="kubeadm",
                         reserved_memory=reserved_memory_of(rke2["reserved-memory"]))

    eks = flags([line for line in lines if line.startswith("EKS AL2 bootstrap.sh --kubelet-extra-args: ")][0]
                .split(": ", 1)[1].split())
    assert pairs(eks["kube-reserved"])["memory"] == "%dMi" % (11 * 110 + 255), "EKS's formula for 110 pods"
    reservation.plan(numa_node_memory=memory, kube_reserved=pairs(eks["kube-reserved"]), distribution="eks",
                     reserved_memory=reserved_memory_of(eks["reserved-memory"]), eks_max_pods=110,
                     cpu_count=topology["cpu_count"])

    # the profile it proposes: one core on each NUMA node with CPUs for the system, the rest isolated
    profile = [line for line in lines if line.startswith("Proposed node profile: ")]
    assert profile and profile[0].startswith("Proposed node profile: reserved CPUs 0,4,6, isolated 1-3,5,7; kubelet "), lines
    assert '"reservedSystemCPUs": "0,4,6"' in profile[0]
    assert profile[0].endswith("; kernel isolcpus=managed_irq,1-3,5,7 nohz_full=1-3,5,7 rcu_nocbs=1-3,5,7 irqaffinity=0,4,6")


def test_demo_says_why_it_proposes_no_profile(tmp_path):
    """A machine with one CPU on a NUMA node cannot give the system one core there and pods the rest:
    the demo prints why instead of failing."""
    machine = four_nodes_with_memory_only()
    machine.nodes[3]["cpus"] = [6]
    del machine.cpus[7]
    sys_root, proc_root = machine.write(str(tmp_path / "machine"))
    rc, report, stderr = run_playbook(tmp_path, "-e", "demo_sysfs_root=%s demo_procfs_root=%s" % (sys_root, proc_root))
    assert rc == 0, stderr
    lines = task_result(report, "Print the report")["msg"]
    assert ("No node profile proposed: reserved_per_node: 1 CPUs on NUMA node 3 would leave it no CPU to isolate (it has "
            "1 online: 6); reserve fewer") in lines, lines


def test_demo_stops_on_a_bad_quantity(tmp_path):
    sys_root, proc_root = four_nodes_with_memory_only().write(str(tmp_path / "machine"))
    extra = "demo_sysfs_root=%s demo_procfs_root=%s" % (sys_root, proc_root)
    rc, report, dummy = run_playbook(tmp_path, "-e", extra, "-e", '{"demo_kube_reserved": {"memory": "1GB"}}')
    assert rc != 0
    failure = task_result(report, "Compute the Memory Manager reservation kubelet will demand")
    assert failure["failed"] and any("kubeReserved.memory" in item.get("msg", "") for item in failure["results"])
