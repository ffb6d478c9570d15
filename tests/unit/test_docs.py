# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The documents that list what the collection has say what it has: roles/README.md every role, the
README the number of roles, CHANGELOG.rst every module, filter, lookup and role."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# every role: each folder of roles/
ROLES = sorted(name for name in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", name)))
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
           "twelve", "thirteen", "fourteen", "fifteen"]


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def plugin_files(kind):
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", kind, "*.py"))
                  if not p.endswith("__init__.py"))


def filters():
    names = []
    for name in plugin_files("filter"):
        module = importlib.import_module("ansible_collections.numa.kube.plugins.filter.%s" % name)
        names.extend(module.FilterModule().filters())
    return sorted(names)


def rst_sections(text):
    """{title: body} of the reStructuredText sections (any underline), checking each underline."""
    lines = text.split("\n")
    sections, title = {}, None
    for index, line in enumerate(lines[:-1]):
        below = lines[index + 1]
        if line.strip() and below and len(set(below)) == 1 and below[0] in "=-~^" and not line.startswith(".."):
            assert len(below) >= len(line), "the underline of %r is shorter than the title" % line
            title = line
            sections[title] = []
        elif title is not None:
            sections[title].append(line)
    return dict((name, "\n".join(body)) for name, body in sections.items())


def bullets(body):
    """The names of the bullets `- numa.kube.<name> - purpose` of a section body."""
    return re.findall(r"^- numa\.kube\.([a-z0-9_]+) - \S", body, re.M)


def test_roles_readme_lists_every_role_once():
    rows = re.findall(r"^\| \[`([a-z0-9_]+)`\]\(([a-z0-9_]+)/README\.md\) \| \S", read("roles", "README.md"), re.M)
    assert sorted(row[0] for row in rows) == ROLES
    assert all(name == link for name, link in rows)


def test_readme_counts_the_roles():
    found = re.search(r"The modules, the (\w+) roles", read("README.md"))
    assert found, "README.md no longer says how many roles there are"
    assert found.group(1) == NUMBERS[len(ROLES)], "README.md says %s roles, there are %d" % (found.group(1),
                                                                                             len(ROLES))


def test_changelog_names_every_module_filter_lookup_and_role():
    sections = rst_sections(read("CHANGELOG.rst"))
    assert sorted(bullets(sections["New Modules"])) == plugin_files("modules")
    assert sorted(bullets(sections["Filter"])) == filters()
    assert sorted(bullets(sections["Lookup"])) == plugin_files("lookup")
    assert sorted(bullets(sections["New Roles"])) == ROLES


def test_the_section_check_can_fail():
    assert bullets("- numa.kube.kubelet_config - Merge\n- kubelet_facts - no prefix\n") == ["kubelet_config"]
    try:
        rst_sections("Title\n---\n")
    except AssertionError as error:
        assert "shorter than the title" in str(error)
    else:
        raise AssertionError("a short underline passed")
