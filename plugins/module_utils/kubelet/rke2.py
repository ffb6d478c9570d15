# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RKE2's and k3s's own configuration file, /etc/rancher/<rke2|k3s>/config.yaml: lines written
into it by the lablabs rke2 role, and how RKE2 and k3s merge it with config.yaml.d.

What this follows, read in the sources:

- lablabs/ansible-role-rke2 ``templates/config.yaml.j2``: every string entry of
  ``rke2_server_options`` (hosts of the servers group) and ``rke2_agent_options`` (hosts of the
  agents group) is written as it is, one line of config.yaml; its ``meta/argument_specs.yml``
  declares both as lists of strings and ``defaults/main.yml`` documents them as
  ``"option: value"``. ``rke2_kubelet_arg`` entries are written as it is too, each one item of a
  ``kubelet-arg:`` list. So what goes into those variables must already be YAML.
- k3s ``pkg/configfilearg/parser.go`` (RKE2's ``main.go`` calls the same ``configfilearg.MustParse``;
  both projects' configuration documentation says the same): config.yaml is read first, then every
  file of config.yaml.d whose name ends in ``.yaml`` or ``.yml`` (any case) in name order; a key
  read later replaces the value read before; a key written with a ``+`` at its end appends to it
  instead (a single value counts as a one-item list); each list item then becomes one
  ``--key=item`` flag. The files are read with gopkg.in/yaml.v2 into an ordered MapSlice: YAML 1.1
  (an unquoted ``0600`` is the number 384, ``yes`` and ``on`` are true), and a key written twice
  in one file is kept twice, in order (no duplicate check there), so the later one wins too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.args import KubeletArgsError, kubelet_arg_list


class Rke2ConfigError(ProblemsError):
    """A value that would not reach RKE2 or k3s as written."""


# A scalar written unquoted only when YAML 1.1 and 1.2 both read it back as this very string:
# it starts with a letter, '/' or '_' (never a number, a date, '.inf', an indicator such as
# '-', '?', ':', '&', '*', '!', '|', '>', quotes, '%', '@' or '`'), holds no space, '#' or flow
# indicator, does not end in ':' (that would make it a key) and is not a YAML 1.1 boolean or null.
_PLAIN = re.compile(r"^[A-Za-z/_][A-Za-z0-9_./=,:;@%+~<>-]*$")
_YAML11_WORDS = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null"])
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# RKE2/k3s option names are their command-line flags without the dashes (lower case letters,
# digits and '-'); a '+' at the end appends to what an earlier file set.
_OPTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*\+?$")

_SUFFIXES = (".yaml", ".yml")


def _describe(value):
    return "%r (%s)" % (value, type(value).__name__)


def yaml_scalar(value, what="value"):
    """``value`` as a YAML scalar that reads back as the same value: plain where that is safe,
    otherwise double-quoted (a JSON string is a valid YAML double-quoted scalar).

    Strings, integers and booleans only; ``what`` names the value in errors.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise Rke2ConfigError(
            "%s is %s: RKE2 and k3s options take a string, a whole number or true/false; "
            "give the value as one of those (a list only for options that repeat)" % (what, _describe(value)))
    if _CONTROL.search(value):
        raise Rke2ConfigError(
            "%s is %r: it holds a line break or another control character, which an RKE2/k3s option "
            "value never needs; remove it" % (what, value))
    if _PLAIN.match(value) and not value.endswith(":") and value.lower() not in _YAML11_WORDS:
        return value
    return json.dumps(value)


def option_line(name, value):
    """One ``option: value`` line of config.yaml, the form of the lablabs role's
    ``rke2_server_options`` and ``rke2_agent_options`` entries.

    A list value becomes a one-line flow list (for options that repeat, such as ``tls-san``).
    ``kubelet-arg`` is refused (it belongs in ``rke2_kubelet_arg``), and so are ``node-label``
    values for numa.kube's own labels (the rollout sets those on proven nodes).
    """
    if not isinstance(name, str) or not _OPTION_NAME.match(name):
        raise Rke2ConfigError(
            "option name %s is not an RKE2/k3s option name: names are the command-line flag without its "
            "dashes, lower case letters, digits and '-', with a '+' at the end to append to an earlier "
            "file (node-ip, tls-san, kube-apiserver-arg+); write it that way" % _describe(name))
    base = name.rstrip("+")
    if base == "kubelet-arg":
        raise Rke2ConfigError(
            "option %s does not go into rke2_server_options or rke2_agent_options: the lablabs role writes its "
            "own kubelet-arg list from rke2_kubelet_arg after those lines, and a later kubelet-arg replaces an "
            "earlier one; set rke2_kubelet_arg: \"{{ settings | numa.kube.rke2_kubelet_arg }}\" instead" % name)
    if value is None or isinstance(value, dict):
        raise Rke2ConfigError(
            "option %s has the value %s: an option takes a string, a whole number, true/false or a list of "
            "strings; give one of those (leave the option out to keep RKE2's default)" % (name, _describe(value)))
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if base == "node-label":
        ours = [item for item in items if isinstance(item, str) and item.startswith("numa.kube/")]
        if ours:
            raise Rke2ConfigError(
                "option %s sets %s: numa.kube's labels are put on each Node by the rollout once its kubelet is "
                "proven to run the policies (and taken off with numa_kube_state: absent), while RKE2's node-label "
                "only applies when a node first registers; leave numa.kube/* labels out" % (name, ", ".join(ours)))
    if isinstance(value, (list, tuple)):
        rendered = []
        for index, item in enumerate(items):
            if isinstance(item, (dict, list, tuple)) or item is None:
                raise Rke2ConfigError(
                    "option %s item %d is %s: a list option holds strings (or numbers); give each item as "
                    "one string" % (name, index, _describe(item)))
            text = yaml_scalar(item, "option %s item %d" % (name, index))
            # a flow list needs quotes around items that hold ',' or brackets; quote them all
            rendered.append(json.dumps(item) if isinstance(item, str) else text)
        return "%s: [%s]" % (name, ", ".join(rendered))
    return "%s: %s" % (name, yaml_scalar(value, "option %s" % name))


def kubelet_arg_items(settings):
    """KubeletConfiguration settings -> the lablabs role's ``rke2_kubelet_arg`` entries.

    The same ``flag=value`` strings as ``kubelet_args.kubelet_arg_list`` (one table of flags for
    every form), each quoted only where the role's raw ``  - entry`` line would not read back as it.
    """
    try:
        args = kubelet_arg_list(settings)
    except KubeletArgsError as exc:
        raise Rke2ConfigError(
            "%s; give KubeletConfiguration fields that have a kubelet flag (cpuManagerPolicy, "
            "topologyManagerPolicy, memoryManagerPolicy, kubeReserved, reservedMemory, ...); a field with no "
            "flag goes into a drop-in of RKE2's kubelet.conf.d instead (numa.kube's kubelet role writes one)" % exc)
    return [yaml_scalar(arg, "kubelet flag %s" % arg.split("=", 1)[0]) for arg in args]


def config_files(config_path, dropin_names):
    """The files RKE2/k3s read, in order: ``config_path`` and then, in name order, the names in
    its ``.d`` folder that end in .yaml or .yml in any case (folders are the caller's to leave out)."""
    chosen = sorted(name for name in dropin_names if name.lower().endswith(_SUFFIXES))
    return [config_path] + ["%s.d/%s" % (config_path, name) for name in chosen]


def _go_string(value):
    # what the Go side prints for a YAML value (wrangler's convert.ToString)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_list(value):
    # a '+' key: a string is one item, a list its items, anything else its text unless empty
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return list(value)
    text = _go_string(value).strip()
    return [text] if text else []


def _pairs(document, index):
    if document is None:
        return []
    if isinstance(document, dict):
        return list(document.items())
    if isinstance(document, list) and all(isinstance(p, tuple) and len(p) == 2 for p in document):
        return document
    raise Rke2ConfigError(
        "configuration file %d is %s, not a mapping of options: RKE2 and k3s refuse to start with it; write "
        "it as 'option: value' lines" % (index, type(document).__name__))


def merge_config(documents):
    """Merge parsed config files as RKE2 and k3s do, in the order given (see ``config_files``).

    Each document is a mapping, or a list of (key, value) pairs where a file repeats a key, or None
    (an empty file). Returns a dict in the order keys were first seen, the '+' taken off: a later
    value replaces an earlier one, a ``key+`` appends to it.
    """
    merged = {}
    for index, document in enumerate(documents):
        for key, value in _pairs(document, index):
            key = _go_string(key)
            append = key.endswith("+")
            key = key[:-1] if append else key
            if append and key in merged:
                merged[key] = _as_list(merged[key]) + _as_list(value)
            else:
                merged[key] = value
    return merged


def option_values(merged, key):
    """The flag values a merged option gives: one per list item, or the one value (none if unset)."""
    if key not in merged:
        return []
    value = merged[key]
    if isinstance(value, list):
        return [_go_string(item) for item in value]
    return [_go_string(value)]
