# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet's PodResources API (``pod-resources/kubelet.sock``) as plain data: what it assigned to
each container (``List``) and what it may assign (``GetAllocatableResources``)."""

import grpc

from numa_agent.kubelet.podresources.v1 import api_pb2, api_pb2_grpc

RpcError = grpc.RpcError


def _topology_nodes(topology):
    return [node.ID for node in topology.nodes] if topology is not None else []


def _memory(blocks):
    return [{"memory_type": block.memory_type, "size": block.size, "nodes": _topology_nodes(block.topology)}
            for block in blocks]


def _devices(devices):
    return [{"resource_name": device.resource_name, "device_ids": list(device.device_ids),
             "nodes": _topology_nodes(device.topology)} for device in devices]


class PodResources(object):
    """kubelet's PodResources API as plain data (numa_metrics' shapes)."""

    def __init__(self, socket_path, timeout=5.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self.channel = grpc.insecure_channel("unix://" + socket_path)
        self.stub = api_pb2_grpc.PodResourcesListerStub(self.channel)

    def assigned(self, timeout=None):
        """What kubelet assigned to each container; ``timeout`` (seconds) replaces the default one."""
        response = self.stub.List(api_pb2.ListPodResourcesRequest(), timeout=timeout or self.timeout)
        return [{"namespace": pod.namespace, "name": pod.name,
                 "containers": [{"name": c.name, "cpu_ids": list(c.cpu_ids), "memory": _memory(c.memory),
                                 "devices": _devices(c.devices)} for c in pod.containers]}
                for pod in response.pod_resources]

    def allocatable(self, timeout=None):
        """What kubelet may assign; ``timeout`` (seconds) replaces the default one."""
        response = self.stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest(),
                                                     timeout=timeout or self.timeout)
        # in one order: kubelet lists them in the order of its sets, another at each call
        return {"cpu_ids": sorted(response.cpu_ids), "memory": _memory(response.memory),
                "devices": _devices(response.devices)}
