# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scrape time and memory of the NUMA exporter against node_exporter's meminfo_numa collector.

    python3 tools/bench_exporter.py [--scrapes N]

Both serve on loopback, side by side in one run, and are scraped in turn (A B A B ...) over kept-
alive connections, as Prometheus scrapes; each scrape's wall time is taken by the client. Two
machines: this host's own /sys, and a made-up sysfs tree of 256 CPUs on 8 NUMA nodes (meminfo and
numastat as a kernel writes them, two huge page sizes). Prints the median and 90th percentile per
scrape, the ratio of the medians and each server's resident memory after the run; it judges
nothing (figures, not a test that could flake). node_exporter is Debian trixie's 1.9.0
(prometheus-node-exporter), run with only its meminfo_numa collector; the NUMA exporter is the
numa_exporter role's script (the node agent serves the same code) without kubelet data.
"""

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_EXPORTER = ("prometheus-node-exporter=1.9.0-1+b4", "prometheus-node-exporter")
MEMINFO_KEYS = ("MemTotal MemFree MemUsed SwapCached Active Inactive Active(anon) Inactive(anon) Active(file) "
                "Inactive(file) Unevictable Mlocked Dirty Writeback FilePages Mapped AnonPages Shmem KernelStack "
                "PageTables SecPageTables NFS_Unstable Bounce WritebackTmp KReclaimable Slab SReclaimable SUnreclaim "
                "AnonHugePages ShmemHugePages ShmemPmdMapped FileHugePages FilePmdMapped HugePages_Total "
                "HugePages_Free HugePages_Surp").split()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def synthetic_sysfs(root, cpus=256, nodes=8):
    """A sysfs tree of ``cpus`` CPUs on ``nodes`` NUMA nodes, node files as a 6.x kernel writes them."""
    per = cpus // nodes
    write(os.path.join(root, "devices/system/cpu/online"), "0-%d\n" % (cpus - 1))
    write(os.path.join(root, "devices/system/node/online"), "0-%d\n" % (nodes - 1))
    write(os.path.join(root, "devices/system/node/possible"), "0-%d\n" % (nodes - 1))
    for node in range(nodes):
        base = os.path.join(root, "devices/system/node/node%d" % node)
        write(os.path.join(base, "cpulist"), "%d-%d\n" % (node * per, node * per + per - 1))
        lines = []
        for number, key in enumerate(MEMINFO_KEYS):
            value = 64 * 2 ** 20 // (number + 1)
            unit = "" if key.startswith("HugePages_") else " kB"
            lines.append("Node %d %-16s %8d%s" % (node, key + ":", value, unit))
        write(os.path.join(base, "meminfo"), "\n".join(lines) + "\n")
        write(os.path.join(base, "numastat"), "numa_hit 123456789\nnuma_miss 1234\nnuma_foreign 4321\n"
              "interleave_hit 42\nlocal_node 123450000\nother_node 6789\n")
        write(os.path.join(base, "distance"), " ".join("10" if n == node else "21" for n in range(nodes)) + "\n")
        for size in ("2048kB", "1048576kB"):
            folder = os.path.join(base, "hugepages/hugepages-%s" % size)
            write(os.path.join(folder, "nr_hugepages"), "64\n")
            write(os.path.join(folder, "free_hugepages"), "60\n")
            write(os.path.join(folder, "surplus_hugepages"), "0\n")
    return root


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_listening(port, process, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit("a server exited at start: %s" % process.args)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("a server did not listen within %d s: %s" % (timeout, process.args))


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def start_servers(sysfs, workdir):
    kubelet = os.path.join(workdir, "kubelet")
    os.makedirs(kubelet, exist_ok=True)
    lib = os.path.join(workdir, "lib")  # the collection importable as ansible_collections.numa.kube
    os.makedirs(os.path.join(lib, "ansible_collections", "numa"))
    os.symlink(ROOT, os.path.join(lib, "ansible_collections", "numa", "kube"))
    ours_port, theirs_port = free_port(), free_port()
    ours = subprocess.Popen([sys.executable, os.path.join(ROOT, "roles", "numa_exporter", "files", "numa_exporter.py"),
                             "--listen-address", "127.0.0.1", "--port", str(ours_port), "--sysfs-root", sysfs,
                             "--kubelet-root", kubelet, "--lib", lib],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    theirs = subprocess.Popen([os.path.join(ROOT, "tools", "trixie-bin"), NODE_EXPORTER[0], NODE_EXPORTER[1],
                               "--collector.disable-defaults", "--collector.meminfo_numa",
                               "--path.sysfs=" + sysfs, "--web.listen-address=127.0.0.1:%d" % theirs_port],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(ours_port, ours)
    wait_listening(theirs_port, theirs, timeout=120)
    return (ours, ours_port), (theirs, theirs_port)


def server_pid(process):
    """The server's own pid (trixie-bin execs, so it is the launcher's)."""
    return process.pid


def bench(sysfs, scrapes, label):
    with tempfile.TemporaryDirectory() as workdir:
        (ours, ours_port), (theirs, theirs_port) = start_servers(sysfs, workdir)
        try:
            connections = {"numa-exporter": http.client.HTTPConnection("127.0.0.1", ours_port, timeout=30),
                           "node_exporter meminfo_numa": http.client.HTTPConnection("127.0.0.1", theirs_port,
                                                                                    timeout=30)}
            times = dict((name, []) for name in connections)
            sizes = {}
            for round_number in range(scrapes + 20):
                for name, conn in connections.items():
                    started = time.perf_counter()
                    conn.request("GET", "/metrics")
                    body = conn.getresponse().read()
                    elapsed = time.perf_counter() - started
                    if round_number >= 20:  # the first scrapes warm up both
                        times[name].append(elapsed)
                    sizes[name] = (len(body), body.count(b"\n"))
            print("%s (%d scrapes each, alternating):" % (label, scrapes))
            medians = {}
            for name, process in (("numa-exporter", ours), ("node_exporter meminfo_numa", theirs)):
                values = sorted(times[name])
                medians[name] = statistics.median(values)
                print("  %-28s median %6.3f ms  p90 %6.3f ms  RSS %5.1f MiB  (%d bytes, %d lines a scrape)"
                      % (name, medians[name] * 1e3, values[int(len(values) * 0.9)] * 1e3,
                         rss_mib(server_pid(process)), sizes[name][0], sizes[name][1]))
            print("  ratio of the medians (numa-exporter / node_exporter): %.2f"
                  % (medians["numa-exporter"] / medians["node_exporter meminfo_numa"]))
        finally:
            for process in (ours, theirs):
                process.terminate()
                process.wait(30)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=300, help="scrapes of each exporter per machine (default 300)")
    args = parser.parse_args(argv)
    bench("/sys", args.scrapes, "this host (/sys)")
    with tempfile.TemporaryDirectory() as tree:
        bench(synthetic_sysfs(os.path.join(tree, "sys")), args.scrapes, "synthetic 256 CPUs, 8 NUMA nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
