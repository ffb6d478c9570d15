# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA exporter of the node agent: Prometheus metrics per NUMA node, pod and container.

Node metrics come from sysfs (numa_metrics: the static topology read once, then only what moves);
what kubelet assigned and may assign comes from its PodResources API (``List`` and
``GetAllocatableResources`` on ``pod-resources/kubelet.sock``), not from its checkpoint files; each
container's memory per NUMA node comes from its cgroup's ``memory.numa_stat``, named through the
API server's list of this node's pods (the agent's service account may list pods), which is read
again only when a container appears that it cannot name.

Those labels say which workloads run where, pinned to which CPUs: ``/metrics`` is served only to a
scraper whose bearer token the API server authenticates and allows to ``get`` ``/metrics``
(``--authentication=tokenreview``, the default; authn.py). ``--authentication=none`` serves anyone
who reaches the port: only for an exporter that something in front of it already guards (a
kube-rbac-proxy sidecar, a network policy or mesh that lets in Prometheus alone), or one listening
on loopback for a test.
"""

import logging
import signal
import threading

from ansible_collections.numa.kube.plugins.module_utils import metrics_server, numa_metrics
from numa_agent.authn import scraper_check
from numa_agent.pod_resources import PodResources, RpcError
from numa_agent.pods import PodNames

LOG = logging.getLogger("exporter")


class Exporter(object):
    def __init__(self, args):
        self.scraper = numa_metrics.Scraper(args.sysfs, args.cgroup_root)
        self.pod_resources = PodResources(args.pod_resources_socket) if args.pod_resources_socket else None
        self.pod_names = PodNames(args.node_name)
        self.cgroup_root = args.cgroup_root

    def render(self):
        assigned = allocatable = None
        up = numa_metrics.Family("numa_exporter_pod_resources_up", "gauge", "1 when kubelet's PodResources API "
                                 "answered this scrape, 0 when it did not.")
        if self.pod_resources is not None:
            try:
                assigned = self.pod_resources.assigned()
                allocatable = self.pod_resources.allocatable()
                up.add((), 1)
            except RpcError as exc:
                LOG.warning("kubelet's PodResources API did not answer: %s", exc.code() if hasattr(exc, "code") else exc)
                up.add((), 0)
        containers = {}
        if self.cgroup_root:
            containers = self.pod_names.lookup(numa_metrics.container_cgroups(self.cgroup_root))
        return self.scraper.scrape(assigned=assigned, allocatable=allocatable, containers=containers, extra=[up])


def main(args):
    try:
        authorize = scraper_check(args)
    except ValueError as exc:
        LOG.error("%s", exc)
        return 2
    exporter = Exporter(args)
    topology = exporter.scraper.topology
    LOG.info("NUMA nodes %s, %d PCI devices; PodResources at %s; pod names %s",
             ",".join(str(n["id"]) for n in topology.nodes), len(topology.pci), args.pod_resources_socket or "(off)",
             "from the API server" if exporter.pod_names.usable() else "(off: no service account or node name)")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *unused: stop.set())

    def ready(port):
        LOG.info("serving %s on %s:%d, /metrics %s", "HTTPS" if args.tls_cert_file else "HTTP", args.listen_address,
                 port, "to anyone (--authentication=none)" if authorize is None else
                 "to bearer tokens the API server allows to get /metrics")

    return metrics_server.serve(exporter.render, args.listen_address, args.port, args.tls_cert_file,
                                args.tls_key_file, ready=ready, stop=stop, authorize=authorize)
