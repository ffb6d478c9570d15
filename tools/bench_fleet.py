# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Requests and bytes the cluster-stack modules send to an API server of N Nodes.

    python3 tools/bench_fleet.py [--nodes 10,100,1000] [--scenarios healthy,late,update] [--collection DIR]

Each module (numa_resource_plugin, numa_monitoring, volcano_stack with the Numatopology publisher,
topology_scheduler with the NodeResourceTopology publisher) runs its main() in this process, with
its own defaults, against a loopback HTTP stand-in of the API server (``Fleet``): the real
kubernetes client, real HTTP, real JSON. The stand-in serves Nodes (``limit``/``continue`` pages,
label selectors), objects applied by server-side apply, DaemonSets whose status moves as a
rollout would, their pods (paged, labelled with the template generation they run, as the DaemonSet
controller labels them), a Deployment of one replica replaced whole, the pod and node proxy paths
the modules read (kubelet's /configz, the exporter's /healthz and /metrics), the API server's own
ClusterRoles, Numatopologies, NodeResourceTopologies (served once their CRD is Established) and
the CRD and discovery answers. Time is virtual: the modules' KubeApi gets a clock that only its
sleeps move, and the rollouts follow that clock, so a node 30 s late costs no real time.

Scenarios: ``healthy`` (a first install: every pod available 4-7 s after its DaemonSet is made),
``late`` (the same, one node 30 s later than the rest), ``update`` (a second run with a new image:
the DaemonSet's controller replaces pods ``maxUnavailable`` at a time, 5 s each). Printed per
module: requests (and per Node), bytes sent by the stand-in and received, wait rounds, virtual
and real seconds, the outcome; for ``late``, the requests a round while only the late node was
pending. Figures only: nothing is judged.
"""

import argparse
import base64
import hashlib
import heapq
import importlib
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STARTUP = 4.0  # virtual seconds from a pod's creation to its readiness, plus a spread of 0-3 s
UPDATE_SECONDS = 5.0  # virtual seconds one node's pod takes to be replaced in an update
LATE_SECONDS = 30.0
ALIGNED_LABELS = {"numa.kube/aligned": "true", "numa.kube/cpu-manager-policy": "static",
                  "numa.kube/topology-manager-policy": "single-numa-node"}
NUMA_NODES = 2
DEVICE_PREFIX = "numa-align/numa-"
# the annotation the API server keeps on a DaemonSet (its template's generation) and the label the
# DaemonSet controller puts on each pod it makes from that template
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
POD_TEMPLATE_GENERATION = "pod-template-generation"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
CRD_ESTABLISHING = 1.0  # virtual seconds from a CRD's creation to its Established condition
SCHEDULER_STARTUP = STARTUP + 2.0  # a scheduler's pod: started, its informers synced, its /readyz answered
NRT_GROUP, NRT_VERSION, NRT_PLURAL = "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"
NRT_PATH = "/apis/%s/%s/%s" % (NRT_GROUP, NRT_VERSION, NRT_PLURAL)
# the field manager of the NodeResourceTopology publisher's writes (noderesourcetopology.PUBLISHER_FIELD_MANAGER)
NRT_WRITER = "numa-kube-nrt-publisher"
ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles/"


def importable(root=ROOT):
    """The collection at ``root`` importable as ansible_collections.numa.kube, ahead of any other."""
    lib = os.path.join(os.environ.get("TMPDIR", "/tmp"), "numa-kube-bench-%d-%s"
                       % (os.getuid(), hashlib.sha1(os.path.realpath(root).encode()).hexdigest()[:12]))
    link = os.path.join(lib, "ansible_collections", "numa", "kube")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    try:
        os.symlink(os.path.realpath(root), link)
    except FileExistsError:  # an earlier or a concurrent run made it: the folder's name is the target's hash
        pass
    # the folder goes first on sys.path: only one this user made, holding a link to this collection
    if os.lstat(lib).st_uid != os.getuid() or not os.path.islink(link) or \
            os.path.realpath(link) != os.path.realpath(root):
        raise SystemExit("%s is not this user's link to %s: remove %s and run again" % (link, root, lib))
    sys.path.insert(0, lib)
    return root


class VirtualClock(object):
    """Seconds that move only when someone sleeps; each sleep ends a wait round."""

    def __init__(self):
        self.now = 1000.0
        self.lock = threading.Lock()
        self.rounds = []  # (virtual time at the round's start, requests sent before the sleep)
        self.requests = lambda: 0

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        with self.lock:
            self.rounds.append((self.now, self.requests()))
            self.now += max(float(seconds), 0.0)


# --- the API server stand-in ----------------------------------------------------------------------

def _selector(text):
    """{key: value} of an equality label selector (the modules send only those)."""
    found = {}
    for part in (text or "").split(","):
        if part:
            key, _sep, value = part.partition("=")
            found[key.strip()] = value.lstrip("=").strip()
    return found


def _matches(labels, selector):
    return all((labels or {}).get(key) == value for key, value in selector.items())


def _status(code, message):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message,
            "reason": {404: "NotFound", 401: "Unauthorized", 410: "Expired"}.get(code, "")}


class Rollout(object):
    """One DaemonSet's pods: when each node's pod of the current template starts and is available,
    and when what the module proves per node (kubelet's allocatable, the exporter's /healthz, the
    Numatopology, the NodeResourceTopology) follows: with the pod, or ``proof_late`` seconds after it."""

    def __init__(self, nodes, now, late, proof_late, update=False, max_unavailable=1, generation=1):
        self.nodes = nodes
        self.update = update
        self.generation = generation  # the template's; an update replaces the pods of the one before
        self.start, self.ready, self.proof = {}, {}, {}
        if not update:
            for index, node in enumerate(nodes):
                self.start[node] = now
                self.ready[node] = now + STARTUP + index % 4 + late.get(node, 0.0)
        else:
            slots = [now] * max(1, min(max_unavailable, len(nodes)))
            for node in nodes:  # the controller replaces a pod as soon as one of its slots is free
                begin = heapq.heappop(slots)
                self.start[node] = begin
                self.ready[node] = begin + UPDATE_SECONDS + late.get(node, 0.0)
                heapq.heappush(slots, self.ready[node])
        for node in nodes:
            self.proof[node] = self.ready[node] + proof_late.get(node, 0.0)

    def pod_generation(self, node, now):
        """The template generation of the node's pod: the new one from the moment it replaces the old."""
        return self.generation if not self.update or self.start[node] <= now else self.generation - 1

    def running(self, node, now):
        """Whether the node's pod (new, or the old one not yet replaced) is up."""
        if node not in self.ready:
            return False
        if self.update:
            return not self.start[node] <= now < self.ready[node]
        return self.ready[node] <= now

    def proven(self, node, now):
        """Whether what the module checks on the node shows the pod serving."""
        if node not in self.proof:
            return False
        if self.update:
            return not self.start[node] <= now < self.proof[node]
        return self.proof[node] <= now

    def status(self, now, generation):
        updated = sum(1 for node in self.nodes if self.start[node] <= now)
        if self.update:
            available = len(self.nodes) - sum(1 for n in self.nodes if self.start[n] <= now < self.ready[n])
        else:
            available = sum(1 for node in self.nodes if self.ready[node] <= now)
        return {"observedGeneration": generation, "desiredNumberScheduled": len(self.nodes),
                "currentNumberScheduled": len(self.nodes), "numberMisscheduled": 0,
                "updatedNumberScheduled": updated, "numberAvailable": available,
                "numberReady": available, "numberUnavailable": len(self.nodes) - available}


class Replacement(object):
    """A Deployment of one replica replaced whole (strategy Recreate, as the topology scheduler's):
    no pod is available from the apply until the new one is, SCHEDULER_STARTUP seconds later for
    a first install, UPDATE_SECONDS for a new template (the old pod ends first)."""

    def __init__(self, now, update=False):
        self.ready = now + (UPDATE_SECONDS if update else SCHEDULER_STARTUP)

    def status(self, now, generation):
        available = int(now >= self.ready)
        status = {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                  "conditions": [
                      {"type": "Available", "status": "True" if available else "False",
                       "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable"},
                      {"type": "Progressing", "status": "True",
                       "reason": "NewReplicaSetAvailable" if available else "ReplicaSetUpdated"}]}
        # the API server leaves a count of 0 out
        if available:
            status.update(readyReplicas=1, availableReplicas=1)
        else:
            status["unavailableReplicas"] = 1
        return status


def _resolve(value, total):
    """A DaemonSet's maxUnavailable: a count, or a percentage of the nodes rounded up (the API's
    RollingUpdateDaemonSet documentation), at least 1."""
    text = str(value if value is not None else 1)
    if text.endswith("%"):
        return max(1, int(math.ceil(total * float(text[:-1]) / 100.0)))
    return max(1, int(text))


class Fleet(object):
    """What the API server of ``count`` Nodes answers, and what it was asked (requests, bytes)."""

    def __init__(self, count, clock, late_pods=(), late_proofs=()):
        self.clock = clock
        self.names = ["node-%04d" % index for index in range(count)]
        self.late = dict((name, LATE_SECONDS) for name in late_pods)
        self.proof_late = dict((name, LATE_SECONDS) for name in late_proofs)
        self.store = {}
        self.rollouts = {}
        self.history = {}  # every rollout of each DaemonSet, the current one last
        self.deployments = {}
        self._established = {}  # when each CRD applied here is Established (one seeded always was)
        self.version = 1
        self.lock = threading.RLock()
        self.requests = 0
        self.sent = 0
        self.received = 0
        self.kinds = {}
        self._node_cache = {}
        self._fingerprints = {}
        self._topologies = {}
        self._nrts = {}
        clock.requests = lambda: self.requests
        self._seed()

    # -- objects that exist before the modules run
    def _seed(self):
        for name in ("kube-system", "volcano-system"):
            self.put("/api/v1/namespaces/" + name, {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}})
        crd = "numatopologies.nodeinfo.volcano.sh"
        self.put("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd, {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": crd}, "spec": {"group": "nodeinfo.volcano.sh", "scope": "Cluster",
                                                "names": {"plural": "numatopologies", "kind": "Numatopology"},
                                                "versions": [{"name": "v1alpha1", "served": True, "storage": True}]}})
        # what the API server's RBAC bootstrap policy makes (Kubernetes 1.34, its default feature
        # gates: dynamic resource allocation on), which topology_scheduler reads and binds
        read, read_update = ["get", "list", "watch"], ["get", "list", "watch", "update", "patch"]
        for name, rules in (("system:kube-scheduler", [
                (["", "events.k8s.io"], ["events"], ["create", "update", "patch"], None),
                (["coordination.k8s.io"], ["leases"], ["create"], None),
                (["coordination.k8s.io"], ["leases"], ["get", "update", "list", "watch"], ["kube-scheduler"]),
                (["coordination.k8s.io"], ["leasecandidates"], read + ["create", "update", "patch", "delete",
                                                                       "deletecollection"], None),
                ([""], ["nodes"], read, None),
                ([""], ["pods"], read + ["delete"], None),
                ([""], ["pods/binding", "bindings"], ["create"], None),
                ([""], ["pods/status"], ["patch", "update"], None),
                ([""], ["services", "replicationcontrollers"], read, None),
                (["apps", "extensions"], ["replicasets"], read, None),
                (["apps"], ["statefulsets"], read, None),
                (["policy"], ["poddisruptionbudgets"], read, None),
                ([""], ["persistentvolumeclaims", "persistentvolumes"], read, None),
                (["authentication.k8s.io"], ["tokenreviews"], ["create"], None),
                (["authorization.k8s.io"], ["subjectaccessreviews"], ["create"], None),
                (["storage.k8s.io"], ["csinodes"], read, None),
                (["storage.k8s.io"], ["volumeattachments"], read, None),
                ([""], ["namespaces"], read, None),
                (["storage.k8s.io"], ["csidrivers"], read, None),
                (["storage.k8s.io"], ["csistoragecapacities"], read, None),
                (["resource.k8s.io"], ["deviceclasses"], read, None),
                (["resource.k8s.io"], ["resourceclaims"], read_update, None),
                (["resource.k8s.io"], ["resourceclaims/status"], read_update, None),
                ([""], ["pods/finalizers"], ["update"], None),
                (["resource.k8s.io"], ["resourceslices"], read, None)]),
                ("system:volume-scheduler", [
                    ([""], ["persistentvolumes"], read_update, None),
                    (["storage.k8s.io"], ["storageclasses"], read, None),
                    ([""], ["persistentvolumeclaims"], read_update, None)])):
            self.put(ROLES + name, {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {
                    "name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
                "rules": [dict({"apiGroups": groups, "resources": resources, "verbs": verbs},
                               **({"resourceNames": names} if names else {}))
                          for groups, resources, verbs, names in rules]})

    def put(self, path, obj):
        meta = obj.setdefault("metadata", {})
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("uid", hashlib.sha1(path.encode()).hexdigest()[:32])
        meta.setdefault("creationTimestamp", "2026-11-25T10:00:00Z")
        meta.setdefault("generation", 1)
        self.store[path] = obj
        return obj

    # -- Nodes, as a kubelet of a current release writes them (about 4 KB each)
    def node(self, name, plugin_ready):
        key = (name, plugin_ready)
        cached = self._node_cache.get(key)
        if cached is not None:
            return cached
        index = int(name.split("-")[1])
        allocatable = {"cpu": "63", "memory": "257000000Ki", "pods": "110", "ephemeral-storage": "450000000000",
                       "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        capacity = dict(allocatable, cpu="64", memory="263000000Ki")
        if plugin_ready:
            for numa in range(NUMA_NODES):
                allocatable[DEVICE_PREFIX + str(numa)] = capacity[DEVICE_PREFIX + str(numa)] = "100"
        labels = dict(ALIGNED_LABELS, **{
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "numa-2s-64c", "topology.kubernetes.io/zone": "zone-%d" % (index % 3),
            "topology.kubernetes.io/region": "region-1", "numa.kube/numa-nodes": str(NUMA_NODES)})
        conditions = [{"type": kind, "status": "False", "reason": "Kubelet" + reason, "message": message,
                       "lastHeartbeatTime": "2026-11-25T10:00:00Z", "lastTransitionTime": "2026-11-20T08:00:00Z"}
                      for kind, reason, message in (
                          ("MemoryPressure", "HasSufficientMemory", "kubelet has sufficient memory available"),
                          ("DiskPressure", "HasNoDiskPressure", "kubelet has no disk pressure"),
                          ("PIDPressure", "HasSufficientPID", "kubelet has sufficient PID available"))]
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status", "lastHeartbeatTime": "2026-11-25T10:00:00Z",
                           "lastTransitionTime": "2026-11-20T08:00:00Z"})
        metadata = {"name": name, "uid": hashlib.sha1(name.encode()).hexdigest()[:32],
                    "resourceVersion": str(1000 + index), "creationTimestamp": "2026-11-20T08:00:00Z", "labels": labels,
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                    "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}}
        obj = {
            "apiVersion": "v1", "kind": "Node", "metadata": metadata,
            "spec": {"podCIDR": "10.%d.%d.0/24" % (index // 256, index % 256), "providerID": "numa://" + name},
            "status": {"capacity": capacity, "allocatable": allocatable, "conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": "10.0.%d.%d" % (index // 256, index % 256)},
                                     {"type": "Hostname", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": hashlib.md5(name.encode()).hexdigest(),
                                    "systemUUID": hashlib.md5(name[::-1].encode()).hexdigest(),
                                    "bootID": hashlib.sha1(name[::-1].encode()).hexdigest()[:32],
                                    "kernelVersion": "6.12.48-1-amd64", "osImage": "Debian GNU/Linux 13 (trixie)",
                                    "containerRuntimeVersion": "containerd://2.1.4", "kubeletVersion": "v1.34.2",
                                    "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                       "images": [{"names": ["registry.example/team/image-%d@sha256:%s" % (n, hashlib.sha256(
                           b"%d" % n).hexdigest()), "registry.example/team/image-%d:v1.%d" % (n, n)],
                           "sizeBytes": 10000000 + n} for n in range(6)]}}
        encoded = json.dumps(obj, separators=(",", ":")).encode()
        self._node_cache[key] = (obj, encoded)
        return obj, encoded

    def plugin_serving(self, node):
        return any(r.proven(node, self.clock.now) for r in self._rollouts_running("device-plugin"))

    def _rollouts_running(self, program):
        return [rollout for path, rollout in self.rollouts.items()
                if path in self.store and self._program(self.store[path]) == program]

    @staticmethod
    def _program(daemonset):
        containers = daemonset["spec"]["template"]["spec"].get("containers") or [{}]
        return (containers[0].get("args") or [""])[0]

    # -- answers
    def answer(self, method, target, body, accept):
        """(status, bytes) for one request."""
        url = urlsplit(target)
        path = url.path.rstrip("/")
        query = dict((key, values[-1]) for key, values in parse_qs(url.query).items())
        with self.lock:
            self.requests += 1
            self.received += len(body or b"")
            kind = self._kind(method, path)
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            status, data = self._answer(method, path, query, body, accept)
            if not isinstance(data, bytes):
                data = (data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))).encode()
            self.sent += len(data)
            return status, data

    @staticmethod
    def _kind(method, path):
        if "/proxy" in path:
            return "proxy"
        if method != "GET":
            return "write"
        return "get" if path.rsplit("/", 1)[-1] not in ("nodes", "pods", "numatopologies", NRT_PLURAL) else "list"

    def _answer(self, method, path, query, body, accept):
        parts = path.split("/")
        if method == "GET" and path == "/api/v1/nodes":
            return self._list_nodes(query)
        if path.startswith("/api/v1/nodes/") and "/proxy/" in path:
            return self._kubelet(parts[4], path.split("/proxy", 1)[1])
        if method == "GET" and path.startswith("/api/v1/nodes/") and len(parts) == 5:
            if parts[4] not in self.names:
                return 404, _status(404, "nodes %r not found" % parts[4])
            return 200, self.node(parts[4], self.plugin_serving(parts[4]))[1]
        if "/pods/" in path and "/proxy" in path:
            return self._exporter(parts[6], path.split("/proxy", 1)[1])
        if method == "GET" and len(parts) == 6 and parts[5] == "pods":
            return self._pods(parts[4], query)
        if method == "GET" and path == "/apis/monitoring.coreos.com/v1":
            return 200, {"kind": "APIResourceList", "groupVersion": "monitoring.coreos.com/v1",
                         "resources": [{"name": "servicemonitors", "kind": "ServiceMonitor", "namespaced": True},
                                       {"name": "prometheusrules", "kind": "PrometheusRule", "namespaced": True}]}
        if path.startswith("/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"):
            return self._numatopology(method, parts, query, accept)
        if path == NRT_PATH or path.startswith(NRT_PATH + "/"):
            return self._noderesourcetopology(method, parts, query, accept)
        if method == "GET":
            if path in self.store:
                return 200, self._with_status(path)
            prefix = path + "/"
            selector = _selector(query.get("labelSelector"))
            items = [self._with_status(p) for p in sorted(self.store) if p.startswith(prefix)
                     and "/" not in p[len(prefix):] and _matches(self.store[p]["metadata"].get("labels"), selector)]
            if items or parts[-1] in ("pods", "daemonsets", "configmaps", "secrets", "services"):
                return 200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.version)},
                             "items": items}
            return 404, _status(404, "%s not found" % path)
        if method == "PATCH":
            return self._apply(path, json.loads(body or b"{}"), query.get("dryRun") == "All")
        if method == "DELETE":
            if self.store.pop(path, None) is None:
                return 404, _status(404, "%s not found" % path)
            for table in (self.rollouts, self.history, self.deployments, self._established):
                table.pop(path, None)
            return 200, {"kind": "Status", "status": "Success"}
        return 405, _status(405, "%s %s is not served by the stand-in" % (method, path))

    def _page(self, items, query, kind, api_version):
        """One page of ``items`` (encoded JSON each) as limit and continue ask."""
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0)
        end = start + limit if limit else len(items)
        meta = {"resourceVersion": str(self.version)}
        if end < len(items):
            meta["continue"] = str(end)
            meta["remainingItemCount"] = len(items) - end
        head = json.dumps({"kind": kind, "apiVersion": api_version, "metadata": meta}, separators=(",", ":"))
        return 200, head[:-1].encode() + b',"items":[' + b",".join(items[start:end]) + b"]}"

    def _list_nodes(self, query):
        selector = _selector(query.get("labelSelector"))
        chosen = [self.node(n, self.plugin_serving(n)) for n in self.names]
        return self._page([encoded for obj, encoded in chosen if _matches(obj["metadata"]["labels"], selector)],
                          query, "NodeList", "v1")

    def _kubelet(self, node, sub):
        if node not in self.names:
            return 404, _status(404, "nodes %r not found" % node)
        if sub != "/configz":
            return 404, "404 page not found"
        config = {"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1",
                  "cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                  "memoryManagerPolicy": "Static", "topologyManagerScope": "container", "maxPods": 110,
                  "cgroupDriver": "systemd", "clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local",
                  "reservedSystemCPUs": "0,32", "kubeReserved": {"cpu": "500m", "memory": "1Gi"},
                  "systemReserved": {"cpu": "500m", "memory": "1Gi"},
                  "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
                  "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}},
                                     {"numaNode": 1, "limits": {"memory": "1124Mi"}}],
                  "featureGates": {}, "staticPodPath": "/etc/kubernetes/manifests",
                  "authentication": {"webhook": {"enabled": True, "cacheTTL": "2m0s"},
                                     "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
                  "authorization": {"mode": "Webhook"}, "rotateCertificates": True, "serverTLSBootstrap": True}
        return 200, {"kubeletconfig": config}

    def _daemonsets(self, namespace):
        prefix = "/apis/apps/v1/namespaces/%s/daemonsets/" % namespace
        return [(path, self.store[path]) for path in sorted(self.rollouts) if path.startswith(prefix)
                and path in self.store]

    def _pods(self, namespace, query):
        selector = _selector(query.get("labelSelector"))
        items = []
        now = self.clock.now
        for path, daemonset in self._daemonsets(namespace):
            template = daemonset["spec"]["template"]
            if not _matches(template["metadata"].get("labels"), selector):
                continue
            rollout = self.rollouts[path]
            for node in rollout.nodes:
                if rollout.start[node] > now and not rollout.update:
                    continue
                running = rollout.running(node, now)
                labels = dict(template["metadata"].get("labels") or {})
                labels[POD_TEMPLATE_GENERATION] = str(rollout.pod_generation(node, now))
                items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": "%s-%s" % (daemonset["metadata"]["name"], node[5:]), "namespace": namespace,
                    "labels": labels,
                    "ownerReferences": [{"kind": "DaemonSet", "name": daemonset["metadata"]["name"]}]},
                    "spec": {"nodeName": node}, "status": {
                        "phase": "Running" if running else "Pending",
                        "conditions": [{"type": "Ready", "status": "True" if running else "False"}]}})
        return self._page([json.dumps(item, separators=(",", ":")).encode() for item in items], query, "PodList", "v1")

    def _exporter(self, target, sub):
        """The node agent's exporter behind the pod proxy: https:<pod>:<port>."""
        pod = unquote(target).split(":")[1] if ":" in unquote(target) else target
        found = None
        for path, daemonset in self.rollouts.items():
            name = self.store.get(path, {}).get("metadata", {}).get("name")
            if name and pod.startswith(name + "-") and "node-" + pod[len(name) + 1:] in daemonset.ready:
                found = (path, "node-" + pod[len(name) + 1:])
        if found is None or not self.rollouts[found[0]].proven(found[1], self.clock.now):
            return 503, _status(503, "no endpoints available for pod %s" % pod)
        if sub == "/healthz":
            namespace = found[0].split("/")[5]
            secret = self.store.get("/api/v1/namespaces/%s/secrets/%s-tls" % (
                namespace, self.store[found[0]]["metadata"]["name"]))
            return 200, "ok\ncertificate-sha256: %s\n" % self._fingerprint(secret)
        if sub == "/metrics":
            # the exporter's own refusal of a scrape without a token (agent/numa_agent/authn.py): the
            # API server's proxy does not pass the caller's credentials on to the pod
            return 401, "no bearer token: send Authorization: Bearer <a service account token>\n"
        return 404, "404 page not found\n"

    def _fingerprint(self, secret):
        if not secret:
            return "0" * 64
        version = secret["metadata"]["resourceVersion"]
        if version not in self._fingerprints:
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes
            pem = base64.b64decode(secret["data"]["tls.crt"])
            self._fingerprints[version] = x509.load_pem_x509_certificate(pem).fingerprint(hashes.SHA256()).hex()
        return self._fingerprints[version]

    def _numatopology_object(self, node):
        if node in self._topologies:
            return self._topologies[node]
        detail = dict((str(cpu), {"numa": cpu // 32, "socket": cpu // 32, "core": cpu % 32}) for cpu in range(64))
        obj = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": {
            "name": node, "resourceVersion": "7", "labels": {"app.kubernetes.io/managed-by": "numa.kube"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node}]},
            "spec": {"policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                     "resReserved": {"cpu": "1", "memory": "2Gi"},
                     "numares": {"cpu": {"allocatable": "1-31,33-63", "capacity": 64}},
                     "cpuDetail": detail}}
        self._topologies[node] = (obj, json.dumps(obj, separators=(",", ":")).encode())
        return self._topologies[node]

    def _numatopology(self, method, parts, query, accept):
        if method != "GET":
            return 405, _status(405, "the stand-in's Numatopologies are the publishers' to write")
        published = [n for n in self.names
                     if any(r.proven(n, self.clock.now) for r in self._rollouts_running("topology-publisher"))]
        return self._published(parts, query, accept, published, self._numatopology_object,
                               "numatopologies.nodeinfo.volcano.sh", "NumatopologyList", "nodeinfo.volcano.sh/v1alpha1")

    def _published(self, parts, query, accept, published, build, resource, list_kind, api_version):
        """A GET of one object a publisher writes per node (``parts``: the path's), or a list of them,
        as a page of whole objects or of their metadata alone (what the Accept header asks)."""
        if len(parts) == 6:
            if parts[5] not in published:
                return 404, _status(404, '%s "%s" not found' % (resource, parts[5]))
            return 200, build(parts[5])[1]
        objects = [build(n) for n in published]
        objects = [o for o in objects if _matches(o[0]["metadata"]["labels"], _selector(query.get("labelSelector")))]
        if "PartialObjectMetadataList" in (accept or ""):
            items = [json.dumps({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": o["metadata"]}, separators=(",", ":")).encode() for o, _e in objects]
            return self._page(items, query, "PartialObjectMetadataList", "meta.k8s.io/v1")
        items = [encoded for _o, encoded in objects]
        return self._page(items, query, list_kind, api_version)

    def _nrt_object(self, node):
        """The node's NodeResourceTopology as the node agent's publisher writes it (two zones, kubelet's
        static CPU and memory managers, the devices of the resource plugin), and what the API server adds:
        the managedFields of the publisher's writes, under its own field manager."""
        if node in self._nrts:
            return self._nrts[node]
        uid = hashlib.sha1(node.encode()).hexdigest()[:32]
        zones = []
        for numa in range(NUMA_NODES):
            zones.append({"name": "node-%d" % numa, "type": "Node",
                          "costs": [{"name": "node-%d" % other, "value": 10 if other == numa else 21}
                                    for other in range(NUMA_NODES)],
                          "resources": [
                              {"name": "cpu", "capacity": "32", "allocatable": "31", "available": "31"},
                              {"name": "memory", "capacity": "128Gi", "allocatable": "129948Mi",
                               "available": "129948Mi"},
                              {"name": DEVICE_PREFIX + str(numa), "capacity": "100", "allocatable": "100",
                               "available": "100"}]})
        fingerprint = "pfp0v001" + hashlib.sha1(("pods of " + node).encode()).hexdigest()[:16]
        # what the publisher's POST and PUTs (fieldManager numa-kube-nrt-publisher) own
        fields = {"f:attributes": {}, "f:zones": {}, "f:metadata": {
            "f:annotations": {".": {}, "f:numa.kube/publisher-started": {}},
            "f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}, "f:numa.kube/stack": {}},
            "f:ownerReferences": {".": {}, 'k:{"uid":"%s"}' % uid: {}}}}
        metadata = {"name": node, "uid": hashlib.sha1(("nrt " + node).encode()).hexdigest()[:32],
                    "resourceVersion": "9", "generation": 1, "creationTimestamp": "2026-11-25T10:00:05Z",
                    "labels": {"app.kubernetes.io/managed-by": "numa.kube", "numa.kube/stack": "topology"},
                    "annotations": {"numa.kube/publisher-started": "2026-11-25T10:00:04Z"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}],
                    "managedFields": [{"manager": NRT_WRITER, "operation": "Update",
                                       "apiVersion": "%s/%s" % (NRT_GROUP, NRT_VERSION),
                                       "time": "2026-11-25T10:00:05Z", "fieldsType": "FieldsV1", "fieldsV1": fields}]}
        attributes = [("topologyManagerPolicy", "single-numa-node"), ("topologyManagerScope", "container"),
                      ("nodeTopologyPodsFingerprint", fingerprint),
                      ("nodeTopologyPodsFingerprintMethod", "with-exclusive-resources")]
        obj = {"apiVersion": "%s/%s" % (NRT_GROUP, NRT_VERSION), "kind": "NodeResourceTopology", "metadata": metadata,
               "zones": zones, "attributes": [{"name": name, "value": value} for name, value in attributes]}
        self._nrts[node] = (obj, json.dumps(obj, separators=(",", ":")).encode())
        return self._nrts[node]

    def _noderesourcetopology(self, method, parts, query, accept):
        """NodeResourceTopologies: none served before their CRD is Established; a node's is there from
        its publisher pod's first proof on, and stays (the publisher replaces it in place, the Node's
        deletion takes it), through a later rollout too."""
        if not self._serves(NRT_PLURAL + "." + NRT_GROUP, NRT_VERSION):
            return 404, _status(404, "the server could not find the requested resource")
        if method != "GET":
            return 405, _status(405, "the stand-in's NodeResourceTopologies are the publisher's to write")
        now = self.clock.now
        rollouts = [rollout for path, made in self.history.items()
                    if path in self.store and self._program(self.store[path]) == "nrt-publisher" for rollout in made]
        written = [n for n in self.names if any(r.proof.get(n, now + 1) <= now for r in rollouts)]
        return self._published(parts, query, accept, written, self._nrt_object,
                               "%s.%s" % (NRT_PLURAL, NRT_GROUP), "NodeResourceTopologyList",
                               "%s/%s" % (NRT_GROUP, NRT_VERSION))

    def _serves(self, crd, version):
        """Whether the API server serves ``version`` of the CRD named ``crd``: there, Established, served."""
        path = CRDS + crd
        found = self.store.get(path)
        return found is not None and self._established.get(path, 0.0) <= self.clock.now and any(
            v.get("name") == version and v.get("served") for v in found["spec"].get("versions") or [])

    def _crd_status(self, path, crd):
        """What the API server's CRD controllers write: the names accepted at once, Established
        CRD_ESTABLISHING seconds after the CRD was made."""
        spec = crd.get("spec") or {}
        established = self._established.get(path, 0.0) <= self.clock.now
        return {"acceptedNames": spec.get("names") or {},
                "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found"},
                    {"type": "Established", "status": "True" if established else "False",
                     "reason": "InitialNamesAccepted" if established else "Installing",
                     "message": "the initial names have been accepted" if established else
                     "the resource is being installed"}]}

    def _with_status(self, path):
        obj = self.store[path]
        rollout = self.rollouts.get(path) or self.deployments.get(path)
        if rollout is not None:
            obj = dict(obj, status=rollout.status(self.clock.now, obj["metadata"]["generation"]))
        elif obj.get("kind") == "CustomResourceDefinition":
            obj = dict(obj, status=self._crd_status(path, obj))
        return obj

    def _apply(self, path, body, dry_run):
        """Server-side apply, as far as the modules look: the applied fields replace the old ones."""
        before = self.store.get(path)
        obj = json.loads(json.dumps(body))
        meta = obj.setdefault("metadata", {})
        new_template = obj.get("kind") in ("DaemonSet", "Deployment") and (
            before is None or before["spec"]["template"] != obj["spec"]["template"])
        if obj.get("kind") == "DaemonSet":
            # the API server's own annotation, kept through an apply that does not name it, one up
            # with each new template
            kept = int(((before or {}).get("metadata", {}).get("annotations") or {}).get(TEMPLATE_GENERATION) or 0)
            meta.setdefault("annotations", {})[TEMPLATE_GENERATION] = str(kept + 1 if new_template else kept)
        if before is not None:
            old = before["metadata"]
            for field in ("uid", "creationTimestamp", "generation", "resourceVersion"):
                meta[field] = old.get(field)
            same = dict((k, v) for k, v in before.items() if k != "status") == obj
            if same:
                return 200, self._with_status(path)
            if before.get("spec") != obj.get("spec"):
                meta["generation"] = old.get("generation", 1) + 1
        if dry_run:
            return 200, obj
        self.put(path, obj)
        if obj.get("kind") == "DaemonSet" and new_template:
            selector = obj["spec"]["template"]["spec"].get("nodeSelector") or {}
            nodes = [n for n in self.names if _matches(self.node(n, False)[0]["metadata"]["labels"], selector)]
            strategy = (obj["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}
            self.rollouts[path] = Rollout(nodes, self.clock.now, self.late, self.proof_late, before is not None,
                                          _resolve(strategy.get("maxUnavailable"), len(nodes)),
                                          int(meta["annotations"][TEMPLATE_GENERATION]))
            self.history.setdefault(path, []).append(self.rollouts[path])
        if obj.get("kind") == "Deployment" and new_template:
            self.deployments[path] = Replacement(self.clock.now, before is not None)
        if obj.get("kind") == "CustomResourceDefinition" and before is None:
            self._established[path] = self.clock.now + CRD_ESTABLISHING
        return (201 if before is None else 200), self._with_status(path)


def serve(fleet):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            BaseHTTPRequestHandler.setup(self)
            # headers and body leave in two writes: without this, Nagle's algorithm holds the body
            # back until the client's delayed acknowledgement (40 ms a request)
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle_one(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, data = fleet.answer(self.command, self.path, body, self.headers.get("Accept"))
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if data[:1] == b"{" else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = handle_one

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# --- the modules ------------------------------------------------------------------------------------

def _nrt_schema(version):
    """The schema of ``version`` in noderesourcetopology-api v0.1.2's manifests/crd.yaml, less its
    descriptions (the whole CRD is 8.1 kB as JSON with them, 4.2 kB without)."""
    pair = {"type": "object", "required": ["name", "value"],
            "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}
    quantity = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
                "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                           r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"}
    resource = {"type": "object", "required": ["allocatable", "available", "capacity", "name"],
                "properties": {"name": {"type": "string"}, "capacity": quantity, "allocatable": quantity,
                               "available": quantity}}
    cost = {"type": "object", "required": ["name", "value"],
            "properties": {"name": {"type": "string"}, "value": {"type": "integer", "format": "int64"}}}
    zone = {"type": "object", "required": ["name", "type"], "properties": {
        "name": {"type": "string"}, "type": {"type": "string"}, "parent": {"type": "string"},
        "costs": {"type": "array", "items": cost}, "attributes": {"type": "array", "items": pair},
        "resources": {"type": "array", "items": resource}}}
    properties = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                  "topologyPolicies": {"type": "array", "items": {"type": "string"}},
                  "zones": {"type": "array", "items": zone}}
    required = ["topologyPolicies", "zones"]
    if version == "v1alpha2":  # the top-level attributes, and the policies no longer required
        properties["attributes"] = {"type": "array", "items": pair}
        required = ["zones"]
    return {"openAPIV3Schema": {"type": "object", "required": required, "properties": properties}}


def nrt_crd_file():
    """The path of the NodeResourceTopology CRD file topology_scheduler applies (its ``crd``), written
    once: JSON, which is YAML too."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "numa-kube-bench-%d-noderesourcetopology-crd.yaml"
                        % os.getuid())
    metadata = {"name": "%s.%s" % (NRT_PLURAL, NRT_GROUP),
                "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1870",
                                "controller-gen.kubebuilder.io/version": "v0.11.2"}}
    names = {"kind": "NodeResourceTopology", "listKind": "NodeResourceTopologyList", "plural": NRT_PLURAL,
             "singular": "noderesourcetopology", "shortNames": ["node-res-topo"]}
    versions = [{"name": version, "served": True, "storage": version == NRT_VERSION, "schema": _nrt_schema(version)}
                for version in ("v1alpha1", "v1alpha2")]
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": metadata,
           "spec": {"group": NRT_GROUP, "scope": "Cluster", "names": names, "versions": versions}}
    text = json.dumps(crd, indent=1, sort_keys=True) + "\n"
    try:
        with open(path) as handle:
            if handle.read() == text:
                return path
    except (IOError, OSError):
        pass
    # a file of this writer's own, then renamed over the path: two benches or test workers at once
    # each put a whole file in place
    descriptor, partial = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + ".")
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(partial, path)
    return path


# (module, its arguments: a callable's value is taken as the module runs, the DaemonSet's program)
MODULES = (
    ("numa_resource_plugin", {"image": "registry.example/numa-kube/agent:1"}, "device-plugin"),
    ("numa_monitoring", {"image": "registry.example/numa-kube/agent:1", "dashboard": {"title": "NUMA"}}, "exporter"),
    ("volcano_stack", {"publisher_image": "registry.example/numa-kube/agent:1"}, "topology-publisher"),
    ("topology_scheduler", {"crd": nrt_crd_file, "scheduler_image": "registry.example/numa-kube/nrt-scheduler:1",
                            "publisher_image": "registry.example/numa-kube/agent:1"}, "nrt-publisher"),
)


class ModuleExit(Exception):
    def __init__(self, result, failed):
        Exception.__init__(self, result)
        self.result, self.failed = result, failed


def run_module(name, args, host, clock):
    """(failed, result) of the module's main() against ``host``, its KubeApi on the virtual clock."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    module = importlib.import_module("ansible_collections.numa.kube.plugins.modules." + name)
    real_connect = module.connect

    def connect(ansible_module, *rest, **named):
        api = real_connect(ansible_module, *rest, **named)
        left = api.deadline - api.clock()
        api.clock, api.sleep = clock.monotonic, clock.sleep
        api.deadline = clock.monotonic() + left
        return api

    def exit_json(self, **kwargs):
        raise ModuleExit(kwargs, False)

    def fail_json(self, msg, **kwargs):
        raise ModuleExit(dict(kwargs, msg=msg), True)

    args = dict((key, value() if callable(value) else value) for key, value in args.items())
    args.update(host=host, _ansible_check_mode=False, _ansible_diff=False)
    with patch_module_args(args), mock.patch.object(module, "connect", connect), \
            mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json), \
            mock.patch.object(basic.AnsibleModule, "_log_invocation", lambda self: None):
        try:
            module.main()
        except ModuleExit as done:
            return done.failed, done.result
    raise RuntimeError("%s returned without exit_json or fail_json" % name)


def measure(name, args, program, fleet, host):
    """Run one module once; its figures as a dict."""
    clock = fleet.clock
    requests, sent, received, rounds_before = fleet.requests, fleet.sent, fleet.received, len(clock.rounds)
    virtual, started = clock.now, time.perf_counter()
    failed, result = run_module(name, args, host, clock)
    figures = {"module": name, "failed": failed, "message": result.get("msg", ""),
               "left_out": len(result.get("unavailable_nodes") or []),
               "requests": fleet.requests - requests, "sent": fleet.sent - sent, "received": fleet.received - received,
               "virtual": clock.now - virtual, "real": time.perf_counter() - started,
               "rounds": len(clock.rounds) - rounds_before}
    # requests a round while exactly one node was pending (the late node)
    marks = clock.rounds[rounds_before:] + [(clock.now, fleet.requests)]
    rollouts = fleet._rollouts_running(program)
    per_pending = {}
    previous = requests
    for index, (moment, count) in enumerate(marks):
        pending = 0
        if index > 0 and rollouts:
            pending = sum(1 for node in rollouts[-1].nodes if not rollouts[-1].proven(node, moment))
        if index > 0:
            per_pending.setdefault(pending, []).append(count - previous)
        previous = count
    figures["one_pending"] = per_pending.get(1, [])
    return figures


def scenario(count, kind):
    """Every module's figures for one fleet size and scenario."""
    clock = VirtualClock()
    late = ["node-%04d" % (count // 2)]
    fleet = Fleet(count, clock, late if kind == "late" else (), late if kind == "late-proof" else ())
    server = serve(fleet)
    host = "http://127.0.0.1:%d" % server.server_port
    results = []
    try:
        for name, args, program in MODULES:
            if kind == "update":
                measure(name, args, program, fleet, host)  # the first install, not counted
                args = dict((key, value.replace(":1", ":2") if "image" in key else value)
                            for key, value in args.items())
            results.append(measure(name, args, program, fleet, host))
    finally:
        server.shutdown()
        server.server_close()
    return results


def _size(value):
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (value, unit)
        value /= 1000.0
    return value


TITLES = {"healthy": "healthy rollout (a first install, every pod up in 4-7 s)",
          "late": "one node's pod %d s late" % LATE_SECONDS,
          "late-proof": "one node's proof %d s late (its pod on time: kubelet's allocatable, the exporter's "
                        "/healthz, the Numatopology, the NodeResourceTopology)" % LATE_SECONDS,
          "update": "image update (the DaemonSet's own maxUnavailable, %d s a pod)" % UPDATE_SECONDS}


def report(count, kind, results):
    print("fleet: %d Nodes, %s:" % (count, TITLES[kind]))
    total = 0
    for figures in results:
        total += figures["requests"]
        line = ("  %-21s requests %6d (%5.2f per Node)  sent %9s  received %8s  rounds %4d  virtual %6.0f s  "
                "real %5.2f s  %s" % (figures["module"], figures["requests"], figures["requests"] / float(count),
                                      _size(figures["sent"]), _size(figures["received"]), figures["rounds"],
                                      figures["virtual"], figures["real"],
                                      "FAILED: " + figures["message"][:160] if figures["failed"] else
                                      "ok" + (" (%d nodes left out)" % figures["left_out"] if figures["left_out"] else "")))
        if kind.startswith("late"):
            line += "  (requests a round with 1 node pending: %s)" % (
                "median %g" % statistics.median(figures["one_pending"]) if figures["one_pending"] else "no such round")
        print(line)
    if kind == "healthy":
        print("  fleet of %d Nodes, healthy rollout: requests per Node, the most of one module %.2f (target under 3), "
              "all %d modules %.2f" % (count, max(f["requests"] / float(count) for f in results), len(results),
                                       total / float(count)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="10,100,1000", help="fleet sizes, comma-separated (default 10,100,1000)")
    parser.add_argument("--scenarios", default="healthy,late,late-proof,update",
                        help="healthy, late, late-proof, update, comma-separated (default all four)")
    parser.add_argument("--collection", default=ROOT,
                        help="the collection's checkout whose modules run (default this one): another commit's "
                             "tree (git archive) gives figures to compare")
    args = parser.parse_args(argv)
    importable(args.collection)
    for count in [int(n) for n in args.nodes.split(",") if n]:
        for kind in [k for k in args.scenarios.split(",") if k]:
            if kind not in TITLES:
                parser.error("unknown scenario %r: one of %s" % (kind, ", ".join(TITLES)))
            report(count, kind, scenario(count, kind))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
