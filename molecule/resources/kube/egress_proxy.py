# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API server's way to the kubelets of the test bed's guests (host side).

    python3 egress_proxy.py --socket PATH --guests DIR

kube-apiserver reaches a kubelet (logs, exec, ``/configz`` through the nodes/proxy API) by
dialing the Node's address. The guests sit behind qemu's user network, where the host cannot
route to them; only ports qemu forwards to 127.0.0.1 reach them. The API server's egress selector
(``cluster`` egress, HTTP CONNECT over a unix socket, the mechanism konnectivity uses) hands each
such dial to this proxy as ``CONNECT <node address>:<port>`` (the Node's InternalIP: kubelet's node
IP on the guests' LAN, or the address qemu's DHCP gave the guest), and the proxy joins it to the
port qemu forwards for that guest, read from ``DIR/*/instance.json`` (``lan_ip``, ``guest_ip`` and
``forwards``, written by numa_vm.py). The API server needs an address, not a name: it refuses to
proxy to a host name before dialing unless the name resolves (to an address that is not loopback).
"""

from __future__ import absolute_import, division, print_function

import argparse
import glob
import json
import os
import socket
import sys
import threading

__metaclass__ = type  # pylint: disable=invalid-name


def forwarded_port(guests, target):
    """The host port qemu forwards for ``address:port`` of a guest, or None."""
    address, _sep, port = target.rpartition(":")
    for path in glob.glob(os.path.join(guests, "*", "instance.json")):
        try:
            with open(path) as handle:
                instance = json.load(handle)
        except (OSError, ValueError):
            continue
        if address in (instance.get("guest_ip"), instance.get("lan_ip")):
            return instance.get("forwards", {}).get(port)
    return None


def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (sink, source):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve_one(client, guests, log):
    # The API server writes the request and waits for the answer before it sends anything else,
    # so reading up to the blank line never swallows tunnelled bytes.
    request = b""
    while b"\r\n\r\n" not in request:
        data = client.recv(4096)
        if not data or len(request) > 8192:
            client.close()
            return
        request += data
    words = request.split(b"\r\n", 1)[0].decode("latin-1").split()
    target = words[1] if len(words) == 3 and words[0] == "CONNECT" else ""
    port = forwarded_port(guests, target)
    upstream = None
    if port:
        try:
            upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
            upstream.settimeout(None)
        except OSError as exc:
            log("%s: 127.0.0.1:%s does not answer: %s" % (target, port, exc))
    else:
        log("%s: no guest forwards that port" % (target or repr(request[:80])))
    if upstream is None:
        client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--guests", required=True, help="the folder holding <guest>/instance.json")
    args = parser.parse_args(argv)

    def log(text):
        sys.stderr.write("egress-proxy: %s\n" % text)
        sys.stderr.flush()

    if os.path.exists(args.socket):
        os.remove(args.socket)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(args.socket)
    os.chmod(args.socket, 0o600)
    server.listen(64)
    log("listening on %s for guests in %s" % (args.socket, args.guests))
    while True:
        client, _addr = server.accept()
        threading.Thread(target=serve_one, args=(client, args.guests, log), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
