# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet role's boot guard is written only when it is not in place: the paths it asks
kubelet_facts about, as Ansible itself templates the role's variables."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.tests.unit.roles.test_numa_exporter import ROOT, ansible_templar, load_trusted


def kubelet_variables(**overrides):
    variables = {"inventory_hostname": "node-a"}
    for part in ("defaults", "vars"):
        variables.update(load_trusted(os.path.join(ROOT, "roles", "kubelet", part, "main.yml")))
    variables.update(overrides)
    templar = ansible_templar(**variables)
    return dict((key, templar.template(value)) for key, value in variables.items() if key.startswith("_kubelet_guard_c"))


def test_the_guard_is_looked_for_under_every_service_kubelet_may_run_under():
    """Each service's own drop-in path (a back reference in the folded text once reached the
    filter escaped: five services gave one path with a literal \\1, the drop-in was never found
    and the guard was written again on every run)."""
    candidates = kubelet_variables()["_kubelet_guard_candidates"]
    assert candidates == ["/usr/local/libexec/numa-kube-clear-stale-memory-state"] + [
        "/etc/systemd/system/%s.service.d/50-numa-kube-memory-state.conf" % service
        for service in ("kubelet", "rke2-agent", "rke2-server", "k3s-agent", "k3s")]
