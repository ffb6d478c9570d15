# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat

import pytest

import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet import health as kubelet_health_work
from ansible_collections.numa.kube.plugins.modules import (
    containerd_nri,
    kernel_args,
    kubelet_config,
    kubelet_facts,
    kubelet_health,
    reserved_memory,
    topology_facts,
)
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

KUBEADM = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
SETTINGS = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m", "memory": "1Gi"},
            "memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}


# topology_facts -------------------------------------------------------------------------------

def test_topology_facts_from_a_recorded_tree(tmp_path):
    sys_root, proc_root = two_socket_interleaved().write(str(tmp_path))
    failed, result = run(topology_facts, {"sysfs_root": sys_root, "procfs_root": proc_root}, check_mode=True)
    assert not failed and result["changed"] is False
    facts = result["ansible_facts"]["numa_topology"]
    assert facts["node_ids"] == [0, 1] and facts["cpu_count"] == 16


def test_topology_facts_fails_cleanly(tmp_path):
    failed, result = run(topology_facts, {"sysfs_root": str(tmp_path / "none"), "procfs_root": str(tmp_path)})
    assert failed and "could not read the NUMA topology" in result["msg"]


# reserved_memory ------------------------------------------------------------------------------

def test_reserved_memory_computes():
    failed, result = run(reserved_memory, {"numa_node_memory": {"0": 2 ** 33, "1": 2 ** 33},
                                           "kube_reserved": {"memory": "1Gi"}}, check_mode=True)
    assert not failed and not result["changed"]
    assert result["reserved_memory_flag"] == "0:memory=562Mi;1:memory=562Mi"


def test_reserved_memory_refuses_a_wrong_sum_with_every_problem():
    failed, result = run(reserved_memory, {
        "numa_nodes": [0, 1], "kube_reserved": {"memory": "1Gi"},
        "reserved_memory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}, {"numaNode": 4, "limits": {"memory": "1Mi"}}]})
    assert failed
    assert result["msg"].startswith("kubelet would refuse this reservation: ")
    assert len(result["problems"]) == 2
    assert 'the total amount "1025Mi" of type "memory" is not equal to the value "1124Mi"' in result["msg"]


def test_reserved_memory_needs_nodes():
    failed, result = run(reserved_memory, {"kube_reserved": {"memory": "1Gi"}})
    assert failed and "numa_nodes" in result["msg"]


# kubelet_config -------------------------------------------------------------------------------

def test_kubelet_config_merge_check_mode_diff_and_idempotence(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    os.chmod(str(path), 0o600)
    args = {"path": str(path), "settings": SETTINGS, "backup": True}

    failed, result = run(kubelet_config, args, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert path.read_text() == KUBEADM, "check mode must not write"
    assert "cpuManagerPolicy: static" in result["diff"]["after"]
    assert result["diff"]["before"] == KUBEADM
    assert result["remove_cpu_manager_state"] and result["remove_memory_manager_state"]

    failed, result = run(kubelet_config, args)
    assert not failed and result["changed"] and result["restart_required"]
    written = yaml.safe_load(path.read_text())
    assert written["cgroupDriver"] == "systemd" and written["memoryManagerPolicy"] == "Static"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert open(result["backup_file"]).read() == KUBEADM

    failed, result = run(kubelet_config, args)
    assert not failed and not result["changed"] and not result["restart_required"]
    assert not result["remove_cpu_manager_state"] and not result["remove_memory_manager_state"]
    assert "backup_file" not in result


def test_kubelet_config_bad_setting_changes_nothing(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    failed, result = run(kubelet_config, {"path": str(path), "settings": {"cpuManagerPolicy": "Static"}})
    assert failed and "case-sensitive" in result["msg"] and result["problems"]
    assert path.read_text() == KUBEADM


def test_kubelet_config_json_with_file_mode(tmp_path):
    path = tmp_path / "kubelet-config.json"
    path.write_text(json.dumps({"kind": "KubeletConfiguration", "maxPods": 29}))
    failed, result = run(kubelet_config, {"path": str(path), "settings": {"topologyManagerPolicy": "restricted"},
                                          "mode": "0644"})
    assert not failed and result["changed"]
    assert json.loads(path.read_text()) == {"kind": "KubeletConfiguration", "maxPods": 29,
                                            "topologyManagerPolicy": "restricted"}
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644


def test_kubelet_config_dropin(tmp_path):
    base = tmp_path / "config.yaml"
    base.write_text(KUBEADM + "kubeReserved:\n  cpu: 500m\n")
    dropin = tmp_path / "conf.d" / "50-numa.conf"
    dropin.parent.mkdir()
    args = {"path": str(dropin), "dropin": True, "base_path": str(base), "settings": {"cpuManagerPolicy": "static"},
            "numa_node_count": 2, "online_cpus": "0-3"}
    failed, result = run(kubelet_config, args, diff=True)
    assert not failed and result["changed"] and result["remove_cpu_manager_state"]
    assert result["diff"]["before_header"] == "/dev/null"
    assert yaml.safe_load(dropin.read_text()) == {"apiVersion": "kubelet.config.k8s.io/v1beta1",
                                                  "kind": "KubeletConfiguration", "cpuManagerPolicy": "static"}
    failed, result = run(kubelet_config, args)
    assert not failed and not result["changed"]


def test_kubelet_config_missing_files(tmp_path):
    failed, result = run(kubelet_config, {"path": str(tmp_path / "none.yaml"), "settings": {}})
    assert failed and "create=true" in result["msg"]
    failed, result = run(kubelet_config, {"path": str(tmp_path / "a.conf"), "dropin": True, "settings": {},
                                          "base_path": str(tmp_path / "none.yaml")})
    assert failed and "base_path" in result["msg"]
    failed, result = run(kubelet_config, {"path": str(tmp_path / "nodir" / "c.yaml"), "settings": {}, "create": True})
    assert failed and "does not exist" in result["msg"]


def test_kubelet_config_create(tmp_path):
    path = tmp_path / "new.yaml"
    failed, result = run(kubelet_config, {"path": str(path), "settings": {"cpuManagerPolicy": "none"}, "create": True},
                         check_mode=True)
    assert not failed and result["changed"] and not path.exists()
    failed, result = run(kubelet_config, {"path": str(path), "settings": {"cpuManagerPolicy": "none"}, "create": True})
    assert not failed and yaml.safe_load(path.read_text())["kind"] == "KubeletConfiguration"


def test_kubelet_config_bad_online_cpus(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    failed, result = run(kubelet_config, {"path": str(path), "settings": {}, "online_cpus": "0-x"})
    assert failed and "online_cpus '0-x'" in result["msg"]
    assert path.read_text() == KUBEADM


# containerd_nri -------------------------------------------------------------------------------

CONTAINERD_17 = 'version = 2\n# keep this comment\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'


def test_containerd_nri_check_mode_then_apply_then_idempotent(tmp_path):
    path = tmp_path / "containerd" / "config.toml"
    path.parent.mkdir()
    path.write_text(CONTAINERD_17)
    args = {"path": str(path), "containerd_version": "containerd github.com/containerd/containerd 1.7.24~ds1",
            "backup": True}
    failed, result = run(containerd_nri, args, check_mode=True, diff=True)
    assert not failed and result["changed"] and path.read_text() == CONTAINERD_17
    assert "disable = false" in result["diff"]["after"]
    failed, result = run(containerd_nri, args)
    assert not failed and result["changed"] and result["restart_required"]
    assert path.read_text() == CONTAINERD_17.replace("disable = true", "disable = false")
    assert open(result["backup_file"]).read() == CONTAINERD_17
    assert result["containerd_version"] == "1.7.24" and result["config_version"] == 2
    assert result["socket_path"] == "/var/run/nri/nri.sock"
    failed, result = run(containerd_nri, args)
    assert not failed and not result["changed"] and not result["restart_required"]


def test_containerd_nri_on_rke2_writes_the_template_that_extends_rke2s_own(tmp_path):
    folder = tmp_path / "rke2" / "agent" / "etc" / "containerd"
    folder.mkdir(parents=True)
    rendered = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  stream_server_port = "10010"\n'
    (folder / "config.toml").write_text(rendered)
    args = {"distribution": "rke2", "data_dir": str(tmp_path / "rke2"), "containerd_version": "v1.7.27-k3s1",
            "distribution_version": "rke2 version v1.30.4+rke2r1 (abc)"}
    failed, result = run(containerd_nri, args)
    assert not failed and result["changed"] and result["restart_required"], result
    assert result["path"] == str(folder / "config.toml.tmpl")
    assert result["rendered_path"] == str(folder / "config.toml")
    assert (folder / "config.toml").read_text() == rendered, "the rendered file is RKE2's to write"
    assert '{{ template "base" . }}' in (folder / "config.toml.tmpl").read_text()
    assert result["service"] in ("rke2-server", "rke2-agent")
    failed, result = run(containerd_nri, dict(args, distribution_version="v1.27.4+rke2r1"))
    assert not failed and not result["changed"], "the template is already in place"
    (folder / "config.toml.tmpl").unlink()
    failed, result = run(containerd_nri, dict(args, distribution_version="v1.27.4+rke2r1"))
    assert failed and "September 2023" in result["msg"] and not (folder / "config.toml.tmpl").exists()


def test_containerd_nri_creates_the_file_and_folder(tmp_path):
    path = tmp_path / "etc" / "containerd" / "config.toml"
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.7.24"})
    assert not failed and result["changed"]
    assert 'disable = false' in path.read_text()


def test_containerd_nri_refuses_old_containerd_and_changes_nothing(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(CONTAINERD_17)
    failed, result = run(containerd_nri, {"path": str(path), "containerd_version": "1.6.20~ds1"})
    assert failed and "needs containerd 1.7 or newer" in result["msg"]
    assert path.read_text() == CONTAINERD_17


def test_containerd_nri_without_containerd_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    failed, result = run(containerd_nri, {"path": str(tmp_path / "config.toml")})
    assert failed and "containerd" in result["msg"]


# kernel_args -------------------------------------------------------------------------------

GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="console=ttyS0"\n'


def test_kernel_args_grub_default_and_reboot_state(tmp_path):
    grub = tmp_path / "grub"
    grub.write_text(GRUB)
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1 console=ttyS0\n")
    args = {"present": ["mem_sampling_on", "numa_icon=enable"], "method": "grub_default",
            "grub_default_path": str(grub), "proc_cmdline_path": str(cmdline)}
    failed, result = run(kernel_args, args, check_mode=True, diff=True)
    assert not failed and result["changed"] and grub.read_text() == GRUB
    failed, result = run(kernel_args, args)
    assert not failed and result["changed"] and result["grub_update_required"] and result["reboot_required"]
    assert 'GRUB_CMDLINE_LINUX="console=ttyS0 mem_sampling_on numa_icon=enable"' in grub.read_text()
    failed, result = run(kernel_args, args)
    assert not failed and not result["changed"] and result["reboot_required"]
    cmdline.write_text("BOOT_IMAGE=/boot/vmlinuz console=ttyS0 mem_sampling_on numa_icon=enable\n")
    failed, result = run(kernel_args, args)
    assert not failed and not result["changed"] and result["active"] and not result["reboot_required"]


def test_kernel_args_refuses_bad_input(tmp_path):
    failed, result = run(kernel_args, {"present": ["a b"], "method": "grub_default"})
    assert failed and "'a b' is refused" in result["msg"]
    failed, result = run(kernel_args, {"present": ["x"], "absent": ["x"], "method": "grub_default"})
    assert failed and "both present and absent" in result["msg"]
    failed, result = run(kernel_args, {"present": ["x"], "method": "grub_default",
                                       "grub_default_path": str(tmp_path / "none")})
    assert failed and "does not exist" in result["msg"]
    grub = tmp_path / "grub"
    grub.write_text('GRUB_CMDLINE_LINUX="$X"\n')
    failed, result = run(kernel_args, {"present": ["x"], "method": "grub_default", "grub_default_path": str(grub)})
    assert failed and grub.read_text() == 'GRUB_CMDLINE_LINUX="$X"\n'


@pytest.mark.parametrize("param", ["a=`touch /tmp/owned`", "a=$(id)", "a;id", 'a=\\"', 'a="; id; "', "a=x y"])
def test_kernel_args_injection_leaves_the_file_unchanged(tmp_path, param):
    grub = tmp_path / "grub"
    grub.write_text(GRUB)
    before = hashlib.sha256(grub.read_bytes()).hexdigest()
    failed, result = run(kernel_args, {"present": [param], "method": "grub_default", "grub_default_path": str(grub)})
    assert failed and repr(param) in result["msg"] and "fix the value" in result["msg"]
    assert hashlib.sha256(grub.read_bytes()).hexdigest() == before


# kubelet_facts and kubelet_health --------------------------------------------------------------

def test_kubelet_facts_on_a_recorded_kubeadm_node(tmp_path):
    config = tmp_path / "var" / "lib" / "kubelet" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(KUBEADM)
    failed, result = run(kubelet_facts, {"root": str(tmp_path), "settings": {"cpuManagerPolicy": "static"}},
                         check_mode=True)
    assert not failed and result["changed"] is False
    node = result["ansible_facts"]["kubelet_node"]
    assert (node["distribution"], node["mode"], node["path"]) == ("kubeadm", "merge", "/var/lib/kubelet/config.yaml")
    assert node["config"]["cgroupDriver"] == "systemd" and node["service_state"] == "unknown"


def test_kubelet_facts_reports_the_files_asked_for_as_stat_would(tmp_path):
    import hashlib
    config = tmp_path / "var" / "lib" / "kubelet" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(KUBEADM)
    guard = tmp_path / "usr" / "local" / "libexec" / "guard"
    guard.parent.mkdir(parents=True)
    guard.write_bytes(b"#!/bin/sh\n")
    guard.chmod(0o700)
    failed, result = run(kubelet_facts, {"root": str(tmp_path), "files": ["/usr/local/libexec/guard", "/etc/none"]},
                         check_mode=True)
    files = result["ansible_facts"]["kubelet_node"]["files"]
    assert not failed and files["/etc/none"] is None, files
    assert files["/usr/local/libexec/guard"] == {"checksum": hashlib.sha1(b"#!/bin/sh\n").hexdigest(), "mode": "0700",
                                                 "uid": os.getuid()}


def test_kubelet_facts_fails_with_every_problem(tmp_path):
    failed, result = run(kubelet_facts, {"root": str(tmp_path)})
    assert failed and "kubelet_distribution" in result["msg"]


def test_kubelet_health_waits_for_nothing_in_check_mode():
    failed, result = run(kubelet_health, {"service": "kubelet"}, check_mode=True)
    assert not failed and result["healthy"] is None and result["changed"] is False


def test_kubelet_config_reports_differs_in_check_mode(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(KUBEADM)
    failed, result = run(kubelet_config, {"path": str(path), "settings": SETTINGS}, check_mode=True)
    assert not failed and result["differs"] is True and path.read_text() == KUBEADM
    failed, result = run(kubelet_config, {"path": str(path), "settings": {"cpuManagerPolicy": "Static"},
                                          "validate": False}, check_mode=True)
    assert not failed and result["differs"] is True


def test_kubelet_health_reads_only_what_a_log_file_gained(tmp_path):
    log = tmp_path / "kubelet.log"
    log.write_text('E1122 09:00:00.000000 1 run.go:72] "command failed" err="old"\n')
    start = kubelet_health_work._size(str(log))
    with open(str(log), "a") as handle:
        handle.write('E1122 10:00:00.000000 1 run.go:72] "command failed" err="new"\n')
    assert "new" in kubelet_health_work._tail(str(log), start) and "old" not in kubelet_health_work._tail(str(log), start)
    log.write_text("E1122 11:00:00.000000 1 x.go:1] rotated\n")  # smaller than before: read it all
    assert "rotated" in kubelet_health_work._tail(str(log), start)
    assert kubelet_health_work._tail(str(tmp_path / "none"), 0) == ""
