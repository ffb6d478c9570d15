# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import tomllib

import pytest

from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import (
    TEMPLATE_MARK,
    TEMPLATE_V2,
    TEMPLATE_V3,
    ContainerdConfigError,
    base_template_supported,
    check_toml,
    config_version,
    parse_containerd_version,
    parse_distribution_version,
    plan_nri,
    plan_template,
    toml_value,
)

V17 = (1, 7, 24)
V2 = (2, 1, 4)

# The shape of `containerd config default` on 1.7, trimmed, with a comment of the operator's.
CONFIG_17 = """version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "mirror.example/pause:3.10"
    # our registry mirror lives in certs.d
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true

  [plugins."io.containerd.nri.v1.nri"]
    disable = true
    disable_connections = false
    plugin_config_path = "/etc/nri/conf.d"
    plugin_path = "/opt/nri/plugins"
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "2s"
    socket_path = "/var/run/nri/nri.sock"

  [plugins."io.containerd.runtime.v1.linux"]
    shim = "containerd-shim"
"""


def test_enable_on_17_changes_one_line_and_keeps_the_rest():
    new, effective = plan_nri(CONFIG_17, V17, enabled=True)
    assert new == CONFIG_17.replace("    disable = true\n", "    disable = false\n")
    assert effective["disable"] is False and effective["socket_path"] == "/var/run/nri/nri.sock"
    assert check_toml(new, True)
    again, dummy = plan_nri(new, V17, enabled=True)
    assert again == new


def test_enable_on_17_without_the_table_appends_it():
    text = 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.10" # pinned\n'
    new, dummy = plan_nri(text, V17)
    assert new.startswith(text)
    document = tomllib.loads(new)
    assert document["plugins"]["io.containerd.nri.v1.nri"] == {"disable": False}
    assert "# pinned" in new


def test_missing_file_on_17_gets_version_2_and_the_table():
    new, dummy = plan_nri(None, V17)
    assert tomllib.loads(new) == {"version": 2, "plugins": {"io.containerd.nri.v1.nri": {"disable": False}}}


def test_containerd_2_is_on_by_default():
    text = "version = 3\n\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_selinux = false\n"
    new, effective = plan_nri(text, V2, enabled=True)
    assert new == text and effective["disable"] is False
    assert plan_nri(None, V2)[0] == ""


def test_containerd_2_disabled_table_with_literal_quotes_is_switched_on():
    text = "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = true  # off for now\n  socket_path = '/run/nri.sock'\n"
    new, effective = plan_nri(text, V2, enabled=True)
    assert "  disable = false\n" in new and "socket_path = '/run/nri.sock'" in new
    assert effective["socket_path"] == "/run/nri.sock"


def test_disable_on_2_writes_the_table():
    new, effective = plan_nri("version = 3\n", V2, enabled=False)
    assert tomllib.loads(new)["plugins"]["io.containerd.nri.v1.nri"] == {"disable": True}
    assert effective["disable"] is True


def test_settings_are_set_and_inserted_in_the_table():
    new, effective = plan_nri(CONFIG_17, V17, settings={"socket_path": "/run/nri/nri.sock",
                                                        "plugin_request_timeout": "2s"})
    table = tomllib.loads(new)["plugins"]["io.containerd.nri.v1.nri"]
    assert table["socket_path"] == "/run/nri/nri.sock" and table["disable"] is False
    assert effective["plugin_request_timeout"] == "2s"
    lines = new.splitlines()
    assert lines[lines.index('  [plugins."io.containerd.runtime.v1.linux"]') - 1] == ""


def test_new_key_goes_after_the_last_key_with_its_indentation():
    text = 'version = 2\n[plugins."io.containerd.nri.v1.nri"]\n    disable = true\n\n[other]\nx = 1\n'
    new, dummy = plan_nri(text, V17, settings={"plugin_path": "/opt/nri"})
    assert new == ('version = 2\n[plugins."io.containerd.nri.v1.nri"]\n    disable = false\n'
                   '    plugin_path = "/opt/nri"\n\n[other]\nx = 1\n')


@pytest.mark.parametrize("text,version,message", [
    ("", (1, 6, 20), "needs containerd 1.7 or newer"),
    ("[plugins.cri]\n", V17, "config version 1"),
    ("version = 1\n", V17, "not supported"),
    ("version = 3\n", V17, "reads config version 2"),
])
def test_refusals(text, version, message):
    with pytest.raises(ContainerdConfigError, match=message):
        plan_nri(text, version)


@pytest.mark.parametrize("settings,message", [
    ({"socket": "/x"}, "is not one of"),
    ({"disable_connections": "yes"}, "true or false"),
    ({"socket_path": 5}, "must be a string"),
])
def test_bad_settings(settings, message):
    with pytest.raises(ContainerdConfigError, match=message):
        plan_nri(CONFIG_17, V17, settings=settings)


@pytest.mark.parametrize("text,version", [
    ("containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+b1", (1, 7, 24)),
    ("containerd containerd.io v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376", (2, 1, 4)),
    ("1.6.20", (1, 6, 20)),
])
def test_parse_containerd_version(text, version):
    assert parse_containerd_version(text) == version


def test_unparseable_version():
    with pytest.raises(ContainerdConfigError, match="cannot find a version"):
        parse_containerd_version("containerd")


def test_config_version_only_reads_the_top():
    assert config_version("version = 2\n[x]\nversion = 5\n") == 2
    assert config_version("[x]\nversion = 5\n") is None
    assert config_version(None) is None


def test_check_toml_catches_broken_output():
    with pytest.raises(ContainerdConfigError, match="not valid TOML"):
        check_toml("[a\n", True)
    with pytest.raises(ContainerdConfigError, match="still has NRI disable = true"):
        check_toml('[plugins."io.containerd.nri.v1.nri"]\ndisable = true\n', True)


def test_toml_value():
    assert toml_value(True) == "true" and toml_value(3) == "3" and toml_value('a"b') == '"a\\"b"'
    with pytest.raises(ContainerdConfigError):
        toml_value([1])


def test_nri_disabled_reads_dumps_and_defaults():
    from ansible_collections.numa.kube.plugins.module_utils.node.containerd_nri import nri_disabled

    assert nri_disabled(CONFIG_17) is True
    assert nri_disabled(plan_nri(CONFIG_17, V17)[0]) is False
    assert nri_disabled("version = 3\n", V2) is False
    assert nri_disabled("version = 2\n", V17) is True
    assert nri_disabled("version = 2\n") is None


# --- RKE2 / k3s templates ------------------------------------------------------------------------

# what RKE2 v1.28 renders with containerd 1.7 and no template of the user's (trimmed)
RENDERED_RKE2 = """# File generated by rke2. DO NOT EDIT. Use config.toml.tmpl instead.
version = 2

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/rancher/rke2/agent/containerd"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
"""
NONE = {TEMPLATE_V2: None, TEMPLATE_V3: None}


def test_template_includes_the_distributions_own_configuration_then_nri():
    name, text, effective = plan_template("rke2", (1, 28, 1), V17, RENDERED_RKE2, NONE)
    assert name == TEMPLATE_V2
    assert text.startswith(TEMPLATE_MARK + "\n{{ template \"base\" . }}\n")
    assert effective["disable"] is False
    # rendered by the distribution: its own configuration, then the table: one valid document
    document = tomllib.loads(text.replace('{{ template "base" . }}', RENDERED_RKE2))
    assert document["plugins"]["io.containerd.nri.v1.nri"] == {"disable": False}
    assert document["plugins"]["io.containerd.grpc.v1.cri"]["stream_server_port"] == "10010"


def test_template_for_containerd_2_is_the_v3_one_and_only_when_nri_is_off():
    rendered_v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_selinux = false\n"
    # containerd 2.x runs NRI by default: nothing to write
    assert plan_template("k3s", (1, 32, 2), V2, rendered_v3, NONE)[1] is None
    name, text, _effective = plan_template("k3s", (1, 32, 2), V2, rendered_v3, NONE,
                                           settings={"plugin_request_timeout": "5s"})
    assert name == TEMPLATE_V3
    assert 'plugin_request_timeout = "5s"' in text


def test_template_not_rewritten_when_nri_already_runs_as_wanted():
    rendered = RENDERED_RKE2 + '\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
    own = TEMPLATE_MARK + '\n{{ template "base" . }}\n\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
    assert plan_template("rke2", (1, 28, 1), V17, rendered, {TEMPLATE_V2: own, TEMPLATE_V3: None})[1] is None


def test_users_template_with_base_gets_its_nri_table_edited():
    mine = ('{{ template "base" . }}\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.custom]\n'
            '  runtime_type = "io.containerd.runc.v2"\n\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n')
    rendered = RENDERED_RKE2 + '\n[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n'
    _name, text, _effective = plan_template("rke2", (1, 28, 1), V17, rendered, {TEMPLATE_V2: mine, TEMPLATE_V3: None})
    assert "disable = false" in text and "disable = true" not in text
    assert text.count("runtimes.custom") == 1 and not text.startswith(TEMPLATE_MARK)


@pytest.mark.parametrize("release, refused", [((1, 27, 4), True), ((1, 27, 5), False), ((1, 23, 17), True),
                                              ((1, 24, 17), False), ((1, 26, 7), True), ((1, 29, 0), False)])
def test_base_template_release_gate(release, refused):
    assert base_template_supported(release) is not refused
    if refused:
        with pytest.raises(ContainerdConfigError, match="cannot include its own configuration"):
            plan_template("k3s", release, V17, RENDERED_RKE2, NONE)


@pytest.mark.parametrize("templates, rendered, containerd, words", [
    ({TEMPLATE_V2: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n", TEMPLATE_V3: None}, RENDERED_RKE2, V17,
     "whole containerd template of your own"),
    ({TEMPLATE_V2: '{{ template "base" . }}\n', TEMPLATE_V3: None}, "version = 3\n", V2, "would leave your"),
    (NONE, RENDERED_RKE2 + '[plugins."io.containerd.nri.v1.nri"]\n  disable = true\n', V17, "a second time"),
])
def test_templates_numa_kube_cannot_extend_are_refused_with_the_fix(templates, rendered, containerd, words):
    with pytest.raises(ContainerdConfigError, match=words):
        plan_template("rke2", (1, 32, 2), containerd, rendered, templates,
                      settings={"plugin_request_timeout": "5s"})


@pytest.mark.parametrize("text, version", [("rke2 version v1.28.1+rke2r1 (abc)\ngo version go1.20", (1, 28, 1)),
                                           ("k3s version v1.32.2+k3s1 (381620ef)", (1, 32, 2))])
def test_distribution_versions(text, version):
    assert parse_distribution_version(text) == version
    with pytest.raises(ContainerdConfigError):
        parse_distribution_version("rke2 version unknown")
