# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Numatopology publisher's rounds: what it writes, when, and again after a restart.

The API server and kubelet are in-memory doubles here (the VM test bed runs the real ones); what
is checked is the publisher's own decisions.
"""

from __future__ import absolute_import, division, print_function

import copy
import os
import random
import sys
from urllib.parse import parse_qsl

import pytest

from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.kube import ApiError  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.publisher import Publisher, socket_identity  # noqa: E402 pylint: disable=wrong-import-position

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
    """The objects by path; records every request (its path without the query), refuses a stale
    resourceVersion as the API server does, and keeps managedFields as it does for a write's top-level
    fields: the fields a write changes go to its fieldManager (the query's, else the client's
    User-Agent, Python-urllib) and leave every other manager, a manager left with none is dropped."""

    def __init__(self):
        self.objects = {"/api/v1/nodes/" + NODE: {"metadata": {"name": NODE, "uid": "uid-1"}}}
        self.writes, self.requests, self.managers, self.version = [], [], [], 0

    def get(self, path):
        self.requests.append(("GET", path))
        if path not in self.objects:
            raise ApiError(404, "not found")
        return copy.deepcopy(self.objects[path])

    def request(self, method, path, body=None):
        path, dummy, query = path.partition("?")
        manager = dict(parse_qsl(query)).get("fieldManager", "Python-urllib")
        self.requests.append((method, path))
        self.writes.append(method)
        self.managers.append(manager)
        if method == "POST":
            path = path + "/" + body["metadata"]["name"]
        elif path not in self.objects:
            raise ApiError(404, "not found")
        elif body["metadata"].get("resourceVersion") != self.objects[path]["metadata"].get("resourceVersion"):
            raise ApiError(409, "the object has been modified; please apply your changes to the latest version")
        self.touch(path, body, manager)
        return copy.deepcopy(self.objects[path])

    def touch(self, path, body, manager=None):
        """Store ``body`` as the server would: with a new resourceVersion and, given the writer's
        ``manager``, its managedFields."""
        self.version += 1
        body = copy.deepcopy(body)
        before = self.objects.get(path) or {}
        if manager:
            # top-level fields (an NRT's zones and attributes are atomic lists); metadata's are not followed
            moved = set("f:" + key for key in set(body) | set(before)
                        if key not in ("apiVersion", "kind", "metadata") and body.get(key) != before.get(key))
            mine, entries = moved | {"f:metadata"}, []
            for entry in copy.deepcopy((before.get("metadata") or {}).get("managedFields") or []):
                if entry["manager"] == manager:
                    mine |= set(entry.get("fieldsV1", {}))
                    continue
                entry["fieldsV1"] = dict((k, v) for k, v in entry.get("fieldsV1", {}).items() if k not in moved)
                if entry["fieldsV1"]:
                    entries.append(entry)
            entries.append({"manager": manager, "operation": "Update", "apiVersion": body.get("apiVersion"),
                            "fieldsType": "FieldsV1", "fieldsV1": dict((field, {}) for field in sorted(mine))})
            body["metadata"]["managedFields"] = entries
        body["metadata"]["resourceVersion"] = str(self.version)
        self.objects[path] = body


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


class Clock(object):
    """Seconds that pass only when a test says so."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def publisher(tmp_path, api, kubelet, pods, resync=60.0, **kwargs):
    sys_root, dummy = two_socket_interleaved(hyperthreading=False).write(str(tmp_path))
    return Publisher(NODE, sys_root, pods, api=api, kubelet=kubelet, resync=resync, pod_resources_errors=(Down,),
                     **kwargs)


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


def test_a_kubelet_restart_no_round_saw_is_found_by_its_new_socket(tmp_path):
    """kubelet restarted with another policy between two rounds (its PodResources API never seen down,
    the same allocatable CPUs): the new socket file has /configz read again at the next round."""
    api, kubelet, pods, clock = Api(), Kubelet(STATIC), PodResources(allocatable=range(1, 8)), Clock()
    socket = {"identity": ("inode 7",)}
    pub = publisher(tmp_path, api, kubelet, pods, clock=clock, rand=lambda: 0.5,
                    kubelet_identity=lambda: socket["identity"])
    pub.step()
    clock.now += 2
    assert not pub.step() and kubelet.reads == 1
    kubelet.config = dict(STATIC, topologyManagerPolicy="best-effort")
    socket["identity"] = ("inode 9",)
    clock.now += 2
    assert pub.step()
    assert api.objects[PATH]["spec"]["policies"]["TopologyManagerPolicy"] == "best-effort"
    assert kubelet.reads == 2
    pods.cpus = range(2, 8)  # other allocatable CPUs: kubelet restarted with another reserved set
    kubelet.config = dict(STATIC, topologyManagerPolicy="restricted")
    clock.now += 2
    assert pub.step()
    assert api.objects[PATH]["spec"]["policies"]["TopologyManagerPolicy"] == "restricted"
    assert kubelet.reads == 3


def test_the_socket_identity_changes_when_kubelet_makes_its_socket_anew(tmp_path):
    path = str(tmp_path / "kubelet.sock")
    assert socket_identity(path) is None
    with open(path, "w") as handle:
        handle.write("first")
    first = socket_identity(path)
    assert first == socket_identity(path), "the same file, the same identity"
    # as kubelet does at each start: a new file under a temporary name, renamed over the old one
    with open(path + ".tmp", "w") as handle:
        handle.write("second")
    os.rename(path + ".tmp", path)
    assert socket_identity(path) not in (None, first)


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


def test_an_unchanged_node_costs_one_read_per_resync_and_no_write(tmp_path):
    api, kubelet, clock = Api(), Kubelet(STATIC), Clock()
    pub = publisher(tmp_path, api, kubelet, PodResources(allocatable=range(1, 8)), clock=clock, rand=lambda: 0.5)
    assert pub.step() and api.writes == ["POST"]
    version = api.objects[PATH]["metadata"]["resourceVersion"]
    del api.requests[:]
    for dummy in range(29):  # 58 s of 2 s rounds: not yet the resync (60 s with the factor 1.0)
        clock.now += 2
        assert not pub.step()
    assert api.requests == [], "between resyncs an unchanged node asks the API server nothing"
    for dummy in range(3):
        clock.now += 60
        assert not pub.step()
    assert api.requests == [("GET", PATH)] * 3, "each resync reads the object, and writes nothing when it is equal"
    assert api.objects[PATH]["metadata"]["resourceVersion"] == version
    assert kubelet.reads == 4, "kubelet's configuration is read again at each resync"


def test_a_change_is_one_write_without_a_read_before_it(tmp_path):
    api, pods, clock = Api(), PodResources(allocatable=range(1, 8)), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    del api.requests[:]
    for cpus in ([2], [2, 4], []):
        pods.assigned_cpus = cpus
        clock.now += 2
        assert pub.step()
    assert api.requests == [("PUT", PATH)] * 3
    assert api.objects[PATH]["spec"]["numares"]["cpu"]["allocatable"] == "1-7"
    assert api.objects[PATH]["metadata"]["resourceVersion"] == "4"


def test_a_write_on_a_stale_object_reads_it_again_and_keeps_the_other_writers_fields(tmp_path):
    api, pods, clock = Api(), PodResources(allocatable=range(1, 8)), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock)
    pub.step()
    other = copy.deepcopy(api.objects[PATH])
    other["metadata"]["annotations"]["example.org/note"] = "kept"
    api.touch(PATH, other)  # someone else's write: the publisher's copy is now stale
    del api.requests[:]
    pods.assigned_cpus = [3]
    clock.now += 2
    assert pub.step()
    assert api.requests == [("PUT", PATH), ("GET", PATH), ("PUT", PATH)]
    obj = api.objects[PATH]
    assert obj["spec"]["numares"]["cpu"]["allocatable"] == "1-2,4-7"
    assert obj["metadata"]["annotations"]["example.org/note"] == "kept"


def test_an_object_deleted_meanwhile_is_created_again_at_the_next_change(tmp_path):
    api, pods, clock = Api(), PodResources(allocatable=range(1, 8)), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock)
    pub.step()
    del api.objects[PATH]
    del api.requests[:]
    pods.assigned_cpus = [3]
    clock.now += 2
    assert pub.step()
    assert [method for method, path in api.requests] == ["PUT", "GET", "POST"]
    assert api.objects[PATH]["spec"]["numares"]["cpu"]["allocatable"] == "1-2,4-7"


def test_a_write_the_server_refuses_is_tried_again_at_the_next_round(tmp_path):
    class Failing(Api):
        def __init__(self):
            super(Failing, self).__init__()
            self.fail = False

        def request(self, method, path, body=None):
            if self.fail:
                self.requests.append((method, path))
                raise ApiError(500, "etcdserver: request timed out")
            return super(Failing, self).request(method, path, body)

    api, pods, clock = Failing(), PodResources(allocatable=range(1, 8)), Clock()
    pub = publisher(tmp_path, api, Kubelet(STATIC), pods, clock=clock)
    pub.step()
    api.fail, pods.assigned_cpus = True, [3]
    clock.now += 2
    assert not pub.step()
    api.fail = False
    clock.now += 2
    assert pub.step()
    assert api.objects[PATH]["spec"]["numares"]["cpu"]["allocatable"] == "1-2,4-7"


def test_resync_waits_follow_the_random_source_within_the_bounds(tmp_path):
    def reads_at(draw):
        """Seconds after the start at which the object is read again, for a source that always gives ``draw``."""
        api, clock = Api(), Clock()
        pub = publisher(tmp_path, api, Kubelet(STATIC), PodResources(allocatable=range(1, 8)), clock=clock,
                        rand=lambda: draw, jitter=0.5)
        start = clock.now
        pub.step()
        del api.requests[:]
        reads = []
        while len(reads) < 2:
            clock.now += 1
            pub.step()
            if api.requests:
                assert api.requests == [("GET", PATH)]
                reads.append(clock.now - start)
                del api.requests[:]
        return reads

    assert reads_at(0.0) == [30, 60], "the shortest wait is resync x (1 - jitter)"
    assert reads_at(0.5) == [60, 120]
    assert reads_at(0.999999) == [90, 180], "the longest wait is resync x (1 + jitter)"


def test_publishers_started_together_come_back_spread_over_a_period():
    waits = [Publisher(NODE, api=object(), kubelet=object(), rand=random.Random(seed).random).wait()
             for seed in range(1000)]
    assert all(30 <= w <= 90 for w in waits)
    # every sixth of the 60 s window holds some of them: no clump, no empty stretch
    bins = [0] * 6
    for w in waits:
        bins[min(int((w - 30) // 10), 5)] += 1
    assert min(bins) > 100, bins
    assert Publisher(NODE, api=object(), kubelet=object(), jitter=0).wait() == 60


def test_a_jitter_outside_its_range_is_refused():
    for jitter in (-0.1, 1.0):
        with pytest.raises(ValueError, match="jitter .* below 1"):
            Publisher(NODE, api=object(), kubelet=object(), jitter=jitter)


def test_the_resync_help_names_the_jitter_and_the_write_on_difference(capsys):
    from numa_agent import __main__ as main  # pylint: disable=import-outside-toplevel

    with pytest.raises(SystemExit):
        main.parse_args(["topology-publisher", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("about every this many seconds (jittered x0.5-1.5) kubelet's configuration and the Numatopology object "
            "are read again, and the object written only when they differ" in text)


def test_allocatable_cpus_listed_in_another_order_are_no_kubelet_restart(tmp_path):
    """Found in the test bed (issue 31): kubelet lists the allocatable CPUs in another order at each
    call ([1, 3, 0], then [0, 1, 3]); every round took that for a restart and read /configz again,
    a TLS handshake with kubelet every 2 s on every node."""
    api, kubelet, pods, clock = Api(), Kubelet(STATIC), PodResources(allocatable=[1, 3, 0]), Clock()
    pub = publisher(tmp_path, api, kubelet, pods, clock=clock, rand=lambda: 0.5)
    pub.step()
    for order in ([0, 1, 3], [3, 0, 1], [1, 3, 0]):
        pods.cpus = order
        clock.now += 2
        pub.step()
    assert kubelet.reads == 1, "one read of /configz for one kubelet"
    pods.cpus = [0, 1, 2, 3]  # another set: kubelet restarted with another reservation
    clock.now += 2
    pub.step()
    assert kubelet.reads == 2


@pytest.mark.parametrize("metadata", [["x"], {"managedFields": "x"}, {"managedFields": [{"manager": ["a"]}]},
                                      {"labels": ["x"]}])
def test_an_object_of_the_wrong_shape_is_a_warning_and_the_publisher_goes_on(tmp_path, metadata):
    """Fourth review: an object whose metadata or managedFields had a shape no API server gives raised
    AttributeError or TypeError out of step(), which ended the publisher process."""
    api, kubelet, pods, clock = Api(), Kubelet(STATIC), PodResources(allocatable=range(1, 8)), Clock()
    api.objects[PATH] = {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology", "metadata": metadata}
    pub = publisher(tmp_path, api, kubelet, pods, clock=clock, rand=lambda: 0.5)
    for _round in range(2):  # no exception out of a round: the publisher's loop goes on
        assert pub.step() in (True, False)
        clock.now += 2
