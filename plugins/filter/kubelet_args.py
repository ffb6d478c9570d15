# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn KubeletConfiguration settings into kubelet flags."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.kubelet.args import (
    KubeletArgsError,
    kubelet_arg_list,
    kubelet_extra_args,
)


def kubelet_arg(settings):
    try:
        return kubelet_arg_list(settings)
    except KubeletArgsError as exc:
        raise AnsibleFilterError("numa.kube.kubelet_arg: %s" % exc)


def kubelet_extra_args_filter(settings, quote=False):
    try:
        return kubelet_extra_args(settings, quote=quote)
    except KubeletArgsError as exc:
        raise AnsibleFilterError("numa.kube.kubelet_extra_args: %s" % exc)


class FilterModule(object):
    """numa.kube kubelet flag filters."""

    def filters(self):
        return {
            "kubelet_arg": kubelet_arg,
            "kubelet_extra_args": kubelet_extra_args_filter,
        }
