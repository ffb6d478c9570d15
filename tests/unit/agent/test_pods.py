# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the exporter names containers: the API server's list, read again only for new ids."""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import threading
import time as real_time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.kube import ApiError, Client  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent import pods  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.pods import PodNames  # noqa: E402 pylint: disable=wrong-import-position

POD = {"metadata": {"namespace": "prod", "name": "db-0"},
       "status": {"initContainerStatuses": [{"name": "init", "containerID": "containerd://" + "a" * 64}],
                  "containerStatuses": [{"name": "db", "containerID": "containerd://" + "b" * 64},
                                        {"name": "waiting"}]}}


class Listed(PodNames):
    def __init__(self, pods, token_file, interval=0):
        super(Listed, self).__init__("w1", interval=interval, client=Client("https://api.example", token_file=token_file))
        self.pods, self.lists = pods, 0

    def _list(self):
        self.lists += 1
        return {"items": json.loads(json.dumps(self.pods))}


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    moved = Clock()
    monkeypatch.setattr(pods, "time", moved)
    return moved


def test_names_come_from_the_pod_list_and_unknown_ids_list_again_only_while_new(tmp_path, clock):
    token = tmp_path / "token"
    token.write_text("t")
    names = Listed([POD], str(token), interval=15)
    sandbox = "c" * 64
    found = names.lookup(["a" * 64, "b" * 64, sandbox])
    assert found == {"a" * 64: ("prod", "db-0", "init"), "b" * 64: ("prod", "db-0", "db")}
    assert names.lists == 1
    # scrapes every 15 s for ten minutes: the sandbox no status names is asked about again as its
    # age doubles (15, 30, 60, 120 s), then never
    seen = []
    for _scrape in range(40):
        clock.now += 15
        names.lookup(["a" * 64, "b" * 64, sandbox])
        seen.append(names.lists)
    assert names.lists == 5, seen
    assert seen[-30:] == [5] * 30, "a sandbox the list never names must not cause a list on every scrape"
    names.lookup(["d" * 64])
    assert names.lists == 6, "a new container is looked up"


def test_a_failed_list_keeps_the_names_and_is_tried_again_after_the_interval(tmp_path, clock):
    token = tmp_path / "token"
    token.write_text("t")
    names = Listed([POD], str(token), interval=15)
    names.lookup(["a" * 64])
    failing = [True]

    def refuse():
        names.lists += 1
        if failing[0]:
            raise ApiError(503, "the API server is away")
        return {"items": [POD]}

    names._list = refuse
    known = {"a" * 64: ("prod", "db-0", "init"), "b" * 64: ("prod", "db-0", "db")}
    clock.now += 15
    assert names.lookup(["a" * 64, "d" * 64]) == known, "the names of the last good list stay"
    assert names.lists == 2
    assert names.lookup(["a" * 64, "d" * 64]) == known and names.lists == 2, "at most one list every interval"
    failing[0] = False
    clock.now += 15
    assert names.lookup(["a" * 64, "d" * 64]) == known and names.lists == 3


def test_a_container_whose_id_reaches_its_pods_status_after_the_first_list_is_named(tmp_path, clock):
    token = tmp_path / "token"
    token.write_text("t")
    starting = {"metadata": {"namespace": "prod", "name": "db-0"},
                "status": {"containerStatuses": [{"name": "db", "state": {"waiting": {}}}]}}
    names = Listed([starting], str(token), interval=15)
    assert names.lookup(["b" * 64]) == {}
    starting["status"]["containerStatuses"][0]["containerID"] = "containerd://" + "b" * 64
    clock.now += 5
    assert names.lookup(["b" * 64]) == {} and names.lists == 1, "at most one list every interval"
    clock.now += 10
    assert names.lookup(["b" * 64]) == {"b" * 64: ("prod", "db-0", "db")}
    assert names.lists == 2


def test_without_a_service_account_nothing_is_asked(tmp_path):
    names = Listed([POD], str(tmp_path / "missing"))
    assert not names.usable()
    assert names.lookup(["a" * 64]) == {} and names.lists == 0


@pytest.mark.wall_clock  # times itself: run in the foreground (tools/run-tiers timed)
def test_a_slow_list_is_waited_for_briefly_and_its_names_serve_the_next_scrape(tmp_path, clock):
    token = tmp_path / "token"
    token.write_text("t")
    gate, entered = threading.Event(), threading.Event()

    class Slow(Listed):
        def _list(self):
            entered.set()
            gate.wait(30)
            return Listed._list(self)

    names = Slow([POD], str(token), interval=15)
    names.wait = 0.2
    started = real_time.monotonic()
    assert names.lookup(["b" * 64]) == {}, "the list is late: the scrape goes on without the name"
    assert real_time.monotonic() - started < 1 and entered.is_set()
    clock.now += 30
    assert names.lookup(["b" * 64]) == {} and names.lists == 0, "one list at a time"
    gate.set()
    names.listing.join(10)
    assert names.lookup(["b" * 64])["b" * 64] == ("prod", "db-0", "db") and names.lists == 1


def test_a_list_that_fails_in_any_way_is_tried_again_after_the_interval(tmp_path, clock):
    token = tmp_path / "token"
    token.write_text("t")
    names = Listed([POD], str(token), interval=15)
    real = names._list
    names._list = lambda: "not a list"
    assert names.lookup(["b" * 64]) == {} and names.listing is None
    names._list = real
    clock.now += 15
    assert names.lookup(["b" * 64])["b" * 64] == ("prod", "db-0", "db")


def test_a_list_whose_thread_cannot_start_is_tried_again_after_the_interval(
        tmp_path, clock, monkeypatch, no_threads_named):
    token = tmp_path / "token"
    token.write_text("t")
    names = Listed([POD], str(token), interval=15)
    real_start = no_threads_named("pod-list")
    assert names.lookup(["b" * 64]) == {} and names.listing is None
    monkeypatch.setattr(threading.Thread, "start", real_start)
    clock.now += 15
    assert names.lookup(["b" * 64])["b" * 64] == ("prod", "db-0", "db")
