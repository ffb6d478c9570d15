# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet_config on files: present keeps a record of what it changed, absent takes only that back
out (check mode and diff first), a second absent changes nothing, a damaged record stops it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import yaml

from ansible_collections.numa.kube.plugins.modules import kubelet_config
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

KUBEADM = """apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubeadm's own comment
cgroupDriver: systemd
cpuManagerPolicy: none
kubeReserved: {cpu: 500m, memory: 1Gi}
"""
NUMA = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod"}
FLAGS = "# set by the admin\nKUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5\"\n"


def node(tmp_path, flags=FLAGS):
    (tmp_path / "config.yaml").write_text(KUBEADM)
    if flags is not None:
        (tmp_path / "kubelet.env").write_text(flags)
        os.chmod(str(tmp_path / "kubelet.env"), 0o644)
    return {"config": str(tmp_path / "config.yaml"), "dropin": str(tmp_path / "conf.d" / "50-numa-kube.conf"),
            "flags": str(tmp_path / "kubelet.env"), "record": str(tmp_path / "applied" / "kubelet.json")}


def empty_record(paths):
    with open(paths["record"]) as handle:
        return json.load(handle) == {"version": 1, "files": {}}


def merge_args(paths, **more):
    return dict({"path": paths["config"], "record": paths["record"]}, **more)


def dropin_args(paths, **more):
    return dict({"path": paths["dropin"], "dropin": True, "base_path": [paths["config"]], "record": paths["record"]},
                **more)


def test_merge_present_then_absent_gives_the_file_its_values_back(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, merge_args(paths, settings=NUMA))
    assert not failed and result["changed"], result
    assert result["files"] == [paths["config"], paths["record"]]
    record = json.loads(open(paths["record"]).read())
    assert record["files"][paths["config"]]["before"] == {"cpuManagerPolicy": "none"}
    assert stat.S_IMODE(os.stat(paths["record"]).st_mode) == 0o600
    # a later run with other values keeps the first originals
    failed, result = run(kubelet_config, merge_args(paths, settings=dict(NUMA, cpuManagerPolicy="none")))
    assert not failed
    failed, result = run(kubelet_config, merge_args(paths, settings=NUMA))
    assert json.loads(open(paths["record"]).read()) == record

    written = open(paths["config"]).read()
    failed, result = run(kubelet_config, merge_args(paths, state="absent"), check_mode=True, diff=True)
    assert not failed and result["changed"] and result["restart_required"] and result["remove_cpu_manager_state"]
    assert result["config"]["cpuManagerPolicy"] == "none" and "topologyManagerPolicy" not in result["config"]
    assert result["files"] == [paths["config"], paths["record"]]
    assert "topologyManagerPolicy" in result["diff"]["before"] and "topologyManagerPolicy" not in result["diff"]["after"]
    assert open(paths["config"]).read() == written and os.path.exists(paths["record"]), "check mode wrote"

    failed, result = run(kubelet_config, merge_args(paths, state="absent"))
    assert not failed and result["changed"]
    assert yaml.safe_load(open(paths["config"]).read()) == yaml.safe_load(KUBEADM)
    assert not os.path.exists(paths["record"]), "the record goes with the change it recorded"
    failed, result = run(kubelet_config, merge_args(paths, state="absent"), diff=True)
    assert not failed and not result["changed"] and result["files"] == [] and result["fallback"] == []


def test_the_nodes_own_numa_values_put_back_survive_a_second_absent(tmp_path):
    paths = node(tmp_path)
    with open(paths["config"], "a") as handle:
        handle.write("topologyManagerPolicy: restricted\n")  # the node's own, before numa.kube
    assert not run(kubelet_config, merge_args(paths, settings=NUMA))[0]
    failed, result = run(kubelet_config, merge_args(paths, state="absent"))
    assert not failed and result["config"]["topologyManagerPolicy"] == "restricted"
    # a removed record would make the next run fall back and remove restricted: an empty one stays
    assert empty_record(paths) and result["record"] == {"version": 1, "files": {}}
    kept = open(paths["config"]).read()
    failed, result = run(kubelet_config, merge_args(paths, state="absent"))
    assert not failed and not result["changed"] and result["fallback"] == []
    assert open(paths["config"]).read() == kept and empty_record(paths)
    # numa.kube again, then out again: the empty record gains the new originals
    assert not run(kubelet_config, merge_args(paths, settings=NUMA))[0]
    assert not run(kubelet_config, merge_args(paths, state="absent"))[0]
    assert yaml.safe_load(open(paths["config"]).read())["topologyManagerPolicy"] == "restricted"


def test_dropin_with_flag_file_present_then_absent_restores_the_flag_bytes(tmp_path):
    paths = node(tmp_path)
    ours = FLAGS.replace('10.0.0.5"', '10.0.0.5 --config-dir=%s"' % os.path.dirname(paths["dropin"]))
    args = dropin_args(paths, settings=NUMA, flag_file=paths["flags"], flag_file_text=ours)
    failed, result = run(kubelet_config, args, check_mode=True, diff=True)
    assert not failed and result["differs"] and result["restart_required"]
    assert sorted(result["files"]) == sorted([paths["dropin"], paths["flags"], paths["record"]])
    assert isinstance(result["diff"], list) and result["diff"][1]["after"] == ours
    assert not os.path.exists(paths["record"]) and open(paths["flags"]).read() == FLAGS
    failed, result = run(kubelet_config, args)
    assert not failed and open(paths["flags"]).read() == ours and os.path.exists(paths["dropin"])
    assert stat.S_IMODE(os.stat(paths["flags"]).st_mode) == 0o644, "an existing flag file keeps its mode"
    failed, result = run(kubelet_config, args)
    assert not failed and not result["changed"], result

    failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
    assert not failed and result["changed"] and result["restart_required"]
    assert not os.path.exists(paths["dropin"]) and not os.path.exists(paths["record"])
    assert open(paths["flags"]).read() == FLAGS, "the flag file's own bytes come back"
    assert open(paths["config"]).read() == KUBEADM, "the base file is not touched"
    failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
    assert not failed and not result["changed"]


def test_flags_added_since_survive_absent(tmp_path):
    """Review 1 finding 1: only the --config-dir numa.kube added comes out (check mode and diff first)."""
    paths = node(tmp_path)
    config_dir = os.path.dirname(paths["dropin"])
    ours = FLAGS.replace('10.0.0.5"', '10.0.0.5 --config-dir=%s"' % config_dir)
    assert not run(kubelet_config, dropin_args(paths, settings=NUMA, flag_file=paths["flags"],
                                               flag_file_text=ours))[0]
    record = json.loads(open(paths["record"]).read())
    assert record["flag_file"]["after"] == ours and record["flag_file"]["config_dir"] == config_dir
    edited = ours.replace('"\n', ' --max-pods=250"\n') + "# more\n"
    with open(paths["flags"], "w") as handle:
        handle.write(edited)
    expected = FLAGS.replace('10.0.0.5"', '10.0.0.5 --max-pods=250"') + "# more\n"
    args = dropin_args(paths, state="absent", flag_file=paths["flags"])
    failed, result = run(kubelet_config, args, check_mode=True, diff=True)
    assert not failed and result["changed"] and open(paths["flags"]).read() == edited
    assert {d["before_header"]: d["after"] for d in result["diff"]}[paths["flags"]] == expected
    failed, result = run(kubelet_config, args)
    assert not failed and open(paths["flags"]).read() == expected and not os.path.exists(paths["dropin"])
    assert result["restart_required"] and not os.path.exists(paths["record"])


def test_merged_fields_changed_by_hand_stay(tmp_path):
    """Review 1 finding 2: absent puts back only fields that still hold numa.kube's value."""
    paths = node(tmp_path)
    assert not run(kubelet_config, merge_args(paths, settings=dict(NUMA, kubeReserved={"memory": "2Gi"})))[0]
    document = yaml.safe_load(open(paths["config"]).read())
    document["kubeReserved"] = {"cpu": "1", "memory": "4Gi"}  # raised by hand since
    with open(paths["config"], "w") as handle:
        handle.write(yaml.safe_dump(document))
    failed, result = run(kubelet_config, merge_args(paths, state="absent"))
    assert not failed, result
    after = yaml.safe_load(open(paths["config"]).read())
    assert after["cpuManagerPolicy"] == "none" and "topologyManagerPolicy" not in after
    assert after["kubeReserved"] == {"cpu": "1", "memory": "4Gi"}
    assert any("kubeReserved changed since numa.kube set it" in note for note in result["notes"])


def test_a_record_naming_another_file_or_in_an_open_folder_is_refused(tmp_path):
    """Review 1 finding 5: the record cannot point absent at a file the module is not given, and a
    record folder others can write is not trusted."""
    paths = node(tmp_path)
    victim = tmp_path / "admin.conf"
    victim.write_text("keep me\n")
    os.makedirs(os.path.dirname(paths["record"]))
    with open(paths["record"], "w") as handle:
        json.dump({"version": 1, "files": {str(victim): {"kind": "owned"}}}, handle)
    failed, result = run(kubelet_config, dropin_args(paths, state="absent"))
    assert failed and "%s, which is not a file this run changes" % victim in result["msg"], result
    assert victim.read_text() == "keep me\n"
    with open(paths["record"], "w") as handle:
        json.dump({"version": 1, "files": {}, "flag_file": {"path": str(victim), "text": None, "mode": None}}, handle)
    failed, result = run(kubelet_config, dropin_args(paths, state="absent"))
    assert failed and "numa.kube edited %s" % victim in result["msg"] and victim.exists()
    with open(paths["record"], "w") as handle:
        json.dump({"version": 1, "files": {}}, handle)
    os.chmod(os.path.dirname(paths["record"]), 0o777)
    failed, result = run(kubelet_config, dropin_args(paths, state="absent"))
    assert failed and "mode 0777" in result["msg"] and "chmod go-w" in result["msg"], result


def test_a_flag_file_numa_kube_created_is_removed(tmp_path):
    paths = node(tmp_path, flags=None)
    args = dropin_args(paths, settings=NUMA, flag_file=paths["flags"], flag_file_text='KUBELET_EXTRA_ARGS="--x"\n')
    assert not run(kubelet_config, args)[0]
    assert stat.S_IMODE(os.stat(paths["flags"]).st_mode) == 0o600
    failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
    assert not failed and not os.path.exists(paths["flags"]) and not os.path.exists(paths["dropin"])


def test_a_damaged_record_stops_both_states_before_anything_changes(tmp_path):
    paths = node(tmp_path)
    os.makedirs(os.path.dirname(paths["record"]))
    with open(paths["record"], "w") as handle:
        handle.write('{"version": 1, "files": {')
    for args in (merge_args(paths, state="absent"), merge_args(paths, settings=NUMA)):
        failed, result = run(kubelet_config, args)
        assert failed and paths["record"] in result["msg"] and "not valid JSON" in result["msg"]
        assert open(paths["config"]).read() == KUBEADM


def test_no_record_kept_when_record_is_empty(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, merge_args(paths, settings=NUMA, record=""))
    assert not failed and result["files"] == [paths["config"]] and result["record"] is None
    assert not os.path.exists(os.path.dirname(paths["record"]))
    failed, result = run(kubelet_config, merge_args(paths, state="absent", record=""))
    assert not failed and result["fallback"] == ["cpuManagerPolicy", "topologyManagerPolicy", "topologyManagerScope"]


def test_absent_on_a_node_numa_kube_never_changed_creates_no_record(tmp_path):
    paths = node(tmp_path)
    for args in (merge_args(paths, state="absent"), dropin_args(paths, state="absent")):
        failed, result = run(kubelet_config, args)
        assert not failed and not result["changed"] and result["record"] is None, result
        assert not os.path.exists(os.path.dirname(paths["record"]))
    assert open(paths["config"]).read() == KUBEADM, "cpuManagerPolicy none is kubelet's default: left alone"


def test_the_fallback_removes_what_a_release_without_records_set(tmp_path):
    paths = node(tmp_path)
    with open(paths["config"], "a") as handle:
        handle.write("memoryManagerPolicy: Static\nreservedMemory:\n- {numaNode: 0, limits: {memory: 1124Mi}}\n")
    failed, result = run(kubelet_config, merge_args(paths, state="absent"))
    assert not failed and result["fallback"] == ["memoryManagerPolicy", "reservedMemory"]
    assert result["remove_memory_manager_state"] and not result["remove_cpu_manager_state"]
    assert yaml.safe_load(open(paths["config"]).read()) == yaml.safe_load(KUBEADM)
    assert result["record"] is None and not os.path.exists(paths["record"])


def test_present_without_settings_is_refused(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, merge_args(paths))
    assert failed and "settings is required with state=present" in result["msg"]


def test_the_default_record_is_under_the_record_folder():
    assert kubelet_config.RECORD != "/var/lib/numa-kube/applied/kubelet.json", "tests keep it in their own folder"
    assert "/var/lib/numa-kube/applied/kubelet.json" in kubelet_config.DOCUMENTATION


def write_record(paths, record):
    if not os.path.isdir(os.path.dirname(paths["record"])):
        os.makedirs(os.path.dirname(paths["record"]), 0o700)
    with open(paths["record"], "w") as handle:
        json.dump(dict(record, version=1), handle)
    os.chmod(paths["record"], 0o600)


def test_with_a_drop_in_a_record_cannot_remove_or_rewrite_the_base_configuration(tmp_path):
    """Hostile review: a forged or stale record marking the base file owned would have 'absent' delete
    kubelet's main configuration; a merged entry for it would write any 'before' value into it."""
    paths = node(tmp_path)
    forged = [{"kind": "owned"},
              {"kind": "merged", "before": {"authentication": {"anonymous": {"enabled": True}}}, "missing": []}]
    for entry in forged:
        write_record(paths, {"files": {paths["config"]: entry, paths["dropin"]: {"kind": "owned"}}})
        for state in ("absent", "present"):
            args = dropin_args(paths, state=state, **({"settings": NUMA} if state == "present" else {}))
            failed, result = run(kubelet_config, args)
            assert failed, (entry, state, result)
            assert "with a drop-in that file (kubelet's configuration, read before the drop-in) is only read" \
                in result["msg"], result["msg"]
            assert open(paths["config"]).read() == KUBEADM and not os.path.exists(paths["dropin"])


def test_a_recorded_flag_file_mode_wider_than_numa_kube_keeps_is_refused_before_anything_changes(tmp_path):
    """Hostile review: "0777" and "4755" were set on kubelet's flag file, "rwx" raised after the file was
    rewritten, leaving the record behind."""
    paths = node(tmp_path)
    config_dir = os.path.dirname(paths["dropin"])
    ours = FLAGS.replace('10.0.0.5"', '10.0.0.5 --config-dir=%s"' % config_dir)
    for mode in ("0777", "4755", "rwx", "0646", "755 ", "07550", "644\n", "0o644", "1644"):
        (tmp_path / "kubelet.env").write_text(ours)
        write_record(paths, {"files": {}, "flag_file": {"path": paths["flags"], "text": FLAGS, "mode": mode,
                                                        "after": ours, "config_dir": config_dir}})
        failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
        assert failed and "flag_file.mode is %r" % mode in result["msg"], (mode, result)
        assert open(paths["flags"]).read() == ours and os.path.exists(paths["record"]), mode
        assert stat.S_IMODE(os.stat(paths["flags"]).st_mode) == 0o644, mode
    # the modes numa.kube itself records are put back
    for mode in ("0644", "600", "0755", "0664"):
        (tmp_path / "kubelet.env").write_text(ours)
        write_record(paths, {"files": {}, "flag_file": {"path": paths["flags"], "text": FLAGS, "mode": mode,
                                                        "after": ours, "config_dir": config_dir}})
        failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
        assert not failed, result
        assert open(paths["flags"]).read() == FLAGS and stat.S_IMODE(os.stat(paths["flags"]).st_mode) == int(mode, 8)


def test_a_file_numa_kube_created_keeps_what_an_operator_added_since(tmp_path):
    """Hostile review: a configuration created with create=true was deleted whole by 'absent', fields an
    operator added since included. Only numa.kube's fields go; the file goes when nothing else is left."""
    paths = node(tmp_path)
    created = str(tmp_path / "new" / "config.yaml")
    os.makedirs(os.path.dirname(created))
    settings = dict(NUMA, kubeReserved={"cpu": "500m"})
    args = {"path": created, "create": True, "record": paths["record"], "settings": settings}
    failed, result = run(kubelet_config, args)
    assert not failed and os.path.exists(created), result
    entry = json.loads(open(paths["record"]).read())["files"][created]
    assert entry["kind"] == "merged" and entry["created"] is True and sorted(entry["missing"]) == sorted(settings)
    with open(created, "a") as handle:
        handle.write("maxPods: 50\n")  # the operator's, after numa.kube
    failed, result = run(kubelet_config, {"path": created, "record": paths["record"], "state": "absent"})
    assert not failed and result["changed"], result
    left = yaml.safe_load(open(created).read())
    assert left["maxPods"] == 50 and not set(settings) & set(left), left
    # with nothing but numa.kube's fields in it, the file it created goes (a file it found stays)
    os.unlink(created)
    assert not run(kubelet_config, dict(args))[0]
    failed, result = run(kubelet_config, {"path": created, "record": paths["record"], "state": "absent"})
    assert not failed and not os.path.exists(created), result
    assert any("nothing else is left in it" in note for note in result["notes"]), result["notes"]


def test_a_flag_file_numa_kube_would_not_record_is_refused_before_anything_is_written(tmp_path):
    """Review of the fix: a 0664 flag file was recorded, then refused by the next run; a world-writable
    one is refused at once instead, and a group-writable one goes and comes back as it was."""
    for mode, refused in ((0o666, True), (0o4644, True), (0o664, False)):
        folder = tmp_path / ("m%o" % mode)
        folder.mkdir()
        paths = node(folder)
        os.chmod(paths["flags"], mode)
        config_dir = os.path.dirname(paths["dropin"])
        ours = FLAGS.replace('10.0.0.5"', '10.0.0.5 --config-dir=%s"' % config_dir)
        args = dropin_args(paths, settings=NUMA, flag_file=paths["flags"], flag_file_text=ours)
        failed, result = run(kubelet_config, args)
        if refused:
            assert failed and "has mode %04o" % mode in result["msg"], result
            assert open(paths["flags"]).read() == FLAGS and not os.path.exists(paths["record"])
            assert not os.path.exists(paths["dropin"])
            continue
        assert not failed, result
        assert not run(kubelet_config, args)[0], "a second run takes its own record"
        failed, result = run(kubelet_config, dropin_args(paths, state="absent", flag_file=paths["flags"]))
        assert not failed and open(paths["flags"]).read() == FLAGS
        assert stat.S_IMODE(os.stat(paths["flags"]).st_mode) == 0o664


def test_with_a_drop_in_the_drop_in_is_never_a_merged_file(tmp_path):
    """Review of the fix: a record naming the drop-in itself as merged made 'absent' write forged
    fields (anonymous auth, AlwaysAllow) into it instead of removing it."""
    paths = node(tmp_path)
    os.makedirs(os.path.dirname(paths["dropin"]))
    with open(paths["dropin"], "w") as handle:
        handle.write("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n")
    write_record(paths, {"files": {paths["dropin"]: {"kind": "merged", "missing": [], "before": {
        "authentication": {"anonymous": {"enabled": True}}, "authorization": {"mode": "AlwaysAllow"}}}}})
    before = open(paths["dropin"]).read()
    failed, result = run(kubelet_config, dropin_args(paths, state="absent"))
    assert failed and "that is the drop-in, which numa.kube writes whole" in result["msg"], result
    assert open(paths["dropin"]).read() == before
