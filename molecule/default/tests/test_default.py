# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the site playbook must have done on the default guest (2 NUMA nodes, 2 CPUs each)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import exporter_metrics  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://all"]


def running_kubelet_config(host):
    """The configuration kubelet runs with, from its /configz."""
    script = ("import ssl, urllib.request as u, time\n"
              "for _ in range(60):\n"
              "    try:\n"
              "        print(u.urlopen('https://127.0.0.1:10250/configz', timeout=10,"
              " context=ssl._create_unverified_context()).read().decode()); break\n"
              "    except Exception:\n"
              "        time.sleep(5)\n")
    return json.loads(host.check_output("python3 -c %s" % shlex.quote(script)))["kubeletconfig"]


def mebibytes(quantity):
    units = {"Ki": 1.0 / 1024, "Mi": 1, "Gi": 1024}
    match = re.match(r"^(\d+)(Ki|Mi|Gi)?$", quantity)
    assert match, quantity
    return int(match.group(1)) * units.get(match.group(2), 1.0 / 1024 / 1024)


def node_meminfo(host, node):
    text = host.file("/sys/devices/system/node/node%d/meminfo" % node).content_string
    return int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1)) * 1024


def test_guest_has_two_numa_nodes(host):
    assert host.file("/sys/devices/system/node/node0").is_directory
    assert host.file("/sys/devices/system/node/node1").is_directory
    assert host.file("/sys/devices/system/node/node1/cpulist").content_string.strip() == "2-3"


def test_containerd_runs_with_nri(host):
    assert host.service("containerd").is_running
    assert host.socket("unix:///var/run/nri/nri.sock").is_listening or host.file("/var/run/nri/nri.sock").exists
    dump = host.check_output("containerd config dump")
    assert re.search(r'\[plugins\."io\.containerd\.nri\.v1\.nri"\]\s*\n\s*disable = false', dump)


def test_exporter_serves_this_guests_numbers(host):
    assert host.service("numa-exporter").is_running
    assert host.process.get(comm="python3", user="numa-exporter")
    values = exporter_metrics(host)
    for node in (0, 1):
        label = (("numa_node", str(node)),)
        assert values[("numa_node_cpus_count", label)] == 2
        assert values[("numa_node_memory_total_bytes", label)] == node_meminfo(host, node)
    assert values[("numa_node_distance", (("numa_node", "0"), ("to_node", "1")))] == 21


def test_prometheus_scrapes_the_exporter_through_the_written_job(host):
    config = host.file("/etc/prometheus/prometheus.yml").content_string
    assert "job_name: \"numa-exporter\"" in config
    assert "/etc/prometheus/file_sd/numa-exporter.yml" in config
    query = ("python3 -c \"import urllib.request as u, sys; print(u.urlopen('http://127.0.0.1:9090/api/v1/' "
             "+ sys.argv[1], timeout=30).read().decode())\" '%s'")
    # Wait for Prometheus to have scraped the target once (its readiness, not the result under test).
    deadline = time.time() + 180
    while time.time() < deadline:
        targets = json.loads(host.check_output(query % "targets"))["data"]["activeTargets"]
        ours = [t for t in targets if t["labels"].get("job") == "numa-exporter"]
        if ours and ours[0]["lastScrape"] and not ours[0]["lastScrape"].startswith("0001"):
            break
        time.sleep(5)
    else:
        pytest.fail("Prometheus never scraped the numa-exporter job: %s" % targets)
    assert ours[0]["health"] == "up", ours[0]
    result = json.loads(host.check_output(query % "query?query=numa_node_cpus_count"))["data"]["result"]
    assert sorted(r["metric"]["numa_node"] for r in result) == ["0", "1"]
    assert all(r["value"][1] == "2" for r in result)


def test_kernel_parameter_is_written_for_the_next_boot_and_no_reboot_happened(host):
    """kernel_args_reboot_ok is false here: the parameter waits in grub for the next boot."""
    assert 'numa_balancing=disable"' in host.file("/etc/default/grub").content_string
    assert "numa_balancing=disable" in host.file("/boot/grub/grub.cfg").content_string
    assert "numa_balancing=disable" not in host.file("/proc/cmdline").content_string.split()
    assert not host.file("/var/lib/numa-kube/rollout/marker.json").exists


def test_written_files_have_cis_modes(host):
    assert host.file("/var/lib/kubelet/config.yaml").mode == 0o600
    assert host.file("/var/lib/kubelet/config.yaml").user == "root"
    assert host.file("/etc/systemd/system/kubelet.service.d/50-numa-kube-memory-state.conf").mode == 0o600


def test_kubelet_runs_the_numa_configuration_with_the_exact_reservation(host):
    kubelet = running_kubelet_config(host)
    assert kubelet["cpuManagerPolicy"] == "static"
    assert kubelet["memoryManagerPolicy"] == "Static"
    assert kubelet["topologyManagerPolicy"] == "single-numa-node"
    assert kubelet["topologyManagerScope"] == "pod"
    # What this guest demands: kubeReserved 256Mi (the node's, kept) + the kubeadm eviction 100Mi,
    # spread over the two nodes in proportion to their memory.
    reserved = dict((entry["numaNode"], mebibytes(entry["limits"]["memory"])) for entry in kubelet["reservedMemory"])
    assert sorted(reserved) == [0, 1]
    assert sum(reserved.values()) == 256 + 100
    # Spread by node memory; the uneven scenario checks the shares to the MiB.
    share0 = node_meminfo(host, 0) / float(node_meminfo(host, 0) + node_meminfo(host, 1))
    assert abs(reserved[0] / 356.0 - share0) < 0.05, (reserved, share0)
    # kubelet took it: both managers checkpointed the policy they run.
    state = json.loads(host.file("/var/lib/kubelet/memory_manager_state").content_string)
    assert state["policyName"] == "Static"
    cpu_state = json.loads(host.file("/var/lib/kubelet/cpu_manager_state").content_string)
    assert cpu_state["policyName"] == "static"
    # the kubeadm configuration file itself carries it, the rest of the file intact
    written = host.file("/var/lib/kubelet/config.yaml").content_string
    assert "cgroupDriver: cgroupfs" in written and "memoryManagerPolicy: Static" in written
