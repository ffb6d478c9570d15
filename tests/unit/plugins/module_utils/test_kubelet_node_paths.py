# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubelet_facts' files: a path as given, a pattern as the node's files it matches."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.numa.kube.plugins.module_utils.kubelet.node import listed_paths


def test_patterns_stand_for_the_files_they_match_under_the_root_and_paths_stay_as_given(tmp_path):
    units = tmp_path / "etc" / "systemd" / "system"
    (units / "kubelet.service.d").mkdir(parents=True)
    for name in ("numa-kube-hugepages-node1-2048kB.service", "numa-kube-hugepages-node0-1048576kB.service",
                 "kubelet.service.d/50-numa-kube-hugepages.conf", "other.service"):
        (units / name).write_text("")
    found = listed_paths(str(tmp_path), ["/usr/local/libexec/numa-kube/hugepages",
                                         "/etc/systemd/system/numa-kube-hugepages-node*kB.service",
                                         "/etc/systemd/system/*.service.d/50-numa-kube-hugepages.conf",
                                         "/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.con[f]"])
    assert found == ["/usr/local/libexec/numa-kube/hugepages",
                     "/etc/systemd/system/numa-kube-hugepages-node0-1048576kB.service",
                     "/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service",
                     "/etc/systemd/system/kubelet.service.d/50-numa-kube-hugepages.conf"]
    assert listed_paths("/", ["/etc/hostname-that-is-not-here*"]) == []
