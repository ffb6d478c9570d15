# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What numa.kube records about the NRI settings it wrote, and how it puts containerd back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    TEMPLATE_MARK,
    check_nri_record,
    merge_nri_record,
    nri_disabled,
    plan_nri,
    plan_nri_withdraw,
    plan_template,
)

V17 = (1, 7, 24)
PATH = "/etc/containerd/config.toml"
DISABLED = 'version = 2\n# keep this comment\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'
NO_TABLE = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n'


def enable(text, settings=None):
    new_text, _effective = plan_nri(text, V17, True, settings)
    return new_text, merge_nri_record(None, "containerd", PATH, text, new_text)


def test_a_disabled_nri_is_recorded_and_put_back_byte_for_byte():
    after, record = enable(DISABLED)
    assert record == {"distribution": "containerd", "path": PATH, "created_file": False, "created_table": False,
                      "keys": {"disable": {"before": "true", "after": "false"}}}
    restored, notes = plan_nri_withdraw(after, record)
    assert restored == DISABLED and notes == []


def test_a_missing_table_is_removed_again_and_the_rest_kept():
    after, record = enable(NO_TABLE)
    assert record["created_table"] and record["keys"] == {"disable": {"before": None, "after": "false"}}
    restored, _notes = plan_nri_withdraw(after, record)
    assert restored == NO_TABLE
    assert nri_disabled(restored, V17) is True, "containerd 1.7 without the table: NRI off again"


def test_a_file_numa_kube_created_is_removed():
    after, record = enable(None)
    assert record["created_file"] and after.startswith("version = 2")
    assert plan_nri_withdraw(after, record) == (None, [])


def test_a_created_file_the_user_added_to_since_is_kept():
    after, record = enable(None)
    edited = after + '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n'
    restored, _notes = plan_nri_withdraw(edited, record)
    assert restored is not None and "sandbox_image" in restored and "nri" not in restored


def test_a_setting_the_user_changed_since_is_left_alone_with_a_note():
    after, record = enable(DISABLED, {"plugin_request_timeout": "5s"})
    edited = after.replace('plugin_request_timeout = "5s"', 'plugin_request_timeout = "9s"')
    restored, notes = plan_nri_withdraw(edited, record)
    assert 'plugin_request_timeout = "9s"' in restored and "disable = true" in restored
    assert notes == ['plugin_request_timeout in %s is "9s", not the "5s" numa.kube set: left as it is '
                     '(changed since)' % PATH]


def test_a_user_setting_already_wanted_is_not_recorded():
    text = DISABLED.replace("disable = true", "disable = true\n  plugin_path = \"/opt/nri/plugins\"")
    _after, record = enable(text, {"plugin_path": "/opt/nri/plugins"})
    assert list(record["keys"]) == ["disable"]


def test_a_later_change_keeps_the_first_value_and_a_return_to_it_is_forgotten():
    after, record = enable(DISABLED)
    turned_off, _effective = plan_nri(after, V17, False)
    assert merge_nri_record(record, "containerd", PATH, after, turned_off) is None, \
        "numa.kube put disable back to the user's value: nothing left to undo"


def test_a_second_run_that_changes_nothing_keeps_the_record():
    after, record = enable(NO_TABLE)
    assert merge_nri_record(record, "containerd", PATH, after, after) == record


RENDERED = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  stream_server_port = "10010"\n'


def test_the_rke2_template_numa_kube_created_is_removed():
    name, template, _effective = plan_template("rke2", (1, 30, 4), V17, RENDERED, {}, True)
    record = merge_nri_record(None, "rke2", "/var/lib/rancher/rke2/agent/etc/containerd/" + name, None, template)
    assert record["created_file"] and record["created_table"]
    assert template.startswith(TEMPLATE_MARK)
    assert plan_nri_withdraw(template, record) == (None, [])


def test_a_users_template_keeps_everything_but_numa_kubes_table():
    users = '{{ template "base" . }}\n\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/x"\n'
    name, template, _effective = plan_template("k3s", (1, 30, 4), V17, RENDERED, {"config.toml.tmpl": users}, True)
    record = merge_nri_record(None, "k3s", "/t/" + name, users, template)
    assert not record["created_file"] and record["created_table"]
    restored, _notes = plan_nri_withdraw(template, record)
    assert restored == users


def test_a_file_that_is_gone_needs_nothing():
    _after, record = enable(DISABLED)
    restored, notes = plan_nri_withdraw(None, record)
    assert restored is None and "is gone" in notes[0]


@pytest.mark.parametrize("record,words", [
    ("x", "not an object"),
    ({"distribution": "cri-o", "path": PATH, "created_file": False, "created_table": False, "keys": {}},
     "distribution is 'cri-o'"),
    ({"distribution": "containerd", "path": "config.toml", "created_file": False, "created_table": False, "keys": {}},
     "not the absolute path"),
    ({"distribution": "containerd", "path": PATH, "created_file": "no", "created_table": False, "keys": {}},
     "created_file is 'no'"),
    ({"distribution": "containerd", "path": PATH, "created_file": False, "created_table": False,
      "keys": {"runtime": {"before": None, "after": "x"}}}, "not an NRI setting"),
    ({"distribution": "containerd", "path": PATH, "created_file": False, "created_table": False,
      "keys": {"disable": {"before": None, "after": "false\n[x]"}}}, "keys.disable"),
])
def test_a_damaged_record_is_refused_with_what_to_do(record, words):
    problems = check_nri_record(record, "/var/lib/numa-kube/applied/containerd-nri.json")
    assert problems and words in " ".join(problems), problems
    assert problems[0].startswith("/var/lib/numa-kube/applied/containerd-nri.json is damaged")
    assert "remove it and set NRI by hand" in problems[-1]
