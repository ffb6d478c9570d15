# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-exporter (systemd mode): per-NUMA-node CPU, memory, huge page and numastat metrics.

The same metrics code as the node agent's exporter (the collection's numa_metrics and
metrics_server modules, which the role installs next to this script), for nodes outside a cluster
with an operator. The static topology is read once; each scrape reads what moves. What kubelet
assigned comes from its CPU and Memory Manager checkpoints here (the agent asks kubelet's
PodResources API instead, which needs gRPC).

Three programs in one file, standard library only:

- ``numa_exporter.py [options]`` serves the metrics, unprivileged. It reads kubelet's checkpoints
  from copies in ``--checkpoint-dir``, never from kubelet's folder.
- ``numa_exporter.py relay`` makes those copies: it looks at kubelet's two checkpoint files every
  ``--interval`` seconds and copies each one that changed into ``--into`` (mode 0640, group of the
  process), replacing the copy in one rename. kubelet keeps the files root's, mode 0600, and writes
  each one anew (a temporary file renamed over the old one), so neither a capability nor an ACL
  on the file would give an unprivileged reader lasting access; the relay runs as root without any
  capability, socket, network or write access outside its folder, and copies only regular files,
  opened without following a symbolic link.
- ``numa_exporter.py check-tls`` tells whether a certificate, its key and a CA can serve: the key
  loads with the certificate, a client trusting only the CA accepts it under each ``--name`` (a
  TLS handshake in memory, by this Python's OpenSSL, the one that will serve), it is valid now and
  for ``--renew-days`` more, the key is not readable by every user, and (``--as-user``) the
  exporter's user can read both files. Prints JSON: {"problems": [[what, fix], ...], ...}.
"""

from __future__ import absolute_import, division, print_function

import argparse
import errno
import json
import os
import signal
import stat
import sys
import threading
import time

__metaclass__ = type  # pylint: disable=invalid-name

DEFAULT_LIB = "/opt/numa-exporter/lib"
DEFAULT_CHECKPOINT_DIR = "/run/numa-exporter"
CHECKPOINTS = ("cpu_manager_state", "memory_manager_state")
# a checkpoint is a few KiB; anything near this is not one, and is not copied
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
ERROR_SUFFIX = ".error"
RENEW_DAYS = 30


# --- serve ---------------------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen-address", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9201, help="port to serve on (default 9201)")
    parser.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM; with --tls-key-file)")
    parser.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    parser.add_argument("--sysfs-root", default="/sys", help="where sysfs is mounted (default /sys)")
    parser.add_argument("--checkpoint-dir", "--kubelet-root", dest="checkpoint_dir", default=DEFAULT_CHECKPOINT_DIR,
                        help="folder holding cpu_manager_state and memory_manager_state: the relay's copies "
                             "(default %s), or kubelet's root folder for a reader allowed in there"
                             % DEFAULT_CHECKPOINT_DIR)
    parser.add_argument("--lib", default=DEFAULT_LIB,
                        help="folder holding ansible_collections/numa/kube/plugins/module_utils (default %s)" % DEFAULT_LIB)
    args = parser.parse_args(argv)
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        parser.error("--tls-cert-file and --tls-key-file go together")
    return args


def checkpoint_readable(folder, problems):
    """{name: 1 or 0} for each checkpoint that exists (or failed) in ``folder``: 0 when it could not
    be read or parsed, or when the relay left a ``<name>.error`` saying why it could not copy it."""
    broken = dict(problems)
    found = {}
    for name in CHECKPOINTS:
        failed = os.path.exists(os.path.join(folder, name + ERROR_SUFFIX))
        if failed or name in broken:
            found[name] = 0
        elif os.path.exists(os.path.join(folder, name)):
            found[name] = 1
    return found


def build_render(args):
    """Import the collection's metrics code from args.lib; return the function one scrape calls."""
    if args.lib and os.path.isdir(args.lib) and args.lib not in sys.path:
        sys.path.insert(0, args.lib)
    from ansible_collections.numa.kube.plugins.module_utils import numa_metrics

    scraper = numa_metrics.Scraper(args.sysfs_root)

    def render():
        assigned, allocatable, problems = numa_metrics.checkpoint_data(args.checkpoint_dir, scraper.topology.cpu_node)
        readable = numa_metrics.Family("numa_kubelet_checkpoint_readable", "gauge", "Whether a kubelet checkpoint "
                                       "could be read (1) or not (0); absent when the file does not exist.")
        for name, value in sorted(checkpoint_readable(args.checkpoint_dir, problems).items()):
            readable.add((("file", name),), value)
        return scraper.scrape(assigned=assigned, allocatable=allocatable, extra=[readable])

    return render


def serve(args, ready=None, stop=None):
    """Serve until SIGTERM/SIGINT (or until ``stop`` is set); ``ready`` receives the bound port."""
    render = build_render(args)
    from ansible_collections.numa.kube.plugins.module_utils import metrics_server

    stop = stop or _stop_on_signals()
    return metrics_server.serve(render, args.listen_address, args.port, args.tls_cert_file, args.tls_key_file,
                                ready=ready, stop=stop)


def _stop_on_signals():
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *unused: stop.set())
    return stop


# --- relay ---------------------------------------------------------------------------------------

def parse_relay_args(argv):
    parser = argparse.ArgumentParser(prog="numa_exporter.py relay",
                                     description="Copy kubelet's CPU and Memory Manager checkpoints where the "
                                                 "exporter's user may read them.")
    parser.add_argument("--kubelet-root", default="/var/lib/kubelet", help="kubelet's root folder (default "
                                                                           "/var/lib/kubelet)")
    parser.add_argument("--into", default=DEFAULT_CHECKPOINT_DIR, help="folder of the copies (default %s)"
                        % DEFAULT_CHECKPOINT_DIR)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between two looks (default 2)")
    args = parser.parse_args(argv)
    if not 0.1 <= args.interval <= 3600:
        parser.error("--interval %s is not between 0.1 and 3600 seconds" % args.interval)
    return args


def _write_atomically(folder, name, data, mode=0o640):
    """Replace ``folder/name`` with ``data`` in one rename, the new file ``mode`` whatever the umask."""
    temporary = os.path.join(folder, ".%s.%d" % (name, os.getpid()))
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(handle, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view):]
    finally:
        os.close(handle)
    os.replace(temporary, os.path.join(folder, name))


def _remove(path):
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class NotRegular(Exception):
    """A checkpoint path that holds something other than a regular file."""

    def __init__(self, kind):
        Exception.__init__(self, kind)
        self.kind = kind


def _kind(mode):
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return kind
    return "a special file"


def _read_regular(path, limit):
    """(at most ``limit`` bytes, stamp) of the regular file at ``path``, opened without following a
    symbolic link and without waiting on a pipe; NotRegular for anything else, which is never read.
    The relay runs as root, so a link kubelet's folder holds must not lead it to root's other files."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise NotRegular("a symbolic link")
        raise
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(_kind(info.st_mode))
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(handle, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), (info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns)
    finally:
        os.close(handle)


class Relay(object):
    """Copies each checkpoint of ``source`` into ``target`` when it changed since the last copy."""

    def __init__(self, source, target, names=CHECKPOINTS, limit=MAX_CHECKPOINT_BYTES):
        self.source = source
        self.target = target
        self.names = names
        self.limit = limit
        self.copied = {}  # name: (inode, mtime, size, ctime) of the source last copied
        self.errors = {}  # name: the error last reported, so that a lasting one is logged once

    def _fail(self, name, message):
        """Drop the copy and leave the reason beside it; a lasting problem is logged and written once.
        Returns whether anything in the target changed."""
        self.copied.pop(name, None)
        removed = _remove(os.path.join(self.target, name))
        if self.errors.get(name) == message and os.path.exists(os.path.join(self.target, name + ERROR_SUFFIX)):
            return removed
        sys.stderr.write("numa-exporter relay: %s\n" % message)
        self.errors[name] = message
        _write_atomically(self.target, name + ERROR_SUFFIX, (message + "\n").encode("utf-8"))
        return True

    def once(self):
        """One look at every checkpoint; returns the names whose copy changed (copied or removed)."""
        changed = []
        for name in self.names:
            path = os.path.join(self.source, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                self.copied.pop(name, None)
                self.errors.pop(name, None)
                removed = _remove(os.path.join(self.target, name))
                if _remove(os.path.join(self.target, name + ERROR_SUFFIX)) or removed:
                    changed.append(name)
                continue
            except OSError as exc:
                if self._fail(name, "cannot look at %s: %s" % (path, exc.strerror)):
                    changed.append(name)
                continue
            stamp = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_ctime_ns)
            if stamp == self.copied.get(name) and os.path.exists(os.path.join(self.target, name)):
                continue
            try:
                data, stamp = _read_regular(path, self.limit + 1)
            except NotRegular as exc:
                if self._fail(name, "%s is %s, not a regular file: kubelet writes its checkpoints as plain files, "
                              "so it is not copied" % (path, exc.kind)):
                    changed.append(name)
                continue
            except OSError as exc:
                if self._fail(name, "cannot read %s: %s" % (path, exc.strerror)):
                    changed.append(name)
                continue
            if len(data) > self.limit:
                if self._fail(name, "%s is larger than %d bytes: not a kubelet checkpoint, not copied"
                              % (path, self.limit)):
                    changed.append(name)
                continue
            _write_atomically(self.target, name, data)
            _remove(os.path.join(self.target, name + ERROR_SUFFIX))
            self.errors.pop(name, None)
            self.copied[name] = stamp
            changed.append(name)
        return changed


def relay(argv, stop=None):
    args = parse_relay_args(argv)
    if not os.path.isdir(args.into):
        sys.stderr.write("numa-exporter relay: %s is not a folder (the service's RuntimeDirectory makes it)\n"
                         % args.into)
        return 2
    if not os.path.isdir(args.kubelet_root):
        # systemd starts the relay again (Restart=always) and, once kubelet made its folder, binds it in
        sys.stderr.write("numa-exporter relay: kubelet's folder %s does not exist (yet)\n" % args.kubelet_root)
        return 3
    stop = stop or _stop_on_signals()
    worker = Relay(args.kubelet_root, args.into)
    while True:
        worker.once()
        if stop.wait(args.interval):
            return 0


# --- check-tls -----------------------------------------------------------------------------------

def parse_check_args(argv):
    parser = argparse.ArgumentParser(prog="numa_exporter.py check-tls",
                                     description="Tell whether a certificate, its key and a CA can serve the "
                                                 "exporter; JSON on stdout.")
    parser.add_argument("--cert-file", required=True, help="the certificate (PEM; intermediates after it)")
    parser.add_argument("--key-file", required=True, help="its private key (PEM, no passphrase)")
    parser.add_argument("--ca-file", required=True, help="the CA (bundle) clients verify it with")
    parser.add_argument("--name", action="append", default=[], help="a name or address the certificate must "
                                                                    "be valid for (repeat)")
    parser.add_argument("--renew-days", type=int, default=RENEW_DAYS,
                        help="refuse a certificate that ends within this many days (default %d)" % RENEW_DAYS)
    parser.add_argument("--as-user", default="", help="also check that this user can read the certificate and "
                                                      "key (needs root; skipped when the user does not exist)")
    return parser.parse_args(argv)


def _handshake(server_context, client_context, name):
    """The server's certificate as the client decoded it after a TLS handshake in memory with
    ``server_hostname=name``; ssl.SSLError (SSLCertVerificationError) when the client refuses it."""
    import ssl

    client_in, client_out, server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(client_in, client_out, server_hostname=name)
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    done = {}
    for _round in range(32):
        for side, role in ((client, "client"), (server, "server")):
            if role in done:
                continue
            try:
                side.do_handshake()
                done[role] = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                if role == "client":
                    raise
                done[role] = False  # the server's side of a refusal: the client's error says why
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        if "client" in done and "server" in done:
            break
    if done.get("client") is not True:
        raise ssl.SSLError("the TLS handshake did not finish")
    return client.getpeercert()


def _verify_problem(exc, name, ca_file):
    """(what, fix) for a client's refusal of the certificate under ``name``."""
    message = getattr(exc, "verify_message", "") or str(exc)
    lowered = message.lower()
    if "mismatch" in lowered:
        return ("the certificate is not valid for %s (%s)" % (name, message),
                "issue it with %s among its subject alternative names, or set numa_exporter_tls_names to the "
                "names it carries" % name)
    if "expired" in lowered:
        return "the certificate or a CA of its chain has expired (%s)" % message, "renew it"
    if "not yet valid" in lowered:
        return "the certificate is not valid yet (%s)" % message, "issue one valid now (are the clocks right?)"
    if "issuer" in lowered or "self-signed" in lowered or "self signed" in lowered or "chain" in lowered:
        return ("the certificate is not signed by a CA of %s (%s)" % (ca_file, message),
                "give the CA that issued it as numa_exporter_tls_ca_file, and any intermediate CA in the "
                "certificate file after the certificate")
    return "a client trusting %s refuses the certificate (%s)" % (ca_file, message), "fix the certificate chain"


def _readable_as(user, paths):
    """[(path, error)] of ``paths`` that ``user`` cannot open for reading, tried in a child process
    that switched to the user; None when the user does not exist; OSError when switching fails."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    groups = os.getgrouplist(user, entry.pw_gid)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child, reported through the pipe
        code = 0
        try:
            os.close(reader)
            os.setgroups(groups)
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            failed = []
            for path in paths:
                try:
                    with open(path, "rb") as handle:
                        handle.read(1)
                except OSError as exc:
                    failed.append((path, exc.strerror))
            os.write(writer, json.dumps({"failed": failed}).encode("utf-8"))
        except Exception as exc:  # pylint: disable=broad-except
            os.write(writer, json.dumps({"switch": str(exc)}).encode("utf-8"))
            code = 1
        finally:
            os._exit(code)  # pylint: disable=protected-access
    os.close(writer)
    chunks = []
    while True:
        chunk = os.read(reader, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(reader)
    os.waitpid(pid, 0)
    answer = json.loads(b"".join(chunks).decode("utf-8") or "{}")
    if "switch" in answer:
        raise OSError("cannot switch to user %s (%s)" % (user, answer["switch"]))
    return [tuple(item) for item in answer.get("failed", [])]


def _primary_group(user):
    import grp
    import pwd

    try:
        return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    except KeyError:
        return user


def tls_problems(cert_file, key_file, ca_file, names, renew_days=RENEW_DAYS, as_user="", now=None):
    """What keeps the files from serving ``names`` (see the module's docstring): a result dict with
    ``problems`` [(what, fix)], ``not_after`` (the certificate's end, as OpenSSL prints it, or None)
    and ``user_checked`` (whether ``as_user`` could be tried)."""
    import ssl

    problems = []
    result = {"problems": problems, "not_after": None, "user_checked": False}
    for label, path in (("certificate", cert_file), ("key", key_file), ("CA", ca_file)):
        try:
            info = os.stat(path)
        except OSError as exc:
            problems.append(("the %s file %s cannot be read (%s)" % (label, path, exc.strerror),
                             "put the %s there, or name the file that holds it" % label))
            continue
        if not stat.S_ISREG(info.st_mode):
            problems.append(("the %s file %s is not a regular file" % (label, path), "name the PEM file itself"))
        elif label == "key" and info.st_mode & 0o007:
            problems.append(("the key file %s is open to every user (mode %04o)" % (path, stat.S_IMODE(info.st_mode)),
                             "chmod o-rwx %s: only root and the exporter's user (or group) may read it" % path))
    if problems:
        return result
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        server.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        if "mismatch" in str(exc).lower():
            what = "the key %s is not the key of the certificate %s (%s)" % (key_file, cert_file, exc)
            fix = "give the certificate's own private key"
        else:
            what = "the certificate %s or its key %s do not load (%s)" % (cert_file, key_file, exc)
            fix = "give a PEM certificate and its unencrypted PEM private key"
        problems.append((what, fix))
    except (OSError, ValueError) as exc:
        problems.append(("the certificate %s or its key %s do not load (%s)" % (cert_file, key_file, exc),
                         "give a PEM certificate and its unencrypted PEM private key"))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        client.load_verify_locations(cafile=ca_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        problems.append(("the CA file %s does not load (%s)" % (ca_file, exc), "give the CA's PEM certificate"))
    if problems:
        return result
    for name in names or [""]:
        if not name:
            client.check_hostname = False
        try:
            peer = _handshake(server, client, name or None)
        except ssl.SSLError as exc:
            problems.append(_verify_problem(exc, name, ca_file))
            continue
        result["not_after"] = peer.get("notAfter")
    if result["not_after"]:
        end = ssl.cert_time_to_seconds(result["not_after"])
        if end - (now if now is not None else time.time()) < renew_days * 86400:
            problems.append(("the certificate ends on %s, within %d days" % (result["not_after"], renew_days),
                             "renew it"))
    if as_user:
        try:
            failed = _readable_as(as_user, [cert_file, key_file])
        except OSError as exc:
            failed = None
            problems.append((str(exc), "run the check as root"))
        if failed is not None:
            result["user_checked"] = True
            for path, why in failed:
                problems.append(("user %s cannot read %s (%s)" % (as_user, path, why),
                                 "let it read the file and the folders above it, e.g. chgrp %s %s and chmod "
                                 "0640 %s" % (_primary_group(as_user), path, path)))
    return result


def check_tls(argv):
    args = parse_check_args(argv)
    result = tls_problems(args.cert_file, args.key_file, args.ca_file, args.name, args.renew_days, args.as_user)
    result["problems"] = [list(item) for item in result["problems"]]
    print(json.dumps(result, sort_keys=True))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "relay":
        return relay(argv[1:])
    if argv and argv[0] == "check-tls":
        return check_tls(argv[1:])
    return serve(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
