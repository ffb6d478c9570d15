# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node profile's planner on recorded sysfs trees: the CPUs split, the fields and parameters
that follow, and every rule a profile can break, refused by name before anything changes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import KubeletConfigError, validate
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader
from ansible_collections.numa.kube.plugins.module_utils.profile.node import (
    parse_irqbalance_version, parse_release, primary_threads, profile_files)
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import ProfileError, cores_of, page_size_bytes, plan
from ansible_collections.numa.kube.plugins.modules import node_profile
from ansible_collections.numa.kube.tests.unit.plugins import sysfs_tree
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run as run_module

# two_socket_interleaved: node 0 holds the even CPUs, node 1 the odd; CPU n and n+8 share a core
NODE0_CORES = [[0, 8], [2, 10], [4, 12], [6, 14]]


def topology(tmp_path, machine):
    sys_root, proc_root = machine.write(str(tmp_path))
    return SysfsReader(sys_root, proc_root).read(include_pci=False)


@pytest.fixture
def smt(tmp_path):
    return topology(tmp_path, sysfs_tree.two_socket_interleaved())


def problems_of(*args, **kwargs):
    with pytest.raises(ProfileError) as caught:
        plan(*args, **kwargs)
    return caught.value.problems


def test_a_count_per_node_reserves_whole_cores_on_every_node_and_isolates_the_rest(smt):
    result = plan(smt, {"reserved_per_node": 2}, kubelet_version=(1, 36, 3))
    assert result["reserved"] == "0-1,8-9"
    assert result["reserved_by_node"] == {"0": "0,8", "1": "1,9"}
    assert result["isolated"] == "2-7,10-15"
    assert result["kubelet"] == {
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1,8-9",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true", "strict-cpu-reservation": "true"}}
    assert result["kernel_args"] == ["isolcpus=managed_irq,2-7,10-15", "nohz_full=2-7,10-15", "rcu_nocbs=2-7,10-15",
                                     "irqaffinity=0-1,8-9"]
    assert result["irqbalance_banned_cpus"] == "2-7,10-15"
    assert result["cpu_affinity"] == "0-1,8-9"
    assert result["hugepages"] == []


def test_the_planned_kubelet_fields_pass_the_kubelet_checks_on_the_same_machine(smt):
    result = plan(smt, {"reserved_per_node": 2}, kubelet_version=(1, 36, 3))
    config = dict(result["kubelet"], topologyManagerPolicy="single-numa-node")
    online = [cpu["id"] for cpu in smt["cpus"]]
    validate(config, numa_node_count=2, online_cpus=online, machine={"cpus": smt["cpus"]})  # raises on a problem
    # the same checks refuse the plan on the machine with its second threads offline (nosmt)
    with pytest.raises(KubeletConfigError, match="reservedSystemCPUs: CPU.s. 8-9 are not online"):
        validate(config, numa_node_count=2, online_cpus=[cpu for cpu in online if cpu < 8],
                 machine={"cpus": [cpu for cpu in smt["cpus"] if cpu["id"] < 8]})


def test_half_a_core_with_full_pcpus_only_is_refused_and_allowed_without_it(smt):
    found = problems_of(smt, {"reserved_per_node": 1})
    assert len(found) == 1
    assert "full-pcpus-only: reserved splits the SMT siblings of a core: 0 (core of 0,8); 1 (core of 1,9)" in found[0]
    assert "reserve whole cores" in found[0]
    # without full-pcpus-only the first thread of each node's first core is taken
    result = plan(smt, {"reserved_per_node": 1, "full_pcpus_only": False})
    assert result["reserved"] == "0-1"
    assert "full-pcpus-only" not in result["kubelet"]["cpuManagerPolicyOptions"]


def test_reserved_nodes_choose_where_the_system_runs(smt):
    assert plan(smt, {"reserved_per_node": 2, "reserved_nodes": [0]})["reserved"] == "0,8"
    # the boot CPU keeps the timekeeping tick: it cannot be isolated
    assert problems_of(smt, {"reserved_per_node": 2, "reserved_nodes": [1]}) == [
        "CPU 0 is not reserved: the kernel keeps the timekeeping tick on the boot CPU and drops it from nohz_full "
        "('Clearing 0 from nohz_full range for timekeeping'), so it cannot be isolated as planned; reserve CPU 0 "
        "(reserved_nodes including its NUMA node, or a reserved list naming it)"]
    found = problems_of(smt, {"reserved_per_node": 2, "reserved_nodes": [0, 7]})
    assert found == ["reserved_nodes: NUMA node(s) 7 have no online CPUs on this node (nodes with CPUs: 0, 1); name "
                     "nodes from that list"]


def test_a_count_that_leaves_a_node_nothing_to_isolate_is_refused(smt):
    found = problems_of(smt, {"reserved_per_node": 8})
    assert any("8 CPUs on NUMA node 0 would leave it no CPU to isolate" in problem for problem in found), found


@pytest.mark.parametrize("profile, expected", [
    ({"reserved": "0,8", "isolated": "0-7,9-15"}, "CPU(s) 0 are both reserved and isolated"),
    ({"reserved": "0,8", "isolated": "2-7,10-15"}, "CPU(s) 1,9 are neither reserved nor isolated"),
    ({"reserved": "0,8,16"}, "reserved: CPU(s) 16 are not online on this node (online: 0-15)"),
    ({"reserved": "0-15"}, "isolated is empty"),
    ({"reserved": "0, 8"}, "reserved: '0, 8' is not a CPU list such as 0-1,8"),
    ({"reserved": "0,8", "reserved_per_node": 2}, "reserved and reserved_per_node are both set"),
    ({}, "the profile names no reserved CPUs"),
    ({"reserved_per_node": 0}, "reserved_per_node: 0 must be a whole number of CPUs of at least 1"),
    ({"reserved_per_node": True}, "reserved_per_node: True must be a whole number"),
])
def test_splits_kubelet_or_the_kernel_would_refuse_are_named(smt, profile, expected):
    found = problems_of(smt, profile)
    assert any(expected in problem for problem in found), found


def test_every_problem_comes_at_once_before_anything_is_planned(smt):
    found = problems_of(smt, {"reserved": "0,16", "isolated": "0-7", "hugepages": [{"size": "3Mi", "node": 0,
                                                                                    "count": 1}]},
                        kubelet_version=(1, 32, 0))
    assert len(found) == len(set(found)) >= 4, found
    assert any("are not online" in problem for problem in found), found
    assert any("neither reserved nor isolated" in problem for problem in found), found
    assert any("offers no 3Mi pages" in problem for problem in found), found
    assert any("strict" in problem for problem in found) is False, found  # unset: left out at 1.32, not refused


def test_a_planned_nosmt_plans_for_the_threads_that_stay_online(smt):
    primaries = list(range(8))  # the first thread of each core: the lowest APIC id
    # the profile is planned for the node as the nosmt boot leaves it: one thread a core
    result = plan(smt, {"reserved_per_node": 2}, kernel_args=["nosmt"], primary_threads=primaries)
    assert result["reserved"] == "0-3" and result["isolated"] == "4-7"
    assert result["kernel_args"][0] == "isolcpus=managed_irq,4-7"
    # CPUs named that go offline then are refused by name
    found = problems_of(smt, {"reserved": "0-1,8-9"}, kernel_args=["mitigations=auto,nosmt"],
                        primary_threads=primaries)
    assert found == ["reserved: CPU(s) 8-9 are secondary threads that go offline at the next boot (kernel parameter "
                     "mitigations=auto,nosmt), and kubelet would fail to start on reservedSystemCPUs naming one; name "
                     "the threads that stay online (0-7)"]
    # where the surviving thread cannot be read, plan after the reboot
    found = problems_of(smt, {"reserved": "0-1,8-9"}, kernel_args=["nosmt=force"])
    assert "plan the profile in a run after the reboot that turns SMT off" in found[0]


def test_nosmt_means_nothing_to_a_machine_without_smt(tmp_path):
    flat = topology(tmp_path, sysfs_tree.two_socket_interleaved(hyperthreading=False))
    assert plan(flat, {"reserved_per_node": 1}, kernel_args=["nosmt"])["reserved"] == "0-1"


def test_runtime_huge_pages_per_node_and_gigantic_ones_at_boot(smt):
    result = plan(smt, {"reserved_per_node": 2, "hugepages": [
        {"size": "2Mi", "node": 1, "count": 64}, {"size": "1Gi", "node": 0, "count": 2},
        {"size": "1G", "node": 1, "count": 1}]}, kernel_release=(6, 1, 0))
    assert result["hugepages"] == [
        {"node": 0, "size": "1Gi", "size_kb": 1048576, "count": 2, "at": "boot"},
        {"node": 1, "size": "2Mi", "size_kb": 2048, "count": 64, "at": "runtime"},
        {"node": 1, "size": "1Gi", "size_kb": 1048576, "count": 1, "at": "boot"},
    ]
    assert result["kernel_args"][-2:] == ["hugepagesz=1G", "hugepages=0:2,1:1"]


@pytest.mark.parametrize("entry, expected", [
    ({"size": "4Mi", "node": 0, "count": 1}, "hugepages[0].size: this machine's kernel offers no 4Mi pages on NUMA "
                                             "node 0 (it offers: 2Mi, 1Gi)"),
    ({"size": "2Mi", "node": 3, "count": 1}, "hugepages[0].node: 3 is not a NUMA node of this machine (nodes: 0, 1)"),
    ({"size": "2Mi", "node": 0, "count": 0}, "hugepages[0].count: 0 must be a whole number of pages of at least 1"),
    ({"size": "big", "node": 0, "count": 1}, "hugepages[0].size: 'big' is not a huge page size such as 2Mi or 1Gi"),
    ({"size": "1Gi", "node": 1, "count": 9}, "hugepages: 9216 MiB of huge pages on NUMA node 1 leave less than a tenth of its 8192 MiB"),
])
def test_huge_pages_the_node_cannot_hold_are_refused(smt, entry, expected):
    found = problems_of(smt, {"reserved_per_node": 2, "hugepages": [entry]})
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize("seconds", [0, 3601, "60", True])
def test_a_page_unit_tries_a_whole_number_of_seconds_within_an_hour(smt, seconds):
    assert problems_of(smt, {"reserved_per_node": 2, "hugepages_seconds": seconds}) == [
        "hugepages_seconds: %r must be a whole number of seconds from 1 to 3600 (how long a huge page unit tries "
        "before it holds kubelet back; default 60)" % (seconds,)]


def test_huge_pages_count_the_memory_reserved_for_the_system(smt):
    # 7 GiB of an 8 GiB node: more than a tenth left; with 1 GiB reserved for the system, not
    profile = {"reserved_per_node": 2, "hugepages": [{"size": "1Gi", "node": 1, "count": 7}]}
    assert plan(smt, profile)["hugepages"][0]["count"] == 7
    found = problems_of(smt, profile, reserved_memory={1: 1 << 30})
    assert found == ["hugepages: 7168 MiB of huge pages on NUMA node 1 with the 1024 MiB reserved for the system leave "
                     "less than a tenth of its 8192 MiB of memory to the kernel and the pods' ordinary memory; ask for "
                     "fewer pages there, or put some on another node"]


def test_a_kernel_without_numa_has_no_per_node_pools(tmp_path):
    flat = topology(tmp_path, sysfs_tree.non_numa())
    assert problems_of(flat, {"reserved": "0", "hugepages": [{"size": "2Mi", "node": 0, "count": 1}]}) == [
        "hugepages: this kernel shows no NUMA nodes (no /sys/devices/system/node), so there are no per-node pools to "
        "fill; boot a kernel with NUMA support, or leave hugepages out"]
    assert plan(flat, {"reserved": "0"})["isolated"] == "1-3"


def test_cpus_present_but_offline_are_refused_unless_smt_control_keeps_them_so(smt):
    found = problems_of(smt, {"reserved_per_node": 2}, offline_cpus=[16, 17], smt_control="on")
    assert found == ["CPU(s) 16-17 are present but offline (SMT control: on): a profile planned without them would "
                     "leave them in neither set, or split their cores, once they come back; bring them online and plan "
                     "again"]
    assert plan(smt, {"reserved_per_node": 2}, offline_cpus=[16, 17], smt_control="off")["reserved"] == "0-1,8-9"


def test_a_kernel_built_without_the_options_ignores_the_parameters(smt):
    built = {"CONFIG_CPU_ISOLATION": "y", "CONFIG_NO_HZ_FULL": "y", "CONFIG_RCU_NOCB_CPU": "y"}
    assert plan(smt, {"reserved_per_node": 2}, kernel_config=built)["reserved"] == "0-1,8-9"
    found = problems_of(smt, {"reserved_per_node": 2}, kernel_release=(6, 1, 0),
                        kernel_config=dict(built, CONFIG_NO_HZ_FULL=None, CONFIG_RCU_NOCB_CPU="n"))
    assert found == ["kernel 6.1.0 is built without nohz_full (CONFIG_NO_HZ_FULL), rcu_nocbs (CONFIG_RCU_NOCB_CPU): "
                     "the profile's parameters would be ignored; boot a kernel built with them"]


def test_more_smt_switches_than_nosmt_itself_are_seen(smt):
    for arg in ("mds=full,nosmt", "l1tf=full,force", "retbleed=auto,nosmt", "tsx_async_abort=full,nosmt"):
        result = plan(smt, {"reserved_per_node": 1, "full_pcpus_only": False}, kernel_args=[arg],
                      primary_threads=list(range(8)))
        assert result["isolated"] == "2-7", (arg, result)
    assert plan(smt, {"reserved_per_node": 2}, kernel_args=["l1tf=flush"])["isolated"] == "2-7,10-15"


def test_gigantic_pages_per_node_need_a_kernel_that_reads_the_node_form(smt):
    profile = {"reserved_per_node": 2, "hugepages": [{"size": "1Gi", "node": 0, "count": 1}]}
    found = problems_of(smt, profile, kernel_release=(5, 10, 0))
    assert found == ["hugepages: 1Gi pages per NUMA node need the per-node form of hugepages= (node:count), which Linux "
                     "has from 5.16; this node runs 5.10.0. Use 2Mi pages, or a newer kernel"]
    dup = problems_of(smt, {"reserved_per_node": 2, "hugepages": [{"size": "2Mi", "node": 0, "count": 1},
                                                                  {"size": "2048kB", "node": 0, "count": 2}]})
    assert dup == ["hugepages[1]: 2Mi pages on NUMA node 0 are given twice; give each size once per node"]


def test_strict_cpu_reservation_follows_the_kubelet_version(smt):
    older = plan(smt, {"reserved_per_node": 2}, kubelet_version=(1, 32, 4))
    assert older["kubelet"]["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
    assert problems_of(smt, {"reserved_per_node": 2, "strict_cpu_reservation": True}, kubelet_version=(1, 32, 4)) == [
        "strict_cpu_reservation: kubelet 1.32.4 takes strict-cpu-reservation only from 1.33 without a feature gate "
        "(1.32 has it behind CPUManagerPolicyAlphaOptions, older ones not at all); leave strict_cpu_reservation unset "
        "or false there"]
    off = plan(smt, {"reserved_per_node": 2, "strict_cpu_reservation": False}, kubelet_version=(1, 36, 0))
    assert "strict-cpu-reservation" not in off["kubelet"]["cpuManagerPolicyOptions"]
    # a kubelet of unknown version is asked for it only when the profile says so
    assert plan(smt, {"reserved_per_node": 2})["kubelet"]["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
    assert "strict-cpu-reservation" in plan(smt, {"reserved_per_node": 2, "strict_cpu_reservation": True})[
        "kubelet"]["cpuManagerPolicyOptions"]


def test_unbalanced_isolated_cpus_cannot_hold_the_whole_shared_pool(smt):
    found = problems_of(smt, {"reserved_per_node": 2, "balance_isolated": False}, kubelet_version=(1, 36, 0))
    assert found == ["balance_isolated false with strict-cpu-reservation: the pods of kubelet's shared pool would all "
                     "run on isolated CPUs that the kernel's scheduler does not balance (isolcpus=domain), and pile up "
                     "on the first of them; keep balance_isolated true, or set strict_cpu_reservation false"]


def test_isolated_cpus_leave_the_scheduler_domains_only_when_asked(smt):
    result = plan(smt, {"reserved_per_node": 2, "balance_isolated": False})
    assert result["kernel_args"][0] == "isolcpus=domain,managed_irq,2-7,10-15"


def test_more_than_eight_numa_nodes_raise_kubelets_limit_where_it_can(tmp_path):
    cpus = dict((cpu, (cpu // 2, cpu % 2)) for cpu in range(20))
    nodes = dict((node, dict(cpus=[2 * node, 2 * node + 1], mem_kb=1024 * 1024)) for node in range(10))
    ten = topology(tmp_path, sysfs_tree.Machine(nodes=nodes, cpus=cpus))
    result = plan(ten, {"reserved_per_node": 1, "reserved_nodes": [0]}, kubelet_version=(1, 36, 0))
    assert result["kubelet"]["topologyManagerPolicyOptions"] == {"max-allowable-numa-nodes": "10"}
    found = problems_of(ten, {"reserved_per_node": 1, "reserved_nodes": [0]}, kubelet_version=(1, 30, 2))
    assert found == ["this machine has 10 NUMA nodes; kubelet 1.30.2 refuses a Topology Manager policy above 8 and has "
                     "max-allowable-numa-nodes only from 1.31: upgrade kubelet"]


def test_page_sizes_read_as_the_kernel_and_kubelet_write_them():
    assert page_size_bytes("2Mi") == page_size_bytes("2M") == page_size_bytes("2048kB") == 2 << 20
    assert page_size_bytes("1Gi") == 1 << 30
    with pytest.raises(ValueError):
        page_size_bytes("2 pages")


# the node_profile module: what it reads beside the topology, and the whole task ----------------

CPUINFO = "".join("processor\t: %d\nvendor_id\t: GenuineIntel\napicid\t\t: %d\n\n" % (cpu, apic)
                  # thread 1 of each core has the APIC id's SMT bit set
                  for cpu, apic in [(cpu, 2 * (cpu % 8) + cpu // 8) for cpu in range(16)])


def test_the_thread_nosmt_keeps_is_the_lowest_apic_id_of_each_core(smt):
    cores = cores_of(smt)
    assert primary_threads(CPUINFO, cores) == list(range(8))
    # numbered the other way round (APIC ids of the second threads lower): the others stay
    swapped = "".join("processor\t: %d\napicid\t\t: %d\n\n" % (cpu, 2 * (cpu % 8) + (1 - cpu // 8)) for cpu in range(16))
    assert primary_threads(swapped, cores) == list(range(8, 16))
    # no APIC ids (arm64's cpuinfo): unknown
    assert primary_threads("processor\t: 0\nBogoMIPS\t: 50.00\n", cores) is None


def test_kernel_releases_read_as_numbers():
    assert parse_release("6.1.0-28-amd64") == (6, 1, 0)
    assert parse_release("5.16") == (5, 16, 0)
    assert parse_release("unknown") is None


def write_node(tmp_path, release="6.1.0-28-amd64", cpuinfo=CPUINFO):
    sys_root, proc_root = sysfs_tree.two_socket_interleaved().write(str(tmp_path))
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    (tmp_path / "proc" / "cpuinfo").write_text(cpuinfo)
    return {"sysfs_root": sys_root, "procfs_root": proc_root}


def test_the_module_plans_from_a_recorded_tree_and_changes_nothing(tmp_path):
    roots = write_node(tmp_path)
    failed, result = run_module(node_profile, dict(roots, profile={
        "reserved_per_node": 2, "hugepages": [{"size": "1Gi", "node": 0, "count": 1}]},
        kubelet_version="Kubernetes v1.36.3"), check_mode=True)
    assert not failed, result
    assert result["changed"] is False
    assert result["reserved"] == "0-1,8-9" and result["isolated"] == "2-7,10-15"
    assert result["kernel_release"] == "6.1.0-28-amd64"
    assert result["smt"] == {"on": True, "primary_threads": "0-7"}
    assert result["kernel_args"][-2:] == ["hugepagesz=1G", "hugepages=0:1"]
    # the files that check the boot-time pages and hold kubelet back, for the kubelet service asked
    files = dict((entry["path"], entry) for entry in result["files"])
    assert sorted(files) == ["/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf",
                             "/etc/systemd/system/kubelet.service.d/50-numa-kube-hugepages.conf",
                             "/etc/systemd/system/numa-kube-hugepages-node0-1048576kB.service",
                             "/usr/local/libexec/numa-kube/hugepages"]
    assert files["/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf"]["content"].endswith(
        "CPUAffinity=0-1,8-9\n")
    assert files["/usr/local/libexec/numa-kube/hugepages"]["mode"] == "0755"
    assert "ExecStart=/usr/local/libexec/numa-kube/hugepages --check 0 1048576 1\n" in files[
        "/etc/systemd/system/numa-kube-hugepages-node0-1048576kB.service"]["content"]
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2, "hugepages": [
        {"size": "2Mi", "node": 1, "count": 4}], "hugepages_seconds": 10}, kubelet_service="rke2-agent"),
        check_mode=True)
    assert not failed, result
    assert result["hugepages_seconds"] == 10
    contents = dict((entry["path"], entry["content"]) for entry in result["files"])
    assert "Requires=numa-kube-hugepages-node1-2048kB.service\n" in contents[
        "/etc/systemd/system/rke2-agent.service.d/50-numa-kube-hugepages.conf"]
    # the unit tries for the seconds asked, and systemd waits a minute longer before it ends it
    unit = contents["/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service"]
    assert "ExecStart=/usr/local/libexec/numa-kube/hugepages 1 2048 4 10\nTimeoutStartSec=70\n" in unit
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2}), check_mode=True)
    assert not failed and [entry["path"] for entry in result["files"]] == [
        "/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf"], result


def test_irqbalance_gets_its_drop_in_where_its_unit_is_loaded_and_its_file_leaves_the_cpus_to_it():
    planned = {"hugepages": [], "cpu_affinity": "0-1", "irqbalance_banned_cpus": "2-3"}
    affinity = ["/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf"]
    # not asked (a recorded tree), not installed, masked: no drop-in
    for irqbalance in (None, {"load": "not-found", "active": "inactive"}, {"load": "masked", "active": "inactive"}):
        assert [entry["path"] for entry in profile_files(planned, "kubelet", irqbalance)] == affinity, irqbalance
    loaded = {"load": "loaded", "active": "inactive", "version": "irqbalance version 1.9.4\n",
              "env_path": "/etc/sysconfig/irqbalance", "env_text": "IRQBALANCE_ARGS=\n"}
    written = dict((entry["path"], entry["content"]) for entry in profile_files(planned, "kubelet", loaded))
    assert written["/etc/systemd/system/irqbalance.service.d/50-numa-kube-banned-cpus.conf"].endswith(
        "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=2-3\n")
    with pytest.raises(ProfileError, match="^/etc/sysconfig/irqbalance sets IRQBALANCE_BANNED_CPULIST"):
        profile_files(planned, "kubelet", dict(loaded, env_text="IRQBALANCE_BANNED_CPULIST=1\n"))
    assert parse_irqbalance_version("irqbalance version 1.8.0") == (1, 8, 0)
    assert parse_irqbalance_version("") is None


def test_the_module_refuses_with_every_problem_and_the_node_read(tmp_path):
    roots = write_node(tmp_path, release="5.10.0-30-amd64")
    failed, result = run_module(node_profile, dict(roots, profile={
        "reserved": "0-1,8-9", "hugepages": [{"size": "1Gi", "node": 0, "count": 1}]}, kernel_args=["nosmt"]))
    assert failed
    assert result["msg"].startswith("the node profile cannot be applied on this node: ")
    assert len(result["problems"]) == 2, result["problems"]
    assert "reserved: CPU(s) 8-9 are secondary threads that go offline" in result["problems"][0]
    assert "this node runs 5.10.0" in result["problems"][1]


def test_kernel_parameters_asked_for_beside_the_profile_are_refused_where_it_sets_them(tmp_path):
    roots = write_node(tmp_path)
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2},
                                                   kernel_args=["numa_balancing=disable", "isolcpus=4-7", "nohz_full=4"]))
    assert failed
    assert result["problems"] == [
        "kernel_args also sets what the profile sets: isolcpus=4-7 (the profile sets isolcpus=managed_irq,2-7,10-15), "
        "nohz_full=4 (the profile sets nohz_full=2-7,10-15); leave those out of the kernel parameters asked for "
        "(kernel_args_present), the profile decides them"], result
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2},
                                                   kernel_args=["numa_balancing=disable"]))
    assert not failed, result


@pytest.mark.parametrize("args, expected", [
    ({"kubelet_version": "latest"}, "kubelet_version: 'latest' is not a version such as 1.36.3"),
    ({"reserved_memory": {"zero": "1Gi"}}, "reserved_memory: 'zero': '1Gi' is not a NUMA node id with a memory quantity"),
    ({"reserved_memory": {"0": "lots"}}, "reserved_memory: '0': 'lots' is not a NUMA node id"),
    ({"reserved_memory": {"4": "1Gi"}}, "reserved_memory: '4' is not a NUMA node of this machine (nodes: 0, 1)"),
    ({"reserved_memory": {"1": "1Gi", "01": "1Gi"}}, "reserved_memory: NUMA node 1 is given twice ('01')"),
    ({"reserved_memory": {"1": "-8Gi"}}, "reserved_memory: '1': '-8Gi' is negative"),
])
def test_the_modules_own_inputs_are_refused_by_name(tmp_path, args, expected):
    roots = write_node(tmp_path)
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2}, **args))
    assert failed and expected in result["msg"], result


def test_memory_reserved_per_node_reaches_the_huge_page_check(tmp_path):
    roots = write_node(tmp_path)
    failed, result = run_module(node_profile, dict(roots, profile={
        "reserved_per_node": 2, "hugepages": [{"size": "1Gi", "node": 1, "count": 7}]}, reserved_memory={"1": "2Gi"}))
    assert failed and "with the 2048 MiB reserved for the system leave less than a tenth of its 8192 MiB" in result[
        "msg"], result


def test_the_module_says_when_there_is_no_topology_to_read(tmp_path):
    failed, result = run_module(node_profile, {"sysfs_root": str(tmp_path / "none"), "procfs_root": str(tmp_path),
                                               "profile": {"reserved": "0"}})
    assert failed and "could not read the NUMA topology" in result["msg"]


def test_the_module_reads_offline_cpus_smt_control_and_the_kernel_config(tmp_path):
    roots = write_node(tmp_path)
    cpu_dir = tmp_path / "sys" / "devices" / "system" / "cpu"
    (cpu_dir / "present").write_text("0-17\n")
    (cpu_dir / "smt").mkdir()
    (cpu_dir / "smt" / "control").write_text("on\n")
    config = tmp_path / "config"
    config.write_text("CONFIG_CPU_ISOLATION=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_RCU_NOCB_CPU=y\n")
    failed, result = run_module(node_profile, dict(roots, profile={"reserved_per_node": 2}, kernel_config=str(config)))
    assert failed
    assert result["problems"] == [
        "CPU(s) 16-17 are present but offline (SMT control: on): a profile planned without them would leave them in "
        "neither set, or split their cores, once they come back; bring them online and plan again",
        "kernel 6.1.0 is built without nohz_full (CONFIG_NO_HZ_FULL): the profile's parameters would be ignored; boot "
        "a kernel built with them"]
