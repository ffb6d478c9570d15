# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter's HTTPS server, for real on loopback: who may read /metrics (a pluggable check,
open when none is given, as the numa_exporter role serves), the certificate followed as its files
change and named on /healthz."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from numa_agent.metrics import server as metrics_server
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring

METRICS = "# HELP numa_node_cpus_count x\n# TYPE numa_node_cpus_count gauge\nnuma_node_cpus_count{numa_node=\"0\"} 2\n"

# these tests time real threads, sockets or processes: they run in the foreground (tools/run-tiers timed)
pytestmark = pytest.mark.wall_clock


def write_pair(folder, pem, stamp):
    """Write tls.crt and tls.key as a Secret volume's update does, with a given modification time."""
    for key in ("ca.crt", "tls.crt", "tls.key"):
        path = os.path.join(folder, key)
        with open(path + ".new", "wb") as handle:
            handle.write(pem[key])
        os.replace(path + ".new", path)
        os.utime(path, ns=(stamp, stamp))


class Served(object):
    """metrics_server.serve on an ephemeral loopback port, in a thread."""

    def __init__(self, folder, authorize=None, tls=True):
        self.folder = folder
        self.pem = monitoring.make_certificates(["localhost"]) if tls else None
        if tls:
            write_pair(folder, self.pem, 10 ** 18)
        files = (os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")) if tls else (None, None)
        bound, self.stop, self.port = threading.Event(), threading.Event(), []
        self.thread = threading.Thread(target=metrics_server.serve, args=(lambda: METRICS, "127.0.0.1", 0) + files,
                                       kwargs=dict(ready=lambda port: (self.port.append(port), bound.set()),
                                                   stop=self.stop, authorize=authorize))
        self.thread.start()
        assert bound.wait(30), "the server did not start"
        self.scheme = "https" if tls else "http"

    def get(self, path, authorization=None, cafile=None):
        """(status, headers, body) of a GET, the certificate verified against ca.crt for localhost."""
        headers = {"Authorization": authorization} if authorization else {}
        request = urllib.request.Request("%s://localhost:%d%s" % (self.scheme, self.port[0], path), headers=headers)
        context = None
        if self.scheme == "https":
            context = ssl.create_default_context(cafile=cafile or os.path.join(self.folder, "ca.crt"))
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return answer.status, dict(answer.headers), answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def served_fingerprint(self):
        """The SHA-256 of the certificate a new TLS connection gets."""
        pem = ssl.get_server_certificate(("127.0.0.1", self.port[0]))
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()

    def close(self):
        self.stop.set()
        self.thread.join(30)


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(**kwargs):
        servers.append(Served(str(tmp_path), **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


class Verdicts(object):
    """A fake reviewer: the verdict for each header, and the headers it was asked about."""

    def __init__(self):
        self.asked = []

    def __call__(self, header):
        self.asked.append(header)
        if header is None:
            return 401, "no bearer token"
        if header == "Bearer good":
            return 200, "system:serviceaccount:monitoring:prometheus"
        if header == "Bearer other":
            return 403, "user other may not get /metrics"
        if header == "Bearer silent":
            return 503, "the API server did not review the token (no answer)"
        if header == "Bearer odd":
            return 302, "a status the server must not pass on"
        raise RuntimeError("the reviewer broke")


def test_metrics_are_served_only_on_the_reviewers_word(serve):
    verdicts = Verdicts()
    server = serve(authorize=verdicts)
    status, headers, body = server.get("/metrics")
    assert (status, headers["WWW-Authenticate"]) == (401, 'Bearer realm="numa-exporter"')
    assert body == "numa-exporter: unauthorized: no bearer token\n"
    assert server.get("/metrics", "Bearer good")[::2] == (200, METRICS)
    status, headers, body = server.get("/metrics", "Bearer other")
    assert (status, body) == (403, "numa-exporter: forbidden: user other may not get /metrics\n")
    assert "WWW-Authenticate" not in headers and "numa_node" not in body
    status, headers, body = server.get("/metrics?x=1", "Bearer silent")
    assert (status, headers["Retry-After"]) == (503, "5") and "did not review the token" in body
    assert server.get("/metrics", "Bearer odd")[0] == 503, "only 200, 401, 403 and 503 go out"
    status, _headers, body = server.get("/metrics", "Bearer broken")
    assert (status, body) == (503, "numa-exporter: cannot check the credentials now: the credentials check failed\n")
    assert verdicts.asked == [None, "Bearer good", "Bearer other", "Bearer silent", "Bearer odd", "Bearer broken"]
    # kubelet's readiness probe carries no credentials: /healthz and / are never asked about
    status, _headers, body = server.get("/healthz")
    assert status == 200 and body.startswith("ok\n")
    assert server.get("/")[0] == 200 and server.get("/nothing")[0] == 404
    assert len(verdicts.asked) == 6


def test_without_a_check_metrics_are_open_as_the_systemd_exporter_serves_them(serve):
    server = serve(tls=False)
    status, _headers, body = server.get("/metrics")
    assert (status, body) == (200, METRICS)
    assert server.get("/healthz")[2] == "ok\n", "no certificate, none named"


def test_a_renewed_certificate_is_served_and_named_and_a_broken_one_is_not(serve, tmp_path):
    server = serve(authorize=Verdicts())
    first = x509.load_pem_x509_certificate(server.pem["tls.crt"]).fingerprint(hashes.SHA256()).hex()
    assert metrics_server.fingerprint(server.pem["tls.crt"]) == first
    assert server.served_fingerprint() == first
    assert server.get("/healthz")[2] == "ok\ncertificate-sha256: %s\n" % first
    renewed = monitoring.make_certificates(["localhost"])
    write_pair(str(tmp_path), renewed, 10 ** 18 + 1)
    second = metrics_server.fingerprint(renewed["tls.crt"])
    assert server.served_fingerprint() == second, "new connections get the renewed certificate"
    assert server.get("/healthz")[2] == "ok\ncertificate-sha256: %s\n" % second
    # a key that is not the certificate's (a half-done update): the renewed pair stays in use
    broken = dict(renewed, **{"tls.key": monitoring.make_certificates(["localhost"])["tls.key"]})
    write_pair(str(tmp_path), broken, 10 ** 18 + 2)
    assert server.served_fingerprint() == second
    assert server.get("/metrics", "Bearer good")[0] == 200
    assert server.get("/healthz")[2].endswith("certificate-sha256: %s\n" % second)


def test_the_fingerprint_is_of_the_first_certificate_of_the_pem():
    pem = monitoring.make_certificates(["a.svc"])
    leaf = x509.load_pem_x509_certificate(pem["tls.crt"])
    assert metrics_server.fingerprint(pem["tls.crt"] + pem["ca.crt"]) == leaf.fingerprint(hashes.SHA256()).hex()
    assert metrics_server.fingerprint(pem["tls.crt"].decode()) == leaf.fingerprint(hashes.SHA256()).hex()
    with pytest.raises(ValueError, match="no PEM certificate"):
        metrics_server.fingerprint(b"not a certificate")


def test_files_that_do_not_load_at_the_start_stop_the_server(tmp_path):
    pem = monitoring.make_certificates(["localhost"])
    pem["tls.key"] = monitoring.make_certificates(["localhost"])["tls.key"]
    write_pair(str(tmp_path), pem, 10 ** 18)
    with pytest.raises(ssl.SSLError):
        metrics_server.MetricsServer("127.0.0.1", 0, lambda: METRICS, str(tmp_path / "tls.crt"),
                                     str(tmp_path / "tls.key"))


def started(**kwargs):
    """A MetricsServer over plain HTTP on a loopback port, serving in a thread; (server, port)."""
    server = metrics_server.MetricsServer("127.0.0.1", 0, lambda: METRICS, **kwargs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.port


def closed_within(connection, seconds):
    """Whether the server closes ``connection`` (an empty read) within ``seconds``."""
    connection.settimeout(seconds)
    try:
        return connection.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_a_plain_http_connection_that_sends_nothing_is_closed_after_the_idle_time():
    """Hostile review: plain-HTTP connections had no read timeout, so an idle one held a thread for good."""
    server, port = started(idle_seconds=1)
    try:
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert closed_within(idle, 5), "the idle connection was not closed"
        half = socket.create_connection(("127.0.0.1", port), timeout=5)
        half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # a request that never ends
        assert closed_within(half, 5), "a request cut short held its connection"
    finally:
        server.shutdown()
        server.server_close()


def test_connections_beyond_the_bound_get_no_thread_and_take_the_place_of_the_longest_waiting():
    """Hostile review: every connection got a thread (150 idle connections, 150 threads). Third
    review: connections that held their place (idle, or sending a request now and then) locked every
    other client out; a new one now takes the place of the connection waiting longest for a request."""
    server, port = started(max_connections=3, idle_seconds=30)
    try:
        before = threading.active_count()
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _index in range(3)]
        time.sleep(0.5)
        extra = []
        for _index in range(20):
            extra.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            time.sleep(0.05)
        time.sleep(0.5)
        assert threading.active_count() - before <= 3, "more threads than the bound"
        assert all(closed_within(connection, 5) for connection in held + extra[:-3]), \
            "a connection that waited longer than the newest three kept its place"
        assert not any(closed_within(connection, 0.5) for connection in extra[-3:]), "the newest three are served"
        started_at = time.monotonic()
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as answer:
            assert answer.read().decode() == METRICS
        assert time.monotonic() - started_at < 4, "a scrape waited for a place"
    finally:
        server.shutdown()
        server.server_close()


def test_keep_alive_connections_that_ask_now_and_then_cannot_lock_a_scraper_out():
    """Third review: four keep-alive connections sending GET /healthz once a second held a server of
    four connections, and every other client got its connection closed for as long as they went on."""
    server, port = started(max_connections=4, idle_seconds=2)
    stop = threading.Event()

    def holder():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            while not stop.is_set():
                connection.request("GET", "/healthz")
                connection.getresponse().read()
                time.sleep(1.0)
        except (OSError, http.client.HTTPException):
            return

    holders = [threading.Thread(target=holder, daemon=True) for _index in range(4)]
    for thread in holders:
        thread.start()
    try:
        time.sleep(1.5)
        served = 0
        for _attempt in range(5):
            started_at = time.monotonic()
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as answer:
                assert answer.read().decode() == METRICS
            assert time.monotonic() - started_at < 4
            served += 1
            time.sleep(0.5)
        assert served == 5
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("tls", [False, True])
def test_clients_that_send_a_byte_at_a_time_cannot_hold_the_server(tmp_path, tls):
    """Review of the fixes: the idle timeout was per read, so three clients sending one header byte
    every 0.6 s kept a server of three connections from answering anyone."""
    files = {}
    if tls:
        write_pair(str(tmp_path), monitoring.make_certificates(["localhost"]), 10 ** 18)
        files = {"cert_file": str(tmp_path / "tls.crt"), "key_file": str(tmp_path / "tls.key")}
    server, port = started(max_connections=3, idle_seconds=2, **files)
    stop = threading.Event()

    def trickle():
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection = raw
        if tls:
            context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            connection = context.wrap_socket(raw, server_hostname="localhost")
        try:
            for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000:
                if stop.is_set():
                    return
                connection.sendall(bytes([byte]))
                time.sleep(0.6)
        except OSError:
            return  # the server closed it: what is wanted

    slow = [threading.Thread(target=trickle, daemon=True) for _index in range(3)]
    for thread in slow:
        thread.start()
    try:
        time.sleep(1.0)
        deadline, served = time.monotonic() + 15, False
        context = None
        if tls:
            context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        while time.monotonic() < deadline and not served:
            try:
                with urllib.request.urlopen("%s://localhost:%d/healthz" % ("https" if tls else "http", port),
                                            timeout=5, context=context) as answer:
                    served = answer.status == 200
            except (urllib.error.URLError, ConnectionError, ssl.SSLError):
                time.sleep(0.3)
        assert served, "three trickling clients kept the server from answering"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
