# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.numa.kube.plugins.filter.containerd import FilterModule

DUMP = 'version = 2\n\n[plugins]\n\n  [plugins."io.containerd.nri.v1.nri"]\n    disable = false\n    socket_path = "/x"\n'


def test_containerd_nri_enabled():
    enabled = FilterModule().filters()["containerd_nri_enabled"]
    assert enabled(DUMP) is True
    assert enabled(DUMP.replace("disable = false", "disable = true")) is False
    assert enabled("version = 3\n", "containerd containerd.io v2.1.4 abc") is True
    assert enabled("version = 2\n", "1.7.24") is False
    with pytest.raises(AnsibleFilterError, match="pass the containerd version"):
        enabled("version = 2\n")
    with pytest.raises(AnsibleFilterError, match="cannot find a version"):
        enabled("", "unknown")
