# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.filter.rollout_owner import FilterModule
from ansible_collections.numa.kube.plugins.module_utils import rollout_owner


def test_the_filter_tells_a_live_run_from_a_gone_one():
    gone = FilterModule().filters()["rollout_owner_gone"]
    me = rollout_owner.my_identity()
    assert gone({}) is True and gone(None) is True
    assert gone(me) is False, "this process runs"
    assert gone(dict(me, pid_start="1")) is True, "a reused pid is another process"
    assert gone(dict(me, controller="another-controller")) is False, "the lease decides for another controller"


def test_the_filter_wants_a_mapping():
    with pytest.raises(AnsibleFilterError, match="numa.kube.rollout_owner_gone: the owner must be a mapping"):
        FilterModule().filters()["rollout_owner_gone"]("ctl:1:2")
