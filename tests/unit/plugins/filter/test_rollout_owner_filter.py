# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.filter.rollout_owner import FilterModule
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner


def test_the_filter_tells_a_live_run_from_a_gone_one():
    gone = FilterModule().filters()["rollout_owner_gone"]
    me = rollout_owner.my_identity()
    assert gone({}) is True and gone(None) is True
    assert gone(me) is False, "this process runs"
    assert gone(dict(me, pid_start="1")) is True, "a reused pid is another process"
    assert gone(dict(me, controller="another-controller")) is False, "the lease decides for another controller"
    assert gone(dict(me, heartbeat=1, lease=3600)) is False, "the record's own keys are ignored"


def test_the_filter_judges_only_a_run_of_this_boot_and_pid_namespace():
    """A run with this host name but of another machine (another boot id) or another container
    (another pid namespace) is not looked for in this /proc: its pid missing here proves nothing."""
    gone = FilterModule().filters()["rollout_owner_gone"]
    me = rollout_owner.my_identity()
    assert me["boot_id"] and me["pid_ns"]
    dead = dict(me, pid_start="1")
    assert gone(dead) is True
    assert gone(dict(dead, boot_id="00000000-0000-4000-8000-000000000000")) is False
    assert gone(dict(dead, pid_ns=me["pid_ns"] + 1)) is False
    assert gone(dict(dead, boot_id="", pid_ns=None)) is False


def test_the_filter_wants_a_mapping():
    with pytest.raises(AnsibleFilterError, match="numa.kube.rollout_owner_gone: the owner must be a mapping"):
        FilterModule().filters()["rollout_owner_gone"]("ctl:1:2")
