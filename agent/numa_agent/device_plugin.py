# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA device plugin: ``numa-align/numa-N`` for each NUMA node with CPUs.

Interface of ChessCom's k8s-numa-resource-plugin, so that its users can switch: one resource per
online NUMA node that has CPUs, NUMA_CAPACITY devices each (default 100), every device carrying
the node in its TopologyInfo, so that the Topology Manager lines the pod's CPUs and memory up with
that node; ``Allocate`` puts ``NUMA_NODE=N`` into the container; sockets ``numa-N.sock`` in the
device-plugin folder (NUMA_SOCKET_DIR).

kubelet talks to a device plugin over its v1beta1 gRPC API: the plugin serves DevicePlugin on a
socket of its own, then calls Registration.Register on kubelet's socket; kubelet dials back (first
GetDevicePluginOptions, then one ListAndWatch stream kept open). When kubelet restarts it removes
every socket in the folder, the plugins' too, and listens on a new kubelet.sock: a plugin that does
not notice stays unregistered and its resources drop to zero. This one checks every ``poll``
seconds that its sockets are there and that kubelet's socket is the one it registered with, and
serves and registers again if not; the same path brings it back after its own restart.

At each of those checks it also reads the online CPU and NUMA node lists (``devices.NodeHealth``): a
NUMA node left without online CPUs, or no longer online, has its devices sent to kubelet again as
Unhealthy on the open ListAndWatch streams, and as Healthy when it is back. The resources registered
are those found at start; a NUMA node that gains CPUs later is logged and needs a restart.
"""

import logging
import os
import signal
import threading
import time
from concurrent import futures

import grpc

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from numa_agent.devices import Health, NodeHealth, device_ids, numa_nodes_with_cpus, preferred
from numa_agent.kubelet.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

LOG = logging.getLogger("device-plugin")
API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"


class NodePlugin(api_pb2_grpc.DevicePluginServicer):
    """The DevicePlugin service of one resource (one NUMA node)."""

    def __init__(self, node, cpus, capacity, resource, socket_dir):
        self.node = node
        self.cpus = cpus
        self.resource = resource
        self.endpoint = "numa-%d.sock" % node
        self.socket = os.path.join(socket_dir, self.endpoint)
        self.topology = api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=node)])
        self.ids = device_ids(node, capacity)
        self.health = Health()
        self.server = None

    def devices(self, healthy):
        state = HEALTHY if healthy else UNHEALTHY
        return [api_pb2.Device(ID=name, health=state, topology=self.topology) for name in self.ids]

    # --- the gRPC service kubelet calls -------------------------------------------------------
    def GetDevicePluginOptions(self, request, context):
        return api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request, context):
        # The first answer, then one each time the NUMA node's health changes; the stream stays open
        # until kubelet closes it or this server stops (kubelet drops a plugin whose stream ends).
        for healthy in self.health.watch(context.is_active):
            LOG.info("sending kubelet %s: %d devices on NUMA node %d, %s", self.resource, len(self.ids), self.node,
                     HEALTHY if healthy else UNHEALTHY)
            yield api_pb2.ListAndWatchResponse(devices=self.devices(healthy))

    def GetPreferredAllocation(self, request, context):
        answers = []
        for want in request.container_requests:
            answers.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=preferred(
                want.available_deviceIDs, want.must_include_deviceIDs, want.allocation_size)))
        return api_pb2.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request, context):
        answers = []
        for want in request.container_requests:
            LOG.info("allocate %s %s (NUMA node %d)", self.resource, ",".join(want.devices_ids), self.node)
            answers.append(api_pb2.ContainerAllocateResponse(envs={"NUMA_NODE": str(self.node)}))
        return api_pb2.AllocateResponse(container_responses=answers)

    def PreStartContainer(self, request, context):
        return api_pb2.PreStartContainerResponse()

    # --- serving ------------------------------------------------------------------------------
    def serve(self):
        """Listen on this resource's socket (any file left there by an earlier run goes first)."""
        if os.path.lexists(self.socket):
            os.remove(self.socket)
        # one worker per open ListAndWatch stream, plus room for kubelet's unary calls
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api_pb2_grpc.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port("unix:" + self.socket)
        self.server.start()

    def stop(self):
        # grpc removes the socket file when its server stops: stop before anything binds again
        self.health.end_watches()
        if self.server is not None:
            self.server.stop(grace=None).wait()
            self.server = None


def socket_identity(path):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_ctime_ns)


class Plugin:
    """All the node's resources: served, registered, and kept registered."""

    def __init__(self, args):
        self.socket_dir = args.socket_dir
        self.kubelet_socket = os.path.join(args.socket_dir, KUBELET_SOCKET)
        self.poll = args.poll
        self.done = threading.Event()
        nodes = numa_nodes_with_cpus(args.sysfs)
        if not nodes:
            raise SystemExit("no NUMA node with CPUs under %s/devices/system/node: nothing to advertise" % args.sysfs)
        if args.capacity < 1:
            raise SystemExit("NUMA_CAPACITY must be 1 or more, got %d" % args.capacity)
        for node, cpus in nodes:
            LOG.info("Discovered NUMA node %d with CPUs %s: advertising %s%d with %d devices",
                     node, format_cpu_list(cpus), args.resource_prefix, node, args.capacity)
        self.plugins = [NodePlugin(node, cpus, args.capacity, "%s%d" % (args.resource_prefix, node), args.socket_dir)
                        for node, cpus in nodes]
        LOG.info("Serving %s: the resources are fixed at start, a NUMA node that gains CPUs later is advertised "
                 "only after a restart of the plugin", ", ".join(plugin.resource for plugin in self.plugins))
        self.health = NodeHealth(args.sysfs, [node for node, _cpus in nodes], args.resource_prefix)
        self.registered_with = None  # kubelet's socket as it was when every resource registered

    def register(self):
        """Serve every resource and register it with kubelet; True when all are registered."""
        for plugin in self.plugins:
            plugin.stop()
        for plugin in self.plugins:
            plugin.serve()
        kubelet = socket_identity(self.kubelet_socket)
        try:
            with grpc.insecure_channel("unix:" + self.kubelet_socket) as channel:
                stub = api_pb2_grpc.RegistrationStub(channel)
                for plugin in self.plugins:
                    # kubelet dials back and asks for the options before it answers, so the
                    # deadline covers a round trip to this process as well
                    stub.Register(api_pb2.RegisterRequest(
                        version=API_VERSION, endpoint=plugin.endpoint, resource_name=plugin.resource,
                        options=api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)), timeout=30)
                    LOG.info("Registered %s with kubelet (socket %s)", plugin.resource, plugin.socket)
        except grpc.RpcError as exc:
            LOG.warning("registration with kubelet at %s failed: %s", self.kubelet_socket, exc.details() or exc.code())
            return False
        self.registered_with = kubelet
        return True

    def needs_registration(self):
        kubelet = socket_identity(self.kubelet_socket)
        if kubelet is None:
            return None  # kubelet is not listening (restarting): wait for its new socket
        if kubelet != self.registered_with:
            return "kubelet's socket %s is new (kubelet restarted)" % self.kubelet_socket
        for plugin in self.plugins:
            if not os.path.exists(plugin.socket):
                return "%s is gone" % plugin.socket
        return None

    def follow_topology(self):
        """Read the online CPUs and NUMA nodes; mark each resource whose node changed (its streams send it)."""
        transitions, notices = self.health.poll()
        for notice in notices:
            LOG.warning("%s", notice)
        for change in transitions:
            LOG.log(logging.INFO if change.healthy else logging.WARNING, "%s", change.message)
            for plugin in self.plugins:
                if plugin.node == change.node:
                    plugin.health.set(change.healthy)

    def run(self):
        why = "start-up"
        delay = self.poll
        while not self.done.is_set():
            self.follow_topology()
            if why:
                noticed = time.monotonic()
                LOG.info("serving and registering: %s", why)
                if self.register():
                    LOG.info("all %d resources registered %.1f s after %s", len(self.plugins),
                             time.monotonic() - noticed, why)
                    delay = self.poll
                else:
                    delay = min(delay * 2, 5.0)  # kubelet may still be starting: try again soon
                    self.done.wait(delay)
                    continue
            self.done.wait(self.poll)
            why = self.needs_registration()
        for plugin in self.plugins:
            plugin.stop()
        LOG.info("stopped")

    def stop(self, *_args):
        self.done.set()


def main(args):
    plugin = Plugin(args)
    signal.signal(signal.SIGTERM, plugin.stop)
    signal.signal(signal.SIGINT, plugin.stop)
    plugin.run()
    return 0
