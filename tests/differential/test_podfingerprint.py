# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube's pods fingerprint against the podfingerprint Go module's own.

The NRT publisher writes the fingerprint of the pods kubelet lists; scheduler-plugins' cache
compares it with the one it computes with github.com/k8stopologyawareschedwg/podfingerprint
v0.2.2. The oracle (podfingerprint/main.go, built by podfingerprint/build.sh) is that module;
generated pod lists go to both, and every answer must be the same. The unit tests keep a few
of these answers (tests/unit/plugins/module_utils/podfingerprint-vectors.json); this test also
checks them against the oracle, and ``python tests/differential/test_podfingerprint.py PATH``
(with the collection on PYTHONPATH) writes them again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import random
import subprocess
import sys

import pytest

from ansible_collections.numa.kube.plugins.module_utils.numa import podfingerprint

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(os.path.dirname(HERE), "unit", "plugins", "module_utils", "podfingerprint-vectors.json")
SEED = int(os.environ.get("NUMA_KUBE_DIFF_SEED", "20261123"))
CASES = int(os.environ.get("NUMA_KUBE_DIFF_PFP_CASES", "3000"))
# names as Kubernetes allows them, and bytes it does not (the hash sees bytes: UTF-8 of any text)
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789-." + "\u00e9\u4e2d\U0001f600"


def _text(rng):
    # every length up to 40 (each tail of XXH64: 8-, 4- and 1-byte steps, the 32-byte stripes), some longer
    length = rng.randrange(41) if rng.random() < 0.8 else rng.randrange(41, 254)
    return "".join(rng.choice(ALPHABET) for dummy in range(length))


def pod_lists(rng, count):
    """``count`` lists of (namespace, name): empty ones, single pods, duplicates, a few hundred pods."""
    lists = []
    for index in range(count):
        if index < 6:
            size = index
        else:
            size = rng.randrange(6, 400) if rng.random() < 0.1 else rng.randrange(1, 40)
        namespaces = [_text(rng) for dummy in range(rng.randrange(1, 5))]
        pods = [(rng.choice(namespaces), _text(rng)) for dummy in range(size)]
        if pods and rng.random() < 0.2:
            pods.append(rng.choice(pods))  # the same pod twice counts twice
        lists.append(pods)
    return lists


def build():
    built = subprocess.run(["bash", os.path.join(HERE, "podfingerprint", "build.sh")],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    return built.stdout.strip().splitlines()[-1]


def ask(path, lists):
    """The Go module's fingerprint of each list, in one run of the oracle."""
    lines = "".join(json.dumps({"id": index, "pods": [list(pod) for pod in pods]}) + "\n"
                    for index, pods in enumerate(lists))
    done = subprocess.run([path], input=lines, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [answer["id"] for answer in answers] == list(range(len(lists))), done.stderr[-3000:]
    return [answer["fingerprint"] for answer in answers]


@pytest.fixture(scope="module")
def oracle_path():
    return os.environ.get("NUMA_KUBE_PFP_ORACLE") or build()


def test_generated_pod_lists_get_the_go_modules_fingerprint(oracle_path):
    lists = pod_lists(random.Random(SEED), CASES)
    expected = ask(oracle_path, lists)
    wrong = [(pods[:3], want, podfingerprint.fingerprint(pods)) for pods, want in zip(lists, expected)
             if podfingerprint.fingerprint(pods) != want]
    print("\nseed %d podfingerprint: %d pod lists (%d pods), %d disagreements"
          % (SEED, len(lists), sum(len(pods) for pods in lists), len(wrong)))
    assert not wrong, wrong[:5]


def test_the_attribute_names_and_method_values_are_the_go_modules(oracle_path):
    """The scheduler's cache finds the fingerprint and its method by these names, and signs only the pods
    with exclusive resources when the method is exactly the module's MethodWithExclusiveResources."""
    done = subprocess.run([oracle_path, "-names"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "Attribute": podfingerprint.ATTRIBUTE, "AttributeMethod": podfingerprint.ATTRIBUTE_METHOD,
        "MethodAll": podfingerprint.METHOD_ALL,
        "MethodWithExclusiveResources": podfingerprint.METHOD_WITH_EXCLUSIVE_RESOURCES}


def test_the_unit_tests_vectors_are_the_go_modules(oracle_path):
    with open(VECTORS, encoding="utf-8") as handle:
        vectors = json.load(handle)["vectors"]
    lists = [[tuple(pod) for pod in vector["pods"]] for vector in vectors]
    assert ask(oracle_path, lists) == [vector["fingerprint"] for vector in vectors]


def write_vectors(path, count=16):
    """Store ``count`` generated lists with the oracle's answers for the unit tests."""
    lists = pod_lists(random.Random(SEED), count)
    answers = ask(os.environ.get("NUMA_KUBE_PFP_ORACLE") or build(), lists)
    source = ("tests/differential/podfingerprint (github.com/k8stopologyawareschedwg/podfingerprint v0.2.2), pod "
              "lists from tests/differential/test_podfingerprint.py pod_lists(seed %d)" % SEED)
    rows = [json.dumps({"fingerprint": answer, "pods": [list(pod) for pod in pods]}, ensure_ascii=False)
            for pods, answer in zip(lists, answers)]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('{"source": %s,\n "vectors": [\n  %s\n ]}\n' % (json.dumps(source), ",\n  ".join(rows)))


if __name__ == "__main__":
    write_vectors(sys.argv[1] if len(sys.argv) > 1 else VECTORS)
