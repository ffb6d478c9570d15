# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Numatopology publisher: this node's NUMA layout and free CPUs for Volcano's numa-aware plugin.

One ``Numatopology`` (``nodeinfo.volcano.sh/v1alpha1``, cluster-scoped, named as the Node) per
node. Its spec comes from what kubelet itself reports, never from its checkpoint files:

- the policies kubelet runs, from its ``/configz`` (drop-ins and flags included), read at start,
  about every ``--resync`` seconds (with the jitter below) and whenever the PodResources API stops
  answering (a kubelet restart, perhaps with a new policy);
- the free CPUs: PodResources' allocatable CPUs minus the CPUs its ``List`` shows assigned,
  asked every ``--period`` seconds;
- the CPU details (NUMA node, socket, core) from sysfs, read again when CPUs go on- or offline.

The object is written only when it differs from what the API server holds, and once at every start
with the start time in an annotation: Volcano's scheduler only takes in a Numatopology it sees
change, and one restarted publisher writing what was already there would otherwise leave the
scheduler's view of the node as it was (volcano-sh/resource-exporter issue 7). The Node owns the
object, so it goes with it.

Requests to the API server, per node: one GET at start and at each resync (the object as the server
holds it: a repair of what someone else changed), a PUT only when the content differs from it, and
no GET before a PUT in between (the object the last answer carried is the base; its resourceVersion
makes the server refuse it if it went stale, and then the object is read again). Each resync wait
is ``resync`` times a random factor in [1 - jitter, 1 + jitter] (default 0.5: 30 to 90 s, 60 on
average): publishers that a DaemonSet started together, or a whole cluster at once, do not come
back to the API server in step, and the first waits alone spread them over a whole period.

Only the object named as this node is ever read or written (``get``, ``create``, ``update``), and
the API server holds it to that: numa.kube's ValidatingAdmissionPolicy refuses this service
account any other node's Numatopology, comparing the name with the node its pod-bound token names.
kubelet receives the token too, so its serving certificate is checked first (``--kubelet-tls``,
default ``node-cert``: the node's own kubelet certificate, mounted from the host).
"""

import copy
import datetime
import logging
import os
import random
import signal
import threading
import time

from ansible_collections.numa.kube.plugins.module_utils import numatopology
from ansible_collections.numa.kube.plugins.module_utils.numa_metrics import Topology
from ansible_collections.numa.kube.plugins.module_utils.topology import SysfsReader
from numa_agent.kube import KUBELET_TLS_MODES, ApiError, Client, kubelet_client

LOG = logging.getLogger("publisher")
COLLECTION = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Publisher(object):
    def __init__(self, node_name, sysfs="/sys", pod_resources=None, api=None, kubelet=None, resync=60.0,
                 pod_resources_errors=(), jitter=0.5, rand=None, clock=None):
        if not 0.0 <= jitter < 1.0:
            raise ValueError("jitter %r: the resync waits are resync x [1 - jitter, 1 + jitter], so it must be at "
                             "least 0 and below 1; give e.g. 0.5" % (jitter,))
        self.node_name = node_name
        self.sysfs = sysfs
        self.pod_resources = pod_resources
        # what the PodResources client raises when kubelet does not answer (grpc.RpcError)
        self.pod_resources_errors = tuple(pod_resources_errors)
        self.api = api or Client()
        self.kubelet = kubelet or kubelet_client(node_name=node_name)
        self.resync = resync
        self.jitter = jitter
        self.rand = rand or random.Random().random  # a source of floats in [0, 1): tests give their own
        self.clock = clock or time.monotonic
        self.started = _now()
        self.cpus, self.cpu_signature = None, None
        self.config, self.config_due = None, 0.0
        # the content last written or found in place, when the object is next read from the API server,
        # and the object as the server last showed it (a GET's answer or a write's)
        self.written, self.resync_due, self.seen = None, 0.0, None
        self.node_uid = None

    def wait(self):
        """Seconds to the next resync: ``resync`` x a random factor in [1 - jitter, 1 + jitter]."""
        return self.resync * (1.0 - self.jitter + 2.0 * self.jitter * self.rand())

    # sources ---------------------------------------------------------------------------------
    def _cpus(self):
        signature = Topology.current_signature(self.sysfs)
        if self.cpus is None or signature != self.cpu_signature:
            self.cpus = [{"id": c["id"], "numa_node": c["numa_node"], "socket": c["socket"], "core": c["core"]}
                         for c in SysfsReader(self.sysfs).read(include_pci=False)["cpus"]]
            self.cpu_signature = signature
        return self.cpus

    def _kubelet_config(self):
        now = self.clock()
        if self.config is None or now >= self.config_due:
            config = self.kubelet.get("/configz").get("kubeletconfig")
            if not isinstance(config, dict):
                raise ApiError(0, "kubelet's /configz has no kubeletconfig")
            if self.config is not None and config != self.config:
                LOG.info("kubelet's configuration changed: CPU Manager %s, Topology Manager %s",
                         config.get("cpuManagerPolicy"), config.get("topologyManagerPolicy"))
            self.config, self.config_due = config, now + self.wait()
        return self.config

    def desired(self):
        """(spec, annotations) as things are now; ApiError or a PodResources error when a source did not answer."""
        cpus = self._cpus()
        try:
            allocatable = self.pod_resources.allocatable()["cpu_ids"]
            assigned = [cpu for pod in self.pod_resources.assigned() for c in pod["containers"] for cpu in c["cpu_ids"]]
        except self.pod_resources_errors:
            self.config = None  # kubelet may be restarting, perhaps with other policies
            raise
        config = self._kubelet_config()
        spec = numatopology.numatopology_spec(cpus, config, allocatable, assigned)
        annotations = {numatopology.STARTED_ANNOTATION: self.started,
                       numatopology.RESERVED_CPUS_ANNOTATION: numatopology.reserved_cpus(cpus, config, allocatable)}
        return spec, annotations

    # the object ------------------------------------------------------------------------------
    def _owner(self):
        if self.node_uid is None:
            self.node_uid = self.api.get("/api/v1/nodes/" + self.node_name)["metadata"]["uid"]
        return [{"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self.node_uid}]

    def _read(self, path):
        try:
            return self.api.get(path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None

    def _keep(self, answer, sent):
        """The object as the server now holds it: its answer to a write (new resourceVersion) or what was sent."""
        self.seen = copy.deepcopy(answer if isinstance(answer, dict) and answer.get("metadata") else sent)

    def write(self, spec, annotations, fresh=True):
        """Create or replace the object when it differs; True when something was written.

        ``fresh``: compare with the object read now; otherwise with the one the server last showed
        (read again, and the write tried once more, when the server refuses it as gone or stale).
        """
        path = COLLECTION + "/" + self.node_name
        if fresh or self.seen is None:
            fresh, self.seen = True, None
            current = self._read(path)
        else:
            current = copy.deepcopy(self.seen)
        if current is None:
            body = {"apiVersion": numatopology.NUMATOPOLOGY_API, "kind": "Numatopology",
                    "metadata": {"name": self.node_name, "annotations": annotations,
                                 "labels": dict(numatopology.PUBLISHER_LABELS),
                                 "ownerReferences": self._owner()},
                    "spec": spec}
            self._keep(self.api.request("POST", COLLECTION, body), body)
            return True
        self.seen = copy.deepcopy(current)
        metadata = current.setdefault("metadata", {})
        have = metadata.get("annotations") or {}
        labels = metadata.get("labels") or {}
        # an object an earlier publisher made gets today's labels; one made by another exporter
        # stays without them (numa.kube's state=absent must not take it for its own)
        ours = labels.get("app.kubernetes.io/managed-by") == "numa.kube"
        relabel = ours and any(labels.get(k) != v for k, v in numatopology.PUBLISHER_LABELS.items())
        if current.get("spec") == spec and all(have.get(k) == v for k, v in annotations.items()) and not relabel:
            return False
        if relabel:
            metadata["labels"] = dict(labels, **numatopology.PUBLISHER_LABELS)
        metadata["annotations"] = dict(have, **annotations)
        current["spec"] = spec
        try:
            # carries resourceVersion: the server refuses it (409) when the object changed meanwhile
            answer = self.api.request("PUT", path, current)
        except ApiError as exc:
            self.seen = None
            if fresh or exc.status not in (404, 409):
                raise
            return self.write(spec, annotations, fresh=True)
        self._keep(answer, current)
        return True

    def step(self):
        """One round: read the sources; write when the content moved, read the object again at the resync."""
        try:
            spec, annotations = self.desired()
        except (ApiError,) + self.pod_resources_errors as exc:
            LOG.warning("not publishing: a source did not answer: %s%s",
                        exc.details() if hasattr(exc, "details") else exc, _certificate_hint(exc))
            return False
        content = (spec, annotations)
        due = self.clock() >= self.resync_due
        if content == self.written and not due:
            return False
        try:
            changed = self.write(spec, annotations, fresh=due)
        except ApiError as exc:
            LOG.warning("could not write Numatopology %s: %s", self.node_name, exc)
            return False
        if changed:
            LOG.info("Numatopology %s: free CPUs %s of %d, CPU Manager %s, Topology Manager %s",
                     self.node_name, spec["numares"]["cpu"]["allocatable"] or "(none)",
                     spec["numares"]["cpu"]["capacity"], spec["policies"]["CPUManagerPolicy"],
                     spec["policies"]["TopologyManagerPolicy"])
        self.written = content
        if due:
            self.resync_due = self.clock() + self.wait()
        return changed


def _certificate_hint(exc):
    """The way out when kubelet's certificate did not verify (empty for any other failure)."""
    if not getattr(exc, "certificate", False):
        return ""
    return ("; if the cluster signs kubelet's serving certificate (serverTLSBootstrap), run with --kubelet-tls "
            "cluster-ca (numa.kube.volcano_stack's publisher_kubelet_tls); if kubelet's self-signed certificate has "
            "expired (kubelet never renews it), remove kubelet.crt and kubelet.key from its --cert-dir, restart "
            "kubelet, then this pod")


def kubelet_tls_problem(kubelet, mode):
    """Why kubelet's certificate cannot be checked as ``mode`` asks (None when it can)."""
    if not kubelet.verify or os.path.isfile(kubelet.ca_file):
        return None
    if mode == "node-cert":
        return ("--kubelet-tls node-cert checks kubelet's serving certificate against the node's own, and %s is not "
                "there: mount the node's kubelet.crt there (numa.kube.volcano_stack does), give --kubelet-ca-file, "
                "or choose --kubelet-tls cluster-ca (serving certificates the cluster signs) or insecure"
                % kubelet.ca_file)
    return ("--kubelet-tls %s checks kubelet's serving certificate against %s, which is not there: give "
            "--kubelet-ca-file, or choose another of %s" % (mode, kubelet.ca_file, ", ".join(KUBELET_TLS_MODES)))


def main(args):
    if not args.node_name:
        LOG.error("no node name: give --node-name or NODE_NAME (the downward API's spec.nodeName)")
        return 2
    try:
        kubelet = kubelet_client(args.kubelet_url, args.kubelet_tls, args.kubelet_ca_file, args.kubelet_server_name,
                                 args.node_name)
    except ValueError as exc:  # a mode from KUBELET_TLS that argparse's choices did not see
        LOG.error("%s", exc)
        return 2
    if not kubelet.base:
        LOG.error("no kubelet address: give --kubelet-url or NODE_IP (the downward API's status.hostIP)")
        return 2
    problem = kubelet_tls_problem(kubelet, args.kubelet_tls)
    if problem:
        LOG.error("%s", problem)
        return 2
    if not kubelet.verify:
        LOG.warning("kubelet's serving certificate is NOT checked (--kubelet-tls insecure): whatever answers on "
                    "%s receives this pod's token", kubelet.base)
    from numa_agent.pod_resources import PodResources, RpcError  # gRPC: only in the image
    publisher = Publisher(args.node_name, args.sysfs, PodResources(args.pod_resources_socket),
                          kubelet=kubelet, resync=args.resync, pod_resources_errors=(RpcError,))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *unused: stop.set())
    LOG.info("publishing Numatopology %s every %.1f s (kubelet at %s, %s; PodResources at %s)",
             args.node_name, args.period, kubelet.base, kubelet.tls(), args.pod_resources_socket)
    while not stop.is_set():
        publisher.step()
        stop.wait(args.period)
    return 0
