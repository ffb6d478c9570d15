# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API as the cluster-stack modules use it: one client, server-side apply with check
mode and diff, deletes, lists in pages, kubelet configuration through the nodes/proxy API, calls
bounded in number and time, and waits that never outlive the task's deadline.

Authentication takes the options of kubernetes.core's modules (and their K8S_AUTH_* variables), so
that a playbook passes the cluster stacks what it already passes those modules.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import threading
import time

from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    FIELD_MANAGER,
    MANAGED_BY,
    STACK_LABEL,
    KubeApiError,
    OwnershipError,
    check_name,
    comparable,
    describe,
    label_selector,
    manager_of,
    owned,
    path_of,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import wait_for, wait_progress

try:
    from concurrent.futures import ThreadPoolExecutor
except ImportError:  # Python 2 (sanity's compile test only): calls then run one after the other
    ThreadPoolExecutor = None

try:
    from urllib.parse import quote
except ImportError:  # Python 2 (sanity's compile test only)
    from urllib import quote  # pylint: disable=no-name-in-module

try:
    from urllib3.util.retry import Retry
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError
    HAS_KUBERNETES = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_KUBERNETES = False

    class DynamicApiError(Exception):
        """Stands in for the client's error class when the client is missing."""


# Every request gives up on a server that does not accept the connection within CONNECT_TIMEOUT
# seconds or stops answering for READ_TIMEOUT seconds (the read timeout runs between bytes, so
# a large answer that keeps arriving is not cut). A busy server's Retry-After is honoured at
# most RETRY_AFTER_TIMES times, and never past the task's deadline.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60
RETRY_AFTER_TIMES = 10
# the least a request is given when the task's time is all but gone, so that a wait's last look,
# which lands on the deadline itself, is still sent; no request outlives the deadline by more
MIN_REQUEST_SECONDS = 0.5
DEFAULT_WAIT_TIMEOUT = 300
MAX_WAIT_TIMEOUT = 3600
# the hard limit of a task whose waits run while things move (wait_ceiling): a day at most
DEFAULT_WAIT_CEILING = 3600
MAX_WAIT_CEILING = 86400
# lists are read LIST_PAGE objects a request (the API server's own default page for kubectl is 500);
# a continue token that expired (410) starts the list again, at most LIST_RESTARTS times
LIST_PAGE = 500
LIST_RESTARTS = 3
# a list is read in at most LIST_MAX_PAGES pages (500,000 objects at LIST_PAGE, far beyond any
# cluster's Nodes or a stack's pods): a server that keeps handing out continue tokens is refused
LIST_MAX_PAGES = 1000
# with this many objects or fewer left to look at, a GET each costs less than a LIST of all
FEW_PENDING = 10
# calls through the API server to kubelets or pods (nodes/proxy, pods/proxy): at most PROXY_WORKERS
# at once, each given PROXY_TIMEOUT seconds to connect and between bytes
PROXY_WORKERS = 8
PROXY_TIMEOUT = 10
# ... and at most PROXY_CALL_SECONDS for the whole answer (the read timeout runs between bytes, so
# a kubelet or pod sending a byte now and then would hold a worker for ever): the answer is read
# in pieces, and the call ends once this much time has passed (plus at most one read timeout)
PROXY_CALL_SECONDS = 20
# a metadata-only list (meta.k8s.io/v1 PartialObjectMetadataList, any resource since 1.15), JSON
# objects as the fallback for a server that does not serve it
# How deep an answer's JSON may nest: Kubernetes objects (CRD schemas included) stay well inside it,
# and an answer nested deeper is refused where it is parsed, before any code walks it.
MAX_ANSWER_DEPTH = 128
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def _error_text(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        message = json.loads(body).get("message")
    except (TypeError, ValueError, AttributeError, RecursionError):
        message = None
    if not isinstance(message, str):
        # the API server's Status carries a string; anything else is shown as the body was sent
        message = None
    return (message or (body or str(exc)).strip())[:2000]


def nesting_depth(value):
    """How deep ``value`` (decoded JSON) nests: 0 for a scalar, 1 for a flat object or list. Walked
    without recursion, so that any depth is measured safely."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _seconds(value):
    """Seconds for a message: 6 for 6.0, 0.5 for 0.5."""
    return ("%.1f" % value).rstrip("0").rstrip(".")


class _NoDiscovery:
    def __init__(self, client, cache_file):
        self.client = client


class KubeApi:
    """A connection to the API server, with the task's deadline and numa.kube's ownership rules."""

    def __init__(self, params, clock=time.monotonic, stack=None):
        configuration = kube_client.Configuration()
        kubeconfig = params.get("kubeconfig")
        context = params.get("context")
        try:
            if isinstance(kubeconfig, dict):
                kube_config.load_kube_config_from_dict(kubeconfig, context=context,
                                                       client_configuration=configuration)
            elif kubeconfig or not params.get("host"):
                path = os.path.expanduser(kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config").split(":")[0])
                if kubeconfig or os.path.exists(path) or context:
                    kube_config.load_kube_config(config_file=path, context=context,
                                                 client_configuration=configuration)
                else:
                    kube_config.load_incluster_config(client_configuration=configuration)
        except (kube_config.ConfigException, OSError, ValueError) as exc:
            raise KubeApiError("cannot load the cluster's credentials (kubeconfig %s, context %s): %s"
                               % ("(given as a mapping)" if isinstance(kubeconfig, dict) else kubeconfig or "default",
                                  context or "current", exc))
        if params.get("host"):
            configuration.host = params["host"]
        if params.get("api_key"):
            configuration.api_key = {"authorization": "Bearer " + params["api_key"]}
        if params.get("validate_certs") is not None:
            configuration.verify_ssl = params["validate_certs"]
        for option, field in (("ca_cert", "ssl_ca_cert"), ("client_cert", "cert_file"),
                              ("client_key", "key_file"), ("proxy", "proxy")):
            if params.get(option):
                setattr(configuration, field, params[option])
        # urllib3 may try a refused connection again, quickly; never a read that timed out (a
        # silent server) and never a status: busy answers are request()'s to repeat, within the deadline
        configuration.retries = Retry(total=3, connect=3, read=0, status=0, other=0, redirect=0,
                                      backoff_factor=0.5, respect_retry_after_header=False)
        # only its request() is used, with paths from KINDS: no discovery round trips, no cache file
        self.client = DynamicClient(kube_client.ApiClient(configuration), discoverer=_NoDiscovery)
        self.sleep = time.sleep
        self.clock = clock
        self.timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
        # the task's hard limit: wait_ceiling where the module has it (its waits then run while
        # things move, each failing after wait_timeout seconds without progress), else wait_timeout
        self.limit_option = "wait_ceiling" if params.get("wait_ceiling") else "wait_timeout"
        self.wait_timeout = params.get("wait_ceiling") or params.get("wait_timeout") or DEFAULT_WAIT_TIMEOUT
        self.deadline = clock() + self.wait_timeout
        # how long one request may go without its whole answer where wait_timeout is a stall window
        # (modules with wait_ceiling): that window; elsewhere wait_timeout bounds the task, and what
        # is left of it bounds the request (see request_budget)
        self.stall = params.get("wait_timeout") if params.get("wait_ceiling") else None
        self.adopt = bool(params.get("adopt"))
        self.stack = stack
        self.kept = []  # objects absent left alone because numa.kube did not make them

    def remaining(self):
        return self.deadline - self.clock()

    def extend_deadline(self, seconds):
        """Time beyond the deadline for undoing a failed change (never for the change itself)."""
        self.deadline = max(self.deadline, self.clock()) + seconds

    def request_budget(self):
        """Seconds the next request may take in all, its whole answer read: what is left of the
        task's deadline and at most the stall window (wait_timeout: a request without its answer for
        that long is a wait without progress), but not below MIN_REQUEST_SECONDS (a wait's last
        look, sent on the deadline, still gets a moment for its answer)."""
        left = self.remaining() if self.stall is None else min(self.remaining(), self.stall)
        return max(left, MIN_REQUEST_SECONDS)

    def request_timeout(self):
        """(connect, read) seconds for the next request: the defaults, cut to its budget."""
        left = self.request_budget()
        return (min(self.timeout[0], left), min(self.timeout[1], left))

    def request(self, method, path, body=None, text=False, **params):
        """The decoded answer (a dict; the body as a string with ``text``), None for 404 on a GET
        or DELETE; KubeApiError otherwise. The body is decoded here: the dynamic client's own
        decoding wants a ``kind`` (kubelet's /configz has none) and turns a log that happens to be
        JSON into an object.

        Each attempt has the connect and read timeouts. An API server that is busy or briefly unable
        to serve (429, or a 5xx with Retry-After: max requests in flight, a timeout, etcd leader
        change) is asked again after the seconds it names, as client-go does, at most
        RETRY_AFTER_TIMES times and never when the wait would pass the task's deadline; every
        request here may be repeated (GETs, server-side applies of the same object, DELETEs whose
        404 counts as done). An answer without Retry-After is final."""
        verb = method.upper()
        # a wait's last look lands on the deadline itself; a request more than MIN_REQUEST_SECONDS
        # past it belongs to a task that has run out of time
        if self.remaining() < -MIN_REQUEST_SECONDS:
            raise KubeApiError("%s %s was not sent: the task's deadline (%s %s s) has passed; raise %s if the "
                               "cluster needs longer" % (verb, path, self.limit_option, self.wait_timeout,
                                                         self.limit_option), deadline=True)
        params.setdefault("_request_timeout", self.request_timeout())
        total = params.pop("_total_seconds", None)
        retried = 0
        while True:
            try:
                data = self._within(self.request_budget() if total is None else min(total, self.request_budget()),
                                    verb, path, body, params)
                break
            except DynamicApiError as exc:
                status = getattr(exc, "status", None)
                if status == 404 and verb in ("GET", "DELETE"):
                    return None
                seconds = retry_after(exc)
                message = "%s %s: %s %s" % (verb, path, status, _error_text(exc))
                busy = status == 429 or (isinstance(status, int) and status >= 500)
                if seconds is None:
                    raise KubeApiError(message, status, transient=busy)
                if retried >= RETRY_AFTER_TIMES:
                    raise KubeApiError("%s (the same after %d retries)" % (message, retried), status, transient=busy)
                if self.clock() + seconds > self.deadline:
                    raise KubeApiError("%s; the server asks to be asked again in %d s, past the task's deadline "
                                       "(%s %s s): try later or raise it"
                                       % (message, seconds, self.limit_option, self.wait_timeout), status)
                retried += 1
                self.sleep(seconds)
            except KubeApiError:  # already names the request and the server
                raise
            except Exception as exc:  # connection refused, TLS, timeouts: name the server
                raise KubeApiError("%s %s on %s: %s" % (verb, path, self.client.configuration.host, exc),
                                   transient=True)
        data = data.decode("utf-8", "replace")
        if text:
            return data
        try:
            decoded = json.loads(data) if data.strip() else {}
        except (ValueError, RecursionError):
            raise KubeApiError("%s %s: the answer is not JSON (or nests deeper than Python can read): %.200s"
                               % (verb, path, data))
        if not isinstance(decoded, dict):
            raise KubeApiError("%s %s: the answer is not a JSON object: %.200s" % (verb, path, data))
        if nesting_depth(decoded) > MAX_ANSWER_DEPTH:
            raise KubeApiError("%s %s: the answer nests deeper than %d levels, which no Kubernetes object does; "
                               "refused" % (verb, path, MAX_ANSWER_DEPTH))
        return decoded

    def _within(self, seconds, verb, path, body, params):
        """The whole body of one attempt at ``verb path``, sent and read within ``seconds`` in all.

        The attempt runs in a thread of its own: the connect and read timeouts bound each step of
        it, but a server that trickles its headers or its body a byte at a time never trips them,
        so the caller waits for the whole at most ``seconds`` and then gives up on it (the thread,
        left behind, ends at its own timeouts). The attempt's own exceptions (the API's answers,
        connection errors) are raised here as they were raised there."""
        outcome = {}

        def attempt():
            try:
                answer = self.client.request(verb, path, body=body, serialize=False, **params)
                outcome["data"] = self._read_within(answer, seconds, verb, path)
            except BaseException as exc:  # pylint: disable=broad-except  # raised again in the caller
                outcome["error"] = exc

        worker = threading.Thread(target=attempt, name="kube-request", daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            raise KubeApiError("%s %s on %s: no complete answer within %s s (the request's share of the task's "
                               "time, wait_timeout at most); the server accepts requests but answers too slowly or "
                               "not at all" % (verb, path, self.client.configuration.host, _seconds(seconds)), transient=True)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["data"]

    def _read_within(self, answer, seconds, verb, path):
        """The body of ``answer`` (a urllib3 response not yet read), read in pieces and given up
        after ``seconds`` in all (a piece waits at most the read timeout)."""
        end = self.clock() + seconds
        read = getattr(answer, "read1", None) or answer.read
        chunks = []
        try:
            while True:
                if self.clock() > end:
                    raise KubeApiError("%s %s: the answer was not complete after %s s (%d bytes so far); the far "
                                       "end sends too slowly" % (verb, path, _seconds(seconds), sum(len(c) for c in chunks)),
                                       transient=True)
                try:
                    chunk = read(65536)
                except Exception as exc:  # a read timeout, a reset: name the server
                    raise KubeApiError("%s %s on %s: %s" % (verb, path, self.client.configuration.host, exc),
                                       transient=True)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        finally:
            release = getattr(answer, "release_conn", None)
            if release:
                release()

    def get(self, path, **params):
        return self.request("GET", path, **params)

    def claim(self, objects):
        """Refuse, before anything is applied, when any of ``objects`` exists without numa.kube's
        label (unless the task adopts): OwnershipError naming each and its manager."""
        if self.adopt:
            return
        foreign = []
        for obj in objects:
            live = self.get(path_of(obj))
            if live is not None and not owned(live, self.stack):
                foreign.append("%s (%s)" % (describe(obj), manager_of(live)))
        if foreign:
            raise OwnershipError("%s exist%s and numa.kube did not make %s: nothing was changed. Choose another name "
                                 "or namespace, remove %s, or set adopt: true to let numa.kube take %s over"
                                 % (", ".join(foreign), "s" if len(foreign) == 1 else "",
                                    "it" if len(foreign) == 1 else "them", "it" if len(foreign) == 1 else "them",
                                    "it" if len(foreign) == 1 else "them"))

    def apply(self, obj, check_mode=False):
        """Server-side apply as numa.kube; (changed, before, after) with before/after comparable.

        The object gets numa.kube's managed-by label. An object already there without it is
        someone else's: OwnershipError names it and its manager, unless the task adopts
        (``adopt``). Conflicting fields are taken over (forced) only on objects numa.kube owns or
        adopts; on any other the API server's conflict error stands."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta["labels"] = dict(meta.get("labels") or {}, **MANAGED_BY)
        if self.stack:
            meta["labels"][STACK_LABEL] = self.stack
        path = path_of(obj)
        before = self.get(path)
        if before is not None and not owned(before, self.stack) and not self.adopt:
            raise OwnershipError("%s exists and numa.kube did not make it (%s): nothing was changed. Choose "
                                 "another name or namespace, remove it, or set adopt: true to let numa.kube "
                                 "take it over" % (describe(obj), manager_of(before)))
        params = {"content_type": "application/apply-patch+yaml", "field_manager": FIELD_MANAGER,
                  "force_conflicts": True}
        if check_mode:
            params["dry_run"] = "All"
        after = self.request("PATCH", path, body=obj, **params)
        if before is None:
            changed = True
        elif check_mode:
            changed = comparable(before) != comparable(after)
        else:
            # the server also stores an apply that only reorders managedFields (another manager's
            # status write came in between: kubernetes#88031), moving resourceVersion; what was
            # asked for is unchanged then
            changed = (before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]
                       and comparable(before) != comparable(after))
        return changed, comparable(before), comparable(after)

    def delete(self, obj, check_mode=False):
        """Delete if present and numa.kube's (its dependents go in the background); (changed, before).

        An object without numa.kube's managed-by label is left alone and named in ``kept``."""
        path = path_of(obj)
        before = self.get(path)
        if before is not None and not owned(before, self.stack):
            self.kept.append("%s (%s)" % (describe(obj), manager_of(before)))
            return False, comparable(before)
        if before is None or check_mode:
            return before is not None, comparable(before)
        self.request("DELETE", path, propagation_policy="Background")
        return True, comparable(before)

    def list(self, path, page=LIST_PAGE, **params):
        """Every item at ``path`` (a collection), read ``page`` at a time with limit and continue.
        A continue token the server no longer holds (410 Expired: its snapshot left etcd's
        compaction window) starts the list again from the first page, as client-go's pager falls
        back to a full list, at most LIST_RESTARTS times."""
        for restart in range(LIST_RESTARTS + 1):
            items, token, seen = [], None, set()
            try:
                while True:
                    query = dict(params, limit=page)
                    if token:
                        query["_continue"] = token
                    answer = self.get(path, **query) or {}
                    items.extend(answer.get("items") or [])
                    token = (answer.get("metadata") or {}).get("continue")
                    if not token:
                        return items
                    if token in seen or len(seen) + 1 >= LIST_MAX_PAGES:
                        raise KubeApiError(
                            "GET %s: the API server keeps returning continue tokens (%s after %d pages of %d): a "
                            "list never ends this way; check the API server, or a proxy in front of it, with "
                            "kubectl get --raw '%s?limit=%d' (its metadata.continue must end)"
                            % (path, "the same token again" if token in seen else "still one",
                               len(seen) + 1, page, path, page))
                    seen.add(token)
            except KubeApiError as exc:
                if exc.status != 410 or not token or restart == LIST_RESTARTS:
                    raise
        return items  # not reached

    def nodes(self, selector=None):
        """The Nodes matching a label selector mapping (every Node for an empty one), by name."""
        params = {}
        if selector:
            params["label_selector"] = label_selector(selector, "node_selector")
        return sorted(self.list("/api/v1/nodes", **params), key=lambda node: node["metadata"]["name"])

    def named(self, list_path, names, metadata_only=False, **params):
        """{name: the object or None} for ``names`` among the cluster-scoped objects at
        ``list_path``: a GET each when FEW_PENDING or fewer are asked for, else one (paged) list."""
        if len(names) <= FEW_PENDING:
            return dict((name, self.get("%s/%s" % (list_path, quote(check_name(name, "name"), safe=""))))
                        for name in names)
        if metadata_only:
            params["header_params"] = {"Accept": METADATA_ONLY}
        found = dict((item["metadata"]["name"], item) for item in self.list(list_path, **params))
        return dict((name, found.get(name)) for name in names)

    def kubelet_config(self, node):
        """The configuration the node's kubelet runs with (its /configz, through the API server)."""
        answer = self.get("/api/v1/nodes/%s/proxy/configz" % quote(check_name(node, "node name"), safe=""),
                          _request_timeout=self.proxy_timeout(), _total_seconds=PROXY_CALL_SECONDS)
        if not isinstance(answer, dict) or not isinstance(answer.get("kubeletconfig"), dict):
            raise KubeApiError("the kubelet of %s answered /configz without a kubeletconfig object: %.200r"
                               % (node, answer))
        return answer["kubeletconfig"]

    def proxy_timeout(self):
        """(connect, read) seconds for a call through the API server to a kubelet or a pod."""
        connect_seconds, read_seconds = self.request_timeout()
        return (min(connect_seconds, PROXY_TIMEOUT), min(read_seconds, PROXY_TIMEOUT))

    def wait_for(self, check, timeout=None, interval=2.0, progress=None):
        """As the module-level wait_for, never past the task's deadline. With ``progress`` (a
        function of check's value, higher when further along) ``timeout`` is the time without
        progress after which the wait fails, and the task's deadline its hard limit."""
        if progress is not None:
            stall = DEFAULT_WAIT_TIMEOUT if timeout is None else timeout
            # a request that may well succeed if sent again (a timeout, a reset connection, a 5xx
            # during an API server failover) is a round without progress, not the end of a wait
            # that moves; a refusal (403, 404 of the object's collection...) ends it
            return wait_progress(check, stall, max(self.remaining(), 0), progress, interval,
                                 clock=self.clock, sleep=self.sleep,
                                 transient=lambda exc: getattr(exc, "transient", False))
        limit = self.remaining() if timeout is None else min(timeout, self.remaining())
        return wait_for(check, max(limit, 0), interval, clock=self.clock, sleep=self.sleep)


def bounded_map(function, items, workers=PROXY_WORKERS, stop=None):
    """{item: (function(item), None) or (None, the KubeApiError it raised)} with at most
    ``workers`` calls at once (each call bounds its own time: requests carry their timeouts).
    Once ``stop()`` is true (the task's deadline passed) the items not yet called are not: each
    gets a KubeApiError with ``deadline`` set, so the caller tells them from answers."""
    def call(item):
        if stop is not None and stop():
            return item, (None, KubeApiError("not asked: the task's deadline had passed", deadline=True))
        try:
            return item, (function(item), None)
        except KubeApiError as exc:
            return item, (None, exc)

    items = list(items)
    if ThreadPoolExecutor is None or len(items) <= 1 or workers <= 1:
        return dict(call(item) for item in items)
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return dict(pool.map(call, items))


def retry_after(exc):
    """The seconds a 429, or a 5xx carrying Retry-After, asks to wait (client-go's rule: whole
    seconds only); None for any other answer."""
    status = getattr(exc, "status", None)
    if status != 429 and not (isinstance(status, int) and 500 <= status <= 599):
        return None
    headers = getattr(exc, "headers", None) or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            value = str(value).strip()
            # ASCII digits only: str.isdigit() also takes superscripts and other scripts' digits,
            # which int() then refuses
            return int(value) if value and len(value) <= 6 and all("0" <= c <= "9" for c in value) else None
    return None
