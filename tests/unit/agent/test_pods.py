# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the exporter names containers: the API server's list, read again only for new ids."""

from __future__ import absolute_import, division, print_function

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent.kube import Client  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.pods import PodNames  # noqa: E402 pylint: disable=wrong-import-position

POD = {"metadata": {"namespace": "prod", "name": "db-0"},
       "status": {"initContainerStatuses": [{"name": "init", "containerID": "containerd://" + "a" * 64}],
                  "containerStatuses": [{"name": "db", "containerID": "containerd://" + "b" * 64},
                                        {"name": "waiting"}]}}


class Listed(PodNames):
    def __init__(self, pods, token_file):
        super(Listed, self).__init__("w1", interval=0, client=Client("https://api.example", token_file=token_file))
        self.pods, self.lists = pods, 0

    def _list(self):
        self.lists += 1
        return {"items": self.pods}


def test_names_come_from_the_pod_list_and_unknown_ids_do_not_list_again(tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    names = Listed([POD], str(token))
    sandbox = "c" * 64
    found = names.lookup(["a" * 64, "b" * 64, sandbox])
    assert found == {"a" * 64: ("prod", "db-0", "init"), "b" * 64: ("prod", "db-0", "db")}
    assert names.lists == 1
    names.lookup(["a" * 64, "b" * 64, sandbox])
    assert names.lists == 1, "a sandbox the list does not name must not cause a list on every scrape"
    names.lookup(["d" * 64])
    assert names.lists == 2, "a new container is looked up"


def test_without_a_service_account_nothing_is_asked(tmp_path):
    names = Listed([POD], str(tmp_path / "missing"))
    assert not names.usable()
    assert names.lookup(["a" * 64]) == {} and names.lists == 0
