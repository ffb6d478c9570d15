# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floor plan, kept by code: module_utils in subpackages by layer (a few shared files left at its
top), no file of plugins/ or agent/ longer than a reader takes in, and no import loop between the
collection's own modules, counting imports made inside functions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")
PREFIX = "ansible_collections.numa.kube."
MAX_FLAT = 12
MAX_LINES = 700


def sources():
    """{dotted module name: path} of every Python file in plugins/ and the node agent."""
    found = {}
    for top, dotted in ((os.path.join(ROOT, "plugins"), PREFIX + "plugins"), (os.path.join(ROOT, "agent", "numa_agent"),
                                                                              "numa_agent")):
        for folder, _dirs, files in os.walk(top):
            for name in files:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, name), top)[:-3].replace(os.sep, ".")
                    module = dotted if rel == "__init__" else dotted + "." + rel
                    found[module[:-len(".__init__")] if module.endswith(".__init__") else module] = \
                        os.path.join(folder, name)
    return found


def imports(path, known):
    """The modules of ``known`` that the file at ``path`` imports, at any depth of its code."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + ["%s.%s" % (node.module, alias.name) for alias in node.names]
        for name in names:
            if name in known:
                found.add(name)
    return found


def cycle(graph):
    """One import loop of ``graph`` as a list of modules (its first repeated), or None."""
    state = {}

    def visit(module, path):
        state[module] = "open"
        for other in sorted(graph[module]):
            if state.get(other) == "open":
                return path[path.index(other):] + [other]
            if other not in state:
                found = visit(other, path + [other])
                if found:
                    return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_module_utils_keeps_only_a_few_shared_files_at_its_top():
    flat = sorted(name for name in os.listdir(MODULE_UTILS) if name.endswith(".py") and name != "__init__.py")
    assert len(flat) <= MAX_FLAT, flat
    packages = sorted(name for name in os.listdir(MODULE_UTILS) if os.path.isdir(os.path.join(MODULE_UTILS, name))
                      and not name.startswith("__"))
    for package in packages:
        init = os.path.join(MODULE_UTILS, package, "__init__.py")
        assert os.path.isfile(init), "module_utils/%s has no __init__.py: Ansible would not ship it" % package


def test_no_file_of_the_collection_or_the_agent_is_too_long_to_read():
    long_files = {}
    for path in sources().values():
        with open(path) as handle:
            count = sum(1 for _line in handle)
        if count > MAX_LINES:
            long_files[os.path.relpath(path, ROOT)] = count
    assert long_files == {}, "over %d lines: split them by job" % MAX_LINES


def test_the_collections_modules_import_each_other_without_a_loop():
    known = sources()
    graph = dict((module, imports(path, known) - {module}) for module, path in known.items())
    # a package's __init__ is imported with each of its modules: loops through one are loops too
    assert cycle(graph) is None, " -> ".join(cycle(graph))


def test_the_loop_finder_finds_one_made_inside_a_function():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set(), "c": {"b"}}) is None


# which subpackages of module_utils each may import: the layers of docs/architecture.md, lowest
# first ("" is the shared files at the top: errors, quantity)
ALLOWED = {
    "": set(),
    "k8s": {""},
    "node": {""},
    "numa": {"", "k8s"},
    "kubelet": {"", "k8s", "node", "numa"},
    "stacks": {"", "k8s", "node", "numa", "kubelet"},
    "profile": {"", "k8s", "node", "numa", "kubelet"},
}


def layer(module):
    """The module_utils subpackage of a dotted module name ("" for a file at its top), None outside."""
    head = PREFIX + "plugins.module_utils"
    if not module.startswith(head + "."):
        return None
    parts = module[len(head) + 1:].split(".")
    return parts[0] if len(parts) > 1 else ""


def test_each_layer_imports_only_the_layers_below_it():
    known = sources()
    wrong = []
    for module, path in sorted(known.items()):
        own = layer(module)
        if own is None:
            continue
        assert own in ALLOWED, "module_utils/%s is a subpackage the floor plan does not name" % own
        for other in sorted(imports(path, known)):
            theirs = layer(other)
            if theirs is not None and theirs != own and theirs not in ALLOWED[own]:
                wrong.append("%s imports %s" % (module, other))
    assert wrong == []
