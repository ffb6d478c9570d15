# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``numa-agent check-tls``: whether a certificate, its key and a CA can serve the exporter.

The key loads with the certificate, a client trusting only the CA accepts it under each
``--name`` (a TLS handshake in memory, by this Python's OpenSSL, the one that will serve), it is
valid now and for ``--renew-days`` more, the key is not readable by every user, and
(``--as-user``) the exporter's user can read both files. Prints JSON: {"problems": [[what, fix],
...], ...}. Standard library only, and runnable on its own (``python3 tls_check.py ...``): the
numa_exporter role runs it on a node before anything is installed there.
"""

import argparse
import json
import os
import stat
import sys
import time

RENEW_DAYS = 30


def parse_check_args(argv):
    parser = argparse.ArgumentParser(prog="numa-agent check-tls",
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


def main(argv):
    args = parse_check_args(argv)
    result = tls_problems(args.cert_file, args.key_file, args.ca_file, args.name, args.renew_days, args.as_user)
    result["problems"] = [list(item) for item in result["problems"]]
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
