# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scrape time and memory of the NUMA exporter: its node metrics against node_exporter's
meminfo_numa collector, and its per-container families against the floor.

    python3 tools/bench_exporter.py [--scrapes N] [--container-scrapes N] [--collection DIR]

Node metrics: both exporters serve on loopback, side by side in one run, and are scraped in turn
(A B A B ...) over kept-alive connections, as Prometheus scrapes; each scrape's wall time is taken
by the client. Machines: this host's own /sys, and made-up sysfs trees (meminfo and numastat as a
6.x kernel writes them, two huge page sizes, each CPU's topology): 256 CPUs on 8 NUMA nodes with
hyperthreads, 16 NUMA nodes of 8 CPUs, and 2 nodes with CPUs plus 2 memory-only nodes (CPU-less,
as CXL memory shows up). Prints the median and 90th percentile per scrape, the ratio of the
medians and each server's resident memory after the run. node_exporter is Debian trixie's 1.9.0
(prometheus-node-exporter, fetched by tools/trixie-bin), run with only its meminfo_numa
collector; the NUMA exporter runs as the numa_exporter role's systemd unit starts it (the node
agent's program packed by roles/numa_exporter/files/bundle.py; the role's own script in trees from
before that), with no kubelet data.

Per-container families: a kubelet cgroup v2 tree (systemd driver: kubepods.slice, QoS slices,
pod slices, a sandbox and a container scope per pod, each folder with its control files,
memory.numa_stat over 8 NUMA nodes, cpuset.cpus.effective) of 10, 110 and 500 named containers.
Three processes take turns, each timing its own scrape: the exporter's code as the node agent calls
it each scrape (the container map, the names, the whole exposition as bytes), the same with its
container map walked again every scrape (what pods that come and go cost), and the floor, a plain
loop that walks the same tree and reads and renders the same files every scrape. Prints the
medians, the ratios and each process's resident memory. Figures only: nothing is judged (a timing cannot gate).
"""

import argparse
import hashlib
import http.client
import json
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
                "AnonHugePages ShmemHugePages ShmemPmdMapped FileHugePages FilePmdMapped Unaccepted HugePages_Total "
                "HugePages_Free HugePages_Surp").split()
# memory.numa_stat rows as a 6.x kernel writes them (mm/memcontrol.c, memory_stats with a per-node value)
NUMA_STAT_ROWS = ("anon file kernel_stack pagetables sec_pagetables shmem file_mapped file_dirty file_writeback "
                  "swapcached anon_thp file_thp shmem_thp inactive_anon active_anon inactive_file active_file "
                  "unevictable slab_reclaimable slab_unreclaimable workingset_refault_anon workingset_refault_file "
                  "workingset_activate_anon workingset_activate_file workingset_restore_anon "
                  "workingset_restore_file workingset_nodereclaim").split()
# a cgroup v2 folder's interface files with the cpu, cpuset, io, memory, pids and hugetlb controllers on
CGROUP_FILES = ("cgroup.controllers cgroup.events cgroup.freeze cgroup.kill cgroup.max.depth "
                "cgroup.max.descendants cgroup.pressure cgroup.procs cgroup.stat cgroup.subtree_control "
                "cgroup.threads cgroup.type cpu.idle cpu.max cpu.max.burst cpu.pressure cpu.stat cpu.weight "
                "cpu.weight.nice cpuset.cpus cpuset.cpus.effective cpuset.cpus.partition cpuset.mems "
                "cpuset.mems.effective hugetlb.1GB.current hugetlb.1GB.events hugetlb.1GB.max "
                "hugetlb.2MB.current hugetlb.2MB.events hugetlb.2MB.max io.max io.pressure io.stat io.weight "
                "memory.current memory.events memory.events.local memory.high memory.low memory.max memory.min "
                "memory.numa_stat memory.oom.group memory.peak memory.pressure memory.reclaim memory.stat "
                "memory.swap.current memory.swap.events memory.swap.high memory.swap.max pids.current "
                "pids.events pids.max pids.peak").split()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def cpu_list(cpus):
    """The kernel's list format (0-3,8-11) of a sorted list of CPU ids."""
    ranges, start = [], None
    for index, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if index + 1 == len(cpus) or cpus[index + 1] != cpu + 1:
            ranges.append("%d" % start if start == cpu else "%d-%d" % (start, cpu))
            start = None
    return ",".join(ranges)


def synthetic_sysfs(root, node_cpus, distances=None, sockets=2):
    """A sysfs tree: ``node_cpus`` lists each NUMA node's CPU ids (empty for a memory-only node, which
    the kernel lists in has_memory but not in has_cpu). CPU n and n + half of all CPUs are one core's
    two hyperthreads, as x86 servers number them."""
    nodes = len(node_cpus)
    every = sorted(cpu for cpus in node_cpus for cpu in cpus)
    half = len(every) // 2
    write(os.path.join(root, "devices/system/cpu/online"), cpu_list(every) + "\n")
    write(os.path.join(root, "devices/system/cpu/possible"), cpu_list(every) + "\n")
    with_cpus = [n for n in range(nodes) if node_cpus[n]]
    for name, ids in (("online", range(nodes)), ("possible", range(nodes)), ("has_memory", range(nodes)),
                      ("has_normal_memory", range(nodes)), ("has_cpu", with_cpus)):
        write(os.path.join(root, "devices/system/node", name), cpu_list(list(ids)) + "\n")
    for node, cpus in enumerate(node_cpus):
        base = os.path.join(root, "devices/system/node/node%d" % node)
        write(os.path.join(base, "cpulist"), cpu_list(cpus) + "\n")
        lines = []
        for number, key in enumerate(MEMINFO_KEYS):
            value = 64 * 2 ** 20 // (number + 1)
            unit = "" if key.startswith("HugePages_") else " kB"
            lines.append("Node %d %-16s %8d%s" % (node, key + ":", value, unit))
        write(os.path.join(base, "meminfo"), "\n".join(lines) + "\n")
        write(os.path.join(base, "numastat"), "numa_hit 123456789\nnuma_miss 1234\nnuma_foreign 4321\n"
              "interleave_hit 42\nlocal_node 123450000\nother_node 6789\n")
        row = distances[node] if distances else [10 if n == node else 21 for n in range(nodes)]
        write(os.path.join(base, "distance"), " ".join(str(d) for d in row) + "\n")
        for size in ("2048kB", "1048576kB"):
            folder = os.path.join(base, "hugepages/hugepages-%s" % size)
            write(os.path.join(folder, "nr_hugepages"), "64\n")
            write(os.path.join(folder, "free_hugepages"), "60\n")
            write(os.path.join(folder, "surplus_hugepages"), "0\n")
        for cpu in cpus:
            core = cpu % half if half else cpu
            folder = os.path.join(root, "devices/system/cpu/cpu%d" % cpu)
            write(os.path.join(folder, "online"), "1\n")
            write(os.path.join(folder, "topology/physical_package_id"), "%d\n" % (node * sockets // max(len(with_cpus), 1)))
            write(os.path.join(folder, "topology/core_id"), "%d\n" % core)
            siblings = sorted(c for c in (core, core + half) if c in every)
            write(os.path.join(folder, "topology/thread_siblings_list"), cpu_list(siblings) + "\n")
            write(os.path.join(folder, "topology/core_cpus_list"), cpu_list(siblings) + "\n")
    return root


def hyperthreaded(nodes, cores_per_node):
    """Each node's CPUs as x86 servers number them: cores first, their second threads after all cores."""
    total = nodes * cores_per_node
    return [list(range(n * cores_per_node, (n + 1) * cores_per_node))
            + list(range(total + n * cores_per_node, total + (n + 1) * cores_per_node)) for n in range(nodes)]


def shapes():
    """(label, short label, builder of the tree under a folder) of each made-up machine."""
    cxl = [[10, 21, 14, 24], [21, 10, 24, 14], [14, 24, 10, 26], [24, 14, 26, 10]]
    return [
        ("synthetic 256 CPUs with hyperthreads, 8 NUMA nodes", "8 nodes, 256 CPUs",
         lambda root: synthetic_sysfs(root, hyperthreaded(8, 16))),
        ("synthetic 128 CPUs with hyperthreads, 16 NUMA nodes", "16 nodes",
         lambda root: synthetic_sysfs(root, hyperthreaded(16, 4), sockets=2)),
        ("synthetic 2 NUMA nodes with 64 CPUs + 2 memory-only (CXL) nodes", "2 + 2 memory-only nodes",
         lambda root: synthetic_sysfs(root, hyperthreaded(2, 16) + [[], []], cxl)),
    ]


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


def collection_lib(root, workdir):
    """A folder holding the collection at ``root`` as ansible_collections.numa.kube."""
    lib = os.path.join(workdir, "lib")
    os.makedirs(os.path.join(lib, "ansible_collections", "numa"), exist_ok=True)
    link = os.path.join(lib, "ansible_collections", "numa", "kube")
    target = os.path.realpath(root)
    try:
        os.symlink(target, link)
    except FileExistsError:  # made already: by race() before the sides started, or by an earlier call
        if os.path.realpath(link) != target:
            raise SystemExit("%s points elsewhere than %s: remove it" % (link, target))
    return lib


def exporter_command(root, workdir, sysfs, kubelet, port):
    """How the numa_exporter role runs the exporter from the collection at ``root``: the node agent's
    program packed into one file (roles/numa_exporter/files/bundle.py) as its systemd unit starts
    it, or, in a tree from before that, the role's own script."""
    script = os.path.join(root, "roles", "numa_exporter", "files", "numa_exporter.py")
    if os.path.exists(script):
        return [sys.executable, script, "--listen-address", "127.0.0.1", "--port", str(port), "--sysfs-root", sysfs,
                "--kubelet-root", kubelet, "--lib", collection_lib(root, workdir)]
    bundle = os.path.join(workdir, "numa-exporter.pyz")
    subprocess.check_call([sys.executable, os.path.join(root, "roles", "numa_exporter", "files", "bundle.py"), root,
                           bundle], stdout=subprocess.DEVNULL)
    return [sys.executable, "-I", bundle, "exporter", "--kubelet-data=checkpoints", "--checkpoint-dir", kubelet,
            "--authentication=none", "--cgroup-root=", "--pod-resources-socket=", "--containers", "all",
            "--listen-address", "127.0.0.1", "--port", str(port), "--sysfs", sysfs]


def start_servers(sysfs, workdir, root):
    kubelet = os.path.join(workdir, "kubelet")
    os.makedirs(kubelet, exist_ok=True)
    ours_port, theirs_port = free_port(), free_port()
    ours = subprocess.Popen(exporter_command(root, workdir, sysfs, kubelet, ours_port),
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


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * share), len(ordered) - 1)]


def bench(sysfs, scrapes, label, root, short):
    with tempfile.TemporaryDirectory() as workdir:
        (ours, ours_port), (theirs, theirs_port) = start_servers(sysfs, workdir, root)
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
                values = times[name]
                medians[name] = statistics.median(values)
                print("  %-28s median %6.3f ms  p90 %6.3f ms  RSS %5.1f MiB  (%d bytes, %d lines a scrape)"
                      % (name, medians[name] * 1e3, percentile(values, 0.9) * 1e3,
                         rss_mib(server_pid(process)), sizes[name][0], sizes[name][1]))
            print("  ratio of the medians (numa-exporter / node_exporter) on %s: %.2f (target 1.0 or less)"
                  % (short, medians["numa-exporter"] / medians["node_exporter meminfo_numa"]))
        finally:
            for process in (ours, theirs):
                process.terminate()
                process.wait(30)


# --- per-container families ------------------------------------------------------------------------

def _touch(folder, names):
    for name in names:
        os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_WRONLY, 0o644))


def _numa_stat(seed, nodes):
    lines = []
    for number, row in enumerate(NUMA_STAT_ROWS):
        lines.append(row + " " + " ".join("N%d=%d" % (n, ((seed * 7919 + number * 104729 + n * 13) % 5000) * 4096)
                                          for n in range(nodes)))
    return "\n".join(lines) + "\n"


def cgroup_tree(root, containers, nodes=8, cpus=256):
    """kubelet's cgroup v2 tree (systemd driver) with ``containers`` named containers, one per pod, each
    pod with its sandbox; {container id: (namespace, pod, container)} of the named ones."""
    top = os.path.join(root, "kubepods.slice")
    names = {}
    folders = [top]
    for qos in ("burstable", "besteffort"):
        folders.append(os.path.join(top, "kubepods-%s.slice" % qos))
    for folder in folders:
        os.makedirs(folder)
        _touch(folder, CGROUP_FILES)
    for number in range(containers):
        uid = hashlib.md5(b"pod%d" % number).hexdigest()
        uid = "%s_%s_%s_%s_%s" % (uid[:8], uid[8:12], uid[12:16], uid[16:20], uid[20:])
        qos = ("", "burstable", "besteffort")[number % 3]
        parent = top if not qos else os.path.join(top, "kubepods-%s.slice" % qos)
        pod = os.path.join(parent, "kubepods-%spod%s.slice" % (qos + "-" if qos else "", uid))
        os.makedirs(pod)
        _touch(pod, CGROUP_FILES)
        for kind in ("sandbox", "app"):
            cid = hashlib.sha256(b"%s%d" % (kind.encode(), number)).hexdigest()
            scope = os.path.join(pod, "cri-containerd-%s.scope" % cid)
            os.makedirs(scope)
            _touch(scope, CGROUP_FILES)
            with open(os.path.join(scope, "memory.numa_stat"), "w") as handle:
                handle.write(_numa_stat(number, nodes))
            exclusive = not qos and kind == "app"
            first = (number * 4) % cpus
            with open(os.path.join(scope, "cpuset.cpus.effective"), "w") as handle:
                handle.write("%d-%d\n" % (first, first + 3) if exclusive else "0-%d\n" % (cpus - 1))
            if kind == "app":
                names[cid] = ("team-%d" % (number % 7), "app-%d-%s" % (number, uid[:5]), "app")
    return names


def child(role, sysfs, cgroup, names_file, root):
    """One side of the per-container race, driven over stdin/stdout: 'scrape' times one scrape,
    'trace' lists the files one scrape opens, 'quit' ends."""
    with open(names_file) as handle:
        names = dict((cid, tuple(who)) for cid, who in json.load(handle).items())
    if role.startswith("exporter"):
        sys.path.insert(0, collection_lib(root, os.path.dirname(names_file)))
        sys.path.insert(0, os.path.join(root, "agent"))
        try:
            from numa_agent.metrics import numa_metrics, locality, server
        except ImportError:  # a tree from before the agent's metrics left module_utils
            from ansible_collections.numa.kube.plugins.module_utils import numa_metrics, metrics_server as server
            locality = sys.modules.get("ansible_collections.numa.kube.plugins.module_utils.numa_metrics_locality")
        if role == "exporter-walking" and locality is not None and hasattr(locality, "CgroupMap"):
            # the container map kept between scrapes: always stale here, as on a node whose pods churn (a
            # tree from before the map was kept walks every scrape anyway)
            locality.CgroupMap.stale = lambda self: True
        assert server  # what a serving exporter holds in memory too

        scraper = numa_metrics.Scraper(sysfs, cgroup)

        def scrape():
            # as the node agent's exporter does each scrape (agent/numa_agent/exporter.py): the
            # container map (one look at the tree where the code allows), the names kubelet's pods
            # give (PodNames' map), the exposition
            if hasattr(scraper, "cgroups"):
                cgroups = scraper.cgroups()
                return scraper.scrape(containers=names, cgroups=cgroups).encode("utf-8")
            numa_metrics.container_cgroups(cgroup)
            return scraper.scrape(containers=names).encode("utf-8")
    else:
        scrape = floor(sysfs, cgroup, names)
    for line in sys.stdin:
        command = line.strip()
        if command == "scrape":
            started = time.perf_counter()
            body = scrape()
            elapsed = time.perf_counter() - started
            print(json.dumps([elapsed, len(body), body.count(b"\n")]), flush=True)
        elif command == "trace":
            print(json.dumps(sorted(traced(scrape))), flush=True)
        else:
            return 0
    return 0


def traced(scrape):
    """The files one scrape opens (by os.open or open)."""
    import builtins
    seen = set()
    real_os_open, real_open = os.open, builtins.open

    def os_open(path, *args, **kwargs):
        seen.add(os.path.normpath(str(path)))
        return real_os_open(path, *args, **kwargs)

    def py_open(path, *args, **kwargs):
        seen.add(os.path.normpath(str(path)))
        return real_open(path, *args, **kwargs)

    os.open, builtins.open = os_open, py_open
    try:
        scrape()
    finally:
        os.open, builtins.open = real_os_open, real_open
    return seen


def floor(sysfs, cgroup, names):
    """The floor: each scrape walks kubelet's tree, reads each node's and each named container's files
    once and renders them, with nothing cached but the file names of the nodes."""
    node_dir = os.path.join(sysfs, "devices/system/node")
    plan = []
    for name in sorted(os.listdir(node_dir)):
        if name.startswith("node") and name[4:].isdigit():
            folder = os.path.join(node_dir, name)
            huge = [os.path.join(folder, "hugepages", size) for size in sorted(os.listdir(os.path.join(folder, "hugepages")))]
            plan.append((name[4:], folder + "/meminfo", folder + "/numastat",
                         [(size.rsplit("-", 1)[1], size + "/nr_hugepages", size + "/free_hugepages") for size in huge]))

    def read(path):
        handle = os.open(path, os.O_RDONLY)
        try:
            return os.read(handle, 65536).decode()
        finally:
            os.close(handle)

    def scrape():
        out = []
        for node, meminfo, numastat, huge in plan:
            for line in read(meminfo).split("\n"):
                parts = line.split()
                if len(parts) > 3 and parts[2] in ("MemTotal:", "MemFree:", "FilePages:"):
                    out.append('numa_node_memory_%s_bytes{numa_node="%s"} %d' % (parts[2][:-1], node, int(parts[3]) * 1024))
            for line in read(numastat).split("\n"):
                if line:
                    event, value = line.split(" ")
                    out.append('numa_node_numastat_pages_total{numa_node="%s",event="%s"} %s' % (node, event, value))
            for size, total, free in huge:
                out.append('numa_node_hugepages{numa_node="%s",size="%s"} %s' % (node, size, read(total).strip()))
                out.append('numa_node_hugepages_free{numa_node="%s",size="%s"} %s' % (node, size, read(free).strip()))
        stack = [cgroup + "/kubepods.slice"]
        while stack:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    name = entry.name
                    if name.endswith(".scope"):
                        who = names.get(name[15:-6])
                        if who is None:
                            continue
                        labels = 'namespace="%s",pod="%s",container="%s",numa_node="' % who
                        for line in read(entry.path + "/memory.numa_stat").split("\n"):
                            kind, _sep, rest = line.partition(" ")
                            if kind == "anon" or kind == "file":
                                for field in rest.split():
                                    node, _sep, value = field.partition("=")
                                    out.append('numa_container_memory_bytes{%s%s",type="%s"} %s'
                                               % (labels, node[1:], kind, value))
                    elif name.startswith("kubepods") and entry.is_dir():
                        stack.append(entry.path)
        return ("\n".join(out) + "\n").encode("utf-8")

    return scrape


def bench_containers(counts, scrapes, root):
    tmp = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # cgroupfs lives in memory, as tmpfs does
    with tempfile.TemporaryDirectory() as sysfs_dir:
        sysfs = synthetic_sysfs(os.path.join(sysfs_dir, "sys"), hyperthreaded(8, 16))
        for count in counts:
            with tempfile.TemporaryDirectory(dir=tmp) as workdir:
                cgroup = os.path.join(workdir, "cgroup")
                names = cgroup_tree(cgroup, count)
                names_file = os.path.join(workdir, "names.json")
                with open(names_file, "w") as handle:
                    json.dump(names, handle)
                race(count, scrapes, sysfs, cgroup, names_file, root)


def _short(path, sysfs, cgroup):
    for base, name in ((sysfs, "sys"), (cgroup, "cgroup")):
        if path.startswith(base + "/"):
            return name + path[len(base):]
    return path


def race(count, scrapes, sysfs, cgroup, names_file, root):
    collection_lib(root, os.path.dirname(names_file))  # once, before the sides start together
    sides = {}
    for role in ("exporter", "exporter-walking", "floor"):
        sides[role] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", role, "--sysfs", sysfs,
                                        "--cgroup", cgroup, "--names", names_file, "--collection", root],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True)

    def ask(role, command):
        sides[role].stdin.write(command + "\n")
        sides[role].stdin.flush()
        answer = sides[role].stdout.readline()
        if not answer:
            raise SystemExit("the %s side of the per-container bench stopped (%s)" % (role, command))
        return json.loads(answer)

    try:
        files = dict((role, set(ask(role, "trace"))) for role in sides)
        times = dict((role, []) for role in sides)
        sizes = {}
        for number in range(scrapes + 10):
            for role in sides:
                elapsed, size, lines = ask(role, "scrape")
                sizes[role] = (size, lines)
                if number >= 10:
                    times[role].append(elapsed)
        print("%d containers in kubelet's cgroup tree, 8 NUMA nodes (%d scrapes each, alternating):" % (count, scrapes))
        for role in ("exporter", "exporter-walking", "floor"):
            print("  %-16s median %7.3f ms  p90 %7.3f ms  RSS %5.1f MiB  (%d bytes, %d lines a scrape, %d files read)"
                  % (role, statistics.median(times[role]) * 1e3, percentile(times[role], 0.9) * 1e3,
                     rss_mib(sides[role].pid), sizes[role][0], sizes[role][1], len(files[role])))
        for role, other in (("exporter", "floor"), ("floor", "exporter"), ("exporter-walking", "exporter")):
            extra = sorted(_short(path, sysfs, cgroup) for path in files[role] - files[other])
            if extra:
                more = " and %d more" % (len(extra) - 4) if len(extra) > 4 else ""
                print("  only the %s reads %s%s" % (role, ", ".join(extra[:4]), more))
        floor_median = statistics.median(times["floor"])
        print("  ratio of the medians (exporter / floor) at %d containers: %.2f (target 1.5 or less at 110 and 500)"
              % (count, statistics.median(times["exporter"]) / floor_median))
        print("  ratio of the medians (exporter walking every scrape / floor) at %d containers: %.2f"
              % (count, statistics.median(times["exporter-walking"]) / floor_median))
        print("  exporter RSS at %d containers: %.1f MiB (target 30 MiB or less at 500)" % (count, rss_mib(sides["exporter"].pid)))
    finally:
        for process in sides.values():
            try:
                process.stdin.write("quit\n")
                process.stdin.close()
            except OSError:
                pass
            process.wait(30)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=300, help="scrapes of each exporter per machine (default 300)")
    parser.add_argument("--container-scrapes", type=int, default=100,
                        help="scrapes of each side per container count (default 100)")
    parser.add_argument("--containers", default="10,110,500", help="container counts (default 10,110,500)")
    parser.add_argument("--only", choices=["node", "containers"], help="one half of the bench")
    parser.add_argument("--collection", default=ROOT, help="the collection's checkout to measure (default this one)")
    parser.add_argument("--child", choices=["exporter", "exporter-walking", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--sysfs", help=argparse.SUPPRESS)
    parser.add_argument("--cgroup", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.sysfs, args.cgroup, args.names, args.collection)
    if args.only != "containers":
        bench("/sys", args.scrapes, "this host (/sys)", args.collection, "this host")
        for label, short, build in shapes():
            with tempfile.TemporaryDirectory() as tree:
                bench(build(os.path.join(tree, "sys")), args.scrapes, label, args.collection, short)
            sys.stdout.flush()
    if args.only != "node":
        bench_containers([int(n) for n in args.containers.split(",") if n], args.container_scrapes, args.collection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
