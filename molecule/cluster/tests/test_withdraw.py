# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The way back out (numa_kube_state: absent) on the real fleet: numa-uneven, whose NUMA settings
site.yml merged into kubeadm's config.yaml, is taken back out by the converge playbook itself,
limited to it, with only that variable changed: its labels first, then one drain, kubelet back on
the configuration it had before numa.kube, proven, the node as schedulable as before.

This file runs last (the others need numa-uneven aligned): it leaves numa-uneven out. Its tests work
on numa-uneven alone, beside test_kubelet.py's on numa-kubelet (conftest.py's lanes): the audit
log is read for numa-uneven's requests only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys

import kubernetes
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import AuditLog, configz, run_playbook, wait  # noqa: E402 pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://numa-uneven"]
pytestmark = pytest.mark.beside

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
AUDIT = AuditLog(os.path.join(CONTROL_PLANE, "audit.log"))
UNEVEN = "numa-uneven"
CONFIG = "/var/lib/kubelet/config.yaml"        # kubeadm's file, which converge.yml merges into on numa-uneven
RECORD = "/var/lib/numa-kube/applied/kubelet.json"
PROBE = "withdraw-probe"
# the converge playbook as a user runs it, limited to the node, without the parts that are not the node's,
# with the short settle times of the other tests' runs (kubelet proven healthy for 5 s, not 20)
TAKE_OUT = [os.path.join(ROOT, "molecule", "cluster", "converge.yml"), "--limit", UNEVEN,
            "-e", "numa_kube_state=absent", "--skip-tags", "cluster_stacks,numa_exporter,prometheus_targets",
            "-e", json.dumps({"kubelet_health_settle": 5, "rollout_health_settle": 5})]


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


def probe_pods(api):
    return [p for p in api.list_namespaced_pod("default", label_selector="app=%s" % PROBE).items
            if p.metadata.deletion_timestamp is None]


def running_probe(api):
    pods = [p for p in probe_pods(api) if p.status.phase == "Running" and p.spec.node_name == UNEVEN]
    return pods[0] if pods else None


def first_backup(host):
    """The bytes of kubeadm's config.yaml before numa.kube first changed it: the oldest of the
    dated copies the kubelet role keeps (kubelet_backup), named <file>.<pid>.<date@time>~."""
    names = host.check_output("ls -1 %s.*~ 2>/dev/null || true" % CONFIG).split()
    assert names, "no copy of %s kept by the converge" % CONFIG
    oldest = min(names, key=lambda name: re.search(r"\.(\d{4}-\d\d-\d\d@\d\d:\d\d:\d\d)~$", name).group(1))
    return host.file(oldest).content_string


def numa_kube_labels(api):
    return dict((key, value) for key, value in (api.read_node(UNEVEN).metadata.labels or {}).items()
                if key.startswith("numa.kube/"))


@pytest.fixture(scope="module")
def probe(api):
    """A Deployment's pod on numa-uneven: the drain evicts it, and it must run there again."""
    apps = kubernetes.client.AppsV1Api()
    spec = {"replicas": 1, "selector": {"matchLabels": {"app": PROBE}}, "template": {
        "metadata": {"labels": {"app": PROBE}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": UNEVEN}, "terminationGracePeriodSeconds": 1,
                 "automountServiceAccountToken": False,
                 "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                                 "command": ["sleep", "3600"]}]}}}
    apps.create_namespaced_deployment("default", {"apiVersion": "apps/v1", "kind": "Deployment",
                                                  "metadata": {"name": PROBE}, "spec": spec})
    try:
        yield wait("the probe pod running on %s" % UNEVEN, lambda: running_probe(api), timeout=300)
    finally:
        apps.delete_namespaced_deployment(PROBE, "default")


def test_absent_takes_the_node_back_out_inside_one_drain(host, api, probe):
    grub = host.file("/etc/default/grub").content_string
    cmdline = host.file("/proc/cmdline").content_string
    assert host.file(RECORD).exists, "the converge recorded what it merged into %s" % CONFIG
    mark = AUDIT.mark()

    done = run_playbook(TAKE_OUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    print(done.stdout[-1500:])

    # kubelet runs its defaults again, from the file as kubeadm wrote it before numa.kube
    running = configz(host)
    assert (running["cpuManagerPolicy"], running["memoryManagerPolicy"], running["topologyManagerPolicy"],
            running["topologyManagerScope"]) == ("none", "None", "none", "container"), running
    assert not running.get("reservedMemory"), running["reservedMemory"]
    assert yaml.safe_load(host.file(CONFIG).content_string) == yaml.safe_load(first_backup(host))
    assert '"policyName":"none"' in host.file("/var/lib/kubelet/cpu_manager_state").content_string.replace(" ", "")
    assert not host.file(RECORD).exists, "the record goes with the change it recorded"
    assert host.check_output("ls -A /var/lib/numa-kube/rollout | grep -v '^.lock$' || true") == ""
    # no kernel parameter was written there (kernel_args_reboot_ok is off): nothing to take back
    assert host.file("/etc/default/grub").content_string == grub
    assert host.file("/proc/cmdline").content_string == cmdline

    # the labels went first, then one drain, and the node is back as it was
    seen = [(verb, name) for verb, name in AUDIT.node_requests(since=mark, labels=True, node=UNEVEN) if verb != "evict"]
    print("audit: %s" % seen)
    assert seen == [("label", UNEVEN), ("cordon", UNEVEN), ("uncordon", UNEVEN)], seen
    assert numa_kube_labels(api) == {}, "the node keeps numa.kube labels"
    node = api.read_node(UNEVEN)
    assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"]
    assert not node.spec.unschedulable
    # the workload was evicted by the drain and runs on the node again
    again = wait("the probe pod running again on %s" % UNEVEN, lambda: running_probe(api), timeout=300)
    assert again.metadata.uid != probe.metadata.uid, "the drain evicted the probe pod"


def test_taking_it_out_again_changes_nothing(host):
    mark = AUDIT.mark()
    done = run_playbook(TAKE_OUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"%s\s*:.*changed=0" % UNEVEN, done.stdout), done.stdout[-2000:]
    assert AUDIT.node_requests(since=mark, labels=True, node=UNEVEN) == [], "a run with nothing to do asked the API for a change"


def test_label_nodes_labels_a_node_from_the_controller_alone(api):
    """playbooks/label_nodes.yml (for nodes numa.kube does not reach over SSH, such as EKS nodes
    started from its user data) labels numa-uneven from its kubelet's /configz, now the defaults;
    a second run changes nothing."""
    args = [os.path.join(ROOT, "playbooks", "label_nodes.yml"),
            "-e", "label_nodes_selector=kubernetes.io/hostname=" + UNEVEN,
            "-e", "label_nodes_kubeconfig=" + os.path.join(CONTROL_PLANE, "admin.kubeconfig")]
    done = run_playbook(args)
    assert done.returncode == 0, done.stdout[-3000:]
    assert numa_kube_labels(api) == {"numa.kube/cpu-manager-policy": "none", "numa.kube/memory-manager-policy": "None",
                                     "numa.kube/topology-manager-policy": "none",
                                     "numa.kube/topology-manager-scope": "container"}
    again = run_playbook(args)
    assert again.returncode == 0 and re.search(r"localhost\s*:.*changed=0", again.stdout), again.stdout[-2000:]
