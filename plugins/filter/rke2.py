# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that write the lablabs rke2 role's variables: rke2_kubelet_arg entries and
rke2_server_options / rke2_agent_options lines, as YAML that role can write unchanged."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.kubelet.rke2 import (
    Rke2ConfigError,
    kubelet_arg_items,
    option_line,
)


def rke2_kubelet_arg(settings):
    try:
        return kubelet_arg_items(settings)
    except Rke2ConfigError as exc:
        raise AnsibleFilterError("numa.kube.rke2_kubelet_arg: %s" % exc)


def rke2_option(name, value):
    try:
        return option_line(name, value)
    except Rke2ConfigError as exc:
        raise AnsibleFilterError("numa.kube.rke2_option: %s" % exc)


class FilterModule(object):
    """numa.kube filters for the lablabs rke2 role's variables."""

    def filters(self):
        return {
            "rke2_kubelet_arg": rke2_kubelet_arg,
            "rke2_option": rke2_option,
        }
