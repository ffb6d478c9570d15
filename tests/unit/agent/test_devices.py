# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin's device names and preferred allocation (its gRPC side runs on the VMs)."""

from __future__ import absolute_import, division, print_function

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.devices import device_ids, preferred  # noqa: E402 pylint: disable=wrong-import-position


def test_device_names_sort_as_numbers_and_are_unique_per_node():
    names = device_ids(1, 100)
    assert names[0] == "numa-1-00" and names[-1] == "numa-1-99" and len(set(names)) == 100
    assert sorted(names) == names
    assert device_ids(0, 1) == ["numa-0-0"]
    assert not set(device_ids(0, 10)) & set(device_ids(1, 10))


def test_preferred_takes_the_required_devices_then_the_lowest_free_ones():
    free = ["numa-0-3", "numa-0-1", "numa-0-2"]
    assert preferred(free, [], 2) == ["numa-0-1", "numa-0-2"]
    assert preferred(free, ["numa-0-3"], 2) == ["numa-0-3", "numa-0-1"]
    assert preferred(free, ["numa-0-3", "numa-0-2"], 1) == ["numa-0-3"]
    assert preferred(free, [], 5) == ["numa-0-1", "numa-0-2", "numa-0-3"]
