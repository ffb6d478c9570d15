# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped Grafana dashboard: what tools/dashboard.py generates, valid for the SDK's model, and
querying only what the NUMA exporter serves. (Its queries run against a real Prometheus in the
cluster scenario, molecule/cluster/tests/test_monitoring.py.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys

from grafana_foundation_sdk.models.dashboard import Dashboard

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILE = os.path.join(ROOT, "roles", "numa_monitoring", "files", "numa-dashboard.json")
SERVED = re.compile(r"\b(numa_(?:node|container|pci|exporter)_[a-z_]+)")


def load():
    with open(FILE) as handle:
        return json.load(handle)


def test_the_shipped_file_is_what_the_generator_writes():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "dashboard.py"), "--check"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_file_reads_back_into_the_sdk_model():
    model = Dashboard.from_json(load())
    assert model.uid == "numa-kube-numa"
    assert [v.name for v in model.templating.list_val] == ["datasource", "node"]
    assert sorted(p.id_val for p in model.panels) == list(range(1, len(model.panels) + 1))


def test_every_panel_queries_the_exporters_metrics():
    from ansible_collections.numa.kube.tests.unit.test_promtool import exporter_text

    served = set(re.findall(r"^([a-z_]+)[{ ]", exporter_text(), re.M))
    panels = [p for p in load()["panels"] if p["type"] != "row"]
    assert len(panels) == 9
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(SERVED.findall(target["expr"]))
            assert names, target["expr"]
            assert names <= served, (panel["title"], names - served)
