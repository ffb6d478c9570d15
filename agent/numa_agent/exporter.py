# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA exporter: Prometheus metrics per NUMA node, pod and container (``numa-agent exporter``).

One program for both ways it runs. In the node agent's pod (the numa_monitoring DaemonSet), what
kubelet assigned and may assign comes from its PodResources API (``List`` and
``GetAllocatableResources`` on ``pod-resources/kubelet.sock``, which needs gRPC), and each
container's memory per NUMA node from its cgroup's ``memory.numa_stat``, named through the API
server's list of this node's pods (read again only when a container appears that it cannot name).
As the numa_exporter role's systemd service (``--kubelet-data=checkpoints``, standard library
only), the assignments come from copies of kubelet's CPU and Memory Manager checkpoints that the
checkpoint relay keeps in ``--checkpoint-dir``. Node metrics come from sysfs either way
(numa_metrics: the static topology read once, then only what moves).

Those labels say which workloads run where, pinned to which CPUs: in a pod, ``/metrics`` is served
only to a scraper whose bearer token the API server authenticates and allows to ``get``
``/metrics`` (``--authentication=tokenreview``, the default; authn.py). ``--authentication=none``
serves anyone who reaches the port: only for an exporter that something in front of it already
guards (a kube-rbac-proxy sidecar, a network policy or mesh that lets in Prometheus alone), one on
a node outside a cluster's pods (the systemd service, behind its TLS and listen address), or one
listening on loopback for a test. ``--containers`` limits the per-container series.

A scrape never waits long on anything but the node's own files, so that it answers well inside
Prometheus' scrape timeout (10 s by default) on a slow or loaded node: the token's review at most
``--review-timeout`` (authn.py), kubelet's two PodResources calls ``KUBELET_SECONDS`` together,
the API server's list of pods at most ``PodNames.wait`` (it goes on in the background).
"""

import logging
import time

from numa_agent.metrics import server as metrics_server
from numa_agent.metrics import numa_metrics
from numa_agent.authn import scraper_check
from numa_agent.checkpoint_relay import checkpoint_readable, stop_on_signals
from numa_agent.pods import PodNames

LOG = logging.getLogger("exporter")
KUBELET_DATA = ("pod-resources", "checkpoints")
# the most a scrape waits for kubelet's PodResources API, both calls together (a local socket that
# answers in milliseconds; a kubelet slower than this is reported by numa_exporter_pod_resources_up 0)
KUBELET_SECONDS = 2.0


class Exporter(object):
    def __init__(self, args):
        self.args = args
        self.kubelet_data = getattr(args, "kubelet_data", "pod-resources")
        cgroup_root = args.cgroup_root if self.kubelet_data == "pod-resources" else ""
        self.scraper = numa_metrics.Scraper(args.sysfs, cgroup_root or None, getattr(args, "containers", "all"))
        self.pod_resources = None
        self.rpc_error = Exception
        if self.kubelet_data == "pod-resources" and args.pod_resources_socket:
            from numa_agent.pod_resources import PodResources, RpcError  # gRPC: the agent's image has it

            self.pod_resources, self.rpc_error = PodResources(args.pod_resources_socket), RpcError
        self.pod_names = PodNames(args.node_name) if cgroup_root and self.scraper.containers != "none" else None

    def render(self):
        if self.kubelet_data == "checkpoints":
            return self._render_checkpoints()
        assigned = allocatable = None
        up = numa_metrics.Family("numa_exporter_pod_resources_up", "gauge", "1 when kubelet's PodResources API "
                                 "answered this scrape, 0 when it did not.")
        if self.pod_resources is not None:
            deadline = time.monotonic() + KUBELET_SECONDS
            try:
                assigned = self.pod_resources.assigned(timeout=KUBELET_SECONDS)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self.rpc_error("kubelet's List took the whole %g s" % KUBELET_SECONDS)
                allocatable = self.pod_resources.allocatable(timeout=left)
                up.add((), 1)
            except self.rpc_error as exc:
                LOG.warning("kubelet's PodResources API did not answer: %s", exc.code() if hasattr(exc, "code") else exc)
                up.add((), 0)
        containers = {}
        cgroups = self.scraper.cgroups()  # the one look at the cgroup tree of this scrape
        if cgroups and self.pod_names is not None:
            containers = self.pod_names.lookup(cgroups)
        return self.scraper.scrape(assigned=assigned, allocatable=allocatable, containers=containers, extra=[up],
                                   cgroups=cgroups)

    def _render_checkpoints(self):
        folder = self.args.checkpoint_dir
        assigned, allocatable, problems = numa_metrics.checkpoint_data(folder)
        readable = numa_metrics.Family("numa_kubelet_checkpoint_readable", "gauge", "Whether a kubelet checkpoint "
                                       "could be read (1) or not (0); absent when the file does not exist.")
        for name, value in sorted(checkpoint_readable(folder, problems).items()):
            readable.add((("file", name),), value)
        return self.scraper.scrape(assigned=assigned, allocatable=allocatable, extra=[readable])


def main(args, stop=None, ready=None):
    """Serve until SIGTERM/SIGINT (or ``stop``, an Event, is set); ``ready`` also receives the bound port."""
    try:
        authorize = scraper_check(args)
    except ValueError as exc:
        LOG.error("%s", exc)
        return 2
    exporter = Exporter(args)
    topology = exporter.scraper.topology
    if exporter.kubelet_data == "checkpoints":
        source = "kubelet's checkpoints in %s" % args.checkpoint_dir
    else:
        source = "PodResources at %s; pod names %s" % (
            args.pod_resources_socket or "(off)", "from the API server" if exporter.pod_names is not None
            and exporter.pod_names.usable() else "(off)")
    LOG.info("NUMA nodes %s, %d PCI devices; %s; per-container series: %s",
             ",".join(str(n["id"]) for n in topology.nodes), len(topology.pci), source, exporter.scraper.containers)
    stop = stop or stop_on_signals()

    def started(port):
        LOG.info("serving %s on %s:%d, /metrics %s", "HTTPS" if args.tls_cert_file else "HTTP", args.listen_address,
                 port, "to anyone (--authentication=none)" if authorize is None else
                 "to bearer tokens the API server allows to get /metrics")
        if ready is not None:
            ready(port)

    return metrics_server.serve(exporter.render, args.listen_address, args.port, args.tls_cert_file,
                                args.tls_key_file, ready=started, stop=stop, authorize=authorize)
