# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection as users get it: the tarball ansible-galaxy builds, and the execution
environment definition ansible-builder turns into a build context."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def new_user_env(tmp_path, collections=None):
    """The environment of someone with ansible installed and nothing else: not the .venv link to this
    checkout (PYTHONPATH, ANSIBLE_COLLECTIONS_PATH) that the test tiers use."""
    env = dict(os.environ, ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1")
    env.pop("PYTHONPATH", None)
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    if collections:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return env


def run(tmp_path, *command, **options):
    done = subprocess.run([os.path.join(BIN, command[0])] + list(command[1:]), env=new_user_env(tmp_path),
                          cwd=options.get("cwd", ROOT), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    """The tarball ansible-galaxy builds from this checkout, built once for the tests that read it
    (each installs or opens it in a folder of its own and leaves it as it is)."""
    tmp_path = tmp_path_factory.mktemp("build")
    run(tmp_path, "ansible-galaxy", "collection", "build", "--output-path", str(tmp_path))
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    built = tmp_path / ("numa-kube-%s.tar.gz" % galaxy["version"])
    assert [name for name in os.listdir(str(tmp_path)) if name.endswith(".tar.gz")] == [built.name]
    return galaxy, built


def test_the_tarball_ships_what_runs_and_nothing_else(tarball):
    galaxy, tarball = tarball
    with tarfile.open(str(tarball)) as archive:
        names = set(archive.getnames())
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    for wanted in ("README.md", "LICENSE", "meta/runtime.yml", "meta/execution-environment.yml", "requirements.txt",
                   "bindep.txt", "playbooks/site.yml", "roles/kubelet/tasks/main.yml",
                   "roles/kubelet/meta/argument_specs.yml", "plugins/modules/kubelet_config.py",
                   "plugins/module_utils/kubelet/reservation.py", "roles/numa_exporter/files/bundle.py",
                   "agent/numa_agent/exporter.py"):
        assert wanted in names, wanted
    for name in names:
        top = name.split("/")[0]
        assert top not in ("molecule", "tests", "tools", ".venv", ".ci", ".cache", ".hypothesis", ".pytest_cache",
                           ".git"), name
        assert "__pycache__" not in name and not name.endswith((".pyc", ".tar.gz")), name
        assert name not in ("Makefile", "conftest.py", "requirements-dev.txt", "execution-environment.yml"), name
    assert manifest["collection_info"]["dependencies"] == galaxy["dependencies"]
    # every module the collection has is in the tarball, so in the README's table too
    modules = sorted(n[len("plugins/modules/"):-3] for n in names
                     if n.startswith("plugins/modules/") and n.endswith(".py") and not n.endswith("__init__.py"))
    with open(os.path.join(ROOT, "README.md")) as handle:
        readme = handle.read()
    assert [m for m in modules if "`numa.kube.%s`" % m not in readme] == [], "modules missing from the README table"


def test_the_readmes_fleet_commands_work_on_the_installed_collection(tmp_path, tarball):
    """As the README says: install the collection from the clone, then run numa.kube.site (here up to
    its syntax check, against an example inventory), with no other set-up than ansible itself."""
    _galaxy, tarball = tarball
    target = tmp_path / "collections"
    run(tmp_path, "ansible-galaxy", "collection", "install", "--no-deps", "-p", str(target), str(tarball))
    # kubernetes.core and community.general come with the ansible package (found on sys.path)
    env = new_user_env(tmp_path, target)
    for playbook in ("numa.kube.site", str(target / "ansible_collections" / "numa" / "kube" / "playbooks" / "site.yml")):
        done = subprocess.run([os.path.join(BIN, "ansible-playbook"), playbook, "--syntax-check", "-i",
                               os.path.join(ROOT, "inventories", "kubeadm")], env=env, cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_ansible_builder_makes_a_build_context_for_the_execution_environment(tmp_path):
    context = tmp_path / "context"
    run(tmp_path, "ansible-builder", "create", "--file", "execution-environment.yml", "--context", str(context),
        "--output-filename", "Containerfile")
    containerfile = (context / "Containerfile").read_text()
    # the base image by its short name (no registry in the repository), replaceable with --build-arg
    assert 'ARG EE_BASE_IMAGE="centos:stream9"' in containerfile.splitlines()
    assert "FROM $EE_BASE_IMAGE AS base" in containerfile.splitlines()
    assert "ansible-core==2.19.14" in containerfile
    with open(str(context / "_build" / "requirements.yml")) as handle:
        assert [c["name"] for c in yaml.safe_load(handle)["collections"]] == ["numa.kube"]
