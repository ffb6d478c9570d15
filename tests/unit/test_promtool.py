# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus' own tools on what the collection ships: ``promtool test rules`` on the NUMA alerts
(as numa.kube.numa_monitoring renders them with its defaults) and ``promtool check metrics`` on the
exporter's output (clean but for the listed compatibility names)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring_objects
from numa_agent.metrics import numa_metrics
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = os.path.join(ROOT, "tools", "promtool")
DEFAULTS = {"name": "numa-exporter", "memory_threshold": 0.9, "miss_ratio_threshold": 0.1}


def promtool(*args, **kwargs):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, timeout=300, check=False, **kwargs)


def test_alert_rules_pass_their_promtool_unit_tests(tmp_path):
    with open(str(tmp_path / "numa-alerts.rules.yml"), "w") as handle:
        yaml.safe_dump({"groups": monitoring_objects.rule_groups(DEFAULTS)}, handle, sort_keys=False)
    shutil.copy(os.path.join(ROOT, "tests", "promtool", "numa-alerts.test.yml"), str(tmp_path))
    checked = promtool("check", "rules", str(tmp_path / "numa-alerts.rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = promtool("test", "rules", "numa-alerts.test.yml", cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_a_broken_rule_fails_its_test(tmp_path):
    """The unit tests can fail: with the threshold moved, the memory alert no longer fires."""
    with open(str(tmp_path / "numa-alerts.rules.yml"), "w") as handle:
        yaml.safe_dump({"groups": monitoring_objects.rule_groups(dict(DEFAULTS, memory_threshold=0.99))}, handle)
    shutil.copy(os.path.join(ROOT, "tests", "promtool", "numa-alerts.test.yml"), str(tmp_path))
    done = promtool("test", "rules", "numa-alerts.test.yml", cwd=str(tmp_path))
    assert done.returncode != 0 and "NumaNodeMemoryNearlyExhausted" in done.stdout + done.stderr


def exporter_text(with_kubelet=True, root=None):
    """One scrape of the exporter on a made-up machine, with a pod's assignments and locality."""
    import tempfile

    root = root or tempfile.mkdtemp()
    machine = two_socket_interleaved()
    machine.add_pci("0000:3b:00.0", 0x020000, numa_node=1)
    sys_root, _proc = machine.write(os.path.join(root, "m"))
    cgroup = os.path.join(root, "cgroup", "kubepods", "pod0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "ab" * 32)
    os.makedirs(cgroup)
    with open(os.path.join(cgroup, "memory.numa_stat"), "w") as handle:
        handle.write("anon N0=4096 N1=0\nfile N0=0 N1=0\n")
    scraper = numa_metrics.Scraper(sys_root, os.path.join(root, "cgroup"))
    if not with_kubelet:
        return scraper.scrape()
    assigned = [{"namespace": "a", "name": "p", "containers": [
        {"name": "c", "cpu_ids": [2], "memory": [{"memory_type": "memory", "size": 1, "nodes": [0]}],
         "devices": [{"resource_name": "numa-align/numa-0", "device_ids": ["d"], "nodes": [0]}]}]}]
    allocatable = {"cpu_ids": [1, 2], "memory": [{"memory_type": "memory", "size": 2, "nodes": [0]}]}
    return scraper.scrape(assigned=assigned, allocatable=allocatable, containers={"ab" * 32: ("a", "p", "c")})


@pytest.mark.parametrize("with_kubelet", [False, True])
def test_exporter_output_is_promlint_clean_but_for_the_compatibility_names(tmp_path, with_kubelet):
    text = exporter_text(with_kubelet, str(tmp_path))
    done = promtool("check", "metrics", input=text)
    findings = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    unexpected = [line for line in findings if not line.startswith(numa_metrics.COMPATIBILITY)]
    assert unexpected == [], "\n".join(findings)
    assert any(line.startswith("numa_node_cpus_count") for line in findings), "the compatibility name is flagged"
