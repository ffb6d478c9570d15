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


def profile_variables(**overrides):
    variables = {"inventory_hostname": "node-a", "numa_kube_state": "present", "node_profile_reserved": "0"}
    for part in ("defaults", "vars"):
        variables.update(load_trusted(os.path.join(ROOT, "roles", "kubelet", part, "main.yml")))
    variables.update(overrides)
    templar = ansible_templar(**variables)
    return dict((key, templar.template(variables[key])) for key in (
        "_kubelet_profile_pages_change", "_kubelet_irqbalance_change", "_kubelet_profile_units_again"))


UNIT = "/etc/systemd/system/numa-kube-hugepages-node1-2048kB.service"
IRQBALANCE = "/etc/systemd/system/irqbalance.service.d/50-numa-kube-banned-cpus.conf"


def test_a_page_unit_written_anew_restarts_kubelet_and_runs_again():
    """A page unit the change writes (its count changed) restarts kubelet, and is stopped with it so
    that kubelet's start runs it again; an irqbalance drop-in written restarts irqbalance. (The
    patterns once escaped their dots twice in the folded text: a literal backslash, which no path
    has, so a change of the pages alone restarted nothing. The scenario's test_profile.py found it.)"""
    found = profile_variables(__kubelet_plan={"extra_written": [UNIT, IRQBALANCE]},
                              node_profile_plan={"files": [{"path": UNIT}, {"path": IRQBALANCE}], "kubelet": {}},
                              kubelet_facts_found=None, _kubelet_profile_installed=[UNIT])
    assert found == {"_kubelet_profile_pages_change": True, "_kubelet_irqbalance_change": True,
                     "_kubelet_profile_units_again": ["numa-kube-hugepages-node1-2048kB.service"]}
    unchanged = profile_variables(__kubelet_plan={"extra_written": []},
                                  node_profile_plan={"files": [{"path": UNIT}], "kubelet": {}},
                                  _kubelet_profile_installed=[UNIT])
    assert unchanged == {"_kubelet_profile_pages_change": False, "_kubelet_irqbalance_change": False,
                         "_kubelet_profile_units_again": []}


def test_no_regular_expression_in_the_roles_folded_text_escapes_with_a_backslash():
    """A string in a ``{{ }}`` expression keeps both backslashes of ``\\\\.`` when Ansible (2.19)
    templates it, so the pattern asks for a backslash and matches no path (a ``{% %}`` statement's
    string is unescaped by Jinja's own lexer, which makes the two differ): write ``[.]``, which
    means a dot in both. The kubelet role's page patterns were silently false this way."""
    import re

    found = []
    for folder in ("roles", "playbooks"):
        for top, _dirs, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if not name.endswith((".yml", ".yaml")):
                    continue
                path = os.path.join(top, name)
                with open(path) as handle:
                    for number, line in enumerate(handle, 1):
                        if not line.lstrip().startswith("#") and re.search(r"'[^']*\\\\[^']*'", line):
                            found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert found == [], "\n".join(found)
