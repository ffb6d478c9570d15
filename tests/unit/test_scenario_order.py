# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster scenario's ``last_in_file`` mark (molecule/cluster/tests/conftest.py), on a real pytest
run: pytest reorders a file whose tests take a parametrized, module-scoped ``host`` (as testinfra's
does) and runs the tests that take none after them, so a file's order alone cannot keep a test
that leaves the fleet changed last. The hook must."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLUSTER_CONFTEST = os.path.join(ROOT, "molecule", "cluster", "tests", "conftest.py")

# the scenario's hooks only: its conftest's session fixture works on the live fleet
PLUGIN = textwrap.dedent("""\
    import importlib.util
    spec = importlib.util.spec_from_file_location("cluster_conftest", %r)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pytest_configure = module.pytest_configure
    pytest_collection_modifyitems = module.pytest_collection_modifyitems
    pytest_runtest_protocol = module.pytest_runtest_protocol
    beside_lane = module.beside_lane
    """ % CLUSTER_CONFTEST)

HOST = textwrap.dedent("""\
    import pytest

    @pytest.fixture(scope="module", params=["one", "two"])
    def host(request):
        return request.param

    """)


def pytest_env():
    env = dict((key, value) for key, value in os.environ.items() if key not in ("PYTEST_ADDOPTS", "NUMA_KUBE_VERIFY_LANE"))
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def collected(folder, with_hook):
    if with_hook:
        (folder / "conftest.py").write_text(PLUGIN)
    elif (folder / "conftest.py").exists():
        (folder / "conftest.py").unlink()
    # pytest's own order alone: no plugin loaded (a shuffling one would move it), no options from outside,
    # and no bytecode written beside the scenario's conftest
    env = dict((key, value) for key, value in os.environ.items() if key != "PYTEST_ADDOPTS")
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", str(folder)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=str(folder), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_a_marked_test_runs_after_every_other_test_of_its_file_and_nothing_else_moves(tmp_path):
    # as in the scenario: the marked test takes the parametrized host, and so runs once per guest
    (tmp_path / "test_fleet.py").write_text(HOST + textwrap.dedent("""\
        def test_a(host): pass
        @pytest.mark.last_in_file
        def test_leaves_it_changed(host): pass
        def test_c(host): pass
        def test_d(): pass
        """))
    (tmp_path / "test_other.py").write_text(HOST + textwrap.dedent("""\
        def test_e(): pass
        def test_f(host): pass
        """))
    (tmp_path / "test_only_marked.py").write_text(textwrap.dedent("""\
        import pytest
        @pytest.mark.last_in_file
        def test_g(): pass
        @pytest.mark.last_in_file
        def test_h(): pass
        """))
    plain = collected(tmp_path, with_hook=False)
    marked = ["test_fleet.py::test_leaves_it_changed[one]", "test_fleet.py::test_leaves_it_changed[two]"]
    # what the mark is for: pytest's own order groups by guest, so the marked test runs before
    # test_c on the second guest and before test_d
    assert plain.index(marked[0]) < plain.index("test_fleet.py::test_c[two]"), plain
    assert plain.index(marked[1]) < plain.index("test_fleet.py::test_d"), plain

    ordered = collected(tmp_path, with_hook=True)
    expected = [name for name in plain if name not in marked]
    last = max(index for index, name in enumerate(expected) if name.startswith("test_fleet.py"))
    expected[last + 1:last + 1] = marked
    assert ordered == expected, ordered
    # the marked test ends its file on each guest, and a file whose every test is marked keeps its order
    assert [name for name in ordered if name.startswith("test_fleet.py")][-2:] == marked, ordered
    assert [name for name in ordered if name.startswith("test_only_marked.py")] == [
        "test_only_marked.py::test_g", "test_only_marked.py::test_h"]


# --- the two lanes ---------------------------------------------------------------------------------

LANES = {
    # the lane of numa-kubelet: its first test waits (up to a minute) for a file only the beside lane
    # writes, so it passes only when the two lanes run at once
    "test_kubelet.py": textwrap.dedent("""\
        import os, time
        import pytest
        pytestmark = pytest.mark.with_beside
        @pytest.mark.usefixtures("beside_lane")
        def test_waits_for_the_other_lane():
            deadline = time.time() + 60
            while not os.path.exists("beside-ran") and time.time() < deadline:
                time.sleep(0.1)
            assert os.path.exists("beside-ran")
        @pytest.mark.with_beside(last=True)
        def test_join(beside_lane):
            assert beside_lane is not None
            code = beside_lane.wait(timeout=120)
            assert code == 0, "exited %s" % code
        def test_after_in_the_file():
            pass
        """),
    "test_withdraw.py": textwrap.dedent("""\
        import os
        import pytest
        pytestmark = pytest.mark.beside
        def test_writes():
            open("beside-ran", "w").close()
        def test_second():
            assert BESIDE_PASSES
        """),
    "test_fleet.py": textwrap.dedent("""\
        def test_first():
            pass
        """),
    "test_trial.py": textwrap.dedent("""\
        import pytest
        def test_kept():
            pass
        @pytest.mark.with_beside(first=True)
        def test_gate():
            pass
        """),
}


def lanes_run(folder, beside_passes=True, only=None):
    (folder / "conftest.py").write_text(PLUGIN)
    for name, text in LANES.items():
        (folder / name).write_text(text.replace("BESIDE_PASSES", str(beside_passes)))
    args = [str(folder / name) for name in only] if only else [str(folder)]
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-s", "-rA",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning"] + args,
                          capture_output=True, text=True, timeout=300, check=False, cwd=str(folder), env=pytest_env())


@pytest.mark.wall_clock  # two pytest processes racing a deadline: in the timed tier
def test_the_beside_tests_run_in_a_second_pytest_at_the_same_time_and_the_join_waits_for_it(tmp_path):
    done = lanes_run(tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    # this pytest ran the others first, then its lane, the join last; the beside tests in the second one
    order = [line.split(" ")[1] for line in out.splitlines() if line.startswith("PASSED test_")]
    assert order == ["test_fleet.py::test_first", "test_trial.py::test_kept", "test_trial.py::test_gate",
                     "test_kubelet.py::test_waits_for_the_other_lane", "test_kubelet.py::test_after_in_the_file",
                     "test_kubelet.py::test_join"], order
    assert "6 passed, 2 deselected" in out, out
    assert "beside | test_withdraw.py::test_writes PASSED" in out, out
    assert "step: beside test_withdraw.py::test_second took" in out, "its steps in this log, marked"


@pytest.mark.wall_clock  # two pytest processes racing a deadline: in the timed tier
def test_a_failing_beside_test_fails_the_join(tmp_path):
    done = lanes_run(tmp_path, beside_passes=False)
    assert done.returncode != 0
    assert "FAILED test_kubelet.py::test_join" in done.stdout and "exited 1" in done.stdout, done.stdout


@pytest.mark.wall_clock  # two pytest processes racing a deadline: in the timed tier
def test_a_file_of_one_lane_alone_runs_in_order_in_one_pytest(tmp_path):
    done = lanes_run(tmp_path, only=["test_withdraw.py", "test_fleet.py"])
    assert done.returncode == 0 and "3 passed" in done.stdout and "beside |" not in done.stdout, done.stdout
