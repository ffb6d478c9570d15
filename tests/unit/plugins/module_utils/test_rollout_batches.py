# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's batches match what ansible-core's serial makes of the same value."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.executor.playbook_executor import PlaybookExecutor

from ansible_collections.numa.kube.plugins.filter.rollout_batches import rollout_batch_problems, rollout_batches
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_batches as batches


class _Inventory(object):
    def __init__(self, count):
        self.hosts = ["h%04d" % index for index in range(count)]

    def get_hosts(self, _pattern, order=None):
        return list(self.hosts)


class _Play(object):
    hosts, order = "all", None

    def __init__(self, serial):
        self.serial = serial


def ansible_sizes(serial, count):
    """What ansible-core itself makes of ``serial`` (already post-validated to a list)."""
    executor = PlaybookExecutor.__new__(PlaybookExecutor)
    executor._inventory = _Inventory(count)
    return [len(batch) for batch in executor._get_serialized_batches(_Play(serial))]


@pytest.mark.parametrize("value", [1, 3, "10", "5%", "100%", [1, "5%", "20%"], [2, 5], ["1%"], [1, "50%", 7]])
@pytest.mark.parametrize("count", [1, 7, 10, 100, 1000])
def test_sizes_are_ansibles_own(value, count):
    serial = value if isinstance(value, list) else [value]
    assert batches.sizes(value, count) == ansible_sizes(serial, count)
    assert sum(batches.sizes(value, count)) == count


def test_a_ramp_on_a_thousand_workers():
    assert batches.sizes([1, "5%", "20%"], 1000) == [1, 50, 200, 200, 200, 200, 149]
    # a percentage smaller than one node is one node, as in Ansible
    assert batches.sizes("5%", 10) == [1] * 10


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "", "abc", "0%", "101%", "5 %", [], [1, 0], {"a": 1}, None,
                                   [1, "x"], "5% ", "5%\n", " 5%", "3 ", [1, "20%\t"], "\u0665", "5%%", "+5"])
def test_values_serial_would_refuse_or_misread_are_named_with_the_rule(value):
    found = batches.problems(value)
    assert len(found) == 1 and repr(value) in found[0] and "a whole number of nodes" in found[0], found
    with pytest.raises(ValueError):
        batches.sizes(value, 10)


def test_the_filters():
    assert rollout_batches([1, "50%"], "4") == [1, 2, 1]
    assert rollout_batch_problems(5) == []
    assert "numa_kube_batch_size is 0" in rollout_batch_problems(0)[0]
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="numa.kube.rollout_batches: numa_kube_batch_size is 'x'"):
        rollout_batches("x", 3)


@pytest.mark.parametrize("value", ["5% ", "5%\n", "3 ", "3\n"])
def test_a_value_ansible_core_cannot_read_is_refused_as_it_is_given(value):
    """Hostile review: "5% " and "5%\n" passed the preflight (it stripped them), then ansible-core's
    serial, which does not, failed with a traceback."""
    from ansible.utils.helpers import pct_to_int
    try:
        pct_to_int(value, 10)
        readable = True
    except ValueError:
        readable = False
    assert batches.problems(value), "refused, whether or not ansible-core reads it (readable: %s)" % readable
    assert "without spaces or line breaks" in batches.problems(value)[0]
