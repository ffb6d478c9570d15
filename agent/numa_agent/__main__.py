# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python3 -m numa_agent <program> [options]; ``--help`` lists the programs."""

import argparse
import logging
import os
import sys


# programs with their own options and no logging set-up: the systemd exporter's helpers
STANDALONE = {"checkpoint-relay": "checkpoint_relay", "check-tls": "tls_check"}


def _publisher_options(parser, kind):
    """The options both publishers take (their Kubernetes object is ``kind``)."""
    parser.add_argument("--sysfs", default="/sys", help="where sysfs is mounted (default /sys)")
    parser.add_argument("--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock",
                        help="kubelet's PodResources socket (default %(default)s)")
    parser.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""),
                        help="this node's name (env NODE_NAME)")
    parser.add_argument("--kubelet-url", default=os.environ.get("KUBELET_URL") or None,
                        help="kubelet's HTTPS endpoint (env KUBELET_URL; default https://$NODE_IP:10250)")
    parser.add_argument("--kubelet-tls", default=os.environ.get("KUBELET_TLS") or "node-cert",
                        choices=["node-cert", "cluster-ca", "insecure"],
                        help="how kubelet's serving certificate is checked before the pod's token is sent to it "
                             "(env KUBELET_TLS; default %(default)s): node-cert against the node's own "
                             "self-signed kubelet.crt (mounted from the host) for the node's name; cluster-ca "
                             "against the service account's CA (kubelets with serverTLSBootstrap) for the "
                             "address dialled; insecure: not at all")
    parser.add_argument("--kubelet-ca-file", default=os.environ.get("KUBELET_CA_FILE") or None,
                        help="the CA file to check it against instead of the mode's (env KUBELET_CA_FILE; "
                             "node-cert: /var/lib/kubelet/pki/kubelet.crt, cluster-ca: the service account's "
                             "ca.crt)")
    parser.add_argument("--kubelet-server-name", default=os.environ.get("KUBELET_SERVER_NAME") or None,
                        help="the name kubelet's certificate must carry instead of the mode's (env "
                             "KUBELET_SERVER_NAME; node-cert: the node's name, cluster-ca: the address in the URL)")
    parser.add_argument("--period", type=float, default=2.0,
                        help="seconds between two reads of kubelet's assignments (default %(default)s)")
    parser.add_argument("--resync", type=float, default=60.0,
                        help="about every this many seconds (jittered x0.5-1.5) kubelet's configuration and "
                             "the %s object are read again, and the object written only when they "
                             "differ (default %%(default)s)" % kind)


def build_parser():
    """The agent's command line: one subcommand per program."""
    parser = argparse.ArgumentParser(prog="numa-agent", description="numa.kube's node agent")
    parser.add_argument("--log-level", default=os.environ.get("NUMA_AGENT_LOG_LEVEL", "INFO"),
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    programs = parser.add_subparsers(dest="program", required=True, metavar="program")
    plugin = programs.add_parser(
        "device-plugin", help="advertise numa-align/numa-N, one resource per NUMA node with CPUs",
        description="The NUMA device plugin: registers numa-align/numa-N with kubelet for each NUMA node "
                    "that has CPUs, NUMA_CAPACITY devices each, carrying that node's topology.")
    plugin.add_argument("--sysfs", default="/sys", help="where sysfs is mounted (default /sys)")
    plugin.add_argument("--socket-dir", default=os.environ.get("NUMA_SOCKET_DIR") or "/var/lib/kubelet/device-plugins",
                        help="kubelet's device-plugin folder (env NUMA_SOCKET_DIR; default %(default)s)")
    plugin.add_argument("--capacity", type=int, default=int(os.environ.get("NUMA_CAPACITY") or 100),
                        help="devices per NUMA node (env NUMA_CAPACITY; default %(default)s)")
    plugin.add_argument("--resource-prefix", default=os.environ.get("NUMA_RESOURCE_PREFIX") or "numa-align/numa-",
                        help="resource name before the node id (default %(default)s)")
    plugin.add_argument("--poll", type=float, default=1.0,
                        help="seconds between checks that kubelet and the plugin's sockets are still there")
    exporter = programs.add_parser(
        "exporter", help="Prometheus metrics per NUMA node, pod and container",
        description="The NUMA exporter: node metrics from sysfs, kubelet's assignments from its PodResources "
                    "API, each container's memory per NUMA node from its cgroup.")
    exporter.add_argument("--sysfs", "--sysfs-root", dest="sysfs", default="/sys",
                          help="where sysfs is mounted (default /sys)")
    exporter.add_argument("--kubelet-data", choices=["pod-resources", "checkpoints"], default="pod-resources",
                          help="where kubelet's assignments come from: pod-resources (default) asks its PodResources "
                               "API (needs gRPC, as in the agent's image); checkpoints reads copies of its CPU and "
                               "Memory Manager checkpoints in --checkpoint-dir (standard library only: the "
                               "numa_exporter role's service, with its checkpoint-relay; no per-container locality)")
    exporter.add_argument("--checkpoint-dir", default="/run/numa-exporter",
                          help="with --kubelet-data=checkpoints: the folder of cpu_manager_state and "
                               "memory_manager_state (default %(default)s, where checkpoint-relay copies them)")
    exporter.add_argument("--containers", choices=["all", "exclusive", "none"], default="all",
                          help="which containers get per-container series: all (default), exclusive (only those "
                               "kubelet gave exclusive CPUs, memory-manager memory or NUMA-bound devices) or none "
                               "(node totals only; the cgroup tree is then not read)")
    exporter.add_argument("--cgroup-root", default="/sys/fs/cgroup",
                          help="the node's cgroup v2 root, where kubelet's kubepods tree is (default %(default)s; "
                               "empty: no per-container locality)")
    exporter.add_argument("--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock",
                          help="kubelet's PodResources socket (default %(default)s; empty: not asked)")
    exporter.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""),
                          help="this node's name, to list its pods (env NODE_NAME)")
    exporter.add_argument("--listen-address", default=os.environ.get("NUMA_EXPORTER_LISTEN_ADDRESS") or "127.0.0.1",
                          help="address to serve on (env NUMA_EXPORTER_LISTEN_ADDRESS; default 127.0.0.1)")
    exporter.add_argument("--port", type=int, default=9201, help="port to serve on (default 9201)")
    exporter.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM, with --tls-key-file)")
    exporter.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    exporter.add_argument("--authentication", choices=["tokenreview", "none"], default="tokenreview",
                          help="who may read /metrics: tokenreview (default) lets in a bearer token that the API "
                               "server authenticates (TokenReview) and allows to get the URL /metrics "
                               "(SubjectAccessReview), as kube-rbac-proxy does; none lets in anyone who reaches the "
                               "port (only where something in front already guards it)")
    exporter.add_argument("--review-timeout", type=float, default=4.0,
                          help="seconds a scrape waits for the API server's verdict on its token (TokenReview "
                               "and SubjectAccessReview together), and each request's timeout; a slower API server "
                               "gets the scraper a 503, the verdict, once in, is kept for the next scrape "
                               "(default %(default)s: well inside Prometheus' 10 s scrape timeout)")
    publisher = programs.add_parser(
        "topology-publisher", help="keep this node's Numatopology (Volcano's numa-aware plugin) current",
        description="The Numatopology publisher: kubelet's policies (its /configz), its free CPUs (PodResources) "
                    "and the CPU layout (sysfs), written to nodeinfo.volcano.sh/v1alpha1 Numatopology <node>.")
    _publisher_options(publisher, "Numatopology")
    nrt = programs.add_parser(
        "nrt-publisher", help="keep this node's NodeResourceTopology (scheduler-plugins' NodeResourceTopologyMatch) "
                              "current",
        description="The NodeResourceTopology publisher: a zone per NUMA node with cpu, memory, huge pages and "
                    "NUMA-bound devices (kubelet's PodResources), its distances (sysfs), kubelet's Topology Manager "
                    "policy and scope (its /configz) and the pods fingerprint, written to "
                    "topology.node.k8s.io/v1alpha2 NodeResourceTopology <node>; an object of that name that "
                    "numa.kube did not make, or that another topology updater also writes (its managedFields), is "
                    "left alone.")
    _publisher_options(nrt, "NodeResourceTopology")
    programs.add_parser("checkpoint-relay", add_help=False,
                        help="copy kubelet's CPU and Memory Manager checkpoints where the systemd exporter may read "
                             "them (its own --help)")
    programs.add_parser("check-tls", add_help=False,
                        help="tell whether a certificate, key and CA can serve the exporter (its own --help)")
    return parser


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.program == "exporter" and bool(args.tls_cert_file) != bool(args.tls_key_file):
        parser.error("--tls-cert-file and --tls-key-file go together")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in STANDALONE:
        module = __import__("numa_agent." + STANDALONE[argv[0]], fromlist=["main"])
        return module.main(argv[1:])
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.program == "device-plugin":
        from numa_agent import device_plugin
        return device_plugin.main(args)
    if args.program == "exporter":
        from numa_agent import exporter as exporter_program
        return exporter_program.main(args)
    if args.program == "topology-publisher":
        from numa_agent import publisher as publisher_program
        return publisher_program.main(args)
    if args.program == "nrt-publisher":
        from numa_agent import nrt_publisher
        return nrt_publisher.main(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
