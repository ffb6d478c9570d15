# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role keeps defaults, argument_specs and README in step."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# every role: each folder of roles/
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", name)))
# the roles that deploy into the cluster, and the variables they take from cluster_stacks alone
STACK_ROLES = ("numa_resource_plugin", "numa_monitoring", "volcano", "topology_scheduler")
SHARED = ("kubeconfig", "context", "delegate_to", "wait_timeout", "wait_ceiling", "adopt", "max_unavailable",
          "unavailable_nodes_allowed")


def load(role, *parts):
    path = os.path.join(ROOT, "roles", role, *parts)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return yaml.safe_load(handle)


def test_there_are_roles():
    assert ROLES


@pytest.mark.parametrize("role", ROLES)
def test_defaults_match_argument_specs(role):
    defaults = load(role, "defaults", "main.yml") or {}
    specs = load(role, "meta", "argument_specs.yml")
    assert specs, "%s has no meta/argument_specs.yml" % role
    options = specs["argument_specs"]["main"]["options"]
    # every default is documented with its value, except those computed by a template at run time
    templated = set(k for k, v in defaults.items() if isinstance(v, str) and "{{" in v)
    assert sorted(defaults) == sorted(k for k, v in options.items() if "default" in v or k in templated), role
    for name, value in defaults.items():
        assert name.startswith(role + "_"), "%s: %s is not prefixed with the role name" % (role, name)
        spec = options[name]
        if isinstance(value, str) and "{{" in value:
            continue
        assert spec.get("default") == value, "%s: default of %s differs between defaults and argument_specs" % (
            role, name)
    for name, spec in options.items():
        assert spec.get("description"), "%s: %s has no description" % (role, name)


@pytest.mark.parametrize("role", ROLES)
def test_readme_names_every_variable(role):
    readme = open(os.path.join(ROOT, "roles", role, "README.md")).read()
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    missing = [name for name in options if name not in readme]
    assert not missing, "%s/README.md does not mention %s" % (role, ", ".join(missing))


@pytest.mark.parametrize("role", STACK_ROLES)
def test_each_stack_role_takes_the_shared_variables_from_cluster_stacks_alone(role):
    """One declaration of each shared variable: the stack role depends on cluster_stacks, declares
    none of them itself, and its tasks read cluster_stacks' names."""
    meta = load(role, "meta", "main.yml") or {}
    assert {"role": "numa.kube.cluster_stacks"} in meta.get("dependencies", []), role
    shared = load("cluster_stacks", "defaults", "main.yml")
    assert sorted(shared) == sorted("cluster_stacks_" + name for name in SHARED)
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    own = sorted("%s_%s" % (role, name) for name in SHARED if "%s_%s" % (role, name) in options)
    assert own == [], "%s declares shared variables of its own: %s" % (role, ", ".join(own))
    tasks = "".join(open(path).read() for path in glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml")))
    assert "cluster_stacks_delegate_to" in tasks and "cluster_stacks_kubeconfig" in tasks, role
