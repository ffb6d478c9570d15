# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Distribution detection and the files numa.kube writes for each, on recorded node trees."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import (
    DROPIN_NAME,
    KubeletNodeError,
    NodeFiles,
    config_dir_from_flags,
    flag_conflicts,
    launcher_kubelet_args,
    parse_kubelet_version,
    pick_service,
    read_node,
    running_process,
    with_config_dir,
)

KUBEADM_CONFIG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"


def tree(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as handle:
            handle.write(text)
    return NodeFiles(str(root))


def test_kubeadm_merges_into_config_yaml(tmp_path):
    files = tree(tmp_path, {"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG,
                            "/var/lib/kubelet/cpu_manager_state": "{}"})
    node = read_node(files)
    assert node["distribution"] == "kubeadm" and node["mode"] == "merge"
    assert node["path"] == "/var/lib/kubelet/config.yaml" and node["service"] == "kubelet"
    assert node["max_pods"] == 110 and node["state_files"] == ["cpu_manager_state"]
    assert node["eviction_distribution"] == "kubeadm"


def test_kubeadm_with_config_dir_from_flags_writes_a_dropin_after_earlier_ones(tmp_path):
    files = tree(tmp_path, {
        "/var/lib/kubelet/config.yaml": KUBEADM_CONFIG,
        "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d '
                                              '--container-runtime-endpoint=unix:///run/containerd/containerd.sock"\n',
        "/etc/kubernetes/kubelet.conf.d/10-site.conf": "maxPods: 50\n",
    })
    node = read_node(files)
    assert node["mode"] == "dropin"
    assert node["path"] == "/etc/kubernetes/kubelet.conf.d/" + DROPIN_NAME
    assert node["base_paths"] == ["/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet.conf.d/10-site.conf"]
    assert node["max_pods"] == 50  # the drop-in wins over config.yaml, as in kubelet


DURABLE = "/etc/kubernetes/kubelet.conf.d"


@pytest.mark.parametrize("version, extra, flag_file", [
    ((1, 36, 3), None, "/etc/sysconfig/kubelet"),  # neither file, not Debian: RHEL's
    ((1, 30, 0), 'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5"\n', "/etc/default/kubelet"),
])
def test_kubeadm_settings_go_into_a_drop_in_kubeadm_upgrades_leave_alone(tmp_path, version, extra, flag_file):
    given = {"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG}
    if extra:
        given["/etc/default/kubelet"] = extra
    node = read_node(tree(tmp_path, given), overrides={"durable_dir": DURABLE, "kubelet_version": version})
    assert node["mode"] == "dropin" and node["path"] == DURABLE + "/" + DROPIN_NAME
    assert node["base_paths"] == ["/var/lib/kubelet/config.yaml"] and node["max_pods"] == 110
    assert node["flag_file"] == flag_file
    expected = ("--node-ip=10.0.0.5 " if extra else "") + "--config-dir=" + DURABLE
    assert node["flag_file_text"] == 'KUBELET_EXTRA_ARGS="%s"\n' % expected


@pytest.mark.parametrize("overrides", [
    {"durable_dir": DURABLE, "kubelet_version": (1, 29, 9)},   # drop-ins need a feature gate before 1.30
    {"durable_dir": DURABLE, "kubelet_version": None},         # kubelet not found: keep what works everywhere
    {"durable_dir": None, "kubelet_version": (1, 36, 3)},      # asked for the merge
])
def test_kubeadm_keeps_the_merge_where_a_drop_in_would_not_be_read(tmp_path, overrides):
    node = read_node(tree(tmp_path, {"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG}), overrides=overrides)
    assert node["mode"] == "merge" and node["flag_file"] is None


def test_a_node_already_started_with_the_folder_needs_no_flag(tmp_path):
    node = read_node(tree(tmp_path, {"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG,
                                     "/etc/default/kubelet": with_config_dir("", DURABLE)}),
                     overrides={"durable_dir": DURABLE, "kubelet_version": (1, 36, 3)})
    assert node["mode"] == "dropin" and node["flag_file"] is None and node["config_dir"] == DURABLE


def test_flag_file_edits_keep_the_users_lines_and_quoting_apart():
    text = "# site flags\nKUBELET_EXTRA_ARGS=--v=2\nOTHER=1\n"
    assert with_config_dir(text, "/d") == '# site flags\nKUBELET_EXTRA_ARGS="--v=2 --config-dir=/d"\nOTHER=1\n'
    assert with_config_dir("KUBELET_EXTRA_ARGS=''\n", "/d") == 'KUBELET_EXTRA_ARGS="--config-dir=/d"\n'
    assert with_config_dir("#KUBELET_EXTRA_ARGS=--x\n", "/d") == '#KUBELET_EXTRA_ARGS=--x\nKUBELET_EXTRA_ARGS="--config-dir=/d"\n'
    with pytest.raises(KubeletNodeError, match="line 2 of the kubelet flags file"):
        with_config_dir("# x\nKUBELET_EXTRA_ARGS=--v=2 --node-ip=10.0.0.5\n", "/d")
    assert parse_kubelet_version("Kubernetes v1.36.3\n") == (1, 36, 3) and parse_kubelet_version("") is None
    # the last --config-dir reaching the command line wins, as kubelet reads it
    assert config_dir_from_flags(['A="--config-dir=/a"', 'B="--config-dir=/b"']) == "/b"


def test_rke2_dropin_and_conflicting_kubelet_arg(tmp_path):
    files = tree(tmp_path, {
        "/etc/rancher/rke2/config.yaml": "kubelet-arg:\n  - max-pods=200\n",
        "/etc/rancher/rke2/config.yaml.d/20-numa.yaml": "kubelet-arg+:\n  - cpu-manager-policy=none\n",
        "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf": "evictionHard:\n  imagefs.available: 5%\n",
    })
    node = read_node(files, settings={"topologyManagerPolicy": "restricted"},
                     service_states=lambda names: {"rke2-agent": "", "rke2-server": "active"})
    assert node["distribution"] == "rke2" and node["service"] == "rke2-server"
    assert node["path"].endswith("/agent/etc/kubelet.conf.d/" + DROPIN_NAME)
    assert node["eviction_distribution"] == "rke2"
    with pytest.raises(KubeletNodeError) as caught:
        read_node(files, settings={"cpuManagerPolicy": "static"})
    assert "cpu-manager-policy=none" in caught.value.problems[0]
    assert "remove that flag" in caught.value.problems[0]


def test_an_rke2_dropin_whose_suffix_is_in_capitals_is_read_as_rke2_reads_it(tmp_path):
    files = tree(tmp_path, {
        "/etc/rancher/rke2/config.yaml": "token: x\n",
        "/etc/rancher/rke2/config.yaml.d/30-TUNING.YAML": "kubelet-arg+:\n  - cpu-manager-policy=none\n",
        "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf": "evictionHard:\n  imagefs.available: 5%\n",
    })
    with pytest.raises(KubeletNodeError) as caught:
        read_node(files, settings={"cpuManagerPolicy": "static"},
                  service_states=lambda names: {"rke2-agent": "active", "rke2-server": ""})
    assert "cpu-manager-policy=none" in caught.value.problems[0]


def test_a_later_dropin_setting_the_same_field_is_refused(tmp_path):
    files = tree(tmp_path, {
        "/etc/rancher/k3s/config.yaml": "",
        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf": "{}\n",
        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/90-site.conf": "cpuManagerPolicy: none\n",
    })
    with pytest.raises(KubeletNodeError) as caught:
        read_node(files, settings={"cpuManagerPolicy": "static"})
    assert "90-site.conf sets cpuManagerPolicy" in caught.value.problems[0]
    assert read_node(files, settings={"memoryManagerPolicy": "Static"})["distribution"] == "k3s"


def test_eks_al2_json_and_al2023_dropin(tmp_path):
    al2 = tree(tmp_path / "al2", {"/etc/kubernetes/kubelet/kubelet-config.json": json.dumps({"maxPods": 29})})
    node = read_node(al2)
    assert (node["distribution"], node["mode"], node["max_pods"]) == ("eks-al2", "merge", 29)
    assert node["eviction_distribution"] == "eks"
    al2023 = tree(tmp_path / "al2023", {
        "/usr/bin/nodeadm": "",
        "/etc/kubernetes/kubelet/config.json": json.dumps({"maxPods": 110}),
        "/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf": json.dumps({"maxPods": 58}),
    })
    node = read_node(al2023)
    assert node["distribution"] == "eks-al2023" and node["mode"] == "dropin" and node["max_pods"] == 58
    assert node["base_paths"][-1].endswith("40-nodeadm.conf")


def test_nothing_found_or_missing_config_says_what_to_set(tmp_path):
    with pytest.raises(KubeletNodeError) as caught:
        read_node(NodeFiles(str(tmp_path)))
    assert "kubelet_distribution" in str(caught.value)
    with pytest.raises(KubeletNodeError) as caught:
        read_node(NodeFiles(str(tmp_path)), distribution="kubeadm")
    assert "/var/lib/kubelet/config.yaml does not exist" in str(caught.value)
    with pytest.raises(KubeletNodeError):
        read_node(NodeFiles(str(tmp_path)), distribution="talos")


def test_helpers():
    assert config_dir_from_flags(["", 'ARGS="--v=2 --config-dir /etc/k/d"']) == "/etc/k/d"
    assert config_dir_from_flags(["--v=2"]) is None
    assert launcher_kubelet_args([("a", {"kubelet-arg": ["a=1"]}), ("b", {"kubelet-arg+": "b=2"}),
                                  ("c", None)]) == ["a=1", "b=2"]
    assert launcher_kubelet_args([("a", {"kubelet-arg": ["a=1"]}), ("b", {"kubelet-arg": ["c=3"]})]) == ["c=3"]
    # one file read in its own order, as k3s's parser reads it: an append before a replace is lost
    assert launcher_kubelet_args([("a", {"kubelet-arg+": ["a=1"], "kubelet-arg": ["c=3"]})]) == ["c=3"]
    assert launcher_kubelet_args([("a", {"kubelet-arg": ["c=3"], "kubelet-arg+": ["a=1"]})]) == ["c=3", "a=1"]
    assert flag_conflicts(["--reserved-cpus=0", "max-pods=3"], {"reservedSystemCPUs": "0"}) == [
        ("--reserved-cpus=0", "reservedSystemCPUs")]
    # a misspelled field is the configuration check's to name (with its suggestion), and a field with
    # no flag cannot be overridden by one: neither stops the search for conflicts
    settings = {"topologyManagerScop": "pod", "topologyManagerPolicyOptions": {}}
    assert flag_conflicts(["--topology-manager-scope=pod"], settings) == []
    assert pick_service(["rke2-agent", "rke2-server"], {"rke2-agent": "inactive", "rke2-server": ""}) == "rke2-agent"
    assert pick_service(["kubelet"], {}) is None


@pytest.mark.parametrize("files,states,evidence", [
    ({"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG}, {}, ""),
    ({"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG, "/etc/kubernetes/manifests/kube-apiserver.yaml": "kind: Pod\n"},
     {}, "static pod manifest /etc/kubernetes/manifests/kube-apiserver.yaml"),
    ({"/etc/rancher/rke2/config.yaml": "{}\n"}, {"rke2-server": "active"}, "kubelet runs under the rke2-server service"),
    ({"/etc/rancher/rke2/config.yaml": "{}\n"}, {"rke2-agent": "active"}, ""),
    ({"/etc/rancher/k3s/config.yaml": "{}\n"}, {"k3s": "active"}, "kubelet runs under the k3s service"),
    ({"/etc/rancher/k3s/config.yaml": "{}\n"}, {"k3s-agent": "active"}, ""),
])
def test_control_plane_nodes_are_recognised(tmp_path, files, states, evidence):
    node = read_node(tree(tmp_path, files), service_states=lambda names: dict((n, states.get(n, "")) for n in names))
    assert node["control_plane"] is bool(evidence)
    assert node["control_plane_evidence"] == evidence


def test_flags_in_files_and_on_the_command_line_are_named_with_where_they_are(tmp_path):
    files = tree(tmp_path, {
        "/var/lib/kubelet/config.yaml": KUBEADM_CONFIG,
        "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.1"\n',
        "/etc/default/kubelet": "# extra\nKUBELET_EXTRA_ARGS=--reserved-memory=0:memory=1Gi\n",
    })
    running = (4242, ["/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--cpu-manager-policy", "none"])
    with pytest.raises(KubeletNodeError) as caught:
        read_node(files, settings={"cpuManagerPolicy": "static", "reservedMemory": []}, running=running)
    problems = caught.value.problems
    assert any("--reserved-memory=0:memory=1Gi is set in /etc/default/kubelet line 2" in p for p in problems), problems
    assert any("--cpu-manager-policy=none is set in the running kubelet's command line (pid 4242)" in p
               for p in problems), problems


def test_reservation_flags_are_part_of_the_effective_configuration(tmp_path):
    """kubelet demands kube-reserved + system-reserved + eviction-hard as its flags set them: the
    reservation numa.kube computes must start from those values, not from the files alone."""
    files = tree(tmp_path, {"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG + "kubeReserved:\n  memory: 1Gi\n"})
    running = (7, ["kubelet", "--kube-reserved=cpu=500m,memory=2Gi", "--eviction-hard",
                   "memory.available<500Mi,nodefs.available<10%", "--system-reserved=memory=256Mi"])
    node = read_node(files, settings={"cpuManagerPolicy": "static"}, running=running)
    assert node["config"]["kubeReserved"] == {"cpu": "500m", "memory": "2Gi"}
    assert node["config"]["evictionHard"] == {"memory.available": "500Mi", "nodefs.available": "10%"}
    assert node["config"]["systemReserved"] == {"memory": "256Mi"}


def test_rke2_kubelet_arg_reservation_counts_too(tmp_path):
    files = tree(tmp_path, {"/etc/rancher/rke2/config.yaml": "kubelet-arg:\n  - eviction-hard=memory.available<1Gi\n"})
    node = read_node(files, service_states=lambda names: {"rke2-agent": "active"})
    assert node["config"]["evictionHard"] == {"memory.available": "1Gi"}
    # rke2's kubelet is a child process with a log file of its own: health is read there
    assert node["health_process"] == "kubelet"
    assert node["log_file"] == "/var/lib/rancher/rke2/agent/logs/kubelet.log"


@pytest.mark.parametrize("files,states", [
    ({"/var/lib/kubelet/config.yaml": KUBEADM_CONFIG}, {}),
    ({"/etc/rancher/k3s/config.yaml": "{}\n"}, {"k3s-agent": "active"}),
])
def test_kubeadm_and_k3s_health_comes_from_the_unit(tmp_path, files, states):
    node = read_node(tree(tmp_path, files), service_states=lambda names: dict((n, states.get(n, "")) for n in names))
    assert node["health_process"] == "" and node["log_file"] == ""


def test_the_running_kubelet_is_found_by_its_name(tmp_path):
    for pid, comm, cmdline in ((10, "systemd", b"/sbin/init\0"), (31, "kubelet", b"/usr/bin/kubelet\0--v=2\0")):
        folder = tmp_path / str(pid)
        folder.mkdir()
        (folder / "comm").write_text(comm + "\n")
        (folder / "cmdline").write_bytes(cmdline)
    (tmp_path / "self").mkdir()
    assert running_process("kubelet", str(tmp_path)) == (31, ["/usr/bin/kubelet", "--v=2"])
    assert running_process("kubelet", str(tmp_path / "missing")) is None
