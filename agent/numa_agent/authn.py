# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may read the exporter's /metrics: the scraper's bearer token, judged by the API server.

The way kube-rbac-proxy and kubelet's own /metrics decide: a TokenReview says whose token it is
(the service account of Prometheus, usually), then a SubjectAccessReview whether that user, with
its groups, extra attributes and uid, may ``get`` the non-resource URL ``/metrics`` (what
kube-prometheus's Prometheus ClusterRole grants with ``nonResourceURLs: [/metrics]``).

Each verdict is kept a short while (60 s when allowed, 10 s when refused), by the token's SHA-256,
in one of two tables of bounded size, one for allowed verdicts and one for refusals, so that a scrape
normally costs no request and no number of made-up tokens pushes a scraper's allowed verdict out; a revoked token or grant
stops working within that time. An allowed verdict older than a third of its life is reviewed
again in the background while the table still answers, so a scraper that comes back every 30 s
never waits on the API server after its first scrape; a refusal from that review replaces the
verdict at once, a failure leaves it to its own expiry. Times are monotonic.

A scrape waits for a review at most ``wait`` seconds (the client's timeout, ``--review-timeout``),
both requests and a free slot together, well inside Prometheus' scrape timeout (10 s unless the
ServiceMonitor says otherwise): an API server that has not answered by then gets the scraper a 503
(not kept): never a hang, never a guess. The review goes on meanwhile, and its verdict, once in, is
kept for the next scrape; scrapes with the same token share the review under way. Reviews of tokens
with no kept verdict are also bounded in rate (REVIEW_RATE a second, REVIEW_BURST at once): beyond it
a scrape gets a 503 without a request, so a stream of made-up tokens costs the API server a few
reviews a second, not one each. The exporter's
service account needs ``create`` on tokenreviews and subjectaccessreviews (what
``system:auth-delegator`` grants).
"""

import collections
import hashlib
import logging
import threading
import time

from numa_agent.kube import ApiError, Client

LOG = logging.getLogger("authn")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ALLOWED_SECONDS = 60.0
DENIED_SECONDS = 10.0
CACHE_SIZE = 1024
IN_FLIGHT = 4
# new reviews (tokens with no kept verdict) a second, and at once after a quiet while
REVIEW_RATE = 8.0
REVIEW_BURST = 32
# far above any service account token (a signed JWT of a few hundred bytes to 2 KB); a longer one
# is refused here rather than sent on to the API server
MAX_TOKEN_BYTES = 8192


def bearer_token(header):
    """The token of an ``Authorization: Bearer <token>`` header; None for any other form."""
    scheme, _sep, token = (header or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token or len(token) > MAX_TOKEN_BYTES:
        return None
    return token


class _Review(object):
    """A review under way: ``done`` is set once ``verdict`` ((status, reason)) is in."""

    def __init__(self):
        self.done = threading.Event()
        self.verdict = None


class TokenReviewer(object):
    """The ``authorize`` callable of metrics_server: ``(status, reason)`` for an Authorization header.

    ``client`` is the agent's API client (numa_agent.kube.Client; its timeout bounds each request);
    ``path`` the non-resource URL asked about; ``wait`` the most a scrape waits for a verdict
    (default the client's timeout); ``refresh_after`` the age from which an allowed verdict is
    reviewed again in the background (default a third of ``allowed_seconds``). At most
    ``in_flight`` reviews run at once: a request that finds no free slot within its wait gets a 503
    (a flood of made-up tokens must not become a flood of requests to the API server), and a
    refresh that finds none is tried again at the next scrape.
    """

    def __init__(self, client, path="/metrics", allowed_seconds=ALLOWED_SECONDS, denied_seconds=DENIED_SECONDS,
                 cache_size=CACHE_SIZE, in_flight=IN_FLIGHT, clock=time.monotonic, wait=None, refresh_after=None,
                 review_rate=REVIEW_RATE, review_burst=REVIEW_BURST):
        self.client = client
        self.path = path
        self.seconds = {200: allowed_seconds, 401: denied_seconds, 403: denied_seconds}
        self.cache_size = cache_size
        self.clock = clock
        self.wait = client.timeout if wait is None else wait
        self.refresh_after = allowed_seconds / 3.0 if refresh_after is None else refresh_after
        # token digest -> (until, status, reason, reviewed at), oldest first: allowed verdicts, refusals
        self.cache = collections.OrderedDict()
        self.refused = collections.OrderedDict()
        self.review_rate, self.review_burst = float(review_rate), float(review_burst)
        self.budget, self.budget_at = float(review_burst), None
        self.pending = {}  # token digest -> the _Review under way
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(in_flight)
        # one slot of its own for the background refresh of allowed verdicts: reviews of unknown
        # tokens (a flood of made-up ones) can take every other slot, never this one, so a scraper's
        # verdict is renewed before it expires
        self.refresh_slots = threading.BoundedSemaphore(1)

    def __call__(self, header):
        token = bearer_token(header)
        if token is None:
            return 401, "no bearer token: send Authorization: Bearer <a service account token>"
        key = hashlib.sha256(token.encode("utf-8")).hexdigest()
        kept = self._kept(key, token)
        if kept is not None:
            return kept
        if not self._spend(key):
            return 503, "too many unknown tokens to review just now; try again"
        deadline = time.monotonic() + self.wait
        review = self._start(key, token, deadline)
        if review is None:
            return 503, "too many token reviews under way; try again"
        if not review.done.wait(max(0.0, deadline - time.monotonic())):
            LOG.warning("the API server did not review a scraper's token within %g s; the review goes on, its "
                        "verdict is kept for the next scrape", self.wait)
            return 503, "the API server did not review the token (no answer)"
        return review.verdict

    def _spend(self, key):
        """Whether a review of this token may start (or one is under way already): the rate's budget
        refills REVIEW_RATE a second up to REVIEW_BURST, and each new review spends one."""
        now = self.clock()
        with self.lock:
            if key in self.pending:
                return True
            if self.budget_at is not None:
                self.budget = min(self.review_burst, self.budget + max(0.0, now - self.budget_at) * self.review_rate)
            self.budget_at = now
            if self.budget < 1.0:
                return False
            self.budget -= 1.0
            return True

    def _kept(self, key, token):
        """The kept verdict (None when there is none or it expired), refreshed in the background when old."""
        now = self.clock()
        with self.lock:
            table = self.cache if key in self.cache else self.refused
            found = table.get(key)
            if found is None:
                return None
            until, status, reason, reviewed = found
            if until <= now:
                del table[key]
                return None
            if status == 200 and now - reviewed >= self.refresh_after and key not in self.pending:
                if self.refresh_slots.acquire(blocking=False):
                    try:
                        self._run(key, token, self.refresh_slots)
                    except RuntimeError as exc:  # no thread to be had: the kept verdict still answers
                        LOG.warning("could not start the refresh of a scraper's verdict: %s", exc)
            return status, reason

    def _start(self, key, token, deadline):
        """The review of this token under way, started if there is none; None when no slot freed in time."""
        with self.lock:
            review = self.pending.get(key)
        if review is not None:
            return review
        if not self.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return None
        with self.lock:
            review = self.pending.get(key)
            if review is not None:  # another scrape with this token started one meanwhile
                self.slots.release()
                return review
            return self._run(key, token)

    def _run(self, key, token, slots=None):
        """Start a review in its own thread (the caller holds the lock and a slot of ``slots``, by
        default the reviews' own, which the thread frees).

        A thread that cannot be started (RuntimeError: the process or its cgroup is out of threads,
        as a flood of connections can make it) frees the slot and leaves no review pending: a review
        never started would hold its slot and its token's later scrapes for good."""
        slots = self.slots if slots is None else slots
        review = _Review()
        thread = threading.Thread(target=self._reviewed, args=(key, token, review, slots), name="token-review",
                                  daemon=True)
        try:
            thread.start()
        except BaseException:
            slots.release()
            raise
        self.pending[key] = review  # (the thread needs the lock the caller holds before it looks)
        return review

    def _reviewed(self, key, token, review, slots):
        verdict = (503, "the credentials check failed")
        try:
            status, reason = self._review(token)
        except ApiError as exc:
            LOG.warning("could not review a scraper's token: %s", exc)
            verdict = (503, "the API server did not review the token (%s)" % (
                "HTTP %d" % exc.status if exc.status else "no answer"))
        except Exception:  # pylint: disable=broad-except
            LOG.exception("the review of a scraper's token failed")
        else:
            self._keep(key, status, reason)
            verdict = (status, reason)
        finally:
            with self.lock:
                if self.pending.get(key) is review:
                    del self.pending[key]
            slots.release()
            review.verdict = verdict
            review.done.set()

    def _keep(self, key, status, reason):
        """Keep a verdict in its table (allowed or refused), making room there alone: expired verdicts
        first, then the oldest."""
        now = self.clock()
        table = self.cache if status == 200 else self.refused
        with self.lock:
            self.cache.pop(key, None)
            self.refused.pop(key, None)
            if len(table) >= self.cache_size:
                for old in [k for k, value in table.items() if value[0] <= now]:
                    del table[old]
            while len(table) >= self.cache_size:
                table.popitem(last=False)
            table[key] = (now + self.seconds[status], status, reason, now)

    def _review(self, token):
        answer = self.client.request("POST", TOKEN_REVIEWS, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = answer.get("status") or {}
        if not status.get("authenticated"):
            # the API server's reason stays in the log: a scraper learns only that it failed
            LOG.info("a scraper's token was not authenticated: %s", status.get("error") or "no reason given")
            return 401, "the token is not valid"
        user = status.get("user") or {}
        name = user.get("username") or ""
        spec = {"user": name, "groups": user.get("groups") or [], "extra": user.get("extra") or {},
                "uid": user.get("uid") or "", "nonResourceAttributes": {"path": self.path, "verb": "get"}}
        answer = self.client.request("POST", ACCESS_REVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        status = answer.get("status") or {}
        if status.get("allowed") and not status.get("denied"):
            return 200, name
        LOG.info("%s may not get %s: %s", name, self.path, status.get("reason") or "no rule allows it")
        return 403, "user %s may not get %s (it needs a ClusterRole with nonResourceURLs: [%s], verbs: [get])" % (
            name, self.path, self.path)


def scraper_check(args, client=None):
    """The exporter's ``authorize`` callable from its options (None: open), or ValueError saying why not."""
    if args.authentication == "none":
        return None
    if not args.review_timeout > 0:
        raise ValueError("--review-timeout must be a positive number of seconds, got %s" % args.review_timeout)
    client = client or Client(timeout=args.review_timeout)
    if not client.usable():
        raise ValueError("--authentication=tokenreview asks the API server about each scraper's token, and this "
                         "process has no service account (token %s, KUBERNETES_SERVICE_HOST %s): run it in its pod, "
                         "or give --authentication=none where nothing but trusted scrapers reach the port"
                         % (client.token_file, "set" if client.base else "unset"))
    return TokenReviewer(client)
