# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tools/venv: a fresh clone's .venv is a copy of the environment kept for the same requirements,
pointed at its own path; an existing .venv is updated in place; other requirements build anew."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV_TOOL = os.path.join(ROOT, "tools", "venv")


def make(venv, requirements, cache):
    return subprocess.run(["bash", VENV_TOOL, str(venv), sys.executable, str(requirements)], capture_output=True,
                          text=True, timeout=300, check=False, env=dict(os.environ, NUMA_KUBE_CACHE_DIR=str(cache)))


def kept_environments(cache):
    return sorted(name for name in os.listdir(str(cache / "venvs")) if not name.startswith("."))


def first_line(path):
    with open(str(path)) as handle:
        return handle.readline().strip()


def test_a_fresh_clone_gets_a_copy_that_runs_under_its_own_path(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing to install\n")
    cache = tmp_path / "cache"
    first = make(tmp_path / "one" / ".venv", requirements, cache)
    assert first.returncode == 0, first.stderr
    assert "kept in %s/venvs/" % cache in first.stderr
    [kept] = kept_environments(cache)
    assert (cache / "venvs" / kept / "origin").read_text() == "%s\n" % (tmp_path / "one" / ".venv")

    second = make(tmp_path / "two" / ".venv", requirements, cache)
    assert second.returncode == 0, second.stderr
    assert "copied from %s/venvs/%s" % (cache, kept) in second.stderr
    pip = tmp_path / "two" / ".venv" / "bin" / "pip"
    assert first_line(pip).startswith("#!%s" % (tmp_path / "two" / ".venv" / "bin" / "python")), first_line(pip)
    assert str(tmp_path / "one") not in (tmp_path / "two" / ".venv" / "bin" / "activate").read_text()
    ran = subprocess.run([str(pip), "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 0 and str(tmp_path / "two" / ".venv") in ran.stdout, ran

    # an existing environment is brought up to date in place, not replaced by the copy
    (tmp_path / "two" / ".venv" / "mine").write_text("x")
    again = make(tmp_path / "two" / ".venv", requirements, cache)
    assert again.returncode == 0 and "copied" not in again.stderr, again.stderr
    assert (tmp_path / "two" / ".venv" / "mine").exists()

    # other requirements are another environment
    requirements.write_text("# nothing to install, said otherwise\n")
    other = make(tmp_path / "three" / ".venv", requirements, cache)
    assert other.returncode == 0 and "copied" not in other.stderr and "kept in" in other.stderr, other.stderr
    assert len(kept_environments(cache)) == 2

    # a kept environment that no longer runs is built anew, and nothing of the failed copy is left
    requirements.write_text("# nothing to install\n")
    os.remove(str(cache / "venvs" / kept / "venv" / "bin" / "python"))
    four = make(tmp_path / "four" / ".venv", requirements, cache)
    assert four.returncode == 0 and "did not work; building" in four.stderr, four.stderr
    assert sorted(os.listdir(str(tmp_path / "four"))) == [".venv"]
    assert subprocess.run([str(tmp_path / "four" / ".venv" / "bin" / "python"), "-c", "pass"], timeout=60).returncode == 0
