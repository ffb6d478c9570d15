# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters about the owner of a node's rollout record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner


def rollout_owner_gone(owner):
    if owner is None:
        return True
    if not hasattr(owner, "get") or not hasattr(owner, "items"):
        raise AnsibleFilterError("numa.kube.rollout_owner_gone: the owner must be a mapping (the owner result of "
                                 "numa.kube.rollout_state), not %r" % (owner,))
    return rollout_owner.owner_gone(dict(owner))


class FilterModule(object):
    """numa.kube rollout filters."""

    def filters(self):
        return {"rollout_owner_gone": rollout_owner_gone}
