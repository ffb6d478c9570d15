# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures the node agent's tests share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import threading

import pytest


@pytest.fixture
def no_threads_named(monkeypatch):
    """``no_threads_named(name)``: from now on, starting a thread called ``name`` fails as it does
    when the process is out of threads (RuntimeError); other threads start. Returns the real
    ``Thread.start``, to put back with ``monkeypatch.setattr``."""
    real_start = threading.Thread.start

    def refuse(name):
        def start(thread):
            if thread.name == name:
                raise RuntimeError("can't start new thread")
            return real_start(thread)

        monkeypatch.setattr(threading.Thread, "start", start)
        return real_start

    return refuse
