# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn KubeletConfiguration settings into kubelet command-line flags.

RKE2 and k3s take kubelet flags as ``kubelet-arg`` entries (``flag=value``), EKS AL2 as a
``KUBELET_EXTRA_ARGS`` string (``--flag=value ...``). Both come from one settings mapping in
KubeletConfiguration form, so inventories keep a single source of truth.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import FLAGS, KUBELET_VERSION
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import (
    ReservationError,
    parse_reserved_memory,
    reserved_memory_flag,
)

# Eviction thresholds are written signal<value on the command line.
_EVICTION_FIELDS = ("evictionHard", "evictionSoft")


class KubeletArgsError(ValueError):
    """A setting that has no flag form."""


def flag_name(field):
    """kubelet's flag for a KubeletConfiguration field (its own table, see kubelet_fields)."""
    if field not in FLAGS:
        raise KubeletArgsError("%s is not a KubeletConfiguration field of kubelet %s" % (field, KUBELET_VERSION))
    if FLAGS[field] is None:
        raise KubeletArgsError("%s has no kubelet flag (kubelet %s); it can only be set in a configuration file"
                               % (field, KUBELET_VERSION))
    return FLAGS[field]


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def flag_value(field, value):
    if field == "reservedMemory":
        try:
            parse_reserved_memory(value)
        except ReservationError as exc:
            raise KubeletArgsError("reservedMemory: %s" % "; ".join(exc.problems))
        return reserved_memory_flag(value)
    if isinstance(value, dict):
        if field in _EVICTION_FIELDS:
            return ",".join("%s<%s" % (k, _scalar(v)) for k, v in sorted(value.items()))
        return ",".join("%s=%s" % (k, _scalar(v)) for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ",".join(_scalar(v) for v in value)
    return _scalar(value)


def kubelet_arg_list(settings):
    """Settings -> ``["cpu-manager-policy=static", ...]`` (RKE2/k3s ``kubelet-arg``), in field order."""
    if not isinstance(settings, dict):
        raise KubeletArgsError("expected a mapping of KubeletConfiguration fields, got %r" % (settings,))
    args = []
    for field, value in settings.items():
        if field in ("apiVersion", "kind") or value is None:
            continue
        if isinstance(value, dict) and any(isinstance(v, (dict, list)) for v in value.values()):
            raise KubeletArgsError("%s has nested values and no flag form; put it in a configuration file" % field)
        args.append("%s=%s" % (flag_name(field), flag_value(field, value)))
    return args


def kubelet_extra_args(settings, quote=False):
    """Settings -> ``--cpu-manager-policy=static --reserved-memory=0:memory=1Gi`` (KUBELET_EXTRA_ARGS).

    With ``quote`` each argument is quoted for a POSIX shell (EKS user data passes the string
    through ``bootstrap.sh --kubelet-extra-args``); systemd environment files want it unquoted.
    """
    args = ["--" + arg for arg in kubelet_arg_list(settings)]
    if quote:
        args = [shlex.quote(arg) for arg in args]
    return " ".join(args)
