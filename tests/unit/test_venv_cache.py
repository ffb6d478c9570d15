# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tools/venv.py: a fresh clone's .venv is a copy of the environment kept for the same requirements,
pointed at its own path and checked by pip; anything wrong with the cache means a build, never a
broken environment."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV_TOOL = os.path.join(ROOT, "tools", "venv.py")


@pytest.fixture
def requirements(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# nothing to install\n")
    return path


def make(venv, requirements, cache, cwd=None, **env):
    environment = dict(os.environ, NUMA_KUBE_CACHE=str(cache), **env)
    environment.pop("NUMA_KUBE_VENV_CACHE", None) if "NUMA_KUBE_VENV_CACHE" not in env else None
    return subprocess.run([sys.executable, VENV_TOOL, str(venv), str(requirements)], capture_output=True, text=True,
                          timeout=300, check=False, env=environment, cwd=cwd and str(cwd))


def kept(cache):
    folder = cache / "venvs"
    return sorted(name for name in os.listdir(str(folder)) if not name.startswith(".")) if folder.exists() else []


def pip_runs_from(venv):
    """Run the environment's pip script itself (its first line picks the interpreter)."""
    done = subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True, text=True, timeout=120,
                          check=False)
    return done.returncode == 0 and str(venv / "lib") in done.stdout


def test_a_fresh_clone_gets_a_copy_that_runs_under_its_own_path(tmp_path, requirements):
    cache = tmp_path / "cache"
    first = make(tmp_path / "one" / ".venv", requirements, cache)
    assert first.returncode == 0 and "kept in %s/venvs/" % cache in first.stderr, first.stderr
    [entry] = kept(cache)
    assert (cache / "venvs" / entry / "origin").read_text() == "%s\n" % (tmp_path / "one" / ".venv")

    two = tmp_path / "two" / ".venv"
    second = make(two, requirements, cache)
    assert second.returncode == 0 and "copied from %s/venvs/%s" % (cache, entry) in second.stderr, second.stderr
    assert pip_runs_from(two)
    assert str(tmp_path / "one") not in (two / "bin" / "activate").read_text()
    assert not (two / ".numa-kube-incomplete").exists()

    # an existing environment is brought up to date in place, not replaced by the copy
    (two / "mine").write_text("x")
    again = make(two, requirements, cache)
    assert again.returncode == 0 and "copied" not in again.stderr, again.stderr
    assert (two / "mine").exists()

    # other requirements are another environment
    requirements.write_text("# nothing to install, said otherwise\n")
    other = make(tmp_path / "three" / ".venv", requirements, cache)
    assert other.returncode == 0 and "copied" not in other.stderr and "kept in" in other.stderr, other.stderr
    assert len(kept(cache)) == 2


def test_a_copy_into_a_path_with_characters_special_to_shells_or_sed_runs(tmp_path, requirements):
    name = "a space & [1] #"
    cache = tmp_path / "cache"
    assert make(tmp_path / ("from [1] " + name) / ".venv", requirements, cache).returncode == 0
    venv = tmp_path / name / ".venv"
    done = make(venv, requirements, cache)
    assert done.returncode == 0 and "copied from" in done.stderr, done.stderr
    assert pip_runs_from(venv), (venv / "bin" / "pip").read_text()[:200]


def test_a_relative_path_is_the_same_environment_as_its_absolute_one(tmp_path, requirements):
    cache = tmp_path / "cache"
    (tmp_path / "one").mkdir()
    assert make(".venv", requirements, cache, cwd=tmp_path / "one").returncode == 0
    [entry] = kept(cache)
    assert (cache / "venvs" / entry / "origin").read_text() == "%s\n" % (tmp_path / "one" / ".venv")
    (tmp_path / "two").mkdir()
    done = make(".venv", requirements, cache, cwd=tmp_path / "two")
    assert done.returncode == 0 and "copied from" in done.stderr, done.stderr
    assert pip_runs_from(tmp_path / "two" / ".venv")


def test_a_kept_environment_that_does_not_work_is_thrown_away_and_built_again(tmp_path, requirements):
    cache = tmp_path / "cache"
    assert make(tmp_path / "one" / ".venv", requirements, cache).returncode == 0
    [entry] = kept(cache)
    os.remove(str(cache / "venvs" / entry / "venv" / "bin" / "python"))
    two = tmp_path / "two" / ".venv"
    done = make(two, requirements, cache)
    assert done.returncode == 0 and "did not work" in done.stderr and "kept in" in done.stderr, done.stderr
    assert pip_runs_from(two) and sorted(os.listdir(str(tmp_path / "two"))) == [".venv"]
    # the one built instead is what the next clone gets
    three = make(tmp_path / "three" / ".venv", requirements, cache)
    assert three.returncode == 0 and "copied from" in three.stderr, three.stderr


def test_a_copy_that_was_cut_short_is_made_again(tmp_path, requirements):
    cache = tmp_path / "cache"
    assert make(tmp_path / "one" / ".venv", requirements, cache).returncode == 0
    two = tmp_path / "two" / ".venv"
    assert make(two, requirements, cache).returncode == 0
    # as a copy killed half way leaves it: its marker, part of the files
    (two / ".numa-kube-incomplete").write_text("")
    (two / "bin" / "pip").unlink()
    done = make(two, requirements, cache)
    assert done.returncode == 0 and "copied from" in done.stderr, done.stderr
    assert pip_runs_from(two) and not (two / ".numa-kube-incomplete").exists()


def test_a_cache_that_cannot_be_written_still_makes_the_environment(tmp_path, requirements):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache would be")
    venv = tmp_path / "one" / ".venv"
    done = make(venv, requirements, blocker)
    assert done.returncode == 0 and "not usable" in done.stderr, done.stderr
    assert pip_runs_from(venv)


def test_without_the_cache_nothing_is_kept(tmp_path, requirements):
    cache = tmp_path / "cache"
    done = make(tmp_path / "one" / ".venv", requirements, cache, NUMA_KUBE_VENV_CACHE="0")
    assert done.returncode == 0 and kept(cache) == [], done.stderr


def test_the_most_recently_used_three_are_kept_and_nothing_outside_the_cache_is_touched(tmp_path, requirements):
    cache = tmp_path / "cache with space"
    neighbour = tmp_path / "cache"
    neighbour.mkdir()
    (neighbour / "keep-me").write_text("x")
    for number in range(4):
        requirements.write_text("# requirements %d\n" % number)
        assert make(tmp_path / str(number) / ".venv", requirements, cache).returncode == 0
    assert len(kept(cache)) == 3
    assert (neighbour / "keep-me").exists()


def test_a_folder_that_is_no_environment_is_left_alone(tmp_path, requirements):
    """A wrong argument (the checkout itself, say) names a folder with files and no pyvenv.cfg: the
    tool refuses, naming it, and removes nothing."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "README.md").write_text("mine")
    done = make(folder, requirements, tmp_path / "cache")
    assert done.returncode != 0 and "no pyvenv.cfg" in done.stderr and str(folder) in done.stderr, done.stderr
    assert sorted(os.listdir(str(folder))) == ["README.md"]


def test_an_environment_kept_from_a_long_path_runs_when_copied_to_a_path_with_a_space(tmp_path, requirements):
    """Past the kernel's 127 characters pip writes its scripts' first lines in a /bin/sh form, the
    path unquoted: the copy's lines are written again for the new path (quoted, for its space)."""
    cache = tmp_path / "cache"
    long_venv = tmp_path / ("x" * 120) / ".venv"
    assert make(long_venv, requirements, cache).returncode == 0
    assert (long_venv / "bin" / "pip").read_bytes().startswith(b"#!/bin/sh\n'''exec' ")
    venv = tmp_path / "a space" / ".venv"
    done = make(venv, requirements, cache)
    assert done.returncode == 0 and "copied from" in done.stderr, done.stderr
    assert pip_runs_from(venv), (venv / "bin" / "pip").read_text()[:300]


def test_a_build_that_failed_is_made_anew_and_not_taken_for_an_environment(tmp_path, requirements):
    venv = tmp_path / "one" / ".venv"
    requirements.write_text("numa-kube-no-such-project==1.0\n")
    failed = make(venv, requirements, tmp_path / "cache", PIP_NO_INDEX="1")
    assert failed.returncode != 0 and "made anew next time" in failed.stderr, failed.stderr
    assert (venv / ".numa-kube-incomplete").exists() and (venv / "bin" / "python").exists()
    requirements.write_text("# nothing to install\n")
    done = make(venv, requirements, tmp_path / "cache", PIP_NO_INDEX="1")
    assert done.returncode == 0 and "kept in" in done.stderr, done.stderr
    assert pip_runs_from(venv) and not (venv / ".numa-kube-incomplete").exists()


def test_an_environment_its_pip_cannot_update_is_made_anew(tmp_path, requirements):
    """As after the interpreter it was made with went away: bin/python no longer runs."""
    cache = tmp_path / "cache"
    venv = tmp_path / "one" / ".venv"
    assert make(venv, requirements, cache, NUMA_KUBE_VENV_CACHE="0").returncode == 0
    python = venv / "bin" / "python"
    python.unlink()
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    done = make(venv, requirements, cache, NUMA_KUBE_VENV_CACHE="0")
    assert done.returncode == 0 and "made anew" in done.stderr, done.stderr
    assert pip_runs_from(venv)
