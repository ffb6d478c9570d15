# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.filter.rke2 import FilterModule

FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")


def test_filters_are_registered_and_work():
    filters = FilterModule().filters()
    settings = {"cpuManagerPolicy": "static",
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}},
                                   {"numaNode": 1, "limits": {"memory": "1Gi"}}]}
    assert filters["rke2_kubelet_arg"](settings) == ["cpu-manager-policy=static",
                                                     "reserved-memory=0:memory=1Gi;1:memory=1Gi"]
    assert filters["rke2_option"]("write-kubeconfig-mode", "0600") == 'write-kubeconfig-mode: "0600"'


@pytest.mark.parametrize("name, args, found", [
    ("rke2_kubelet_arg", ("cpuManagerPolicy=static",), "expected a mapping of KubeletConfiguration fields"),
    ("rke2_kubelet_arg", ({"shutdownGracePeriod": "30s"},), "shutdownGracePeriod has no kubelet flag"),
    ("rke2_option", ("kubelet-arg", ["cpu-manager-policy=static"]), "rke2_kubelet_arg"),
    ("rke2_option", ("node-label", ["numa.kube/aligned=true"]), "first registers"),
    ("rke2_option", ("Node-IP", "192.0.2.1"), "option name 'Node-IP'"),
    ("rke2_option", ("node-ip", None), "option node-ip has the value None"),
])
def test_bad_input_raises_a_filter_error_naming_the_filter_and_the_value(name, args, found):
    with pytest.raises(AnsibleFilterError) as caught:
        FilterModule().filters()[name](*args)
    assert str(caught.value).startswith("numa.kube.%s: " % name)
    assert found in str(caught.value)


@pytest.mark.parametrize("name", ["rke2_kubelet_arg", "rke2_option"])
def test_each_filter_has_its_documentation(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as handle:
        doc = yaml.safe_load(handle)
    assert doc["DOCUMENTATION"]["name"] == name
    assert name in doc["EXAMPLES"]
