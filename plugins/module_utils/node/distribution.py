# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Kubernetes distribution runs a node, told by the files each one leaves: the kubelet
modules and containerd's NRI change read it the same way.

``MARKERS`` lists (distribution, path) pairs, most specific first; ``detect_distribution(exists)``
returns the first distribution whose path ``exists(path)`` says is there, or None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# What marks a distribution on a node, most specific first.
MARKERS = (
    ("rke2", "/etc/rancher/rke2"),
    ("rke2", "/var/lib/rancher/rke2"),
    ("k3s", "/etc/rancher/k3s"),
    ("k3s", "/var/lib/rancher/k3s"),
    ("eks-al2023", "/etc/eks/nodeadm"),
    ("eks-al2023", "/usr/bin/nodeadm"),
    ("eks-al2", "/etc/kubernetes/kubelet/kubelet-config.json"),
    ("kubeadm", "/var/lib/kubelet/config.yaml"),
)


def detect_distribution(exists):
    """The distribution whose marker exists first, or None; ``exists(path)`` tells."""
    for name, marker in MARKERS:
        if exists(marker):
            return name
    return None
