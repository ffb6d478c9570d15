# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nodes Volcano's numa-aware predicate would never pass, and why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano_nodes

GOOD = {"metadata": {"name": "w1"}, "spec": {
    "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
    "numares": {"cpu": {"allocatable": "1-3", "capacity": 4}}}}


def test_nodes_the_predicate_would_never_pass():
    assert volcano_nodes.node_problems("w1", GOOD, "single-numa-node") == []
    assert "best-effort" in volcano_nodes.node_problems("w1", GOOD, "best-effort")[0]
    assert "no Numatopology" in volcano_nodes.node_problems("w2", None)[0]
    loose = {"spec": {"policies": {"CPUManagerPolicy": "none", "TopologyManagerPolicy": "none"}}}
    problems = volcano_nodes.node_problems("w3", loose)
    assert len(problems) == 3 and "static" in problems[0] and "none" in problems[1] and "allocatable" in problems[2]


class Api(object):
    def __init__(self, topologies):
        self.topologies, self.selectors = topologies, []

    def nodes(self, selector=None):
        self.selectors.append(selector)
        return [{"metadata": {"name": "w1"}}, {"metadata": {"name": "w2"}}]

    def get(self, path, **params):
        assert path == "/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies"
        if self.topologies is None:
            raise RuntimeError("404 the server could not find the requested resource")
        return {"items": self.topologies}


def test_node_report_names_each_selected_node_with_its_problems():
    api = Api([GOOD])
    report = volcano_nodes.node_report(api, {"node_selector": {"numa": "true"}, "topology_policy": "single-numa-node"})
    assert report == {"w2": volcano_nodes.node_problems("w2", None)}
    assert api.selectors == [{"numa": "true"}]


def test_node_report_without_the_numatopology_crd_names_every_node():
    assert sorted(volcano_nodes.node_report(Api(None), {})) == ["w1", "w2"]
