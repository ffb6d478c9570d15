# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

import pytest

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import (
    SysfsReader,
    SysfsError,
    format_cpu_list,
    parse_cpu_list,
)
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import (
    Machine,
    four_nodes_with_memory_only,
    non_numa,
    two_socket_interleaved,
)

GIB_KB = 1024 * 1024


def read(tmp_path, machine, **kwargs):
    sys_root, proc_root = machine.write(str(tmp_path))
    return SysfsReader(sys_root, proc_root).read(**kwargs)


@pytest.mark.parametrize("text,expected", [
    ("0-3,8-11", [0, 1, 2, 3, 8, 9, 10, 11]),
    ("0,2,4", [0, 2, 4]),
    ("", []),
    ("5", [5]),
    ("0-1,1-2", [0, 1, 2]),
])
def test_parse_cpu_list(text, expected):
    assert parse_cpu_list(text) == expected


def test_parse_cpu_list_refuses_backwards_range():
    with pytest.raises(ValueError):
        parse_cpu_list("3-1")


@pytest.mark.parametrize("text,message", [
    ("0-4294967295", "'0-4294967295' names CPU 4294967295, but CPU ids stop at 8191"),
    ("8192", "names CPU 8192"),
    ("0-3,99999999999999999999", "names CPU 99999999999999999999"),
    ("-1", "is not a CPU id or range"),
    ("0-x", "is not a CPU id or range"),
    ("1" * 50, "is not a CPU id or range"),
])
@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_parse_cpu_list_refuses_ids_no_machine_has_before_expanding_anything(text, message):
    started = time.time()
    with pytest.raises(ValueError) as info:
        parse_cpu_list(text)
    assert message in str(info.value)
    assert time.time() - started < 1, "expanded before refusing"


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_parse_cpu_list_takes_the_machines_own_bound_and_is_linear_in_its_input():
    assert parse_cpu_list("0-8191")[-1] == 8191
    with pytest.raises(ValueError, match="CPU ids stop at 15"):
        parse_cpu_list("0-16", limit=16)
    started = time.time()
    assert len(parse_cpu_list(",".join(["0-8191"] * 20000))) == 8192
    assert time.time() - started < 15, "not linear in its input"


def test_format_cpu_list_round_trips():
    assert format_cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_cpu_list(format_cpu_list([9, 3, 4, 0])) == [0, 3, 4, 9]


def test_two_sockets_with_interleaved_ids_and_hyperthreads(tmp_path):
    facts = read(tmp_path, two_socket_interleaved(hyperthreading=True))
    assert facts["numa_enabled"] is True
    assert facts["node_ids"] == [0, 1]
    node0, node1 = facts["nodes"]
    assert node0["cpus"] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert node1["cpus"] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert node0["cpu_list"] == "0,2,4,6,8,10,12,14"
    assert node0["distances"] == {"0": 10, "1": 21}
    assert node1["distances"] == {"0": 21, "1": 10}
    assert node0["memory_total_bytes"] == 8 * GIB_KB * 1024
    assert node0["memory_free_bytes"] == 6 * GIB_KB * 1024
    assert node0["memory_used_bytes"] == 2 * GIB_KB * 1024
    assert node0["hugepages"]["hugepages-2Mi"] == {"page_size_bytes": 2097152, "total": 512, "free": 500}
    assert node0["hugepages"]["hugepages-1Gi"]["total"] == 2
    assert facts["hugepage_sizes"] == ["hugepages-2Mi", "hugepages-1Gi"]
    assert facts["hyperthreading"] is True
    assert facts["sockets"] == [0, 1]
    cpu0 = facts["cpus"][0]
    assert cpu0["socket"] == 0 and cpu0["core"] == 0 and cpu0["numa_node"] == 0
    # CPU 0 and CPU 8 are the two threads of socket 0, core 0.
    assert cpu0["thread_siblings"] == [0, 8]
    assert facts["cpus"][9]["thread_siblings"] == [1, 9]
    assert facts["numa_node_memory"] == {"0": 8 * GIB_KB * 1024, "1": 8 * GIB_KB * 1024}


def test_hyperthreading_off(tmp_path):
    facts = read(tmp_path, two_socket_interleaved(hyperthreading=False))
    assert facts["hyperthreading"] is False
    assert facts["cpu_count"] == 8
    assert all(c["thread_siblings"] == [c["id"]] for c in facts["cpus"])


def test_offline_cpus_are_left_out(tmp_path):
    machine = two_socket_interleaved(hyperthreading=True)
    machine.offline = {8, 9}
    facts = read(tmp_path, machine)
    assert 8 not in facts["nodes"][0]["cpus"]
    assert facts["cpu_count"] == 14
    assert facts["cpus"][0]["thread_siblings"] == [0]


def test_memory_only_node_and_id_gaps(tmp_path):
    facts = read(tmp_path, four_nodes_with_memory_only())
    assert facts["node_ids"] == [0, 1, 3, 5]
    by_id = dict((n["id"], n) for n in facts["nodes"])
    assert by_id[5]["has_cpu"] is False and by_id[5]["has_memory"] is True
    assert by_id[5]["cpus"] == []
    assert facts["nodes_with_cpus"] == [0, 1, 3]
    assert facts["nodes_with_memory"] == [0, 1, 3, 5]
    # distances are listed in the order of online node ids, not by position
    assert by_id[3]["distances"] == {"0": 16, "1": 16, "3": 10, "5": 30}
    assert by_id[5]["distances"]["5"] == 10
    assert facts["numa_node_memory"]["3"] == GIB_KB * 1024
    assert facts["cpus"][6]["numa_node"] == 3


def test_cpu_only_node(tmp_path):
    cpus = dict((c, (0, c)) for c in range(4))
    machine = Machine(nodes={0: dict(cpus=[0, 1], mem_kb=GIB_KB), 1: dict(cpus=[2, 3], mem_kb=0)}, cpus=cpus)
    facts = read(tmp_path, machine)
    assert facts["nodes"][1]["has_memory"] is False
    assert facts["nodes_with_memory"] == [0]
    assert facts["nodes_with_cpus"] == [0, 1]


def test_kernel_without_numa_is_one_node(tmp_path):
    facts = read(tmp_path, non_numa(cpu_count=4, mem_kb=2 * GIB_KB))
    assert facts["numa_enabled"] is False
    assert facts["node_ids"] == [0]
    node = facts["nodes"][0]
    assert node["cpus"] == [0, 1, 2, 3]
    assert node["memory_total_bytes"] == 2 * GIB_KB * 1024
    assert node["hugepages"]["hugepages-2Mi"] == {"page_size_bytes": 2097152, "total": 16, "free": 8}
    assert all(c["numa_node"] == 0 for c in facts["cpus"])


def test_machine_memory_comes_from_proc_meminfo(tmp_path):
    machine = two_socket_interleaved()
    machine.mem_total_kb = 15 * GIB_KB
    facts = read(tmp_path, machine)
    assert facts["memory_total_bytes"] == 15 * GIB_KB * 1024


def test_pci_devices_with_sriov_nvme_gpu_and_virtio(tmp_path):
    machine = two_socket_interleaved()
    machine.add_pci("0000:3b:00.0", 0x020000, numa_node=0, driver="i40e", net=["ens1f0"], sriov_total=64,
                    vfs=["0000:3b:02.0", "0000:3b:02.1"])
    machine.add_pci("0000:3b:02.0", 0x020000, numa_node=0, driver="iavf", net=["ens1f0v0"], physfn="0000:3b:00.0")
    machine.add_pci("0000:3b:02.1", 0x020000, numa_node=0, driver="iavf", physfn="0000:3b:00.0")
    machine.add_pci("0000:af:00.0", 0x010802, numa_node=1, vendor="0x144d", driver="nvme", nvme=["nvme0"])
    machine.add_pci("0000:d8:00.0", 0x030200, numa_node=1, vendor="0x10de")
    machine.add_pci("0000:00:03.0", 0x020000, numa_node=-1, vendor="0x1af4", driver="virtio-pci",
                    virtio_net=["eth0"])
    machine.add_pci("0000:00:1f.0", 0x060100, numa_node=0)  # an ISA bridge: not listed
    facts = read(tmp_path, machine)
    devices = dict((d["address"], d) for d in facts["pci_devices"])
    assert sorted(devices) == ["0000:00:03.0", "0000:3b:00.0", "0000:3b:02.0", "0000:3b:02.1",
                               "0000:af:00.0", "0000:d8:00.0"]
    pf = devices["0000:3b:00.0"]
    assert pf["kind"] == "network" and pf["numa_node"] == 0 and pf["driver"] == "i40e"
    assert pf["interfaces"] == ["ens1f0"]
    assert pf["sriov"] == {"role": "pf", "total_vfs": 64, "num_vfs": 2, "vfs": ["0000:3b:02.0", "0000:3b:02.1"]}
    assert devices["0000:3b:02.0"]["sriov"] == {"role": "vf", "pf": "0000:3b:00.0"}
    assert devices["0000:3b:02.0"]["interfaces"] == ["ens1f0v0"]
    assert devices["0000:af:00.0"]["kind"] == "nvme" and devices["0000:af:00.0"]["interfaces"] == ["nvme0"]
    assert devices["0000:d8:00.0"]["kind"] == "gpu" and devices["0000:d8:00.0"]["numa_node"] == 1
    virtio = devices["0000:00:03.0"]
    assert virtio["numa_node"] is None and virtio["interfaces"] == ["eth0"]


def test_include_pci_false_skips_devices(tmp_path):
    facts = read(tmp_path, two_socket_interleaved(), include_pci=False)
    assert "pci_devices" not in facts


def test_missing_sysfs_is_an_error(tmp_path):
    with pytest.raises(SysfsError):
        SysfsReader(str(tmp_path / "nothing"), str(tmp_path)).read()


def test_cpu_folders_without_online_file(tmp_path):
    machine = two_socket_interleaved(hyperthreading=False)
    sys_root, proc_root = machine.write(str(tmp_path))
    (tmp_path / "sys/devices/system/cpu/online").unlink()
    facts = SysfsReader(sys_root, proc_root).read()
    assert facts["cpu_count"] == 8
