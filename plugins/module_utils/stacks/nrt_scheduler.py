# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NodeResourceTopology scheduling path: scheduler-plugins' NodeResourceTopologyMatch as a
second scheduler, the node agent's NodeResourceTopology publisher, and the NRT CRD.

The scheduler is kube-scheduler with the plugin registered (the binary at ``/nrt-scheduler`` in its
image), run as one replica without leader election under its own ``schedulerName``, from a
KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``) in a ConfigMap whose digest its pod
template carries, so that a changed configuration rolls it. Its rights: its own ClusterRole, the
rules of the live ``system:kube-scheduler`` (read at each run, so they follow the API server's
version) less every ``coordination.k8s.io`` rule (leases, leasecandidates: without leader election
it takes no lease, and the default scheduler's lock stays out of its reach), plus reading
NodeResourceTopologies; the ClusterRole ``system:volume-scheduler`` and the
``extension-apiserver-authentication-reader`` Role in kube-system bound as they are. None of the
write rights scheduler-plugins' sample manifests grant.

The publisher (``python3 -m numa_agent nrt-publisher``) writes one NodeResourceTopology per node,
named as the node, from kubelet's PodResources API, /configz and sysfs; a ValidatingAdmissionPolicy
keeps each pod to its own node's object (node_publisher.own_node_policy). An object is numa.kube's
only while noderesourcetopology.is_ours says so (numa.kube's label, and no other manager writes its
zones or attributes: NFD's topology-updater keeps the labels of an object it takes over). Nodes
whose object another publisher writes are left out of the DaemonSet and named; nothing of theirs
changes, whatever the run (present, the stale clean-up, absent).

The CRD is the one of the NRT API module (``noderesourcetopology-api``), applied unless a CRD of
that name that numa.kube did not make is installed: that one is used when it serves v1alpha2, and
refused (naming its manager) otherwise. ``absent`` removes what numa.kube made, the objects its
publisher wrote, and the CRD only when numa.kube made it and no other publisher's objects are left.

The stack's cluster-scoped objects are one per cluster: a run whose namespace is not the one they
name is refused before anything changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.numa.kube.plugins.module_utils.numa import nrt as noderesourcetopology
from ansible_collections.numa.kube.plugins.module_utils.k8s.client import LIST_PAGE
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    FIELD_MANAGER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    describe,
    label_selector,
    manager_of,
    owned,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    deployment_progress,
    deployment_ready,
    wait_pending,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.numa.nrt import ZONE_TYPE, zone_name
from ansible_collections.numa.kube.plugins.module_utils.stacks.publisher import (
    publisher_pods,
    publisher_pods_left,
    remove_publisher,
    selected_nodes,
    unavailable,
    wait_rollout,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import warn_down
from ansible_collections.numa.kube.plugins.module_utils.stacks.nrt_scheduler_objects import (
    CRD_NAME,
    CRD_REF,
    CRD_SOURCE,
    NRT,
    PUBLISHER,
    RETIRED,
    SCHEDULER,
    SCHEDULER_BINARY,
    STACK,
    ZONE_NAME,
    NrtSchedulerError,
    check_options,
    config_digest,
    config_text,
    namespace_object,
    publisher_objects,
    scheduler_objects,
    scheduler_rules,
    served_versions,
    serves,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.objects import (
    StackResult,
    apply_recorded,
    named,
    namespace_problem,
)


# --- what the cluster holds ----------------------------------------------------------------------------

def ours(obj):
    """Whether ``obj`` (a live NodeResourceTopology) is numa.kube's publisher's alone: the topology
    stack's labels, and noderesourcetopology.is_ours (no other manager writes its zones or
    attributes: a co-writer such as NFD's topology-updater keeps the labels it found)."""
    return owned(obj, STACK) and noderesourcetopology.is_ours(obj)


def writer_of(obj):
    """Who writes ``obj`` (a NodeResourceTopology ``ours`` refuses), in words."""
    if not owned(obj, STACK):
        return manager_of(obj)
    return "numa.kube's label, but its zones or attributes written by field managers %s" % (
        ", ".join(noderesourcetopology.co_writers(obj)) or "other than numa.kube's publisher")


def zone_problem(obj, expected=None):
    """Why ``obj`` (a live NodeResourceTopology, or None) does not yet show what the scheduler
    needs: it is there, numa.kube's publisher wrote it, and it has a zone of type Node named
    node-<id> for each NUMA node (exactly ``expected``, a list of NUMA ids, when given; at least
    one otherwise). None when it does."""
    if obj is None:
        return "no %s yet" % NRT.kind
    if not ours(obj):
        return "its %s is written by another publisher (%s), not numa.kube's" % (NRT.kind, writer_of(obj))
    zones = [z for z in obj.get("zones") or [] if isinstance(z, dict) and z.get("type") == ZONE_TYPE]
    found = sorted((z.get("name") for z in zones), key=lambda name: (len(str(name)), str(name)))
    odd = [name for name in found if not ZONE_NAME.match(str(name))]
    if odd:
        return "zones %s of type %s are not named node-<NUMA id>" % (", ".join(map(str, odd)), ZONE_TYPE)
    if expected is not None:
        want = [zone_name(numa) for numa in sorted(set(expected))]
        if found != want:
            return "its zones of type %s are %s, not one per NUMA node (%s)" % (
                ZONE_TYPE, ", ".join(found) or "none", ", ".join(want))
    elif not found:
        return "no zone of type %s yet" % ZONE_TYPE
    return None


def foreign_topology(api, names):
    """{node: who writes it} of ``names`` whose NodeResourceTopology is not numa.kube's (ours)."""
    found = api.named(NRT.list_path, names, metadata_only=True)
    return dict((name, writer_of(obj)) for name, obj in sorted(found.items()) if obj is not None and not ours(obj))


def namespace_conflict(api, params, what):
    """NrtSchedulerError when numa.kube's topology stack runs in another namespace than ``namespace``:
    its cluster-scoped objects (bindings, the own-node policy) are one per cluster, and a run here
    would point them at this namespace and strand the scheduler and publisher there (or, absent,
    take their rights and leave them). Found by the subjects of the stack's ClusterRoleBindings."""
    elsewhere = {}
    for account in (SCHEDULER, PUBLISHER):
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "numa-kube:" + account}}
        live = api.get(path_of(binding))
        if live is None or not owned(live, STACK):
            continue
        for subject in live.get("subjects") or []:
            there = subject.get("namespace")
            if subject.get("kind") == "ServiceAccount" and subject.get("name") == account and there and \
                    there != params["namespace"]:
                found = "%s names ServiceAccount %s/%s" % (describe(binding), there, account)
                elsewhere.setdefault(there, []).append(found)
    if not elsewhere:
        return
    problems = []
    for there, bindings in sorted(elsewhere.items()):
        running = [describe(obj) for obj in (
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": SCHEDULER, "namespace": there}},
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": PUBLISHER, "namespace": there}})
            if api.get(path_of(obj)) is not None]
        problems.append(
            "numa.kube's topology scheduler and publisher are deployed in namespace %s (%s; %s), not in namespace %s "
            "as this run asks: their cluster-scoped objects are one per cluster, so %s here would leave those in %s "
            "running without their rights; nothing was %s. Keep namespace %s, or remove the stack there first "
            "(state absent with namespace %s) and run again" % (
                there, "; ".join(bindings), ", ".join(running) + " still there" if running else
                "no Deployment or DaemonSet of it left there", params["namespace"],
                "deploying" if what == "applied" else "removing it", there, what, there, there))
    raise NrtSchedulerError(problems)


def crd_plan(api, params, crd):
    """(the CRD to apply or None, the live CRD or None, the result's ``crd`` entry). A CRD of that
    name that numa.kube did not make is used when it serves v1alpha2 (and adopted only with
    adopt), refused naming its manager otherwise; without one, the file is needed."""
    live = api.get(path_of(CRD_REF))
    foreign = live is not None and not owned(live, STACK) and not params.get("adopt")
    if foreign:
        if not serves(live, NRT.version):
            raise NrtSchedulerError(
                "CRD %s is installed and numa.kube did not make it (%s); it serves %s, and NodeResourceTopologyMatch "
                "reads %s: nothing was applied. Upgrade what installed it (for NFD's topology-updater, a release "
                "with the v1alpha2 API), or remove it and give crd so that numa.kube installs %s"
                % (CRD_NAME, manager_of(live), ", ".join(served_versions(live)) or "no version", NRT.api_version,
                   CRD_SOURCE))
        return None, live, {"name": CRD_NAME, "numa_kube": False, "manager": manager_of(live)}
    if crd is None:
        state = "no CRD %s is installed" % CRD_NAME if live is None else "numa.kube installed CRD %s" % CRD_NAME
        raise NrtSchedulerError("crd is required here: %s, and numa.kube applies it from that file; nothing was applied. "
                                "Set crd to the path of %s" % (state, CRD_SOURCE))
    return crd, live, {"name": CRD_NAME, "numa_kube": True, "manager": "numa.kube"}


# --- run -------------------------------------------------------------------------------------------------

def run(api, params, check_mode, wait_for):
    """Deploy (or remove) the stack and, with wait, prove it; the module's result. Every option,
    the CRD file and (for present) the CRD in the cluster and the publisher's nodes are checked
    before anything changes."""
    crd = check_options(params)
    if params["state"] == "absent":
        namespace_conflict(api, params, "deleted")
        return _remove(api, params, check_mode, wait_for)
    namespace_conflict(api, params, "applied")
    return _deploy(api, params, crd, check_mode, wait_for)


def _deploy(api, params, crd, check_mode, wait_for):
    crd, live_crd, crd_entry = crd_plan(api, params, crd)
    rules = scheduler_rules(api)
    if params["wait"]:
        nodes = selected_nodes(api, params, NRT, NrtSchedulerError)
    else:
        nodes = api.nodes(params.get("publisher_node_selector"))
    names = [node["metadata"]["name"] for node in nodes]
    # the objects of another publisher are read where they can be: not before the CRD is there
    foreign = foreign_topology(api, names) if live_crd is not None and serves(live_crd, NRT.version) else {}
    covered = [node for node in nodes if node["metadata"]["name"] not in foreign]
    selection = unavailable(params, covered, NrtSchedulerError) if params["wait"] else None
    text = config_text(params)
    result = StackResult(crd=crd_entry, foreign_topology_nodes=foreign, scheduler_config_sha256=config_digest(text))
    if foreign:
        result["warnings"] = ["%d selected node%s already %s a %s another publisher writes, left to it and out of "
                              "numa.kube's publisher: %s" % (
                                  len(foreign), "" if len(foreign) == 1 else "s", "has" if len(foreign) == 1 else
                                  "have", NRT.kind, "; ".join("%s (%s)" % item for item in sorted(foreign.items())))]
    namespace = namespace_object(params)
    live_namespace = api.get(path_of(namespace))
    own_namespace = live_namespace is None or owned(live_namespace)
    scheduler = scheduler_objects(params, rules)
    publisher = publisher_objects(params, foreign)
    # every object of another manager named at once, before anything is applied
    api.claim(([crd] if crd else []) + scheduler + publisher)
    if own_namespace:
        apply_recorded(api, namespace, check_mode, result)
    else:
        result.keep(namespace, reason="numa.kube did not make it (%s): used as it is" % manager_of(live_namespace))
    if crd:
        apply_recorded(api, crd, check_mode, result)
        if params["wait"] and not check_mode:
            _wait_established(api, params, wait_for)
    else:
        result.keep(CRD_REF, reason="numa.kube did not make it (%s): used as it is, it serves %s"
                    % (crd_entry["manager"], NRT.version))
    for obj in scheduler + publisher:
        apply_recorded(api, obj, check_mode, result)
    for obj in RETIRED:  # the scheduler's own ClusterRole is bound by now
        changed, before = api.delete(obj, check_mode)
        if changed:
            result.record(obj, changed, before, {})
    if check_mode or not params["wait"]:
        if selection:  # a preview shows what the run would leave out
            warn_down(result, selection[1])
        # against the nodes and pods as they are now: a node deselected whose publisher pod still
        # runs keeps its object until a later run
        _stale_cleanup(api, params, check_mode, result)
        return result
    result["wait_seconds"] = {describe(scheduler[-1]): _wait_scheduler(api, params, scheduler[-1], wait_for)}
    wait_rollout(api, params, publisher[-1], selection, wait_for, NrtSchedulerError)
    # the publisher no longer runs where it ran before: its objects there would be read as current
    _stale_cleanup(api, params, check_mode, result)
    result["topology_nodes"] = _wait_topologies(api, params, selection, wait_for, result)
    return result


def _wait_established(api, params, wait_for):
    """Wait until the API server serves the CRD (its Established condition): the scheduler lists
    NodeResourceTopologies as it starts, and fails without them."""
    def check():
        live = api.get(path_of(CRD_REF)) or {}
        conditions = dict((c.get("type"), c.get("status")) for c in (live.get("status") or {}).get("conditions") or [])
        done = conditions.get("Established") == "True"
        return done, ("Established %s" % conditions.get("Established", "not reported yet"), int(done))

    outcome = wait_for(check, params["wait_timeout"], progress=lambda value: value[1])
    if not outcome[0]:
        raise NrtSchedulerError("CRD %s was applied but the API server does not serve it (%s): %s; see kubectl describe "
                                "crd %s" % (CRD_NAME, outcome[1][0], why_waiting_ended(outcome, params["wait_timeout"]),
                                            CRD_NAME))


def _wait_scheduler(api, params, deployment, wait_for):
    """Seconds until the scheduler's Deployment is available (its pod ready: informers synced)."""
    def check():
        live = api.get(path_of(deployment))
        done, text = deployment_ready(live)
        return done, (text, deployment_progress(live))

    outcome = wait_for(check, params["wait_timeout"], progress=lambda value: value[1])
    if not outcome[0]:
        raise NrtSchedulerError("%s did not become available (%s; %s): see kubectl -n %s logs deployment/%s (a "
                                "configuration kube-scheduler refuses, an image without %s, or one it cannot pull)"
                                % (describe(deployment), why_waiting_ended(outcome, params["wait_timeout"]),
                                   outcome[1][0], params["namespace"], SCHEDULER, SCHEDULER_BINARY))
    return round(outcome[2], 1)


def _stale_cleanup(api, params, check_mode, result):
    """Delete the NodeResourceTopologies numa.kube's publisher wrote for nodes it no longer covers
    (the Node is gone, or publisher_node_selector no longer matches it): the scheduler would read
    them as current. The Nodes and the publisher's pods are read now, right before deleting, not
    at the start of a run that may have waited minutes: an object is deleted only when its Node is
    not selected now and no publisher pod that may still write it runs there (Ready, or
    terminating); one that another manager writes (not ``ours``) is named and never deleted."""
    found = api.list(NRT.list_path, label_selector=label_selector(MANAGED_BY))
    if not found:
        return
    selected = set(node["metadata"]["name"] for node in api.nodes(params.get("publisher_node_selector")))
    candidates = [item for item in found if item["metadata"]["name"] not in selected]
    running = publisher_pods(api, params["namespace"], PUBLISHER) if candidates else {}
    stale, held = [], []
    for item in sorted(candidates, key=lambda obj: obj["metadata"]["name"]):
        name = item["metadata"]["name"]
        if not ours(item):
            result.setdefault("foreign_topology_nodes", {})[name] = writer_of(item)
        elif name in running:
            held.append("%s (pod %s)" % (name, running[name]))
        else:
            stale.append(name)
    for name in stale:
        obj = NRT.ref(name)
        changed, before = api.delete(obj, check_mode)
        result.record(obj, changed, before, {})
    if stale:
        result["stale_topology_nodes"] = stale
    if held:
        result.setdefault("warnings", []).append(
            "%d %s of node%s no longer selected kept for now: a publisher pod still runs there and could write it "
            "again (%s); the next run deletes %s once the pod is gone" % (
                len(held), NRT.kind, "" if len(held) == 1 else "s", "; ".join(held),
                "it" if len(held) == 1 else "them"))


def _wait_topologies(api, params, selection, wait_for, result):
    """The nodes the publisher covers, once each has its NodeResourceTopology, numa.kube's, with a
    zone per NUMA node (but for those unavailable_nodes_allowed accepts, named in the result)."""
    names, down, _allowed = selection
    stall = params["wait_timeout"]
    expected = params.get("numa_nodes") or {}

    def proven(pending):
        found = api.named(NRT.list_path, pending)
        return dict((name, zone_problem(obj, expected.get(name))) for name, obj in found.items())

    outcome = wait_pending([name for name in names if name not in down], proven, wait_for, stall)
    warn_down(result, down)
    if not outcome[0]:
        left = sorted(outcome[1].items())
        raise NrtSchedulerError("the %s of %d node%s %s not as the scheduler needs it: %s; %s; see the publisher's logs "
                                "(kubectl -n %s logs ds/%s)" % (
                                    NRT.kind, len(left), "" if len(left) == 1 else "s", "is" if len(left) == 1 else "are",
                                    "; ".join("%s: %s" % item for item in left[:10]) + (
                                        "; and %d more" % (len(left) - 10) if len(left) > 10 else ""),
                                    why_waiting_ended(outcome, stall), params["namespace"], PUBLISHER))
    return [name for name in names if name not in down]


def others_problem(api, cowritten=None):
    """Why numa.kube's CRD must stay (None when it need not): the NodeResourceTopologies in the
    cluster that numa.kube did not write, which deleting the CRD would delete. Those without
    numa.kube's managed-by label are read by a label selector, so that numa.kube's own objects, one
    a node, never fill the page; ``cowritten`` ({name: writer}) adds those with the label that
    another manager writes (not ``ours``)."""
    answer = api.get(NRT.list_path, label_selector="%s!=%s" % (MANAGED_BY_LABEL, FIELD_MANAGER), limit=LIST_PAGE) or {}
    items = (answer.get("items") or []) + [NRT.ref(name) for name in sorted(cowritten or {})]
    meta = answer.get("metadata") or {}
    if not items:
        return None
    total = len(items) + (meta.get("remainingItemCount") or 0)
    count = "more than %d" % len(items) if meta.get("continue") and not meta.get("remainingItemCount") else "%d" % total
    return ("it still serves %s %s object%s numa.kube did not write (%s), which deleting it would delete: it stays "
            "until they are gone" % (count, NRT.kind, "" if total == 1 else "s", named(items, total)))


def _remove(api, params, check_mode, wait_for):
    """absent: the publisher first (node_publisher.remove_publisher: its DaemonSet, its rights,
    then its policy; with wait its pods gone), the objects it wrote (``ours`` alone: one another
    manager writes stays, named), the scheduler, then the CRD and the Namespace, each only when
    numa.kube made it and nothing of another's would go with it."""
    result = StackResult()
    scheduler = scheduler_objects(params)
    publisher = publisher_objects(params)
    namespace = namespace_object(params)
    # read before anything is deleted
    live_crd = api.get(path_of(CRD_REF))
    cowritten = {}
    if live_crd is not None and serves(live_crd, NRT.version):
        cowritten = dict((item["metadata"]["name"], writer_of(item)) for item in
                         api.list(NRT.list_path, label_selector=label_selector(MANAGED_BY)) if not ours(item))
    namespace_held = namespace_problem(api, namespace, scheduler + publisher, what="for this stack",
                                       fix="It stays; delete it yourself once they are moved")

    def remove(obj):
        changed, before = api.delete(obj, check_mode)
        result.record(obj, changed, before, {})

    warnings = []
    skipped, left = remove_publisher(api, params, publisher, NRT, check_mode, wait_for, result, ours)
    if left:
        warnings.append(publisher_pods_left(left, params))
    foreign = dict((name, cowritten.get(name) or "another manager writes it now") for name in skipped)
    foreign.update((name, writer) for name, writer in cowritten.items() if name not in foreign)
    if foreign:
        result["foreign_topology_nodes"] = foreign
        warnings.append("%d %s with numa.kube's label that another manager writes kept: %s" % (
            len(foreign), NRT.kind, "; ".join("%s (%s)" % item for item in sorted(foreign.items()))))
    # once numa.kube's own objects are gone: those kept hold numa.kube's CRD like any other's
    crd_held = others_problem(api, foreign) if live_crd is not None and owned(live_crd, STACK) else None
    for obj in reversed(scheduler):
        remove(obj)
    for obj in RETIRED:
        remove(obj)
    if crd_held:
        result.keep(CRD_REF, reason=crd_held)
        warnings.append("CRD %s: %s" % (CRD_NAME, crd_held))
    elif live_crd is not None:
        remove(CRD_REF)
    if namespace_held:
        result.keep(namespace, reason=namespace_held)
        warnings.append(namespace_held)
    else:
        remove(namespace)
    if warnings:
        result["warnings"] = warnings
    return result
