# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that write EKS user data: a nodeadm NodeConfig (AL2023), its MIME multi-part document,
and the kubelet flags of bootstrap.sh --kubelet-extra-args (AL2), the Memory Manager reservation
computed for the instance type's max pods."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.kubelet.eks_user_data import (
    EksUserDataError,
    bootstrap_kubelet_extra_args,
    node_config,
    user_data,
)


def _fail(name, exc):
    raise AnsibleFilterError("numa.kube.%s: %s" % (name, " | ".join(exc.problems)))


def eks_node_config(settings, max_pods=None, numa_nodes=None, numa_node_memory=None, memory_capacity=None,
                    cpu_count=None, placement="spread", placement_node=None, flags=None, cluster=None):
    try:
        return node_config(settings, max_pods=max_pods, numa_nodes=numa_nodes, numa_node_memory=numa_node_memory,
                           memory_capacity=memory_capacity, cpu_count=cpu_count, placement=placement,
                           placement_node=placement_node, flags=flags, cluster=cluster)
    except EksUserDataError as exc:
        _fail("eks_node_config", exc)


def eks_user_data(parts):
    try:
        return user_data(parts)
    except EksUserDataError as exc:
        _fail("eks_user_data", exc)


def eks_kubelet_extra_args(settings, max_pods=None, numa_nodes=None, numa_node_memory=None, memory_capacity=None,
                           cpu_count=None, placement="spread", placement_node=None):
    try:
        return bootstrap_kubelet_extra_args(settings, max_pods=max_pods, numa_nodes=numa_nodes,
                                            numa_node_memory=numa_node_memory, memory_capacity=memory_capacity,
                                            cpu_count=cpu_count, placement=placement, placement_node=placement_node)
    except EksUserDataError as exc:
        _fail("eks_kubelet_extra_args", exc)


class FilterModule(object):
    """numa.kube filters for EKS user data."""

    def filters(self):
        return {
            "eks_node_config": eks_node_config,
            "eks_user_data": eks_user_data,
            "eks_kubelet_extra_args": eks_kubelet_extra_args,
        }
