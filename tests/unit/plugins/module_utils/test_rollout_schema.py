# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A marker that is valid JSON but damaged is refused with what is wrong and what to do, by every
state of the module, never with a KeyError or TypeError."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import copy
import json
import os
import re

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node import rollout
from ansible_collections.numa.kube.plugins.module_utils.node import durable
from ansible_collections.numa.kube.plugins.modules import rollout_state
from ansible_collections.numa.kube.tests.unit.plugins.modules.module_runner import run

OWNER = {"run_id": "ctl:1:2", "controller": "ctl", "user": "u", "pid": 1, "pid_start": "2"}


def good_marker(tmp_path):
    """A marker this release writes: a regular file, a link and a file that did not exist."""
    node = durable.Node(str(tmp_path))
    os.makedirs(node.path("/etc/k"))
    with open(node.path("/etc/k/real.conf"), "wb") as handle:
        handle.write(b"x\n")
    os.symlink("/elsewhere/none", node.path("/etc/k/link"))
    result = rollout.run_state(node, "begin", folder="/rollout", files=["/etc/k/real.conf", "/etc/k/link",
                                                                        "/etc/k/absent"], owner=OWNER)
    return node, result["marker"]


def entry(marker, kind):
    for item in marker["files"]:
        if kind == "absent" and not item["existed"] or item.get("type") == kind:
            return item
    raise AssertionError(kind)


def set_key(where, key, value):
    def change(marker):
        target = entry(marker, where) if where in ("file", "link", "absent") else marker.get(where, marker) \
            if where else marker
        target[key] = value
    return change


def drop_key(where, key):
    def change(marker):
        target = entry(marker, where) if where in ("file", "link", "absent") else marker
        del target[key]
    return change


def replace(value):
    return lambda marker: value


DAMAGE = [
    ("files is not a list", set_key(None, "files", "/etc/k/real.conf"), "files is \"/etc/k/real.conf\", not a list"),
    ("files is an object", set_key(None, "files", {"path": "/x"}), "not a list"),
    ("files missing", drop_key(None, "files"), "it has no files"),
    ("an entry is a string", set_key(None, "files", ["/etc/x"]), "files[0] is \"/etc/x\", not an object"),
    ("an entry without path", drop_key("file", "path"), "has no absolute path"),
    ("a relative path", set_key("file", "path", "etc/x"), "has no absolute path (path is \"etc/x\")"),
    ("a path that is a number", set_key("file", "path", 7), "has no absolute path"),
    ("existed missing", drop_key("file", "existed"), ".existed is null, not true or false"),
    ("existed as text", set_key("file", "existed", "yes"), ".existed is \"yes\""),
    ("saved missing for an existing file", drop_key("file", "saved"), ".saved is null"),
    ("saved leads out of the folder", set_key("file", "saved", "../../etc/shadow"), ".saved is \"../../etc/shadow\""),
    ("mode as text", set_key("file", "mode", "0644"), ".mode is \"0644\", not a file mode"),
    ("mode as a bool", set_key("file", "mode", True), ".mode is true"),
    ("mode out of range", set_key("file", "mode", 70000), ".mode is 70000"),
    ("uid missing", drop_key("file", "uid"), ".uid is null"),
    ("gid negative", set_key("file", "gid", -1), ".gid is -1"),
    ("sha256 missing", drop_key("file", "sha256"), ".sha256 is null"),
    ("sha256 too short", set_key("file", "sha256", "abc"), ".sha256 is \"abc\""),
    ("links zero", set_key("file", "links", 0), ".links is 0"),
    ("type unknown", set_key("file", "type", "directory"), ".type is \"directory\""),
    ("type missing in version 2", drop_key("file", "type"), ".type is null"),
    ("link target missing", drop_key("link", "target"), ".target is null"),
    ("link target a number", set_key("link", "target", 5), ".target is 5"),
    ("xattrs a list", set_key("file", "xattrs", ["user.x"]), ".xattrs is [\"user.x\"], not an object"),
    ("xattrs value not base64", set_key("file", "xattrs", {"user.x": "!!!"}), "xattrs[\"user.x\"] is not base64"),
    ("xattrs value a number", set_key("file", "xattrs", {"user.x": 1}), "not base64 text"),
    ("a path recorded twice", lambda m: m["files"].append(dict(entry(m, "absent"))), "is recorded twice"),
    ("steps not a list", set_key(None, "steps", "drained"), "steps is \"drained\", not a list of texts"),
    ("steps holding a number", set_key(None, "steps", ["drained", 3]), "not a list of texts"),
    ("services as text", set_key(None, "services", "kubelet"), "services is \"kubelet\""),
    ("services missing", drop_key(None, "services"), "it has no services"),
    ("unschedulable as text", set_key(None, "unschedulable", "no"), "unschedulable is \"no\""),
    ("started missing", drop_key(None, "started"), "it has no started"),
    ("started as text", set_key(None, "started", "yesterday"), "started is \"yesterday\""),
    ("reason null", set_key(None, "reason", None), "reason is null, not a string"),
    ("owner a list", set_key(None, "owner", ["ctl:1:2"]), "owner is [\"ctl:1:2\"], not an object"),
    ("owner without run_id", lambda m: m["owner"].pop("run_id") and None, "owner has no run_id"),
    ("owner heartbeat as text", set_key("owner", "heartbeat", "now"), "owner.heartbeat is \"now\""),
    ("owner pid as text", set_key("owner", "pid", "12"), "owner.pid is \"12\""),
    ("owner lease as text", set_key("owner", "lease", "1h"), "owner.lease is \"1h\""),
    ("previous owners an object", set_key(None, "previous_owners", {}), "previous_owners is {}, not a list"),
    # times that are no time: int() or gmtime() of them raised OverflowError or ValueError
    ("heartbeat infinite", set_key("owner", "heartbeat", float("inf")), "owner.heartbeat is Infinity, not a time"),
    ("heartbeat NaN", set_key("owner", "heartbeat", float("nan")), "owner.heartbeat is NaN, not a time"),
    ("heartbeat beyond year 9999", set_key("owner", "heartbeat", 1e20), "owner.heartbeat is 1e+20, not a time"),
    ("heartbeat before 1970", set_key("owner", "heartbeat", -1), "owner.heartbeat is -1, not a time"),
    ("started infinite", set_key(None, "started", float("inf")), "started is Infinity, not a time in epoch seconds"),
    ("started beyond year 9999", set_key(None, "started", 1e20), "started is 1e+20, not a time in epoch seconds"),
    ("owner lease out of range", set_key("owner", "lease", 10 ** 9),
     "owner.lease is 1000000000, not a number of seconds from 60 to 86400"),
    ("owner pid_ns as text", set_key("owner", "pid_ns", "4026531836"), "owner.pid_ns is \"4026531836\""),
    ("owner boot_id a number", set_key("owner", "boot_id", 7), "owner.boot_id is 7, not a string"),
    # extended attribute names the kernel refuses (EOPNOTSUPP in the middle of a restore)
    ("xattr name without namespace", set_key("file", "xattrs", {"bogus": "eA=="}),
     "xattrs has the name \"bogus\", not an extended attribute name"),
    ("xattr name of an unknown namespace", set_key("file", "xattrs", {"foo.bar": "eA=="}), "\"foo.bar\", not an"),
    ("xattr name with nothing after the namespace", set_key("link", "xattrs", {"user.": "eA=="}), "\"user.\", not an"),
    ("xattr name too long", set_key("file", "xattrs", {"user." + "n" * 251: "eA=="}), "at most 255 bytes"),
    ("xattr value too big", set_key("file", "xattrs", {"user.x": base64.b64encode(b"x" * 65537).decode()}),
     "holds 65537 bytes, more than the 65536"),
    ("uid beyond uid_t", set_key("file", "uid", 2 ** 32), ".uid is 4294967296, not a user or group id"),
    ("a previous owner as text", set_key(None, "previous_owners", ["a"]), "previous_owners[0] is \"a\""),
]


def damaged(tmp_path, change):
    node, marker = good_marker(tmp_path)
    marker = copy.deepcopy(marker)
    result = change(marker)
    marker = marker if result is None else result
    path = node.path(os.path.join("/rollout", rollout.MARKER_NAME))
    with open(path, "w") as handle:
        json.dump(marker, handle)
    return node


def test_enough_kinds_of_damage():
    assert len(DAMAGE) >= 27


@pytest.mark.parametrize("name,change,words", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damaged_markers_are_refused_with_what_to_do(tmp_path, name, change, words):
    node = damaged(tmp_path, change)
    with pytest.raises(rollout.RolloutError) as caught:
        rollout.load_marker(node, "/rollout")
    message = str(caught.value)
    assert "the rollout marker /rollout/marker.json is damaged (" in message
    assert words in message, message
    assert "copies of the recorded files are in /rollout" in message and "then remove /rollout" in message


@pytest.mark.parametrize("name,change,words", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_every_state_fails_cleanly_on_a_damaged_marker(tmp_path, name, change, words):
    node = damaged(tmp_path, change)
    folder = node.path("/rollout")
    marker = os.path.join(folder, rollout.MARKER_NAME)
    with open(marker, "rb") as handle:
        before = handle.read()
    for state in ("query", "begin", "step", "restore", "finish"):
        failed, result = run(rollout_state, {"folder": folder, "state": state, "step": "x", "owner": OWNER})
        assert failed and "is damaged" in result["msg"] and words in result["msg"], (state, result)
    with open(marker, "rb") as handle:
        assert handle.read() == before, "nothing was written"


@pytest.mark.parametrize("content,words", [
    (b"{not json", "is damaged (Expecting property name"),
    (b"[1, 2]", "is damaged (it holds [1, 2], not an object)"),
    (b"\"text\"", "not an object"),
    (b"{\"version\": 99}", "has version 99; this numa.kube reads versions 1, 2"),
    (b"{\"version\": \"1\"}", "has version \"1\""),
    (b"{\"version\": true}", "has version true"),
    (b"\xff\xfe", "is damaged"),
])
def test_markers_that_are_not_records(tmp_path, content, words):
    node = durable.Node(str(tmp_path))
    os.makedirs(node.path("/rollout"))
    with open(node.path("/rollout/marker.json"), "wb") as handle:
        handle.write(content)
    with pytest.raises(rollout.RolloutError) as caught:
        rollout.load_marker(node, "/rollout")
    assert words in str(caught.value)


def test_a_marker_that_is_not_a_regular_file(tmp_path):
    node = durable.Node(str(tmp_path))
    os.makedirs(node.path("/rollout/marker.json"))
    with pytest.raises(rollout.RolloutError, match="is not a regular file"):
        rollout.load_marker(node, "/rollout")


def test_the_good_marker_loads(tmp_path):
    node, marker = good_marker(tmp_path)
    assert rollout.load_marker(node, "/rollout") == marker
    assert [e.get("type") for e in marker["files"]] == ["file", "link", None]


@pytest.mark.parametrize("key,literal", [("heartbeat", "1e400"), ("heartbeat", "-1e400"), ("heartbeat", "NaN"),
                                         ("heartbeat", "Infinity"), ("started", "1e400"), ("started", "Infinity")])
def test_numbers_json_reads_as_infinite_are_refused_by_every_state(tmp_path, key, literal):
    """Python's json reads 1e400 as inf and accepts NaN and Infinity: the record refuses them cleanly."""
    node, marker = good_marker(tmp_path)
    text = json.dumps(marker)
    text, count = re.subn(r'"%s": [0-9.]+' % key, '"%s": %s' % (key, literal), text)
    assert count == 1
    folder = node.path("/rollout")
    with open(os.path.join(folder, rollout.MARKER_NAME), "w") as handle:
        handle.write(text)
    for state in ("query", "begin", "step", "restore", "finish"):
        failed, result = run(rollout_state, {"folder": folder, "state": state, "step": "x", "owner": OWNER})
        assert failed and "is damaged" in result["msg"] and "%s is " % key in result["msg"], (state, result)


def test_extended_attribute_names_of_every_namespace_are_good(tmp_path):
    node, marker = good_marker(tmp_path)
    value = base64.b64encode(b"v").decode()
    entry(marker, "file")["xattrs"] = dict((name, value) for name in (
        "user.x", "trusted.overlay.opaque", "security.selinux", "system.posix_acl_access", "user." + "n" * 250))
    entry(marker, "file")["uid"] = 4294967294
    marker["owner"].update(boot_id="0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9", pid_ns=4026531836, lease=86400)
    with open(node.path(os.path.join("/rollout", rollout.MARKER_NAME)), "w") as handle:
        json.dump(marker, handle)
    assert rollout.load_marker(node, "/rollout") == marker
