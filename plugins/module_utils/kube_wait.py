# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a DaemonSet, a Deployment or a pod counts as ready: the rules every cluster-stack module
waits on, each a pure function of the object as the API server returns it (None when it is not
there) giving (done, what it looks like now)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _seen(obj):
    """Whether the controller has acted on the object's latest spec."""
    status = obj.get("status") or {}
    return status.get("observedGeneration", 0) >= (obj.get("metadata") or {}).get("generation", 0)


def daemonset_ready(daemonset, nodes):
    """A DaemonSet expected on ``nodes`` nodes: its controller saw the latest spec, it wants a pod on
    at least that many nodes, and every pod it wants runs that spec and is available."""
    if daemonset is None:
        return False, "the DaemonSet is not there"
    status = daemonset.get("status") or {}
    desired = status.get("desiredNumberScheduled", 0)
    updated = status.get("updatedNumberScheduled", 0)
    available = status.get("numberAvailable", 0)
    text = "%d of %d pods updated, %d available, on %d selected nodes" % (updated, desired, available, nodes)
    done = _seen(daemonset) and desired >= nodes and updated == desired and available == desired
    return done, text


def deployment_ready(deployment):
    """A Deployment whose rollout is over, as ``kubectl rollout status`` sees it: its controller saw
    the latest spec, every wanted replica runs that spec and is available, and no pod of an older
    revision is left (so a restart is done only once the pods that ran before it are gone)."""
    if deployment is None:
        return False, "the Deployment is not there"
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    want = spec.get("replicas", 1)
    updated = status.get("updatedReplicas", 0)
    available = status.get("availableReplicas", 0)
    replicas = status.get("replicas", 0)
    text = "%d of %d replicas updated, %d available, %d in all" % (updated, want, available, replicas)
    done = _seen(deployment) and updated == want and available == want and replicas == want
    return done, text


def pod_running(pod):
    """A pod in phase Running that is not being deleted; (done, its phase)."""
    if pod is None:
        return False, "the pod is not there"
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    return phase == "Running" and not deleting, phase + (" (being deleted)" if deleting else "")
