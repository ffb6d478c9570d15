# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-exporter: per-NUMA-node CPU, memory and huge page metrics for Prometheus.

Every scrape reads sysfs and kubelet's CPU/Memory Manager checkpoints afresh (read-only) through
the numa.kube collection's numa_metrics module, which the role installs next to this script.
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import signal
import sys
import threading
import time

__metaclass__ = type  # pylint: disable=invalid-name

DEFAULT_LIB = "/opt/numa-exporter/lib"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen-address", default="0.0.0.0", help="address to serve on (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=9201, help="port to serve on (default 9201)")
    parser.add_argument("--sysfs-root", default="/sys", help="where sysfs is mounted (default /sys)")
    parser.add_argument("--procfs-root", default="/proc", help="where procfs is mounted (default /proc)")
    parser.add_argument("--kubelet-root", default="/var/lib/kubelet",
                        help="kubelet's root folder holding cpu_manager_state and memory_manager_state")
    parser.add_argument("--lib", default=DEFAULT_LIB,
                        help="folder holding ansible_collections/numa/kube/plugins/module_utils (default %s)" % DEFAULT_LIB)
    return parser.parse_args(argv)


class NumaCollector(object):
    """A prometheus_client collector that reads the node afresh on every scrape."""

    def __init__(self, collect, sysfs_root, procfs_root, kubelet_root):
        self.collect_metrics = collect
        self.roots = (sysfs_root, procfs_root, kubelet_root)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        started = time.time()
        error = 0
        try:
            metrics = self.collect_metrics(*self.roots)
        except Exception as exc:  # pylint: disable=broad-except
            sys.stderr.write("numa-exporter: reading the node failed: %s\n" % exc)
            metrics, error = [], 1
        for metric in metrics:
            family = GaugeMetricFamily(metric.name, metric.documentation, labels=list(metric.label_names))
            for labels, value in metric.samples:
                family.add_metric(list(labels), value)
            yield family
        yield GaugeMetricFamily("numa_exporter_scrape_error", "1 when the last scrape could not read the node.",
                                value=error)
        yield GaugeMetricFamily("numa_exporter_scrape_duration_seconds", "Time the last scrape took to read the node.",
                                value=time.time() - started)


def build_registry(args):
    """Import the collection's metrics code from args.lib and register the collector."""
    if args.lib and os.path.isdir(args.lib) and args.lib not in sys.path:
        sys.path.insert(0, args.lib)
    from prometheus_client import CollectorRegistry
    from ansible_collections.numa.kube.plugins.module_utils.numa_metrics import collect

    registry = CollectorRegistry()
    registry.register(NumaCollector(collect, args.sysfs_root, args.procfs_root, args.kubelet_root))
    return registry


def serve(args, ready=None, stop=None):
    """Serve until SIGTERM/SIGINT (or until ``stop`` is set); ``ready`` receives the bound port."""
    from prometheus_client import start_http_server

    registry = build_registry(args)
    server, thread = start_http_server(args.port, addr=args.listen_address, registry=registry)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *unused: stop.set())
    if ready is not None:
        ready(server.server_address[1])
    stop.wait()
    server.shutdown()
    thread.join(10)
    return 0


def main(argv=None):
    return serve(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
