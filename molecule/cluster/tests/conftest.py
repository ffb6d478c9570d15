# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each test's start and time in the verify's log, as the build steps print theirs (tools/steps.sh):
a run the time guard stops still shows where its minutes went."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    name = "%s::%s" % (os.path.basename(str(item.fspath)), item.name.split("[")[0])
    started = time.time()
    print("\nstep: %s started %s" % (name, time.strftime("%H:%M:%S")))
    yield
    print("\nstep: %s took %d s" % (name, time.time() - started))
