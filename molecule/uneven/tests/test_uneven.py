# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Four NUMA nodes of unequal memory, one without CPUs: facts, reservation and exporter numbers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))
from testlib import exporter_metrics  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ["ansible://all"]

CPUS = {0: 2, 1: 1, 2: 1, 3: 0}


def node_memory(host, node):
    text = host.file("/sys/devices/system/node/node%d/meminfo" % node).content_string
    return int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1)) * 1024


def get(host, url):
    script = ("import ssl, urllib.request as u\n"
              "print(u.urlopen(%r, timeout=30, context=ssl._create_unverified_context()).read().decode())\n" % url)
    return host.check_output("python3 -c %s" % shlex.quote(script))


def test_topology_facts_see_the_awkward_layout(host):
    facts = host.ansible("numa.kube.topology_facts", check=False)["ansible_facts"]["numa_topology"]
    assert facts["node_ids"] == [0, 1, 2, 3]
    assert facts["nodes_with_cpus"] == [0, 1, 2]
    assert facts["nodes_with_memory"] == [0, 1, 2, 3]
    assert [len(n["cpus"]) for n in facts["nodes"]] == [CPUS[i] for i in range(4)]
    assert [n["memory_total_bytes"] for n in facts["nodes"]] == [node_memory(host, i) for i in range(4)]
    assert facts["nodes"][3]["distances"]["0"] == 31


def test_kubelet_runs_a_reservation_spread_by_node_memory(host):
    running = json.loads(get(host, "https://127.0.0.1:10250/configz"))["kubeletconfig"]
    assert running["memoryManagerPolicy"] == "Static" and running["cpuManagerPolicy"] == "static"
    reserved = {}
    for entry in running["reservedMemory"]:
        match = re.match(r"^(\d+)Mi$", entry["limits"]["memory"])
        assert match, entry
        reserved[entry["numaNode"]] = int(match.group(1))
    assert sum(reserved.values()) == 256 + 100, reserved
    total = float(sum(node_memory(host, i) for i in range(4)))
    for node in range(4):
        assert abs(reserved.get(node, 0) - 356 * node_memory(host, node) / total) <= 1, (node, reserved)
    assert reserved[3] > 0, "the memory-only node carries its share"
    assert json.loads(host.file("/var/lib/kubelet/memory_manager_state").content_string)["policyName"] == "Static"


def test_exporter_numbers_match_the_guest(host):
    values = exporter_metrics(host)
    for node in range(4):
        label = (("numa_node", str(node)),)
        assert values[("numa_node_cpus_count", label)] == CPUS[node]
        assert values[("numa_node_memory_total_bytes", label)] == node_memory(host, node)
