# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What numa.kube records about its kubelet change, and how 'absent' takes only that back out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.applied_record import RecordError
from ansible_collections.numa.kube.plugins.module_utils.kubelet_config import (
    FALLBACK_FIELDS,
    KubeletConfigError,
    check_record,
    plan_change,
    plan_withdraw,
    record_present,
)

CONFIG = "/var/lib/kubelet/config.yaml"
DROPIN = "/etc/kubernetes/kubelet.conf.d/50-numa-kube.conf"
FLAGS = "/etc/default/kubelet"

KUBEADM = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
cpuManagerPolicy: none
kubeReserved:
  cpu: 500m
  memory: 1Gi
"""
FIRST = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}
SECOND = {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
          "topologyManagerPolicy": "restricted", "kubeReserved": {"cpu": "1"}}


def merge(text, settings, record):
    plan = plan_change(CONFIG, text, settings, "merge", check=False)
    return plan["text"], record_present(record, CONFIG, "merge", plan["before"], plan["config"])


def test_merge_records_each_changed_fields_original_once():
    text, record = merge(KUBEADM, FIRST, None)
    assert record["files"][CONFIG] == {"kind": "merged", "before": {"cpuManagerPolicy": "none"},
                                       "missing": ["topologyManagerPolicy"]}
    text, record = merge(text, SECOND, record)
    entry = record["files"][CONFIG]
    # static and single-numa-node were numa.kube's own values: the originals stay none and missing
    assert entry["before"] == {"cpuManagerPolicy": "none", "kubeReserved": {"cpu": "500m", "memory": "1Gi"}}
    assert entry["missing"] == ["cpuManagerPolicyOptions", "topologyManagerPolicy"]
    assert "cgroupDriver" not in entry["before"] and "apiVersion" not in entry["missing"]


def test_a_record_that_gains_nothing_is_returned_as_it_was():
    text, record = merge(KUBEADM, FIRST, None)
    record = dict(record, version=1)
    assert record_present(record, CONFIG, "merge", yaml.safe_load(text), yaml.safe_load(text)) is record


def test_merge_restores_the_originals_and_plans_the_stale_cpu_state():
    text, record = merge(KUBEADM, FIRST, None)
    text, record = merge(text, SECOND, record)
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: text}, record)
    assert list(plan["writes"]) == [CONFIG]
    assert yaml.safe_load(plan["writes"][CONFIG]) == yaml.safe_load(KUBEADM)
    assert plan["config"]["cpuManagerPolicy"] == "none"
    assert plan["restart_required"] and plan["remove_cpu_manager_state"]
    assert not plan["remove_memory_manager_state"] and plan["fallback"] == []


def test_a_field_removed_by_numa_kube_comes_back():
    text = KUBEADM + "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1Gi}\n"
    new_text, record = merge(text, {"reservedMemory": None}, None)
    assert "reservedMemory" not in yaml.safe_load(new_text)
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: new_text}, record)
    assert yaml.safe_load(plan["writes"][CONFIG])["reservedMemory"] == [{"numaNode": 0, "limits": {"memory": "1Gi"}}]


def test_a_merge_file_numa_kube_created_is_removed():
    plan = plan_change(CONFIG, None, FIRST, "merge", check=False)
    record = record_present(None, CONFIG, "merge", plan["before"], plan["config"], created=True)
    assert record["files"][CONFIG] == {"kind": "owned"}
    assert plan_withdraw(CONFIG, "merge", {CONFIG: plan["text"]}, record)["writes"] == {CONFIG: None}


def test_dropin_is_removed_and_kubelet_goes_back_to_the_base():
    plan = plan_change(DROPIN, None, dict(FIRST, memoryManagerPolicy="Static",
                                          reservedMemory=[{"numaNode": 0, "limits": {"memory": "1124Mi"}}]),
                       "dropin", bases=[(CONFIG, KUBEADM)], check=False)
    record = record_present(None, DROPIN, "dropin", {}, {})
    assert record == {"files": {DROPIN: {"kind": "owned"}}}
    texts = {CONFIG: KUBEADM, DROPIN: plan["text"]}
    for with_record in (record, None):  # the drop-in's name is numa.kube's: gone either way
        withdraw = plan_withdraw(DROPIN, "dropin", texts, with_record, base_paths=[CONFIG])
        assert withdraw["writes"] == {DROPIN: None}
        assert withdraw["config"] == yaml.safe_load(KUBEADM)
        assert withdraw["remove_cpu_manager_state"] and withdraw["remove_memory_manager_state"]
        assert withdraw["restart_required"]


def test_no_record_in_merge_mode_falls_back_to_removing_the_numa_manager_fields():
    text = KUBEADM.replace("cpuManagerPolicy: none", "cpuManagerPolicy: static") + (
        "topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\nmemoryManagerPolicy: Static\n"
        "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1124Mi}\nreservedSystemCPUs: 0-1\n")
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: text}, None)
    after = yaml.safe_load(plan["writes"][CONFIG])
    assert plan["fallback"] == ["cpuManagerPolicy", "memoryManagerPolicy", "reservedMemory",
                                "topologyManagerPolicy", "topologyManagerScope"]
    assert not set(FALLBACK_FIELDS) & set(after)
    assert after["kubeReserved"] == {"cpu": "500m", "memory": "1Gi"} and after["reservedSystemCPUs"] == "0-1"
    assert plan["remove_cpu_manager_state"] and plan["remove_memory_manager_state"]
    assert any("no record" in note for note in plan["notes"])


def test_nothing_recorded_changes_nothing():
    numa = KUBEADM + "topologyManagerPolicy: restricted\n"
    # no record, no NUMA field: the fallback has nothing to do
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: KUBEADM.replace("cpuManagerPolicy: none\n", "")}, None)
    assert plan["writes"] == {} and not plan["restart_required"] and plan["fallback"] == []
    # values that are kubelet's defaults already stay: removing them would change nothing kubelet does
    defaults = KUBEADM + "topologyManagerScope: container\nmemoryManagerPolicy: None\ncpuManagerPolicyOptions: {}\n"
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: defaults}, None)
    assert plan["writes"] == {} and plan["fallback"] == []
    # a record without an entry for this file: numa.kube did not change it, the user's values stay
    record = {"version": 1, "files": {DROPIN: {"kind": "owned"}}}
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: numa, DROPIN: None}, record)
    assert plan["writes"] == {} and not plan["restart_required"]
    # an entry that recorded no field
    record = {"version": 1, "files": {CONFIG: {"kind": "merged", "before": {}, "missing": []}}}
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: numa}, record)
    assert plan["writes"] == {} and not any(plan[k] for k in ("remove_cpu_manager_state", "remove_memory_manager_state"))
    # drop-in mode, no drop-in on the node
    plan = plan_withdraw(DROPIN, "dropin", {CONFIG: numa, DROPIN: None}, None, base_paths=[CONFIG])
    assert plan["writes"] == {} and not plan["restart_required"]


def test_the_flag_file_gets_its_previous_bytes_or_goes():
    before = "# local flags\nKUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5\"\n"
    ours = "# local flags\nKUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5 --config-dir=/etc/kubernetes/kubelet.conf.d\"\n"
    record = record_present(None, DROPIN, "dropin", {}, {}, flag=(FLAGS, before, "0644"))
    # a later run that changes the flag file again keeps the first bytes
    record = record_present(record, DROPIN, "dropin", {}, {}, flag=(FLAGS, ours, "0600"))
    assert record["flag_file"] == {"path": FLAGS, "text": before, "mode": "0644"}
    texts = {CONFIG: KUBEADM, DROPIN: "cpuManagerPolicy: static\n", FLAGS: ours}
    plan = plan_withdraw(DROPIN, "dropin", texts, record, base_paths=[CONFIG])
    assert plan["writes"] == {DROPIN: None, FLAGS: before} and plan["flag_mode"] == "0644"
    record["flag_file"] = {"path": FLAGS, "text": None, "mode": None}
    plan = plan_withdraw(DROPIN, "dropin", dict(texts, **{DROPIN: None}), record, base_paths=[CONFIG])
    assert plan["writes"] == {FLAGS: None} and plan["restart_required"], "a flag change restarts kubelet"


def test_a_result_kubelet_would_refuse_is_refused():
    text = KUBEADM + "cpuManagerPolicyOptions: {full-pcpus-only: \"true\"}\n"
    record = {"version": 1, "files": {CONFIG: {"kind": "merged", "before": {}, "missing": []}}}
    record["files"][CONFIG]["before"]["cpuManagerPolicy"] = "none"
    with pytest.raises(KubeletConfigError) as caught:
        plan_withdraw(CONFIG, "merge", {CONFIG: text.replace("cpuManagerPolicy: none", "cpuManagerPolicy: static")},
                      record)
    assert "cpuManagerPolicyOptions are set but cpuManagerPolicy is none" in str(caught.value)


@pytest.mark.parametrize("record, words", [
    ({"version": 1}, "no 'files' field"),
    ({"version": 1, "files": []}, "'files' is []"),
    ({"version": 1, "files": {CONFIG: {"kind": "mine"}}}, "files['%s'] is" % CONFIG),
    ({"version": 1, "files": {"relative.conf": {"kind": "owned"}}}, "not an absolute path"),
    ({"version": 1, "files": {CONFIG: {"kind": "merged", "before": [], "missing": []}}}, ".before is not"),
    ({"version": 1, "files": {CONFIG: {"kind": "merged", "before": {}, "missing": [1]}}}, ".missing is not"),
    ({"version": 1, "files": {}, "flag_file": {"path": FLAGS, "text": 3, "mode": None}}, "flag_file is"),
])
def test_a_damaged_record_is_refused(record, words):
    with pytest.raises(RecordError) as caught:
        check_record(record, "/r/kubelet.json")
    message = str(caught.value)
    assert words in message and "/r/kubelet.json" in message and "remove the file" in message


def test_an_empty_record_is_kept_only_where_the_node_keeps_numa_values_of_its_own():
    text, record = merge(KUBEADM, FIRST, None)
    assert not plan_withdraw(CONFIG, "merge", {CONFIG: text}, record)["keep_empty_record"], "none is the default"
    own = KUBEADM + "memoryManagerPolicy: Static\n"  # the node's own, numa.kube never touched it
    text, record = merge(own, FIRST, None)
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: text}, record, check=False)
    assert plan["keep_empty_record"] and "memoryManagerPolicy in %s" % CONFIG in plan["notes"][-1]
    # the base file of a drop-in counts too: after absent the node may be read in merge mode
    plan = plan_withdraw(DROPIN, "dropin", {CONFIG: own, DROPIN: "cpuManagerPolicy: static\n"},
                         {"version": 1, "files": {DROPIN: {"kind": "owned"}}}, base_paths=[CONFIG], check=False)
    assert plan["keep_empty_record"] and plan["writes"] == {DROPIN: None}
