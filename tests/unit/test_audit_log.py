# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The test bed's reading of the API server's audit log (molecule/resources/testlib.py AuditLog): the
cordons, evictions and uncordons numa.kube asked for, and with ``node`` those of one node - the
evictions placed by the pods' own creation or their scheduler's binding - as the verify's two lanes
read them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "molecule", "resources"))
from testlib import AuditLog  # noqa: E402 pylint: disable=wrong-import-position,import-error

ADMIN = "numa-kube-admin"


def event(user, verb, resource, name, namespace=None, subresource=None, body=None, code=200):
    ref = {"resource": resource, "name": name}
    if namespace:
        ref["namespace"] = namespace
    if subresource:
        ref["subresource"] = subresource
    return {"stage": "ResponseComplete", "user": {"username": user}, "verb": verb, "objectRef": ref,
            "requestObject": body, "responseStatus": {"code": code}, "stageTimestamp": "2026-11-29T12:00:00.000000Z"}


def write(tmp_path, events):
    path = tmp_path / "audit.log"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return AuditLog(str(path))


EVENTS = [
    # placements: a pod created with its node, one bound by a scheduler, one the log never places
    event("system:admin", "create", "pods", "pinned", "default", body={"spec": {"nodeName": "numa-kubelet"}}),
    event("system:kube-scheduler", "create", "pods", "probe-x1", "default", subresource="binding",
          body={"target": {"kind": "Node", "name": "numa-uneven"}}),
    # what numa.kube asked for
    event(ADMIN, "patch", "nodes", "numa-uneven", body={"spec": {"unschedulable": True}}),
    event(ADMIN, "create", "pods", "probe-x1", "default", subresource="eviction", body={"kind": "Eviction"}),
    event(ADMIN, "create", "pods", "pinned", "default", subresource="eviction", body={"kind": "Eviction"}),
    event(ADMIN, "create", "pods", "unplaced", "default", subresource="eviction", body={"kind": "Eviction"}),
    event(ADMIN, "create", "pods", "refused", "default", subresource="eviction", code=429),
    event(ADMIN, "patch", "nodes", "numa-kubelet", body={"metadata": {"labels": {"numa.kube/x": "y"}}}),
    event("someone-else", "patch", "nodes", "numa-kubelet", body={"spec": {"unschedulable": True}}),
    event(ADMIN, "patch", "nodes", "numa-uneven", body={"spec": {"unschedulable": False}}),
]


def test_every_eviction_is_counted_and_a_pods_creation_is_no_request(tmp_path):
    """Review of the lanes: evictions are pod creates (subresource eviction), and the placement reading
    took them all for placements, so no eviction was counted any more."""
    log = write(tmp_path, EVENTS)
    assert log.node_requests() == [("cordon", "numa-uneven"), ("evict", "probe-x1"), ("evict", "pinned"),
                                   ("evict", "unplaced"), ("uncordon", "numa-uneven")]
    assert log.node_requests(labels=True)[-2:] == [("label", "numa-kubelet"), ("uncordon", "numa-uneven")]


def test_one_nodes_requests_hold_its_pods_evictions_and_those_the_log_does_not_place(tmp_path):
    log = write(tmp_path, EVENTS)
    assert log.node_requests(node="numa-uneven") == [("cordon", "numa-uneven"), ("evict", "probe-x1"),
                                                     ("evict", "unplaced"), ("uncordon", "numa-uneven")]
    assert log.node_requests(node="numa-kubelet", labels=True) == [("evict", "pinned"), ("evict", "unplaced"),
                                                                   ("label", "numa-kubelet")]


def test_placements_before_the_mark_still_place_the_evictions_after_it(tmp_path):
    log = write(tmp_path, EVENTS)
    assert log.node_requests(since=3, node="numa-kubelet") == [("evict", "pinned"), ("evict", "unplaced")]
    assert log.mark() == len(EVENTS)


def test_a_line_the_api_server_is_still_writing_is_left_for_later(tmp_path):
    log = write(tmp_path, EVENTS)
    with open(log.path, "a") as handle:
        handle.write('{"stage": "ResponseComplete", "user": {"usern')
    assert log.node_requests(node="numa-uneven")[-1] == ("uncordon", "numa-uneven")
