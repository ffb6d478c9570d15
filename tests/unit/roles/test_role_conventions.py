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
ROLES = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "roles", "*", "tasks")))


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
