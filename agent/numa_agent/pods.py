# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The names of this node's containers (namespace, pod, container), by container id, from the API server."""

import logging
import threading
import time
import urllib.parse

from numa_agent.kube import Client

LOG = logging.getLogger("pods")


class PodNames(object):
    """{container id: (namespace, pod, container)} of this node's pods, from the API server.

    In a pod, the service account's token and the ``kubernetes`` Service are used. The list is
    read again only when asked about a container it does not know, and at most every ``interval``
    seconds, so a scrape normally costs no request at all.

    A new container's cgroup appears before kubelet has written its id into the pod's status, so a
    list read at that moment cannot name it: an id the list did not name is asked about again each
    time its age since first seen has doubled (at 15, 30, 60 and 120 s with the defaults: five lists
    for a pod sandbox, which no status names) until ``settle`` seconds, then left alone (sandboxes,
    containers already gone), so that it does not cause a list on every scrape. Times are monotonic.

    The list is read in a thread of its own: the scrape that wants it waits at most ``wait``
    seconds, then goes on with the names it has (the new container gets its series from the scrape
    after the list came in), so an API server that is slow to answer never holds a scrape past
    Prometheus' scrape timeout. One list at a time.
    """

    def __init__(self, node_name, interval=15.0, client=None, settle=180.0, wait=0.5):
        self.node_name = node_name
        self.interval = interval
        self.settle = settle
        self.wait = wait
        self.client = client or Client()
        self.names = {}
        self.unnamed = {}  # {container id the last list did not name: (first seen, next look)}
        self.read_at = None
        self.lock = threading.Lock()
        self.listing = None  # the thread reading the list, while it runs

    def usable(self):
        return bool(self.node_name and self.client.usable())

    def _list(self):
        # RBAC cannot narrow a list by field: the grant is `list` on every pod of the cluster (and
        # no `get`); the exporter asks for its own node's pods alone, with the field selector
        # spec.nodeName (resourceVersion 0 lets the API server answer from its cache)
        query = urllib.parse.urlencode({"fieldSelector": "spec.nodeName=" + self.node_name, "resourceVersion": "0"})
        return self.client.get("/api/v1/pods?" + query)

    def lookup(self, container_ids):
        """The names of the containers, reading the list again if a new one is unknown (rate-limited).

        An id the last list did not name counts as unknown again each time its age has doubled,
        until ``settle`` seconds after it was first seen (see the class). Waits for the list it
        starts at most ``wait`` seconds.
        """
        if not self.usable():
            return {}
        now = time.monotonic()
        with self.lock:
            unknown = [cid for cid in container_ids if cid not in self.names
                       and (cid not in self.unnamed
                            or self.unnamed[cid][1] <= now < self.unnamed[cid][0] + self.settle)]
            listing = None
            if unknown and self.listing is None and (self.read_at is None or now - self.read_at >= self.interval):
                self.read_at = now
                listing = threading.Thread(target=self._read, args=(list(container_ids), now), name="pod-list",
                                           daemon=True)
                try:
                    listing.start()
                except RuntimeError as exc:  # out of threads: tried again after the interval, not never
                    LOG.warning("could not start the list of the pods of node %s: %s", self.node_name, exc)
                    listing = None
                else:
                    self.listing = listing  # (the thread needs the lock held here before it clears it)
        if listing is not None:
            listing.join(self.wait)
        with self.lock:
            return self.names

    def _read(self, container_ids, now):
        """Read the list and take in its names (the listing thread; whatever fails is logged, not raised)."""
        try:
            names = self._names(self._list())
        # ApiError mostly; whatever it is, the thread must not die silent
        except Exception as exc:  # pylint: disable=broad-except
            LOG.warning("could not list the pods of node %s: %s", self.node_name, exc)
            with self.lock:
                self.listing = None
            return
        with self.lock:
            self.names = names
            unnamed = {}
            for cid in container_ids:
                if cid not in names:
                    first = self.unnamed.get(cid, (now, None))[0]
                    unnamed[cid] = (first, now + max(self.interval, now - first))
            self.unnamed = unnamed
            self.listing = None

    @staticmethod
    def _names(pods):
        names = {}
        for pod in pods.get("items") or []:
            meta, status = pod.get("metadata") or {}, pod.get("status") or {}
            for field in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
                for container in status.get(field) or []:
                    cid = (container.get("containerID") or "").rpartition("://")[2]
                    if cid:
                        names[cid] = (meta.get("namespace", ""), meta.get("name", ""), container.get("name", ""))
        return names
