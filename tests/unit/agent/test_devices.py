# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin's device names, preferred allocation, and health following a changing sysfs tree."""

from __future__ import absolute_import, division, print_function

import os
import queue
import shutil
import sys
import threading

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import (
    four_nodes_with_memory_only, non_numa, two_socket_interleaved)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.devices import (  # noqa: E402 pylint: disable=wrong-import-position
    Health, NodeHealth, Transition, device_ids, numa_nodes_with_cpus, preferred)


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


# --- health: a NUMA node that loses its CPUs or leaves is Unhealthy, and Healthy when it is back -----

def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)


def set_online_cpus(sys_root, cpus, node_cpulists=None):
    """What the kernel shows after CPUs go on- or offline: the online list, each CPU's switch, and on x86
    (``node_cpulists`` given) the NUMA nodes' cpulist without the offline CPUs."""
    write(os.path.join(sys_root, "devices/system/cpu/online"), format_cpu_list(cpus) + "\n")
    for node, cpulist in (node_cpulists or {}).items():
        write(os.path.join(sys_root, "devices/system/node/node%d/cpulist" % node), format_cpu_list(cpulist) + "\n")


def set_online_nodes(sys_root, nodes):
    write(os.path.join(sys_root, "devices/system/node/online"), format_cpu_list(nodes) + "\n")


def health_of(tmp_path, machine):
    sys_root, _proc = machine.write(str(tmp_path / "m"))
    served = [node for node, _cpus in numa_nodes_with_cpus(sys_root)]
    health = NodeHealth(sys_root, served, "numa-align/numa-")
    assert health.poll() == ([], []), "every node served at start has online CPUs"
    return sys_root, health


def test_the_nodes_served_at_start_are_the_online_ones_with_online_cpus(tmp_path):
    machine = four_nodes_with_memory_only()
    machine.offline = {6, 7}  # node 3's only CPUs
    sys_root, _proc = machine.write(str(tmp_path / "m"))
    assert numa_nodes_with_cpus(sys_root) == [(0, [0, 1, 2, 3]), (1, [4, 5])]


def test_a_node_whose_cpus_all_go_offline_is_unhealthy_until_one_is_back(tmp_path):
    sys_root, health = health_of(tmp_path, two_socket_interleaved())  # node 0: even CPUs, node 1: odd, 0-15
    everything = set(range(16))
    set_online_cpus(sys_root, everything - {1, 3, 5})
    assert health.poll() == ([], []), "node 1 still has CPUs 7, 9, ..."
    set_online_cpus(sys_root, everything - {1, 3, 5, 7, 9, 11, 13, 15})
    assert health.poll() == ([Transition(1, False, "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy")], [])
    assert health.healthy == {0: True, 1: False}
    assert health.poll() == ([], []), "reported once"
    set_online_cpus(sys_root, everything - {1, 3, 5, 7, 9, 11, 13, 15, 2})
    assert health.poll() == ([], []), "node 0 keeps other CPUs; node 1 is still without"
    set_online_cpus(sys_root, everything - {1, 3, 5, 7, 9, 11, 15, 2})
    back = Transition(1, True, "NUMA node 1 is back with online CPUs 13: numa-align/numa-1 Healthy")
    assert health.poll() == ([back], [])
    assert health.healthy == {0: True, 1: True}


def test_offline_cpus_leaving_the_nodes_cpulist_as_on_x86_count_the_same(tmp_path):
    sys_root, health = health_of(tmp_path, two_socket_interleaved(hyperthreading=False))  # 0,2,4,6 and 1,3,5,7
    set_online_cpus(sys_root, [0, 2, 4, 6], {1: []})
    assert health.poll() == ([Transition(1, False, "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy")], [])
    set_online_cpus(sys_root, [0, 2, 4, 6, 3], {1: [3]})
    assert health.poll() == ([Transition(1, True, "NUMA node 1 is back with online CPUs 3: numa-align/numa-1 Healthy")],
                             [])


def test_a_node_that_leaves_the_online_list_is_unhealthy_until_it_returns(tmp_path):
    sys_root, health = health_of(tmp_path, four_nodes_with_memory_only())  # served: 0, 1, 3
    folder = os.path.join(sys_root, "devices/system/node/node3")
    shutil.move(folder, folder + ".gone")
    set_online_nodes(sys_root, [0, 1, 5])
    assert health.poll() == ([Transition(3, False, "NUMA node 3 is no longer online: numa-align/numa-3 Unhealthy")],
                             [])
    set_online_nodes(sys_root, [0, 5])  # node 1 listed no more, its folder still there
    assert health.poll() == ([Transition(1, False, "NUMA node 1 is no longer online: numa-align/numa-1 Unhealthy")],
                             [])
    set_online_nodes(sys_root, [0, 3, 5])  # listed again, but its folder not yet: no CPU known
    assert health.poll() == ([], [])
    shutil.move(folder + ".gone", folder)
    set_online_nodes(sys_root, [0, 1, 3, 5])
    assert health.poll() == ([
        Transition(1, True, "NUMA node 1 is back with online CPUs 4-5: numa-align/numa-1 Healthy"),
        Transition(3, True, "NUMA node 3 is back with online CPUs 6-7: numa-align/numa-3 Healthy")], [])
    assert health.healthy == {0: True, 1: True, 3: True}


def test_only_the_two_online_lists_are_read_while_they_stay_the_same(tmp_path):
    sys_root, health = health_of(tmp_path, four_nodes_with_memory_only())
    set_online_cpus(sys_root, range(8), {1: []})  # a cpulist alone does not change without the online lists
    assert health.poll() == ([], [])
    set_online_cpus(sys_root, range(7), {1: []})
    assert health.poll() == ([Transition(1, False, "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy")], [])


def test_a_node_that_gains_cpus_after_start_is_reported_not_served(tmp_path):
    sys_root, health = health_of(tmp_path, four_nodes_with_memory_only())  # node 5 is memory only
    set_online_cpus(sys_root, range(9), {5: [8]})
    transitions, notices = health.poll()
    assert transitions == [] and notices == [
        "NUMA node 5 now has online CPUs 8 but was not there when the plugin started: numa-align/numa-5 is not "
        "advertised (resources are registered at start only); restart the device plugin (delete its pod on this "
        "node) to advertise it"]
    assert sorted(health.healthy) == [0, 1, 3]
    set_online_nodes(sys_root, [0, 1, 3, 5, 7])
    os.makedirs(os.path.join(sys_root, "devices/system/node/node7"))
    write(os.path.join(sys_root, "devices/system/node/node7/cpulist"), "9\n")
    set_online_cpus(sys_root, range(10))
    transitions, notices = health.poll()
    assert transitions == [] and len(notices) == 1 and notices[0].startswith("NUMA node 7 now has online CPUs 9 but"), \
        "node 5 is not reported twice"
    set_online_cpus(sys_root, range(8), {5: []})
    set_online_nodes(sys_root, [0, 1, 3, 5])
    assert health.poll() == ([], [])
    set_online_cpus(sys_root, range(9), {5: [8]})
    assert [n.split(" but ")[0] for n in health.poll()[1]] == ["NUMA node 5 now has online CPUs 8"], \
        "reported again after it had lost its CPUs"


def test_without_numa_the_one_node_is_healthy_while_a_cpu_is_online(tmp_path):
    sys_root, health = health_of(tmp_path, non_numa(cpu_count=4))
    assert health.healthy == {0: True}
    set_online_cpus(sys_root, [0])
    assert health.poll() == ([], [])
    assert health.healthy == {0: True}


def test_an_unreadable_list_keeps_the_health_and_is_reported_once(tmp_path):
    sys_root, health = health_of(tmp_path, two_socket_interleaved(hyperthreading=False))
    set_online_cpus(sys_root, [0, 2, 4, 6])
    write(os.path.join(sys_root, "devices/system/cpu/online"), "0-2,6-4\n")
    transitions, notices = health.poll()
    assert transitions == [] and notices == [
        "cannot read the online CPUs and NUMA nodes under %s/devices/system (range '6-4' runs backwards): health of "
        "numa-align/numa-0, numa-align/numa-1 kept as it was; read again at the next change" % sys_root]
    assert health.poll() == ([], []), "reported once"
    assert health.healthy == {0: True, 1: True}
    set_online_cpus(sys_root, [0, 2, 4, 6])
    assert health.poll() == ([Transition(1, False, "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy")], [])


# --- the streams: what ListAndWatch sends is the health as it changes --------------------------------

def watched(health, active, recheck=0.05):
    """Run ``health.watch`` in a thread; what it yields goes into the returned queue, then ``END``."""
    answers = queue.Queue()

    def consume():
        for value in health.watch(lambda: active[0], recheck=recheck):
            answers.put(value)
        answers.put(END)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return answers, thread


END = "end"


def test_a_watch_sends_the_health_now_then_each_change_and_ends_with_the_server():
    health = Health()
    active = [True]
    answers, thread = watched(health, active, recheck=5.0)
    assert answers.get(timeout=5) is True
    assert health.set(False) is True
    assert answers.get(timeout=2) is False, "woken by the change, not by the 5 s recheck"
    assert health.set(False) is False, "no change, nothing sent"
    assert health.set(True) is True
    assert answers.get(timeout=2) is True
    assert answers.empty()
    health.end_watches()
    assert answers.get(timeout=2) == END
    thread.join(2)
    assert not thread.is_alive()
    later, _thread = watched(health, active)
    assert later.get(timeout=5) is True, "a stream opened after end_watches starts afresh"
    health.end_watches()
    assert later.get(timeout=2) == END


def test_a_watch_ends_when_kubelet_closes_the_stream():
    health = Health()
    active = [True]
    answers, thread = watched(health, active)
    assert answers.get(timeout=5) is True
    active[0] = False
    assert answers.get(timeout=2) == END
    thread.join(2)
    assert not thread.is_alive()


def test_a_flip_and_back_between_two_sends_sends_nothing():
    health = Health()
    active = [True]
    # the consumer is not woken until both changes are made: it holds no lock while we set
    with health._changed:  # pylint: disable=protected-access
        answers, _thread = watched(health, active, recheck=5.0)
    assert answers.get(timeout=5) is True
    with health._changed:  # pylint: disable=protected-access
        health.set(False)
        health.set(True)
    health.set(False)
    assert answers.get(timeout=2) is False
    assert answers.empty()
    health.end_watches()
