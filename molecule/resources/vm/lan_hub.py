# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An Ethernet hub for the test bed's guests, on the host's loopback.

    python3 lan_hub.py --port-file FILE

Each guest's second network card is ``-netdev socket,connect=127.0.0.1:PORT``: qemu sends every
frame the card transmits over that TCP connection, prefixed by its length (4 bytes, big endian),
and delivers every frame it receives the same way. The hub repeats each frame to every other
connected guest, which makes one shared segment: the guests reach each other at the addresses
they give that card (kubelet's node IP), as the nodes of a real cluster do, while qemu's user
network keeps serving SSH and the way out to the host. Nothing leaves loopback.

The hub listens on a free port, writes it to FILE once it accepts connections, and runs until it
is killed.
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import selectors
import socket
import struct
import sys

__metaclass__ = type  # pylint: disable=invalid-name

HEADER = struct.Struct(">I")


# Frames for a guest that does not read (held paused by a test) queue up to this much, then are
# dropped, as a switch drops them: one stalled guest must not stall the others.
BACKLOG = 4 << 20


class Peer(object):
    """One guest's connection, the bytes of a frame not yet complete and the frames not yet sent."""

    def __init__(self, conn):
        self.conn = conn
        self.pending = b""
        self.outbox = bytearray()

    def frames(self, data):
        """The whole frames (with their length prefix) that data completes."""
        self.pending += data
        while len(self.pending) >= HEADER.size:
            size = HEADER.unpack_from(self.pending)[0]
            end = HEADER.size + size
            if len(self.pending) < end:
                break
            yield self.pending[:end]
            self.pending = self.pending[end:]


class Hub(object):
    def __init__(self, listener):
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.peers = {}

    def drop(self, peer):
        self.selector.unregister(peer.conn)
        peer.conn.close()
        del self.peers[peer.conn]

    def watch(self, peer):
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if peer.outbox else 0)
        self.selector.modify(peer.conn, events)

    def flush(self, peer):
        try:
            sent = peer.conn.send(peer.outbox)
        except BlockingIOError:
            sent = 0
        except OSError:  # its reader sees the close
            sent = len(peer.outbox)
        del peer.outbox[:sent]
        self.watch(peer)

    def receive(self, peer):
        try:
            data = peer.conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the guest is gone (stopped; a reboot inside the guest keeps the connection)
            self.drop(peer)
            return
        for frame in peer.frames(data):
            for other in self.peers.values():
                if other is not peer and len(other.outbox) + len(frame) <= BACKLOG:
                    other.outbox += frame
                    self.flush(other)

    def serve(self):
        while True:
            for key, events in self.selector.select():
                if key.fileobj is self.listener:
                    conn, _addr = self.listener.accept()
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.peers[conn] = Peer(conn)
                    self.selector.register(conn, selectors.EVENT_READ)
                    continue
                peer = self.peers.get(key.fileobj)
                if peer is not None and events & selectors.EVENT_WRITE:
                    self.flush(peer)
                if peer is not None and peer.conn in self.peers and events & selectors.EVENT_READ:
                    self.receive(peer)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port-file", required=True, help="where to write the port the hub listens on")
    args = parser.parse_args(argv)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    temporary = args.port_file + ".tmp"
    with open(temporary, "w") as handle:
        handle.write(str(listener.getsockname()[1]))
    os.replace(temporary, args.port_file)
    Hub(listener).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
