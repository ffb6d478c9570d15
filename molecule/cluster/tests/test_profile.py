# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-kubelet's node profile (molecule.yml: CPU 0 reserved, the rest isolated, 16 huge pages of
2 MiB on NUMA node 1), applied by the converge in the reboot its kernel parameter already made.

Each test prints what it read. The node is read as its kernel, systemd and kubelet run it: the
command line and sysfs against the plan the node_profile module makes for the same profile, every
interrupt that can move, the CPUs services and pods may run on, the huge pages and when they came,
the interrupts the isolated CPUs took before and after the profile. The last test asks for huge
pages the node cannot give: kubelet stays down and the envelope puts the node back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import sys
import time

import kubernetes  # pinned in requirements-dev.txt: a missing client must fail the run, not skip it
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import (PausedGuest, configz, cpu_list, run_playbook, wait,  # noqa: E402 pylint: disable=wrong-import-position
                     wait_kubelet_healthy)

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
NODE = "numa-kubelet"
MARKER = "/var/lib/numa-kube/rollout/marker.json"
CONFIG = "/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf"
PAGES = "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages"
# the interrupts before the profile: prepare-node.sh.j2 read them a minute apart
BEFORE = ("/var/tmp/numa-test-interrupts.0", "/var/tmp/numa-test-interrupts.1")
WINDOW = 60
TEST_LABEL = {"numa.kube.test/profile": "true"}
# the interrupts test_every_interrupt_that_can_move... found movable (their numbers)
MOVABLE = []


def profile_vars():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "molecule.yml")) as handle:
        return yaml.safe_load(handle)["provisioner"]["inventory"]["host_vars"][NODE]


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


@pytest.fixture(scope="module", autouse=True)
def other_guest_paused():
    """numa-kubelet alone is read here: numa-uneven is held stopped meanwhile (test_kubelet.py says why)."""
    with PausedGuest(os.path.join(ROOT, "tests", "output", "vm", "cluster", "numa-uneven")):
        yield


@pytest.fixture(scope="module")
def plan(host):
    """The plan the node_profile module makes for the inventory's profile on this node, now: its CPUs,
    kernel parameters and pages (kubelet's version is not given, so its CPU Manager options are not
    the ones site.yml planned; the tests read those from kubelet itself)."""
    given = profile_vars()
    profile = {"reserved": given["node_profile_reserved"], "hugepages": given["node_profile_hugepages"]}
    result = host.ansible("numa.kube.node_profile", "profile='%s'" % json.dumps(profile), check=True)
    assert not result.get("failed"), result
    print("plan: reserved %s, isolated %s, kernel %s, pages %s" % (
        result["reserved"], result["isolated"], result["kernel_args"], result["hugepages"]))
    return result


@pytest.fixture(scope="module")
def interrupts_after(host):
    """/proc/interrupts at the first test of this file; the last reading test takes the second."""
    return {"first": host.file("/proc/interrupts").content_string, "at": time.time()}


def interrupt_counts(text):
    """{irq name: [count per CPU]} from /proc/interrupts (numbered device interrupts and the named
    ones such as LOC alike)."""
    lines = text.splitlines()
    cpus = len(lines[0].split())
    counts = {}
    for line in lines[1:]:
        name, rest = line.split(":", 1) if ":" in line else (line, "")
        fields = rest.split()
        values = [int(field) for field in fields[:cpus] if field.isdigit()]
        if len(values) == cpus:
            counts[name.strip()] = values
    return counts


def delta(before, after):
    first, second = interrupt_counts(before), interrupt_counts(after)
    return dict((name, [b - a for a, b in zip(first[name], second[name])]) for name in second if name in first)


def per_cpu(changes, numbered):
    """Interrupts per CPU over the window: the numbered (device) ones, or the named ones."""
    rows = [values for name, values in changes.items() if name.isdigit() == numbered]
    return [sum(column) for column in zip(*rows)] if rows else []


# --- the kernel ---------------------------------------------------------------------------------------------

def test_the_kernel_runs_the_planned_command_line_and_isolation(host, plan, interrupts_after):
    cmdline = host.file("/proc/cmdline").content_string.split()
    isolated_sysfs = host.file("/sys/devices/system/cpu/isolated").content_string.strip()
    nohz_sysfs = host.file("/sys/devices/system/cpu/nohz_full").content_string.strip()
    print("cmdline: %s\nsysfs isolated '%s', nohz_full '%s'" % (" ".join(cmdline), isolated_sysfs, nohz_sysfs))
    assert interrupts_after["first"]
    for arg in plan["kernel_args"]:
        assert arg in cmdline, "%s not in the running command line" % arg
    assert sorted(arg.split("=")[0] for arg in plan["kernel_args"]) == ["irqaffinity", "isolcpus", "nohz_full",
                                                                        "rcu_nocbs"]
    isolated = cpu_list(plan["isolated"])
    assert plan["reserved"] == "0" and isolated == {1, 2, 3}, plan
    # isolcpus without its domain flag (balance_isolated true) leaves the scheduler domains whole:
    # sysfs' isolated lists the domain-isolated CPUs only
    flags = [arg for arg in cmdline if arg.startswith("isolcpus=")][0].split("=", 1)[1]
    assert cpu_list(isolated_sysfs) == (isolated if "domain" in flags.split(",") else set()), isolated_sysfs
    assert cpu_list(nohz_sysfs) == isolated


def test_every_interrupt_that_can_move_is_on_the_reserved_cpus(host, plan):
    """An interrupt can move where writing its own affinity back is taken (a managed one refuses):
    its effective affinity must then lie within the reserved CPUs (irqaffinity=)."""
    script = r"""
for d in /proc/irq/[0-9]*; do
  n=${d##*/}
  [ -n "$(find "$d" -mindepth 1 -maxdepth 1 -type d)" ] || continue   # no handler: not in use
  eff=$(cat "$d/effective_affinity_list" 2>/dev/null) || continue
  mask=$(cat "$d/smp_affinity_list")
  if printf '%s\n' "$mask" > "$d/smp_affinity_list" 2>/dev/null; then moves=1; else moves=0; fi
  echo "$n $moves $eff $(cd "$d" && find . -mindepth 1 -maxdepth 1 -type d -printf '%f,')"
done
"""
    rows = [line.split() for line in host.check_output(script).splitlines()]
    reserved = cpu_list(plan["reserved"])
    print("irq movable effective handlers:\n" + "\n".join("  " + " ".join(row) for row in rows))
    movable = [row for row in rows if row[1] == "1"]
    assert movable, "no interrupt in use could be moved: %s" % rows
    MOVABLE[:] = [row[0] for row in movable]
    outside = [row for row in movable if not cpu_list(row[2]) <= reserved]
    assert not outside, "interrupts that can move but run outside the reserved CPUs %s: %s" % (plan["reserved"], outside)


def test_services_run_on_the_reserved_cpus(host, plan):
    """systemd's CPUAffinity: systemd itself, kubelet, containerd and a service started at boot."""
    reserved = cpu_list(plan["reserved"])
    seen = {}
    for unit in ("kubelet", "containerd", "systemd-journald", "systemd-udevd"):
        pid = host.check_output("systemctl show -p MainPID --value %s" % unit)
        assert pid not in ("", "0"), "%s runs no main process" % unit
        status = host.file("/proc/%s/status" % pid).content_string
        seen[unit] = re.search(r"^Cpus_allowed_list:\s*(\S+)$", status, re.M).group(1)
    status = host.file("/proc/1/status").content_string
    seen["systemd"] = re.search(r"^Cpus_allowed_list:\s*(\S+)$", status, re.M).group(1)
    print("Cpus_allowed_list: %s" % seen)
    assert dict((unit, cpu_list(cpus)) for unit, cpus in seen.items()) == dict((unit, reserved) for unit in seen), seen


# --- pods and huge pages ------------------------------------------------------------------------------------

REPORT = ("echo cpus=$(cat /sys/fs/cgroup/cpuset.cpus.effective) mems=$(cat /sys/fs/cgroup/cpuset.mems.effective) "
          "allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status); sleep 3600")


def pod(name, requests, limits):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": dict(TEST_LABEL)},
            "spec": {"nodeName": NODE, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                     "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", REPORT],
                                     "resources": {"requests": requests, "limits": limits}}]}}


def reported(api, name):
    def read():
        if api.read_namespaced_pod(name, "default").status.phase != "Running":
            return None
        log = api.read_namespaced_pod_log(name, "default")
        return dict(re.findall(r"(\w+)=(\S*)", log)) if "allowed=" in log else None
    return wait("pod %s reports its CPUs" % name, read, timeout=180, interval=2)


def test_pods_get_isolated_cpus_and_huge_pages_on_numa_node_1(host, api, plan):
    """A Guaranteed pod with 2 MiB huge pages: its CPU among the isolated ones, its memory on NUMA node
    1 (the only one with pages). A Burstable pod: the shared pool, which strict-cpu-reservation keeps
    off the reserved CPUs."""
    running = configz(host)
    options = running.get("cpuManagerPolicyOptions") or {}
    print("kubelet: reservedSystemCPUs %s, cpuManagerPolicyOptions %s" % (running.get("reservedSystemCPUs"), options))
    assert running.get("reservedSystemCPUs") == plan["reserved"]
    assert options.get("strict-cpu-reservation") == "true", options
    guaranteed = {"cpu": "1", "memory": "64Mi", "hugepages-2Mi": "4Mi"}
    api.create_namespaced_pod("default", pod("numa-test-pages", guaranteed, guaranteed))
    api.create_namespaced_pod("default", pod("numa-test-shared", {"cpu": "10m", "memory": "16Mi"}, {"memory": "32Mi"}))
    try:
        pages, shared = reported(api, "numa-test-pages"), reported(api, "numa-test-shared")
        print("Guaranteed with huge pages: %s\nBurstable: %s" % (pages, shared))
        isolated, reserved = cpu_list(plan["isolated"]), cpu_list(plan["reserved"])
        assert len(cpu_list(pages["cpus"])) == 1 and cpu_list(pages["cpus"]) <= isolated, pages
        assert pages["mems"] == "1", "the pod's huge pages and memory on NUMA node 1: %s" % pages
        assert cpu_list(shared["cpus"]) and not cpu_list(shared["cpus"]) & reserved, shared
        assert not cpu_list(shared["cpus"]) & cpu_list(pages["cpus"]), "the exclusive CPU left the shared pool"
    finally:
        for name in ("numa-test-pages", "numa-test-shared"):
            api.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def first_in_boot(host, unit, verb):
    """The monotonic time (µs) of systemd's first line about ``unit`` in this boot that starts with
    ``verb`` (Starting, Started, Finished)."""
    line = host.check_output("journalctl -b -o json --output-fields=MESSAGE UNIT=%s --no-pager | grep -m1 '\"%s' || true"
                             % (unit, verb))
    assert line, "the journal of this boot has no line '%s %s...'" % (verb, unit)
    return int(json.loads(line)["__MONOTONIC_TIMESTAMP"])


def test_huge_pages_per_numa_node_come_before_kubelet(host, api, plan):
    """The pages as planned on each NUMA node, allocated by their unit before kubelet first started in
    this boot (kubelet's service requires the unit), and published: Node capacity and NRT zone."""
    counts = [int(host.file(PAGES % node).content_string) for node in (0, 1)]
    planned = dict((page["node"], page["count"]) for page in plan["hugepages"] if page["size_kb"] == 2048)
    unit = "numa-kube-hugepages-node1-2048kB.service"
    # the unit's first run and kubelet's first start in this boot, from systemd's own journal lines
    # (later tests restart both)
    done_at, kubelet_at = first_in_boot(host, unit, "Finished"), first_in_boot(host, "kubelet.service", "Start")
    requires = host.check_output("systemctl show -p Requires -p After --value kubelet")
    capacity = api.read_node(NODE).status.capacity
    nrt = kubernetes.client.CustomObjectsApi().get_cluster_custom_object(
        "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", NODE)
    zones = dict((zone["name"], dict((r["name"], r["capacity"]) for r in zone.get("resources", [])
                                     if r["name"].startswith("hugepages-")))
                 for zone in nrt["zones"])
    print("2 MiB pages per NUMA node %s (planned %s); %s done at %.1f s, kubelet first started at %.1f s; "
          "Node capacity %s; NRT zones %s" % (counts, planned, unit, done_at / 1e6, kubelet_at / 1e6,
                                              capacity.get("hugepages-2Mi"), zones))
    assert counts == [planned.get(0, 0), planned.get(1, 0)] == [0, 16]
    assert unit in requires.split(), "kubelet's service requires the unit: %s" % requires
    assert 0 < done_at < kubelet_at, "the pages came before kubelet's first start in this boot"
    assert capacity.get("hugepages-2Mi") == "32Mi", capacity
    assert kubernetes.utils.parse_quantity(zones["node-1"].get("hugepages-2Mi", "0")) == 32 * 2 ** 20, zones
    assert kubernetes.utils.parse_quantity(zones["node-0"].get("hugepages-2Mi", "0")) == 0, zones


# --- huge pages the node cannot give ------------------------------------------------------------------------

HOG = r"""
import ctypes, mmap, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
mask = ctypes.c_ulong(1 << 1)   # NUMA node 1 only (MPOL_BIND)
if libc.syscall(238, 2, ctypes.byref(mask), 64) != 0:
    sys.exit("set_mempolicy: %s" % os.strerror(ctypes.get_errno()))
size = int(sys.argv[1])
block = mmap.mmap(-1, size)
for offset in range(0, size, 4096):
    block[offset] = 1
open("/run/numa-test-hog.ready", "w").write(str(size))
time.sleep(3600)
"""


def test_pages_the_node_cannot_give_keep_kubelet_down_and_the_node_is_put_back(host, api):
    """NUMA node 1's free memory held by a process bound to it, a profile asking 100 more pages there
    than it has: the plan accepts it (the node's memory would hold them), the unit cannot allocate
    them in the 10 s it is given and kubelet, which requires it, stays down; the envelope gives the
    pages back, restores the files and starts kubelet on the 16 pages as before."""
    given = profile_vars()
    pages = [dict(page, count=page["count"] + 100) for page in given["node_profile_hugepages"]]
    files = [CONFIG, "/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service",
             "/etc/systemd/system/kubelet.service.d/50-numa-kube-hugepages.conf", "/usr/local/libexec/numa-kube/hugepages"]
    before = [host.file(path).sha256sum for path in files]
    host.check_output("sync; echo 3 > /proc/sys/vm/drop_caches")
    free_kb = int(host.check_output("awk '/MemFree/ {print $4}' /sys/devices/system/node/node1/meminfo"))
    hold = (free_kb - 64 * 1024) * 1024   # 64 MiB left free: fewer than the 200 MiB of pages asked
    host.check_output("rm -f /run/numa-test-hog.ready; systemd-run --quiet --unit numa-test-hog --collect "
                      "python3 -c %s %d" % (shlex.quote(HOG), hold))
    try:
        wait("the memory of NUMA node 1 held", lambda: host.file("/run/numa-test-hog.ready").exists, timeout=120)
        extra = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain_force": True,
                 "kubelet_topology_manager_scope": "pod", "kubelet_health_settle": 5, "rollout_health_settle": 5,
                 "kubelet_health_timeout": 60, "rollout_drain": False, "node_profile_hugepages": pages,
                 "node_profile_hugepages_seconds": 10}
        started = time.time()
        done = run_playbook([os.path.join(ROOT, "playbooks", "site.yml"), "--limit", NODE, "--tags", "kubelet",
                             "-e", json.dumps(extra)], timeout=900)
        output = done.stdout + done.stderr
        print("held %d MiB of NUMA node 1; the run took %d s:\n%s" % (hold >> 20, time.time() - started, "\n".join(
            line for line in output.splitlines() if "dependency job" in line or "huge pages of 2048 kB" in line
            or "rolled %s back" % NODE in line)[:3000]))
        assert done.returncode != 0, "the run must fail: the pages cannot be allocated"
        assert "dependency job for kubelet.service failed" in output, "kubelet's start must fail on the page unit"
        assert "rolled %s back" % NODE in output, output[-4000:]
        assert host.run("systemctl is-active numa-test-hog").stdout.strip() == "active", "the hog held node 1 throughout"
    finally:
        host.run("systemctl stop numa-test-hog")
    assert [host.file(path).sha256sum for path in files] == before, "the profile's files are back as they were"
    assert not host.file(MARKER).exists, "the record is closed"
    assert int(host.file(PAGES % 1).content_string) == given["node_profile_hugepages"][0]["count"]
    wait_kubelet_healthy(host, settle=5)
    assert not api.read_node(NODE).spec.unschedulable
    assert api.read_node(NODE).status.capacity.get("hugepages-2Mi") == "32Mi"
    wait("numa-kubelet Ready", lambda: [c for c in api.read_node(NODE).status.conditions
                                        if c.type == "Ready"][0].status == "True", timeout=120)


def test_the_isolated_cpus_take_no_interrupt_that_can_move(host, plan, interrupts_after):
    """A minute of /proc/interrupts before the profile (read at the end of the preparation) and one
    after (this file's first test to this one, the last: the failing change above falls in it, with
    kubelet's restarts), side by side per CPU."""
    left = WINDOW - (time.time() - interrupts_after["at"])
    if left > 0:
        time.sleep(left)
    took = time.time() - interrupts_after["at"]
    after = delta(interrupts_after["first"], host.file("/proc/interrupts").content_string)
    before = delta(host.file(BEFORE[0]).content_string, host.file(BEFORE[1]).content_string)
    isolated = sorted(cpu_list(plan["isolated"]))
    print("interrupts per minute, CPU by CPU (isolated: %s)" % plan["isolated"])
    print("  %-28s %s" % ("", "  ".join("CPU%-7d" % cpu for cpu in range(len(per_cpu(after, True))))))
    for label, changes, seconds in (("before: devices", before, WINDOW), ("after:  devices", after, took)):
        print("  %-28s %s" % (label, "  ".join("%-10d" % (n * 60 / seconds) for n in per_cpu(changes, True))))
    for name in sorted(set(before) | set(after)):
        if not name.isdigit() and (sum(before.get(name, [])) or sum(after.get(name, []))):
            print("  %-28s %s" % ("before: " + name, "  ".join("%-10d" % n for n in before.get(name, []))))
            print("  %-28s %s" % ("after:  " + name, "  ".join("%-10d" % (n * 60 / took) for n in after.get(name, []))))
    # what must hold: no interrupt that can move reached an isolated CPU in the window (those that
    # cannot, a device's queue the kernel manages per CPU, fire where their I/O was issued)
    assert MOVABLE, "the interrupts' test ran first and found the movable ones"
    reached = dict((name, [after[name][cpu] for cpu in isolated]) for name in MOVABLE
                   if name in after and any(after[name][cpu] for cpu in isolated))
    assert not reached, "interrupts that can move reached the isolated CPUs: %s" % reached
