# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's performance profile, planned from the node's own topology before anything changes.

The profile splits the online CPUs in two: the reserved ones keep the system (services, kubelet,
containerd, interrupts, kernel threads) and the isolated ones are left to pods. From that split
follow kubelet's fields (the static CPU Manager with ``reservedSystemCPUs``), the kernel parameters
(``isolcpus``, ``nohz_full``, ``rcu_nocbs``, ``irqaffinity``), irqbalance's banned CPUs and
systemd's ``CPUAffinity``; huge pages are counted per size and NUMA node.

``plan`` takes the topology as ``numa.sysfs.SysfsReader.read`` gives it (so a recorded tree of a
machine the controller cannot reach plans the same) and the profile as the user declared it, and
returns the plan or raises ``ProfileError`` with every rule the profile breaks, each naming the
value, the rule and the fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import parse_kubelet_cpuset
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from ansible_collections.numa.kube.plugins.module_utils.quantity import bytes_quantity

# kubelet versions (k8s.io/kubernetes pkg/kubelet/cm/cpumanager/policy_options.go and the KEPs):
# strict-cpu-reservation (an option a configuration asks for, never on by itself) came in 1.32 as
# alpha, behind CPUManagerPolicyAlphaOptions; from 1.33 (beta) kubelet takes it without a feature
# gate, stable from 1.35. full-pcpus-only needs no gate in any kubelet numa.kube supports.
STRICT_CPU_RESERVATION_SINCE = (1, 33)
# the Topology Manager's max-allowable-numa-nodes: taken without a feature gate from 1.31 (beta)
MAX_ALLOWABLE_NUMA_NODES_SINCE = (1, 31)
# above this many NUMA nodes kubelet refuses a Topology Manager policy without that option
DEFAULT_MAX_NUMA_NODES = 8
# hugepages= in the per-node form ("0:2,1:4") came with Linux 5.16
HUGEPAGES_NODE_FORM_SINCE = (5, 16)
# pages this large or larger are gigantic: the buddy allocator cannot hand them out, so a runtime
# allocation depends on finding free contiguous memory and often fails on a machine that has run a
# while (the kernel's admin-guide/mm/hugetlbpage.rst); they are allocated at boot
GIGANTIC_PAGE_BYTES = 1 << 30

_SIZE = re.compile(r"^\s*([0-9]+)\s*(kB|KB|K|Ki|M|Mi|MB|G|Gi|GB)\s*\Z")
_SIZE_UNITS = {"kB": 1 << 10, "KB": 1 << 10, "K": 1 << 10, "Ki": 1 << 10, "M": 1 << 20, "Mi": 1 << 20, "MB": 1 << 20,
               "G": 1 << 30, "Gi": 1 << 30, "GB": 1 << 30}
# the kernel parameters that turn SMT off at the next boot: nosmt itself, and the mitigations that
# take it off with them (mitigations=auto,nosmt, mds=full,nosmt, l1tf=full, retbleed=...,nosmt...)
_NOSMT = re.compile(r"^(nosmt(=force)?|[a-z_]+=(?:[a-z_]+,)*nosmt(?:,[a-z_]+)*|l1tf=full(,force)?)\Z")
# the part of a node's memory huge pages and the system reservation together leave to the kernel
# and the pods' ordinary memory
MEMORY_LEFT = 10
# how long a huge page unit tries (compacting memory between tries) before it names the shortfall and
# holds kubelet back, unless the profile says otherwise (hugepages_seconds); and the most it may say
ALLOCATION_SECONDS = 60
ALLOCATION_SECONDS_MOST = 3600


class ProfileError(ProblemsError):
    """A profile that kubelet, the kernel or the node's memory would refuse."""


def page_size_bytes(text):
    """``2Mi``, ``2M``, ``2048kB``, ``1Gi`` -> bytes; ValueError otherwise."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError("%r is not a huge page size such as 2Mi or 1Gi" % (text,))
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


def size_name(size_bytes):
    """bytes -> the name kubelet gives the resource's size (2Mi, 1Gi), as the topology names it."""
    return bytes_quantity(size_bytes).canonical()


def _cpus(cpus):
    return format_cpu_list(cpus) or "(none)"


def cores_of(topology):
    """{first CPU of the core: [its online CPUs]}: the online SMT siblings that share one core."""
    online = set(cpu["id"] for cpu in topology["cpus"])
    cores = {}
    for cpu in topology["cpus"]:
        siblings = sorted(set(cpu.get("thread_siblings") or [cpu["id"]]) & online) or [cpu["id"]]
        cores.setdefault(siblings[0], siblings)
    return cores


def _version_at_least(version, since):
    """Whether a known kubelet version is ``since`` or newer (None: the version is not known)."""
    return None if version is None else tuple(version[:2]) >= since


def _cpu_list(problems, name, text):
    try:
        return sorted(parse_kubelet_cpuset(str(text).strip()))
    except ValueError as exc:
        problems.append("%s: %r is not a CPU list such as 0-1,8 (%s); write it as kubelet reads reservedSystemCPUs, "
                        "without spaces" % (name, text, exc))
        return None


def _reserved_per_node(problems, profile, topology, cores, node_cpus):
    """The reserved CPUs a count per NUMA node asks for: whole cores from the lowest-numbered up on
    each chosen node, and the first thread of a core before its siblings."""
    count = profile.get("reserved_per_node")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        problems.append("reserved_per_node: %r must be a whole number of CPUs of at least 1 (the system needs at "
                        "least one CPU on each NUMA node it is given)" % (count,))
        return None
    with_cpus = [node["id"] for node in topology["nodes"] if node_cpus.get(node["id"])]
    chosen = profile.get("reserved_nodes")
    if chosen is None:
        chosen = with_cpus
    unknown = [node for node in chosen if node not in with_cpus]
    if unknown:
        problems.append("reserved_nodes: NUMA node(s) %s have no online CPUs on this node (nodes with CPUs: %s); "
                        "name nodes from that list" % (", ".join(str(n) for n in unknown),
                                                       ", ".join(str(n) for n in with_cpus)))
        return None
    if not chosen:
        problems.append("reserved_nodes is empty: name at least one NUMA node to hold the reserved CPUs")
        return None
    reserved = []
    for node in chosen:
        mine = set(node_cpus[node])
        node_cores = sorted(first for first in cores if first in mine)
        if count >= len(mine):
            problems.append("reserved_per_node: %d CPUs on NUMA node %d would leave it no CPU to isolate (it has %d "
                            "online: %s); reserve fewer" % (count, node, len(mine), _cpus(mine)))
            continue
        # whole cores first: each core's threads together, in CPU order
        taken = []
        for first in node_cores:
            if len(taken) >= count:
                break
            taken.extend(cpu for cpu in cores[first] if cpu in mine)
        reserved.extend(taken[:count])
    return sorted(reserved)


def _split(problems, profile, topology, cores, node_cpus):
    """(reserved, isolated) as sorted lists, or (None, None) when they cannot be read."""
    online = sorted(cpu["id"] for cpu in topology["cpus"])
    if profile.get("reserved") not in (None, "") and profile.get("reserved_per_node") is not None:
        problems.append("reserved and reserved_per_node are both set: give the reserved CPUs either as a list or as "
                        "a count per NUMA node")
        return None, None
    if profile.get("reserved") not in (None, ""):
        if profile.get("reserved_nodes") is not None:
            problems.append("reserved_nodes applies to reserved_per_node only: the list in reserved names its CPUs "
                            "itself")
        reserved = _cpu_list(problems, "reserved", profile["reserved"])
    elif profile.get("reserved_per_node") is not None:
        reserved = _reserved_per_node(problems, profile, topology, cores, node_cpus)
    else:
        problems.append("the profile names no reserved CPUs: set reserved (a list such as 0,8) or reserved_per_node "
                        "(a count on each NUMA node); the system needs at least one")
        return None, None
    isolated_text = profile.get("isolated")
    if isolated_text in (None, "", "rest"):
        isolated = None if reserved is None else [cpu for cpu in online if cpu not in set(reserved)]
    else:
        isolated = _cpu_list(problems, "isolated", isolated_text)
    return reserved, isolated


def _check_split(problems, reserved, isolated, online, going=(), nosmt=None):
    online_set = set(online)
    if 0 in online_set and 0 not in set(reserved):
        problems.append("CPU 0 is not reserved: the kernel keeps the timekeeping tick on the boot CPU and drops it from "
                        "nohz_full ('Clearing 0 from nohz_full range for timekeeping'), so it cannot be isolated as "
                        "planned; reserve CPU 0 (reserved_nodes including its NUMA node, or a reserved list naming "
                        "it)")
    for name, cpus in (("reserved", reserved), ("isolated", isolated)):
        leaving = sorted(set(cpus) & set(going))
        if leaving:
            problems.append("%s: CPU(s) %s are secondary threads that go offline at the next boot (kernel parameter "
                            "%s), and kubelet would fail to start on reservedSystemCPUs naming one; name the threads "
                            "that stay online (%s)" % (name, _cpus(leaving), nosmt, _cpus(online)))
        offline = sorted(set(cpus) - online_set - set(going))
        if offline:
            problems.append("%s: CPU(s) %s are not online on this node (online: %s); kubelet fails to start with an "
                            "offline CPU in reservedSystemCPUs, and the kernel isolates nothing there: name online "
                            "CPUs only" % (name, _cpus(offline), _cpus(online)))
    if not reserved:
        problems.append("reserved is empty: the system (services, kubelet, interrupts) needs at least one CPU, and "
                        "kubelet's static CPU Manager at least one reserved CPU")
    if not isolated:
        problems.append("isolated is empty: every online CPU is reserved, so no pod could be given a CPU of its own; "
                        "reserve fewer CPUs")
    both = sorted(set(reserved) & set(isolated))
    if both:
        problems.append("CPU(s) %s are both reserved and isolated: a CPU is either kept for the system or given to "
                        "pods; take them out of one of the lists" % _cpus(both))
    neither = sorted(online_set - set(reserved) - set(isolated))
    if neither:
        problems.append("CPU(s) %s are neither reserved nor isolated: reserved and isolated together must name every "
                        "online CPU (%s); add them to one, or leave isolated as 'rest'" % (_cpus(neither), _cpus(online)))


def _check_cores(problems, reserved, isolated, cores, full_pcpus_only):
    """With full-pcpus-only, a core's threads all go one way: a reserved thread takes its siblings out
    of kubelet's exclusive pool anyway, and an isolated core shared with the system is not isolated."""
    if not full_pcpus_only:
        return
    reserved_set = set(reserved)
    split = []
    for first in sorted(cores):
        threads = cores[first]
        inside = [cpu for cpu in threads if cpu in reserved_set]
        if inside and len(inside) != len(threads):
            split.append("%s (core of %s)" % (_cpus(inside), _cpus(threads)))
    if split:
        problems.append("full-pcpus-only: reserved splits the SMT siblings of a core: %s; with full-pcpus-only a pod "
                        "gets whole cores, so reserve whole cores (all threads of each) or turn full_pcpus_only off"
                        % "; ".join(split))


def _after_reboot(problems, topology, cores, kernel_args, primary_threads):
    """The topology the profile is planned on: the node as it runs, or, when the run's kernel
    parameters turn SMT off (``nosmt``), the node as that boot leaves it, with only the thread of each
    core that stays online. kubelet fails to start when reservedSystemCPUs names an offline CPU
    ('unable to build the reserved physical CPUs from the reserved set'), and isolating a CPU that is
    gone isolates nothing. Returns (topology, {CPU going offline}, the parameter)."""
    planned = [arg for arg in kernel_args or () if _NOSMT.match(str(arg))]
    if not planned or all(len(threads) == 1 for threads in cores.values()):
        return topology, set(), None
    if primary_threads is None:
        problems.append("kernel parameter %s turns SMT off at the next boot, and which thread of each core then stays "
                        "online cannot be read on this node (no APIC ids); plan the profile in a run after the reboot "
                        "that turns SMT off" % planned[0])
        return topology, set(), planned[0]
    staying = set(primary_threads)
    going = set(cpu["id"] for cpu in topology["cpus"]) - staying
    after = dict(topology)
    after["cpus"] = [dict(cpu, thread_siblings=[sibling for sibling in cpu.get("thread_siblings") or [cpu["id"]]
                                                if sibling in staying])
                     for cpu in topology["cpus"] if cpu["id"] in staying]
    after["nodes"] = [dict(node, cpus=[cpu for cpu in node.get("cpus", []) if cpu in staying])
                      for node in topology["nodes"]]
    return after, going, planned[0]


def _hugepages(problems, profile, topology, kernel_release, reserved_memory):
    """Each entry {size, node, count} checked against the node's page sizes and memory; runtime pages
    (written to sysfs by a unit before kubelet) and boot pages (gigantic, on the command line)."""
    nodes = dict((node["id"], node) for node in topology["nodes"])
    planned, per_node = [], {}
    if profile.get("hugepages") and topology.get("numa_enabled") is False:
        problems.append("hugepages: this kernel shows no NUMA nodes (no /sys/devices/system/node), so there are no "
                        "per-node pools to fill; boot a kernel with NUMA support, or leave hugepages out")
        return []
    seen = set()
    for index, entry in enumerate(profile.get("hugepages") or []):
        where = "hugepages[%d]" % index
        if not isinstance(entry, dict):
            problems.append("%s: %r must be a mapping with size, node and count" % (where, entry))
            continue
        try:
            size = page_size_bytes(entry.get("size"))
        except ValueError as exc:
            problems.append("%s.size: %s" % (where, exc))
            continue
        node, count = entry.get("node"), entry.get("count")
        if isinstance(node, bool) or not isinstance(node, int) or node not in nodes:
            problems.append("%s.node: %r is not a NUMA node of this machine (nodes: %s)"
                            % (where, node, ", ".join(str(n) for n in sorted(nodes))))
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            problems.append("%s.count: %r must be a whole number of pages of at least 1" % (where, count))
            continue
        if (size, node) in seen:
            problems.append("%s: %s pages on NUMA node %d are given twice; give each size once per node"
                            % (where, size_name(size), node))
            continue
        seen.add((size, node))
        sizes = dict((info["page_size_bytes"], name) for name, info in nodes[node].get("hugepages", {}).items())
        if size not in sizes:
            problems.append("%s.size: this machine's kernel offers no %s pages on NUMA node %d (it offers: %s)"
                            % (where, size_name(size), node,
                               ", ".join(size_name(s) for s in sorted(sizes)) or "none"))
            continue
        per_node[node] = per_node.get(node, 0) + size * count
        planned.append({"node": node, "size": size_name(size), "size_kb": size // 1024, "count": count,
                        "at": "boot" if size >= GIGANTIC_PAGE_BYTES else "runtime"})
    for node, total in sorted(per_node.items()):
        memory = nodes[node].get("memory_total_bytes") or 0
        kept = (reserved_memory or {}).get(node, 0)
        if (total + kept) * 100 > memory * (100 - MEMORY_LEFT):
            problems.append("hugepages: %d MiB of huge pages on NUMA node %d%s leave less than a %s of its %d MiB of "
                            "memory to the kernel and the pods' ordinary memory; ask for fewer pages there, or put "
                            "some on another node"
                            % (total >> 20, node, " with the %d MiB reserved for the system" % (kept >> 20) if kept else "",
                               "tenth" if MEMORY_LEFT == 10 else "%d%%" % MEMORY_LEFT, memory >> 20))
    seconds = profile.get("hugepages_seconds", ALLOCATION_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= ALLOCATION_SECONDS_MOST:
        problems.append("hugepages_seconds: %r must be a whole number of seconds from 1 to %d (how long a huge page "
                        "unit tries before it holds kubelet back; default %d)"
                        % (seconds, ALLOCATION_SECONDS_MOST, ALLOCATION_SECONDS))
    boot = [page for page in planned if page["at"] == "boot"]
    if len(set(page["size"] for page in boot)) > 1:
        problems.append("hugepages: boot-time pages of more than one size (%s): the kernel command line can hold one "
                        "hugepagesz= and hugepages= pair that numa.kube manages; use one gigantic page size"
                        % ", ".join(sorted(set(page["size"] for page in boot))))
    elif boot and kernel_release is not None and tuple(kernel_release[:2]) < HUGEPAGES_NODE_FORM_SINCE:
        problems.append("hugepages: %s pages per NUMA node need the per-node form of hugepages= (node:count), which "
                        "Linux has from 5.16; this node runs %s. Use 2Mi pages, or a newer kernel"
                        % (boot[0]["size"], ".".join(str(part) for part in kernel_release)))
    return sorted(planned, key=lambda page: (page["node"], page["size_kb"]))


def _kubelet_fields(problems, profile, reserved, topology, kubelet_version):
    options = {}
    if profile.get("full_pcpus_only", True):
        options["full-pcpus-only"] = "true"
    strict = profile.get("strict_cpu_reservation")
    # unset: asked for where kubelet is known to take it without a feature gate
    supported = _version_at_least(kubelet_version, STRICT_CPU_RESERVATION_SINCE)
    if strict and supported is False:
        problems.append("strict_cpu_reservation: kubelet %s takes strict-cpu-reservation only from 1.33 without a "
                        "feature gate (1.32 has it behind CPUManagerPolicyAlphaOptions, older ones not at all); leave "
                        "strict_cpu_reservation unset or false there" % ".".join(str(part) for part in kubelet_version))
    elif strict or (strict is None and supported):
        options["strict-cpu-reservation"] = "true"
        if not profile.get("balance_isolated", True):
            problems.append("balance_isolated false with strict-cpu-reservation: the pods of kubelet's shared pool "
                            "would all run on isolated CPUs that the kernel's scheduler does not balance "
                            "(isolcpus=domain), and pile up on the first of them; keep balance_isolated true, or set "
                            "strict_cpu_reservation false")
    fields = {"cpuManagerPolicy": "static", "reservedSystemCPUs": format_cpu_list(reserved),
              "cpuManagerPolicyOptions": options}
    count = len(topology["nodes"])
    if count > DEFAULT_MAX_NUMA_NODES:
        # every kubelet numa.kube supports (1.32 on) has the option: an unknown one is given it
        if _version_at_least(kubelet_version, MAX_ALLOWABLE_NUMA_NODES_SINCE) is False:
            problems.append("this machine has %d NUMA nodes; kubelet %s refuses a Topology Manager policy above %d "
                            "and has max-allowable-numa-nodes only from 1.31: upgrade kubelet"
                            % (count, ".".join(str(part) for part in kubelet_version), DEFAULT_MAX_NUMA_NODES))
        else:
            fields["topologyManagerPolicyOptions"] = {"max-allowable-numa-nodes": str(count)}
    return fields


def _kernel_args(profile, reserved, isolated, hugepages):
    isolated_text, reserved_text = format_cpu_list(isolated), format_cpu_list(reserved)
    flags = "managed_irq," if profile.get("balance_isolated", True) else "domain,managed_irq,"
    args = ["isolcpus=%s%s" % (flags, isolated_text), "nohz_full=%s" % isolated_text,
            "rcu_nocbs=%s" % isolated_text, "irqaffinity=%s" % reserved_text]
    boot = [page for page in hugepages if page["at"] == "boot"]
    if boot:
        args.append("hugepagesz=%s" % boot[0]["size"][:-1])
        args.append("hugepages=%s" % ",".join("%d:%d" % (page["node"], page["count"]) for page in boot))
    return args


# what the kernel must be built with for each parameter to do anything (it ignores them otherwise)
KERNEL_OPTIONS = (("CONFIG_CPU_ISOLATION", "isolcpus"), ("CONFIG_NO_HZ_FULL", "nohz_full"),
                  ("CONFIG_RCU_NOCB_CPU", "rcu_nocbs"))


def _check_kernel_config(problems, kernel_config, kernel_release):
    """The running (or given) kernel's build options, when its config is known ({name: value})."""
    if kernel_config is None:
        return
    missing = ["%s (%s)" % (parameter, option) for option, parameter in KERNEL_OPTIONS
               if kernel_config.get(option) != "y"]
    if missing:
        problems.append("kernel %s is built without %s: the profile's parameters would be ignored; boot a kernel "
                        "built with them" % (kernel_release or "(unknown release)", ", ".join(missing)))


def _check_offline(problems, offline, smt_control):
    """CPUs present but offline come back at some boot: a profile planned without them would split
    their cores or leave them in neither set, and kubelet's CPU state would no longer match. Only
    the threads SMT control keeps offline (nosmt) are expected to stay so."""
    if offline and smt_control not in ("off", "forceoff"):
        problems.append("CPU(s) %s are present but offline (SMT control: %s): a profile planned without them would "
                        "leave them in neither set, or split their cores, once they come back; bring them online and "
                        "plan again" % (_cpus(offline), smt_control or "unknown"))


def plan(topology, profile, kubelet_version=None, kernel_release=None, kernel_args=(), primary_threads=None,
         reserved_memory=None, offline_cpus=(), smt_control=None, kernel_config=None):
    """The profile's plan for this node, or ProfileError with every rule it breaks.

    ``topology``: ``SysfsReader.read()``; ``profile``: reserved (a CPU list) or reserved_per_node (a
    count, on reserved_nodes or every node with CPUs), isolated (a CPU list, or "rest"),
    full_pcpus_only (default true), strict_cpu_reservation (default: asked for where kubelet is known
    to take it without a feature gate), balance_isolated (default true; false adds isolcpus' domain flag), hugepages (a list
    of {size, node, count}), hugepages_seconds (how long a runtime page unit tries). ``kubelet_version`` and ``kernel_release``: (major, minor, ...) when
    known; ``kernel_args``: the parameters the run will set (a planned ``nosmt``);
    ``primary_threads``: the CPUs that stay online with SMT off (lowest APIC id of each core);
    ``reserved_memory``: {NUMA node: bytes} kept for the system by kubelet's reservedMemory;
    ``offline_cpus``: CPUs present but offline, and ``smt_control`` (``/sys/devices/system/cpu/smt/control``):
    only those nosmt keeps offline are expected; ``kernel_config``: {CONFIG_...: value} of the kernel
    the profile boots, when known."""
    problems = []
    _check_offline(problems, sorted(offline_cpus or ()), smt_control)
    _check_kernel_config(problems, kernel_config, ".".join(str(part) for part in kernel_release or ()))
    topology, going, nosmt = _after_reboot(problems, topology, cores_of(topology), kernel_args, primary_threads)
    online = sorted(cpu["id"] for cpu in topology["cpus"])
    cores = cores_of(topology)
    node_cpus = dict((node["id"], [cpu for cpu in node.get("cpus", []) if cpu in set(online)])
                     for node in topology["nodes"])
    reserved, isolated = _split(problems, profile, topology, cores, node_cpus)
    full_pcpus_only = bool(profile.get("full_pcpus_only", True))
    if reserved is not None and isolated is not None:
        _check_split(problems, reserved, isolated, online, going, nosmt)
        _check_cores(problems, reserved, isolated, cores, full_pcpus_only)
    hugepages = _hugepages(problems, profile, topology, kernel_release, reserved_memory)
    kubelet = _kubelet_fields(problems, profile, reserved or [], topology, kubelet_version)
    if problems:
        raise ProfileError(problems, summary="the node profile cannot be applied on this node")
    reserved_by_node = dict((str(node), format_cpu_list(set(cpus) & set(reserved)))
                            for node, cpus in sorted(node_cpus.items()) if set(cpus) & set(reserved))
    return {
        "reserved": format_cpu_list(reserved),
        "isolated": format_cpu_list(isolated),
        "reserved_by_node": reserved_by_node,
        "kubelet": kubelet,
        "kernel_args": _kernel_args(profile, reserved, isolated, hugepages),
        "irqbalance_banned_cpus": format_cpu_list(isolated),
        "cpu_affinity": format_cpu_list(reserved),
        "hugepages": hugepages,
        "hugepages_seconds": profile.get("hugepages_seconds", ALLOCATION_SECONDS),
    }
