# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Numatopology publisher: this node's NUMA layout and free CPUs for Volcano's numa-aware plugin;
and the rounds it shares with the NodeResourceTopology publisher (nrt_publisher.py):
``NodeObjectPublisher`` and ``run``.

One ``Numatopology`` (``nodeinfo.volcano.sh/v1alpha1``, cluster-scoped, named as the Node) per
node. Its spec comes from what kubelet itself reports, never from its checkpoint files:

- the policies kubelet runs, from its ``/configz`` (drop-ins and flags included), read at start,
  about every ``--resync`` seconds (with the jitter below) and in the first round after anything
  shows that kubelet restarted (perhaps with a new policy): the PodResources API not answering,
  its ``GetAllocatableResources`` answering otherwise than the round before, or its socket file
  being another one (kubelet makes a new one at each start: a restart between two rounds shows
  there even when the rest looks as before);
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

A subclass may name its writes (``field_manager``: the API server records it in the object's
``managedFields``) and tell a foreign object by more than the label (``foreign``).

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
from urllib.parse import quote

from ansible_collections.numa.kube.plugins.module_utils.numa import volcano_numatopology as numatopology
from numa_agent.metrics.numa_metrics import Topology
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader
from numa_agent.kube import KUBELET_TLS_MODES, ApiError, Client, kubelet_client

LOG = logging.getLogger("publisher")
COLLECTION = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"
MANAGED_BY = "app.kubernetes.io/managed-by"


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def managers(obj):
    """Who writes an object, for a log: its managed-by label, else the field managers the server recorded."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
    label = labels.get(MANAGED_BY)
    if isinstance(label, str) and label:
        return label
    entries = metadata.get("managedFields") if isinstance(metadata.get("managedFields"), list) else []
    names = sorted(set(entry["manager"] if isinstance(entry, dict) and isinstance(entry.get("manager"), str)
                       and entry["manager"] else "?" for entry in entries))
    return ", ".join(names) or "unknown"


def canonical(value):
    """A PodResources answer with every list in one order. kubelet lists a node's allocatable CPUs in
    the order of its own sets, which differs from one call to the next (seen on a guest with four
    NUMA nodes: [1, 3, 0], then [0, 1, 3]); compared as they come, every round looked like a kubelet
    restart and read /configz again, a TLS handshake with kubelet every period."""
    if isinstance(value, dict):
        return dict((key, canonical(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        items = [canonical(item) for item in value]
        return sorted(items, key=repr)
    return value


def socket_identity(path):
    """What tells one kubelet socket file from the next (inode, change and modification times); None when
    there is none. kubelet makes its PodResources socket anew at each start (cri-client's
    ``CreateListener``: unlink, listen on a temporary name, rename), so a restart changes it."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_ctime_ns, info.st_mtime_ns)


class NodeObjectPublisher(object):
    """What both publishers share: one cluster-scoped object named as the node, kept current.

    The sources (kubelet's /configz, its PodResources API) are read as the module docstring says;
    the object is read at start and at each jittered resync, written only when its content or
    annotations differ, created owned by the Node, written again after a 409 or 404 on a copy
    that went stale. A subclass names the object (``kind``, ``api_version``, ``collection``,
    ``labels``), builds its content (``desired``: the top-level fields it owns, and the
    annotations) and says what it does with an object of that name someone else made
    (``adopt_foreign``).
    """

    kind = None
    api_version = None
    collection = None
    labels = {}
    # the fieldManager of its writes (None: the API server names them after the client's User-Agent)
    field_manager = None
    # an object of the node's name that ``foreign`` calls someone else's: written over (keeping its
    # labels) when True, left as it is when False
    adopt_foreign = True
    # the stack module option that chooses --kubelet-tls, named in the hint when kubelet's
    # certificate does not verify
    tls_option = "numa.kube.volcano_stack's publisher_kubelet_tls"
    log = LOG

    def __init__(self, node_name, sysfs="/sys", pod_resources=None, api=None, kubelet=None, resync=60.0,
                 pod_resources_errors=(), jitter=0.5, rand=None, clock=None, kubelet_identity=None):
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
        self.config, self.config_due = None, 0.0
        # what changes when kubelet restarts (socket_identity of its PodResources socket; None: not known),
        # and what it and GetAllocatableResources were the round before
        self.kubelet_identity = kubelet_identity or (lambda: None)
        self.last_identity, self.last_allocatable = None, None
        # the content last written or found in place, when the object is next read from the API server,
        # and the object as the server last showed it (a GET's answer or a write's)
        self.written, self.resync_due, self.seen = None, 0.0, None
        self.node_uid = None

    def wait(self):
        """Seconds to the next resync: ``resync`` x a random factor in [1 - jitter, 1 + jitter]."""
        return self.resync * (1.0 - self.jitter + 2.0 * self.jitter * self.rand())

    # sources ---------------------------------------------------------------------------------
    def _kubelet_config(self):
        now = self.clock()
        if self.config is None or now >= self.config_due:
            config = self.kubelet.get("/configz").get("kubeletconfig")
            if not isinstance(config, dict):
                raise ApiError(0, "kubelet's /configz has no kubeletconfig")
            if self.config is not None and config != self.config:
                self.log.info("kubelet's configuration changed: CPU Manager %s, Topology Manager %s",
                              config.get("cpuManagerPolicy"), config.get("topologyManagerPolicy"))
            self.config, self.config_due = config, now + self.wait()
        return self.config

    def _kubelet_resources(self):
        """(GetAllocatableResources, List) from PodResources. /configz is read again next when it does not
        answer, when GetAllocatableResources answers otherwise than the round before or when its socket
        is another one: kubelet restarted, perhaps with other policies."""
        identity = self.kubelet_identity()
        try:
            allocatable, assigned = self.pod_resources.allocatable(), self.pod_resources.assigned()
        except self.pod_resources_errors:
            self.config = None
            raise
        if self.config is not None and (identity != self.last_identity
                                        or canonical(allocatable) != canonical(self.last_allocatable)):
            self.log.info("kubelet restarted (%s): its configuration is read again",
                          "a new PodResources socket" if identity != self.last_identity
                          else "GetAllocatableResources answers otherwise")
            self.config = None
        self.last_identity, self.last_allocatable = identity, allocatable
        return allocatable, assigned

    def desired(self):
        """({top-level field: value}, annotations) as things are now; ApiError or a PodResources error when a
        source did not answer."""
        raise NotImplementedError

    def describe(self, content):
        """One line for the log when the object was written."""
        raise NotImplementedError

    # the object ------------------------------------------------------------------------------
    def path(self):
        return self.collection + "/" + self.node_name

    def _named(self, path):
        """A write's path, with the fieldManager query when the publisher names its writes."""
        return path + "?fieldManager=" + quote(self.field_manager, safe="") if self.field_manager else path

    def foreign(self, obj):
        """Why an existing object is someone else's, in words; None when it is numa.kube's (its managed-by label)."""
        if ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == "numa.kube":
            return None
        return "no label %s=numa.kube; written by %s" % (MANAGED_BY, managers(obj))

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

    def write(self, content, annotations, fresh=True):
        """Create or replace the object when it differs; True when something was written.

        ``fresh``: compare with the object read now; otherwise with the one the server last showed
        (read again, and the write tried once more, when the server refuses it as gone or stale).
        """
        path = self.path()
        if fresh or self.seen is None:
            fresh, self.seen = True, None
            current = self._read(path)
        else:
            current = copy.deepcopy(self.seen)
        if current is None:
            body = {"apiVersion": self.api_version, "kind": self.kind,
                    "metadata": {"name": self.node_name, "annotations": annotations, "labels": dict(self.labels),
                                 "ownerReferences": self._owner()}}
            body.update(copy.deepcopy(content))
            self._keep(self.api.request("POST", self._named(self.collection), body), body)
            return True
        self.seen = copy.deepcopy(current)
        metadata = current.setdefault("metadata", {})
        have = metadata.get("annotations") or {}
        labels = metadata.get("labels") or {}
        reason = self.foreign(current)
        ours = reason is None
        if not ours and not self.adopt_foreign:
            if fresh:  # once per resync: the object is read again only then
                self.log.warning("%s %s is not numa.kube's (%s): left as it is", self.kind, self.node_name, reason)
            return False
        # an object an earlier publisher made gets today's labels; one made by another exporter
        # stays without them (numa.kube's state=absent must not take it for its own)
        relabel = ours and any(labels.get(k) != v for k, v in self.labels.items())
        if (all(current.get(k) == v for k, v in content.items()) and all(have.get(k) == v for k, v in annotations.items())
                and not relabel):
            return False
        if relabel:
            metadata["labels"] = dict(labels, **self.labels)
        metadata["annotations"] = dict(have, **annotations)
        current.update(copy.deepcopy(content))
        try:
            # carries resourceVersion: the server refuses it (409) when the object changed meanwhile
            answer = self.api.request("PUT", self._named(path), current)
        except ApiError as exc:
            self.seen = None
            if fresh or exc.status not in (404, 409):
                raise
            return self.write(content, annotations, fresh=True)
        self._keep(answer, current)
        return True

    def step(self):
        """One round: read the sources; write when the content moved, read the object again at the resync."""
        try:
            content, annotations = self.desired()
        except (ApiError,) + self.pod_resources_errors as exc:
            self.log.warning("not publishing: a source did not answer: %s%s",
                             exc.details() if hasattr(exc, "details") else exc, _certificate_hint(exc, self.tls_option))
            return False
        state = (content, annotations)
        due = self.clock() >= self.resync_due
        if state == self.written and not due:
            return False
        try:
            changed = self.write(content, annotations, fresh=due)
        except ApiError as exc:
            self.log.warning("could not write %s %s: %s", self.kind, self.node_name, exc)
            return False
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # an object of a shape no API server gives (metadata a list, say): read it again next round,
            # rather than end the publisher
            self.seen = None
            self.log.warning("could not write %s %s: the API server's object has an unexpected shape (%r); it is "
                             "read again next round", self.kind, self.node_name, exc)
            return False
        if changed:
            self.log.info("%s %s: %s", self.kind, self.node_name, self.describe(content))
        self.written = state
        if due:
            self.resync_due = self.clock() + self.wait()
        return changed


class Publisher(NodeObjectPublisher):
    """The Numatopology publisher (Volcano's numa-aware plugin)."""

    kind = "Numatopology"
    api_version = numatopology.NUMATOPOLOGY_API
    collection = COLLECTION
    labels = numatopology.PUBLISHER_LABELS

    def __init__(self, *args, **kwargs):
        super(Publisher, self).__init__(*args, **kwargs)
        self.cpus, self.cpu_signature = None, None

    def _cpus(self):
        signature = Topology.current_signature(self.sysfs)
        if self.cpus is None or signature != self.cpu_signature:
            self.cpus = [{"id": c["id"], "numa_node": c["numa_node"], "socket": c["socket"], "core": c["core"]}
                         for c in SysfsReader(self.sysfs).read(include_pci=False)["cpus"]]
            self.cpu_signature = signature
        return self.cpus

    def desired(self):
        cpus = self._cpus()
        allocatable, assigned = self._kubelet_resources()
        allocatable = allocatable["cpu_ids"]
        assigned = [cpu for pod in assigned for c in pod["containers"] for cpu in c["cpu_ids"]]
        config = self._kubelet_config()
        spec = numatopology.numatopology_spec(cpus, config, allocatable, assigned)
        annotations = {numatopology.STARTED_ANNOTATION: self.started,
                       numatopology.RESERVED_CPUS_ANNOTATION: numatopology.reserved_cpus(cpus, config, allocatable)}
        return {"spec": spec}, annotations

    def describe(self, content):
        spec = content["spec"]
        return "free CPUs %s of %d, CPU Manager %s, Topology Manager %s" % (
            spec["numares"]["cpu"]["allocatable"] or "(none)", spec["numares"]["cpu"]["capacity"],
            spec["policies"]["CPUManagerPolicy"], spec["policies"]["TopologyManagerPolicy"])


def _certificate_hint(exc, tls_option="numa.kube.volcano_stack's publisher_kubelet_tls"):
    """The way out when kubelet's certificate did not verify (empty for any other failure)."""
    if not getattr(exc, "certificate", False):
        return ""
    return ("; if the cluster signs kubelet's serving certificate (serverTLSBootstrap), run with --kubelet-tls "
            "cluster-ca (%s); if kubelet's self-signed certificate has expired (kubelet never renews it), remove "
            "kubelet.crt and kubelet.key from its --cert-dir, restart kubelet, then this pod" % tls_option)


def kubelet_tls_problem(kubelet, mode):
    """Why kubelet's certificate cannot be checked as ``mode`` asks (None when it can)."""
    if not kubelet.verify or os.path.isfile(kubelet.ca_file):
        return None
    if mode == "node-cert":
        return ("--kubelet-tls node-cert checks kubelet's serving certificate against the node's own, and %s is not "
                "there: mount the node's kubelet.crt there (numa.kube's stack modules do), give --kubelet-ca-file, "
                "or choose --kubelet-tls cluster-ca (serving certificates the cluster signs) or insecure"
                % kubelet.ca_file)
    return ("--kubelet-tls %s checks kubelet's serving certificate against %s, which is not there: give "
            "--kubelet-ca-file, or choose another of %s" % (mode, kubelet.ca_file, ", ".join(KUBELET_TLS_MODES)))


def run(args, publisher_class):
    """The publishers' program: check the options, then one ``step`` every ``--period`` until SIGTERM."""
    log = publisher_class.log
    if not args.node_name:
        log.error("no node name: give --node-name or NODE_NAME (the downward API's spec.nodeName)")
        return 2
    try:
        kubelet = kubelet_client(args.kubelet_url, args.kubelet_tls, args.kubelet_ca_file, args.kubelet_server_name,
                                 args.node_name)
    except ValueError as exc:  # a mode from KUBELET_TLS that argparse's choices did not see
        log.error("%s", exc)
        return 2
    if not kubelet.base:
        log.error("no kubelet address: give --kubelet-url or NODE_IP (the downward API's status.hostIP)")
        return 2
    problem = kubelet_tls_problem(kubelet, args.kubelet_tls)
    if problem:
        log.error("%s", problem)
        return 2
    if not kubelet.verify:
        log.warning("kubelet's serving certificate is NOT checked (--kubelet-tls insecure): whatever answers on "
                    "%s receives this pod's token", kubelet.base)
    from numa_agent.pod_resources import PodResources, RpcError  # gRPC: only in the image
    publisher = publisher_class(args.node_name, args.sysfs, PodResources(args.pod_resources_socket),
                                kubelet=kubelet, resync=args.resync, pod_resources_errors=(RpcError,),
                                kubelet_identity=lambda: socket_identity(args.pod_resources_socket))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *unused: stop.set())
    log.info("publishing %s %s every %.1f s (kubelet at %s, %s; PodResources at %s)", publisher_class.kind,
             args.node_name, args.period, kubelet.base, kubelet.tls(), args.pod_resources_socket)
    while not stop.is_set():
        publisher.step()
        stop.wait(args.period)
    return 0


def main(args):
    return run(args, Publisher)
