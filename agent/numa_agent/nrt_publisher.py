# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NodeResourceTopology publisher: this node's NUMA zones for scheduler-plugins'
NodeResourceTopologyMatch.

One ``NodeResourceTopology`` (``topology.node.k8s.io/v1alpha2``, cluster-scoped, named as the
Node, labelled ``app.kubernetes.io/managed-by: numa.kube`` and ``numa.kube/stack: topology``)
per node: a zone per NUMA node with cpu, memory, huge pages and NUMA-bound devices, kubelet's
Topology Manager policy and scope, and the pods fingerprint the scheduler's cache compares
(module_utils/numa/nrt.py says how each figure is taken). Its sources:

- kubelet's PodResources API, ``GetAllocatableResources`` and ``List``, every ``--period``
  seconds;
- kubelet's ``/configz``, at start, at each resync and after anything shows kubelet restarted
  (PodResources not answering, answering GetAllocatableResources otherwise, a new socket);
- sysfs (the zones, their CPUs, memory, huge pages and distances), at start, at each resync and
  when CPUs or NUMA nodes go on- or offline.

Its rounds are the Numatopology publisher's (publisher.NodeObjectPublisher): written only when
the content differs from what the server holds, a GET at start and at each jittered resync, no
GET before a PUT in between, read again after a 409 or 404, created owned by the Node, the start
time in an annotation. Two differences. Its writes name the field manager
``numa-kube-nrt-publisher``. And an object of the node's name that is not numa.kube's
(``noderesourcetopology.is_ours``: without numa.kube's managed-by label, or with it but with
another manager owning its zones or attributes in ``managedFields``: NFD's topology-updater or the
resource-topology-exporter, which keep the labels of an object they update, started after
numa.kube's publisher) belongs to someone else (NFD, OpenShift's NUMA Resources Operator) and is
never changed; the publisher says so once per resync and leaves it. It reads and writes only the
object named as its node, and numa.kube's ValidatingAdmissionPolicy holds it to that.
"""

import logging

from ansible_collections.numa.kube.plugins.module_utils.numa import nrt as noderesourcetopology
from ansible_collections.numa.kube.plugins.module_utils.numa import volcano_numatopology as numatopology
from numa_agent.metrics.numa_metrics import Topology
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader
from numa_agent.publisher import NodeObjectPublisher, run

CONTENT = ("zones", "attributes")


class NrtPublisher(NodeObjectPublisher):
    kind = noderesourcetopology.NRT_KIND
    api_version = noderesourcetopology.NRT_API
    collection = noderesourcetopology.NRT_COLLECTION
    labels = noderesourcetopology.PUBLISHER_LABELS
    field_manager = noderesourcetopology.PUBLISHER_FIELD_MANAGER
    adopt_foreign = False
    tls_option = "numa.kube.topology_scheduler's publisher_kubelet_tls"
    log = logging.getLogger("nrt-publisher")

    def foreign(self, obj):
        return noderesourcetopology.foreign_reason(obj)

    def __init__(self, *args, **kwargs):
        super(NrtPublisher, self).__init__(*args, **kwargs)
        self.topology, self.topology_signature, self.topology_due = None, None, 0.0

    def _topology(self):
        """sysfs' facts, read again at each resync (huge pages, memory) and when CPUs or nodes change."""
        signature = Topology.current_signature(self.sysfs)
        now = self.clock()
        if self.topology is None or signature != self.topology_signature or now >= self.topology_due:
            self.topology = SysfsReader(self.sysfs).read(include_pci=False)
            self.topology_signature, self.topology_due = signature, now + self.wait()
        return self.topology

    def desired(self):
        topology = self._topology()
        allocatable, assigned = self._kubelet_resources()
        config = self._kubelet_config()
        obj = noderesourcetopology.nrt_object(self.node_name, topology, config, allocatable, assigned)
        return (dict((field, obj[field]) for field in CONTENT),
                {numatopology.STARTED_ANNOTATION: self.started})

    def describe(self, content):
        attributes = dict((a["name"], a["value"]) for a in content["attributes"])
        return "available %s; Topology Manager %s (%s scope)" % (
            noderesourcetopology.zone_summary(content), attributes.get(noderesourcetopology.POLICY_ATTRIBUTE),
            attributes.get(noderesourcetopology.SCOPE_ATTRIBUTE))


def main(args):
    return run(args, NrtPublisher)
