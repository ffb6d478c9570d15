# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each test's start and time in the verify's log, as the build steps print theirs (tools/steps.sh):
a run the time guard stops still shows where its minutes went. And the ``last_in_file`` mark: a test
that leaves the fleet changed (to spare the scenario the minutes of putting it back) runs after every
other test of its file, whatever order pytest's fixtures would otherwise choose (``--ff`` and ``--nf``
reorder later still and are not for this verify); a verify run again first puts such a change back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "last_in_file: runs after the other tests of its file (it leaves the fleet "
                                       "changed, for no later test of the file to find)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """pytest does not keep a file's order: it groups the tests that take testinfra's parametrized
    ``host`` by guest, and a test that takes none and follows the file's first such test runs after
    them all (the fixtures plugin reorders for the parametrized fixture). A test marked last_in_file is moved here, after pytest's own reordering
    (trylast), to just behind the last unmarked test of its file."""
    def path(item):
        return str(item.fspath)

    # a file whose every test is marked keeps pytest's order
    unmarked = set(path(item) for item in items if not item.get_closest_marker("last_in_file"))
    held = [item for item in items if item.get_closest_marker("last_in_file") and path(item) in unmarked]
    if not held:
        return
    rest = [item for item in items if item not in held]
    last = dict((path(item), index) for index, item in enumerate(rest))
    ordered = []
    for index, item in enumerate(rest):
        ordered.append(item)
        if last[path(item)] == index:
            ordered.extend(h for h in held if path(h) == path(item))
    items[:] = ordered


@pytest.fixture(scope="session", autouse=True)
def fleet_as_the_converge_left_it():
    """What a last_in_file test left changed, put back before the first test of a verify run again
    on the same fleet (right after the converge: nothing to do, one read of the API)."""
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
