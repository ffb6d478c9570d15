# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/eks_user_data.yml on the EKS example inventories: the user data it writes on the
controller, read back as EKS reads it, carries the inventory's settings and a reservation that
adds up for the inventory's max pods; a second run changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email
import json
import os
import stat
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 2 ** 20


def run(tmp_path, inventory, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".venv", "collections"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
               "-i", os.path.join(ROOT, "inventories", inventory), os.path.join(ROOT, "playbooks", "eks_user_data.yml"),
               "-e", "eks_user_data_dir=%s" % tmp_path] + list(extra)
    done = subprocess.run(command, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def changed(stdout):
    return json.loads(stdout)["stats"]


def mebibytes(text):
    assert text.endswith("Mi"), text
    return int(text[:-2])


def test_al2023_inventory_gives_a_nodeconfig_mime_document(tmp_path):
    layout = json.dumps({"eks_user_data_numa_node_memory": {"0": "32Gi", "1": "32Gi"}})
    code, out, err = run(tmp_path, "eks-al2023", "-e", layout)
    assert code == 0, out + err
    with open(str(tmp_path / "user-data.mime")) as handle:
        message = email.message_from_string(handle.read())
    assert message.get_content_type() == "multipart/mixed" and not message.defects
    (part,) = message.get_payload()
    assert part.get_content_type() == "application/node.eks.aws"
    config = yaml.safe_load(part.get_payload())
    assert config["apiVersion"] == "node.eks.aws/v1alpha1" and config["kind"] == "NodeConfig"
    kubelet = config["spec"]["kubelet"]["config"]
    # the inventory's policy, the role's defaults for the rest
    assert kubelet["cpuManagerPolicy"] == "static" and kubelet["memoryManagerPolicy"] == "Static"
    assert kubelet["topologyManagerPolicy"] == "single-numa-node"
    assert "reservedSystemCPUs" not in kubelet
    # kubelet_eks_max_pods 58: 11 * 58 + 255 MiB, plus nodeadm's 100Mi threshold, spread over both nodes
    assert kubelet["kubeReserved"] == {"memory": "893Mi"}
    assert sorted(e["numaNode"] for e in kubelet["reservedMemory"]) == [0, 1]
    assert sum(mebibytes(e["limits"]["memory"]) for e in kubelet["reservedMemory"]) == 893 + 100
    code, out, err = run(tmp_path, "eks-al2023", "-e", layout)
    assert code == 0 and not any(host["changed"] for host in changed(out).values()), out + err


def test_al2_inventory_gives_bootstrap_flags(tmp_path):
    code, out, err = run(tmp_path, "eks-al2", "-e", "eks_user_data_cpu_count=4")
    assert code == 0, out + err
    with open(str(tmp_path / "kubelet-extra-args")) as handle:
        words = handle.read().split()
    flags = dict(word[2:].split("=", 1) for word in words)
    assert flags["topology-manager-policy"] == "single-numa-node"
    assert flags["kube-reserved"] == "cpu=80m,ephemeral-storage=1Gi,memory=893Mi"
    assert flags["reserved-memory"] == "0:memory=993Mi"


def test_al2_without_the_cpu_count_stops_naming_the_fix(tmp_path):
    code, out, err = run(tmp_path, "eks-al2")
    assert code != 0
    assert "numa.kube.eks_kubelet_extra_args" in out and "give cpu_count" in out
    assert not os.path.exists(str(tmp_path / "kubelet-extra-args"))


def test_a_folder_that_does_not_exist_yet_is_made_private_and_an_existing_one_keeps_its_mode(tmp_path):
    """The new-user walk: the documented command failed on a fresh controller, the folder not being there."""
    target = tmp_path / "new" / "ud"
    code, out, err = run(tmp_path, "eks-al2023", "-e", "eks_user_data_dir=%s" % target)
    assert code == 0, out + err
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(str(target / "user-data.mime")).st_mode) == 0o600
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o755)
    code, out, err = run(tmp_path, "eks-al2", "-e", "eks_user_data_cpu_count=4", "-e", "eks_user_data_dir=%s" % shared)
    assert code == 0, out + err
    assert stat.S_IMODE(os.stat(str(shared)).st_mode) == 0o755, "an existing folder keeps its mode"
    assert (shared / "kubelet-extra-args").exists()
