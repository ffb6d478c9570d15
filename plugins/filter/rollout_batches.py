# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The batches of a node rollout (numa_kube_batch_size), as Ansible's serial makes them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.module_utils.node import rollout_batches as batches


def _plain(value):
    # templated values may come wrapped (tagged str/int, lazy lists): plain Python for the checks
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "items"):
        return dict(value)
    return value


def rollout_batches(value, total):
    try:
        return batches.sizes(_plain(value), int(total))
    except ValueError as error:
        raise AnsibleFilterError("numa.kube.rollout_batches: %s" % error)


def rollout_batch_problems(value, name="numa_kube_batch_size"):
    return batches.problems(_plain(value), name)


class FilterModule(object):
    """numa.kube filters for a rollout's batches."""

    def filters(self):
        return {"rollout_batches": rollout_batches, "rollout_batch_problems": rollout_batch_problems}
