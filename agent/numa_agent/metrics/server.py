# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small HTTP(S) server for a Prometheus exporter, standard library only.

``/metrics`` answers with what ``render()`` returns (text format 0.0.4), ``/healthz`` with ``ok``
(and, over TLS, the SHA-256 of the certificate served, so that whoever rotates it can tell when
every server has switched). With a certificate and key it serves TLS only; the files are read
again when their modification time changes (two ``stat`` calls a connection), so a renewed
certificate (a Secret the kubelet updates in place) is picked up without a restart; files that do
not load (a key that does not match, a half-written pair) leave the previous ones in use.

Who may read ``/metrics`` is the caller's to decide: ``authorize`` is None (anyone who reaches the
port, as the systemd exporter of the numa_exporter role serves) or a callable given the request's
``Authorization`` header (None when absent) that returns ``(status, reason)``: 200 lets the
request in; 401, 403 or 503 is answered with the reason. ``/healthz`` and ``/`` are never
authenticated (kubelet's readiness probe carries no credentials).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import socket
import ssl
import sys
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover - Python 2: the exporter needs Python 3.7 or later

    class BaseHTTPRequestHandler(object):
        """Stands in where http.server is missing."""

    class ThreadingHTTPServer(object):
        """Stands in where http.server is missing."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
_REASONS = {401: "unauthorized", 403: "forbidden", 503: "cannot check the credentials now"}


def fingerprint(pem):
    """The SHA-256 (hex) of the first certificate of a PEM text: what /healthz names."""
    if isinstance(pem, bytes):
        pem = pem.decode("ascii", "replace")
    match = _PEM_CERTIFICATE.search(pem)
    if not match:
        raise ValueError("no PEM certificate found")
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(match.group(0))).hexdigest()


class _Certificates(object):
    """An SSL context that follows the certificate and key files as they are replaced."""

    def __init__(self, cert_file, key_file):
        self.files = (cert_file, key_file)
        self.lock = threading.Lock()
        self.stamp = None
        self.failed = None  # the stamp of files that did not load: not tried again until they change
        self.context = None
        self.fingerprint = None
        self.current()  # files that do not load at the start stop the server right away

    def _stamp(self):
        return tuple(os.stat(path).st_mtime_ns for path in self.files)

    def _load(self):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(*self.files)
        with open(self.files[0]) as handle:
            return context, fingerprint(handle.read())

    def current(self):
        with self.lock:
            try:
                stamp = self._stamp()
            except OSError:
                if self.context is None:
                    raise
                return self.context  # the kubelet swaps a Secret volume's files: the old pair meanwhile
            if stamp not in (self.stamp, self.failed):
                try:
                    context, served = self._load()
                except (OSError, ssl.SSLError, ValueError) as exc:
                    if self.context is None:
                        raise
                    self.failed = stamp
                    sys.stderr.write("numa-exporter: the new certificate %s or key %s do not load (%s); still "
                                     "serving sha256:%s\n" % (self.files[0], self.files[1], exc, self.fingerprint))
                else:
                    self.context, self.fingerprint, self.stamp = context, served, stamp
            return self.context


class _Handler(BaseHTTPRequestHandler):
    server_version = "numa-exporter"
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without TCP_NODELAY the body waits for the client's
    # delayed acknowledgement (some 40 ms a scrape on Linux)
    disable_nagle_algorithm = True

    def handle_one_request(self):
        """One request within the server's idle_seconds in all: its wait for the first byte, its
        headers and the answer. A read timeout alone bounds the pause between two bytes, so a client
        sending one byte at a time would hold its connection for good; past this deadline the
        connection is shut down (by the server's own loop, see MetricsServer.service_actions), which
        ends the read or write under way."""
        self.server.watch(self, waiting=True)
        try:
            BaseHTTPRequestHandler.handle_one_request(self)
        finally:
            self.server.unwatch(self)

    def parse_request(self):
        """The request's first line is in: the connection is busy now, no longer one waiting that a
        new connection may take the place of."""
        self.server.busy(self)
        return BaseHTTPRequestHandler.parse_request(self)

    def _cut(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already

    def do_GET(self):  # noqa: N802 - the name http.server calls
        path = self.path.split("?", 1)[0]
        headers = {}
        if path == "/metrics":
            status, reason = self.server.verdict(self.headers.get("Authorization"))
            if status != 200:
                body = ("numa-exporter: %s: %s\n" % (_REASONS.get(status, "refused"), reason)).encode("utf-8")
                if status == 401:
                    headers["WWW-Authenticate"] = 'Bearer realm="numa-exporter"'
                elif status == 503:
                    headers["Retry-After"] = "5"
            else:
                try:
                    body, status = self.server.render().encode("utf-8"), 200
                except Exception as exc:  # pylint: disable=broad-except
                    sys.stderr.write("numa-exporter: the scrape failed: %r\n" % (exc,))
                    body, status = ("scrape failed: %s\n" % exc).encode("utf-8"), 500
        elif path == "/healthz":
            body, status = b"ok\n", 200
            if self.server.certificates is not None:
                self.server.certificates.current()  # a kept-alive connection may be older than the files
                body += ("certificate-sha256: %s\n" % self.server.certificates.fingerprint).encode("ascii")
        elif path == "/":
            body, status = b"numa-exporter: metrics at /metrics\n", 200
        else:
            body, status = b"not found\n", 404
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        for name, value in sorted(headers.items()):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # pylint: disable=arguments-differ
        """Requests are not logged (one every scrape interval, per Prometheus)."""


# the time a connection has for each request, its wait for the first byte, the headers and the
# answer together (and for its TLS handshake), plain HTTP and HTTPS alike; past it the connection
# is closed, however the client spaces its bytes
IDLE_SECONDS = 30
# connections served at once, each on its own thread: a scraper or two (Prometheus keeps one
# connection a target) and probes need a handful, a flood gets no more threads. One more takes the
# place of the connection that has waited longest for its next request (an idle keep-alive one,
# which HTTP clients open again at need); with none waiting, it is closed at once. So connections
# that hold their place by sending a request now and then cannot lock a scraper out.
MAX_CONNECTIONS = 32
# how long a new connection waits for the place of the one it closed
TAKE_PLACE_SECONDS = 2.0


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, port, render, cert_file=None, key_file=None, authorize=None,
                 max_connections=MAX_CONNECTIONS, idle_seconds=IDLE_SECONDS):
        self.render = render
        self.authorize = authorize
        self.certificates = _Certificates(cert_file, key_file) if cert_file else None
        self.idle_seconds = idle_seconds
        self.connections = threading.BoundedSemaphore(max_connections)
        self.deadlines = {}  # handler -> when its request's time is up (monotonic)
        self.waiting = {}  # handler -> since when it waits for its next request (monotonic)
        self.deadlines_lock = threading.Lock()
        ThreadingHTTPServer.__init__(self, (address, port), _Handler)

    def watch(self, handler, waiting=False):
        now = time.monotonic()
        with self.deadlines_lock:
            self.deadlines[handler] = now + self.idle_seconds
            if waiting:
                self.waiting[handler] = now

    def busy(self, handler):
        with self.deadlines_lock:
            self.waiting.pop(handler, None)

    def unwatch(self, handler):
        with self.deadlines_lock:
            self.deadlines.pop(handler, None)
            self.waiting.pop(handler, None)

    def _take_place(self):
        """A place for a new connection when every one is taken: the connection waiting longest for
        its next request is closed and its place awaited (TAKE_PLACE_SECONDS); False when none waits."""
        with self.deadlines_lock:
            if not self.waiting:
                return False
            victim = min(self.waiting, key=self.waiting.get)
            del self.waiting[victim]
        victim._cut()  # pylint: disable=protected-access
        return self.connections.acquire(timeout=TAKE_PLACE_SECONDS)

    def service_actions(self):
        """Run by serve_forever between its polls (every half second): cut the connections whose
        request has had its time, without a thread of their own for it."""
        now = time.monotonic()
        with self.deadlines_lock:
            late = [handler for handler, end in self.deadlines.items() if end <= now]
            for handler in late:
                del self.deadlines[handler]
        for handler in late:
            handler._cut()  # pylint: disable=protected-access

    def process_request(self, request, client_address):
        """A thread for the connection while fewer than max_connections are served, or in the place of
        the one waiting longest for a request; else it is closed."""
        if not self.connections.acquire(blocking=False) and not self._take_place():
            self.shutdown_request(request)
            return
        try:
            ThreadingHTTPServer.process_request(self, request, client_address)
        except BaseException:
            self.connections.release()
            self.shutdown_request(request)
            raise

    def process_request_thread(self, request, client_address):
        try:
            ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            self.connections.release()

    def verdict(self, authorization):
        """(status, reason) for a request to /metrics carrying ``authorization`` (the header or None)."""
        if self.authorize is None:
            return 200, "open"
        try:
            status, reason = self.authorize(authorization)
        except Exception as exc:  # pylint: disable=broad-except
            sys.stderr.write("numa-exporter: the credentials check failed: %r\n" % (exc,))
            return 503, "the credentials check failed"
        return (status, reason) if status in (200, 401, 403, 503) else (503, "unexpected verdict %r" % (status,))

    def get_request(self):
        conn, addr = self.socket.accept()
        # every read waits at most idle_seconds: a client that stops sending holds its thread no longer
        conn.settimeout(self.idle_seconds)
        if self.certificates is not None:
            # the handshake happens on the first read, in the request's own thread: a client that
            # never finishes it holds that thread (until the timeout), not the accepting loop
            conn = self.certificates.current().wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr

    def handle_error(self, request, client_address):
        """One line, not a traceback: a client that speaks plain HTTP to TLS, or hangs up."""
        sys.stderr.write("numa-exporter: request from %s failed: %r\n" % (client_address[0], sys.exc_info()[1]))

    @property
    def port(self):
        return self.server_address[1]


def serve(render, address, port, cert_file=None, key_file=None, ready=None, stop=None, authorize=None):
    """Serve until ``stop`` (an Event) is set; ``ready`` receives the bound port; ``authorize``: see above."""
    server = MetricsServer(address, port, render, cert_file, key_file, authorize)
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    stop = stop or threading.Event()
    if ready is not None:
        ready(server.port)
    stop.wait()
    server.shutdown()
    server.server_close()
    thread.join(10)
    return 0
