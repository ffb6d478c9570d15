# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Numatopology publisher's rounds: what it writes, when, and again after a restart.

The API server and kubelet are in-memory doubles here (the VM test bed runs the real ones); what
is checked is the publisher's own decisions.
"""

from __future__ import absolute_import, division, print_function

import copy
import os
import sys

from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.kube import ApiError  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.publisher import Publisher  # noqa: E402 pylint: disable=wrong-import-position

NODE = "w1"
PATH = "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies/" + NODE
STATIC = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
          "kubeReserved": {"cpu": "500m", "memory": "256Mi"}, "systemReserved": {"memory": "256Mi"}}


class Down(Exception):
    """What the PodResources client raises when kubelet does not answer."""


class Kubelet(object):
    def __init__(self, config):
        self.config, self.reads = config, 0

    def get(self, path):
        assert path == "/configz"
        self.reads += 1
        return {"kubeletconfig": copy.deepcopy(self.config)}


class Api(object):
    """The objects by path; records the writes."""

    def __init__(self):
        self.objects = {"/api/v1/nodes/" + NODE: {"metadata": {"name": NODE, "uid": "uid-1"}}}
        self.writes = []

    def get(self, path):
        if path not in self.objects:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.objects[path])

    def request(self, method, path, body=None):
        self.writes.append(method)
        if method == "POST":
            path = path + "/" + body["metadata"]["name"]
        self.objects[path] = copy.deepcopy(body)
        return body


class PodResources(object):
    def __init__(self, allocatable, assigned=()):
        self.cpus, self.assigned_cpus, self.up = allocatable, list(assigned), True

    def allocatable(self):
        if not self.up:
            raise Down("kubelet restarting")
        return {"cpu_ids": list(self.cpus)}

    def assigned(self):
        if not self.up:
            raise Down("kubelet restarting")
        return [{"name": "p", "containers": [{"name": "c", "cpu_ids": list(self.assigned_cpus)}]}]


def publisher(tmp_path, api, kubelet, pods, resync=60.0):
    sys_root, dummy = two_socket_interleaved(hyperthreading=False).write(str(tmp_path))
    return Publisher(NODE, sys_root, pods, api=api, kubelet=kubelet, resync=resync, pod_resources_errors=(Down,))


def test_first_round_creates_the_object_owned_by_the_node(tmp_path):
    api, pods = Api(), PodResources(allocatable=range(1, 8))
    assert publisher(tmp_path, api, Kubelet(STATIC), pods).step()
    obj = api.objects[PATH]
    assert api.writes == ["POST"]
    assert obj["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "uid-1"}]
    spec = obj["spec"]
    assert spec["policies"] == {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"}
    assert spec["numares"]["cpu"] == {"allocatable": "1-7", "capacity": 8}
    # even ids on socket and NUMA node 0, odd ones on 1 (two_socket_interleaved)
    assert spec["cpuDetail"]["3"] == {"numa": 1, "socket": 1, "core": 1}
    assert spec["resReserved"] == {"memory": "512Mi"}
    assert obj["metadata"]["annotations"]["numa.kube/reserved-cpus"] == "0"


def test_assignments_move_the_free_set_and_nothing_else_is_written(tmp_path):
    api, kubelet, pods = Api(), Kubelet(STATIC), PodResources(allocatable=range(1, 8))
    pub = publisher(tmp_path, api, kubelet, pods)
    pub.step()
    assert not pub.step() and api.writes == ["POST"], "an unchanged node is not written again"
    pods.assigned_cpus = [2, 4]
    assert pub.step()
    assert api.writes == ["POST", "PUT"]
    assert api.objects[PATH]["spec"]["numares"]["cpu"]["allocatable"] == "1,3,5-7"
    assert kubelet.reads == 1, "kubelet's configuration is read once per resync, not every round"


def test_a_restarted_publisher_writes_even_the_same_content(tmp_path):
    api, pods = Api(), PodResources(allocatable=range(1, 8))
    first = publisher(tmp_path, api, Kubelet(STATIC), pods)
    first.step()
    second = publisher(tmp_path, api, Kubelet(STATIC), pods)
    second.started = "2026-11-24T10:00:00Z"  # a later start
    assert second.step()
    assert api.writes == ["POST", "PUT"], "the scheduler must see an update after a restart"
    assert api.objects[PATH]["metadata"]["annotations"]["numa.kube/publisher-started"] == "2026-11-24T10:00:00Z"


def test_a_kubelet_restart_rereads_its_policies_and_nothing_is_published_meanwhile(tmp_path):
    api, kubelet, pods = Api(), Kubelet(STATIC), PodResources(allocatable=range(1, 8))
    pub = publisher(tmp_path, api, kubelet, pods)
    pub.step()
    pods.up = False
    assert not pub.step() and api.writes == ["POST"]
    kubelet.config = dict(STATIC, topologyManagerPolicy="restricted")
    pods.up = True
    assert pub.step()
    assert api.objects[PATH]["spec"]["policies"]["TopologyManagerPolicy"] == "restricted"
    assert kubelet.reads == 2


def test_resync_repairs_an_object_someone_else_changed(tmp_path):
    api, pods = Api(), PodResources(allocatable=range(1, 8))
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, resync=0)
    pub.step()
    api.objects[PATH]["spec"]["policies"]["CPUManagerPolicy"] = "none"
    assert pub.step()
    assert api.objects[PATH]["spec"]["policies"]["CPUManagerPolicy"] == "static"
    del api.objects[PATH]
    assert pub.step() and api.writes[-1] == "POST"


def test_kubelet_config_unreadable_publishes_nothing(tmp_path):
    class Refusing(Kubelet):
        def get(self, path):
            raise ApiError(403, "forbidden: nodes/configz")

    api = Api()
    assert not publisher(tmp_path, api, Refusing(STATIC), PodResources(allocatable=range(1, 8))).step()
    assert api.writes == []
