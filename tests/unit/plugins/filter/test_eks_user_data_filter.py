# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.numa.kube.plugins.filter.eks_user_data import FilterModule

SETTINGS = {"cpuManagerPolicy": "static", "memoryManagerPolicy": "Static"}


def test_filters_are_registered_and_chain():
    filters = FilterModule().filters()
    config = filters["eks_node_config"](wrap_var(SETTINGS), max_pods=58, numa_nodes=1)
    document = filters["eks_user_data"](wrap_var(config))
    part = email.message_from_string(document).get_payload()[0]
    assert part.get_content_type() == "application/node.eks.aws"
    assert yaml.safe_load(part.get_payload())["spec"]["kubelet"]["config"]["reservedMemory"] == [
        {"numaNode": 0, "limits": {"memory": "993Mi"}}]
    args = filters["eks_kubelet_extra_args"](SETTINGS, max_pods="58", numa_nodes=1, cpu_count=4)
    assert "--reserved-memory=0:memory=993Mi" in args.split()


@pytest.mark.parametrize("name,call", [
    ("eks_node_config", lambda f: f(SETTINGS, numa_nodes=1)),
    ("eks_user_data", lambda f: f({"kind": "NodeConfig"})),
    ("eks_kubelet_extra_args", lambda f: f(SETTINGS, max_pods=58, numa_nodes=1)),
])
def test_filters_raise_filter_errors_naming_themselves(name, call):
    with pytest.raises(AnsibleFilterError, match="numa.kube.%s: " % name):
        call(FilterModule().filters()[name])
