# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The readiness rules every cluster-stack module waits on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import daemonset_ready, deployment_ready, pod_running


def test_daemonset_ready():
    assert daemonset_ready(None, 1) == (False, "the DaemonSet is not there")
    status = {"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}
    ds = {"metadata": {"generation": 2}, "status": status}
    assert daemonset_ready(ds, 2) == (True, "2 of 2 pods updated, 2 available, on 2 selected nodes")
    assert daemonset_ready(ds, 3)[0] is False, "a selected node without a pod"
    assert daemonset_ready(dict(ds, metadata={"generation": 3}), 2)[0] is False, "the controller has not seen it"
    stale = {"metadata": {"generation": 2}, "status": dict(ds["status"], numberAvailable=1)}
    assert daemonset_ready(stale, 2)[0] is False
    old = {"metadata": {"generation": 2}, "status": dict(ds["status"], updatedNumberScheduled=1)}
    assert daemonset_ready(old, 2)[0] is False, "a pod still runs the previous spec"


DONE = {"observedGeneration": 4, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}


def deployment(want=2, generation=4, **status):
    return {"metadata": {"generation": generation}, "spec": {"replicas": want}, "status": dict(DONE, **status)}


def test_deployment_ready_when_its_rollout_is_over():
    assert deployment_ready(None) == (False, "the Deployment is not there")
    assert deployment_ready(deployment()) == (True, "2 of 2 replicas updated, 2 available, 2 in all")
    assert deployment_ready({"metadata": {}, "status": {"replicas": 1, "updatedReplicas": 1,
                                                        "availableReplicas": 1}})[0] is True, "replicas default to 1"


def test_deployment_not_ready_while_any_part_of_the_rollout_is_left():
    assert deployment_ready(deployment(generation=5))[0] is False, "the controller has not seen the new spec"
    assert deployment_ready(deployment(updatedReplicas=1))[0] is False, "a replica runs the previous revision"
    assert deployment_ready(deployment(availableReplicas=1))[0] is False, "a new replica is not available yet"
    leaving = deployment(want=2, replicas=3)
    assert deployment_ready(leaving) == (False, "2 of 2 replicas updated, 2 available, 3 in all"), \
        "a pod of the previous revision is still there (a restart is not over)"


def test_pod_running():
    assert pod_running(None) == (False, "the pod is not there")
    assert pod_running({"metadata": {"name": "p"}, "status": {"phase": "Running"}}) == (True, "Running")
    assert pod_running({"metadata": {"name": "p"}}) == (False, "Pending")
    going = {"metadata": {"name": "p", "deletionTimestamp": "2026-11-25T10:00:00Z"}, "status": {"phase": "Running"}}
    assert pod_running(going) == (False, "Running (being deleted)")
