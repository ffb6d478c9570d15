# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout_owner lookup names the ansible-playbook main process, also from a forked worker."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleError

from ansible_collections.numa.kube.plugins.lookup.rollout_owner import LookupModule
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner

# a stand-in for ansible-playbook: its main process forks a worker, as ansible does for each task,
# and the worker asks who the run is
FAKE_PLAYBOOK = """
import json, os, sys
from ansible_collections.numa.kube.plugins.module_utils.node import rollout_owner
worker = os.fork()
if worker == 0:
    grandchild = os.fork()  # a process forked below the worker (a lookup's helper) finds the same run
    if grandchild == 0:
        print(json.dumps({"helper": rollout_owner.my_identity()}))
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(grandchild, 0)
    print(json.dumps({"worker": rollout_owner.my_identity()}))
    sys.stdout.flush()
    os._exit(0)
os.waitpid(worker, 0)
print(json.dumps({"main": os.getpid(), "identity": rollout_owner.my_identity()}))
"""


def test_the_lookup_returns_one_identity():
    found = LookupModule().run([])
    assert len(found) == 1 and set(found[0]) == set(rollout_owner.OWNER_KEYS)
    assert found[0] == rollout_owner.my_identity()


def test_the_lookup_names_the_boot_and_pid_namespace():
    found = LookupModule().run([])[0]
    with open("/proc/sys/kernel/random/boot_id") as handle:
        assert found["boot_id"] == handle.read().strip()
    assert found["pid_ns"] == os.stat("/proc/self/ns/pid").st_ino
    assert found["run_id"].endswith(":%s:%d" % (found["boot_id"].replace("-", "")[:8], found["pid_ns"]))


def test_the_lookup_takes_no_terms():
    with pytest.raises(AnsibleError, match="takes no terms"):
        LookupModule().run(["x"])


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_forked_worker_names_the_main_process(tmp_path):
    script = tmp_path / "ansible-playbook"
    script.write_text(FAKE_PLAYBOOK)
    done = subprocess.run([sys.executable, str(script), "site.yml"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)), check=True)
    answers = {}
    for line in done.stdout.splitlines():
        answers.update(json.loads(line))
    main = answers["main"]
    assert answers["worker"]["pid"] == main and answers["helper"]["pid"] == main
    assert answers["worker"] == answers["helper"] == answers["identity"], "one value for the whole run"
    prefix = "%s:%d:%s" % (rollout_owner.this_controller(), main, answers["worker"]["pid_start"])
    assert answers["worker"]["run_id"].startswith(prefix)
    assert answers["worker"]["pid_start"].isdigit()
