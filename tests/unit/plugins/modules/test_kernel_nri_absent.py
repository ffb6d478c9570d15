# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_args and containerd_nri run in-process: the record each change leaves, and state=absent
taking out exactly what it says - no more, nothing changed since, nothing without a record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils.node import kernel_args_apply
from ansible_collections.numa.kube.plugins.modules import containerd_nri, kernel_args
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="console=ttyS0 quiet numa_balancing=enable"\n'
WANTED = ["quiet", "mem_sampling_on", "numa_balancing=disable"]


@pytest.fixture
def warned(monkeypatch):
    """Every warning a module gives, in order."""
    given = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda self, warning: given.append(warning))
    return given


@pytest.fixture
def node(tmp_path):
    grub = tmp_path / "grub"
    grub.write_text(GRUB)
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/vmlinuz console=ttyS0 quiet numa_balancing=enable\n")
    return grub, cmdline, tmp_path / "applied" / "kernel.json"


def kernel(node, **more):
    grub, cmdline, _record = node
    return dict({"method": "grub_default", "grub_default_path": str(grub), "proc_cmdline_path": str(cmdline)}, **more)


def test_the_record_keeps_only_what_numa_kube_added_and_removed(node):
    grub, _cmdline, record = node
    failed, result = run(kernel_args, kernel(node, present=WANTED), check_mode=True)
    assert not failed and result["differs"] and not record.exists(), "check mode writes no record"
    failed, result = run(kernel_args, kernel(node, present=WANTED))
    assert not failed and result["changed"]
    kept = json.loads(record.read_text())
    assert kept == {"version": 1, "method": "grub_default", "path": str(grub), "variable": "GRUB_CMDLINE_LINUX",
                    "added": ["numa_balancing=disable", "mem_sampling_on"], "removed": ["numa_balancing=enable"]}
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    failed, result = run(kernel_args, kernel(node, present=WANTED))
    assert not failed and not result["changed"] and json.loads(record.read_text()) == kept


def test_absent_takes_out_what_numa_kube_set_and_puts_back_what_it_removed(node):
    grub, _cmdline, record = node
    run(kernel_args, kernel(node, present=WANTED))
    changed_grub = grub.read_text()
    failed, result = run(kernel_args, kernel(node, state="absent"), check_mode=True, diff=True)
    assert not failed and result["changed"] and result["differs"]
    assert grub.read_text() == changed_grub and record.exists(), "check mode changes nothing"
    assert 'numa_balancing=enable"' in result["diff"]["after"]
    failed, result = run(kernel_args, kernel(node, state="absent"))
    assert not failed and result["changed"], result
    assert grub.read_text() == GRUB, "the grub defaults are as the user had them"
    assert not record.exists(), "the record goes with what it recorded"
    assert result["removed"] == ["numa_balancing=disable", "mem_sampling_on"]
    assert result["restored"] == ["numa_balancing=enable"] and result["left"] == []
    assert result["grub_update_required"] and not result["reboot_required"], "/proc/cmdline had the user's line"


def test_absent_again_and_absent_without_a_record_change_nothing(node, tmp_path):
    grub, _cmdline, record = node
    failed, result = run(kernel_args, kernel(node, state="absent"))
    assert not failed and not result["changed"] and not result["record_found"]
    assert "nothing was changed" in result["msg"] and str(record) in result["msg"]
    assert grub.read_text() == GRUB and not result["reboot_required"]
    # no record: the grub defaults are not even read (a node without grub is fine)
    failed, result = run(kernel_args, kernel(node, state="absent", grub_default_path=str(tmp_path / "none")))
    assert not failed and not result["changed"]


def test_a_parameter_changed_since_is_left_alone_with_a_warning(node, warned):
    grub, _cmdline, record = node
    run(kernel_args, kernel(node, present=WANTED))
    grub.write_text(grub.read_text().replace("numa_balancing=disable", "numa_balancing=auto"))
    failed, result = run(kernel_args, kernel(node, state="absent"))
    assert not failed and result["changed"]
    assert 'GRUB_CMDLINE_LINUX="console=ttyS0 quiet numa_balancing=auto"' in grub.read_text()
    assert len(result["left"]) == 2 and "numa_balancing=disable, which numa.kube added, is now numa_balancing=auto" \
        in result["left"][0] and "has numa_balancing=auto now" in result["left"][1]
    assert warned == result["left"]
    assert not record.exists()


def test_a_parameter_the_user_had_is_never_taken_out(node):
    grub, _cmdline, record = node
    run(kernel_args, kernel(node, present=["quiet"]))
    assert not record.exists(), "nothing changed, nothing recorded"
    run(kernel_args, kernel(node, present=["quiet", "mem_sampling_on"]))
    run(kernel_args, kernel(node, state="absent"))
    assert grub.read_text() == GRUB


@pytest.mark.parametrize("text,words", [
    ("{", "is not valid JSON"),
    ('{"version": 2, "added": []}', "has version 2"),
    ('{"version": 1, "method": "grub_default", "path": "/etc/default/grub", "variable": "GRUB_CMDLINE_LINUX", '
     '"added": ["x;reboot"], "removed": []}', "'x;reboot' is refused"),
])
@pytest.mark.parametrize("state", ["present", "absent"])
def test_a_damaged_record_is_refused_and_nothing_written(node, text, words, state):
    grub, _cmdline, record = node
    record.parent.mkdir()
    record.write_text(text)
    failed, result = run(kernel_args, kernel(node, state=state, **({"present": WANTED} if state == "present" else {})))
    assert failed and words in result["msg"] and str(record) in result["msg"], result["msg"]
    assert grub.read_text() == GRUB and record.read_text() == text


def test_a_record_of_another_grub_file_is_refused(node, tmp_path):
    grub, _cmdline, record = node
    run(kernel_args, kernel(node, present=WANTED))
    other = tmp_path / "grub2"
    other.write_text(GRUB)
    failed, result = run(kernel_args, kernel(node, state="absent", grub_default_path=str(other)))
    assert failed and "GRUB_CMDLINE_LINUX in %s" % grub in result["msg"] and "kernel_args_grub_default_path" in \
        result["msg"]
    assert other.read_text() == GRUB and record.exists()


def test_absent_takes_no_lists(node):
    failed, result = run(kernel_args, kernel(node, state="absent", present=["x"]))
    assert failed and "leave both lists out" in result["msg"]


FAKE_GRUBBY = """#!/bin/sh
case "$1" in
  --info=ALL) printf 'index=0\\nkernel="/boot/vmlinuz-6.6.0"\\nargs="%%s"\\n' "$(cat "%s")" ;;
  *) echo "$@" >> "%s"; exit 0 ;;
esac
"""


def test_grubby_is_asked_to_take_out_and_put_back_exactly(tmp_path, monkeypatch):
    args = tmp_path / "args"
    calls = tmp_path / "calls"
    binary = tmp_path / "bin" / "grubby"
    binary.parent.mkdir()
    binary.write_text(FAKE_GRUBBY % (args, calls))
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (binary.parent, os.environ["PATH"]))
    monkeypatch.setattr(kernel_args_apply, "grubby_files", lambda: [])
    args.write_text("ro quiet numa_balancing=enable")
    common = {"method": "grubby", "proc_cmdline_path": str(tmp_path / "none")}
    failed, result = run(kernel_args, dict(common, present=WANTED))
    assert not failed and result["added"] == ["numa_balancing=disable", "mem_sampling_on"]
    assert result["removed"] == ["numa_balancing=enable"]
    args.write_text("ro quiet numa_balancing=disable mem_sampling_on")  # what grubby did
    failed, result = run(kernel_args, dict(common, state="absent"))
    assert not failed and result["changed"]
    assert calls.read_text().splitlines()[-1] == ("--update-kernel=ALL --args=numa_balancing=enable "
                                                  "--remove-args=numa_balancing=disable mem_sampling_on")
    assert result["kernels"][0]["args"] == ["ro", "quiet", "numa_balancing=enable"]


# containerd_nri -----------------------------------------------------------------------------------

DISABLED = 'version = 2\n# keep this comment\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'


@pytest.fixture
def containerd(tmp_path):
    path = tmp_path / "containerd" / "config.toml"
    path.parent.mkdir()
    path.write_text(DISABLED)
    return path, tmp_path / "applied" / "containerd-nri.json"


def nri(path, **more):
    return dict({"path": str(path), "distribution": "containerd", "containerd_version": "1.7.24"}, **more)


def test_nri_numa_kube_enabled_is_put_back_as_it_was(containerd):
    path, record = containerd
    failed, result = run(containerd_nri, nri(path))
    assert not failed and result["changed"] and result["nri_enabled"]
    assert json.loads(record.read_text()) == {
        "version": 1, "distribution": "containerd", "path": str(path), "created_file": False,
        "created_table": False, "keys": {"disable": {"before": "true", "after": "false"}}}
    failed, result = run(containerd_nri, nri(path, state="absent"), check_mode=True, diff=True)
    assert not failed and result["changed"] and result["restart_required"] and "disable = true" in \
        result["diff"]["after"]
    assert "disable = false" in path.read_text() and record.exists(), "check mode changes nothing"
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert not failed and result["changed"] and result["restart_required"] and not result["nri_enabled"]
    assert path.read_text() == DISABLED and not record.exists()
    assert result["service"] == "containerd"
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert not failed and not result["changed"] and not result["restart_required"] and not result["record_found"]


def test_a_config_numa_kube_created_goes(tmp_path):
    path = tmp_path / "etc" / "containerd" / "config.toml"
    run(containerd_nri, nri(path))
    assert path.exists()
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert not failed and result["changed"] and result["removed_file"] and not path.exists()


def test_a_setting_changed_since_is_left_alone_with_a_warning(containerd, warned):
    path, record = containerd
    run(containerd_nri, nri(path))
    path.write_text(DISABLED.replace("disable = true", "disable = 0"))
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert not failed and not result["restart_required"] and result["changed"], "only the record goes"
    assert "disable = 0" in path.read_text() and "changed since" in result["left"][0]
    assert warned == result["left"]
    assert not record.exists()


def test_no_record_reads_nothing_not_even_containerds_version(containerd, monkeypatch, tmp_path):
    path, _record = containerd
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    failed, result = run(containerd_nri, {"state": "absent", "path": str(path)})
    assert not failed and not result["changed"] and "nothing was changed" in result["msg"]
    assert path.read_text() == DISABLED


def test_a_damaged_record_is_refused_and_nothing_written(containerd):
    path, record = containerd
    record.parent.mkdir()
    record.write_text('{"version": 1, "distribution": "containerd", "path": "relative", "keys": []}')
    for args in (nri(path, state="absent"), nri(path)):
        failed, result = run(containerd_nri, args)
        assert failed and "is damaged" in result["msg"] and str(record) in result["msg"], result["msg"]
        assert path.read_text() == DISABLED


def test_the_rke2_template_numa_kube_wrote_goes(tmp_path):
    folder = tmp_path / "rke2" / "agent" / "etc" / "containerd"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  x = "y"\n')
    args = {"distribution": "rke2", "data_dir": str(tmp_path / "rke2"), "containerd_version": "v1.7.27-k3s1",
            "distribution_version": "v1.30.4+rke2r1"}
    failed, result = run(containerd_nri, args)
    assert not failed and (folder / "config.toml.tmpl").exists()
    failed, result = run(containerd_nri, dict(args, state="absent"))
    assert not failed and result["changed"] and result["removed_file"] and not result["nri_enabled"]
    assert not (folder / "config.toml.tmpl").exists() and result["rendered_path"] == str(folder / "config.toml")
    assert result["service"] in ("rke2-server", "rke2-agent")


# records that could point 'absent' elsewhere (review 1 finding 5) ---------------------------------


def test_an_nri_record_naming_another_file_is_refused(containerd, tmp_path):
    path, record = containerd
    victim = tmp_path / "victim.toml"
    victim.write_text("version = 2\n")
    record.parent.mkdir()
    record.write_text(json.dumps({"version": 1, "distribution": "containerd", "path": str(victim),
                                  "created_file": True, "created_table": True, "keys": {}}))
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert failed and "numa.kube only ever writes %s" % path in result["msg"], result["msg"]
    assert victim.exists() and path.read_text() == DISABLED
    # RKE2: only its config.toml templates under the data dir
    record.write_text(json.dumps({"version": 1, "distribution": "rke2", "path": str(victim),
                                  "created_file": True, "created_table": True, "keys": {}}))
    failed, result = run(containerd_nri, {"state": "absent", "data_dir": str(tmp_path / "rke2")})
    assert failed and "config.toml.tmpl" in result["msg"] and victim.exists(), result["msg"]


@pytest.mark.parametrize("part", ["kernel", "nri"])
def test_a_record_folder_others_can_write_is_refused(node, containerd, part):
    folder = node[2].parent
    folder.mkdir()
    os.chmod(str(folder), 0o757)
    if part == "kernel":
        failed, result = run(kernel_args, kernel(node, state="absent", record=str(node[2])))
    else:
        failed, result = run(containerd_nri, nri(containerd[0], state="absent", record=str(folder / "nri.json")))
    assert failed and "record folder %s has mode 0757" % folder in result["msg"], result["msg"]
    assert "chmod go-w" in result["msg"] and node[0].read_text() == GRUB


def test_a_record_that_is_a_symbolic_link_is_refused(node, tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"version": 1}')
    node[2].parent.mkdir()
    os.symlink(str(elsewhere), str(node[2]))
    failed, result = run(kernel_args, kernel(node, state="absent", record=str(node[2])))
    assert failed and "is a symbolic link" in result["msg"], result["msg"]


@pytest.mark.parametrize("forged", [{"added": [], "removed": ["rd.rescue"]},
                                    {"added": [], "removed": ["systemd.confirm_spawn"]},
                                    {"added": [], "removed": ["systemd.hostname=other"]}])
def test_a_record_cannot_put_back_or_take_out_a_switch_that_changes_what_boots(node, forged):
    """Hostile review: rd.rescue in a record's removed list was put back (rescue and rd.emergency were
    refused)."""
    grub, _cmdline, record = node
    record.parent.mkdir(mode=0o700)
    record.write_text(json.dumps(dict(forged, version=1, method="grub_default", path=str(grub),
                                      variable="GRUB_CMDLINE_LINUX")))
    record.chmod(0o600)
    failed, result = run(kernel_args, kernel(node, state="absent"))
    assert failed and "is refused" in result["msg"] and "allow" in result["msg"], result
    assert grub.read_text() == GRUB and record.exists()


def test_absent_puts_back_several_settings_numa_kube_added(containerd):
    """Review of the fixes: absent crashed (TypeError) when the record held two or more keys
    numa.kube had added, the first one's line being taken out while the loop still ran."""
    path, record = containerd
    settings = {"plugin_request_timeout": "10s", "plugin_registration_timeout": "10s"}
    failed, result = run(containerd_nri, nri(path, settings=settings))
    assert not failed and result["changed"], result
    failed, result = run(containerd_nri, nri(path, state="absent"))
    assert not failed and result["changed"], result
    assert path.read_text() == DISABLED and not record.exists()
