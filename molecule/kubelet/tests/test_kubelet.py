# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real kubelet (registered with a real API server) proves what the kubelet role did.

The tests run in file order: the ones that stop or break kubelet come last and leave it healthy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import kubernetes  # pinned in requirements.txt: a missing client must fail the run, not skip it
import pytest
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import exporter_metrics  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://all"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "kubelet", "control-plane")
REPORT = os.path.join(ROOT, "tests", "output", "vm", "kubelet", "kubelet-crosscheck.txt")
NODE = "numa-guest"
CONFIG = "/var/lib/kubelet/config.yaml"
MARKER = "/var/lib/numa-kube/rollout/marker.json"
# what the test runs pass besides the change under test: the API, short settle times
API = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_node_name": NODE,
       "rollout_drain_force": True, "kubelet_topology_manager_scope": "pod", "kubelet_health_settle": 5,
       "rollout_health_settle": 5}


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


def configz(host):
    """The configuration kubelet runs with, from its /configz."""
    script = ("import ssl, urllib.request as u\n"
              "print(u.urlopen('https://127.0.0.1:10250/configz', timeout=20,"
              " context=ssl._create_unverified_context()).read().decode())\n")
    return json.loads(host.check_output("python3 -c %s" % shlex.quote(script)))["kubeletconfig"]


def wait_kubelet_healthy(host, settle=15, timeout=300):
    """Readiness of the test bed after a restart the test itself made: healthz ok for ``settle`` s."""
    script = ("import time, urllib.request as u\n"
              "good = None\n"
              "end = time.time() + %d\n"
              "while time.time() < end:\n"
              "    try:\n"
              "        ok = u.urlopen('http://127.0.0.1:10248/healthz', timeout=5).read() == b'ok'\n"
              "    except Exception:\n"
              "        ok = False\n"
              "    good = (good or time.time()) if ok else None\n"
              "    if good and time.time() - good >= %d:\n"
              "        raise SystemExit(0)\n"
              "    time.sleep(2)\n"
              "raise SystemExit(1)\n" % (timeout, settle))
    assert host.run("python3 -c %s" % shlex.quote(script)).rc == 0, "kubelet did not become healthy"


def guaranteed_pod(name, cpu, memory):
    resources = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                 "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                                 "resources": {"requests": resources, "limits": resources}}]},
    }


def wait_pod(api, name, done, timeout=300):
    deadline = time.time() + timeout
    pod = None
    while time.time() < deadline:
        pod = api.read_namespaced_pod(name, "default")
        if done(pod):
            return pod
        time.sleep(3)
    pytest.fail("pod %s did not get there in %d s: %s" % (name, timeout, pod and pod.status))


def cpu_list(text):
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def node_cpus(host, node):
    return cpu_list(host.file("/sys/devices/system/node/node%d/cpulist" % node).content_string)


# --- what the converge did ---------------------------------------------------------------------

def test_node_is_ready_and_schedulable_with_the_numa_settings_in_force(host, api):
    node = api.read_node(NODE)
    ready = [c for c in node.status.conditions if c.type == "Ready"][0]
    assert ready.status == "True", ready
    assert not node.spec.unschedulable, "the role left the node cordoned"
    running = configz(host)
    assert running["cpuManagerPolicy"] == "static"
    assert running["memoryManagerPolicy"] == "Static"
    assert running["topologyManagerPolicy"] == "single-numa-node"
    assert running["topologyManagerScope"] == "pod"
    assert sum(int(e["limits"]["memory"].rstrip("Mi")) for e in running["reservedMemory"]) == 256 + 100


def audit_mark():
    """The audit log's length now, to read only what comes after."""
    with open(os.path.join(CONTROL_PLANE, "audit.log")) as handle:
        return sum(1 for _line in handle)


def admin_requests(since=0, times=False):
    """What the role's controller asked of the API server, in order, from its audit log: (verb,
    name) pairs, or (verb, name, epoch seconds) with ``times``, from line ``since`` on."""
    requests = []
    with open(os.path.join(CONTROL_PLANE, "audit.log")) as handle:
        for number, line in enumerate(handle):
            if number < since:
                continue
            event = json.loads(line)
            if event["user"]["username"] != "numa-kube-admin" or event.get("stage") != "ResponseComplete":
                continue
            if event.get("responseStatus", {}).get("code", 500) >= 300:
                continue
            ref = event["objectRef"]
            if ref["resource"] == "nodes" and not ref.get("subresource") and event["verb"] in ("patch", "update"):
                spec = (event.get("requestObject") or {}).get("spec") or {}
                if "unschedulable" in spec:  # other node changes (labels, taints) are neither
                    requests.append(("cordon" if spec["unschedulable"] else "uncordon", ref["name"], event))
            elif ref.get("subresource") == "eviction":
                requests.append(("evict", ref["name"], event))
    if times:
        return [(verb, name, epoch(event["stageTimestamp"])) for verb, name, event in requests]
    return [(verb, name) for verb, name, _event in requests]


def epoch(stamp):
    """RFC 3339 time of the audit log (UTC, microseconds) as seconds since the epoch."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + stamp[19:].rstrip("Z"))


def test_the_change_and_the_reboot_went_through_one_drain(host, api):
    """The API server saw the node cordoned, the running pod evicted (not deleted), and the node
    uncordoned only after the reboot for the kernel parameter: one envelope around both changes."""
    seen = admin_requests(times=True)
    print("audit: %s" % seen)
    assert [(verb, name) for verb, name, _t in seen] == [
        ("cordon", NODE), ("evict", "running-before-static"), ("uncordon", NODE)], seen
    booted = int(re.search(r"^btime (\d+)$", host.file("/proc/stat").content_string, re.M).group(1))
    # guest and host clocks both come from the host (qemu's RTC); the reboot takes minutes
    assert seen[1][2] < booted < seen[2][2], (seen, booted)
    assert "numa_balancing=disable" in host.file("/proc/cmdline").content_string.split()
    assert host.file("/proc/sys/kernel/numa_balancing").content_string.strip() == "0"
    names = [p.metadata.name for p in api.list_namespaced_pod("default").items]
    assert "running-before-static" not in names
    state = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    assert state["policyName"] == "static"
    assert not host.file(MARKER).exists, "the rollout record is closed"


# --- a re-run after the reboot finds nothing to do ------------------------------------------------

def test_a_rerun_after_the_reboot_changes_nothing_and_drains_nothing(host):
    """Per-node memory moved with the reboot; the reservation in force still adds up, so it stays."""
    pid = host.check_output("systemctl show -p MainPID --value kubelet")
    mark = audit_mark()
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
               os.path.join(ROOT, "molecule", "kubelet", "converge.yml")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert re.search(r"numa-kubelet\s*:.*changed=0", result.stdout), result.stdout[-2000:]
    assert admin_requests(since=mark) == [], "a run with nothing to do asked the API for a cordon or an eviction"
    assert host.check_output("systemctl show -p MainPID --value kubelet") == pid


# --- bad input stops everything before any node changes ------------------------------------------

def test_bad_input_is_refused_in_preflight_and_nothing_changes(host, api):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vars", "bad-inputs.yml")) as handle:
        bad = yaml.safe_load(handle)

    def checksums():
        return [host.file(path).sha256sum if host.file(path).exists else "absent" for path in bad["test_managed_files"]]

    before = checksums()
    mark = audit_mark()
    for case in bad["test_bad_inputs"]:
        command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
                   os.path.join(ROOT, "playbooks", "site.yml"), "-e", json.dumps(dict(API, **case["vars"]))]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                              env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
        output = done.stdout + done.stderr
        said = [line for line in output.splitlines() if case["expect"] in line]
        print("%s: %s" % (case["name"], said[0][:400] if said else "(not said)"))
        assert done.returncode != 0, "%s: the run passed" % case["name"]
        assert said, "%s: the failure does not say %r:\n%s" % (case["name"], case["expect"], output[-3000:])
        assert "PLAY [Change the nodes" not in done.stdout, "%s: got past preflight" % case["name"]
    assert checksums() == before, "a run with bad input changed a file on the node"
    assert admin_requests(since=mark) == [], "a run with bad input cordoned or evicted"
    assert not api.read_node(NODE).spec.unschedulable


# --- kubelet pins Guaranteed pods to one NUMA node ------------------------------------------------

def test_guaranteed_pod_gets_exclusive_cpus_and_memory_of_one_numa_node(host, api):
    api.create_namespaced_pod("default", guaranteed_pod("pinned", "1", "128Mi"))
    pod = wait_pod(api, "pinned", lambda p: p.status.phase == "Running")
    container = pod.status.container_statuses[0].container_id.split("://")[-1]
    folder = host.check_output("find /sys/fs/cgroup/kubepods* -maxdepth 3 -type d -name '*%s*'" % container)
    assert folder, "no cgroup for container %s" % container
    cpus = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.cpus.effective").content_string)
    mems = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.mems.effective").content_string)
    print("pinned pod: cpuset.cpus=%s cpuset.mems=%s" % (sorted(cpus), sorted(mems)))
    assert len(cpus) == 1, "a Guaranteed pod with cpu: 1 gets exactly one exclusive CPU"
    assert len(mems) == 1, "its memory comes from one NUMA node"
    assert cpus <= node_cpus(host, list(mems)[0]), "CPU and memory on the same NUMA node"
    reserved = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    assert str(list(cpus)[0]) in json.dumps(reserved.get("entries", {})), reserved
    # the exporter reads the same checkpoints: one exclusive CPU and 128Mi assigned, on that node only
    node = list(mems)[0]
    values = exporter_metrics(host)
    for numa_node in (0, 1):
        label = (("numa_node", str(numa_node)),)
        assert values[("numa_node_cpus_exclusive", label)] == (1 if numa_node == node else 0), values
        assigned = values[("numa_node_memory_assigned_bytes", (("numa_node", str(numa_node)), ("resource", "memory")))]
        assert assigned == (128 * 2 ** 20 if numa_node == node else 0), values
    api.delete_namespaced_pod("pinned", "default", grace_period_seconds=0)


def test_pod_that_fits_the_node_but_no_numa_node_is_rejected(host, api):
    allocatable = api.read_node(NODE).status.allocatable["cpu"]
    cores = float(allocatable[:-1]) / 1000 if allocatable.endswith("m") else float(allocatable)
    assert cores >= 3, "the node as a whole has room for 3 CPUs (%s)" % allocatable
    assert all(len(node_cpus(host, n)) < 3 for n in (0, 1)), "no single NUMA node has 3 CPUs"
    api.create_namespaced_pod("default", guaranteed_pod("too-wide", "3", "128Mi"))
    pod = wait_pod(api, "too-wide", lambda p: p.status.phase == "Failed")
    print("too-wide pod: reason=%s message=%s" % (pod.status.reason, pod.status.message))
    assert pod.status.reason == "TopologyAffinityError"
    api.delete_namespaced_pod("too-wide", "default", grace_period_seconds=0)


# --- the reservation engine against the real kubelet ----------------------------------------------

KUBELET_TRIAL = r'''
import subprocess, sys, time
cmd = ["/usr/local/bin/kubelet", "--config=" + sys.argv[1], "--root-dir=" + sys.argv[2],
       "--hostname-override=crosscheck"]
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
verdict, line, started, deadline = "undecided", "", None, time.time() + 90
import os, select
while time.time() < deadline:
    ready, _, _ = select.select([proc.stdout], [], [], 1)
    if ready:
        text = proc.stdout.readline()
        if not text and proc.poll() is not None:
            break
        if '"command failed"' in text or "Failed to initialize memory manager" in text:
            verdict, line = "refused", text.strip()
            break
        if "Started kubelet" in text and started is None:
            started = time.time()
    if started and time.time() - started > 10:
        verdict = "accepted"
        break
proc.kill()
proc.wait()
print(verdict)
print(line)
'''


def reserved_memory_module(args):
    """Run numa.kube.reserved_memory on the controller as an ad-hoc task; returns its result."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOAD_CALLBACK_PLUGINS="0")
    env.pop("ANSIBLE_CONFIG", None)
    out = subprocess.run(["ansible", "localhost", "-c", "local", "-m", "numa.kube.reserved_memory", "-a",
                          json.dumps(args)], env=env, capture_output=True, text=True, timeout=300, check=False)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)
    assert "=> {" in text, out.stdout + out.stderr
    result = json.loads(text[text.index("=> {") + 3:])
    # the one-line header says how the task ended: "localhost | SUCCESS => {" or "localhost | FAILED! => {"
    result["failed"] = "FAILED" in text[:text.index("=> {")]
    return result


def test_reservation_verdicts_agree_with_the_real_kubelet(host):
    node_memory = {}
    for node in (0, 1):
        text = host.file("/sys/devices/system/node/node%d/meminfo" % node).content_string
        node_memory[str(node)] = int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1)) * 1024
    capacity = int(re.search(r"MemTotal:\s+(\d+) kB", host.file("/proc/meminfo").content_string).group(1)) * 1024
    base = yaml.safe_load(host.file(CONFIG).content_string)
    kube = {"cpu": "500m", "memory": "256Mi"}
    rke2 = {"imagefs.available": "15%"}
    cases = [
        ("sum equal (kubeadm eviction 100Mi)", None, [(0, {"memory": "178Mi"}), (1, {"memory": "178Mi"})]),
        ("sum unequal", None, [(0, {"memory": "100Mi"}), (1, {"memory": "100Mi"})]),
        ("hugepages entry", None, [(0, {"memory": "356Mi", "hugepages-2Mi": "2Mi"})]),
        ("NUMA node that does not exist", None, [(0, {"memory": "178Mi"}), (7, {"memory": "178Mi"})]),
        ("memory.available 5%, computed", {"memory.available": "5%"}, "compute"),
        ("memory.available 5%, 100Mi assumed", {"memory.available": "5%"},
         [(0, {"memory": "178Mi"}), (1, {"memory": "178Mi"})]),
        ("RKE2-style eviction, kube-reserved only", rke2, [(0, {"memory": "128Mi"}), (1, {"memory": "128Mi"})]),
        ("RKE2-style eviction, 100Mi added", rke2, [(0, {"memory": "178Mi"}), (1, {"memory": "178Mi"})]),
    ]
    report = []
    host.run_expect([0], "systemctl stop kubelet")
    try:
        for index, (title, eviction, layout) in enumerate(cases):
            args = {"numa_node_memory": node_memory, "memory_capacity": capacity, "kube_reserved": kube,
                    "placement": "single"}
            if eviction:
                args["eviction_hard"] = eviction
            if layout != "compute":
                args["reserved_memory"] = [{"numaNode": n, "limits": limits} for n, limits in layout]
            result = reserved_memory_module(args)
            refused, message = bool(result.get("failed")), result.get("msg", "")
            if layout == "compute":
                assert not refused, message
                layout = [(e["numaNode"], e["limits"]) for e in result["reserved_memory"]]
            config = dict(base, kubeReserved=kube, cpuManagerPolicy="none", memoryManagerPolicy="Static",
                          reservedMemory=[{"numaNode": n, "limits": limits} for n, limits in layout])
            config.pop("topologyManagerPolicy", None)
            if eviction:
                config["evictionHard"] = eviction
            path = "/var/tmp/crosscheck-%d.yaml" % index
            host.run_expect([0], "cat > %s <<'EOF'\n%s\nEOF" % (path, yaml.safe_dump(config)))
            host.run_expect([0], "cat > /var/tmp/kubelet_trial.py <<'EOF'\n%s\nEOF" % KUBELET_TRIAL)
            trial = host.check_output("python3 /var/tmp/kubelet_trial.py %s /var/lib/kubelet-crosscheck/%d"
                                      % (path, index)).splitlines()
            verdict = trial[0]
            report.append("%-45s module: %-8s kubelet: %-8s %s" % (
                title, "refused" if refused else "accepted", verdict, trial[1] if len(trial) > 1 else ""))
            print(report[-1])
            assert verdict in ("accepted", "refused"), "kubelet gave no verdict for %r: %s" % (title, trial)
            assert (verdict == "refused") == refused, "module and kubelet disagree on %r: %s / %s" % (
                title, message, trial)
    finally:
        os.makedirs(os.path.dirname(REPORT), exist_ok=True)
        with open(REPORT, "w") as handle:
            handle.write("\n".join(report) + "\n")
        host.run("rm -rf /var/lib/kubelet-crosscheck /var/tmp/crosscheck-*.yaml; systemctl start kubelet")
        wait_kubelet_healthy(host)
    assert len(report) == len(cases)


# --- the role is what makes the difference ---------------------------------------------------------

def test_the_same_change_by_hand_without_removing_the_state_crash_loops(host):
    """Flip the CPU Manager policy by hand, keeping cpu_manager_state: kubelet refuses to start."""
    original = host.file(CONFIG).content_string
    host.run_expect([0], "cp %s /var/tmp/config.yaml.by-hand && sed -i 's/^cpuManagerPolicy: static$/"
                         "cpuManagerPolicy: none/' %s && date +%%s > /var/tmp/by-hand.since" % (CONFIG, CONFIG))
    try:
        host.run_expect([0], "systemctl restart kubelet")
        since = host.file("/var/tmp/by-hand.since").content_string.strip()
        deadline = time.time() + 120
        line = ""
        while time.time() < deadline and not line:
            journal = host.run("journalctl -u kubelet --since @%s --no-pager -o cat" % since).stdout
            line = next((entry for entry in journal.splitlines() if "differs from state checkpoint policy" in entry), "")
            time.sleep(3)
        print("kubelet after the change by hand: %s" % line)
        assert 'configured policy \\"none\\" differs from state checkpoint policy \\"static\\"' in line
        assert "delete the CPU manager checkpoint file" in line
    finally:
        host.run_expect([0], "cp /var/tmp/config.yaml.by-hand %s && systemctl restart kubelet" % CONFIG)
        wait_kubelet_healthy(host)
    assert host.file(CONFIG).content_string == original


def run_site(extra):
    """The site playbook's kubelet part against the scenario's guest, as a user runs it."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(ROOT, "playbooks",
               "site.yml"), "--tags", "kubelet", "-e", json.dumps(extra)]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))


def test_a_configuration_kubelet_refuses_is_rolled_back(host):
    """Past the preflight with the test-only switch, a wrong sum reaches kubelet; the role restores
    the previous bytes from its rollout record although no backup copy is kept."""
    before = host.file(CONFIG).sha256sum
    backups = host.run("ls /var/lib/kubelet/config.yaml.*~ 2>/dev/null").stdout
    running_before = configz(host)["reservedMemory"]
    extra = {"kubelet_validate": False, "rollout_drain": False, "kubelet_health_timeout": 60,
             "kubelet_health_settle": 10, "rollout_health_settle": 5, "kubelet_backup": False,
             "kubelet_reserved_memory": [{"numaNode": 0, "limits": {"memory": "300Mi"}}]}
    result = run_site(extra)
    output = result.stdout + result.stderr
    print("\n".join(line for line in output.splitlines() if "rolled" in line or "not equal" in line)[:3000])
    assert result.returncode != 0, "the play should fail"
    assert "rolled numa-kubelet back" in output or "rolled %s back" % "numa-kubelet" in output
    assert 'is not equal to the value' in output and "Node Allocatable" in output
    assert host.file(CONFIG).sha256sum == before, "the previous configuration file is back"
    assert host.run("ls /var/lib/kubelet/config.yaml.*~ 2>/dev/null").stdout == backups, "no backup was kept"
    assert not host.file(MARKER).exists, "the rollout record is closed"
    wait_kubelet_healthy(host, settle=5)
    assert configz(host)["reservedMemory"] == running_before


# --- an interrupted run is finished by the next one ------------------------------------------------

def run_site_killed_after(extra, task):
    """Run the kubelet part and SIGKILL the controller (ansible-playbook and its workers) as soon as
    ``task`` has reported on the guest, as a lost laptop or CI runner would."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
               os.path.join(ROOT, "playbooks", "site.yml"), "--tags", "kubelet", "-e", json.dumps(extra)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1"))
    lines, in_task, killed = [], False, False
    deadline = time.time() + 900
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("TASK ["):
                in_task = task in line
            elif in_task and line.startswith(("changed:", "ok:")):
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            if time.time() > deadline:
                break
    finally:
        if not killed:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    output = "".join(lines)
    assert killed, "the run never reached %r:\n%s" % (task, output[-3000:])
    return output


def interrupted_and_finished(host, api, options):
    """Kill a run right after it stopped kubelet, prove the node is left down, run again; returns the
    audit log mark taken before the first run."""
    mark = audit_mark()
    change = dict(API, kubelet_cpu_manager_policy_options=options)
    run_site_killed_after(change, "Stop the kubelet service")
    # what the interrupted run left: kubelet stopped, the node cordoned, the record on the node
    assert host.run("systemctl is-active kubelet").stdout.strip() != "active"
    assert api.read_node(NODE).spec.unschedulable
    record = json.loads(host.file(MARKER).content_string)
    assert any(entry["path"] == CONFIG for entry in record["files"]), record
    result = run_site(change)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "unfinished change started at" in output, "the second run did not find the record"
    assert not host.file(MARKER).exists
    assert host.service("kubelet").is_running
    assert configz(host)["cpuManagerPolicyOptions"] == options
    ready = [c for c in api.read_node(NODE).status.conditions if c.type == "Ready"][0]
    assert ready.status == "True"
    return mark


def test_an_interrupted_run_is_finished_and_the_node_returned_to_service(host, api):
    assert not api.read_node(NODE).spec.unschedulable
    mark = interrupted_and_finished(host, api, {"full-pcpus-only": "true"})
    assert not api.read_node(NODE).spec.unschedulable, "the node was schedulable before and must be again"
    seen = admin_requests(since=mark)
    assert seen[-1] == ("uncordon", NODE), seen


def test_an_interrupted_run_keeps_the_operators_cordon(host, api):
    """The operator cordoned the node for maintenance before the run: neither the interrupted run,
    nor the one that finishes it, may put the node back into service."""
    api.patch_node(NODE, {"spec": {"unschedulable": True}})
    try:
        mark = interrupted_and_finished(host, api, {"full-pcpus-only": "false"})
        assert api.read_node(NODE).spec.unschedulable, "the operator's cordon was undone"
        seen = admin_requests(since=mark)
        assert ("uncordon", NODE) not in seen, seen
    finally:
        api.patch_node(NODE, {"spec": {"unschedulable": False}})


# --- kubelet started with --config-dir --------------------------------------------------------------

def test_kubelet_with_a_config_dir_honours_the_drop_in_the_role_writes(host):
    """kubeadm nodes may run kubelet with --config-dir: the role writes its drop-in there, leaves the
    main file alone, and the real kubelet runs with the drop-in's settings (read back from /configz)."""
    dropins = "/etc/kubernetes/kubelet.conf.d"
    flags = "/var/lib/kubelet/kubeadm-flags.env"
    main_before = host.file(CONFIG).sha256sum
    host.run_expect([0], "cp %s /var/tmp/kubeadm-flags.env.orig && mkdir -p %s && "
                         "sed -i 's|^KUBELET_KUBEADM_ARGS=\"|&--config-dir=%s |' %s && systemctl restart kubelet"
                    % (flags, dropins, dropins, flags))
    try:
        wait_kubelet_healthy(host, settle=5)
        assert configz(host)["topologyManagerPolicy"] == "single-numa-node"
        result = run_site({"rollout_drain": False, "kubelet_topology_manager_policy": "restricted",
                           "kubelet_topology_manager_scope": "pod", "kubelet_health_settle": 10})
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        dropin = yaml.safe_load(host.file(dropins + "/50-numa-kube.conf").content_string)
        assert dropin["kind"] == "KubeletConfiguration"
        assert dropin["topologyManagerPolicy"] == "restricted"
        assert host.file(CONFIG).sha256sum == main_before, "the main configuration was changed"
        running = configz(host)
        assert running["topologyManagerPolicy"] == "restricted"
        assert running["cpuManagerPolicy"] == "static"
        assert running["memoryManagerPolicy"] == "Static"
    finally:
        host.run("cp /var/tmp/kubeadm-flags.env.orig %s && rm -rf %s && systemctl restart kubelet" % (flags, dropins))
        wait_kubelet_healthy(host, settle=5)
