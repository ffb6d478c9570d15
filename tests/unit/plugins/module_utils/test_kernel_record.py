# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What numa.kube records about the kernel parameters it set, and how it takes them back out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.kernel_args import (
    apply_params,
    change_of,
    check_record,
    check_record_where,
    merge_record,
    plan_withdraw,
    where_of,
)

USER = ["ro", "quiet", "numa_balancing=enable"]


def change(before, present=(), absent=()):
    after = apply_params(before, present, absent)
    return after, change_of([before], [after])


def test_only_what_was_not_there_is_added():
    after, (added, removed) = change(USER, present=["quiet", "mem_sampling_on", "numa_icon=enable"])
    assert added == ["mem_sampling_on", "numa_icon=enable"], "quiet was the user's"
    assert removed == []


def test_a_replaced_value_is_removed_in_its_previous_form():
    after, (added, removed) = change(USER, present=["numa_balancing=disable"])
    assert (added, removed) == (["numa_balancing=disable"], ["numa_balancing=enable"])


def test_a_later_change_is_merged_and_cancels_out():
    added, removed = merge_record(None, ["numa_icon=enable"], [])
    # a second run with another value: the first value numa.kube set is forgotten, not "removed"
    added, removed = merge_record({"added": added, "removed": removed}, ["numa_icon=on"], ["numa_icon=enable"])
    assert (added, removed) == (["numa_icon=on"], [])
    # numa.kube removes a user's parameter, then puts it back: nothing is left to undo
    added, removed = merge_record({"added": added, "removed": removed}, [], ["quiet"])
    assert removed == ["quiet"]
    added, removed = merge_record({"added": added, "removed": removed}, ["quiet"], [])
    assert (added, removed) == (["numa_icon=on"], [])


def test_grubby_kernels_a_parameter_one_kernel_had_is_not_added():
    before = [["ro", "quiet"], ["ro"]]
    after = [apply_params(args, ["quiet", "mem_sampling_on"]) for args in before]
    assert change_of(before, after) == (["mem_sampling_on"], [])


def test_withdraw_removes_what_numa_kube_added_and_puts_back_what_it_removed():
    now = ["ro", "quiet", "numa_balancing=disable", "mem_sampling_on"]
    remove, restore, notes = plan_withdraw([now], ["numa_balancing=disable", "mem_sampling_on"],
                                           ["numa_balancing=enable"])
    assert remove == ["numa_balancing=disable", "mem_sampling_on"]
    assert restore == ["numa_balancing=enable"] and notes == []
    assert apply_params(now, restore, remove) == ["ro", "quiet", "numa_balancing=enable"]


def test_a_parameter_the_user_changed_since_is_left_alone_with_a_note():
    now = ["ro", "numa_icon=disable", "quiet"]
    remove, restore, notes = plan_withdraw([now], ["numa_icon=enable"], [])
    assert remove == [] and restore == []
    assert notes == ["numa_icon=enable, which numa.kube added, is now numa_icon=disable: left as it is "
                     "(changed since numa.kube set it)"]


def test_a_bare_flag_is_not_removed_when_the_user_gave_it_a_value():
    remove, _restore, notes = plan_withdraw([["mem_sampling_on=1"]], ["mem_sampling_on"], [])
    assert remove == [] and "is now mem_sampling_on=1" in notes[0]


def test_a_removed_parameter_set_again_since_is_not_put_back():
    now = ["ro", "numa_balancing=auto"]
    remove, restore, notes = plan_withdraw([now], [], ["numa_balancing=enable"])
    assert restore == [] and "has numa_balancing=auto now" in notes[0]


def test_a_parameter_that_is_gone_already_needs_nothing():
    remove, restore, notes = plan_withdraw([["ro", "quiet"]], ["numa_icon=enable"], ["quiet"])
    assert (remove, restore) == ([], []) and "no longer there" in notes[0]


def test_a_name_repeated_since_is_left_alone():
    remove, _restore, notes = plan_withdraw([["hugepages=16", "hugepages=16"]], ["hugepages=16"], [])
    assert remove == [] and "more than once" in notes[0]


@pytest.mark.parametrize("record,words", [
    ([], "not an object"),
    ({"method": "lilo", "added": [], "removed": []}, "method is 'lilo'"),
    ({"method": "grubby", "added": "quiet", "removed": []}, "added is 'quiet', not a list"),
    ({"method": "grubby", "added": ["a;reboot"], "removed": []}, "'a;reboot' is refused"),
    ({"method": "grub_default", "added": [], "removed": []}, "names the grub defaults file"),
])
def test_a_damaged_record_is_refused_with_what_to_do(record, words):
    problems = check_record(record, "/var/lib/numa-kube/applied/kernel.json")
    assert problems and words in " ".join(problems), problems
    assert problems[0].startswith("/var/lib/numa-kube/applied/kernel.json is damaged")
    assert "remove it and take the parameters out by hand" in problems[-1]


def test_a_sound_record_passes():
    record = dict(where_of("grub_default", "/etc/default/grub", "GRUB_CMDLINE_LINUX"), added=["x"], removed=[])
    assert check_record(record, "k.json") == []
    assert check_record_where(record, where_of("grub_default", "/etc/default/grub", "GRUB_CMDLINE_LINUX"), "k") == []
    problem = check_record_where(record, where_of("grubby"), "k.json")
    assert problem and "GRUB_CMDLINE_LINUX in /etc/default/grub" in problem[0] and "through grubby" in problem[0]
