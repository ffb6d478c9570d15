# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano from its own release manifest, and the Numatopology publisher that feeds numa-aware.

The manifest is Volcano's (``installer/volcano-development.yaml`` of a release, or a file rendered
from its Helm chart), applied as it is apart from what the user asks to change: the images'
registry and tag, their pull policy, a node selector for Volcano's own pods, and, with admission
off, the admission webhook and everything that serves it left out. The scheduler's ConfigMap is
only created, never overwritten: its content is the scheduler configuration, which
``numa.kube.volcano_numa_aware`` (or the user) edits, and a later deployment must not undo that.

Every document is checked before the first request that changes anything (kind, name, namespace,
images), and all problems are reported together. The webhook configurations go last, once the
Deployment that serves them is Available: Volcano's webhooks fail closed, and one registered
before its server answers refuses every object it watches.

``absent`` removes only what numa.kube applied; Volcano's CRDs (and with them every Volcano Job,
Queue and PodGroup) and its Namespaces only when asked, and never over someone else's objects.

The publisher is a DaemonSet of the node agent's ``topology-publisher``: one Numatopology per
node, from kubelet's /configz, its PodResources API and sysfs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import re
import time

from ansible.module_utils.urls import open_url

from ansible_collections.numa.kube.plugins.module_utils.stacks import publisher as node_publisher
from ansible_collections.numa.kube.plugins.module_utils.stacks import objects as stack_objects
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    HOST,
    KINDS,
    PATH_PART,
    SCHEME,
    KubeApiError,
    check_labels,
    check_name,
    check_namespace,
    describe,
    image_problem,
    owned,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    deployment_progress,
    deployment_ready,
    wait_pending,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.publisher import (
    NUMATOPOLOGY,
    own_node_policy,
    published_cleanup,
    publisher_pods_left,
    remove_publisher,
    selected_nodes,
    unavailable,
    wait_rollout,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import share_problems, warn_down
from ansible_collections.numa.kube.plugins.module_utils.stacks.objects import (
    StackResult,
    apply_recorded,
    custom_objects,
    named,
    namespace_problem,
    pod_specs,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_conf import VolcanoError

try:
    import yaml
except ImportError:  # reported by the module (volcano_conf.HAS_YAML)
    yaml = None

PUBLISHER = "numa-topology-publisher"
# what moved to stack_objects, under the names this module's callers know
summarised = stack_objects.summarised
_foreign = stack_objects.foreign
# the ValidatingAdmissionPolicy (and its binding) that keeps each publisher to its own node's object
PUBLISHER_POLICY = "numa-kube.publisher-own-node"
_IMAGE = re.compile(r"^(?P<repo>.*/)?(?P<name>[^/:@]+)(?::(?P<tag>[^/@]+))?(?P<digest>@.+)?$")
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
DOWNLOAD_TIMEOUT = 60  # seconds for the manifest's download, connection and reading together
MAX_MANIFEST_BYTES = 32 * 1024 * 1024  # Volcano's release manifest is about 2 MB

_REGISTRY = re.compile(r"^%s(?:/%s)*/?\Z" % (HOST, PATH_PART))
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_CHECKSUM = re.compile(r"^sha256:[0-9a-fA-F]{64}\Z")


def read_bounded(response, where, seconds=DOWNLOAD_TIMEOUT, limit=MAX_MANIFEST_BYTES, clock=time.monotonic):
    """The whole body of ``response`` (a file-like HTTP answer), read a chunk at a time: VolcanoError
    once it has taken ``seconds`` in all or grown past ``limit`` bytes (a server that trickles bytes
    never ends a per-read timeout)."""
    give_up = clock() + seconds
    read = getattr(response, "read1", None) or response.read
    data = bytearray()
    while True:
        chunk = read(65536)
        if not chunk:
            return bytes(data)
        data.extend(chunk)
        if len(data) > limit:
            raise VolcanoError("the manifest %s is larger than %d bytes: is it Volcano's release manifest? nothing "
                               "was applied" % (where, limit))
        if clock() > give_up:
            raise VolcanoError("the manifest %s took more than %d s to download (%d bytes so far): try again, or "
                               "download it and give its path; nothing was applied" % (where, seconds, len(data)))


def _loader():
    class Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        pass

    # Helm-rendered CRDs carry keys such as "=" that YAML 1.1 reads as the value tag
    Loader.add_constructor("tag:yaml.org,2002:value", Loader.construct_yaml_str)
    return Loader


# --- where the manifest comes from -------------------------------------------------------------------

def is_url(source):
    return bool(SCHEME.match(source or ""))


def check_source(source, checksum):
    """VolcanoError unless the manifest may be read from ``source``: a URL only as https:// and
    pinned by ``checksum`` (whatever answers there decides what runs with cluster-wide rights), a
    checksum only as sha256:<64 hex digits>. Checked before the download."""
    problems = []
    if checksum is not None and not _CHECKSUM.match(checksum):
        problems.append("manifest_checksum must read sha256:<64 hex digits>, got %r; set it to 'sha256:' and "
                        "the output of sha256sum for the manifest" % checksum)
    if is_url(source):
        if not source.lower().startswith("https://"):
            problems.append("manifest %r is not an https:// URL: a manifest from a URL must come over https "
                            "(plain http, or any other scheme, lets anything on the way change what is "
                            "applied with cluster-wide rights); use its https:// address, or download it, "
                            "review it and give its path" % source)
        elif not checksum:
            problems.append("manifest %r is a URL without manifest_checksum: a manifest from a URL must be "
                            "pinned (what is served there can change); set manifest_checksum to 'sha256:' and "
                            "the sha256sum of the manifest you reviewed" % source)
    if problems:
        raise VolcanoError(problems)


def check_checksum(data, checksum, source):
    """VolcanoError when the manifest's bytes do not have the sha256 ``checksum`` names."""
    if not checksum:
        return
    actual = hashlib.sha256(data).hexdigest()
    expected = checksum.partition(":")[2].lower()
    if actual != expected:
        raise VolcanoError("the manifest %s has sha256 %s, not the %s manifest_checksum names: nothing was "
                           "applied; check where it comes from, then set manifest_checksum to what you "
                           "reviewed" % (source, actual, expected))


# --- the manifest's documents ------------------------------------------------------------------------

def read_manifest(params):
    """The volcano_stack module's manifest as text (None without one); VolcanoError, naming every
    problem, when its source or checksum is refused or it cannot be read."""
    source, checksum = params["manifest"], params["manifest_checksum"]
    if source is None:
        return None
    check_source(source, checksum)
    try:
        if is_url(source):
            data = read_bounded(open_url(source, timeout=DOWNLOAD_TIMEOUT), source)
        else:
            with open(source, "rb") as handle:
                data = handle.read()
    except VolcanoError:
        raise
    except Exception as exc:  # pylint: disable=broad-except  # any failure to read is the user's to fix
        raise VolcanoError("cannot read the manifest %s: %s" % (source, exc))
    check_checksum(data, checksum, source)
    return data.decode("utf-8")


def load_manifest(text, where):
    """The documents of a multi-document manifest, in order (empty ones as None, so that each
    keeps its position); VolcanoError when it is not YAML."""
    try:
        return list(yaml.load_all(text, Loader=_loader()))  # nosec: SafeLoader underneath
    except yaml.YAMLError as exc:
        raise VolcanoError("%s is not valid YAML: %s; nothing was applied" % (where, exc))


def _label(index, doc):
    """How a problem names a document: its position and, when it has them, its kind and name."""
    if isinstance(doc, dict) and doc.get("kind") and isinstance(doc.get("metadata"), dict):
        return "document %d (%s)" % (index, describe(doc))
    return "document %d" % index


def _is_object(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str)
            and isinstance(doc.get("metadata"), dict) and isinstance(doc["metadata"].get("name"), str))


def _kind_problem(unknown):
    """One sentence for every document of a kind numa.kube does not apply."""
    known = sorted(set(kind for _version, kind in KINDS))
    items = []
    for index, doc in unknown:
        where = "%s %s (document %d, %s)" % (doc["apiVersion"], doc["kind"], index, doc["metadata"]["name"])
        versions = sorted(version for version, kind in KINDS if kind == doc["kind"])
        if versions:
            where += " [numa.kube applies %s as %s]" % (doc["kind"], " or ".join(versions))
        items.append(where)
    return ("the manifest holds kinds numa.kube does not apply: %s; it applies only %s. Remove those documents "
            "from the manifest (and apply them yourself), or use Volcano's release manifest "
            "(installer/volcano-development.yaml)" % (", ".join(items), ", ".join(known)))


def _containers(obj):
    for pod_spec in pod_specs(obj):
        for field in ("initContainers", "containers"):
            for container in pod_spec.get(field) or []:
                if isinstance(container, dict):
                    yield container


def manifest_problems(documents, params):
    """Every problem of the manifest's documents and of the options that shape them, as sentences
    (empty when it can be applied): structure, kinds, names, namespaces, images (only for state
    present: absent pulls nothing), the scheduler Deployment."""
    problems, unknown, objects = [], [], []
    for index, doc in enumerate(documents, 1):
        if doc is None:
            continue
        if not _is_object(doc):
            problems.append("%s is not a Kubernetes object with apiVersion, kind and metadata.name (found %.200r): "
                            "complete it or remove it" % (_label(index, doc), doc))
            continue
        key = (doc["apiVersion"], doc["kind"])
        if key not in KINDS:
            unknown.append((index, doc))
            continue
        objects.append((index, doc))
        meta = doc["metadata"]
        try:
            if doc["kind"] == "Namespace":
                check_namespace(meta["name"], "%s: the name" % _label(index, doc))
            else:
                check_name(meta["name"], "%s: the name" % _label(index, doc), doc["kind"])
        except KubeApiError as exc:
            problems.append(str(exc))
        if KINDS[key][1] and meta.get("namespace") is not None:
            try:
                check_namespace(meta["namespace"], "%s: the namespace" % _label(index, doc))
            except KubeApiError as exc:
                problems.append(str(exc))
    if unknown:
        problems.append(_kind_problem(unknown))
    if not any(doc["kind"] == "Deployment" and "scheduler" in doc["metadata"]["name"] for _i, doc in objects):
        problems.append("the manifest has no scheduler Deployment: is it Volcano's release manifest "
                        "(installer/volcano-development.yaml)? give that file")
    if params["state"] == "present":
        image_options_bad = bool(_image_option_problems(params))
        for index, doc in objects:
            if not params["admission"] and is_admission(doc):
                continue
            for container in _containers(doc):
                what = "%s container %r" % (_label(index, doc), container.get("name"))
                given = container.get("image")
                if not isinstance(given, str) or not given:
                    problems.append("%s has no image: every container needs one; set it in the manifest" % what)
                    continue
                if image_options_bad:
                    continue  # said once, for the option
                image = _image(given, params.get("image_registry"), params.get("image_tag"))
                if image == given:
                    problem, fix = image_problem(image, what), "fix the manifest"
                else:
                    problem = image_problem(image, "%s (%r with image_registry %r, image_tag %r)" % (
                        what, given, params.get("image_registry"), params.get("image_tag")))
                    fix = "fix the manifest, or image_registry or image_tag"
                if problem:
                    problems.append("%s; %s" % (problem, fix))
    return problems


def _image_option_problems(params):
    problems = []
    registry, tag = params.get("image_registry"), params.get("image_tag")
    if registry and not _REGISTRY.match(registry):
        problems.append("image_registry %r is not a registry and path: it must read host[:port][/path] in lower case, "
                        "without whitespace or a scheme (e.g. registry.example/volcanosh); fix it" % registry)
    if tag and not _TAG.match(tag):
        problems.append("image_tag %r is not an image tag: it must be letters, digits, '_', '.' and '-' (not "
                        "first), at most 128 characters (e.g. v1.14.1); fix it" % tag)
    return problems


def option_problems(params):
    """The options of the module that this file checks, as sentences."""
    problems = _image_option_problems(params)
    try:
        check_namespace(params["namespace"], "namespace (the option)")
    except KubeApiError as exc:
        problems.append(str(exc))
    for option in ("node_selector", "publisher_node_selector"):
        try:
            check_labels(params.get(option) or {}, option)
        except KubeApiError as exc:
            problems.append(str(exc))
    if params.get("publisher_image"):
        problem = image_problem(params["publisher_image"], "publisher_image")
        if problem:
            problems.append(problem + "; set it to the node agent image as you pushed it")
    problems.extend(share_problems(params))
    return problems


def is_admission(obj):
    """Whether the object belongs to Volcano's admission webhook (left out with admission off)."""
    return obj["kind"] in WEBHOOK_KINDS or "admission" in obj["metadata"]["name"]


def _image(image, registry, tag):
    match = _IMAGE.match(image)
    if not match:
        return image
    repo = registry.rstrip("/") + "/" if registry else (match.group("repo") or "")
    if tag:
        return "%s%s:%s" % (repo, match.group("name"), tag)
    return "%s%s%s%s" % (repo, match.group("name"), ":" + match.group("tag") if match.group("tag") else "",
                         match.group("digest") or "")


def adjust(objects, params):
    """The manifest's objects as they will be applied (copies; the input is not touched).

    Each object's own labels stay and numa.kube's managed-by label is added to them; pod template
    labels are left as they are (a Deployment's selector cannot change). A namespaced object that
    names no namespace goes to the module's ``namespace``."""
    result = []
    for obj in objects:
        if obj is None or (not params["admission"] and is_admission(obj)):
            continue
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        if KINDS.get((obj["apiVersion"], obj["kind"]), (None, False))[1] and not meta.get("namespace"):
            meta["namespace"] = params["namespace"]
        for pod_spec in pod_specs(obj):
            for container in pod_spec.get("initContainers", []) + pod_spec.get("containers", []):
                container["image"] = _image(container.get("image", ""), params.get("image_registry"),
                                            params.get("image_tag"))
                if params.get("image_pull_policy"):
                    container["imagePullPolicy"] = params["image_pull_policy"]
            if params.get("node_selector"):
                pod_spec["nodeSelector"] = dict(pod_spec.get("nodeSelector") or {}, **params["node_selector"])
        result.append(obj)
    return result


def volcano_objects(text, params):
    """The manifest's objects as numa.kube applies (or deletes) them, in the manifest's order;
    VolcanoError listing every problem of the manifest and options when there is one."""
    documents = load_manifest(text, params["manifest"])
    problems = option_problems(params) + manifest_problems(documents, params)
    if problems:
        verb = "applied" if params["state"] == "present" else "deleted"
        raise VolcanoError(problems, summary="the manifest %s was refused, nothing was %s" % (params["manifest"], verb))
    return adjust(documents, params)


def webhook_servers(objects):
    """The Deployments of ``objects`` that serve its webhook configurations: a webhook's
    clientConfig.service, that Service's selector, the Deployments whose pod labels it selects.
    Every Deployment when a webhook's server cannot be traced that way (a URL, a Service from
    elsewhere, a selector nothing matches)."""
    services = dict(((o["metadata"].get("namespace"), o["metadata"]["name"]), o)
                    for o in objects if o["kind"] == "Service")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    wanted = []
    for config in objects:
        if config["kind"] not in WEBHOOK_KINDS:
            continue
        for hook in config.get("webhooks") or []:
            ref = (hook.get("clientConfig") or {}).get("service") or {}
            service = services.get((ref.get("namespace"), ref.get("name")))
            selector = ((service or {}).get("spec") or {}).get("selector") or {}
            found = [d for d in deployments if selector and d["metadata"].get("namespace") == ref.get("namespace")
                     and _selects(selector, d)]
            if not found:
                return deployments
            wanted.extend(d for d in found if d not in wanted)
    return [d for d in deployments if d in wanted]


def _selects(selector, deployment):
    labels = ((((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {})
    return all(labels.get(key) == value for key, value in selector.items())


def is_scheduler_conf(obj):
    return obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("scheduler-configmap")


def publisher_policy(namespace, labels):
    """The ValidatingAdmissionPolicy and its binding that let the publisher write only the
    Numatopology named as its own node (node_publisher.own_node_policy says how)."""
    return own_node_policy(PUBLISHER_POLICY, namespace, PUBLISHER, NUMATOPOLOGY, labels)


def publisher_objects(params):
    """ServiceAccount, ClusterRole, ClusterRoleBinding, the own-node admission policy and its binding,
    and the DaemonSet (last) of the Numatopology publisher (the node agent's topology-publisher)."""
    return node_publisher.publisher_objects(params, PUBLISHER, "topology-publisher", NUMATOPOLOGY, PUBLISHER_POLICY,
                                            VolcanoError)


def publisher_cleanup(api, check_mode):
    """Delete the Numatopologies the publisher wrote (those with numa.kube's managed-by label: any
    other exporter's stay); a list of (object, changed, before) for the module's result. Call it
    once the publisher's DaemonSet and ClusterRoleBinding are gone."""
    return published_cleanup(api, NUMATOPOLOGY, check_mode)


# --- what absent may delete ---------------------------------------------------------------------------

def crd_problem(api, crd, skip_owned=False):
    """A sentence when custom resources of ``crd`` (as the manifest names it) exist anywhere in the
    cluster, else None; objects numa.kube made are not counted with ``skip_owned`` (the
    Numatopologies the publisher's removal takes with it)."""
    live = api.get(path_of(crd))
    if live is None or not owned(live):
        return None  # nothing to delete (api.delete leaves a CRD numa.kube did not make)
    found = custom_objects(api, live, skip_owned)
    if found is None:
        return None
    return ("CRD %s still has %s %s object%s in the cluster (%s): deleting it deletes them all. Delete them first "
            "(kubectl delete %s.%s --all -A) and run again, or leave delete_crds off" % (
                live["metadata"]["name"], found.count, found.kind, "" if found.total == 1 else "s",
                named(found.items, found.total), found.plural, found.group))


def absent_problems(api, params, volcano, publisher):
    """Why the CRDs and Namespaces asked to go cannot, as sentences (read-only requests)."""
    problems = []
    if params.get("delete_crds"):
        for obj in volcano:
            if obj["kind"] == "CustomResourceDefinition":
                skip = bool(publisher) and obj["metadata"]["name"] == "numatopologies.nodeinfo.volcano.sh"
                problems.append(crd_problem(api, obj, skip_owned=skip))
    if params.get("delete_namespace"):
        for obj in volcano:
            if obj["kind"] == "Namespace":
                problems.append(namespace_problem(api, obj, volcano + publisher))
    return [p for p in problems if p]


# --- run --------------------------------------------------------------------------------------------

def run(api, params, manifest_text, check_mode, wait_for):
    """Apply (or remove) Volcano and the publisher, and wait for them; the module's result.

    Nothing is changed before every check passed: the manifest and the options, and for absent
    whether the CRDs and Namespaces asked to go hold anything numa.kube did not make."""
    if manifest_text is not None:
        volcano = volcano_objects(manifest_text, params)
    else:
        problems = option_problems(params)
        if problems:
            raise VolcanoError(problems)
        volcano = []
    publisher = publisher_objects(params) if params.get("publisher_image") else []
    if params["state"] == "absent":
        return _remove(api, params, volcano, publisher, check_mode, wait_for)
    return _deploy(api, params, volcano, publisher, check_mode, wait_for)


def _remove(api, params, volcano, publisher, check_mode, wait_for):
    """absent: the reverse of present's order. The webhooks before their server, the publisher's
    DaemonSet and rights before the Numatopologies it would otherwise write again (with wait, once
    its pods are gone: node_publisher.remove_publisher), CRDs and Namespaces (when their switch is
    on) last."""
    problems = absent_problems(api, params, volcano, publisher)
    if problems:
        raise VolcanoError(["nothing was deleted"] + problems)
    result = StackResult(scheduler_conf_created=False)

    def remove(obj):
        changed, before = api.delete(obj, check_mode)
        result.record(obj, changed, before, {})

    webhooks = [obj for obj in volcano if obj["kind"] in WEBHOOK_KINDS]
    for obj in reversed(webhooks):
        remove(obj)
    if publisher:
        _skipped, left = remove_publisher(api, params, publisher, NUMATOPOLOGY, check_mode, wait_for, result)
        if left:
            result["warnings"] = [publisher_pods_left(left, params)]
    for obj in reversed(volcano):
        switch = {"CustomResourceDefinition": "delete_crds", "Namespace": "delete_namespace"}.get(obj["kind"])
        if obj["kind"] in WEBHOOK_KINDS:
            continue
        if switch and not params.get(switch):
            result.keep(obj, reason="%s is false" % switch)
            continue
        remove(obj)
    return result


def _deploy(api, params, volcano, publisher, check_mode, wait_for):
    """present: every object but the webhook configurations, then (with wait) the Deployments that
    serve the webhooks, the webhooks, the other Deployments, the publisher and its Numatopologies."""
    webhooks = [obj for obj in volcano if obj["kind"] in WEBHOOK_KINDS]
    if webhooks and not params["wait"]:
        raise VolcanoError(
            "wait is false, but the manifest has admission webhooks (%s): they fail closed, so numa.kube "
            "applies them only once the Deployment that serves them is Available, which takes waiting; nothing "
            "was applied. Set wait: true, or admission: false to leave the webhooks out"
            % ", ".join(describe(obj) for obj in webhooks))
    if not volcano and api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                               "numatopologies.nodeinfo.volcano.sh") is None:
        raise VolcanoError("the cluster has no Numatopology CRD (numatopologies.nodeinfo.volcano.sh): install "
                           "Volcano first, or give manifest (Volcano's release manifest) to install it")
    # the publisher's nodes, and too many of them unavailable refused, before anything is applied
    selection = publisher_selection(api, params) if publisher and params["wait"] else None
    # every object of another manager named at once, before anything is applied (the scheduler's
    # ConfigMap is never applied over an existing one, whoever made it)
    api.claim([obj for obj in volcano + publisher if not is_scheduler_conf(obj)])
    result = StackResult(scheduler_conf_created=False)

    def apply(obj):
        if is_scheduler_conf(obj):
            if api.get(path_of(obj)) is not None:
                result.keep(obj)
                return
            result["scheduler_conf_created"] = True
        apply_recorded(api, obj, check_mode, result)

    for obj in volcano + publisher:
        if obj["kind"] not in WEBHOOK_KINDS:
            apply(obj)
    if check_mode or not params["wait"]:
        for obj in webhooks:  # only a dry run gets here with webhooks (refused above without wait)
            apply(obj)
        return result

    waits = result["wait_seconds"] = {}

    def wait_available(deployment, held):
        def check():
            live = api.get(path_of(deployment))
            done, text = deployment_ready(live)
            return done, (text, deployment_progress(live))

        outcome = wait_for(check, params["wait_timeout"], progress=lambda value: value[1])
        done, (text, _score), waited = outcome
        if not done:
            text = "%s; %s" % (why_waiting_ended(outcome, params["wait_timeout"]), text)
            why = (": the webhook configurations (%s) were not applied, so nothing fails closed on them; see "
                   "kubectl -n %s describe deployment %s, and run again once it can start"
                   % (", ".join(describe(o) for o in held), deployment["metadata"]["namespace"],
                      deployment["metadata"]["name"])) if held else ""
            raise VolcanoError("%s did not become available (%s)%s" % (describe(deployment), text, why))
        waits[describe(deployment)] = round(waited, 1)

    servers = webhook_servers(volcano) if webhooks else []
    for deployment in servers:
        wait_available(deployment, webhooks)
    for obj in webhooks:
        apply(obj)
    for deployment in volcano:
        if deployment["kind"] == "Deployment" and deployment not in servers:
            wait_available(deployment, [])
    if publisher:
        result["numatopologies"] = _wait_publisher(api, params, publisher, wait_for, result, selection)
    return result


def publisher_selection(api, params):
    """(the publisher's selected node names, {node: why} of those unavailable, how many may be),
    read before anything is applied; VolcanoError naming them when too many are unavailable."""
    return unavailable(params, selected_nodes(api, params, NUMATOPOLOGY, VolcanoError), VolcanoError)


def _wait_publisher(api, params, publisher, wait_for, result, selection=None):
    """The selected nodes, once the publisher runs on each and each has its Numatopology (but for
    the unavailable ones unavailable_nodes_allowed accepts, named in the result)."""
    selection = selection or publisher_selection(api, params)
    names, down, _allowed = selection
    stall = params["wait_timeout"]
    wait_rollout(api, params, publisher[-1], selection, wait_for, VolcanoError)

    def published(pending):
        # one list of the objects' metadata a round (a GET each when few are left): existence is the proof
        found = api.named(NUMATOPOLOGY.list_path, pending, metadata_only=True)
        return dict((name, None if obj is not None else "no Numatopology yet") for name, obj in found.items())

    outcome = wait_pending([name for name in names if name not in down], published, wait_for, stall)
    warn_down(result, down)
    if not outcome[0]:
        raise VolcanoError("no Numatopology for %s: %s; see the publisher's logs (kubectl -n %s logs ds/%s)"
                           % (", ".join(sorted(outcome[1])), why_waiting_ended(outcome, stall), params["namespace"],
                              PUBLISHER))
    return [name for name in names if name not in down]
