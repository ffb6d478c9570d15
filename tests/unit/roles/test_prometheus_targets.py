# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prometheus_targets role's own logic, templated by Ansible: which addresses, which scheme."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def role_file(part):
    from ansible.parsing.dataloader import DataLoader

    return DataLoader().load_from_file(os.path.join(ROOT, "roles", "prometheus_targets", part, "main.yml"),
                                       trusted_as_template=True)


def templated(name, hostvars):
    """The role variable ``name`` for an exporter group of ``hostvars``' hosts, as Ansible templates it."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    variables = dict(role_file("defaults"), **role_file("vars"))
    variables.update(groups={"numa_nodes": sorted(hostvars)}, hostvars=hostvars)
    return Templar(loader=DataLoader(), variables=variables).template(variables[name])


def test_an_address_given_as_ansible_host_is_listed_before_the_facts_one():
    hostvars = {"node-a": {"ansible_host": "10.1.2.3", "ansible_facts": {"default_ipv4": {"address": "192.0.2.9"}}},
                "node-b": {"ansible_host": "node-b.example.org",
                           "ansible_facts": {"default_ipv4": {"address": "192.0.2.10"}}}}
    assert templated("prometheus_targets_targets", hostvars) == ["10.1.2.3:9201", "192.0.2.10:9201"]


CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("hostvars, serving, scheme", [
    # nothing said: the exporters' default, HTTPS
    ({"a": {}, "b": {}}, [True, True], "https"),
    # what the numa_exporter role published in this run wins over the variables
    ({"a": {"numa_exporter_tls_ca_certificate": "", "numa_exporter_tls": True},
      "b": {"numa_exporter_tls_ca_certificate": ""}}, [False, False], "http"),
    ({"a": {"numa_exporter_tls": False}, "b": {"numa_exporter_tls": "no"}}, [False, False], "http"),
    ({"a": {"numa_exporter_tls_ca_certificate": CA}, "b": {"numa_exporter_tls": False}}, [True, False], "https"),
])
def test_the_scheme_follows_what_the_exporters_serve(hostvars, serving, scheme):
    assert templated("_prometheus_targets_serving", hostvars) == serving
    assert templated("prometheus_targets_scheme", hostvars) == scheme


@pytest.mark.parametrize("hostvars, extra, holds", [
    ({"a": {}, "b": {}}, {}, True),
    ({"a": {"numa_exporter_tls_ca_certificate": CA}, "b": {"numa_exporter_tls": False}}, {}, False),
    ({"a": {"numa_exporter_tls": False}, "b": {"numa_exporter_tls": False}}, {}, True),
    ({"a": {}, "b": {}}, {"prometheus_targets_scheme": "http"}, False),
])
def test_one_job_one_scheme(hostvars, extra, holds):
    """The check of tasks/main.yml, evaluated by Ansible: exporters that serve differently, or a scheme
    set against what they serve, stop the role."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    tasks = DataLoader().load_from_file(os.path.join(ROOT, "roles", "prometheus_targets", "tasks", "main.yml"),
                                        trusted_as_template=True)
    check = next(t for t in tasks if t["name"] == "Check that every exporter serves the scheme of the job")
    variables = dict(role_file("defaults"), **role_file("vars"))
    variables.update(groups={"numa_nodes": sorted(hostvars)}, hostvars=hostvars, **extra)
    templar = Templar(loader=DataLoader(), variables=variables)
    assert all(templar.evaluate_conditional(c) for c in check["ansible.builtin.assert"]["that"]) is holds
    if not holds and not extra:
        assert "a: HTTPS, b: plain HTTP" in templar.template(check["ansible.builtin.assert"]["fail_msg"])
