# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What numa.kube records about its kubelet change, and how 'absent' takes only that back out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.node.record import RecordError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import KubeletConfigError, plan_change
from ansible_collections.numa.kube.plugins.module_utils.kubelet.withdraw import (
    FALLBACK_FIELDS,
    check_record,
    plan_withdraw,
    record_present,
    without_config_dir,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import with_config_dir

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
          "topologyManagerPolicy": "restricted", "kubeReserved": {"cpu": "1", "memory": "1Gi"}}


def merge(text, settings, record):
    plan = plan_change(CONFIG, text, settings, "merge", check=False)
    return plan["text"], record_present(record, CONFIG, "merge", plan["before"], plan["config"])


def test_merge_records_each_changed_fields_original_once():
    text, record = merge(KUBEADM, FIRST, None)
    assert record["files"][CONFIG] == {"kind": "merged", "before": {"cpuManagerPolicy": "none"},
                                       "missing": ["topologyManagerPolicy"], "after": FIRST, "after_missing": []}
    text, record = merge(text, SECOND, record)
    entry = record["files"][CONFIG]
    # static and single-numa-node were numa.kube's own values: the originals stay none and missing
    assert entry["before"] == {"cpuManagerPolicy": "none", "kubeReserved": {"cpu": "500m", "memory": "1Gi"}}
    assert entry["missing"] == ["cpuManagerPolicyOptions", "topologyManagerPolicy"]
    # what numa.kube wrote is the last value it wrote, each time
    assert entry["after"] == {"cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
                              "topologyManagerPolicy": "restricted", "kubeReserved": {"cpu": "1", "memory": "1Gi"}}
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
    # recorded as merged and created: numa.kube's fields come out, and the file goes when nothing else is left
    entry = record["files"][CONFIG]
    assert entry["kind"] == "merged" and entry["created"] is True and entry["before"] == {}
    assert sorted(entry["missing"]) == sorted(FIRST)
    assert plan_withdraw(CONFIG, "merge", {CONFIG: plan["text"]}, record)["writes"] == {CONFIG: None}
    # a field someone else added since keeps the file, without numa.kube's fields
    kept = plan_withdraw(CONFIG, "merge", {CONFIG: plan["text"] + "maxPods: 50\n"}, record)["writes"][CONFIG]
    assert yaml.safe_load(kept) == {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                                    "maxPods": 50} or yaml.safe_load(kept) == {"maxPods": 50}


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


CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"


def test_the_flag_file_gets_its_previous_bytes_or_goes_while_it_is_numa_kubes_text():
    before = "# local flags\nKUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5\"\n"
    ours = "# local flags\nKUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5 --config-dir=%s\"\n" % CONFIG_DIR
    record = record_present(None, DROPIN, "dropin", {}, {}, flag=(FLAGS, before, "0644", ours, CONFIG_DIR))
    assert record["flag_file"] == {"path": FLAGS, "text": before, "mode": "0644", "after": ours,
                                   "config_dir": CONFIG_DIR}
    texts = {CONFIG: KUBEADM, DROPIN: "cpuManagerPolicy: static\n", FLAGS: ours}
    plan = plan_withdraw(DROPIN, "dropin", texts, record, base_paths=[CONFIG])
    assert plan["writes"] == {DROPIN: None, FLAGS: before} and plan["flag_mode"] == "0644"
    created = dict(record, flag_file=dict(record["flag_file"], text=None, mode=None,
                                          after='KUBELET_EXTRA_ARGS="--config-dir=%s"\n' % CONFIG_DIR))
    plan = plan_withdraw(DROPIN, "dropin", dict(texts, **{DROPIN: None, FLAGS: created["flag_file"]["after"]}),
                         created, base_paths=[CONFIG])
    assert plan["writes"] == {FLAGS: None} and plan["restart_required"], "a flag change restarts kubelet"


def test_flags_added_since_stay_only_numa_kubes_config_dir_comes_out():
    """Review 1 finding 1: the previous bytes must not wipe flags an operator added since."""
    ours = 'KUBELET_EXTRA_ARGS="--config-dir=%s"\n' % CONFIG_DIR
    record = record_present(None, DROPIN, "dropin", {}, {}, flag=(FLAGS, 'KUBELET_EXTRA_ARGS=""\n', "0644", ours,
                                                                  CONFIG_DIR))
    now = "# site\nKUBELET_EXTRA_ARGS='--config-dir=%s --node-ip=10.0.0.5 --max-pods=250'\nOTHER=1\n" % CONFIG_DIR
    plan = plan_withdraw(DROPIN, "dropin", {CONFIG: KUBEADM, DROPIN: None, FLAGS: now}, record, base_paths=[CONFIG])
    assert plan["writes"] == {FLAGS: "# site\nKUBELET_EXTRA_ARGS='--node-ip=10.0.0.5 --max-pods=250'\nOTHER=1\n"}
    assert plan["flag_mode"] is None, "the file keeps the mode it has now"
    assert plan["restart_required"] and any("taken out of KUBELET_EXTRA_ARGS" in note for note in plan["notes"])
    # a file numa.kube created but that holds more now stays, without numa.kube's argument
    created = dict(record, flag_file=dict(record["flag_file"], text=None, mode=None))
    plan = plan_withdraw(DROPIN, "dropin", {DROPIN: None, FLAGS: ours.replace('"\n', ' --v=2"\n')}, created)
    assert plan["writes"] == {FLAGS: 'KUBELET_EXTRA_ARGS="--v=2"\n'}
    # the argument changed or gone since: the file is left alone, with a warning
    other = 'KUBELET_EXTRA_ARGS="--config-dir=/etc/other --node-ip=10.0.0.5"\n'
    plan = plan_withdraw(DROPIN, "dropin", {DROPIN: None, FLAGS: other}, record)
    assert plan["writes"] == {} and "left as it is" in plan["warnings"][0] and FLAGS in plan["warnings"][0]
    # already as it was: nothing to do
    plan = plan_withdraw(DROPIN, "dropin", {DROPIN: None, FLAGS: 'KUBELET_EXTRA_ARGS=""\n'}, record)
    assert plan["writes"] == {} and plan["warnings"] == []


def test_a_flag_record_of_an_earlier_build_takes_out_only_the_argument():
    record = {"version": 1, "files": {}, "flag_file": {"path": FLAGS, "text": 'KUBELET_EXTRA_ARGS=""\n', "mode": "0644"}}
    check_record(record, "/r/kubelet.json")
    now = 'KUBELET_EXTRA_ARGS="--config-dir=%s --node-ip=10.0.0.5"\n' % CONFIG_DIR
    plan = plan_withdraw(DROPIN, "dropin", {DROPIN: None, FLAGS: now}, record)
    assert plan["writes"] == {FLAGS: 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5"\n'}
    assert any("earlier build" in note for note in plan["notes"])


def test_a_later_flag_change_records_the_text_it_replaced():
    """numa.kube adds --config-dir again only where it is gone: the previous bytes kept are then the
    file as the operator left it, so putting them back drops nothing but the argument."""
    first = 'KUBELET_EXTRA_ARGS="--config-dir=%s"\n' % CONFIG_DIR
    record = record_present(None, DROPIN, "dropin", {}, {}, flag=(FLAGS, None, None, first, CONFIG_DIR))
    edited = 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5"\n'
    second = 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5 --config-dir=%s"\n' % CONFIG_DIR
    record = record_present(record, DROPIN, "dropin", {}, {}, flag=(FLAGS, edited, "0600", second, CONFIG_DIR))
    plan = plan_withdraw(DROPIN, "dropin", {DROPIN: None, FLAGS: second}, record)
    assert plan["writes"] == {FLAGS: edited}


@pytest.mark.parametrize("text, expected", [
    ('KUBELET_EXTRA_ARGS="--config-dir=/d"\n', 'KUBELET_EXTRA_ARGS=""\n'),
    ('KUBELET_EXTRA_ARGS="--a --config-dir=/d --b"\n', 'KUBELET_EXTRA_ARGS="--a --b"\n'),
    ("KUBELET_EXTRA_ARGS=--config-dir=/d\r\n", "KUBELET_EXTRA_ARGS=\r\n"),
    ('KUBELET_EXTRA_ARGS="--config-dir=/d/sub"\n', None),
    ('KUBELET_EXTRA_ARGS="--config-dir=/dx"\n', None),
    ('# KUBELET_EXTRA_ARGS="--config-dir=/d"\n', None),
    ("", None),
])
def test_without_config_dir_is_the_inverse_of_adding_it(text, expected):
    assert without_config_dir(text, "/d") == expected


def test_with_and_without_config_dir_round_trip():
    for before in (None, "", 'KUBELET_EXTRA_ARGS=""\n', "# x\nKUBELET_EXTRA_ARGS='--v=2'\nA=1\n", "A=1\n"):
        added = with_config_dir(before, CONFIG_DIR)
        back = without_config_dir(added, CONFIG_DIR)
        assert back is not None and "--config-dir" not in back
        assert with_config_dir(back, CONFIG_DIR) == added


def test_merged_fields_changed_by_hand_since_are_left_with_a_warning():
    """Review 1 finding 2: only fields still holding numa.kube's value are put back."""
    before = {"apiVersion": "x", "kind": "KubeletConfiguration", "evictionHard": {"memory.available": "100Mi"},
              "cpuManagerPolicy": "none"}
    after = dict(before, cpuManagerPolicy="static", kubeReserved={"memory": "1Gi"},
                 evictionHard={"memory.available": "500Mi"})
    record = record_present(None, CONFIG, "merge", before, after)
    now = dict(after, kubeReserved={"memory": "4Gi"}, evictionHard={"memory.available": "2Gi"})
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: yaml.safe_dump(now)}, record, check=False)
    result = yaml.safe_load(plan["writes"][CONFIG])
    assert result["cpuManagerPolicy"] == "none", "still numa.kube's value: put back"
    assert result["kubeReserved"] == {"memory": "4Gi"} and result["evictionHard"] == {"memory.available": "2Gi"}
    assert len(plan["warnings"]) == 1 and "evictionHard, kubeReserved" in plan["warnings"][0]
    assert plan["warnings"][0] in plan["notes"]
    # a field numa.kube removed that has come back since stays too
    text = KUBEADM + "reservedMemory:\n- numaNode: 0\n  limits: {memory: 1Gi}\n"
    new_text, record = merge(text, {"reservedMemory": None}, None)
    assert record["files"][CONFIG]["after_missing"] == ["reservedMemory"]
    again = new_text + "reservedMemory:\n- numaNode: 0\n  limits: {memory: 2Gi}\n"
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: again}, record, check=False)
    assert plan["writes"] == {} and "reservedMemory" in plan["warnings"][0]


def test_a_merged_record_of_an_earlier_build_puts_every_field_back_and_says_so():
    record = {"version": 1, "files": {CONFIG: {"kind": "merged", "before": {"cpuManagerPolicy": "none"},
                                               "missing": ["kubeReserved"]}}}
    check_record(record, "/r/kubelet.json")
    now = KUBEADM.replace("cpuManagerPolicy: none", "cpuManagerPolicy: static")
    plan = plan_withdraw(CONFIG, "merge", {CONFIG: now}, record, check=False)
    result = yaml.safe_load(plan["writes"][CONFIG])
    assert result["cpuManagerPolicy"] == "none" and "kubeReserved" not in result
    assert plan["warnings"] == [] and any("earlier build" in note for note in plan["notes"])
    # a present run on such a record starts recording what numa.kube writes, field by field
    text, record = merge(plan["writes"][CONFIG], FIRST, record)
    assert record["files"][CONFIG]["after"] == FIRST


@pytest.mark.parametrize("record, words", [
    ({"version": 1, "files": {"/etc/kubernetes/admin.conf": {"kind": "owned"}}}, "/etc/kubernetes/admin.conf, which"),
    ({"version": 1, "files": {"/etc/passwd": {"kind": "merged", "before": {}, "missing": []}}}, "/etc/passwd, which"),
    ({"version": 1, "files": {}, "flag_file": {"path": "/etc/shadow", "text": None, "mode": None}},
     "numa.kube edited /etc/shadow"),
])
def test_a_record_naming_a_file_this_run_does_not_own_is_refused(record, words):
    """Review 1 finding 5: a record cannot point 'absent' at any file on the node."""
    with pytest.raises(RecordError) as caught:
        check_record(record, "/r/kubelet.json", own_files=[DROPIN, CONFIG], own_flag_files=[FLAGS])
    assert words in str(caught.value) and "by hand" in str(caught.value)
    check_record(record, "/r/kubelet.json")  # the fields themselves are sound


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
    ({"version": 1, "files": {}, "flag_file": {"path": FLAGS, "text": "", "mode": None, "after": 1}}, "flag_file is"),
    ({"version": 1, "files": {}, "flag_file": {"path": FLAGS, "text": "", "mode": None, "config_dir": "d"}},
     "flag_file is"),
    ({"version": 1, "files": {CONFIG: {"kind": "merged", "before": {}, "missing": [], "after": []}}}, ".after is not"),
    ({"version": 1, "files": {CONFIG: {"kind": "merged", "before": {}, "missing": [], "after_missing": {}}}},
     ".after_missing is not"),
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


def test_a_merge_file_a_record_calls_numa_kubes_own_loses_only_numa_kubes_fields():
    """Third review: in merge mode a record saying numa.kube wrote kubelet's configuration whole
    ({"kind": "owned"}: forged, or from a build that recorded a file it created so) had 'absent'
    delete the file, an operator's fields with it."""
    plan = plan_change(CONFIG, KUBEADM, FIRST, "merge", check=False)
    record = {"files": {CONFIG: {"kind": "owned"}}}
    writes = plan_withdraw(CONFIG, "merge", {CONFIG: plan["text"] + "maxPods: 50\n"}, record)["writes"]
    kept = yaml.safe_load(writes[CONFIG])
    assert kept["maxPods"] == 50 and kept["cgroupDriver"] == "systemd", kept
    assert "topologyManagerPolicy" not in kept and kept.get("cpuManagerPolicy") in (None, "none"), kept
    # what numa.kube alone wrote still goes whole
    alone = plan_change(CONFIG, None, FIRST, "merge", check=False)["text"]
    assert plan_withdraw(CONFIG, "merge", {CONFIG: alone}, record)["writes"] == {CONFIG: None}
