# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When a DaemonSet, a Deployment or a pod counts as ready: the rules every cluster-stack module
waits on, each a pure function of the object as the API server returns it (None when it is not
there) giving (done, what it looks like now)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

_monotonic = time.monotonic
_sleep = time.sleep


def _seen(obj):
    """Whether the controller has acted on the object's latest spec."""
    status = obj.get("status") or {}
    return status.get("observedGeneration", 0) >= (obj.get("metadata") or {}).get("generation", 0)


def daemonset_ready(daemonset, nodes, tolerated=0):
    """A DaemonSet expected on ``nodes`` nodes, judged on its status alone: its controller saw the
    latest spec, it wants a pod on at least that many nodes, and every pod it wants runs that spec
    and is available. ``tolerated`` (unavailable nodes the task accepts) only adds to the words:
    counts cannot tell which node lacks its pod, so a tolerated share is proven pod by pod
    (daemonset_pods_missing, in wait_daemonset)."""
    if daemonset is None:
        return False, "the DaemonSet is not there"
    status = daemonset.get("status") or {}
    desired = status.get("desiredNumberScheduled", 0)
    updated = status.get("updatedNumberScheduled", 0)
    available = status.get("numberAvailable", 0)
    text = "%d of %d pods updated, %d available, on %d selected nodes" % (updated, desired, available, nodes)
    if tolerated:
        text += " (%d unavailable node%s accepted)" % (tolerated, "" if tolerated == 1 else "s")
    done = _seen(daemonset) and desired >= nodes and updated >= desired and available >= desired
    return done, text


# the DaemonSet's template generation (the API server sets it on every apps/v1 DaemonSet) and the
# label its controller puts on each pod it makes from that template: the controller's own test for
# "this pod runs the current template" (pkg/controller/daemon/util IsPodUpdated, with the revision hash)
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
POD_TEMPLATE_GENERATION = "pod-template-generation"


def _pod_ready(pod):
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def daemonset_pods_missing(daemonset, pods, names):
    """{node: why} for each of ``names`` without a pod of ``daemonset`` that runs its current
    template and is Ready (``pods``: the DaemonSet's pods, from a list by its selector)."""
    generation = ((daemonset.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION)
    if generation is None:
        return dict((name, "the DaemonSet has no %s annotation to tell its pods' template by" % TEMPLATE_GENERATION)
                    for name in names)
    by_node = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            by_node.setdefault(node, []).append(pod)
    missing = {}
    for name in names:
        mine = by_node.get(name) or []
        current = [pod for pod in mine if ((pod.get("metadata") or {}).get("labels") or {}).get(
            POD_TEMPLATE_GENERATION) == str(generation)]
        if not mine:
            missing[name] = "no pod of the DaemonSet"
        elif not current:
            missing[name] = "its pod runs an older template (not generation %s)" % generation
        elif not any(_pod_ready(pod) for pod in current):
            missing[name] = "its pod of the current template is not ready"
    return missing


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


# --- counts and shares of nodes -------------------------------------------------------------------

_PERCENT = re.compile(r"^([0-9]+)%$")


# Kubernetes' IntOrString holds an int32: a larger count is refused by the API server, halfway through an apply
MAX_COUNT = 2 ** 31 - 1


def count_or_percent(value, option, minimum=0):
    """``value`` as Kubernetes writes an IntOrString (an int up to MAX_COUNT, or "N%" with 0-100),
    checked: the int or the "N%" string; ValueError naming the option, the rule and the fix. A
    string of digits counts as an int (Ansible passes role variables as strings)."""
    text = str(value).strip() if value is not None else ""
    match = _PERCENT.match(text)
    if match and minimum <= int(match.group(1)) <= 100 and not isinstance(value, bool):
        return "%d%%" % int(match.group(1))
    if not isinstance(value, bool) and re.match(r"^[0-9]+$", text) and minimum <= int(text) <= MAX_COUNT:
        return int(text)
    raise ValueError("%s must be a count of nodes (an integer from %d to %d, Kubernetes' int32) or a percentage "
                     "of them (\"%d%%\" to \"100%%\"), got %r: write it as e.g. 5 or \"10%%\""
                     % (option, minimum, MAX_COUNT, minimum, value))


def scaled(value, total, round_up):
    """The count ``value`` (from count_or_percent) stands for among ``total``: a percentage rounded
    up (as Kubernetes scales maxUnavailable) or down (as a tolerated share should be)."""
    if isinstance(value, int):
        return value
    share = int(value[:-1]) * total
    return (share + 99) // 100 if round_up else share // 100


def max_unavailable(value, option="max_unavailable"):
    """A DaemonSet's spec.updateStrategy.rollingUpdate.maxUnavailable. Kubernetes' rule
    (pkg/apis/apps/validation ValidateRollingUpdateDaemonSet; apps/v1 RollingUpdateDaemonSet): an
    int or a percentage of the nodes that should run the pod, rounded up; at most 100%; not 0 while
    maxSurge is 0 (numa.kube's DaemonSets never surge: the exporter holds a host port)."""
    return count_or_percent(value, option, minimum=1)


def node_ready(node):
    """Whether a Node's Ready condition is True (False: kubelet says it is not; Unknown: the node
    controller has not heard from kubelet for its grace period)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def not_ready_why(node):
    """Why a Node counts as unavailable, in words (None when its Ready condition is True)."""
    if node_ready(node):
        return None
    status = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    if not status:
        return "NotReady (no Ready condition yet)"
    return "NotReady (Ready %s: %s)" % (status[0].get("status"), status[0].get("reason") or "no reason given")


def accepted_down(value, selected):
    """How many of ``selected`` nodes may be left out as unavailable: ``value``
    (unavailable_nodes_allowed, from count_or_percent) rounded down, and never all of them: at
    least one selected node is always proven (none selected is the caller's own refusal)."""
    return max(min(scaled(value, selected, round_up=False), selected - 1), 0)


# --- waits that run while things move ---------------------------------------------------------------

class WaitOutcome(tuple):
    """(done, the last value, seconds waited), with ``reason``: done, stalled (nothing improved for
    the stall window) or ceiling (the task's hard limit came first)."""

    def __new__(cls, done, value, waited, reason):
        outcome = tuple.__new__(cls, (done, value, waited))
        outcome.reason = reason
        return outcome


def wait_progress(check, stall, ceiling, progress, interval=2.0, clock=None, sleep=None, transient=None):
    """Call ``check`` (which returns (done, value)) until done. The wait fails when
    ``progress(value)`` (a comparable: higher is further along) has not passed its best for
    ``stall`` seconds, or when ``ceiling`` seconds have passed whatever happens. A value that only
    comes back to an earlier best (a pod that restarts again and again) is no progress.

    An exception ``transient(exc)`` accepts (a timeout, a reset connection, a 5xx: the API server
    failing over) is a round without progress: the wait goes on, and ends as it would otherwise;
    when it ends on such a round, that exception is raised (it names the request). Any other
    exception ends the wait at once."""
    clock = clock or _monotonic
    sleep = sleep or _sleep
    started = clock()
    best, improved, value = None, started, None
    while True:
        failed = None
        try:
            done, value = check()
        except Exception as exc:  # pylint: disable=broad-except
            if transient is None or not transient(exc):
                raise
            failed, done = exc, False
        now = clock()
        waited = now - started
        if done:
            return WaitOutcome(True, value, waited, "done")
        if failed is None:
            score = progress(value)
            if best is None or score > best:
                best, improved = score, now
        reason = "stalled" if now - improved >= stall else "ceiling" if waited >= ceiling else None
        if reason:
            if failed is not None:
                raise failed
            return WaitOutcome(False, value, waited, reason)
        sleep(max(min(interval, improved + stall - now, ceiling - waited), 0.1))


def why_waiting_ended(outcome, stall):
    """The end of a failed wait in words, naming the option that bounds it."""
    if getattr(outcome, "reason", None) == "stalled":
        return ("nothing moved for %d s (wait_timeout; the wait runs on as long as something moves), after %d s "
                "in all" % (stall, outcome[2]))
    if getattr(outcome, "reason", None) == "ceiling":
        return "the task reached its hard limit (wait_ceiling) after %d s, still moving" % outcome[2]
    return "not done within %d s" % outcome[2]


def daemonset_progress(daemonset):
    """How far a DaemonSet's rollout has come, comparable: the generation its controller has seen,
    then its pods on the new spec (a wave's new pods count once created, however long their start
    takes), then its pods available (a pod that turns ready; one that only comes back after a
    crash does not pass the best seen)."""
    status = (daemonset or {}).get("status") or {}
    return (status.get("observedGeneration", 0), status.get("updatedNumberScheduled", 0),
            status.get("numberAvailable", 0))


def deployment_progress(deployment):
    """How far a Deployment's rollout has come, comparable as daemonset_progress."""
    status = (deployment or {}).get("status") or {}
    return (status.get("observedGeneration", 0), status.get("updatedReplicas", 0),
            status.get("availableReplicas", 0), -status.get("replicas", 0))


def wait_daemonset(get, names, wait_for, stall, down=None, allowed=0, pods=None, nodes=None):
    """Wait for the DaemonSet ``get()`` returns to roll out on the selected nodes ``names`` (a list;
    a count for a plain wait); the outcome's value is the status in words.

    With no node accepted as unavailable (``allowed`` 0) the status counts decide, exactly. Else,
    once the counts are short by no more than ``allowed``, the pods decide: ``pods()`` lists the
    DaemonSet's pods, and every selected node not in ``down`` ({node: why}, updated in place) needs
    a Ready pod of the current template. A node without one is looked at again (``nodes(pending)``
    gives {name: Node or None}, for those nodes alone): one that went NotReady since the task began
    joins ``down`` while there is room in ``allowed``, so a node lost mid-rollout is accepted as one
    down before it was, and a Ready node that still runs the old pod never is."""
    down = {} if down is None else down
    count = names if isinstance(names, int) else len(names)

    def check():
        daemonset = get()
        done, text = daemonset_ready(daemonset, count, len(down))
        score = daemonset_progress(daemonset) + (len(down),)
        if done or not allowed or isinstance(names, int) or daemonset is None or not _seen(daemonset):
            return done, (text, score)
        status = daemonset.get("status") or {}
        short = max(count, status.get("desiredNumberScheduled", 0)) - min(
            status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0))
        if short > allowed:
            return False, (text, score)
        missing = daemonset_pods_missing(daemonset, pods(), [name for name in names if name not in down])
        found = nodes(sorted(missing)) if missing else {}
        for name in sorted(missing):
            why = not_ready_why(found.get(name) or {"status": {}}) if found.get(name) is not None else None
            if why and len(down) < allowed:
                down[name] = why + " (since the task began)"
                del missing[name]
        done, text = daemonset_ready(daemonset, count, len(down))
        if missing:
            text += "; %d selected Ready node%s without a ready pod of the current template: %s" % (
                len(missing), "" if len(missing) == 1 else "s",
                "; ".join("%s: %s" % item for item in sorted(missing.items())[:10]))
        return not missing, (text, score[:-1] + (len(down),))

    outcome = wait_for(check, stall, progress=lambda value: value[1])
    return WaitOutcome(outcome[0], outcome[1][0], outcome[2], getattr(outcome, "reason", "done"))


def wait_pending(names, prove, wait_for, stall):
    """Prove each of ``names``: ``prove(pending)`` looks at the names not yet proven and returns
    {name: None when proven, else why not}. A name proven is never looked at again. Progress is
    the count proven. The outcome's value is {name: why not} for those left."""
    proven = set()
    why = {}

    def check():
        pending = [name for name in names if name not in proven]
        for name, problem in prove(pending).items():
            if problem is None:
                proven.add(name)
                why.pop(name, None)
            else:
                why[name] = problem
        left = dict((name, why.get(name, "not looked at yet")) for name in names if name not in proven)
        return not left, (len(proven), left)

    outcome = wait_for(check, stall, progress=lambda value: value[0])
    return WaitOutcome(outcome[0], outcome[1][1], outcome[2], getattr(outcome, "reason", "done"))


def wait_for(check, timeout, interval=2.0, clock=time.monotonic, sleep=time.sleep):
    """Call ``check`` (which returns (done, value)) until done or ``timeout`` seconds pass;
    returns (done, the last value, seconds waited)."""
    started = clock()
    while True:
        done, value = check()
        waited = clock() - started
        if done or waited >= timeout:
            return done, value, waited
        sleep(min(interval, max(timeout - waited, 0.1)))
