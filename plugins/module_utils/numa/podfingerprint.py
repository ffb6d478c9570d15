# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods fingerprint of a NodeResourceTopology: a short text that names a set of pods.

The scheduler-plugins NodeResourceTopologyMatch cache (v0.34.7, ``pkg/noderesourcetopology/cache``)
takes a node's NodeResourceTopology again only when the fingerprint its publisher wrote equals the
one it computes over the pods it sees on that node; both sides use the podfingerprint Go module
(github.com/k8stopologyawareschedwg/podfingerprint v0.2.2). This is the same computation in
Python, checked against that module's output (tests/differential/podfingerprint):

- each pod is one 64-bit number: the XXH64 hash of its name, seeded with the XXH64 hash (seed 0)
  of its namespace;
- the numbers are sorted, written out as 8 little-endian bytes each, and hashed with XXH64
  (seed 0);
- the text is ``pfp0`` (prefix), ``v001`` (version) and that hash as 16 hex digits, most
  significant first.

The order in which pods are given does not matter; a pod given twice counts twice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import struct

PREFIX = "pfp0"
VERSION = "v001"
# the attribute names podfingerprint recommends, which the scheduler's cache reads
ATTRIBUTE = "nodeTopologyPodsFingerprint"
ATTRIBUTE_METHOD = "nodeTopologyPodsFingerprintMethod"
# the methods the scheduler's cache tells apart (cache/store.go podFingerprintForNodeTopology): every
# pod, or only those resourcerequests.AreExclusiveForPod calls exclusive; numa/nrt.py says
# which one numa.kube's publisher writes when
METHOD_ALL = "all"
METHOD_WITH_EXCLUSIVE_RESOURCES = "with-exclusive-resources"

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotate(value, bits):
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(accumulator, lane):
    accumulator = (accumulator + lane * _P2) & _MASK
    return (_rotate(accumulator, 31) * _P1) & _MASK


def _merge(accumulator, lane):
    accumulator ^= _round(0, lane)
    return (accumulator * _P1 + _P4) & _MASK


def xxh64(data, seed=0):
    """XXH64 of ``data`` (bytes) with ``seed``, as an unsigned 64-bit integer."""
    length = len(data)
    offset = 0
    if length >= 32:
        lanes = [(seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK]
        while offset + 32 <= length:
            words = struct.unpack_from("<4Q", data, offset)
            lanes = [_round(lane, word) for lane, word in zip(lanes, words)]
            offset += 32
        value = (_rotate(lanes[0], 1) + _rotate(lanes[1], 7) + _rotate(lanes[2], 12) + _rotate(lanes[3], 18)) & _MASK
        for lane in lanes:
            value = _merge(value, lane)
    else:
        value = (seed + _P5) & _MASK
    value = (value + length) & _MASK
    while offset + 8 <= length:
        value ^= _round(0, struct.unpack_from("<Q", data, offset)[0])
        value = (_rotate(value, 27) * _P1 + _P4) & _MASK
        offset += 8
    if offset + 4 <= length:
        value ^= (struct.unpack_from("<I", data, offset)[0] * _P1) & _MASK
        value = (_rotate(value, 23) * _P2 + _P3) & _MASK
        offset += 4
    while offset < length:
        value ^= (data[offset] * _P5) & _MASK
        value = (_rotate(value, 11) * _P1) & _MASK
        offset += 1
    value ^= value >> 33
    value = (value * _P2) & _MASK
    value ^= value >> 29
    value = (value * _P3) & _MASK
    return value ^ (value >> 32)


def pod_hash(namespace, name):
    """One pod's number: XXH64 of its name seeded with XXH64 of its namespace."""
    return xxh64(name.encode("utf-8"), xxh64(namespace.encode("utf-8")))


def fingerprint(pods):
    """The fingerprint of ``pods``, an iterable of (namespace, name)."""
    hashes = sorted(pod_hash(namespace, name) for namespace, name in pods)
    digest = xxh64(b"".join(struct.pack("<Q", value) for value in hashes))
    return PREFIX + VERSION + "%016x" % digest
