# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Switch containerd's NRI plugin on or off in config.toml, leaving the rest of the file as it is.

NRI lives in the table ``[plugins."io.containerd.nri.v1.nri"]`` in config version 2 (containerd
1.7, where it is disabled by default) and version 3 (containerd 2.x, enabled by default). The file
is edited line by line so that comments, order and formatting survive; only the keys asked for
change, and a missing table is appended.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import socket
import stat

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

NRI_PLUGIN = "io.containerd.nri.v1.nri"
NRI_DEFAULTS = {
    "disable_connections": False,
    "plugin_config_path": "/etc/nri/conf.d",
    "plugin_path": "/opt/nri/plugins",
    "plugin_registration_timeout": "5s",
    "plugin_request_timeout": "2s",
    "socket_path": "/var/run/nri/nri.sock",
}
NRI_KEYS = ("disable",) + tuple(sorted(NRI_DEFAULTS))
# containerd removes whatever is at the NRI socket path before it listens there, so the path must
# stay in the runtime folders (RKE2's and k3s's containerd keeps its own state in /run/k3s, inside
# them too), and hold nothing - or the socket containerd's NRI made there itself: the path of the
# configuration in force, with NRI on - or a socket no program listens on. containerd does not
# remove its NRI socket when it stops, so one restarted with NRI off (numa.kube taken out, a change
# rolled back, an interrupted run finished) leaves it behind, and nobody answers there. Any other
# socket is another program's (containerd's own API, D-Bus, systemd's), which containerd would take
# away.
SOCKET_FOLDERS = ("/run", "/var/run")

_HEADER = re.compile(r"""^\s*\[\s*plugins\s*\.\s*(?:"io\.containerd\.nri\.v1\.nri"|'io\.containerd\.nri\.v1\.nri')\s*\]\s*(?:#.*)?$""")
_ANY_TABLE = re.compile(r"^\s*\[")
_VERSION = re.compile(r"^\s*version\s*=\s*(\d+)\s*(?:#.*)?$")
_CONTAINERD_VERSION = re.compile(r"\bv?(\d+)\.(\d+)\.(\d+)")


class ContainerdConfigError(ProblemsError):
    """A containerd or configuration that NRI cannot be set up on."""


def parse_containerd_version(text):
    """``containerd github.com/containerd/containerd 1.7.24~ds1 ...`` -> (1, 7, 24)."""
    for word in (text or "").split():
        match = _CONTAINERD_VERSION.match(word)
        if match:
            return tuple(int(part) for part in match.groups())
    raise ContainerdConfigError("cannot find a version in %r (expected the output of containerd --version)" % (text,))


def config_version(text):
    """The ``version`` of a config.toml, or None when the file does not set one."""
    for line in (text or "").splitlines():
        if _ANY_TABLE.match(line):
            break
        match = _VERSION.match(line)
        if match:
            return int(match.group(1))
    return None


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise ContainerdConfigError("%r cannot be written as an NRI setting (use a string, number or boolean)" % (value,))


def _section(lines):
    """(start, end) line indexes of the NRI table (header included), or None."""
    for index, line in enumerate(lines):
        if _HEADER.match(line):
            end = index + 1
            while end < len(lines) and not _ANY_TABLE.match(lines[end]):
                end += 1
            return index, end
    return None


def _key_line(key):
    """A line setting ``key``: bare, in a basic string or in a literal string (a key written with
    escapes is not matched: check_reading refuses a file where that hides one)."""
    return re.compile(r"^(\s*)(?:%s|\"%s\"|'%s')\s*=" % (re.escape(key), re.escape(key), re.escape(key)))


def _inside(path, folders=SOCKET_FOLDERS):
    return any(path.startswith(folder + "/") for folder in folders)


def in_force_socket_path(text, containerd_version):
    """The NRI socket path of a configuration containerd runs with, when NRI is on in it (the socket
    containerd itself made there); None when NRI is off."""
    if nri_disabled(text, containerd_version):
        return None
    lines = (text or "").splitlines()
    section = _section(lines)
    if section:
        pattern = _key_line("socket_path")
        for line in lines[section[0] + 1:section[1]]:
            if pattern.match(line):
                raw = line.split("=", 1)[1].split("#", 1)[0].strip()
                value = _parse_scalar(raw)
                # a value that is no string (1, true) is returned as written: no path check passes it
                return value if isinstance(value, str) else raw
    return NRI_DEFAULTS["socket_path"]


def _made_by_nri(path, real, in_force, realpath):
    """Whether ``path`` (``real`` once links are followed) is the NRI socket path of the configuration
    containerd runs with."""
    return isinstance(in_force, str) and (in_force == path or (
        realpath is not None and os.path.isabs(in_force) and realpath(in_force) == real))


def leftover_socket(path, in_force, lstat=os.lstat, realpath=os.path.realpath):
    """The identity (device, inode) of a socket at ``path`` that the configuration containerd runs with
    did not put there, or None: after check_socket_path (with ``listening``) passed, one nobody
    listens on, which containerd removes as it starts with NRI on. Removed first, it cannot be taken
    for containerd's own socket by a wait for it."""
    try:
        found = lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(found.st_mode) or _made_by_nri(path, realpath(path), in_force, realpath):
        return None
    return (found.st_dev, found.st_ino)


def _held_by_a_bound_socket(path, table="/proc/net/unix", realpath=os.path.realpath):
    """Whether a unix socket in this network namespace is bound to ``path``, read from ``table`` (a
    socket whose program has ended is not listed; one bound and not yet listening is). The table is
    read as bytes (a name that is not UTF-8 is any program's right); only entries of the same file
    name are looked at, and one bound by a relative name counts as held (its folder is unknown)."""
    try:
        with open(table, "rb") as handle:
            lines = handle.read().split(b"\n")[1:]
    except OSError:
        return False
    target = os.fsencode(realpath(path))
    name = os.path.basename(target)
    # Num RefCount Protocol Flags Type St Inode Path (the path, when there is one, may hold spaces)
    for fields in (line.split(None, 7) for line in lines):
        bound = fields[7] if len(fields) == 8 else b""
        if not bound or bound.startswith(b"@") or os.path.basename(bound) != name:
            continue
        if not bound.startswith(b"/") or os.fsencode(realpath(os.fsdecode(bound))) == target:
            return True
    return False


def socket_listening(path, timeout=2.0, table="/proc/net/unix"):
    """Whether a program holds the unix socket at ``path``: one bound to it in this network namespace
    (read from ``table``, without connecting: a socket systemd would start a service for stays
    untouched), or one that accepts a connection (a program in another namespace). Only a refused
    connection (or the socket gone meanwhile) counts as nobody there: a datagram socket, a full
    backlog, a permission refused or a timeout are taken for a program's, the safe side."""
    if _held_by_a_bound_socket(path, table):
        return True
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(path)
    except OSError as exc:
        return exc.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        probe.close()
    return True


def check_socket_path(path, lstat=None, realpath=None, in_force=None, listening=None):
    """Problems with an NRI socket path: absolute, plain, inside /run or /var/run, and (when ``lstat``
    and ``realpath`` are given, on the node) still inside them once links are followed, and nothing
    there - or a socket at ``in_force``, the NRI socket path of the configuration containerd runs with
    (see in_force_socket_path), which containerd's NRI made itself - or, when ``listening`` (see
    socket_listening) is given, a socket no program listens on: an NRI socket a containerd left."""
    fix = "choose a path of its own under /run or /var/run, such as the default %s" % NRI_DEFAULTS["socket_path"]
    why = "containerd removes whatever is at that path before it listens there"
    if not isinstance(path, str) or not path.strip():
        return ["NRI socket_path %r is refused: it is empty; %s" % (path, fix)]
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return ["NRI socket_path %r is refused: it must be an absolute path without . or .. parts, doubled or "
                "trailing slashes; %s" % (path, fix)]
    if not _inside(path):
        return ["NRI socket_path %r is refused: it is outside /run and /var/run, and %s; %s" % (path, why, fix)]
    real = path
    if realpath is not None:
        real = realpath(path)
        if not _inside(real, SOCKET_FOLDERS + (realpath("/run"), realpath("/var/run"))):
            return ["NRI socket_path %r is refused: symbolic links lead it to %s, outside /run and /var/run, and %s; "
                    "%s" % (path, real, why, fix)]
    if lstat is not None:
        try:
            mode = lstat(path).st_mode
        except OSError:
            return []
        if not stat.S_ISSOCK(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode) else "a file"
            return ["NRI socket_path %r is refused: %s is there, not a socket, and %s; %s"
                    % (path, kind, why, fix)]
        if not _made_by_nri(path, real, in_force, realpath) and (listening is None or listening(path)):
            running = ("the configuration containerd runs with has NRI off" if not isinstance(in_force, str)
                       else "the configuration containerd runs with puts NRI's socket at %s" % in_force)
            return ["NRI socket_path %r is refused: a socket is there that containerd's NRI did not make (%s), and "
                    "a program listens on it (or holds it bound, or the test for one failed) - containerd's own API, "
                    "D-Bus, systemd - and %s; %s" % (path, running, why, fix)]
    return []


def desired_settings(enabled, settings):
    problems = []
    wanted = {}
    for key, value in sorted((settings or {}).items()):
        if key not in NRI_DEFAULTS:
            problems.append("NRI setting %r is not one of %s" % (key, ", ".join(sorted(NRI_DEFAULTS))))
            continue
        if isinstance(NRI_DEFAULTS[key], bool) and not isinstance(value, bool):
            problems.append("NRI setting %s must be true or false, got %r" % (key, value))
            continue
        if isinstance(NRI_DEFAULTS[key], str) and not isinstance(value, str):
            problems.append("NRI setting %s must be a string such as %r, got %r" % (key, NRI_DEFAULTS[key], value))
            continue
        if key == "socket_path":
            socket_problems = check_socket_path(value)
            if socket_problems:
                problems.extend(socket_problems)
                continue
        wanted[key] = value
    if problems:
        raise ContainerdConfigError(problems)
    wanted["disable"] = not enabled
    return wanted


def plan_nri(text, containerd_version, enabled=True, settings=None):
    """Return (new_text, effective) for switching NRI on or off; new_text == text when nothing changes.

    ``effective`` is the NRI configuration containerd will run with afterwards (defaults filled in).
    """
    version = containerd_version
    if version < (1, 7, 0):
        raise ContainerdConfigError(
            "containerd %s has no NRI support: NRI needs containerd 1.7 or newer (Debian 12 ships 1.6; Debian 13 and "
            "containerd.io 1.7+ have it). Upgrade containerd first." % ".".join(str(p) for p in version))
    text = text or ""
    file_version = config_version(text)
    if text.strip() and file_version is None:
        raise ContainerdConfigError(
            "the containerd configuration has no 'version' line, so it is config version 1, whose plugin names "
            "differ; regenerate it with 'containerd config default' (version 2 or 3) and carry your changes over")
    if file_version is not None and file_version < 2:
        raise ContainerdConfigError("containerd config version %d is not supported; use version 2 (containerd 1.7) "
                                    "or 3 (containerd 2.x)" % file_version)
    if version >= (2, 0, 0):
        default_disabled = False
    else:
        default_disabled = True
        if file_version is not None and file_version > 2:
            raise ContainerdConfigError("containerd %s reads config version 2, but the file says version %d"
                                        % (".".join(str(p) for p in version), file_version))
    wanted = desired_settings(enabled, settings)
    lines = text.splitlines()
    section = _section(lines)
    current = {}
    if section:
        for line in lines[section[0] + 1:section[1]]:
            for key in NRI_KEYS:
                if _key_line(key).match(line):
                    current[key] = line.split("=", 1)[1].split("#", 1)[0].strip()
    changes = {}
    for key, value in wanted.items():
        rendered = toml_value(value)
        if key in current:
            if current[key] != rendered:
                changes[key] = rendered
        else:
            default = default_disabled if key == "disable" else NRI_DEFAULTS[key]
            if value != default:
                changes[key] = rendered
    effective = dict(NRI_DEFAULTS)
    effective["disable"] = default_disabled
    for key, raw in current.items():
        effective[key] = _parse_scalar(raw)
    effective.update(wanted)
    if not changes:
        return text, effective
    new_lines = list(lines)
    if not lines:
        new_lines = ["version = %d" % (3 if version >= (2, 0, 0) else 2)]
    return _set_nri_keys(new_lines, changes), effective


def _set_nri_keys(lines, changes):
    """The text of ``lines`` with each key of ``changes`` (already TOML values) set in the NRI
    table: in place where the key is, after the table's last key where not, or in a table appended
    at the end when there is none."""
    lines = list(lines)
    section = _section(lines)
    if section:
        start, end = section
        indent = "  "
        last_key = start
        for index in range(start + 1, end):
            stripped = lines[index].strip()
            if stripped and not stripped.startswith("#"):
                last_key = index
                indent = lines[index][:len(lines[index]) - len(lines[index].lstrip())]
        inserts = []
        for key in sorted(changes):
            pattern = _key_line(key)
            for index in range(start + 1, end):
                match = pattern.match(lines[index])
                if match:
                    lines[index] = "%s%s = %s" % (match.group(1), key, changes[key])
                    break
            else:
                inserts.append("%s%s = %s" % (indent, key, changes[key]))
        lines[last_key + 1:last_key + 1] = inserts
    else:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append('[plugins."%s"]' % NRI_PLUGIN)
        lines.extend("  %s = %s" % (key, changes[key]) for key in sorted(changes))
    return "\n".join(lines) + "\n"


def nri_disabled(text, containerd_version=None):
    """Whether a configuration (e.g. ``containerd config dump``) leaves NRI disabled.

    An explicit ``disable`` in the NRI table wins; otherwise the default of the containerd version
    decides (off before 2.0), or None when the version is not given.
    """
    lines = (text or "").splitlines()
    section = _section(lines)
    if section:
        pattern = _key_line("disable")
        for line in lines[section[0] + 1:section[1]]:
            if pattern.match(line):
                return _parse_scalar(line.split("=", 1)[1].split("#", 1)[0].strip()) is True
    if containerd_version is None:
        return None
    return tuple(containerd_version) < (2, 0, 0)


def check_toml(new_text, enabled):
    """Parse the result with tomllib where Python has it (3.11+) and confirm NRI's state."""
    try:
        import tomllib
    except ImportError:
        return False
    try:
        document = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ContainerdConfigError("the edited configuration is not valid TOML (%s); nothing was written" % exc)
    nri = document.get("plugins", {}).get(NRI_PLUGIN, {})
    if "disable" in nri and nri["disable"] is enabled:
        raise ContainerdConfigError("the edited configuration still has NRI disable = %s; nothing was written"
                                    % toml_value(nri["disable"]))
    return True


def check_reading(text, containerd_version):
    """Where Python has tomllib (3.11+): refuse a configuration whose NRI settings a TOML reader
    (containerd's) reads otherwise than numa.kube's line-based reading, which is what every check
    here relies on - a key written with escapes (\"socket\\u005fpath\"), in a dotted or inline table,
    and the like."""
    try:
        import tomllib
    except ImportError:
        return
    try:
        document = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise ContainerdConfigError("the configuration is not valid TOML (%s); nothing was written" % exc)
    plugins = document.get("plugins")
    nri = plugins.get(NRI_PLUGIN) if isinstance(plugins, dict) else None
    nri = nri if isinstance(nri, dict) else {}
    default_off = tuple(containerd_version) < (2, 0, 0)
    read = {"disable": nri.get("disable", default_off) is True}
    ours = {"disable": bool(nri_disabled(text, containerd_version))}
    if not read["disable"]:
        read["socket_path"] = nri.get("socket_path", NRI_DEFAULTS["socket_path"])
        ours["socket_path"] = in_force_socket_path(text, containerd_version)
    if read != ours:
        raise ContainerdConfigError(
            "containerd would read the NRI settings of this configuration as %s, numa.kube's reading of its lines "
            "gives %s: a key in the [plugins.\"%s\"] table is written in a form numa.kube does not edit (escapes "
            "in its name, a dotted key, an inline table); write disable and socket_path there plainly "
            "(socket_path = \"...\") and run again; nothing was written" % (read, ours, NRI_PLUGIN))


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\", "e": "\x1b"}
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)


def _unescape(body):
    """A TOML basic string's body as the reader gives it: its escapes (\\u002e, \\t, \\\\...) decoded,
    so that a path is checked as containerd will read it."""
    def one(match):
        if match.group(1) or match.group(2):
            return chr(int(match.group(1) or match.group(2), 16))
        return _ESCAPES.get(match.group(3), match.group(0))
    return _ESCAPE.sub(one, body)


def _parse_scalar(raw):
    if raw in ("true", "false"):
        return raw == "true"
    if raw[:1] == '"' and raw[-1:] == '"' and len(raw) > 1:
        return _unescape(raw[1:-1])
    if raw[:1] == "'" and raw[-1:] == "'" and len(raw) > 1:
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        return raw


# --- RKE2 and k3s: containerd configured through a template the distribution renders ---------------
#
# RKE2 and k3s write containerd's config.toml themselves at every start, from a Go template: their
# own, or config.toml.tmpl (config version 2) / config-v3.toml.tmpl (version 3, containerd 2.x) in
# the same folder when one exists. A template replaces the distribution's configuration as a whole
# unless it includes the distribution's own as {{ template "base" . }}, which k3s (and RKE2, whose
# agent is k3s's code) offer from their September 2023 releases on.

TEMPLATE_V2 = "config.toml.tmpl"
TEMPLATE_V3 = "config-v3.toml.tmpl"
TEMPLATE_MARK = "# Written by numa.kube (containerd_nri): the distribution's own configuration, then NRI."
_BASE_INCLUDE = re.compile(r"\{\{-?\s*template\s+\"base\"\s+\.\s*-?\}\}")
# the first release of each minor version whose template may include "base"
BASE_TEMPLATE_SINCE = {24: (1, 24, 17), 25: (1, 25, 13), 26: (1, 26, 8), 27: (1, 27, 5), 28: (1, 28, 1)}


def parse_distribution_version(text):
    """``rke2 version v1.28.1+rke2r1 (abc)`` or ``k3s version v1.30.4+k3s1 (def)`` -> (1, 28, 1)."""
    for word in (text or "").split():
        match = re.match(r"^v?(\d+)\.(\d+)\.(\d+)(?:[+-]|$)", word)
        if match:
            return tuple(int(part) for part in match.groups())
    raise ContainerdConfigError("cannot find a version in %r (expected the output of rke2 --version or k3s --version)"
                                % (text,))


def base_template_supported(version):
    """Whether a release renders templates that include {{ template "base" . }}."""
    version = tuple(version)
    if version[:2] < (1, 24):
        return False
    if version[:2] > (1, 28):
        return True
    return version >= BASE_TEMPLATE_SINCE[version[1]]


def _vstr(version):
    return ".".join(str(part) for part in version)


def plan_template(distribution, distribution_version, containerd_version, rendered, templates, enabled=True,
                  settings=None):
    """Plan NRI on RKE2 or k3s through the containerd template.

    ``rendered`` is the config.toml the distribution generated (what containerd runs with);
    ``templates`` maps TEMPLATE_V2 and TEMPLATE_V3 to their text, or None where there is no file.
    Returns (name, new_text, effective): the template to write (new_text is None when nothing
    changes) and the NRI settings containerd runs with afterwards.
    """
    name = TEMPLATE_V3 if tuple(containerd_version) >= (2, 0, 0) else TEMPLATE_V2
    toml_values = dict((key, toml_value(value)) for key, value in desired_settings(enabled, settings).items())
    running_as_wanted, effective = plan_nri(rendered or "", containerd_version, enabled, settings)
    current = templates.get(name)
    if running_as_wanted == (rendered or "") and rendered:
        return name, None, effective
    other = templates.get(TEMPLATE_V2) if name == TEMPLATE_V3 else None
    if other is not None and current is None:
        raise ContainerdConfigError(
            "%s exists but containerd %s takes %s first: writing it would leave your %s unused. Move your changes "
            "into %s (config version 3) and run again." % (TEMPLATE_V2, _vstr(containerd_version), TEMPLATE_V3,
                                                           TEMPLATE_V2, TEMPLATE_V3))
    if current is not None and not _BASE_INCLUDE.search(current):
        raise ContainerdConfigError(
            "%s is a whole containerd template of your own (it does not include {{ template \"base\" . }}), so "
            "numa.kube will not edit it: add [plugins.\"%s\"] with disable = %s to it yourself, or start it with "
            "{{ template \"base\" . }} and run again." % (name, NRI_PLUGIN, toml_value(not enabled)))
    if current is None:
        if not base_template_supported(distribution_version):
            raise ContainerdConfigError(
                "%s %s cannot include its own configuration in a template ({{ template \"base\" . }} came with the "
                "September 2023 releases: v1.24.17, v1.25.13, v1.26.8, v1.27.5, v1.28.1); a template would replace "
                "it as a whole. Upgrade %s, or write a full %s yourself." % (
                    distribution, _vstr(distribution_version), distribution, name))
        if _section((rendered or "").splitlines()):
            raise ContainerdConfigError(
                "%s's own containerd configuration already has [plugins.\"%s\"], which a template cannot set a "
                "second time; write a full %s with the NRI settings you need." % (distribution, NRI_PLUGIN, name))
        new_text = _set_nri_keys([TEMPLATE_MARK, '{{ template "base" . }}'], toml_values)
        # what the distribution will render: its own configuration (running now, no template), then ours
        check_toml(_BASE_INCLUDE.sub(lambda _m: rendered or "", new_text), enabled)
    else:
        new_text = _set_nri_keys(current.splitlines(), toml_values)
    return name, (None if new_text == current else new_text), effective


# --- what numa.kube set, and taking it back out -----------------------------------------------------
#
# The record (containerd-nri.json) keeps the file numa.kube edited (config.toml, or the RKE2/k3s
# template), whether numa.kube created that file and its NRI table, and for each NRI key it set
# the value it wrote and the value before (None: the key was not there). Taking numa.kube back out
# puts each key back only while it still has the value numa.kube wrote, removes the table when
# numa.kube created it and nothing else is left in it, and the file when numa.kube created it and
# nothing but what numa.kube put there is left.

RECORD_DISTRIBUTIONS = ("containerd", "rke2", "k3s")
# lines of a file numa.kube created that are its own scaffolding, not settings
_SKELETON = (re.compile(r"^\s*version\s*=\s*\d+\s*$"), re.compile(r"^%s$" % re.escape(TEMPLATE_MARK)), _BASE_INCLUDE)


def nri_table(text):
    """{key: raw TOML value} of the NRI table of ``text``, or None when there is no such table."""
    lines = (text or "").splitlines()
    section = _section(lines)
    if not section:
        return None
    values = {}
    for line in lines[section[0] + 1:section[1]]:
        for key in NRI_KEYS:
            if _key_line(key).match(line):
                values[key] = line.split("=", 1)[1].split("#", 1)[0].strip()
    return values


def merge_nri_record(record, distribution, path, before_text, after_text):
    """The record after numa.kube changed ``path`` from ``before_text`` (None: no file) to
    ``after_text``, merged with the ``record`` of earlier changes (None: there is none). A key set
    back to the value it had before numa.kube first changed it is forgotten. Returns None when
    nothing numa.kube set is left to take out."""
    record = dict(record or {})
    before = nri_table(before_text)
    after = nri_table(after_text) or {}
    keys = dict((key, dict(value)) for key, value in (record.get("keys") or {}).items())
    for key in sorted(after):
        old = (before or {}).get(key)
        if old == after[key]:
            continue
        first = keys[key]["before"] if key in keys else old
        if first == after[key]:
            keys.pop(key, None)
        else:
            keys[key] = {"before": first, "after": after[key]}
    merged = {
        "distribution": record.get("distribution", distribution),
        "path": record.get("path", path),
        "created_file": bool(record.get("created_file", before_text is None)),
        "created_table": bool(record.get("created_table", before is None)),
        "keys": keys,
    }
    if not keys and not merged["created_file"] and not merged["created_table"]:
        return None
    return merged


def check_nri_record(record, path):
    """Problems with a containerd-nri.json read from ``path`` (version already checked)."""
    fix = ("numa.kube cannot tell what it set, so it puts nothing back. Put the file back as numa.kube wrote it "
           "(a copy, or the rollout record's), or remove it and set NRI by hand (containerd_nri_enabled)")
    if not isinstance(record, dict):
        return ["%s is damaged: it holds %s, not an object; %s" % (path, type(record).__name__, fix)]
    problems = []
    if record.get("distribution") not in RECORD_DISTRIBUTIONS:
        problems.append("%s is damaged: distribution is %r, not one of %s"
                        % (path, record.get("distribution"), ", ".join(RECORD_DISTRIBUTIONS)))
    if not isinstance(record.get("path"), str) or not os.path.isabs(record.get("path")):
        problems.append("%s is damaged: path is %r, not the absolute path of the file numa.kube edited"
                        % (path, record.get("path")))
    for flag in ("created_file", "created_table"):
        if not isinstance(record.get(flag), bool):
            problems.append("%s is damaged: %s is %r, not true or false" % (path, flag, record.get(flag)))
    keys = record.get("keys")
    if not isinstance(keys, dict):
        problems.append("%s is damaged: keys is %r, not an object of NRI settings" % (path, keys))
        keys = {}
    for key, value in sorted(keys.items()):
        if key not in NRI_KEYS:
            problems.append("%s is damaged: keys names %r, not an NRI setting (%s)" % (path, key, ", ".join(NRI_KEYS)))
        elif (not isinstance(value, dict) or not isinstance(value.get("after"), str)
              or not (value.get("before") is None or isinstance(value.get("before"), str))
              or "\n" in value["after"] or "\n" in (value.get("before") or "")):
            problems.append("%s is damaged: keys.%s is %r, not {before: the TOML value before or null, after: "
                            "the TOML value numa.kube wrote}" % (path, key, value))
    if problems:
        problems[-1] = problems[-1] + "; " + fix
    return problems


def own_nri_paths(distribution, config_path, data_dir=None):
    """The files numa.kube's NRI change can be in for ``distribution``: containerd's ``config_path``,
    or RKE2's/k3s's config.toml templates under ``data_dir`` (/var/lib/rancher/<distribution> by
    default)."""
    if distribution == "containerd":
        return [config_path]
    folder = os.path.join(data_dir or "/var/lib/rancher/%s" % distribution, "agent", "etc", "containerd")
    return [os.path.join(folder, name) for name in (TEMPLATE_V2, TEMPLATE_V3)]


def check_nri_record_path(record, where, config_path, data_dir=None):
    """A problem when the (checked) record names a file numa.kube's NRI change cannot be in on this
    run (see own_nri_paths): 'absent' would otherwise edit or remove any file a record names."""
    own = own_nri_paths(record["distribution"], config_path, data_dir)
    if record["path"] in own:
        return []
    return ["%s says numa.kube changed NRI in %s, but for %s numa.kube only ever writes %s; run with the "
            "containerd_nri_config_path (or data dir) the change was made with, or put NRI back by hand and remove %s"
            % (where, record["path"], record["distribution"], " or ".join(own), where)]


def plan_nri_withdraw(text, record):
    """Return (new_text, notes): ``text`` (the file the record names, None when it is gone) with
    what numa.kube set taken back out - new_text None means the file goes - and a note for each
    setting left alone, with why."""
    path = record["path"]
    keys = record.get("keys") or {}
    notes = []
    if text is None:
        if keys:
            notes.append("%s is gone: nothing of numa.kube's NRI settings is left in it to put back" % path)
        return None, notes
    original = text.splitlines()
    lines = list(original)
    section = _section(lines)
    for key in sorted(keys):
        wrote, before = keys[key]["after"], keys[key]["before"]
        found = None
        if section:
            pattern = _key_line(key)
            for index in range(section[0] + 1, section[1]):
                # a line an earlier key of this loop took out is None until the loop ends
                match = pattern.match(lines[index]) if lines[index] is not None else None
                if match:
                    found = index, match.group(1), lines[index].split("=", 1)[1].split("#", 1)[0].strip()
        if found is None:
            notes.append("%s in %s, which numa.kube set to %s, is no longer there: left as it is" % (key, path, wrote))
            continue
        index, indent, value = found
        if value != wrote:
            notes.append("%s in %s is %s, not the %s numa.kube set: left as it is (changed since)"
                         % (key, path, value, wrote))
            continue
        lines[index] = None if before is None else "%s%s = %s" % (indent, key, before)
    lines = [line for line in lines if line is not None]
    section = _section(lines)
    if record.get("created_table") and section:
        start, end = section
        if not [line for line in lines[start + 1:end] if line.strip()]:
            # the table numa.kube appended, and the blank line it put before it
            if start > 0 and not lines[start - 1].strip() and end == len(lines):
                start -= 1
            lines[start:end] = []
    if record.get("created_file") and all(not line.strip() or any(p.match(line) for p in _SKELETON)
                                          for line in lines):
        return None, notes
    if lines == original:
        return text, notes
    return "\n".join(lines) + "\n" if lines else "", notes


def check_toml_text(text, what):
    """Refuse a result that is not TOML (where Python has tomllib)."""
    try:
        import tomllib
    except ImportError:
        return
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContainerdConfigError("%s would not be valid TOML after numa.kube's settings are taken out (%s); "
                                    "nothing was written" % (what, exc))
