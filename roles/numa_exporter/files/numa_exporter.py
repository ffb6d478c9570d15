# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-exporter (systemd mode): per-NUMA-node CPU, memory, huge page and numastat metrics.

The same metrics code as the node agent's exporter (the collection's numa_metrics and
metrics_server modules, which the role installs next to this script), for nodes outside a cluster
with an operator. The static topology is read once; each scrape reads what moves. What kubelet
assigned comes from its CPU and Memory Manager checkpoints here (the agent asks kubelet's
PodResources API instead, which needs gRPC).
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import signal
import sys
import threading

__metaclass__ = type  # pylint: disable=invalid-name

DEFAULT_LIB = "/opt/numa-exporter/lib"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen-address", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9201, help="port to serve on (default 9201)")
    parser.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM; with --tls-key-file)")
    parser.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    parser.add_argument("--sysfs-root", default="/sys", help="where sysfs is mounted (default /sys)")
    parser.add_argument("--kubelet-root", default="/var/lib/kubelet",
                        help="kubelet's root folder holding cpu_manager_state and memory_manager_state")
    parser.add_argument("--lib", default=DEFAULT_LIB,
                        help="folder holding ansible_collections/numa/kube/plugins/module_utils (default %s)" % DEFAULT_LIB)
    args = parser.parse_args(argv)
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        parser.error("--tls-cert-file and --tls-key-file go together")
    return args


def build_render(args):
    """Import the collection's metrics code from args.lib; return the function one scrape calls."""
    if args.lib and os.path.isdir(args.lib) and args.lib not in sys.path:
        sys.path.insert(0, args.lib)
    from ansible_collections.numa.kube.plugins.module_utils import numa_metrics

    scraper = numa_metrics.Scraper(args.sysfs_root)

    def render():
        assigned, allocatable, problems = numa_metrics.checkpoint_data(args.kubelet_root, scraper.topology.cpu_node)
        readable = numa_metrics.Family("numa_kubelet_checkpoint_readable", "gauge", "Whether a kubelet checkpoint "
                                       "could be read (1) or not (0); absent when the file does not exist.")
        broken = dict(problems)
        for name in ("cpu_manager_state", "memory_manager_state"):
            if name in broken or os.path.exists(os.path.join(args.kubelet_root, name)):
                readable.add((("file", name),), 0 if name in broken else 1)
        return scraper.scrape(assigned=assigned, allocatable=allocatable, extra=[readable])

    return render


def serve(args, ready=None, stop=None):
    """Serve until SIGTERM/SIGINT (or until ``stop`` is set); ``ready`` receives the bound port."""
    render = build_render(args)
    from ansible_collections.numa.kube.plugins.module_utils import metrics_server

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *unused: stop.set())
    return metrics_server.serve(render, args.listen_address, args.port, args.tls_cert_file, args.tls_key_file,
                                ready=ready, stop=stop)


def main(argv=None):
    return serve(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
