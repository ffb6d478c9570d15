# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet_config's extra_files and remove_files: the files that go with the change (the kubelet
role's boot guard, kubelet's stale state) written or removed in the same module run, with check
mode, diff and a second run that changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

from ansible_collections.numa.kube.plugins.module_utils.node import file_update
from ansible_collections.numa.kube.plugins.modules import kubelet_config
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

KUBEADM = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: none\n"
NUMA = {"topologyManagerPolicy": "best-effort"}
SCRIPT = "#!/bin/sh\nexit 0\n"
DROPIN = "[Service]\nExecStartPre=-/usr/local/sbin/guard\n"


def node(tmp_path):
    (tmp_path / "config.yaml").write_text(KUBEADM)
    state = tmp_path / "state"
    state.mkdir()
    (state / "cpu_manager_state").write_text('{"policyName":"none"}')
    return {"config": str(tmp_path / "config.yaml"), "record": str(tmp_path / "applied" / "kubelet.json"),
            "script": str(tmp_path / "sbin" / "guard"), "dropin": str(tmp_path / "kubelet.service.d" / "50.conf"),
            "cpu_state": str(state / "cpu_manager_state"), "memory_state": str(state / "memory_manager_state")}


def args(paths, **more):
    return dict({"path": paths["config"], "record": paths["record"], "settings": NUMA,
                 "extra_files": [{"path": paths["script"], "content": SCRIPT, "mode": "0700"},
                                 {"path": paths["dropin"], "content": DROPIN, "mode": "0600"}],
                 "remove_files": [paths["cpu_state"], paths["memory_state"]]}, **more)


def test_one_run_writes_the_extra_files_and_removes_the_state_then_a_second_changes_nothing(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, args(paths))
    assert not failed and result["changed"], result
    assert result["removed"] == [paths["cpu_state"]], "the missing memory state is no removal"
    assert result["extra_written"] == [paths["script"], paths["dropin"]]
    assert result["files"] == [paths["config"], paths["record"], paths["cpu_state"], paths["script"], paths["dropin"]]
    assert not os.path.exists(paths["cpu_state"])
    assert open(paths["script"]).read() == SCRIPT and open(paths["dropin"]).read() == DROPIN
    assert stat.S_IMODE(os.stat(paths["script"]).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(paths["dropin"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(paths["dropin"])).st_mode) == 0o755
    assert "topologyManagerPolicy: best-effort" in open(paths["config"]).read()
    failed, again = run(kubelet_config, args(paths))
    assert not failed and not again["changed"] and not again["differs"], again
    assert again["extra_written"] == [] and again["removed"] == [] and again["files"] == []


def test_a_mode_or_text_that_differs_is_written_again(tmp_path):
    paths = node(tmp_path)
    run(kubelet_config, args(paths))
    os.chmod(paths["script"], 0o755)
    failed, result = run(kubelet_config, args(paths))
    assert not failed and result["changed"] and result["extra_written"] == [paths["script"]], result
    assert stat.S_IMODE(os.stat(paths["script"]).st_mode) == 0o700


def test_check_mode_writes_and_removes_nothing_and_shows_each_file(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, args(paths), check_mode=True, diff=True)
    assert not failed and result["changed"] and result["differs"], result
    assert result["removed"] == [paths["cpu_state"]] and len(result["extra_written"]) == 2
    assert os.path.exists(paths["cpu_state"]) and not os.path.exists(paths["script"])
    assert open(paths["config"]).read() == KUBEADM
    headers = [(d["before_header"], d["after_header"]) for d in result["diff"]]
    assert headers == [(paths["config"], paths["config"]), (paths["cpu_state"], "/dev/null"),
                       ("/dev/null", paths["script"]), ("/dev/null", paths["dropin"])], headers


def test_only_the_side_files_change_when_the_configuration_is_in_place(tmp_path):
    paths = node(tmp_path)
    run(kubelet_config, args(paths, extra_files=[], remove_files=[]))
    failed, result = run(kubelet_config, args(paths))
    assert not failed and result["changed"] and not result["restart_required"], result
    assert result["files"] == [paths["cpu_state"], paths["script"], paths["dropin"]]


def test_absent_removes_the_files_it_is_given(tmp_path):
    paths = node(tmp_path)
    run(kubelet_config, args(paths))
    failed, result = run(kubelet_config, {"path": paths["config"], "record": paths["record"], "state": "absent",
                                          "remove_files": [paths["script"], paths["dropin"]]})
    assert not failed and result["removed"] == [paths["script"], paths["dropin"]], result
    assert not os.path.exists(paths["script"]) and not os.path.exists(paths["dropin"])
    assert open(paths["config"]).read() == KUBEADM, "the setting is taken back out"


def test_bad_side_files_are_refused_before_anything_changes(tmp_path):
    paths = node(tmp_path)
    failed, result = run(kubelet_config, args(paths, extra_files=[
        {"path": "relative/guard", "content": SCRIPT, "mode": "0700"},
        {"path": paths["dropin"], "content": DROPIN, "mode": "rw"}], remove_files=[paths["dropin"]]))
    assert failed, result
    assert any("extra_files[0]: path 'relative/guard'" in p for p in result["problems"]), result
    assert any("extra_files[1]: mode 'rw'" in p for p in result["problems"]), result
    assert any("remove_files[0]" in p and "also in extra_files" in p for p in result["problems"]), result
    failed, result = run(kubelet_config, args(paths, state="absent"))
    assert failed and "extra_files goes with state=present only" in result["msg"], result
    os.makedirs(paths["script"])
    failed, result = run(kubelet_config, args(paths))
    assert failed and "is a directory, not a file" in result["msg"], result
    assert open(paths["config"]).read() == KUBEADM and os.path.exists(paths["cpu_state"]), "nothing changed"


def test_mode_value_reads_octal_texts_only():
    assert file_update.mode_value("0700") == 0o700 and file_update.mode_value("644") == 0o644
    assert file_update.mode_value("0800") is None and file_update.mode_value("") is None
    assert file_update.mode_value("00700") is None
