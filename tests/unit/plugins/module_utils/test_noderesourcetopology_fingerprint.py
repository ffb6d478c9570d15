# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods fingerprint of the NRT object against what the podfingerprint Go module printed.

podfingerprint-vectors.json holds pod lists and the fingerprints the Go module (v0.2.2, the one
scheduler-plugins v0.34.7 builds with) gave them: tests/differential/podfingerprint is the program
that printed them, and tests/differential/test_podfingerprint.py checks them against it again
with thousands more lists.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import random

from ansible_collections.numa.kube.plugins.module_utils.numa import nrt
from ansible_collections.numa.kube.plugins.module_utils.numa import podfingerprint

HERE = os.path.dirname(os.path.abspath(__file__))


def vectors():
    with open(os.path.join(HERE, "podfingerprint-vectors.json"), encoding="utf-8") as handle:
        return json.load(handle)["vectors"]


def test_the_go_modules_fingerprints():
    found = vectors()
    assert len(found) >= 16 and max(len(v["pods"]) for v in found) >= 30
    assert any(any(ord(ch) > 127 for pod in v["pods"] for part in pod for ch in part) for v in found), \
        "names beyond ASCII are hashed as their UTF-8 bytes"
    for vector in found:
        assert podfingerprint.fingerprint([tuple(pod) for pod in vector["pods"]]) == vector["fingerprint"], vector


def test_the_nrt_object_carries_the_go_modules_fingerprint_of_the_pods_kubelet_lists():
    vector = max(vectors(), key=lambda v: len(v["pods"]))
    assigned = [{"namespace": namespace, "name": name, "containers": [{"name": "c", "cpu_ids": [], "memory": [],
                                                                       "devices": []}]}
                for namespace, name in vector["pods"]]
    random.Random(7).shuffle(assigned)  # List's order is kubelet's, not the scheduler's
    topology = {"nodes": [{"id": 0, "cpus": [0], "distances": {"0": 10}, "memory_total_bytes": 0}],
                "cpus": [{"id": 0, "numa_node": 0}]}
    found = dict((a["name"], a["value"]) for a in nrt.nrt_object("w1", topology, {}, {}, assigned)["attributes"])
    assert found["nodeTopologyPodsFingerprint"] == vector["fingerprint"]


def test_xxh64_reference_values():
    """XXH64's published values for the empty input and the one-byte input "a" (seed 0)."""
    assert podfingerprint.xxh64(b"") == 0xEF46DB3751D8E999
    assert podfingerprint.xxh64(b"a") == 0xD24EC4F1A98C6E5B
