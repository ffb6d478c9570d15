# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each test's start and time in the verify's log, as the build steps print theirs (tools/steps.sh):
a run the time guard stops still shows where its minutes went. And the ``last_in_file`` mark: a test
that leaves the fleet changed (to spare the scenario the minutes of putting it back) runs after every
other test of its file, whatever order pytest's fixtures would otherwise choose (``--ff`` and ``--nf``
reorder later still and are not for this verify); a verify run again first puts such a change back.

Two lanes at the end. Each guest runs on one host core (TCG, one thread a guest), so a test that
works on one guest alone leaves the other core to the other guest. The tests marked ``beside`` work
on ``numa-uneven`` alone; those marked ``with_beside`` on ``numa-kubelet`` alone. When a verify holds
both, the ``with_beside`` tests run last, and the ``beside`` ones in a second pytest started with the
first of them (the ``beside_lane`` fixture); the last test of the anchoring file waits for it and
fails when it failed. Its lines go to this log as they come, marked ``beside |``. A verify of only
one kind (a file run alone) runs them in order, in this process.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

# set in the second pytest's environment: it runs the tests it is given, in their order
LANE_ENV = "NUMA_KUBE_VERIFY_LANE"
OUTPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "output", "vm", "cluster")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources"))


def pytest_configure(config):
    config.addinivalue_line("markers", "last_in_file: runs after the other tests of its file (it leaves the fleet "
                                       "changed, for no later test of the file to find)")
    config.addinivalue_line("markers", "beside(first=False): works on numa-uneven alone; runs in a second pytest "
                                       "beside the with_beside tests (first=True: before the others there)")
    config.addinivalue_line("markers", "with_beside(first=False, last=False): works on numa-kubelet alone; runs last, "
                                       "with the beside tests in a second pytest (first=True: before the others of "
                                       "its lane; last=True: after them, waiting for the second pytest)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """pytest does not keep a file's order: it groups the tests that take testinfra's parametrized
    ``host`` by guest, and a test that takes none and follows the file's first such test runs after
    them all (the fixtures plugin reorders for the parametrized fixture). A test marked last_in_file is moved here, after pytest's own reordering
    (trylast), to just behind the last unmarked test of its file."""
    def path(item):
        return str(item.fspath)

    # a file whose every test is marked keeps pytest's order
    unmarked = set(path(item) for item in items if not item.get_closest_marker("last_in_file"))
    held = [item for item in items if item.get_closest_marker("last_in_file") and path(item) in unmarked]
    if held:
        rest = [item for item in items if item not in held]
        last = dict((path(item), index) for index, item in enumerate(rest))
        ordered = []
        for index, item in enumerate(rest):
            ordered.append(item)
            if last[path(item)] == index:
                ordered.extend(h for h in held if path(h) == path(item))
        items[:] = ordered
    split_lanes(config, items)


def split_lanes(config, items):
    """The ``with_beside`` tests last, the ``beside`` ones taken out for the second pytest (their node
    ids kept for it), when the verify holds both kinds and is not that second pytest itself."""
    if os.environ.get(LANE_ENV):
        return
    beside = [item for item in items if item.get_closest_marker("beside")]
    anchored = [item for item in items if item.get_closest_marker("with_beside") and item not in beside]
    # only with the test that waits for the second pytest: without it, its result would go unread
    if not beside or not any(item.get_closest_marker("with_beside").kwargs.get("last") for item in anchored):
        return
    beside.sort(key=lambda item: 0 if item.get_closest_marker("beside").kwargs.get("first") else 1)
    # with_beside(first=True) before the others of the lane, the test that waits for the second
    # pytest (with_beside(last=True)) after them; pytest's order otherwise (the sort is stable)
    anchored.sort(key=lambda item: (0 if item.get_closest_marker("with_beside").kwargs.get("first")
                                    else 2 if item.get_closest_marker("with_beside").kwargs.get("last") else 1))
    items[:] = [item for item in items if item not in beside and item not in anchored] + anchored
    config.hook.pytest_deselected(items=beside)
    config.numa_kube_beside = [item.nodeid for item in beside]


class BesideLane(object):
    """The second pytest: the ``beside`` tests by node id, with this run's testinfra options, its
    output copied to this log as it comes."""

    def __init__(self, config, nodeids):
        option = config.option
        self.command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-s", "--durations", "10"]
        for name, flag in (("connection", "--connection"), ("ansible_inventory", "--ansible-inventory")):
            if getattr(option, name, None):
                self.command += [flag, getattr(option, name)]
        self.command += nodeids
        self.count = len(nodeids)
        self.cwd = str(config.rootpath)
        self.proc, self.lines, self.reader = None, [], None

    def start(self):
        # unbuffered: its lines come as they are printed, and none is lost when the run's time guard
        # ends it
        self.proc = subprocess.Popen(self.command, cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, errors="replace",
                                     env=dict(os.environ, PYTHONUNBUFFERED="1", **{LANE_ENV: "beside"}))
        self.reader = threading.Thread(target=self._copy, daemon=True)
        self.reader.start()
        print("\nbeside | a second pytest started %s with %d tests: %s"
              % (time.strftime("%H:%M:%S"), self.count, " ".join(self.command[-self.count:])))

    def _copy(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            shown = "step: beside " + line[len("step: "):] if line.startswith("step: ") else "beside | " + line
            try:
                # a line of its own, even after a test's name this pytest printed without its newline
                sys.__stdout__.write("\n" + shown + "\n")
                sys.__stdout__.flush()
            except (OSError, ValueError):  # this log is gone: keep reading, or the child would block
                pass

    def wait(self, timeout):
        """The second pytest's exit code (None when it did not end within ``timeout`` seconds)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(timeout=30)
        return code

    def stop(self):
        """End the second pytest if it still runs (this one ended early), with the processes it started
        (ansible-playbook and its workers), which a signal to it alone would leave running."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in [self.proc.pid] + descendants(self.proc.pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def descendants(pid):
    """The processes started by ``pid``, its children's children too (from /proc)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as handle:
                    parents[int(name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


@pytest.fixture(scope="session")
def beside_guest_held():
    """numa-uneven's qemu, once held stopped for the rest of the verify (see with_beside_lane)."""
    held = []
    yield held
    for paused in held:
        paused.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def with_beside_lane(request, beside_guest_held):
    """A ``with_beside`` test starts the second pytest (the first such test does) and, once that has
    ended, holds numa-uneven's qemu stopped until the verify ends: the guest
    the lanes no longer use leaves its host core to the controller and the API server (the tests of
    test_kubelet.py took 10-20 % longer beside an idle numa-uneven than with it stopped)."""
    if request.node.get_closest_marker("with_beside") is None:
        yield
        return
    lane = request.getfixturevalue("beside_lane")
    # only when the lanes split (the with_beside tests are then the verify's last) and the other has ended
    if not beside_guest_held and lane is not None and lane.proc.poll() is not None:
        from testlib import PausedGuest  # pylint: disable=import-outside-toplevel
        try:
            paused = PausedGuest(os.path.join(OUTPUT, "numa-uneven"))
            paused.__enter__()
        except (OSError, ValueError) as exc:  # no qemu to hold (it ended, or never ran): nothing to do
            print("\nnuma-uneven not held stopped: %s" % exc)
        else:
            beside_guest_held.append(paused)
    yield


@pytest.fixture(scope="session")
def beside_lane(request):
    """The second pytest, started when the first ``with_beside`` test asks for it; None when this
    verify runs no lanes (see the module's docstring)."""
    nodeids = getattr(request.config, "numa_kube_beside", None)
    if not nodeids:
        yield None
        return
    lane = BesideLane(request.config, nodeids)
    lane.start()
    try:
        yield lane
    finally:
        lane.stop()


@pytest.fixture(scope="session", autouse=True)
def fleet_as_the_converge_left_it():
    """What a last_in_file test left changed, put back before the first test of a verify run again
    on the same fleet (right after the converge: nothing to do, one read of the API), and numa-uneven
    let go should an earlier verify have ended without its teardown while holding it stopped. Not in
    the beside lane, which starts while the tests of the other lane work on the fleet."""
    if os.environ.get(LANE_ENV):
        return
    from testlib import PausedGuest  # pylint: disable=import-outside-toplevel
    try:
        PausedGuest(os.path.join(OUTPUT, "numa-uneven")).resume()
    except (OSError, ValueError):  # no guest running
        pass
    # imported here: a test module of this folder, the one that owns the change
    from test_monitoring import exporter_on_the_converges_image  # pylint: disable=import-outside-toplevel
    exporter_on_the_converges_image()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    name = "%s::%s" % (os.path.basename(str(item.fspath)), item.name.split("[")[0])
    started = time.time()
    print("\nstep: %s started %s" % (name, time.strftime("%H:%M:%S")))
    yield
    print("\nstep: %s took %d s" % (name, time.time() - started))
