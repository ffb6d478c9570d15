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
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader, format_cpu_list, read_file
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


def _reserved_memory(raw):
    """{NUMA node: bytes} from {node: quantity}; ValueError naming the entry."""
    result = {}
    for node, value in (raw or {}).items():
        try:
            number = int(node)
            quantity = Quantity.parse(str(value))
        except (ValueError, QuantityError) as exc:
            raise ValueError("reserved_memory: %r: %r is not a NUMA node id with a memory quantity such as 1Gi (%s)"
                             % (node, value, exc))
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
        reserved_memory = _reserved_memory(params.get("reserved_memory"))
    except ValueError as exc:
        return None, ProfileError(str(exc))
    primaries = primary_threads(read_file(os.path.join(params["procfs_root"], "cpuinfo")), cores)
    try:
        planned = plan(topology, params["profile"], kubelet_version=kubelet_version,
                       kernel_release=parse_release(kernel_release), kernel_args=params.get("kernel_args") or (),
                       primary_threads=primaries, reserved_memory=reserved_memory)
    except ProfileError as exc:
        return None, exc
    planned["smt"] = {
        "on": any(len(threads) > 1 for threads in cores.values()),
        "primary_threads": format_cpu_list(primaries) if primaries is not None else None,
    }
    planned["kernel_release"] = kernel_release
    return planned, None
