# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that read containerd configurations."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    ContainerdConfigError,
    nri_disabled,
    parse_containerd_version,
)


def containerd_nri_enabled(config_text, containerd_version=None):
    version = None
    if containerd_version:
        try:
            version = parse_containerd_version(str(containerd_version))
        except ContainerdConfigError as exc:
            raise AnsibleFilterError("numa.kube.containerd_nri_enabled: %s" % exc)
    disabled = nri_disabled(config_text, version)
    if disabled is None:
        raise AnsibleFilterError("numa.kube.containerd_nri_enabled: the configuration has no NRI disable setting; "
                                 "pass the containerd version so its default can decide")
    return not disabled


class FilterModule(object):
    """numa.kube containerd filters."""

    def filters(self):
        return {"containerd_nri_enabled": containerd_nri_enabled}
