# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's scraper check: TokenReview then SubjectAccessReview for /metrics, as
kube-rbac-proxy does; verdicts kept briefly in a bounded table; an API server that does not answer
gets the scraper a 503, never a hang."""

from __future__ import absolute_import, division, print_function

import argparse
import os
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from numa_agent.metrics import server as metrics_server
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent import authn, kube  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent.kube import ApiError, Client  # noqa: E402 pylint: disable=wrong-import-position

PROMETHEUS = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "4b1d",
              "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
              "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-numa-0"]}}
NOBODY = {"username": "system:serviceaccount:default:nobody", "uid": "77", "groups": ["system:authenticated"]}

# these tests time real threads, sockets or processes: they run in the foreground (tools/run-tiers timed)
pytestmark = pytest.mark.wall_clock


class FakeApi(object):
    """The API server's answers to reviews: tokens it knows, users it allows; every request recorded."""

    timeout = 0.2

    def __init__(self, tokens=None, allowed=("system:serviceaccount:monitoring:prometheus",), failing=False):
        self.tokens = {"prom": PROMETHEUS, "nobody": NOBODY} if tokens is None else tokens
        self.allowed, self.failing, self.requests = allowed, failing, []

    def usable(self):
        return True

    def request(self, method, path, body=None):
        self.requests.append((method, path, body))
        self.pause()
        if self.failing:
            raise ApiError(0, "POST %s: timed out" % path)
        if body["kind"] == "TokenReview":
            user = self.tokens.get(body["spec"]["token"])
            return {"status": {"authenticated": True, "user": user} if user else
                    {"authenticated": False, "error": "invalid bearer token"}}
        allowed = body["spec"]["user"] in self.allowed
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC policy matched"}}

    def pause(self):
        """Where an answer is held back (SlowApi)."""

    def kinds(self):
        return [body["kind"] for _method, _path, body in self.requests]


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_status_codes_and_what_is_asked_of_the_api_server():
    api = FakeApi()
    check = authn.TokenReviewer(api, clock=Clock())
    assert check(None) == (401, "no bearer token: send Authorization: Bearer <a service account token>")
    assert check("Basic dXNlcjpwYXNz")[0] == 401 and check("Bearer ")[0] == 401 and check("Bearer a b")[0] == 401
    assert api.requests == [], "no token, no request"
    assert check("Bearer forged") == (401, "the token is not valid")
    assert api.kinds() == ["TokenReview"], "an unknown token is never asked about in a SubjectAccessReview"
    assert check("bearer prom") == (200, PROMETHEUS["username"])
    method, path, review = api.requests[-1]
    assert (method, path) == ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    assert review == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": PROMETHEUS["username"], "groups": PROMETHEUS["groups"], "extra": PROMETHEUS["extra"],
        "uid": "4b1d", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}
    assert api.requests[-2] == ("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "prom"}})
    status, reason = check("Bearer nobody")
    assert status == 403
    assert reason == ("user system:serviceaccount:default:nobody may not get /metrics (it needs a ClusterRole "
                      "with nonResourceURLs: [/metrics], verbs: [get])")


def test_verdicts_are_kept_60_s_when_allowed_10_s_when_refused():
    api, clock = FakeApi(), Clock()
    check = authn.TokenReviewer(api, clock=clock, refresh_after=60)  # no refresh before expiry: see below
    for header in ("Bearer prom", "Bearer nobody", "Bearer forged"):
        check(header)
    asked = len(api.requests)
    clock.now += 9.9
    assert [check(h)[0] for h in ("Bearer prom", "Bearer nobody", "Bearer forged")] == [200, 403, 401]
    assert len(api.requests) == asked, "within 10 s every verdict comes from the table"
    clock.now += 0.2
    assert [check(h)[0] for h in ("Bearer prom", "Bearer nobody", "Bearer forged")] == [200, 403, 401]
    assert api.kinds()[asked:] == ["TokenReview", "SubjectAccessReview", "TokenReview"], "refusals asked again"
    asked = len(api.requests)
    clock.now += 49.8  # 59.9 s after the first review of prom
    api.allowed = ()  # the grant is taken away: a kept verdict may outlive it by at most 60 s
    assert check("Bearer prom")[0] == 200 and len(api.requests) == asked
    clock.now += 0.2
    assert check("Bearer prom")[0] == 403
    assert all("prom" not in key for key in check.cache), "tokens are kept only as digests"


def test_an_api_server_that_fails_gets_503_and_nothing_is_kept():
    api = FakeApi(failing=True)
    check = authn.TokenReviewer(api, clock=Clock())
    assert check("Bearer prom") == (503, "the API server did not review the token (no answer)")
    api.failing = False
    assert check("Bearer prom")[0] == 200, "a failure is not remembered as a refusal"
    api = FakeApi()

    def failing(*args):
        raise ApiError(500, "etcd timed out")

    api.request = failing
    assert authn.TokenReviewer(api)("Bearer prom") == (503, "the API server did not review the token (HTTP 500)")


def test_the_table_is_bounded_expired_verdicts_first_then_the_oldest():
    api, clock = FakeApi(tokens={"a": PROMETHEUS, "b": PROMETHEUS, "c": PROMETHEUS}), Clock()
    check = authn.TokenReviewer(api, cache_size=2, clock=clock)
    check("Bearer a")
    check("Bearer b")
    check("Bearer c")
    assert len(check.cache) == 2
    asked = len(api.requests)
    check("Bearer c")
    check("Bearer b")
    assert len(api.requests) == asked, "the two newest are kept"
    check("Bearer a")
    assert len(api.requests) == asked + 2, "the oldest went"
    api.tokens["d"] = PROMETHEUS
    clock.now += 61  # every verdict expired: room is made by dropping those, not a live one
    check("Bearer d")
    assert len(check.cache) == 1


def test_reviews_in_flight_are_bounded():
    release, entered = threading.Event(), threading.Event()
    api = FakeApi()
    real = api.request

    def slow(*args):
        entered.set()
        release.wait(10)
        return real(*args)

    api.request = slow
    check = authn.TokenReviewer(api, in_flight=1, wait=0.5)
    first = []
    worker = threading.Thread(target=lambda: first.append(check("Bearer prom")))
    worker.start()
    assert entered.wait(10)
    started = time.monotonic()
    assert check("Bearer nobody") == (503, "too many token reviews under way; try again")
    assert time.monotonic() - started < 2
    worker.join(10)
    assert first == [(503, "the API server did not review the token (no answer)")], "its wait is over"
    release.set()
    assert wait_for(lambda: not check.pending)
    asked = len(api.requests)
    assert check("Bearer prom") == (200, PROMETHEUS["username"]), "the late verdict was kept"
    assert len(api.requests) == asked


def wait_for(condition, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


class SlowApi(FakeApi):
    """FakeApi whose answers come ``delay`` seconds late, or only once ``gate`` is set when it is cleared."""

    def __init__(self, delay=0.0, **kwargs):
        super(SlowApi, self).__init__(**kwargs)
        self.delay, self.gate = delay, threading.Event()
        self.gate.set()

    def pause(self):
        time.sleep(self.delay)
        self.gate.wait(10)


def test_a_scrape_waits_for_the_reviews_at_most_the_clients_timeout_and_the_late_verdict_is_kept():
    """Each review within the client's timeout, both together beyond it: the scrape still gets its
    answer within the timeout (Prometheus gives up at 10 s, and the scrape has more to do)."""
    api = SlowApi(delay=0.4)
    api.timeout = 0.5
    check = authn.TokenReviewer(api)
    started = time.monotonic()
    assert check("Bearer prom") == (503, "the API server did not review the token (no answer)")
    assert time.monotonic() - started < 0.75
    assert wait_for(lambda: not check.pending)
    api.delay = 0.0
    started = time.monotonic()
    assert check("Bearer prom") == (200, PROMETHEUS["username"])
    assert time.monotonic() - started < 0.2 and api.kinds() == ["TokenReview", "SubjectAccessReview"]


def test_a_hanging_review_does_not_hold_the_scrape():
    api = SlowApi()
    api.timeout = 0.3
    api.gate.clear()  # the API server accepted the request and says nothing
    check = authn.TokenReviewer(api)
    started = time.monotonic()
    assert check("Bearer prom")[0] == 503
    assert check("Bearer prom")[0] == 503
    assert time.monotonic() - started < 1.2
    assert api.kinds() == ["TokenReview"], "the second scrape waited on the review under way, asked nothing"
    api.gate.set()
    assert wait_for(lambda: not check.pending)
    assert check("Bearer prom")[0] == 200


def test_scrapes_with_one_token_share_the_review_under_way():
    api = SlowApi(delay=0.3)
    check = authn.TokenReviewer(api, wait=5)
    verdicts = []
    threads = [threading.Thread(target=lambda: verdicts.append(check("Bearer prom"))) for _thread in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert verdicts == [(200, PROMETHEUS["username"])] * 3
    assert api.kinds() == ["TokenReview", "SubjectAccessReview"]


def test_an_allowed_verdict_is_refreshed_in_the_background_so_a_scraper_every_30_s_never_waits():
    api, clock = SlowApi(), Clock()
    api.timeout = 0.3
    check = authn.TokenReviewer(api, clock=clock)
    assert authn.TokenReviewer(FakeApi()).clock is time.monotonic, "ages on the monotonic clock, not the wall"
    assert check("Bearer prom")[0] == 200
    for _scrape in range(10):  # five minutes of scrapes, the API server slower than the wait
        api.gate.clear()
        clock.now += 30
        started = time.monotonic()
        assert check("Bearer prom") == (200, PROMETHEUS["username"])
        assert time.monotonic() - started < 0.1, "served from the table while the refresh runs"
        api.gate.set()
        assert wait_for(lambda: not check.pending)
    assert api.kinds() == ["TokenReview", "SubjectAccessReview"] * 11
    # a refresh that fails leaves the verdict to its own expiry: it is not flushed
    api.failing = True
    clock.now += 30
    assert check("Bearer prom")[0] == 200
    assert wait_for(lambda: not check.pending)
    clock.now += 29.9  # 59.9 s after the last good review
    assert check("Bearer prom")[0] == 200
    assert wait_for(lambda: not check.pending)
    clock.now += 0.2
    assert check("Bearer prom")[0] == 503, "expired: reviewed in the foreground, which fails"
    # a refresh that finds the grant gone replaces the verdict at once
    api.failing = False
    assert check("Bearer prom")[0] == 200
    api.allowed = ()
    clock.now += 20
    assert check("Bearer prom")[0] == 200, "the refresh starts; the kept verdict answers meanwhile"
    assert wait_for(lambda: not check.pending)
    assert check("Bearer prom")[0] == 403


def test_a_clock_jump_past_every_verdict_costs_one_bounded_review():
    """A guest held stopped for ten minutes: its monotonic clock jumps on resume and every verdict
    has expired; the next scrape is reviewed again within the wait."""
    api, clock = SlowApi(), Clock()
    api.timeout = 0.3
    check = authn.TokenReviewer(api, clock=clock)
    assert check("Bearer prom")[0] == 200
    clock.now += 600
    api.gate.clear()
    started = time.monotonic()
    assert check("Bearer prom")[0] == 503
    assert time.monotonic() - started < 0.6
    api.gate.set()
    assert wait_for(lambda: not check.pending)
    assert check("Bearer prom")[0] == 200 and len(api.requests) == 4


def test_a_silent_api_server_gets_the_scraper_a_503_within_the_timeout(tmp_path):
    """The agent's real client against a loopback port that accepts and never answers."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    token = tmp_path / "token"
    token.write_text("exporter-token")
    try:
        client = Client("https://127.0.0.1:%d" % silent.getsockname()[1], token_file=str(token), verify=False,
                        timeout=0.5)
        started = time.monotonic()
        assert authn.TokenReviewer(client)("Bearer prom") == (503, "the API server did not review the token "
                                                                   "(no answer)")
        assert time.monotonic() - started < 5
    finally:
        silent.close()


def test_the_options_choose_the_check(tmp_path, monkeypatch):
    def args(**given):
        return argparse.Namespace(**dict({"authentication": "tokenreview", "review_timeout": 4.0}, **given))

    assert authn.scraper_check(args(authentication="none")) is None
    with pytest.raises(ValueError) as caught:
        authn.scraper_check(args(review_timeout=0.0))
    assert str(caught.value) == "--review-timeout must be a positive number of seconds, got 0.0"
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ValueError) as caught:
        authn.scraper_check(args())
    assert str(caught.value) == (
        "--authentication=tokenreview asks the API server about each scraper's token, and this process has no "
        "service account (token %s/token, KUBERNETES_SERVICE_HOST unset): run it in its pod, or give "
        "--authentication=none where nothing but trusted scrapers reach the port" % tmp_path)
    (tmp_path / "token").write_text("t")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    check = authn.scraper_check(args(review_timeout=2.5))
    assert isinstance(check, authn.TokenReviewer)
    assert (check.client.base, check.client.timeout) == ("https://10.96.0.1:443", 2.5)


def test_the_exporters_https_server_with_the_reviewer(tmp_path):
    """metrics_server on loopback with the reviewer, scraped with urllib as Prometheus scrapes."""
    pem = monitoring.make_certificates(["localhost"])
    for key, value in pem.items():
        (tmp_path / key).write_bytes(value)
    api = FakeApi()
    bound, stop, port = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=metrics_server.serve, args=(
        lambda: "numa_node_cpus_count{numa_node=\"0\"} 2\n", "127.0.0.1", 0, str(tmp_path / "tls.crt"),
        str(tmp_path / "tls.key")), kwargs=dict(ready=lambda p: (port.append(p), bound.set()), stop=stop,
                                                authorize=authn.TokenReviewer(api)))
    thread.start()
    assert bound.wait(30)
    context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))

    def get(path, token=None):
        headers = {"Authorization": "Bearer " + token} if token else {}
        request = urllib.request.Request("https://localhost:%d%s" % (port[0], path), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        assert get("/metrics") == (401, "numa-exporter: unauthorized: no bearer token: send Authorization: "
                                        "Bearer <a service account token>\n")
        assert get("/metrics", "forged") == (401, "numa-exporter: unauthorized: the token is not valid\n")
        status, body = get("/metrics", "nobody")
        assert status == 403 and "system:serviceaccount:default:nobody may not get /metrics" in body
        assert get("/metrics", "prom") == (200, "numa_node_cpus_count{numa_node=\"0\"} 2\n")
        assert get("/healthz")[0] == 200
        assert api.kinds() == ["TokenReview", "TokenReview", "SubjectAccessReview", "TokenReview",
                               "SubjectAccessReview"]
    finally:
        stop.set()
        thread.join(30)


def test_a_token_no_service_account_could_have_is_refused_without_asking_the_api_server():
    assert authn.bearer_token("Bearer " + "a" * authn.MAX_TOKEN_BYTES) == "a" * authn.MAX_TOKEN_BYTES
    assert authn.bearer_token("Bearer " + "a" * (authn.MAX_TOKEN_BYTES + 1)) is None
    assert authn.bearer_token("Basic dXNlcjpwYXNz") is None and authn.bearer_token("Bearer ") is None


def test_a_review_whose_thread_cannot_start_frees_its_slot_and_leaves_nothing_pending(monkeypatch, no_threads_named):
    """Out of threads (a flood of connections, a pod's pids limit): the scrape fails, but the slot
    and the token are free again, so the reviews come back once threads do."""
    api = FakeApi()
    check = authn.TokenReviewer(api, in_flight=1, wait=2)
    real_start = no_threads_named("token-review")
    with pytest.raises(RuntimeError):
        check("Bearer prom")
    assert check.pending == {}
    monkeypatch.setattr(threading.Thread, "start", real_start)
    assert check("Bearer prom") == (200, PROMETHEUS["username"])


def test_made_up_tokens_never_push_a_scrapers_allowed_verdict_out():
    """Hostile review: 5,000 distinct bad tokens evicted Prometheus's kept verdict (one table for both)."""
    api, clock = FakeApi(), Clock()
    check = authn.TokenReviewer(api, cache_size=8, clock=clock, review_burst=10000)
    assert check("Bearer prom")[0] == 200
    asked = len(api.requests)
    for index in range(200):
        clock.now += 0.01
        assert check("Bearer made-up-%d" % index)[0] == 401
    assert len(check.refused) == 8 and len(check.cache) == 1, "each table bounded on its own"
    reviews = len(api.requests)
    assert check("Bearer prom") == (200, PROMETHEUS["username"]) and len(api.requests) == reviews, \
        "the scraper's verdict is still kept: its scrape costs no request"
    assert reviews - asked == 200


def test_reviews_of_unknown_tokens_are_bounded_in_rate():
    """Hostile review: the rate of TokenReviews made-up tokens caused was unlimited."""
    api, clock = FakeApi(), Clock()
    check = authn.TokenReviewer(api, clock=clock, review_rate=2.0, review_burst=5)
    verdicts = [check("Bearer made-up-%d" % index)[0] for index in range(50)]
    assert verdicts[:5] == [401] * 5 and set(verdicts[5:]) == {503}, verdicts
    assert api.kinds().count("TokenReview") == 5, "beyond the burst no request reached the API server"
    clock.now += 1.0  # two more a second
    assert [check("Bearer later-%d" % index)[0] for index in range(3)] == [401, 401, 503]
    # a kept verdict costs nothing from the budget, and Prometheus's first scrape gets its review in time
    clock.now += 10.0
    assert check("Bearer prom")[0] == 200
    for _index in range(20):
        assert check("Bearer prom")[0] == 200
    assert api.kinds().count("TokenReview") == 8


class FloodApi(FakeApi):
    """FakeApi that holds back the reviews of every token but the scraper's until ``released``."""

    def __init__(self, **kwargs):
        super(FloodApi, self).__init__(**kwargs)
        self.released = threading.Event()

    def request(self, method, path, body=None):
        if body["kind"] == "TokenReview" and body["spec"]["token"] != "prom":
            self.released.wait(10)
        return super(FloodApi, self).request(method, path, body)


def test_a_flood_of_made_up_tokens_holding_every_review_slot_does_not_let_the_scrapers_verdict_expire():
    """Third review: keep-alive connections sending made-up tokens held every review slot, so the
    background refresh of Prometheus' verdict found none; once the verdict expired, its scrapes got
    503. The refresh has a slot of its own."""
    api, clock = FloodApi(), Clock()
    api.timeout = 0.3
    check = authn.TokenReviewer(api, clock=clock, in_flight=4)
    try:
        assert check("Bearer prom")[0] == 200
        flood = [threading.Thread(target=check, args=("Bearer made-up-%d" % n,)) for n in range(4)]
        for thread in flood:
            thread.start()
        assert wait_for(lambda: len(check.pending) == 4), "every review slot held by a made-up token"
        clock.now += 30  # past a third of the verdict's life: the next scrape starts a refresh
        assert check("Bearer prom")[0] == 200
        digest = list(check.cache)[0]
        assert wait_for(lambda: digest not in check.pending and check.cache[digest][3] == clock.now), \
            "the refresh ran although every other slot was held"
        clock.now += 45  # 75 s after the first review, 45 after the refresh
        assert check("Bearer prom") == (200, PROMETHEUS["username"])
    finally:
        api.released.set()
        assert wait_for(lambda: not check.pending)
