# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.filter.kubelet_args import FilterModule


def test_filters_are_registered_and_work():
    filters = FilterModule().filters()
    assert filters["kubelet_arg"]({"cpuManagerPolicy": "static"}) == ["cpu-manager-policy=static"]
    assert filters["kubelet_extra_args"]({"cpuManagerPolicy": "static"}) == "--cpu-manager-policy=static"
    two_nodes = {"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}},
                                    {"numaNode": 1, "limits": {"memory": "1Gi"}}]}
    assert filters["kubelet_extra_args"](two_nodes, quote=True) == "'--reserved-memory=0:memory=1Gi;1:memory=1Gi'"


def test_filters_raise_filter_errors():
    filters = FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match="numa.kube.kubelet_arg"):
        filters["kubelet_arg"]("cpuManagerPolicy=static")
    with pytest.raises(AnsibleFilterError, match="numa.kube.kubelet_extra_args"):
        filters["kubelet_extra_args"]({"authentication": {"x": {"y": 1}}})
