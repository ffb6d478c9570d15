# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small HTTP(S) server for a Prometheus exporter, standard library only.

``/metrics`` answers with what ``render()`` returns (text format 0.0.4), ``/healthz`` with ``ok``.
With a certificate and key it serves TLS only; the files are read again when they change, so a
renewed certificate (a Secret the kubelet updates in place) is picked up without a restart.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import ssl
import sys
import threading

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover - Python 2: the exporter needs Python 3.7 or later

    class BaseHTTPRequestHandler(object):
        """Stands in where http.server is missing."""

    class ThreadingHTTPServer(object):
        """Stands in where http.server is missing."""

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Certificates(object):
    """An SSL context that follows the certificate and key files as they are replaced."""

    def __init__(self, cert_file, key_file):
        self.files = (cert_file, key_file)
        self.lock = threading.Lock()
        self.stamp = None
        self.context = None
        self.current()

    def _stamp(self):
        return tuple(os.stat(path).st_mtime_ns for path in self.files)

    def current(self):
        with self.lock:
            stamp = self._stamp()
            if stamp != self.stamp:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                context.load_cert_chain(*self.files)
                self.context, self.stamp = context, stamp
            return self.context


class _Handler(BaseHTTPRequestHandler):
    server_version = "numa-exporter"
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without TCP_NODELAY the body waits for the client's
    # delayed acknowledgement (some 40 ms a scrape on Linux)
    disable_nagle_algorithm = True

    def do_GET(self):  # noqa: N802 - the name http.server calls
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body, status = self.server.render().encode("utf-8"), 200
            except Exception as exc:  # pylint: disable=broad-except
                sys.stderr.write("numa-exporter: the scrape failed: %r\n" % (exc,))
                body, status = ("scrape failed: %s\n" % exc).encode("utf-8"), 500
        elif path == "/healthz":
            body, status = b"ok\n", 200
        elif path == "/":
            body, status = b"numa-exporter: metrics at /metrics\n", 200
        else:
            body, status = b"not found\n", 404
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # pylint: disable=arguments-differ
        """Requests are not logged (one every scrape interval, per Prometheus)."""


class MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, port, render, cert_file=None, key_file=None):
        self.render = render
        self.certificates = _Certificates(cert_file, key_file) if cert_file else None
        ThreadingHTTPServer.__init__(self, (address, port), _Handler)

    def get_request(self):
        conn, addr = self.socket.accept()
        if self.certificates is not None:
            # the handshake happens on the first read, in the request's own thread: a client that
            # never finishes it holds that thread (until the timeout), not the accepting loop
            conn.settimeout(30)
            conn = self.certificates.current().wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr

    def handle_error(self, request, client_address):
        """One line, not a traceback: a client that speaks plain HTTP to TLS, or hangs up."""
        sys.stderr.write("numa-exporter: request from %s failed: %r\n" % (client_address[0], sys.exc_info()[1]))

    @property
    def port(self):
        return self.server_address[1]


def serve(render, address, port, cert_file=None, key_file=None, ready=None, stop=None):
    """Serve until ``stop`` (an Event) is set; ``ready`` receives the bound port."""
    server = MetricsServer(address, port, render, cert_file, key_file)
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
