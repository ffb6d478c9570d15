# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin's ListAndWatch streams on a changing sysfs tree, without gRPC.

grpc and the generated kubelet stubs are not installed here (the image has them; the VM test bed
runs the plugin against a real kubelet). The stubs are replaced by plain message records for the
time of each test, so that the plugin's own code runs: the poll reading sysfs, the health it sets
and the device lists its open streams send.
"""

from __future__ import absolute_import, division, print_function

import argparse
import importlib
import logging
import os
import queue
import sys
import threading
import types

import pytest

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent")
STUBS = "numa_agent.kubelet.deviceplugin.v1beta1"


class Message(object):
    """A protobuf message as the plugin builds it: its fields as attributes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def stub_modules():
    grpc = types.ModuleType("grpc")
    grpc.RpcError = type("RpcError", (Exception,), {})
    api_pb2 = types.ModuleType(STUBS + ".api_pb2")
    for name in ("TopologyInfo", "NUMANode", "Device", "ListAndWatchResponse", "DevicePluginOptions"):
        setattr(api_pb2, name, type(name, (Message,), {}))
    api_pb2_grpc = types.ModuleType(STUBS + ".api_pb2_grpc")
    api_pb2_grpc.DevicePluginServicer = object
    modules = {"grpc": grpc, STUBS + ".api_pb2": api_pb2, STUBS + ".api_pb2_grpc": api_pb2_grpc}
    parent = None
    for name in ("numa_agent.kubelet", "numa_agent.kubelet.deviceplugin", STUBS):
        package = types.ModuleType(name)
        package.__path__ = []
        if parent is not None:
            setattr(parent, name.rsplit(".", 1)[1], package)
        modules[name] = parent = package
    parent.api_pb2, parent.api_pb2_grpc = api_pb2, api_pb2_grpc
    return modules


@pytest.fixture
def device_plugin(monkeypatch):
    monkeypatch.syspath_prepend(AGENT)
    for name, module in stub_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules.pop("numa_agent.device_plugin", None)
    try:
        yield importlib.import_module("numa_agent.device_plugin")
    finally:
        sys.modules.pop("numa_agent.device_plugin", None)
        package = sys.modules.get("numa_agent")
        for attribute in ("device_plugin", "kubelet"):
            if package is not None and hasattr(package, attribute):
                delattr(package, attribute)


class Context(object):
    """kubelet's side of a stream: open until it says otherwise."""

    def __init__(self):
        self.active = True

    def is_active(self):
        return self.active


def stream(plugin):
    """Open a ListAndWatch stream on ``plugin`` in a thread: its responses in a queue, then None."""
    responses = queue.Queue()
    context = Context()

    def read():
        for response in plugin.ListAndWatch(Message(), context):
            responses.put(response)
        responses.put(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return responses, context, thread


def states(response):
    return sorted(set((device.health, tuple(n.ID for n in device.topology.nodes)) for device in response.devices))


def write_online_cpus(sys_root, cpus):
    with open(os.path.join(sys_root, "devices/system/cpu/online"), "w") as handle:
        handle.write(format_cpu_list(cpus) + "\n")


def test_the_open_stream_sends_the_devices_again_when_their_numa_node_loses_and_regains_its_cpus(
        tmp_path, device_plugin, caplog):
    sys_root, _proc = two_socket_interleaved(hyperthreading=False).write(str(tmp_path / "m"))  # 0,2,4,6 | 1,3,5,7
    args = argparse.Namespace(sysfs=sys_root, socket_dir=str(tmp_path), poll=1.0, capacity=3,
                              resource_prefix="numa-align/numa-")
    caplog.set_level(logging.INFO, logger="device-plugin")
    plugin = device_plugin.Plugin(args)
    assert [(p.node, p.resource) for p in plugin.plugins] == [(0, "numa-align/numa-0"), (1, "numa-align/numa-1")]
    assert "a NUMA node that gains CPUs later is advertised only after a restart of the plugin" in caplog.text
    node0, node1 = plugin.plugins
    first0, context0, thread0 = stream(node0)
    first1, context1, thread1 = stream(node1)
    answer = first1.get(timeout=5)
    assert [d.ID for d in answer.devices] == ["numa-1-0", "numa-1-1", "numa-1-2"]
    assert states(answer) == [("Healthy", (1,))]
    assert states(first0.get(timeout=5)) == [("Healthy", (0,))]

    plugin.follow_topology()
    assert first1.empty() and first0.empty(), "nothing changed, nothing sent"

    write_online_cpus(sys_root, [0, 2, 4, 6])
    plugin.follow_topology()
    assert states(first1.get(timeout=5)) == [("Unhealthy", (1,))]
    assert "NUMA node 1 has no online CPU: numa-align/numa-1 Unhealthy" in caplog.text
    plugin.follow_topology()
    write_online_cpus(sys_root, [0, 2, 4, 6, 7])
    plugin.follow_topology()
    assert states(first1.get(timeout=5)) == [("Healthy", (1,))]
    assert "NUMA node 1 is back with online CPUs 7: numa-align/numa-1 Healthy" in caplog.text
    assert first1.empty() and first0.empty(), "one response per change, none for the node that kept its CPUs"

    # a stream kubelet opens while the node is down starts with the devices Unhealthy
    write_online_cpus(sys_root, [0, 2, 4, 6])
    plugin.follow_topology()
    assert states(first1.get(timeout=5)) == [("Unhealthy", (1,))]
    second1, _context, thread2 = stream(node1)
    assert states(second1.get(timeout=5)) == [("Unhealthy", (1,))]

    # kubelet closing a stream ends it; stopping the server ends the others at once
    context1.active = False
    write_online_cpus(sys_root, [0, 1, 2, 4, 6])
    plugin.follow_topology()
    assert first1.get(timeout=5) is None
    assert states(second1.get(timeout=5)) == [("Healthy", (1,))]
    node1.stop()
    node0.stop()
    assert second1.get(timeout=2) is None and first0.get(timeout=2) is None
    for thread in (thread0, thread1, thread2):
        thread.join(2)
        assert not thread.is_alive()
    assert context0.active
