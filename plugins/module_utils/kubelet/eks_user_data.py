# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""EKS user data for NUMA-aligned nodes: a nodeadm NodeConfig (Amazon Linux 2023) in a MIME
multi-part document, and the kubelet flags of bootstrap.sh --kubelet-extra-args (Amazon Linux 2),
with the Memory Manager reservation computed for the instance type's max pods by the code of the
reserved_memory module, and the whole kubelet configuration checked by kubelet_config.validate.

What this follows, read in awslabs/amazon-eks-ami (commit 81fec2e8, July 2026):

- ``nodeadm/api/core.go`` and ``api/v1alpha1/nodeconfig_types.go``: a NodeConfig is
  ``apiVersion: node.eks.aws/v1alpha1``, ``kind: NodeConfig``, ``spec.cluster`` (name,
  apiServerEndpoint, certificateAuthority - a Go []byte, so base64 text in YAML -, cidr,
  enableOutpost, id), ``spec.kubelet.config`` (a KubeletConfiguration mapping),
  ``spec.kubelet.flags`` (a list of strings), ``spec.kubelet.maxPodsExpression``, and
  ``containerd``, ``instance``, ``featureGates``.
- ``nodeadm/internal/configprovider/mime.go``: user data that reads as a multipart MIME message is
  split into parts; each part whose media type is ``application/node.eks.aws`` is decoded as a
  NodeConfig (JSON or YAML), and the parts are merged in order, a later part winning
  (``internal/api/merge.go``: ``kubelet.config`` key by key, ``kubelet.flags`` appended). Parts of
  other types are cloud-init's. ``internal/api/validation.go``: the merged config must name the
  cluster, its API server endpoint, certificate authority and service CIDR; Karpenter and managed
  node groups write that part themselves.
- ``nodeadm/internal/kubelet/config.go``: nodeadm writes its own kubelet config (evictionHard
  ``memory.available: 100Mi``; kubeReserved cpu by the EKS formula, ephemeral-storage 1Gi, memory
  ``11 * maxPods + 255`` MiB with maxPods from the instance type, not from spec.kubelet.config;
  systemReservedCgroup ``/system`` and kubeReservedCgroup ``/runtime`` always), and
  ``spec.kubelet.config`` as the drop-in ``config.json.d/40-nodeadm.conf``, which kubelet merges
  over it key by key, maps included.
- ``nodeadm/internal/kubelet/environment.go`` and the AL2023 ``kubelet.service``: the flags follow
  nodeadm's own in ``NODEADM_KUBELET_ARGS``, which systemd splits at white space.
- AL2, ``templates/al2/runtime/bootstrap.sh`` (removed upstream with AL2 support in March 2026):
  ``--kubelet-extra-args`` is written into the systemd line
  ``Environment='KUBELET_EXTRA_ARGS=...'`` (systemd resolves ``%`` specifiers there, so ``%`` is
  written ``%%``) and expanded as ``$KUBELET_EXTRA_ARGS``; bootstrap.sh puts kubeReserved,
  evictionHard and, unless the arguments name ``--reserved-cpus``, the reserved cgroups into
  kubelet-config.json, and each flag replaces its whole field.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import ipaddress
import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.args import KubeletArgsError, kubelet_arg_list
from ansible_collections.numa.kube.plugins.module_utils.kubelet.config import merge_patch, validate
from ansible_collections.numa.kube.plugins.module_utils.kubelet.fields import FLAGS
from ansible_collections.numa.kube.plugins.module_utils.quantity import QuantityError
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation import (
    MAX_NUMA_NODES,
    eks_kube_reserved_cpu,
    eks_kube_reserved_memory,
    plan,
)
from ansible_collections.numa.kube.plugins.module_utils.kubelet.reservation_rules import DEFAULT_EVICTION_HARD
from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import MAX_CPUS

API_VERSION = "node.eks.aws/v1alpha1"
KIND = "NodeConfig"
MEDIA_TYPE = "application/node.eks.aws"
SHELL_MEDIA_TYPE = 'text/x-shellscript; charset="us-ascii"'
BOUNDARY = "numa-kube-user-data"
AMIS = ("al2023", "al2")

SPEC_FIELDS = ("cluster", "containerd", "instance", "kubelet", "featureGates")
KUBELET_FIELDS = ("config", "flags", "maxPodsExpression")
CLUSTER_FIELDS = ("name", "apiServerEndpoint", "certificateAuthority", "cidr", "enableOutpost", "id")
CLUSTER_REQUIRED = ("name", "apiServerEndpoint", "certificateAuthority", "cidr")
# the cgroups nodeadm (always) and bootstrap.sh (unless --reserved-cpus is given) set
RESERVED_CGROUPS = {"systemReservedCgroup": "/system", "kubeReservedCgroup": "/runtime"}
MAX_PODS = 2 ** 31 - 1  # kubelet's maxPods is an int32

_FLAG = re.compile(r"^--([a-z0-9][a-z0-9-]*)(=.*)?\Z", re.S)
# what a flag value cannot hold on its way to kubelet: systemd splits NODEADM_KUBELET_ARGS and
# KUBELET_EXTRA_ARGS at white space, and reads quotes and backslashes in Environment lines
_UNSAFE = re.compile(r"[\s'\"\\\x00-\x1f\x7f-\x9f]")
_FIELD_OF_FLAG = dict((flag, field) for field, flag in FLAGS.items() if flag)


class EksUserDataError(ProblemsError):
    """Input that would not give a node kubelet starts on, or user data EKS cannot read."""


def plain(value):
    """A copy made of plain dict, list, str, int, float, bool and None (Ansible hands filters
    subclasses of str that PyYAML's safe dumper refuses)."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _whole(value, name, low, high, meaning):
    """``value`` as an int in low..high, None when not given; digits in a string are taken."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EksUserDataError("%s: %r is not %s (a whole number from %d to %d)" % (name, value, meaning, low, high))
    return value


def _node_ids(numa_nodes, numa_node_memory):
    """The NUMA node ids from a count or a list of ids (numa_node_memory alone is enough)."""
    if numa_nodes is None:
        if not numa_node_memory:
            raise EksUserDataError(
                "memoryManagerPolicy Static needs the instance type's NUMA nodes to place reservedMemory: give "
                "numa_node_memory (node id to memory, e.g. {0: 16Gi, 1: 16Gi}) or numa_nodes (a count or a list "
                "of ids); numa_nodes=1 puts the reservation on node 0, which every instance type has")
        return None
    if isinstance(numa_nodes, int) and not isinstance(numa_nodes, bool):
        count = _whole(numa_nodes, "numa_nodes", 1, MAX_NUMA_NODES, "a number of NUMA nodes")
        return list(range(count))
    if isinstance(numa_nodes, list) and numa_nodes:
        ids = []
        for index, node in enumerate(numa_nodes):
            ids.append(_whole(node, "numa_nodes[%d]" % index, 0, MAX_NUMA_NODES - 1, "a NUMA node id"))
        return ids
    raise EksUserDataError("numa_nodes: %r is neither a number of NUMA nodes nor a list of node ids" % (numa_nodes,))


def _settings(settings):
    if not isinstance(settings, dict):
        raise EksUserDataError("expected a mapping of KubeletConfiguration fields (cpuManagerPolicy, "
                               "topologyManagerPolicy, ...), got %r" % (settings,))
    return dict((k, v) for k, v in plain(settings).items() if k not in ("apiVersion", "kind") and v is not None)


def _base_config(ami, max_pods, cpu_count, written):
    """The part of the kubelet configuration the EKS AMI writes itself that the checks read."""
    base = {
        "evictionHard": dict(DEFAULT_EVICTION_HARD["eks"]),
        # the formula's smallest value (one CPU) stands in for an unknown CPU count: it is never 0
        "kubeReserved": {"cpu": eks_kube_reserved_cpu(cpu_count or 1).canonical(), "ephemeral-storage": "1Gi"},
        "cgroupDriver": "systemd",
    }
    if max_pods is not None:
        base["kubeReserved"]["memory"] = eks_kube_reserved_memory(max_pods).canonical()
        base["maxPods"] = max_pods
    if ami == "al2023" or "reservedSystemCPUs" not in written:
        base.update(RESERVED_CGROUPS)
    return base


def kubelet_settings(settings, ami="al2023", max_pods=None, numa_nodes=None, numa_node_memory=None,
                     memory_capacity=None, cpu_count=None, placement="spread", placement_node=None):
    """The KubeletConfiguration fields to hand to EKS for ``ami``, reservation included.

    With ``memoryManagerPolicy: Static`` the reservedMemory is computed (or the one given checked)
    for EKS's reservation: kubeReserved.memory = 11 MiB per pod + 255 MiB for ``max_pods``, plus the
    AMI's ``memory.available`` hard eviction threshold, plus systemReserved; kubeReserved.memory is
    written too, so that the sum holds whatever max pods the AMI computes on its own. The whole
    configuration kubelet will run with (the AMI's own fields under these) is then checked as
    kubelet checks it. Returns ``(settings, reservation)``, the reservation as the reserved_memory
    module returns it, or None without the Static policy. Raises EksUserDataError.
    """
    if ami not in AMIS:
        raise EksUserDataError("ami %r is not one of %s" % (ami, ", ".join(AMIS)))
    written = _settings(settings)
    max_pods = _whole(max_pods, "max_pods", 1, MAX_PODS, "a number of pods")
    cpu_count = _whole(cpu_count, "cpu_count", 1, MAX_CPUS, "a number of CPUs")
    if "maxPods" in written:
        own = _whole(written["maxPods"], "maxPods", 1, MAX_PODS, "a number of pods")
        if max_pods is not None and own != max_pods:
            raise EksUserDataError("maxPods %d in the settings and max_pods %d differ: the reservation is computed for "
                                   "one number of pods; give the same number to both, or only one" % (own, max_pods))
        max_pods = own
    reservation = None
    if written.get("memoryManagerPolicy") == "Static":
        reservation = _reservation(written, ami, max_pods, numa_nodes, numa_node_memory, memory_capacity, cpu_count,
                                   placement, placement_node)
        written["reservedMemory"] = reservation["reserved_memory"]
        given = written.get("kubeReserved") or {}
        effective = reservation["kube_reserved"]
        if ami == "al2":
            if "cpu" not in effective:
                raise EksUserDataError(
                    "AL2: --kube-reserved replaces the whole kubeReserved bootstrap.sh computes, so it must carry the "
                    "CPU reservation too: give cpu_count (the instance type's vCPUs, for EKS's formula) or "
                    "kubeReserved.cpu")
            written["kubeReserved"] = effective
        else:
            # the drop-in merges key by key: memory pins the sum, the rest stays nodeadm's
            written["kubeReserved"] = dict((k, effective[k]) for k in effective if k == "memory" or k in given)
    base = _base_config(ami, max_pods, cpu_count, written)
    config = merge_patch(base, written) if ami == "al2023" else dict(base, **written)
    machine = {"distribution": "eks"}
    if numa_node_memory:
        machine.update(numa_node_memory=plain(numa_node_memory), memory_capacity=memory_capacity)
    try:
        nodes = _node_ids(numa_nodes, numa_node_memory) if (numa_nodes is not None or numa_node_memory) else None
        validate(config, numa_node_count=len(nodes or numa_node_memory or []) or None,
                 online_cpus=list(range(cpu_count)) if cpu_count else None, machine=machine)
    except (ProblemsError, QuantityError) as exc:
        raise EksUserDataError(getattr(exc, "problems", [str(exc)]))
    return written, reservation


def _reservation(written, ami, max_pods, numa_nodes, numa_node_memory, memory_capacity, cpu_count, placement,
                 placement_node):
    given = written.get("kubeReserved") or {}
    if max_pods is None and "memory" not in given:
        raise EksUserDataError(
            "max_pods is missing: EKS reserves 11 MiB per pod + 255 MiB for kubelet (kubeReserved.memory), and "
            "reservedMemory must add up to it exactly; give the instance type's max pods (58 for m5.xlarge), or "
            "kubeReserved.memory yourself")
    if not isinstance(given, dict):
        raise EksUserDataError("kubeReserved: expected a mapping such as {cpu: 500m, memory: 1Gi}, got %r" % (given,))
    eviction = written.get("evictionHard")
    if eviction is not None and ami == "al2023":
        # the drop-in's evictionHard is merged into nodeadm's, which has memory.available: 100Mi
        eviction = merge_patch(DEFAULT_EVICTION_HARD["eks"], eviction)
    nodes = _node_ids(numa_nodes, numa_node_memory)
    try:
        return plan(numa_nodes=nodes, numa_node_memory=plain(numa_node_memory), memory_capacity=memory_capacity,
                    kube_reserved=given, system_reserved=written.get("systemReserved"), eviction_hard=eviction,
                    merge_default_eviction_settings=bool(written.get("mergeDefaultEvictionSettings")),
                    distribution="eks", eks_max_pods=max_pods, cpu_count=cpu_count,
                    reserved_memory=written.get("reservedMemory"), placement=placement, placement_node=placement_node)
    except (ProblemsError, QuantityError) as exc:
        raise EksUserDataError(getattr(exc, "problems", [str(exc)]))


def _flag_problems(flag, where):
    """What keeps one kubelet flag from reaching kubelet as written: not --name=value, or white
    space (a newline included), a quote or a backslash in it."""
    if not isinstance(flag, str) or not _FLAG.match(flag):
        return ["%s: %r is not a kubelet flag written --name=value (such as --node-labels=team=a)" % (where, flag)]
    if _UNSAFE.search(flag):
        return ["%s: %r holds white space, a control character, a quote or a backslash; nodeadm joins the flags with "
                "spaces and systemd "
                "splits them there, so kubelet would not get it as written" % (where, flag)]
    return []


def _flags(flags, written):
    """spec.kubelet.flags: ``--name=value`` strings kubelet knows, none for a field the config writes."""
    if flags is None:
        return []
    if not isinstance(flags, list):
        raise EksUserDataError("flags: expected a list of --name=value strings, got %r" % (flags,))
    problems = []
    for index, flag in enumerate(plain(flags)):
        where = "flags[%d]" % index
        found = _flag_problems(flag, where)
        if found:
            problems.extend(found)
            continue
        match = _FLAG.match(flag)
        field = _FIELD_OF_FLAG.get(match.group(1))
        if field in written:
            problems.append("%s: --%s sets %s, which this NodeConfig writes in spec.kubelet.config; kubelet would "
                            "take the flag over the file. Put the value in the settings instead"
                            % (where, match.group(1), field))
    if problems:
        raise EksUserDataError(problems)
    return plain(flags)


def _cluster(cluster):
    """spec.cluster for a self-managed node group, as nodeadm requires it."""
    if not isinstance(cluster, dict):
        raise EksUserDataError("cluster: expected a mapping with %s, got %r" % (", ".join(CLUSTER_REQUIRED), cluster))
    cluster = plain(cluster)
    problems = []
    for key in sorted(set(cluster) - set(CLUSTER_FIELDS)):
        problems.append("cluster.%s: nodeadm has no such field; it knows %s" % (key, ", ".join(CLUSTER_FIELDS)))
    for key in CLUSTER_REQUIRED:
        if not cluster.get(key):
            problems.append("cluster.%s is missing; nodeadm refuses a config without it (aws eks describe-cluster "
                            "shows it), or leave cluster out where Karpenter or a managed node group writes it"
                            % key)
        elif not isinstance(cluster[key], str):
            problems.append("cluster.%s: %r must be a string" % (key, cluster[key]))
    authority = cluster.get("certificateAuthority")
    if isinstance(authority, str) and authority:
        try:
            base64.b64decode(authority.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            problems.append("cluster.certificateAuthority: not base64 text; nodeadm reads it as bytes in base64, as "
                            "describe-cluster's certificateAuthority.data gives it")
    cidr = cluster.get("cidr")
    if isinstance(cidr, str) and cidr:
        try:
            if "/" not in cidr:
                raise ValueError("no prefix length")
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            problems.append("cluster.cidr: %r is not a CIDR such as 10.100.0.0/16; nodeadm infers the cluster DNS "
                            "address from the service CIDR" % (cidr,))
    if "enableOutpost" in cluster and not isinstance(cluster["enableOutpost"], bool):
        problems.append("cluster.enableOutpost: %r must be true or false" % (cluster["enableOutpost"],))
    if cluster.get("enableOutpost") is True and not cluster.get("id"):
        problems.append("cluster.id is missing; nodeadm needs the cluster id on an Outpost (enableOutpost: true)")
    if problems:
        raise EksUserDataError(problems)
    return cluster


def node_config(settings, max_pods=None, numa_nodes=None, numa_node_memory=None, memory_capacity=None,
                cpu_count=None, placement="spread", placement_node=None, flags=None, cluster=None):
    """A NodeConfig whose spec.kubelet.config carries the settings (reservation computed and checked)."""
    written, dummy = kubelet_settings(settings, "al2023", max_pods, numa_nodes, numa_node_memory, memory_capacity,
                                      cpu_count, placement, placement_node)
    spec = {}
    if cluster is not None:
        spec["cluster"] = _cluster(cluster)
    spec["kubelet"] = {"config": written}
    flags = _flags(flags, written)
    if flags:
        spec["kubelet"]["flags"] = flags
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}


def check_node_config(document, where="NodeConfig"):
    """The shape nodeadm decodes (see the module's notes); raises EksUserDataError."""
    if not isinstance(document, dict):
        raise EksUserDataError("%s: expected a NodeConfig mapping, got %r" % (where, document))
    problems = []
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        problems.append("%s: apiVersion %r and kind %r; nodeadm reads apiVersion %s, kind %s"
                        % (where, document.get("apiVersion"), document.get("kind"), API_VERSION, KIND))
    spec = document.get("spec", {})
    if not isinstance(spec, dict):
        problems.append("%s.spec: expected a mapping, got %r" % (where, spec))
        spec = {}
    for key in sorted(set(spec) - set(SPEC_FIELDS)):
        problems.append("%s.spec.%s: nodeadm has no such field; it knows %s" % (where, key, ", ".join(SPEC_FIELDS)))
    kubelet = spec.get("kubelet", {})
    if not isinstance(kubelet, dict):
        problems.append("%s.spec.kubelet: expected a mapping, got %r" % (where, kubelet))
        kubelet = {}
    for key in sorted(set(kubelet) - set(KUBELET_FIELDS)):
        problems.append("%s.spec.kubelet.%s: nodeadm has no such field; it knows %s"
                        % (where, key, ", ".join(KUBELET_FIELDS)))
    if not isinstance(kubelet.get("config", {}), dict):
        problems.append("%s.spec.kubelet.config: expected a KubeletConfiguration mapping" % where)
    flags = kubelet.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        problems.append("%s.spec.kubelet.flags: expected a list of strings" % where)
    else:
        # a NodeConfig of the user's gets the same checks as one numa.kube writes
        for index, flag in enumerate(flags):
            problems.extend(_flag_problems(flag, "%s.spec.kubelet.flags[%d]" % (where, index)))
    if problems:
        raise EksUserDataError(problems)


def user_data(parts, boundary=BOUNDARY):
    """A MIME multi-part document (``MIME-Version``, ``multipart/mixed``) with one part per item:
    a NodeConfig mapping becomes an ``application/node.eks.aws`` part (YAML), a script starting
    with ``#!`` a ``text/x-shellscript`` part, in the order given (nodeadm merges NodeConfig parts
    in that order, a later one winning). Lines end in LF, as Karpenter writes them."""
    import yaml  # imported here: the rest of this file runs without PyYAML

    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list) or not parts:
        raise EksUserDataError("expected a NodeConfig mapping or a list of NodeConfigs and shell scripts, got %r"
                               % (parts,))
    parts = plain(parts)
    rendered, problems = [], []
    for index, part in enumerate(parts):
        if isinstance(part, dict):
            try:
                check_node_config(part, "parts[%d]" % index)
            except EksUserDataError as exc:
                problems.extend(exc.problems)
                continue
            text = "---\n" + yaml.safe_dump(part, default_flow_style=False, sort_keys=False)
            rendered.append((MEDIA_TYPE, text))
        elif isinstance(part, str) and part.startswith("#!"):
            rendered.append((SHELL_MEDIA_TYPE, part if part.endswith("\n") else part + "\n"))
        else:
            problems.append("parts[%d]: %r is neither a NodeConfig mapping nor a shell script starting with #!"
                            % (index, part if not isinstance(part, str) else part[:40]))
    for index, (dummy, text) in enumerate(rendered):
        if any(line.startswith("--" + boundary) for line in text.splitlines()):
            problems.append("parts[%d]: a line starts with the MIME boundary --%s; change that line" % (index, boundary))
    if problems:
        raise EksUserDataError(problems)
    lines = ["MIME-Version: 1.0", 'Content-Type: multipart/mixed; boundary="%s"' % boundary, ""]
    for media_type, text in rendered:
        lines.extend(["--" + boundary, "Content-Type: " + media_type, "", text.rstrip("\n")])
    lines.extend(["--%s--" % boundary, ""])
    return "\n".join(lines)


def bootstrap_kubelet_extra_args(settings, max_pods=None, numa_nodes=None, numa_node_memory=None,
                                 memory_capacity=None, cpu_count=None, placement="spread", placement_node=None):
    """The ``--kubelet-extra-args`` value for AL2's bootstrap.sh: ``--flag=value`` joined by spaces,
    ``%`` written ``%%`` for the systemd line bootstrap.sh puts it in."""
    written, dummy = kubelet_settings(settings, "al2", max_pods, numa_nodes, numa_node_memory, memory_capacity,
                                      cpu_count, placement, placement_node)
    try:
        args = kubelet_arg_list(written)
    except KubeletArgsError as exc:
        raise EksUserDataError("%s (AL2's bootstrap.sh passes kubelet flags only)" % exc)
    problems = ["--%s: holds white space, a quote or a backslash, which do not survive bootstrap.sh's systemd line "
                "Environment='KUBELET_EXTRA_ARGS=...'; choose a value without them" % arg
                for arg in args if _UNSAFE.search(arg)]
    if problems:
        raise EksUserDataError(problems)
    return " ".join("--" + arg.replace("%", "%%") for arg in args)
