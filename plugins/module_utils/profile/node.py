# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the profile's planner reads on a node (or in a recorded tree of one) besides its topology:
the kernel release, and which thread of each core stays online when SMT is turned off. Then the
node_profile module's whole task: read, plan, report."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import parse_kubelet_version
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader, format_cpu_list, parse_cpu_list, read_file
from ansible_collections.numa.kube.plugins.module_utils.profile.files import (
    AFFINITY_DROPIN, ALLOCATION_SECONDS, IRQBALANCE_DROPIN, IRQBALANCE_ENV_FILES, SCRIPT, affinity_dropin, hugepage_files, irqbalance_dropin)
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import ProfileError, cores_of, plan
from ansible_collections.numa.kube.plugins.module_utils.quantity import Quantity, QuantityError

_FIELD = re.compile(r"^([a-z ]+?)\s*:\s*(\S*)")


def parse_release(text):
    """``6.1.0-28-amd64`` -> (6, 1, 0); None when it does not start with numbers."""
    match = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(part or 0) for part in match.groups()) if match else None


def primary_threads(cpuinfo_text, cores):
    """The thread of each core that ``nosmt`` keeps online, from /proc/cpuinfo's APIC ids: on x86 the
    kernel keeps the thread whose APIC id has its SMT bits clear, which is the lowest APIC id among
    a core's siblings. None when any online CPU shows no APIC id (other architectures)."""
    apic = {}
    processor = None
    for line in (cpuinfo_text or "").splitlines():
        match = _FIELD.match(line)
        if not match:
            continue
        key, value = match.group(1), match.group(2)
        if key == "processor" and value.isdigit():
            processor = int(value)
        elif key == "apicid" and processor is not None and value.isdigit():
            apic[processor] = int(value)
    if not all(cpu in apic for threads in cores.values() for cpu in threads):
        return None
    return sorted(min(threads, key=lambda cpu: apic[cpu]) for threads in cores.values())


def kernel_config(text):
    """{CONFIG_NAME: value} of a kernel's build configuration (``/boot/config-<release>``)."""
    result = {}
    for line in (text or "").splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name.startswith("CONFIG_"):
            result[name] = value.strip('"')
    return result


def _reserved_memory(raw, node_ids):
    """{NUMA node: bytes} from {node: quantity}; ValueError naming the entry: a node id of this machine
    given once, a quantity of memory of at least zero."""
    result = {}
    for node, value in (raw or {}).items():
        try:
            number = int(str(node))
            quantity = Quantity.parse(value if isinstance(value, int) else str(value))
        except (ValueError, QuantityError) as exc:
            raise ValueError("reserved_memory: %r: %r is not a NUMA node id with a memory quantity such as 1Gi (%s)"
                             % (node, value, exc))
        if number not in node_ids:
            raise ValueError("reserved_memory: %r is not a NUMA node of this machine (nodes: %s)"
                             % (node, ", ".join(str(n) for n in node_ids)))
        if number in result:
            raise ValueError("reserved_memory: NUMA node %d is given twice (%r); give each node once" % (number, node))
        if quantity.value < 0:
            raise ValueError("reserved_memory: %r: %r is negative; give the memory reserved there, 0 or more"
                             % (node, value))
        result[number] = int(quantity.value)
    return result


def run(params):
    """The node_profile module's task: (result, None) or (None, ProfileError)."""
    reader = SysfsReader(params["sysfs_root"], params["procfs_root"])
    topology = reader.read(include_pci=False)
    cores = cores_of(topology)
    kernel_release = params.get("kernel_release")
    if kernel_release in (None, ""):
        kernel_release = (read_file(os.path.join(params["procfs_root"], "sys/kernel/osrelease")) or "").strip() or None
    kubelet_version = parse_kubelet_version(params.get("kubelet_version") or "")
    if params.get("kubelet_version") and kubelet_version is None:
        return None, ProfileError("kubelet_version: %r is not a version such as 1.36.3 or v1.36.3"
                                  % params["kubelet_version"])
    try:
        reserved_memory = _reserved_memory(params.get("reserved_memory"), [node["id"] for node in topology["nodes"]])
    except ValueError as exc:
        return None, ProfileError(str(exc))
    primaries = primary_threads(read_file(os.path.join(params["procfs_root"], "cpuinfo")), cores)
    cpu_dir = os.path.join(params["sysfs_root"], "devices/system/cpu")
    present = read_file(os.path.join(cpu_dir, "present"))
    try:
        offline = sorted(set(parse_cpu_list(present)) - set(cpu["id"] for cpu in topology["cpus"])) if present else []
    except ValueError:
        offline = []
    smt_control = (read_file(os.path.join(cpu_dir, "smt/control")) or "").strip() or None
    config_path = params.get("kernel_config") or ("/boot/config-%s" % kernel_release if kernel_release else None)
    config_text = read_file(config_path) if config_path else None
    try:
        planned = plan(topology, params["profile"], kubelet_version=kubelet_version,
                       kernel_release=parse_release(kernel_release), kernel_args=params.get("kernel_args") or (),
                       primary_threads=primaries, reserved_memory=reserved_memory, offline_cpus=offline,
                       smt_control=smt_control, kernel_config=kernel_config(config_text) if config_text else None)
    except ProfileError as exc:
        return None, exc
    asked = dict((arg.split("=", 1)[0], arg) for arg in params.get("kernel_args") or ())
    clashes = ["%s (the profile sets %s)" % (asked[arg.split("=", 1)[0]], arg)
               for arg in planned["kernel_args"] if arg.split("=", 1)[0] in asked]
    if clashes:
        return None, ProfileError("kernel_args also sets what the profile sets: %s; leave those out of the kernel "
                                  "parameters asked for (kernel_args_present), the profile decides them"
                                  % ", ".join(clashes))
    planned["smt"] = {
        "on": any(len(threads) > 1 for threads in cores.values()),
        "primary_threads": format_cpu_list(primaries) if primaries is not None else None,
    }
    planned["kernel_release"] = kernel_release
    irqbalance = params.get("irqbalance")
    try:
        planned["files"] = profile_files(planned, params.get("kubelet_service") or "kubelet", irqbalance)
    except ProfileError as exc:
        return None, exc
    # irqbalance restarts on its drop-in only where it runs (a stopped one stays stopped)
    planned["irqbalance_active"] = bool(irqbalance and irqbalance.get("active") in ("active", "activating", "reloading"))
    # each NUMA node's pages of each planned size before the change, which a rollback puts back
    counts = dict((node["id"], dict((info.get("page_size_bytes"), info.get("total", 0))
                                    for info in (node.get("hugepages") or {}).values()))
                  for node in topology["nodes"])
    for page in planned["hugepages"]:
        page["before"] = counts.get(page["node"], {}).get(page["size_kb"] * 1024, 0)
    return planned, None


def parse_irqbalance_version(text):
    """``irqbalance version 1.9.2`` -> (1, 9, 2); None when the text shows no version."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(part or 0) for part in match.groups()) if match else None


def profile_files(planned, service, irqbalance=None):
    """Every file the profile puts on the node, each {path, content, mode}: the huge page allocator,
    its units and the drop-in of kubelet's ``service`` that requires them; systemd's CPUAffinity;
    and, where irqbalance's unit is loaded (``irqbalance``: what the node says of it, None where it
    was not asked, as for a recorded tree), the drop-in of its service that bans the isolated CPUs.
    ``irqbalance``: {load: LoadState, active: ActiveState, version: ``irqbalance --version``'s
    output, env_path and env_text: its environment file, where it has one}."""
    found = dict(hugepage_files(planned["hugepages"], service + ".service",
                                planned.get("hugepages_seconds", ALLOCATION_SECONDS)))
    found[AFFINITY_DROPIN] = affinity_dropin(planned["cpu_affinity"])
    # a masked irqbalance is one the machine's owner turned off: nothing to ban from it
    if irqbalance and irqbalance.get("load") == "loaded":
        found[IRQBALANCE_DROPIN] = irqbalance_dropin(
            parse_cpu_list(planned["irqbalance_banned_cpus"]), parse_irqbalance_version(irqbalance.get("version")),
            irqbalance.get("env_path"), irqbalance.get("env_text"))
    return [{"path": path, "content": text, "mode": "0755" if path == SCRIPT else "0644"}
            for path, text in sorted(found.items())]


def irqbalance_on_node(run_command, which):
    """What the node says of irqbalance, for profile_files: ``run_command(argv) -> (rc, out, err)``
    and ``which(name) -> path or None`` are the module's."""
    rc, out, _err = run_command(["systemctl", "show", "-p", "LoadState,ActiveState", "irqbalance.service"])
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}
    binary = which("irqbalance")
    env_path = next((path for path in IRQBALANCE_ENV_FILES if os.path.exists(path)), None)
    return {"load": values.get("LoadState", ""), "active": values.get("ActiveState", ""),
            "version": run_command([binary, "--version"])[1] if binary else None,
            "env_path": env_path, "env_text": read_file(env_path) if env_path else None}
