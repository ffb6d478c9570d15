# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What kubelet demands for the Memory Manager: the Node Allocatable reservation per memory type.

systemReserved + kubeReserved + the hard eviction threshold (which only ever adds ``memory``,
through ``memory.available``), read from the same settings kubelet reads, with each distribution's
default eviction thresholds and the EKS formulas.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.rules import go_duration
from ansible_collections.numa.kube.plugins.module_utils.quantity import (
    BINARY_SI,
    Quantity,
    QuantityError,
    bytes_quantity,
    parse_quantity,
    total,
)

MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
MIB = 2 ** 20

DISTRIBUTIONS = ("kubeadm", "rke2", "k3s", "eks")

# Resources kubelet accepts in kubeReserved / systemReserved (pkg/kubelet parseResourceList).
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")

# Eviction signals kubelet knows (pkg/kubelet/eviction signalToResource).
EVICTION_SIGNALS = (
    "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
    "imagefs.inodesFree", "containerfs.available", "containerfs.inodesFree", "pid.available",
    "allocatableMemory.available",
)

# The evictionHard each distribution runs with when the user sets none.
#  kubeadm: kubelet's built-in default; EKS: the kubelet-config.json of the EKS AMIs;
#  RKE2 and k3s: the eviction-hard flag they pass (no memory.available at all).
DEFAULT_EVICTION_HARD = {
    "kubeadm": {"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%",
                "nodefs.inodesFree": "5%", "imagefs.inodesFree": "5%"},
    "eks": {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
    "rke2": {"imagefs.available": "5%", "nodefs.available": "5%"},
    "k3s": {"imagefs.available": "5%", "nodefs.available": "5%"},
}
KUBELET_DEFAULT_EVICTION_HARD = DEFAULT_EVICTION_HARD["kubeadm"]

_HUGEPAGE_NAME = re.compile(r"^hugepages-(.+)$")


class ReservationError(ProblemsError):
    """A reservation input or layout that kubelet would refuse."""


def is_memory_type(name):
    return name == MEMORY or name.startswith(HUGEPAGES_PREFIX)


def hugepage_size(name):
    """The page size in bytes of a ``hugepages-<size>`` type, or None when it is not one."""
    match = _HUGEPAGE_NAME.match(name)
    if not match:
        return None
    try:
        size = Quantity.parse(match.group(1))
    except QuantityError:
        return None
    return size.as_int() if size.value > 0 else None


def _float32(value):
    """``value`` rounded to a float32, as Go's float32() does (too large: infinity)."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def eks_kube_reserved_memory(max_pods):
    """EKS AMIs: kubeReserved.memory = 11 MiB per pod + 255 MiB."""
    return bytes_quantity((11 * int(max_pods) + 255) * MIB)


def eks_kube_reserved_cpu(cpu_count):
    """EKS AMIs: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% of the rest.

    Computed per range in whole millicores, as nodeadm does.
    """
    total_milli = int(cpu_count) * 1000
    bounds = (0, 1000, 2000, 4000, max(total_milli, 4000))
    per_ten_thousand = (600, 100, 50, 25)
    reserved = 0
    for index, share in enumerate(per_ten_thousand):
        start, end = bounds[index], bounds[index + 1]
        if total_milli <= start:
            continue
        reserved += (min(total_milli, end) - start) * share // 10000
    return Quantity.parse("%dm" % reserved)


def parse_resource_map(values, what):
    """Parse kubeReserved / systemReserved as kubelet does; return {name: Quantity}."""
    result = {}
    problems = []
    for name, raw in sorted((values or {}).items()):
        if name not in RESERVABLE:
            hint = ""
            if name.startswith(HUGEPAGES_PREFIX):
                hint = (" kubelet cannot reserve huge pages through %s, so a hugepages entry in "
                        "reservedMemory can never match; reserve huge pages by not allocating "
                        "them to the node instead." % what)
            problems.append("%s.%s: kubelet refuses it with 'cannot reserve \"%s\" resource'; "
                            "only %s may be reserved.%s" % (what, name, name, ", ".join(RESERVABLE), hint))
            continue
        try:
            quantity = parse_quantity(raw, "%s.%s" % (what, name))
        except QuantityError as exc:
            problems.append("%s; write it as a Kubernetes quantity such as 1Gi or 500Mi" % exc)
            continue
        if quantity.value < 0:
            problems.append("%s.%s: %r is negative; kubelet refuses negative reservations "
                            "('resource quantity for \"%s\" cannot be negative')" % (what, name, raw, name))
            continue
        result[name] = quantity
    if problems:
        raise ReservationError(problems)
    return result


_PERCENTAGE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?%\Z")


def eviction_percentage(value, where):
    """The fraction kubelet reads from a percentage such as ``7.5%`` (its parsePercentage: a float32,
    divided by 100 in float32). numa.kube takes plain decimal numbers only."""
    if not _PERCENTAGE.match(value):
        raise ReservationError("%s: %r is not a percentage; write it like 5%% or 7.5%% (numa.kube takes plain "
                               "decimal percentages only, where kubelet would also read NaN, hexadecimal, "
                               "underscores or a repeated %%)" % (where, value))
    return _float32(_float32(float(value[:-1])) / 100.0)


def eviction_threshold(signal, value, where):
    """One hard or soft eviction threshold as kubelet parses it (parseThresholdStatement).

    Returns None for a threshold kubelet ignores (``0%`` and ``100%``), the fraction of a
    percentage, or the Quantity; raises ReservationError for what kubelet refuses.
    """
    if signal not in EVICTION_SIGNALS:
        raise ReservationError("%s: kubelet does not know the eviction signal %r ('unsupported eviction signal "
                               "%s'); use one of %s" % (where, signal, signal, ", ".join(EVICTION_SIGNALS)))
    if not isinstance(value, str):
        raise ReservationError("%s: %r must be a string such as 100Mi or 10%%" % (where, value))
    if value.endswith("%"):
        if value in ("0%", "100%"):
            return None
        fraction = eviction_percentage(value, where)
        if not 0 <= fraction <= 1:
            raise ReservationError("%s: %r is outside 0%%..100%%; kubelet refuses it ('eviction percentage threshold "
                                   "%s must be %s')" % (where, value, signal, ">= 0%" if fraction < 0 else "<= 100%"))
        return fraction
    try:
        quantity = parse_quantity(value, where)
    except QuantityError as exc:
        raise ReservationError("%s; write it as a quantity such as 100Mi or a percentage such as 5%%" % exc)
    if quantity.value <= 0:
        raise ReservationError("%s: %r must be positive (kubelet: 'eviction threshold %s must be positive'); use "
                               "0%% to switch the threshold off" % (where, value, signal))
    return quantity


def eviction_memory(value, memory_capacity, where):
    """The bytes a ``memory.available`` hard threshold reserves, or None when it is ignored.

    A percentage is resolved against the machine's memory capacity the way kubelet does: the
    number is parsed as float32 and divided by 100 in float32, then multiplied in float64 and
    truncated. ``0%`` and ``100%`` switch the threshold off.
    """
    threshold = eviction_threshold("memory.available", value, where)
    if threshold is None or isinstance(threshold, Quantity):
        return threshold
    if memory_capacity is None:
        raise ReservationError(
            "%s: %r is a percentage of the node's memory, which is unknown here; pass "
            "numa_node_memory (from numa.kube.topology_facts) or memory_capacity" % (where, value))
    return Quantity(int(float(memory_capacity) * threshold), BINARY_SI)


def eviction_problems(hard=None, soft=None, grace_periods=None, minimum_reclaim=None):
    """Every problem kubelet finds in its eviction settings when it starts (ParseThresholdConfig):
    hard and soft thresholds, a grace period for each soft one, and the minimum reclaims."""
    problems = []
    for field, statements in (("evictionHard", hard), ("evictionSoft", soft)):
        for signal, value in sorted((statements or {}).items()):
            try:
                eviction_threshold(signal, value, "%s.%s" % (field, signal))
            except ReservationError as exc:
                problems.extend(exc.problems)
    for signal, value in sorted((soft or {}).items()):
        if value in ("0%", "100%"):
            continue  # ignored, so it needs no grace period
        if signal in EVICTION_SIGNALS and signal not in (grace_periods or {}):
            problems.append("evictionSoft.%s: kubelet needs a grace period for it ('grace period must be specified "
                            "for the soft eviction threshold %s'); set evictionSoftGracePeriod.%s, e.g. 1m30s"
                            % (signal, signal, signal))
    for signal, value in sorted((grace_periods or {}).items()):
        where = "evictionSoftGracePeriod.%s" % signal
        if signal not in EVICTION_SIGNALS:
            problems.append("%s: kubelet does not know this eviction signal; use one of %s"
                            % (where, ", ".join(EVICTION_SIGNALS)))
            continue
        try:
            period = go_duration(value)
        except ValueError as exc:
            problems.append("%s: %r is not a duration such as 1m30s (kubelet: '%s')" % (where, value, exc))
            continue
        if period < 0:
            problems.append("%s: %r is negative (kubelet: 'invalid eviction grace period specified: %s, must be a "
                            "positive value')" % (where, value, value))
    for signal, value in sorted((minimum_reclaim or {}).items()):
        where = "evictionMinimumReclaim.%s" % signal
        if signal not in EVICTION_SIGNALS:
            problems.append("%s: kubelet does not know this eviction signal; use one of %s"
                            % (where, ", ".join(EVICTION_SIGNALS)))
            continue
        try:
            if value.endswith("%"):
                if eviction_percentage(value, where) <= 0:
                    problems.append("%s: %r must be positive (kubelet: 'eviction percentage minimum reclaim %s must "
                                    "be positive')" % (where, value, signal))
                continue
            if parse_quantity(value, where).value < 0:
                problems.append("%s: %r is negative (kubelet: 'negative eviction minimum reclaim specified for %s')"
                                % (where, value, signal))
        except (ReservationError, QuantityError) as exc:
            problems.extend(getattr(exc, "problems", [str(exc)]))
    return problems


def effective_settings(distribution="kubeadm", kube_reserved=None, system_reserved=None,
                       eviction_hard=None, merge_default_eviction_settings=False,
                       eks_max_pods=None, cpu_count=None):
    """Resolve the kubeReserved, systemReserved and evictionHard kubelet will run with.

    Returns (kube_reserved, system_reserved, eviction_hard, eviction_source) as plain dicts of
    strings, plus where the eviction settings came from.
    """
    if distribution not in DISTRIBUTIONS:
        raise ReservationError("distribution %r is not one of %s" % (distribution, ", ".join(DISTRIBUTIONS)))
    kube = {}
    if distribution == "eks":
        if eks_max_pods is not None:
            if isinstance(eks_max_pods, bool) or not 1 <= int(eks_max_pods) <= 2 ** 31 - 1:
                raise ReservationError("eks_max_pods %r must be a whole number from 1 to 2147483647 (the "
                                       "instance type's max pods; kubelet's maxPods is an int32)" % (eks_max_pods,))
            kube[MEMORY] = eks_kube_reserved_memory(eks_max_pods).canonical()
        if cpu_count:
            kube["cpu"] = eks_kube_reserved_cpu(cpu_count).canonical()
        kube["ephemeral-storage"] = "1Gi"
        if MEMORY not in (kube_reserved or {}) and MEMORY not in kube:
            raise ReservationError(
                "distribution eks: kubeReserved.memory comes from the instance type's max pods "
                "(11 * maxPods + 255 MiB); set eks_max_pods, or set kube_reserved.memory yourself")
    elif eks_max_pods is not None:
        raise ReservationError("eks_max_pods is only used with distribution eks, not %r" % distribution)
    kube.update(_stringify(kube_reserved))
    system = _stringify(system_reserved)
    defaults = DEFAULT_EVICTION_HARD[distribution]
    if eviction_hard is None:
        eviction = dict(defaults)
        source = "%s default" % distribution
    else:
        eviction = _stringify(eviction_hard)
        source = "eviction_hard"
        if merge_default_eviction_settings:
            merged = dict(KUBELET_DEFAULT_EVICTION_HARD)
            merged.update(eviction)
            eviction = merged
            source = "eviction_hard merged with kubelet defaults"
    for signal in sorted(eviction):
        if signal not in EVICTION_SIGNALS:
            raise ReservationError("eviction_hard.%s: kubelet does not know this signal; use one of %s"
                                   % (signal, ", ".join(EVICTION_SIGNALS)))
    return kube, system, eviction, source


def _stringify(values):
    """Copy a settings mapping with string keys, refusing booleans (YAML's yes/no) as values."""
    result = {}
    for key, value in (values or {}).items():
        if isinstance(value, bool):
            raise ReservationError("%s: %r is a boolean, not a quantity; quote it" % (key, value))
        result[str(key)] = value
    return result


class Requirement(object):
    """What kubelet demands per memory type, with where each part comes from."""

    def __init__(self, required, parts):
        self.required = required  # {type: Quantity}
        self.parts = parts  # {type: [(label, Quantity, note or None)]}

    def explain(self, name):
        parts = self.parts.get(name) or []
        if not parts:
            return "0 (nothing reserves %s)" % name
        return "%s = %s" % (self.required.get(name, Quantity()).canonical(), " + ".join(
            "%s %s%s" % (label, q.canonical(), " (%s)" % note if note else "") for label, q, note in parts))


def node_allocatable_reservation(kube_reserved, system_reserved, eviction_hard, memory_capacity=None,
                                 eviction_source="evictionHard"):
    """kubelet's GetNodeAllocatableReservation, restricted to memory types."""
    problems = []
    kube = system = {}
    try:
        kube = parse_resource_map(kube_reserved, "kubeReserved")
    except ReservationError as exc:
        problems.extend(exc.problems)
    try:
        system = parse_resource_map(system_reserved, "systemReserved")
    except ReservationError as exc:
        problems.extend(exc.problems)
    eviction = None
    if "memory.available" in (eviction_hard or {}):
        try:
            eviction = eviction_memory(eviction_hard["memory.available"], memory_capacity,
                                       "evictionHard.memory.available")
        except ReservationError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ReservationError(problems)
    names = set(name for name in list(kube) + list(system) if is_memory_type(name))
    names.add(MEMORY)
    required, parts = {}, {}
    for name in sorted(names):
        items = []
        if name in system:
            items.append(("systemReserved", system[name], None))
        if name in kube:
            items.append(("kubeReserved", kube[name], None))
        if name == MEMORY and eviction is not None:
            raw = eviction_hard["memory.available"]
            note = eviction_source
            if isinstance(raw, str) and raw.endswith("%"):
                note = "%s of %d bytes, %s" % (raw, memory_capacity, eviction_source)
            items.append(("evictionHard memory.available", eviction, note))
        amount = total(item[1] for item in items)
        if not amount.is_zero():
            required[name] = amount
            parts[name] = [item for item in items if not item[1].is_zero()]
    return Requirement(required, parts)
