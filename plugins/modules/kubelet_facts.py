#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_facts
short_description: Find how a node's kubelet is configured and where numa.kube must change it
version_added: "0.1.0"
description:
  - Detects the Kubernetes distribution of the node (RKE2, k3s, EKS AL2, EKS AL2023, kubeadm) from
    the files each one keeps, or takes it as given, and returns the fact C(kubelet_node) - the
    kubelet service, the file numa.kube changes (a merge into the main configuration, or a
    C(--config-dir) drop-in named C(50-numa-kube.conf)), the files kubelet reads before it, the
    effective configuration in force, C(maxPods), and the CPU and Memory Manager state files
    present.
  - With O(settings), also refuses what would silently undo them - a kubelet flag setting the same
    field (RKE2/k3s C(kubelet-arg), kubeadm's flag files, EKS extra args, or the running kubelet's
    own command line; flags win over files), named with its file and line, or a drop-in that sorts
    after numa.kube's and sets the same field.
  - The effective configuration includes what flags set for C(--kube-reserved),
    C(--system-reserved) and C(--eviction-hard), since kubelet computes the reservation it demands
    from them.
  - Changes nothing on the node.
author:
  - numa.kube contributors (@numa-kube)
options:
  distribution:
    description:
      - The node's distribution; C(auto) detects it.
    type: str
    choices: [auto, kubeadm, rke2, k3s, eks-al2, eks-al2023]
    default: auto
  config_path:
    description:
      - The main kubelet configuration file, when it is not where the distribution keeps it.
    type: path
  config_dir:
    description:
      - The C(--config-dir) kubelet runs with; for kubeadm and EKS AL2 it is otherwise read from
        the kubelet flag files.
    type: path
  settings:
    description:
      - KubeletConfiguration fields numa.kube is about to set, to look for flags or later
        drop-ins that would override them.
    type: dict
    default: {}
  durable_config_dir:
    description:
      - On kubeadm nodes whose kubelet runs without C(--config-dir), a folder to start kubelet with
        as C(--config-dir) (added to C(KUBELET_EXTRA_ARGS) in C(/etc/default/kubelet) or
        C(/etc/sysconfig/kubelet), which kubeadm never writes), so that the settings go into a
        drop-in there that C(kubeadm upgrade) leaves alone; C(kubeadm upgrade node) renders
        C(config.yaml) again from the C(kubelet-config) ConfigMap. Only for kubelet 1.30 or newer, which
        reads drop-ins without a feature gate; older kubelets keep the merge into C(config.yaml).
    type: path
  kubelet_version:
    description:
      - kubelet's version (C(v1.36.3), or the output of C(kubelet --version)); when omitted, read
        from the running kubelet's binary (else the one on the PATH) on the node itself (O(root) C(/)).
    type: str
  files:
    description:
      - Files to report the SHA-1 checksum, mode and owner of (in RV(ansible_facts.kubelet_node.files)),
        such as numa.kube's boot guard, so that a run which finds them as it would write them skips
        writing them - one module run instead of a stat per file.
      - A glob pattern (C(*), C(?), C([)) stands for the files it matches on the node (none when it
        matches nothing), such as a node profile's huge page units.
    type: list
    elements: path
    default: []
  root:
    description:
      - Root folder to read below (for recorded trees in tests); services are not queried unless
        it is C(/).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: The module only reads.
  diff_mode:
    support: none
    description: The module changes nothing.
seealso:
  - module: numa.kube.kubelet_config
"""

EXAMPLES = r"""
- name: Find the node's kubelet
  numa.kube.kubelet_facts:
    settings:
      cpuManagerPolicy: static

- name: A kubeadm node whose kubelet uses a drop-in folder
  numa.kube.kubelet_facts:
    distribution: kubeadm
    config_dir: /etc/kubernetes/kubelet.conf.d

- name: Show where numa.kube will write
  ansible.builtin.debug:
    msg: "{{ kubelet_node.distribution }}: {{ kubelet_node.mode }} {{ kubelet_node.path }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: success
  type: dict
  contains:
    kubelet_node:
      description: The node's kubelet set-up.
      returned: success
      type: dict
      contains:
        distribution:
          description: The distribution found or given.
          type: str
          sample: kubeadm
        eviction_distribution:
          description: The distribution name for M(numa.kube.reserved_memory) (its default eviction).
          type: str
          sample: kubeadm
        control_plane:
          description:
            - Whether the node runs the control plane (kubeadm's API server manifest, or the
              C(rke2-server) / C(k3s) service); C(site.yml) changes such nodes one at a time.
          type: bool
          sample: false
        control_plane_evidence:
          description: What showed it, or an empty string.
          type: str
          sample: static pod manifest /etc/kubernetes/manifests/kube-apiserver.yaml
        service:
          description: The systemd unit to stop and start around a change (kubelet, rke2-agent, k3s, ...).
          type: str
          sample: kubelet
        service_state:
          description: Its systemd ActiveState, or C(unknown) when not queried.
          type: str
          sample: active
        mode:
          description: C(merge) into O(config_path), or C(dropin) next to it.
          type: str
          sample: merge
        path:
          description: The file numa.kube writes.
          type: str
          sample: /var/lib/kubelet/config.yaml
        base_paths:
          description: Files kubelet reads before a drop-in (main configuration, earlier drop-ins).
          type: list
          elements: str
          sample: [/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf]
        config_dir:
          description: The drop-in folder, or null.
          type: str
          sample: null
        flag_file:
          description:
            - The environment file whose C(KUBELET_EXTRA_ARGS) must gain C(--config-dir) (see
              O(durable_config_dir)), or null when kubelet already runs with the folder.
          type: str
          sample: /etc/default/kubelet
        flag_file_text:
          description: What that file must hold, or null.
          type: str
          sample: KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"
        config:
          description: The effective configuration in force now (every file merged in kubelet's order).
          type: dict
          sample: {cpuManagerPolicy: none, maxPods: 110}
        max_pods:
          description: maxPods from the configuration, or null.
          type: int
          sample: 29
        state_dir:
          description: Where kubelet keeps its state files.
          type: str
          sample: /var/lib/kubelet
        state_files:
          description: The CPU and Memory Manager state files present.
          type: list
          elements: str
          sample: [cpu_manager_state]
        health_url:
          description: kubelet's health endpoint.
          type: str
          sample: http://127.0.0.1:10248/healthz
        health_process:
          description:
            - The name of kubelet's own process when it is a child of the service (RKE2), whose
              process ID tells a restart; empty when the service's main process is kubelet itself
              or runs it inside (kubeadm, EKS, k3s).
          type: str
          sample: kubelet
        log_file:
          description: The file kubelet logs to when not the service's journal (RKE2), else empty.
          type: str
          sample: /var/lib/rancher/rke2/agent/logs/kubelet.log
        version:
          description:
            - kubelet's version (C(1.36.3)), from O(kubelet_version) or from the running kubelet's
              binary (else the one on the PATH) with C(--version); null where neither tells (k3s runs
              kubelet inside its own process).
          type: str
          sample: 1.36.3
        files:
          description:
            - For each path of O(files), its C(checksum) (SHA-1 of the bytes, as M(ansible.builtin.stat)
              gives it), C(mode) (octal string) and C(uid), or null when it is not a regular file.
          type: dict
          sample: {/etc/systemd/system/kubelet.service.d/50-numa-kube-memory-state.conf: {checksum: f0de2e90, mode: "0600", uid: 0}}
problems:
  description: On failure, every problem found, one per item.
  returned: failure
  type: list
  elements: str
"""

import hashlib
import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import (
    KubeletNodeError,
    NodeFiles,
    listed_paths,
    parse_kubelet_version,
    read_node,
    running_process,
)


def _file_summary(path):
    """SHA-1, mode and owner of a regular file (not followed through a link), or None."""
    try:
        found = os.lstat(path)
        if not stat.S_ISREG(found.st_mode):
            return None
        digest = hashlib.sha1()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(65536), b""):
                digest.update(chunk)
    except (IOError, OSError):
        return None
    return {"checksum": digest.hexdigest(), "mode": "%04o" % stat.S_IMODE(found.st_mode), "uid": found.st_uid}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            distribution=dict(type="str", default="auto",
                              choices=["auto", "kubeadm", "rke2", "k3s", "eks-al2", "eks-al2023"]),
            config_path=dict(type="path"),
            config_dir=dict(type="path"),
            settings=dict(type="dict", default={}),
            durable_config_dir=dict(type="path"),
            kubelet_version=dict(type="str"),
            files=dict(type="list", elements="path", default=[]),
            root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    params = module.params

    def service_states(names):
        states = {}
        for name in names:
            rc, out, _err = module.run_command(["systemctl", "show", "-p", "LoadState,ActiveState", name + ".service"])
            values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
            states[name] = values.get("ActiveState", "") if rc == 0 and values.get("LoadState") == "loaded" else ""
        return states

    running = running_process("kubelet", os.path.join(params["root"], "proc"))
    version_text = params["kubelet_version"]
    if not version_text and params["root"] == "/":
        binary = running[1][0] if running and os.path.isabs(running[1][0]) else module.get_bin_path("kubelet")
        if binary:
            version_text = module.run_command([binary, "--version"])[1]
    version = parse_kubelet_version(version_text)
    try:
        node = read_node(NodeFiles(params["root"]), params["distribution"],
                         {"config_path": params["config_path"], "config_dir": params["config_dir"],
                          "durable_dir": params["durable_config_dir"],
                          "kubelet_version": version},
                         params["settings"], service_states if params["root"] == "/" else None, running)
    except KubeletNodeError as exc:
        module.fail_json(msg=" | ".join(exc.problems), problems=exc.problems)
    node["version"] = ".".join(str(part) for part in version) if version else None
    node["files"] = dict((path, _file_summary(os.path.join(params["root"], path.lstrip("/"))))
                         for path in listed_paths(params["root"], params["files"]))
    module.exit_json(changed=False, ansible_facts={"kubelet_node": node})


if __name__ == "__main__":
    main()
