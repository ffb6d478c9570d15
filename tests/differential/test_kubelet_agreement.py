# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Differential tests: numa.kube's reading of kubelet's rules against kubelet's own code.

Generated inputs go to the collection's module_utils and to the oracle (kubelet 1.36's functions
built from the pinned k8s.io/kubernetes module, see tests/differential/oracle). Where the
collection promises to agree with kubelet, both must give the same verdict, the same numbers and,
for the reservation sum, kubelet's own error text. The seed is printed; NUMA_KUBE_DIFF_SEED and
NUMA_KUBE_DIFF_CASES replay or widen a run. This file holds quantities, reservations and kubelet's
own tables; test_kubelet_classes.py the other classes of input (generate.py).

The collection is deliberately stricter than kubelet in a few places (docs/modules.md, "Where numa.kube is
stricter than kubelet"); its refusal there must say so (DELIBERATE), and the tests check those
cases too rather than skip them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import random
from fractions import Fraction

from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import (
    KNOWN_FIELDS,
    KubeletConfigError,
    dump_text,
    validate,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import (DEFAULTS, FEATURE_GATE_DEPENDENCIES,
                                                                               FEATURE_GATES, FLAGS, KUBELET_VERSION,
                                                                               TYPES)
from ansible_collections.numa.kube.plugins.module_utils.quantity import QuantityError, parse_quantity
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import ReservationError, plan
from ansible_collections.numa.kube.tests.differential.generate import DELIBERATE

SEED = int(os.environ.get("NUMA_KUBE_DIFF_SEED", "20261123"))
CASES = int(os.environ.get("NUMA_KUBE_DIFF_CASES", "4000"))
MIB = 2 ** 20
# requirements no reservedMemory can meet
NOTHING_RESERVED = "nothing is reserved for memory"
CANNOT_SPLIT = "kubelet cannot split it over NUMA nodes"

BINARY = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
DECIMAL = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"]
ODD_SUFFIXES = ["e3", "E-2", "e+5", "e0", "e18", "e-9", "e-12", "e99", "E", "e", "i", "K", "mi", "MB", "Mi ",
                "e3m", "EI", "ki", "kb", "e1.5", "--", "%", "Gi\n", "\u0660", "_0",
                # exponents kubelet wraps to 32 bits, cannot read (beyond 64 bits), or numa.kube refuses
                "e4294967296", "e4294967297", "e-4294967295", "e99999999999999999999", "e9223372036854775808",
                "e-9223372036854775809", "e4001", "e-4001", "e4000"]
# zero with exponents: kubelet reads any that fits in 64 bits (and crashes on one it keeps as
# -2147483648), numa.kube refuses beyond +-4000
ZEROS = ["0e99", "0e4000", "0e4001", "0e2147483647", "0e2147483648", "0e-2147483647", "0e-2147483649",
         "0e9223372036854775807", "0e9223372036854775808", "0e99999999999999999999", "-0e4294967296", "0.0e4001",
         ".0e-12", "0E+5", "0e-9223372036854775808"]


def random_number(rng):
    whole = "".join(rng.choice("0123456789") for dummy in range(rng.choice([0, 1, 1, 2, 3, 4, 6, 10, 19, 25])))
    if rng.random() < 0.4:
        frac = "".join(rng.choice("0123456789") for dummy in range(rng.choice([0, 1, 2, 3, 9, 12])))
        return whole + "." + frac
    return whole


def random_quantity_text(rng):
    sign = rng.choice(["", "", "", "+", "-"])
    roll = rng.random()
    if roll < 0.35:
        suffix = rng.choice(BINARY)
    elif roll < 0.7:
        suffix = rng.choice(DECIMAL)
    else:
        suffix = rng.choice(ODD_SUFFIXES)
    text = sign + random_number(rng) + suffix
    if rng.random() < 0.03:
        text = rng.choice([" ", "\t", "x"]) + text
    return text


def test_quantities_parse_to_the_same_value_and_print_the_same(oracle):
    """parse_quantity against resource.ParseQuantity: accepted or not, the exact value (nano
    rounding, the 2^63-1 cap) and kubelet's canonical spelling (what its error texts print)."""
    rng = random.Random(SEED)
    texts = ["1Gi", "1.5Gi", "100Mi", "0.1", "1e3", "1E3", "100m", "-0", "+1k", ".5", "5.", ".", "", "-",
             "9223372036854775807", "9223372036854775808", "1Ei", "8Ei", "1e19", "1n", "0.0000000001",
             "-0.0000000001", "1.0000000001", "123456789012345678901234567890"]
    texts += ZEROS
    texts += [random_quantity_text(rng) for dummy in range(CASES)]
    answers = oracle.ask([{"kind": "quantity", "text": text} for text in texts])
    disagreements = []
    deliberate = 0
    for text, answer in zip(texts, answers):
        try:
            ours = parse_quantity(text)
        except QuantityError as exc:
            if answer["ok"] and any(words in str(exc) for words in DELIBERATE):
                deliberate += 1
            elif answer["ok"]:
                disagreements.append("%r: kubelet takes it as %s, numa.kube refuses it (%s)"
                                     % (text, answer["canonical"], exc))
            continue
        if not answer["ok"]:
            disagreements.append("%r: kubelet refuses it (%s), numa.kube reads %s"
                                 % (text, answer["error"], ours.canonical()))
        elif Fraction(answer["value"]) != ours.value or answer["canonical"] != ours.canonical():
            disagreements.append("%r: kubelet %s = %s, numa.kube %s = %s" % (
                text, answer["canonical"], answer["value"], ours.canonical(), float(ours.value)))
    print("\nseed %d class %-20s %5d inputs: kubelet refused %d, numa.kube refused %d (%d on purpose)"
          % (SEED, "quantities", len(texts), sum(not a["ok"] for a in answers),
             sum(not a["ok"] for a in answers) + deliberate, deliberate))
    assert not disagreements, "\n".join(disagreements[:30])
    # the generator reaches both sides of the rule
    assert 0.3 < sum(a["ok"] for a in answers) / float(len(answers)) < 0.9


# --- the memory reservation as kubelet starts on it ------------------------------------------------

def memory_text(rng, low, high):
    """A memory amount between low and high bytes, written as people write them."""
    amount = rng.randint(low, high)
    style = rng.random()
    if style < 0.4:
        return "%dMi" % max(1, amount // MIB)
    if style < 0.55:
        return "%dM" % max(1, amount // 10 ** 6)
    if style < 0.65:
        return str(amount)
    if style < 0.75:
        return "%dKi" % (amount // 1024)
    if style < 0.85:
        return "%.2fGi" % (amount / float(2 ** 30))
    if style < 0.93:
        return "%de6" % max(1, amount // 10 ** 6)
    return rng.choice(["100MB", "-64Mi", "abc", "0", "1.5", "256mi", "300m"])


def eviction_text(rng, capacity):
    roll = rng.random()
    if roll < 0.45:
        return memory_text(rng, 50 * MIB, 500 * MIB)
    if roll < 0.9:
        return rng.choice(["5%", "7.5%", "10%", "12.125%", "1%", "0.5%", "33.3%", "2.75%", "15%"])
    return rng.choice(["0%", "100%", "150%", "-1%", "5 %", "x%", "0Mi", "-100Mi", "nan%", "NaN%", "inf%", "-inf%",
                       "0x1p3%", "1e1%", "+5%", "5.%", ".5%", "5%%", "%", "1_0%", "\u0665%", " 5%", "5%\n",
                       "0.0%", "-0%", "100.0%", "1e-50%", "99.99999999%"])


def random_setup(rng):
    """A machine (NUMA nodes' memory, capacity) and the reservation settings of a kubelet."""
    nodes = [rng.choice([512, 768, 1024, 2048, 4096, 65536]) * MIB - rng.randint(0, 64) * MIB
             for dummy in range(rng.choice([1, 2, 2, 3, 4, 8]))]
    capacity = sum(nodes) + rng.randint(-4, 4) * MIB
    config = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
              "cgroupDriver": "cgroupfs", "memoryManagerPolicy": "Static"}
    if rng.random() < 0.85:
        config["kubeReserved"] = {"cpu": "500m", "memory": memory_text(rng, 64 * MIB, 1024 * MIB)}
        if rng.random() < 0.1:
            config["kubeReserved"][rng.choice(["ephemeral-storage", "pid", "hugepages-2Mi", "gpu"])] = "1Gi"
    if rng.random() < 0.5:
        config["systemReserved"] = {"memory": memory_text(rng, 32 * MIB, 512 * MIB)}
    roll = rng.random()
    if roll < 0.6:
        config["evictionHard"] = {"memory.available": eviction_text(rng, capacity)}
        if rng.random() < 0.3:
            config["evictionHard"]["nodefs.available"] = "10%"
    elif roll < 0.75:
        config["evictionHard"] = {"nodefs.available": "15%", "imagefs.available": "15%"}
    if "evictionHard" in config and rng.random() < 0.3:
        config["mergeDefaultEvictionSettings"] = True
    return nodes, capacity, config


def ours(nodes, capacity, config, reserved_memory=None):
    """numa.kube's verdict for this kubelet configuration on this machine: (result, problems)."""
    try:
        result = plan(numa_node_memory=dict((str(i), m) for i, m in enumerate(nodes)), memory_capacity=capacity,
                      kube_reserved=config.get("kubeReserved"), system_reserved=config.get("systemReserved"),
                      eviction_hard=config.get("evictionHard"),
                      merge_default_eviction_settings=bool(config.get("mergeDefaultEvictionSettings")),
                      reserved_memory=reserved_memory)
        return result, []
    except ReservationError as exc:
        return None, exc.problems


def perturb(rng, entries, nodes):
    """A reservedMemory close to a good one, that kubelet refuses or not depending on the change."""
    entries = [{"numaNode": e["numaNode"], "limits": dict(e["limits"])} for e in entries]
    if not entries:
        # nothing to reserve (no memory in the settings): any entry is too much
        return "added", [{"numaNode": 0, "limits": {"memory": "1Mi"}}]
    target = rng.choice(entries)
    memory = parse_quantity(target["limits"]["memory"]).ceil()
    kind = rng.choice(["plus-one", "minus-mi", "node-beyond", "hugepages", "duplicate", "zero", "fraction",
                       "millis", "moved", "spelled-other", "same", "whole-decimal", "whole-millis",
                       "whole-binary-fraction"])
    if kind == "plus-one":
        target["limits"]["memory"] = str(memory + 1)
    elif kind == "minus-mi":
        target["limits"]["memory"] = str(memory - MIB)
    elif kind == "node-beyond":
        entries.append({"numaNode": len(nodes) + rng.randint(0, 3), "limits": {"memory": "1Mi"}})
        target["limits"]["memory"] = str(memory - MIB)
    elif kind == "hugepages":
        target["limits"]["hugepages-2Mi"] = rng.choice(["2Mi", "0"])
    elif kind == "duplicate":
        entries.append({"numaNode": target["numaNode"], "limits": {"memory": "0"}})
    elif kind == "zero":
        target["limits"]["memory"] = "0"
    elif kind == "fraction":
        target["limits"]["memory"] = "%d.5" % (memory - 1)
    elif kind == "millis":
        target["limits"]["memory"] = "%d500m" % (memory - 1)
    elif kind == "moved" and len(entries) > 1:
        # the same total, shifted between two nodes: kubelet only checks the sum
        other = rng.choice([e for e in entries if e is not target])
        shift = rng.randint(1, max(1, memory // 2))
        target["limits"]["memory"] = str(memory - shift)
        other["limits"]["memory"] = str(parse_quantity(other["limits"]["memory"]).ceil() + shift)
    elif kind == "whole-decimal":
        # the same whole number of bytes, written with a decimal point
        target["limits"]["memory"] = "%d.0" % memory
    elif kind == "whole-millis":
        target["limits"]["memory"] = "%d000m" % memory
    elif kind == "whole-binary-fraction":
        target["limits"]["memory"] = "%d.5Ki" % (memory // 1024) if memory % 1024 == 512 else "%.4fMi" % (
            memory / float(MIB)) if memory % (MIB // 16) == 0 else "%d.0Ki" % (memory // 1024)
        if parse_quantity(target["limits"]["memory"]).value != memory:
            target["limits"]["memory"] = str(memory + 1)  # not representable that way: a plain miss
    elif kind == "spelled-other":
        # the same amount in another unit
        target["limits"]["memory"] = "%dKi" % (memory // 1024) if memory % 1024 == 0 else "%de0" % memory
    return kind, entries


def kubelet_requests(rng, count):
    cases = []
    for dummy in range(count):
        nodes, capacity, config = random_setup(rng)
        computed, problems = ours(nodes, capacity, config)
        if computed is None:
            # settings numa.kube finds no layout for: kubelet gets a placeholder layout
            nothing = any(NOTHING_RESERVED in p for p in problems)
            cases.append(("refused settings", nodes, capacity, config,
                          [] if nothing else [{"numaNode": 0, "limits": {"memory": "1Mi"}}], problems))
            continue
        cases.append(("computed", nodes, capacity, config, computed["reserved_memory"], []))
        kind, entries = perturb(rng, computed["reserved_memory"], nodes)
        cases.append((kind, nodes, capacity, config, entries, []))
    return cases


def refused_settings_disagree(answer, planned):
    """For settings numa.kube finds no layout for: why kubelet's answer on the placeholder disagrees,
    or None. Refused settings kubelet must refuse before its memory manager; a requirement no layout
    can meet (fractional, or nothing at all under Static) it refuses there, for any layout."""
    if any(any(words in p for words in DELIBERATE) for p in planned):
        return None
    at_memory_manager = not answer["ok"] and answer["stage"] == "memorymanager"
    if all(NOTHING_RESERVED in p or CANNOT_SPLIT in p for p in planned):
        if not at_memory_manager:
            return "kubelet should refuse every layout at its memory manager, but answered %s" % answer
        if any(NOTHING_RESERVED in p for p in planned) and "you should specify the system reserved" not in answer["error"]:
            return "kubelet refused for another reason: %s" % answer["error"]
        return None
    if answer["ok"] or at_memory_manager:
        return "kubelet takes the settings (only the placeholder layout failed, if anything)"
    return None


def test_reservations_get_the_verdict_kubelet_gives_them(oracle):
    """For generated machines and kubelet settings: every reservedMemory numa.kube computes is one
    kubelet starts on; near misses kubelet refuses, numa.kube refuses, quoting kubelet's error; what
    kubelet takes, numa.kube takes; and both count the same required total."""
    rng = random.Random(SEED + 1)
    cases = kubelet_requests(rng, CASES // 8)
    requests = []
    for _kind, nodes, capacity, config, entries, _planned in cases:
        document = dict(config, reservedMemory=entries)
        # written as the collection writes kubelet configuration files
        requests.append({"kind": "kubelet", "config": dump_text(document, "yaml"), "nodes": nodes,
                         "capacity": capacity})
    answers = oracle.ask(requests)
    disagreements = []
    tally = {}
    for (kind, nodes, capacity, config, entries, planned), answer in zip(cases, answers):
        result, problems = ours(nodes, capacity, config, reserved_memory=entries)
        verdict = "accepted" if result is not None else "refused"
        kubelet = "accepted" if answer["ok"] else "refused"
        key = (kind, verdict, kubelet)
        tally[key] = tally.get(key, 0) + 1
        where = "%s: nodes %s, capacity %d, %s, reservedMemory %s" % (kind, nodes, capacity, {
            k: v for k, v in config.items() if k not in ("apiVersion", "kind")}, entries)
        if kind == "refused settings":
            why = refused_settings_disagree(answer, planned)
            if why:
                disagreements.append("%s: %s\n  numa.kube: %s" % (why, where, planned))
            continue
        if kind == "computed" and not answer["ok"]:
            disagreements.append("kubelet refuses the layout numa.kube computed: %s\n  kubelet: %s"
                                 % (where, answer["error"]))
            continue
        deliberate = [p for p in problems if any(words in p for words in DELIBERATE)]
        if answer["ok"] and result is None:
            if not deliberate:
                disagreements.append("kubelet accepts, numa.kube refuses: %s\n  numa.kube: %s" % (where, problems))
            continue
        if not answer["ok"] and result is not None:
            disagreements.append("kubelet refuses, numa.kube accepts: %s\n  kubelet (%s): %s"
                                 % (where, answer["stage"], answer["error"]))
            continue
        if answer.get("stage") == "memorymanager" and "determined by Node Allocatable feature" in answer["error"]:
            if not any(answer["error"] in problem for problem in problems):
                disagreements.append("numa.kube does not quote kubelet's error: %s\n  kubelet: %s\n  numa.kube: %s"
                                     % (where, answer["error"], problems))
        if result is not None and "memory" in answer.get("reservation", {}):
            if result["required"].get("memory") != answer["reservation"]["memory"]:
                disagreements.append("required memory differs: %s\n  kubelet %s, numa.kube %s"
                                     % (where, answer["reservation"]["memory"], result["required"].get("memory")))
    for key in sorted(tally):
        print("%-16s numa.kube %-8s kubelet %-8s %5d" % (key + (tally[key],)))
    print("\nseed %d class %-20s %5d inputs: kubelet refused %d, numa.kube refused %d"
          % (SEED, "reservations", len(cases), sum(not a["ok"] for a in answers),
             sum(n for (dummy, verdict, dummy2), n in tally.items() if verdict == "refused")))
    assert not disagreements, "%d disagreements, first ones:\n%s" % (len(disagreements), "\n".join(disagreements[:12]))
    # both verdicts occur, at kubelet's memory manager and before it
    stages = set(a.get("stage") for a in answers if not a["ok"])
    assert "memorymanager" in stages and len(stages) >= 2, stages
    assert sum(a["ok"] for a in answers) > len(answers) // 3


def test_a_misspelled_field_is_refused_where_kubelet_would_only_log_it(oracle):
    """kubelet decodes leniently after a strict failure: it starts without the misspelled setting.
    numa.kube's validation refuses the name instead, because the node would silently run without
    the NUMA setting the operator asked for."""
    config = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
              "cgroupDriver": "cgroupfs", "topologyManagerScop": "pod"}
    answer = oracle.ask([{"kind": "kubelet", "config": dump_text(config, "yaml"), "nodes": [2 ** 30],
                          "capacity": 2 ** 30}])[0]
    assert answer["ok"], answer
    assert 'unknown field "topologyManagerScop"' in answer["strict"]
    try:
        validate(config)
    except KubeletConfigError as exc:
        assert "did you mean 'topologyManagerScope'" in str(exc)
    else:
        raise AssertionError("numa.kube accepted a misspelled field")


def test_the_field_and_flag_table_is_kubelets_own(oracle):
    """kubelet_fields (what kubelet_config knows as fields and their types, defaults and feature
    gates, what the kubelet_arg filters render) against kubelet's v1beta1 type, its defaulting, its
    feature gates and its own flag set: every field, every flag, every gate."""
    answer = oracle.ask([{"kind": "flags"}])[0]
    kubelet = dict((field, flags[0].split()[0] if flags else None)
                   for field, flags in answer["fields"].items() if field not in ("apiVersion", "kind"))
    assert len(kubelet) > 100, "the oracle found too few fields: %d" % len(kubelet)
    missing = sorted(set(kubelet) - set(FLAGS))
    extra = sorted(set(FLAGS) - set(kubelet))
    wrong = sorted((field, FLAGS[field], kubelet[field]) for field in set(FLAGS) & set(kubelet)
                   if FLAGS[field] != kubelet[field])
    assert not (missing or extra or wrong), (
        "kubelet_fields.FLAGS differs from kubelet %s: fields it lacks %s, fields kubelet lacks %s, "
        "(field, ours, kubelet's flag) %s" % (KUBELET_VERSION, missing, extra, wrong))
    assert KNOWN_FIELDS == set(kubelet) | {"apiVersion", "kind"}
    # each field's Go type, and what kubelet makes of an empty file
    assert TYPES == answer["types"], sorted(set(TYPES.items()) ^ set(answer["types"].items()))
    assert DEFAULTS == answer["defaults"], sorted(
        k for k in set(DEFAULTS) | set(answer["defaults"]) if DEFAULTS.get(k) != answer["defaults"].get(k))
    # every feature gate: default, lock, stage, and the gates it depends on
    gates = dict((name, (g["default"], g["locked"], g["stage"])) for name, g in answer["gates"].items())
    assert FEATURE_GATES == gates, sorted(set(FEATURE_GATES.items()) ^ set(gates.items()))
    dependencies = dict((name, tuple(sorted(g["depends_on"]))) for name, g in answer["gates"].items()
                        if g.get("depends_on"))
    assert FEATURE_GATE_DEPENDENCIES == dependencies
