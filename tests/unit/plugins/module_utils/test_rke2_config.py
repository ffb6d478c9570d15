# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.numa.kube.plugins.module_utils.kubelet.args import kubelet_arg_list
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import SysfsReader
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import plan
from ansible_collections.numa.kube.plugins.module_utils.kubelet.rke2 import (
    Rke2ConfigError,
    config_files,
    kubelet_arg_items,
    merge_config,
    option_line,
    option_values,
    yaml_scalar,
)
from ansible_collections.numa.kube.tests.unit.plugins import sysfs_tree

# PyYAML reads YAML 1.1, as RKE2's and k3s's gopkg.in/yaml.v2 does: 0600 is a number, yes is true.
TRICKY = ["0600", "0644", "384", "1e3", "0x1F", "1:20", "2001-12-14", ".nan", ".inf", "-1", "+1",
          "yes", "No", "ON", "off", "y", "N", "true", "False", "null", "~", "", " leading", "trailing ",
          "a: b", "a #b", "#a", "- a", "? a", "[a]", "{a: 1}", "a,b", "'q'", '"q"', "x:", "*a", "&a", "!a",
          "|", ">", "%a", "@a", "`a", "=", "<<", "a\\b", "ünïcode", "a b", "http://x/y?a=b&c=d"]
PLAIN = ["cpu-manager-policy=static", "reserved-memory=0:memory=1Gi;1:memory=2Gi",
         "eviction-hard=memory.available<100Mi,nodefs.available<10%", "/etc/rancher/rke2/kubelet.conf",
         "kube-reserved=cpu=500m,memory=1Gi", "feature-gates=CPUManagerPolicyAlphaOptions=true", "plain"]


@pytest.mark.parametrize("text", TRICKY + PLAIN)
def test_scalars_read_back_as_themselves_as_value_and_as_list_item(text):
    rendered = yaml_scalar(text)
    assert yaml.safe_load("key: %s\n" % rendered) == {"key": text}
    assert yaml.safe_load("kubelet-arg:\n  - %s\n" % rendered) == {"kubelet-arg": [text]}


@pytest.mark.parametrize("text", PLAIN)
def test_safe_strings_stay_unquoted(text):
    assert yaml_scalar(text) == text


@pytest.mark.parametrize("text", ["0600", "yes", "a: b", "a #b", "x:", ""])
def test_strings_yaml_would_misread_are_quoted(text):
    assert yaml_scalar(text).startswith('"')


def test_numbers_and_booleans_are_written_as_yaml_reads_them():
    assert yaml_scalar(True) == "true"
    assert yaml_scalar(False) == "false"
    assert yaml_scalar(10) == "10"
    assert yaml.safe_load("a: %s" % yaml_scalar(10)) == {"a": 10}


@pytest.mark.parametrize("value", [None, {"a": 1}, 1.5, ["x"]])
def test_other_scalars_are_refused_naming_the_value_and_the_forms_allowed(value):
    with pytest.raises(Rke2ConfigError) as caught:
        yaml_scalar(value, "option x")
    message = str(caught.value)
    assert "option x is %r" % (value,) in message
    assert "a string, a whole number or true/false" in message


@pytest.mark.parametrize("text", ["a\nb", "a\tb", "a\rb", "a\x7fb", "a\x00"])
def test_control_characters_are_refused(text):
    with pytest.raises(Rke2ConfigError, match="control character.*remove it"):
        yaml_scalar(text)


def test_option_lines_parse_to_the_option_and_its_value():
    cases = [("write-kubeconfig-mode", "0600"), ("node-ip", "192.0.2.10"), ("debug", True),
             ("etcd-snapshot-retention", 10), ("kube-apiserver-arg+", ["a=b", "c,d", "0600"]),
             ("node-label", ["example.com/pool=numa"]), ("tls-san", [])]
    for name, value in cases:
        line = option_line(name, value)
        assert "\n" not in line
        assert yaml.safe_load(line) == {name: value}


def test_option_line_quotes_an_octal_looking_mode():
    assert option_line("write-kubeconfig-mode", "0600") == 'write-kubeconfig-mode: "0600"'
    assert option_line("etcd-arg", ["quota-backend-bytes=4294967296"]) == 'etcd-arg: ["quota-backend-bytes=4294967296"]'


@pytest.mark.parametrize("name", ["Node-IP", "--node-ip", "node ip", "node_ip", "", "-x", "a++", "a: b", 5, None])
def test_option_names_are_checked(name):
    with pytest.raises(Rke2ConfigError) as caught:
        option_line(name, "x")
    message = str(caught.value)
    assert "option name %r" % (name,) in message
    assert "without its dashes" in message and "write it that way" in message


@pytest.mark.parametrize("name", ["kubelet-arg", "kubelet-arg+"])
def test_kubelet_arg_is_sent_to_rke2_kubelet_arg(name):
    with pytest.raises(Rke2ConfigError) as caught:
        option_line(name, ["cpu-manager-policy=static"])
    message = str(caught.value)
    assert "option %s does not go into rke2_server_options or rke2_agent_options" % name in message
    assert "numa.kube.rke2_kubelet_arg" in message


def test_numa_kube_labels_are_left_to_the_rollout():
    with pytest.raises(Rke2ConfigError, match="numa.kube/aligned=true.*first registers"):
        option_line("node-label", ["zone=a", "numa.kube/aligned=true"])
    with pytest.raises(Rke2ConfigError, match="numa.kube/aligned=true"):
        option_line("node-label+", "numa.kube/aligned=true")
    assert option_line("node-label", ["zone=a"]) == 'node-label: ["zone=a"]'


@pytest.mark.parametrize("value", [None, {"a": "b"}])
def test_values_without_an_option_form_are_refused(value):
    with pytest.raises(Rke2ConfigError, match="option node-ip has the value %r.*leave the option out" % (value,)):
        option_line("node-ip", value)


@pytest.mark.parametrize("item", [None, {"a": 1}, ["nested"]])
def test_list_items_must_be_scalars(item):
    with pytest.raises(Rke2ConfigError, match="option tls-san item 1 is"):
        option_line("tls-san", ["ok", item])


def test_kubelet_arg_items_are_the_kubelet_arg_flags_quoted_only_where_needed():
    settings = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                "kubeReserved": {"cpu": "1", "memory": "1Gi"},
                "evictionHard": {"memory.available": "100Mi"},
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "562Mi"}},
                                   {"numaNode": 1, "limits": {"memory": "562Mi"}}]}
    assert kubelet_arg_items(settings) == kubelet_arg_list(settings)
    odd = {"staticPodURL": "http://example.internal/pods?a=b&c=d", "providerID": "x #1"}
    items = kubelet_arg_items(odd)
    assert items[0].startswith('"') and items[1].startswith('"')
    rendered = "kubelet-arg:\n" + "".join("  - %s\n" % item for item in items)
    assert yaml.safe_load(rendered)["kubelet-arg"] == kubelet_arg_list(odd)


@pytest.mark.parametrize("settings, found", [
    ("cpuManagerPolicy=static", "expected a mapping of KubeletConfiguration fields, got 'cpuManagerPolicy=static'"),
    ({"cpuManagerPolcy": "static"}, "cpuManagerPolcy is not a KubeletConfiguration field"),
    ({"shutdownGracePeriod": "30s"}, "shutdownGracePeriod has no kubelet flag"),
    ({"authentication": {"x": {"y": 1}}}, "authentication has nested values"),
])
def test_kubelet_arg_items_refuse_what_has_no_flag_and_say_where_it_goes(settings, found):
    with pytest.raises(Rke2ConfigError) as caught:
        kubelet_arg_items(settings)
    message = str(caught.value)
    assert found in message
    assert "drop-in of RKE2's kubelet.conf.d" in message


def test_config_files_are_read_config_first_then_yaml_dropins_in_name_order():
    names = ["20-b.yaml", "10-a.YML", "05-notes.txt", "30-c.yml", "01-x.yaml.bak", "00-first.Yaml"]
    assert config_files("/etc/rancher/rke2/config.yaml", names) == [
        "/etc/rancher/rke2/config.yaml",
        "/etc/rancher/rke2/config.yaml.d/00-first.Yaml",
        "/etc/rancher/rke2/config.yaml.d/10-a.YML",
        "/etc/rancher/rke2/config.yaml.d/20-b.yaml",
        "/etc/rancher/rke2/config.yaml.d/30-c.yml",
    ]


def test_a_later_file_replaces_a_key_lists_included():
    merged = merge_config([
        {"token": "one", "node-label": ["a=1", "b=2"], "debug": True},
        {"node-label": ["c=3"]},
        {"token": "two"},
    ])
    assert merged == {"token": "two", "node-label": ["c=3"], "debug": True}
    assert list(merged) == ["token", "node-label", "debug"]


def test_a_plus_key_appends_to_what_came_before():
    merged = merge_config([
        {"kubelet-arg": ["cpu-manager-policy=static"], "node-taint": "a=b:NoSchedule", "tls-san": "x"},
        {"kubelet-arg+": ["max-pods=250"], "node-taint+": ["c=d:NoExecute"], "tls-san+": "y"},
        {"kubelet-arg+": "pod-max-pids=4096"},
    ])
    assert merged["kubelet-arg"] == ["cpu-manager-policy=static", "max-pods=250", "pod-max-pids=4096"]
    assert merged["node-taint"] == ["a=b:NoSchedule", "c=d:NoExecute"]
    assert merged["tls-san"] == ["x", "y"]
    assert "kubelet-arg+" not in merged


def test_a_plus_key_with_nothing_before_sets_and_a_later_plain_key_replaces_the_sum():
    merged = merge_config([{"kubelet-arg+": ["a=1"]}, {"kubelet-arg+": ["b=2"]}])
    assert merged == {"kubelet-arg": ["a=1", "b=2"]}
    merged = merge_config([{"kubelet-arg+": ["a=1"]}, {"kubelet-arg+": ["b=2"]}, {"kubelet-arg": ["c=3"]}])
    assert merged == {"kubelet-arg": ["c=3"]}


def test_appending_other_values_uses_their_text_and_skips_empty_ones():
    merged = merge_config([{"a": True, "b": 5, "c": None}, {"a+": False, "b+": 6, "c+": "x"}])
    assert merged == {"a": ["true", "false"], "b": ["5", "6"], "c": ["x"]}


def test_a_key_repeated_inside_one_file_follows_the_same_rules():
    merged = merge_config([[("kubelet-arg", ["a=1"]), ("kubelet-arg", ["b=2"]), ("kubelet-arg+", ["c=3"])]])
    assert merged == {"kubelet-arg": ["b=2", "c=3"]}


def test_empty_files_are_skipped_and_files_that_are_not_mappings_refused():
    assert merge_config([None, {"a": "b"}, None]) == {"a": "b"}
    with pytest.raises(Rke2ConfigError, match="configuration file 1 is list, not a mapping"):
        merge_config([{"a": "b"}, ["kubelet-arg=x"]])
    with pytest.raises(Rke2ConfigError, match="configuration file 0 is str"):
        merge_config(["kubelet-arg=cpu-manager-policy=static"])


def test_option_values_are_one_flag_per_item_as_text():
    merged = {"kubelet-arg": ["a=1", 2, True], "debug": True, "token": "x", "empty": None}
    assert option_values(merged, "kubelet-arg") == ["a=1", "2", "true"]
    assert option_values(merged, "debug") == ["true"]
    assert option_values(merged, "token") == ["x"]
    assert option_values(merged, "empty") == [""]
    assert option_values(merged, "missing") == []


def test_a_node_profiles_kubelet_fields_reach_rke2_and_k3s_kubelet_arg_as_kubelet_reads_them(tmp_path):
    """The lablabs RKE2 role's rke2_kubelet_arg (and k3s's kubelet-arg, the same YAML list) carries a
    profile's fields as the flags kubelet parses; YAML 1.1, as RKE2's parser reads it, gives the same
    strings back."""
    sys_root, proc_root = sysfs_tree.two_socket_interleaved().write(str(tmp_path))
    topology = SysfsReader(sys_root, proc_root).read(include_pci=False)
    profile = plan(topology, {"reserved_per_node": 2}, kubelet_version=(1, 36, 3))
    settings = dict(profile["kubelet"], topologyManagerPolicy="single-numa-node")
    items = kubelet_arg_items(settings)
    rendered = "kubelet-arg:\n" + "".join("  - %s\n" % item for item in items)
    flags = yaml.safe_load(rendered)["kubelet-arg"]
    assert flags == kubelet_arg_list(settings)
    assert "reserved-cpus=%s" % profile["reserved"] in flags and "cpu-manager-policy=static" in flags
    assert any(flag.startswith("cpu-manager-policy-options=") and "full-pcpus-only=true" in flag for flag in flags), flags
