# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every cluster stack with a DaemonSet shares: its default tolerations, the rollout's share of
nodes down at once and of nodes left out as unavailable, how those are checked, named and warned
about, and the listings a DaemonSet's wait reads (its pods, the selected Nodes)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import check_namespace, label_selector
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import accepted_down, count_or_percent, max_unavailable, node_ready, not_ready_why

DEFAULT_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                       {"operator": "Exists", "effect": "NoSchedule"}]
# a DaemonSet rollout takes down at most this share of the nodes at once (rounded up, as Kubernetes
# scales it: one node of up to ten); the share of selected nodes that may be NotReady or have a
# kubelet that does not answer, left out of the proof and named (rounded down: none of fewer than 20)
DEFAULT_MAX_UNAVAILABLE = "10%"
DEFAULT_UNAVAILABLE_NODES_ALLOWED = "5%"


def share_problems(params):
    """What is wrong with max_unavailable and unavailable_nodes_allowed (shared by every stack
    with a DaemonSet)."""
    problems = []
    for option, check in (("max_unavailable", max_unavailable),
                          ("unavailable_nodes_allowed", lambda value: count_or_percent(value, option))):
        if option in params:
            try:
                check(params[option])
            except ValueError as exc:
                problems.append(str(exc))
    return problems


def allowed_down(params, selected):
    """How many of ``selected`` nodes may be unavailable: unavailable_nodes_allowed rounded down,
    and at most all but one (at least one node is always proven)."""
    value = count_or_percent(params.get("unavailable_nodes_allowed", 0), "unavailable_nodes_allowed")
    return accepted_down(value, selected)


def not_ready(nodes):
    """{name: why} for the Nodes whose Ready condition is not True."""
    return dict((node["metadata"]["name"], not_ready_why(node)) for node in nodes if not node_ready(node))


def too_many_down(down, allowed, selected, what):
    """The refusal when more nodes are unavailable than accepted, naming each."""
    listed = "; ".join("%s: %s" % item for item in sorted(down.items()))
    if len(down) >= selected:
        return ("all %d selected nodes are unavailable: %s. %s; at least one selected node must be proven, whatever "
                "unavailable_nodes_allowed says: bring them back or change the node selector"
                % (selected, listed, what))
    return ("%d of the %d selected nodes are unavailable and unavailable_nodes_allowed accepts %d: %s. %s; bring "
            "them back, leave them out with the node selector, or raise unavailable_nodes_allowed"
            % (len(down), selected, allowed, listed, what))


UNAVAILABLE_WARNING = "left out as unavailable (within unavailable_nodes_allowed): "


def warn_down(result, down):
    """Name the nodes left out in the result and in one warning (replaced, never repeated, when
    called again as more nodes are left out)."""
    result["unavailable_nodes"] = dict(down)
    warnings = [w for w in result.get("warnings") or [] if not w.startswith(UNAVAILABLE_WARNING)]
    if down:
        warnings.append(UNAVAILABLE_WARNING + "; ".join("%s: %s" % item for item in sorted(down.items())))
    if warnings or "warnings" in result:
        result["warnings"] = warnings


def daemonset_pods(api, namespace, selector):
    """A function listing a DaemonSet's pods (paged, by its selector mapping), for wait_daemonset."""
    path = "/api/v1/namespaces/%s/pods" % check_namespace(namespace)
    return lambda: api.list(path, label_selector=label_selector(selector, "the DaemonSet's selector"))


def nodes_by_name(api, selector):
    """A function giving {name: Node or None} for pending node names (a GET each when few are left,
    else one paged list), for wait_daemonset."""
    params = {"label_selector": label_selector(selector, "node_selector")} if selector else {}
    return lambda pending: api.named("/api/v1/nodes", pending, **params)
