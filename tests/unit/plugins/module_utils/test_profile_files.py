# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files a node profile puts on a node: the huge page script run for real on a recorded tree
(pages there, pages short), the units and kubelet's drop-in, systemd's CPUAffinity, irqbalance."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from ansible_collections.numa.kube.plugins.module_utils.profile import files
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import ProfileError

PAGES = [{"node": 1, "size": "2Mi", "size_kb": 2048, "count": 64, "at": "runtime"},
         {"node": 0, "size": "1Gi", "size_kb": 1048576, "count": 2, "at": "boot"},
         {"node": 0, "size": "2Mi", "size_kb": 2048, "count": 8, "at": "runtime"}]


def test_one_unit_per_runtime_page_entry_and_kubelet_requires_them_all():
    written = files.hugepage_files(PAGES, "kubelet.service")
    assert sorted(written) == [
        "/etc/systemd/system/kubelet.service.d/50-numa-kube-hugepages.conf",
        "/etc/systemd/system/numa-kube-hugepages-node0-1048576kB.service",
        "/etc/systemd/system/numa-kube-hugepages-node0-2048kB.service",
        "/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service",
        files.SCRIPT]
    unit = written["/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service"]
    assert "ExecStart=/usr/local/libexec/numa-kube/hugepages 1 2048 64\nTimeoutStartSec=120\n" in unit
    assert "Type=oneshot\nRemainAfterExit=yes\n" in unit and "Before=kubelet.service\n" in unit
    dropin = written["/etc/systemd/system/kubelet.service.d/50-numa-kube-hugepages.conf"]
    # Requires, not only an order: a failed allocation stops kubelet's start
    names = ("numa-kube-hugepages-node1-2048kB.service numa-kube-hugepages-node0-1048576kB.service "
             "numa-kube-hugepages-node0-2048kB.service")
    assert "Requires=%s\n" % names in dropin and "After=%s\n" % names in dropin
    # pages the kernel command line allocates at boot are checked, not written
    boot = written["/etc/systemd/system/numa-kube-hugepages-node0-1048576kB.service"]
    assert "ExecStart=/usr/local/libexec/numa-kube/hugepages --check 0 1048576 2\n" in boot
    # RKE2's kubelet runs under rke2-agent
    assert "/etc/systemd/system/rke2-agent.service.d/50-numa-kube-hugepages.conf" in files.hugepage_files(
        PAGES, "rke2-agent.service")
    assert files.hugepage_files([], "kubelet.service") == {}


def tree(tmp_path, node=1, size_kb=2048):
    folder = tmp_path / "sys" / "devices" / "system" / "node" / ("node%d" % node) / "hugepages" / (
        "hugepages-%dkB" % size_kb)
    folder.mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "vm").mkdir(parents=True)
    return folder


def run_script(tmp_path, *args):
    script = tmp_path / "hugepages"
    script.write_text(files.hugepage_files(PAGES, "kubelet.service")[files.SCRIPT])
    env = dict(os.environ, NUMA_KUBE_SYSFS=str(tmp_path / "sys"), NUMA_KUBE_PROCFS=str(tmp_path / "proc"))
    return subprocess.run(["sh", str(script)] + [str(arg) for arg in args], capture_output=True, text=True,
                          timeout=60, check=False, env=env)


def test_the_script_writes_the_count_and_reads_it_back(tmp_path):
    folder = tree(tmp_path)
    (folder / "nr_hugepages").write_text("0\n")
    done = run_script(tmp_path, 1, 2048, 64)
    assert done.returncode == 0, done.stderr
    assert (folder / "nr_hugepages").read_text().strip() == "64"
    assert done.stdout.strip() == "numa.kube: NUMA node 1 holds 64 huge pages of 2048 kB"


def test_pages_that_cannot_be_had_fail_the_unit_naming_the_shortfall(tmp_path):
    folder = tree(tmp_path)
    (folder / "nr_hugepages").mkdir()  # a file no count can be written to: nothing allocated
    done = run_script(tmp_path, 1, 2048, 64, 1)
    assert done.returncode == 1
    assert ("numa.kube: NUMA node 1 holds 0 of the 64 huge pages of 2048 kB the profile asks for (64 short); kubelet "
            "does not start without them. Free memory on that node or ask for fewer pages, then: systemctl restart "
            "numa-kube-hugepages-node1-2048kB.service and start kubelet again") in done.stderr
    # memory compaction was asked for between the tries
    assert (tmp_path / "proc" / "sys" / "vm" / "compact_memory").read_text().strip() == "1"


def test_boot_pages_are_checked_and_never_written(tmp_path):
    folder = tree(tmp_path, node=0, size_kb=1048576)
    (folder / "nr_hugepages").write_text("1\n")
    (tmp_path / "proc" / "cmdline").write_text("BOOT_IMAGE=/vmlinuz ro hugepagesz=2M hugepages=16 hugepagesz=1G "
                                               "hugepages=0:2 isolcpus=managed_irq,1-3\n")
    short = run_script(tmp_path, "--check", 0, 1048576, 2)
    assert short.returncode == 1 and "holds 1 of the 2 huge pages of 1048576 kB" in short.stderr
    assert (folder / "nr_hugepages").read_text() == "1\n"
    assert not (tmp_path / "proc" / "sys" / "vm" / "compact_memory").exists()
    (folder / "nr_hugepages").write_text("2\n")
    assert run_script(tmp_path, "--check", 0, 1048576, 2).returncode == 0


def test_a_page_size_the_kernel_lacks_fails_at_once(tmp_path):
    tree(tmp_path)
    done = run_script(tmp_path, 1, 4096, 1)
    assert done.returncode == 1 and "this kernel offers no 4096 kB pages on NUMA node 1" in done.stderr


def test_services_run_on_the_reserved_cpus():
    assert files.affinity_dropin("0-1,8-9").endswith("[Manager]\nCPUAffinity=0-1,8-9\n")


DEBIAN_DEFAULT = """# irqbalance is a daemon process that distributes interrupts across
#IRQBALANCE_ONESHOT=
#IRQBALANCE_BANNED_CPULIST=
#IRQBALANCE_BANNED_CPUS=
IRQBALANCE_ARGS="--policyscript=/etc/irq.sh"
"""


def test_irqbalance_gets_the_isolated_cpus_banned_in_a_drop_in_in_the_form_its_version_reads():
    # 1.8 and newer read the list; older ones only the mask, which every version reads
    assert files.irqbalance_dropin([2, 3, 4, 5, 6, 7, 10], (1, 9, 2), "/etc/default/irqbalance", DEBIAN_DEFAULT) == (
        "# numa.kube's node profile: no interrupts balanced onto the isolated CPUs\n"
        "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=2-7,10\n")
    assert files.irqbalance_dropin([2, 3], (1, 7, 0), "/etc/default/irqbalance", None).endswith(
        "Environment=IRQBALANCE_BANNED_CPUS=0000000c\n")
    assert files.irqbalance_dropin([2, 3, 33], None, "/etc/sysconfig/irqbalance", "").endswith(
        "Environment=IRQBALANCE_BANNED_CPUS=00000002,0000000c\n")


def test_cpu_masks_in_groups_of_eight_digits_highest_first():
    assert files.cpu_mask([0]) == "00000001"
    assert files.cpu_mask([31]) == "80000000"
    assert files.cpu_mask([32]) == "00000001,00000000"
    assert files.cpu_mask(range(1, 64)) == "ffffffff,fffffffe"


@pytest.mark.parametrize("line", ["IRQBALANCE_BANNED_CPUS=fc", "export IRQBALANCE_BANNED_CPULIST=\"2-3\"",
                                  "  IRQBALANCE_BANNED_CPULIST="])
def test_an_environment_file_that_bans_cpus_itself_is_refused_by_name(line):
    """systemd's EnvironmentFile= wins over a drop-in's Environment=: the file's setting, even an
    empty one, would replace the profile's without a word."""
    variable = "IRQBALANCE_BANNED_CPULIST" if "LIST" in line else "IRQBALANCE_BANNED_CPUS"
    with pytest.raises(ProfileError, match=r"^/etc/sysconfig/irqbalance sets %s \(" % variable) as caught:
        files.irqbalance_dropin([2, 3], (1, 9, 2), "/etc/sysconfig/irqbalance", DEBIAN_DEFAULT + line + "\n")
    assert "Remove or comment out that line" in str(caught.value)
    # commented out: nothing to disagree with
    assert files.irqbalance_dropin([2, 3], (1, 9, 2), "x", "#" + line + "\n").endswith("=2-3\n")


@pytest.mark.parametrize("cmdline", ["ro quiet", "ro hugepagesz=2M hugepages=16", "ro hugepagesz=1X hugepages=2",
                                     "ro hugepagesz= hugepages=2"])
def test_boot_pages_the_running_command_line_does_not_allocate_yet_wait_for_its_reboot(tmp_path, cmdline):
    """The unit is written with kubelet's change, before the reboot that brings the parameters:
    until then it has nothing to check, and kubelet's restart must not fail on it."""
    folder = tree(tmp_path, node=0, size_kb=1048576)
    (folder / "nr_hugepages").write_text("0\n")
    (tmp_path / "proc" / "cmdline").write_text(cmdline + "\n")
    done = run_script(tmp_path, "--check", 0, 1048576, 2)
    assert done.returncode == 0, done.stderr
    assert "allocates no 1048576 kB pages yet" in done.stdout
    for spelled in ("1G", "1024M", "1048576K", "1073741824"):
        (tmp_path / "proc" / "cmdline").write_text("ro hugepagesz=%s hugepages=0:2\n" % spelled)
        assert run_script(tmp_path, "--check", 0, 1048576, 2).returncode == 1, spelled
