# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """How a cluster-stack module rolls its DaemonSet out over a cluster of any size and waits."""

    DOCUMENTATION = r"""
options:
  max_unavailable:
    description:
      - The DaemonSet's C(spec.updateStrategy.rollingUpdate.maxUnavailable), how many nodes' pods an
        update takes down at once. A count (1 to 2147483647, Kubernetes' int32) or a percentage of the nodes that should run
        the pod (C("1%") to C("100%")), which Kubernetes rounds up, so C("10%") is one node on a
        cluster of up to ten and 100 at a time on 1,000 nodes.
      - Kubernetes refuses 0 while C(maxSurge) is 0, and numa.kube's DaemonSets never surge.
    type: raw
    default: "10%"
  unavailable_nodes_allowed:
    description:
      - How many selected nodes may be unavailable without failing the task. A node is unavailable
        when its Node's C(Ready) condition is not C(True) (NotReady or unreachable) or, for the
        device plugin, when its kubelet does not answer C(/configz). A count (0 to 2147483647) or a
        percentage of the selected nodes, rounded down.
      - It never covers every selected node. At least one selected node is always proven, so the
        share in force is at most the selected nodes less one (C("100%") on 10 nodes accepts 9),
        and a selection whose every node is unavailable fails the task. No selected node at all
        fails it too, with its own message.
      - Those nodes are left out of the proof, named in RV(unavailable_nodes) and in a warning. More
        of them fail the task before anything is applied.
      - With a share accepted, the DaemonSet's rollout is proven pod by pod. Every selected node not
        left out needs a Ready pod of the current template (a Ready node that still runs an older
        pod fails the wait). A node that turns NotReady while the rollout runs joins the nodes left
        out, within the same share.
      - The default C("5%") lets a fleet keep a few machines in repair (50 of 1,000) while a cluster
        of fewer than 20 nodes is proven on every node, as a small cluster should be. C(0) demands
        every node.
    type: raw
    default: "5%"
  wait_timeout:
    description:
      - Seconds a wait may go without progress. A wait runs as long as the rollout moves (more pods
        updated or available, fewer nodes left to prove) and fails once nothing moved for this long,
        so a large cluster's rollout is not cut off half way, and a stuck one fails soon.
      - 1 to 3600.
    type: int
    default: 300
  wait_ceiling:
    description:
      - Seconds the whole task may take at most, its requests and waits included, however the
        rollout moves. It is the hard limit that keeps a slow rollout from waiting for ever. 1 to 86400,
        and not below O(wait_timeout).
      - One DaemonSet wave (the nodes O(max_unavailable) lets go at once) takes about as long as a
        pod takes to start and turn ready; raise this when O(max_unavailable) is small on a large
        cluster (1 on 1,000 nodes takes hours).
    type: int
    default: 3600
"""
