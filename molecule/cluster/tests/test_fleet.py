# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the site playbook did to the two-node fleet (real kubelets, a real API server).

Read-only tests first; the file ends with a second run of the converge, which must change nothing.
test_kubelet.py, which breaks and stops kubelet on purpose, runs after this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys
import time

import kubernetes  # pinned in requirements-dev.txt: a missing client must fail the run, not skip it
import pytest
import testinfra

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import (AuditLog, boot_time, configz, deadline_in, exporter_metrics, guest_get,  # noqa: E402 pylint: disable=wrong-import-position
                     node_memory, run_playbook, wait)

testinfra_hosts = ["ansible://numa-kubelet"]

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CONTROL_PLANE = os.path.join(ROOT, "tests", "output", "vm", "cluster", "control-plane")
AUDIT = AuditLog(os.path.join(CONTROL_PLANE, "audit.log"))
KUBELET, UNEVEN = "numa-kubelet", "numa-uneven"
# CPUs of each NUMA node of numa-uneven (molecule.yml); node 3 is memory only
UNEVEN_CPUS = {0: 2, 1: 1, 2: 1, 3: 0}
# what each guest's kubelet demands: kubeReserved 256Mi (the node's, kept) + kubeadm's eviction 100Mi
RESERVED_MI = 256 + 100


@pytest.fixture(scope="module")
def api():
    kubernetes.config.load_kube_config(os.path.join(CONTROL_PLANE, "admin.kubeconfig"))
    return kubernetes.client.CoreV1Api()


@pytest.fixture(scope="module")
def uneven():
    return testinfra.get_host("ansible://" + UNEVEN, ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])


def mebibytes(quantity):
    match = re.match(r"^(\d+)Mi$", quantity)
    assert match, "kubelet runs a reservation in whole MiB, not %r" % quantity
    return int(match.group(1))


def assert_numa_kubelet_with_a_reservation_spread_by_memory(guest, nodes, slack_mi=2, policy="single-numa-node"):
    """kubelet runs static, Static memory, the topology ``policy``, with the exact reservation
    spread over ``nodes`` NUMA nodes in proportion to their memory (within ``slack_mi`` MiB), and
    both managers took it."""
    running = configz(guest)
    assert running["cpuManagerPolicy"] == "static"
    assert running["memoryManagerPolicy"] == "Static"
    assert running["topologyManagerPolicy"] == policy
    assert running["topologyManagerScope"] == "pod"
    reserved = dict((entry["numaNode"], mebibytes(entry["limits"]["memory"])) for entry in running["reservedMemory"])
    assert sum(reserved.values()) == RESERVED_MI, reserved
    memory = [node_memory(guest, node) for node in range(nodes)]
    for node in range(nodes):
        share = RESERVED_MI * memory[node] / float(sum(memory))
        assert abs(reserved.get(node, 0) - share) <= slack_mi, (node, reserved, memory)
    assert json.loads(guest.file("/var/lib/kubelet/memory_manager_state").content_string)["policyName"] == "Static"
    assert json.loads(guest.file("/var/lib/kubelet/cpu_manager_state").content_string)["policyName"] == "static"
    assert guest.file("/etc/systemd/system/kubelet.service.d/50-numa-kube-memory-state.conf").mode == 0o600
    assert not guest.file("/var/lib/numa-kube/rollout/marker.json").exists, "the rollout record is closed"
    return reserved


# --- the rollout: one node at a time, one drain each -----------------------------------------------

def test_nodes_were_changed_one_at_a_time_each_inside_one_drain(host, uneven, api):
    """The API server saw each node cordoned, its pods evicted and the node uncordoned, numa-uneven
    only after numa-kubelet was back (numa_kube_batch_size 1). numa-kubelet's containerd restart,
    kubelet change and reboot all happened inside its one drain. The check-mode run before the
    converge asked for nothing: the log holds nothing else."""
    seen = AUDIT.node_requests(times=True)
    print("audit: %s" % seen)
    marks = [(verb, name) for verb, name, _when in seen if verb != "evict"]
    assert marks == [("cordon", KUBELET), ("uncordon", KUBELET), ("cordon", UNEVEN), ("uncordon", UNEVEN)], seen
    # every eviction falls inside one node's drain, and each drain evicted that node's test pod;
    # numa-uneven's also takes the test bed's Prometheus when prometheus-operator has placed it
    # there by then (prepare pins it to the infra node; the operator's timing decides)
    drains, draining = {}, None
    for verb, name, _when in seen:
        if verb == "evict":
            assert draining, "eviction of %s outside a drain" % name
            drains[draining].add(name)
        else:
            draining = name if verb == "cordon" else None
            drains.setdefault(name, set())
    assert drains[KUBELET] == {"running-on-" + KUBELET}, drains
    assert drains[UNEVEN] - {"prometheus-numa-0"} == {"running-on-" + UNEVEN}, drains
    # guest and host clocks both come from the host (qemu's RTC); a reboot takes minutes
    evicted_kubelet = [w for v, n, w in seen if (v, n) == ("evict", "running-on-" + KUBELET)][0]
    uncordoned_kubelet = [w for v, n, w in seen if (v, n) == ("uncordon", KUBELET)][0]
    assert evicted_kubelet < boot_time(host) < uncordoned_kubelet, "numa-kubelet rebooted inside its drain"
    assert boot_time(uneven) < seen[0][2], "numa-uneven was not rebooted (kernel_args_reboot_ok is off there)"
    for name in (KUBELET, UNEVEN):
        node = api.read_node(name)
        ready = [c for c in node.status.conditions if c.type == "Ready"][0]
        assert ready.status == "True", (name, ready)
        assert not node.spec.unschedulable, "%s was left cordoned" % name
    names = [p.metadata.name for p in api.list_namespaced_pod("default").items]
    assert not [name for name in names if name.startswith("running-on-")], names


def numa_kube_labels(api, name):
    return dict((key, value) for key, value in (api.read_node(name).metadata.labels or {}).items()
                if key.startswith("numa.kube/"))


def test_each_node_is_labelled_with_what_its_kubelet_runs_after_its_change(api):
    """The rollout labelled each Node after its change was proven (after its uncordon), with the
    policies from kubelet's /configz; numa.kube/aligned only where kubelet aligns (numa-uneven runs
    best-effort). The labels the node registered with are left as they were."""
    policies = {"numa.kube/cpu-manager-policy": "static", "numa.kube/memory-manager-policy": "Static",
                "numa.kube/topology-manager-scope": "pod"}
    assert numa_kube_labels(api, KUBELET) == dict(policies, **{
        "numa.kube/aligned": "true", "numa.kube/topology-manager-policy": "single-numa-node"})
    assert numa_kube_labels(api, UNEVEN) == dict(policies, **{"numa.kube/topology-manager-policy": "best-effort"})
    for name in (KUBELET, UNEVEN):
        assert api.read_node(name).metadata.labels["kubernetes.io/hostname"] == name
    seen = [(verb, name) for verb, name in AUDIT.node_requests(labels=True) if verb != "evict"]
    print("audit with labels: %s" % seen)
    for name in (KUBELET, UNEVEN):
        assert seen.index(("label", name)) > seen.index(("uncordon", name)), "%s labelled before it was back" % name


# --- numa-kubelet: two even NUMA nodes, every part of the site playbook ----------------------------

def test_kubelet_runs_the_numa_configuration_with_the_exact_reservation(host):
    # the layout was computed before numa-kubelet's reboot, and each boot places the kernel (KASLR)
    # and its early allocations on either node: a node's MemTotal moves by tens of MiB between
    # boots (CI saw 181/175 MiB against 178/178 of the new MemTotal). The uneven guest, not
    # rebooted, is held to 2 MiB.
    assert_numa_kubelet_with_a_reservation_spread_by_memory(host, 2, slack_mi=12)


def test_settings_live_in_a_drop_in_that_kubeadm_upgrades_leave_alone(host):
    """kubeadm renders config.yaml again on upgrade: the settings are in a drop-in, kubelet is started
    with its folder through KUBELET_EXTRA_ARGS (a file kubeadm never writes), config.yaml untouched."""
    dropin = host.file("/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf")
    assert "memoryManagerPolicy: Static" in dropin.content_string and "kind: KubeletConfiguration" in dropin.content_string
    assert (dropin.mode, dropin.user) == (0o600, "root")
    extra = host.file("/etc/default/kubelet")
    assert extra.content_string == 'KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n'
    assert extra.mode == 0o600
    assert "cpuManagerPolicy: none" in host.file("/var/lib/kubelet/config.yaml").content_string


def test_kernel_parameter_is_active_after_the_reboot(host):
    assert "numa_balancing=disable" in host.file("/proc/cmdline").content_string.split()
    assert host.file("/proc/sys/kernel/numa_balancing").content_string.strip() == "0"
    # and stays for later boots: written with the reboot allowed, inside the envelope (with the node
    # profile's parameters after it: test_profile.py)
    assert ('GRUB_CMDLINE_LINUX="console=ttyS0 numa_balancing=disable isolcpus=managed_irq,1-3 nohz_full=1-3 '
            'rcu_nocbs=1-3 irqaffinity=0"' in host.file("/etc/default/grub").content_string)


def test_containerd_runs_with_nri(host):
    assert host.service("containerd").is_running
    assert host.file("/var/run/nri/nri.sock").is_socket
    dump = host.check_output("containerd config dump")
    assert re.search(r'\[plugins\."io\.containerd\.nri\.v1\.nri"\]\s*\n\s*disable = false', dump)


def test_exporter_serves_this_guests_numbers(host):
    assert host.service("numa-exporter").is_running
    assert host.process.get(comm="python3", user="numa-exporter")
    # over HTTPS: the certificate verifies against the CA Prometheus was given, under the address it scrapes
    values = exporter_metrics(host, cafile="/etc/prometheus/numa-exporter-ca.crt")
    for node in (0, 1):
        label = (("numa_node", str(node)),)
        assert values[("numa_node_cpus_count", label)] == 2
        assert values[("numa_node_memory_total_bytes", label)] == node_memory(host, node)
    assert values[("numa_node_distance", (("numa_node", "0"), ("to_node", "1")))] == 21
    plain = host.run("python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:9201/metrics', timeout=10)\"")
    assert plain.rc != 0, "plain HTTP is not answered"
    key = host.file("/etc/numa-exporter/tls/tls.key")
    assert (key.user, key.mode) == ("numa-exporter", 0o400), "the key is the exporter user's alone"


def test_exporter_and_its_relay_run_without_any_capability(host):
    """Neither unit keeps a capability (CAP_DAC_READ_SEARCH is gone); the exporter's user cannot read
    kubelet's checkpoints itself, only the copies the relay keeps for its group."""
    for unit, user in (("numa-exporter", "numa-exporter"), ("numa-exporter-checkpoints", "")):
        assert host.service(unit).is_running, unit
        shown = host.check_output("systemctl show -p CapabilityBoundingSet -p AmbientCapabilities -p User %s" % unit)
        properties = dict(line.split("=", 1) for line in shown.splitlines())
        assert properties == {"CapabilityBoundingSet": "", "AmbientCapabilities": "", "User": user}, (unit, shown)
        pid = host.check_output("systemctl show -p MainPID --value %s" % unit)
        status = host.file("/proc/%s/status" % pid).content_string
        capabilities = dict(re.findall(r"^(Cap\w+):\s+([0-9a-f]+)$", status, re.M))
        assert len(capabilities) == 5 and not any(int(v, 16) for v in capabilities.values()), (unit, capabilities)
    denied = host.run("runuser -u numa-exporter -- cat /var/lib/kubelet/cpu_manager_state")
    assert denied.rc != 0 and "Permission denied" in denied.stderr, denied.stderr
    copy = host.file("/run/numa-exporter/cpu_manager_state")
    assert (copy.user, copy.group, copy.mode) == ("root", "numa-exporter", 0o640)
    assert host.run("runuser -u numa-exporter -- cat /run/numa-exporter/cpu_manager_state").rc == 0


def test_a_pinned_pods_numbers_reach_the_systemd_exporter(host, api):
    """A Guaranteed pod gets one exclusive CPU and 128Mi of one NUMA node; the systemd exporter, which
    cannot read kubelet's checkpoints itself, shows both for that pod (named by UID) on that node,
    through the relay's copies, over HTTPS."""
    from kubernetes.client.rest import ApiException
    from testlib import cpu_list, wait

    name = "exporter-pinned"
    resources = {"cpu": "1", "memory": "128Mi"}

    def running(pod):
        return pod if pod.status.phase == "Running" else None

    def gone():
        try:
            api.read_namespaced_pod(name, "default")
        except ApiException as error:
            return error.status == 404
        return False

    api.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": KUBELET, "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 1,
                 "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "numa.kube/busybox:test", "imagePullPolicy": "Never",
                                 "command": ["sleep", "3600"],
                                 "resources": {"requests": resources, "limits": resources}}]}})
    try:
        pod = wait("pod %s running" % name, lambda: running(api.read_namespaced_pod(name, "default")),
                   timeout=300, interval=2)
        container = pod.status.container_statuses[0].container_id.split("://")[-1]
        folder = host.check_output("find /sys/fs/cgroup/kubepods* -maxdepth 3 -type d -name '*%s*'" % container)
        cpus = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.cpus.effective").content_string)
        mems = cpu_list(host.file(folder.splitlines()[0] + "/cpuset.mems.effective").content_string)
        assert len(cpus) == 1 and len(mems) == 1, (cpus, mems)
        numa = str(list(mems)[0])
        who = (("container", "main"), ("namespace", ""), ("pod", pod.metadata.uid))

        def shown():
            values = exporter_metrics(host)
            found = dict((dict(labels)["numa_node"], value) for (metric, labels), value in values.items()
                         if metric == "numa_container_cpus_exclusive"
                         and tuple(item for item in labels if item[0] != "numa_node") == who)
            return (found, values) if found else None

        seen = wait("the pod's CPU in the exporter", shown, timeout=60, interval=2)
        found, values = seen[0], seen[1]
        print("pinned pod: cpus=%s mems=%s; exporter: %s" % (sorted(cpus), numa, found))
        assert found == {numa: 1}, found
        memory = tuple(sorted(who + (("numa_node", numa), ("resource", "memory"))))
        assert values[("numa_container_memory_assigned_bytes", memory)] == 128 * 2 ** 20, values
        assert values[("numa_kubelet_checkpoint_readable", (("file", "cpu_manager_state"),))] == 1
    finally:
        api.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        wait("pod %s gone" % name, gone, timeout=120, interval=2)


def test_prometheus_scrapes_the_exporter_through_the_written_job(host):
    config = host.file("/etc/prometheus/prometheus.yml").content_string
    assert "job_name: \"numa-exporter\"" in config
    assert "/etc/prometheus/file_sd/numa-exporter.yml" in config
    # HTTPS, verified against the CA of the certificates numa.kube issued
    assert "scheme: https" in config and 'ca_file: "/etc/prometheus/numa-exporter-ca.crt"' in config, config
    ca = host.file("/etc/prometheus/numa-exporter-ca.crt").content_string
    assert "-----BEGIN CERTIFICATE-----" in ca and ca == host.file("/etc/numa-exporter/tls/ca.crt").content_string
    # Wait for Prometheus to have scraped the target once (its readiness, not the result under test).
    deadline = deadline_in(180)
    while time.time() < deadline:
        targets = json.loads(guest_get(host, "http://127.0.0.1:9090/api/v1/targets"))["data"]["activeTargets"]
        ours = [t for t in targets if t["labels"].get("job") == "numa-exporter"]
        if ours and ours[0]["lastScrape"] and not ours[0]["lastScrape"].startswith("0001"):
            break
        time.sleep(5)
    else:
        pytest.fail("Prometheus never scraped the numa-exporter job: %s" % targets)
    assert ours[0]["health"] == "up", ours[0]
    assert ours[0]["scrapeUrl"] == "https://127.0.0.1:9201/metrics", ours[0]
    query = guest_get(host, "http://127.0.0.1:9090/api/v1/query?query=numa_node_cpus_count")
    result = json.loads(query)["data"]["result"]
    assert sorted(r["metric"]["numa_node"] for r in result) == ["0", "1"]
    assert all(r["value"][1] == "2" for r in result)


# --- numa-uneven: four unequal NUMA nodes, one memory-only -----------------------------------------

def test_topology_facts_see_the_awkward_layout(uneven):
    facts = uneven.ansible("numa.kube.topology_facts", check=False)["ansible_facts"]["numa_topology"]
    assert facts["node_ids"] == [0, 1, 2, 3]
    assert facts["nodes_with_cpus"] == [0, 1, 2]
    assert facts["nodes_with_memory"] == [0, 1, 2, 3]
    assert [len(n["cpus"]) for n in facts["nodes"]] == [UNEVEN_CPUS[i] for i in range(4)]
    assert [n["memory_total_bytes"] for n in facts["nodes"]] == [node_memory(uneven, i) for i in range(4)]
    assert facts["nodes"][3]["distances"]["0"] == 31


def test_uneven_kubelet_runs_a_reservation_spread_by_node_memory(uneven):
    reserved = assert_numa_kubelet_with_a_reservation_spread_by_memory(uneven, 4, policy="best-effort")
    assert reserved[3] > 0, "the memory-only node carries its share"
    # kubelet_kubeadm_config_dir "" here: merged into kubeadm's file, the rest of it intact, CIS modes
    config = uneven.file("/var/lib/kubelet/config.yaml")
    assert "cgroupDriver: cgroupfs" in config.content_string and "memoryManagerPolicy: Static" in config.content_string
    assert (config.mode, config.user) == (0o600, "root")
    assert not uneven.file("/etc/default/kubelet").exists


def test_uneven_exporter_numbers_match_the_guest(host, uneven):
    # its certificate comes from the same CA as numa-kubelet's, the one Prometheus was given
    ca = uneven.file("/etc/numa-exporter/tls/ca.crt").content_string
    assert ca == host.file("/etc/prometheus/numa-exporter-ca.crt").content_string
    values = exporter_metrics(uneven)
    for node in range(4):
        label = (("numa_node", str(node)),)
        assert values[("numa_node_cpus_count", label)] == UNEVEN_CPUS[node]
        assert values[("numa_node_memory_total_bytes", label)] == node_memory(uneven, node)


def test_kernel_parameter_waits_for_the_next_boot_without_reboot_ok(uneven):
    """Without kernel_args_reboot_ok nothing is written: a command line in the boot configuration would
    take effect at the next reboot, planned or not, undrained and unchecked. The change stays pending,
    as the role works it out (its check-mode plan, which sets kernel_args_reboot_pending)."""
    assert 'GRUB_CMDLINE_LINUX="console=ttyS0"' in uneven.file("/etc/default/grub").content_string
    assert "numa_balancing" not in uneven.file("/etc/default/grub").content_string
    assert "numa_balancing" not in uneven.file("/boot/grub/grub.cfg").content_string
    assert "numa_balancing=disable" not in uneven.file("/proc/cmdline").content_string.split()
    assert uneven.run("ls /etc/default/grub.*~").rc != 0, "not even a backup copy was written"
    plan = uneven.ansible("numa.kube.kernel_args", "present=numa_balancing=disable method=grub_default", check=True)
    assert plan["changed"] and plan["reboot_required"] and plan["files"] == ["/etc/default/grub"], plan


@pytest.mark.beside  # numa-uneven alone: in the lane beside test_kubelet.py (conftest.py)
def test_kernel_parameter_change_rolled_back_restores_grub_byte_for_byte(uneven, api):
    """With the reboot allowed, a grub.cfg regeneration that fails after update-grub rewrote grub.cfg:
    the record opened before the first write puts /etc/default/grub and grub.cfg back byte for byte.
    No reboot (the failure comes first), no drain (rollout_drain false keeps this cheap), nothing
    left behind, the node schedulable."""
    files = ["/etc/default/grub", "/boot/grub/grub.cfg"]
    before = [uneven.file(path).sha256sum for path in files]
    listing = uneven.check_output("ls -A /etc/default /boot/grub")
    booted = boot_time(uneven)
    extra = {"rollout_kubeconfig": os.path.join(CONTROL_PLANE, "admin.kubeconfig"), "rollout_drain": False,
             "rollout_health_settle": 5, "kubelet_manage": False, "containerd_nri_manage": False,
             "kernel_args_present": ["numa_balancing=disable"], "kernel_args_reboot_ok": True,
             "kernel_args_backup": False, "kernel_args_grub_update_command": "sh -c 'update-grub && exit 1'"}
    done = run_playbook([os.path.join(ROOT, "playbooks", "site.yml"), "--limit", UNEVEN, "--tags", "kernel_args",
                         "-e", json.dumps(extra)], timeout=900)
    output = done.stdout + done.stderr
    print("\n".join(line for line in output.splitlines() if "back as it was" in line)[:2000])
    assert done.returncode != 0, "the failed regeneration must fail the run"
    assert "Generating grub configuration file" in output, "update-grub ran, so grub.cfg was rewritten"
    assert "put the boot configuration of %s back as it was" % UNEVEN in output, output[-3000:]
    assert [uneven.file(path).sha256sum for path in files] == before, "grub defaults and grub.cfg restored"
    assert uneven.check_output("ls -A /etc/default /boot/grub") == listing, "nothing left behind"
    assert not uneven.file("/var/lib/numa-kube/rollout/marker.json").exists, "the record is closed"
    assert boot_time(uneven) == booted, "no reboot"
    assert not api.read_node(UNEVEN).spec.unschedulable


@pytest.mark.beside  # numa-uneven alone: in the lane beside test_kubelet.py (conftest.py)
def test_nri_goes_on_over_a_socket_nobody_listens_on_and_not_over_a_live_one(uneven):
    """containerd leaves its NRI socket behind when it stops (seen on this bed: a containerd restarted
    with NRI off after a change was undone kept /var/run/nri/nri.sock, and the next run turning NRI on
    was refused as if another program owned it). A socket nobody listens on is accepted and removed
    before the restart; one a program listens on is still refused. Real sockets on the guest, the
    real module; the change goes to a copy of config.toml, so containerd is left alone."""
    assert not uneven.file("/var/run/nri/nri.sock").exists, "NRI is off on numa-uneven: nothing is there yet"
    made = uneven.run("test -d /var/run/nri").rc != 0
    # a folder of the test's own, root's alone (a record folder others may write to is refused)
    folder, live = "/var/lib/numa-kube-test", "/run/numa-kube-test-live.sock"
    copy, record = folder + "/config.toml", folder + "/containerd-nri.json"
    uneven.check_output("rm -rf {0} && install -d -m 0700 {0} && cp /etc/containerd/config.toml {1}".format(folder, copy))

    def nri(args, check):
        try:
            return uneven.ansible("numa.kube.containerd_nri", json.dumps(args), check=check)
        except uneven.ansible.AnsibleException as exc:
            return dict(exc.result, failed=True)
    uneven.check_output("python3 -c \"import os, socket; os.makedirs('/var/run/nri', exist_ok=True); "
                        "socket.socket(socket.AF_UNIX).bind('/var/run/nri/nri.sock')\"")
    try:
        assert uneven.file("/var/run/nri/nri.sock").is_socket, "a socket whose program has ended"
        args = {"path": copy, "record": record}
        done = nri(args, check=False)
        assert not done.get("failed") and done["changed"] and done["leftover_socket_removed"], done
        assert not uneven.file("/var/run/nri/nri.sock").exists, "removed, as containerd would as it starts"
        assert "disable = false" in uneven.file(copy).content_string
        # a program listening there: refused, as before
        uneven.check_output("nohup python3 -c \"import os, socket, time; s = socket.socket(socket.AF_UNIX); s.bind('%s'); "
                            "s.listen(1); open('%s.pid', 'w').write(str(os.getpid())); time.sleep(120)\" "
                            ">/dev/null 2>&1 &" % (live, live))
        wait("the listening socket", lambda: uneven.file(live).is_socket, timeout=60)
        refused = nri(dict(args, settings={"socket_path": live}), check=True)
        # (testinfra's check-mode result of a failed module lacks its 'failed': the words tell)
        assert "is refused: a socket is there" in refused["msg"] and "a program listens on it" in refused["msg"], refused
        assert uneven.file(live).is_socket, "nothing removed"
    finally:
        uneven.run("test ! -f {0}.pid || kill $(cat {0}.pid); rm -rf {0} {0}.pid {1} /var/run/nri/nri.sock"
                   .format(live, folder))
        if made:
            uneven.run("rmdir /var/run/nri")


# --- the rollout's fixed cost per node ---------------------------------------------------------------

def test_each_nodes_rollout_reports_its_overhead_outside_the_waits():
    """The converge kept each node's rollout report (change_nodes.yml's rollout_timings): its time in
    all, the waits by kind and the overhead outside them. The waits hold what they must - the drain
    that evicted the node's pod, kubelet's restart with its 20 s settle (which counts from kubelet's
    start, so the restart can take no less), numa-kubelet's reboot and no reboot on numa-uneven -
    and the overhead is the rest, nothing counted twice."""
    for name in (KUBELET, UNEVEN):
        with open(os.path.join(CONTROL_PLANE, "..", "rollout-%s.json" % name)) as handle:
            timings = json.load(handle)
        waits = timings["waits"]
        print("rollout of %s: %s s in all, waits %s, overhead %s s"
              % (name, timings["total_seconds"], waits, timings["overhead_seconds"]))
        assert sorted(waits) == ["drain", "ready", "reboot", "restart"], timings
        assert abs(timings["total_seconds"] - timings["overhead_seconds"] - sum(waits.values())) <= 0.5, timings
        assert waits["drain"] > 0 and waits["restart"] >= 20, timings
        assert (waits["reboot"] > 0) == (name == KUBELET), timings
        assert 0 < timings["overhead_seconds"] < timings["total_seconds"] - waits["restart"], timings


# --- a second run finds nothing to do ---------------------------------------------------------------

def test_a_rerun_changes_nothing_and_drains_nothing(host, uneven):
    """numa-kubelet's per-node memory moved with its reboot; the reservation in force still adds up,
    so it stays: no change, no cordon, no eviction, no kubelet restart on either node."""
    pids = [guest.check_output("systemctl show -p MainPID --value kubelet") for guest in (host, uneven)]
    mark = AUDIT.mark()
    result = run_playbook([os.path.join(ROOT, "molecule", "cluster", "converge.yml")])
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    for name in (KUBELET, UNEVEN):
        assert re.search(r"%s\s*:.*changed=0" % name, result.stdout), result.stdout[-2000:]
    assert AUDIT.node_requests(since=mark) == [], "a run with nothing to do asked for a cordon or an eviction"
    assert [guest.check_output("systemctl show -p MainPID --value kubelet") for guest in (host, uneven)] == pids
