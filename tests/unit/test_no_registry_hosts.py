# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No package or image registry is named in the repository: users behind their own mirrors build
unchanged. Base images are build arguments or short names, the test bed names its own images."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# written in pieces, so that this file does not name them either
HOSTS = re.compile("|".join([
    r"docker\.io", r"quay\.io", r"registry\.k8s\.io", r"ghcr\.io", r"gcr\.io", r"debian\.org", r"pypi\.org",
    "python" + "hosted", r"proxy\.golang", "npm" + "js", r"maven\.org"]))


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return handle.read()


def tracked_files():
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name]


def registry_mentions(name, text):
    return ["%s:%d: %s" % (name, number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if HOSTS.search(line)]


def test_no_tracked_file_names_a_registry_host():
    found = []
    for name in tracked_files():
        # Go module paths are module names, not registries
        if os.path.basename(name) in ("go.mod", "go.sum") or not os.path.isfile(os.path.join(ROOT, name)):
            continue
        with open(os.path.join(ROOT, name), "rb") as handle:
            data = handle.read()
        if b"\0" in data:
            continue
        found.extend(registry_mentions(name, data.decode("utf-8", "replace")))
    assert found == []


def test_the_host_check_can_fail():
    image = "docker" + ".io/library/debian"
    assert registry_mentions("x", "FROM %s\nFROM debian\n" % image) == ["x:1: FROM %s" % image]


def test_the_agent_image_takes_its_base_image_as_a_required_build_argument():
    lines = read("agent", "Containerfile").splitlines()
    assert "ARG DEBIAN_IMAGE" in lines, "DEBIAN_IMAGE is declared without a default"
    froms = [line.split()[1] for line in lines if line.startswith("FROM ")]
    # ${VAR:?} stops BuildKit and imagebuilder (Podman 4.5+) when the argument is unset or empty
    assert froms == ["${DEBIAN_IMAGE:?}", "${DEBIAN_IMAGE:?}"]


def test_the_execution_environment_names_its_base_image_without_a_registry():
    name = yaml.safe_load(read("execution-environment.yml"))["images"]["base_image"]["name"]
    first = name.split("/")[0]
    # a short name: its first part is no host (no dot, no port, not localhost), so Podman resolves it
    assert len(name.split("/")) == 1 or not ("." in first or ":" in first or first == "localhost"), name


def test_the_test_bed_pause_image_is_the_guests_sandbox_image():
    build = read("molecule", "resources", "kube", "build-assets.sh")
    prepare = read("molecule", "resources", "playbooks", "templates", "prepare-node.sh.j2")
    built = re.search(r'oci_image\.py" "\$work/pause" "([^"]+)"', build).group(1)
    assert built == "numa.kube/pause:$pause_tag"
    # the guests set containerd 1.7's sandbox_image to that name, with the tag the assets disk carries
    assert 'pause="numa.kube/pause:$(cat "$assets/pause-tag")"' in prepare
    assert 'sandbox_image = "\'"$pause"\'"' in prepare
    assert 'echo "$pause_tag" > "$guest/pause-tag"' in build
