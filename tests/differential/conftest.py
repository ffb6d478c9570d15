# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The oracle: kubelet's own code (tests/differential/oracle), built from the pinned module."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Oracle(object):
    """Ask kubelet's code many questions in one process run."""

    def __init__(self, path):
        self.path = path

    def ask(self, requests):
        lines = "".join(json.dumps(dict(request, id=index)) + "\n" for index, request in enumerate(requests))
        done = subprocess.run([self.path], input=lines, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert [a.get("id", -1) for a in answers] == list(range(len(requests))), done.stderr[-3000:]
        return answers


@pytest.fixture(scope="session")
def oracle():
    path = os.environ.get("NUMA_KUBE_ORACLE")
    if not path:
        built = subprocess.run(["bash", os.path.join(ROOT, "tests", "differential", "build-oracle.sh")],
                               capture_output=True, text=True, timeout=3000, check=False)
        assert built.returncode == 0, built.stderr[-3000:]
        path = built.stdout.strip().splitlines()[-1]
    return Oracle(path)
