# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the stacks that apply a set of objects share (volcano_stack, topology_scheduler): the
result that records each object's change, an apply that a dry run can show inside a namespace
it has not made, CRDs in a diff, and what ``absent`` must read before it deletes a CRD or a
Namespace: the objects that would go with it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import json

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    KINDS,
    check_name,
    check_namespace,
    describe,
    owned,
    path_of,
)

POD_TEMPLATE_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
LISTED = 5  # objects named in a refusal, per CRD or Namespace; the count says how many there are
_PAGE, _PAGES = 500, 20  # a list is read 500 objects a request, at most 20 requests


class StackResult(dict):
    """The module's result, with each object's change recorded as it happens."""

    def __init__(self, **fields):
        dict.__init__(self, changed=False, objects=[], diff=[], **fields)

    def record(self, obj, changed, before, after):
        self["objects"].append({"object": describe(obj), "changed": changed})
        if changed:
            self["changed"] = True
            self["diff"].append({"before": summarised(before), "after": summarised(after),
                                 "before_header": describe(obj), "after_header": describe(obj)})

    def keep(self, obj, **why):
        self["objects"].append(dict({"object": describe(obj), "changed": False, "kept": True}, **why))


def apply_recorded(api, obj, check_mode, result):
    """Apply ``obj`` and record it in ``result``. A dry run cannot place objects in a namespace the
    same run has not made yet: such an object is recorded as it would be sent."""
    if check_mode and obj["kind"] != "Namespace" and obj["metadata"].get("namespace") and \
            api.get("/api/v1/namespaces/%s" % check_namespace(obj["metadata"]["namespace"])) is None:
        result.record(obj, True, {}, obj)
        return
    changed, before, after = api.apply(obj, check_mode)
    result.record(obj, changed, before, after)


def summarised(obj):
    """``obj`` for a diff: a CRD's schemas (tens of thousands of lines in Volcano's manifest) stand
    as a digest of each, so a changed schema still shows as a changed line."""
    if not obj or obj.get("kind") != "CustomResourceDefinition":
        return obj
    obj = copy.deepcopy(obj)
    for version in obj.get("spec", {}).get("versions") or []:
        schema = version.get("schema")
        if schema:
            digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode("utf-8")).hexdigest()
            version["schema"] = "(%d bytes, sha256:%s)" % (len(json.dumps(schema)), digest[:16])
    return obj


def pod_specs(obj):
    """The pod specs of ``obj`` (a workload's template, a Pod's own spec), as they are (not copies)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if obj.get("kind") == "Pod":
        return [spec]
    if obj.get("kind") in POD_TEMPLATE_KINDS:
        template = spec.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            return [template["spec"]]
    return []


# --- what absent may delete ---------------------------------------------------------------------------

def listed(api, path, **params):
    """The items at ``path``, page by page; (items, whether more were left unread)."""
    items, token = [], None
    for _page in range(_PAGES):
        query = dict(params, limit=_PAGE)
        if token:
            query["_continue"] = token
        answer = api.get(path, **query) or {}
        items.extend(answer.get("items") or [])
        token = (answer.get("metadata") or {}).get("continue")
        if not token:
            return items, False
    return items, True


def named(items, total):
    """Up to LISTED of ``items`` by name ("ns/name" when namespaced), and how many more of ``total``."""
    names = ["%s/%s" % (i["metadata"]["namespace"], i["metadata"]["name"]) if i["metadata"].get("namespace")
             else i["metadata"]["name"] for i in items[:LISTED]]
    more = total - len(names)
    return ", ".join(names) + (" and %d more" % more if more > 0 else "")


class CustomObjects(object):
    """What one read of a CRD's objects found: ``items`` (the first page, less numa.kube's own when
    asked), ``total`` (those plus the server's count of the rest), ``count`` in words (``more
    than N`` when the server gives no count), and the CRD's ``plural``, ``group`` and ``kind``."""

    def __init__(self, items, total, count, plural, group, kind):
        self.items, self.total, self.count = items, total, count
        self.plural, self.group, self.kind = plural, group, kind


def custom_objects(api, live, skip_owned=False):
    """The objects of the served CRD ``live`` (as the API server returns it) in the whole cluster,
    read with one page; objects numa.kube made are not counted with ``skip_owned``. None when there
    are none, or when the CRD serves no version (no object of it exists for clients)."""
    spec = live.get("spec") or {}
    versions = [v["name"] for v in spec.get("versions") or [] if v.get("served") and v.get("storage")] or \
        [v["name"] for v in spec.get("versions") or [] if v.get("served")]
    plural, group = (spec.get("names") or {}).get("plural"), spec.get("group")
    if not versions or not plural or not group:
        return None
    what = "CRD %s" % live["metadata"]["name"]
    path = "/apis/%s/%s/%s" % (check_name(group, "the group of " + what), check_name(versions[0], "a version of " + what),
                               check_name(plural, "the plural of " + what))
    answer = api.get(path, limit=_PAGE) or {}
    items = answer.get("items") or []
    meta = answer.get("metadata") or {}
    left = meta.get("remainingItemCount") or 0
    if skip_owned:
        items = [i for i in items if not owned(i)]
    if not items and not left and not meta.get("continue"):
        return None
    total = len(items) + left
    count = "%d" % total if left or not meta.get("continue") else "more than %d" % len(items)
    kind = (spec.get("names") or {}).get("kind") or plural
    return CustomObjects(items, total, count, plural, group, kind)


_NAMESPACE_KINDS = (("v1", "Pod"), ("apps/v1", "DaemonSet"), ("apps/v1", "Deployment"), ("v1", "Service"),
                    ("v1", "ConfigMap"), ("v1", "Secret"))


def _ours_in(namespace, objects):
    """What numa.kube applies in ``namespace`` (kind, name), and the Secrets its pods mount."""
    ours = set()
    for obj in objects:
        if obj["metadata"].get("namespace") != namespace:
            continue
        ours.add((obj["kind"], obj["metadata"]["name"]))
        for pod_spec in pod_specs(obj):
            for volume in pod_spec.get("volumes") or []:
                secret = (volume.get("secret") or {}).get("secretName")
                if secret:
                    ours.add(("mounted Secret", secret))
    return ours


def _pod_is_ours(pod, ours):
    """Whether one of our Deployments (through its ReplicaSet), DaemonSets or Jobs made ``pod``."""
    pod_hash = (pod["metadata"].get("labels") or {}).get("pod-template-hash")
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("DaemonSet", "Job") and (ref["kind"], ref.get("name")) in ours:
            return True
        if ref.get("kind") == "ReplicaSet" and pod_hash and (ref.get("name") or "").endswith("-" + pod_hash) \
                and ("Deployment", ref["name"][:-len(pod_hash) - 1]) in ours:
            return True
    return False


def foreign(obj, ours):
    """Whether ``obj`` (a live object of a Namespace, with its ``kind``) is not one of ``ours``
    (from _ours_in), nor a pod of one of them, nor what the API server puts in every Namespace."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    if kind == "Pod":
        return not _pod_is_ours(obj, ours)
    if kind == "ConfigMap" and name == "kube-root-ca.crt":
        return False
    if kind == "Secret" and (obj.get("type") == "kubernetes.io/service-account-token"
                             or ("mounted Secret", name) in ours):
        return False
    return not ((kind, name) in ours and owned(obj))


def namespace_problem(api, namespace_obj, objects, what="from this manifest",
                      fix="Move or delete them first and run again, or leave delete_namespace off"):
    """A sentence when the Namespace holds objects that numa.kube did not make among ``objects``
    (``what`` says which those are), ending with ``fix``; else None: deleting the Namespace would
    delete them."""
    name = namespace_obj["metadata"]["name"]
    live = api.get(path_of(namespace_obj))
    if live is None or not owned(live):
        return None
    ours = _ours_in(name, objects)
    others, unread = [], False
    for version, kind in _NAMESPACE_KINDS:
        items, more = listed(api, "%s/namespaces/%s/%s" % ("/api/v1" if version == "v1" else "/apis/" + version,
                                                           check_namespace(name), KINDS[(version, kind)][0]))
        unread = unread or more
        others.extend("%s %s" % (kind, i["metadata"]["name"]) for i in items if foreign(dict(i, kind=kind), ours))
    if not others and not unread:
        return None
    total = len(others)
    listing = ", ".join(others[:LISTED]) + (" and %d more" % (total - LISTED) if total > LISTED else "")
    unread_note = (", and over %d objects of one kind, not all read" % (_PAGE * _PAGES)) if unread else ""
    return ("Namespace %s holds %d object%s numa.kube did not make %s (%s)%s: deleting the Namespace deletes "
            "them. %s" % (name, total, "" if total == 1 else "s", what, listing or "none of those read", unread_note,
                          fix))
