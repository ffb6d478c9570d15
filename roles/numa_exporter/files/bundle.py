# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pack the node agent's exporter into one file that ``python3`` runs: the numa_exporter role's program.

    python3 bundle.py COLLECTION_ROOT [OUTPUT]
    python3 bundle.py --base64 COLLECTION_ROOT

The systemd exporter is the node agent's own program (``numa-agent exporter``, its
``checkpoint-relay`` and ``check-tls``), with the standard-library parts only: the agent's package
and the collection's module_utils it imports, in a Python zip application (PEP 441; a ``python3``
given a zip file runs its ``__main__.py``). The archive is the same byte for byte for the same
sources on any controller (entries sorted, stored uncompressed, one fixed date and mode), so the
role's copy changes the node only when the code changed.

With ``--base64`` it prints the file's bytes base64-encoded and writes nothing: what the role
hands to numa.kube.node_files, which installs the program with its units and TLS files in one
module run. Without OUTPUT it writes the file into a cache folder of the controller's user
(``<temporary folder>/numa-kube-<uid>``), named by a digest of its bytes, and prints its path. The
same code always gives the same path, so that hosts packing at once (``strategy: free`` runs the
pack for each host) or one after another share one file, each write whole (a temporary file
renamed into place), and nothing has to be removed after the copies, which may fail on every
host. Older packs in the folder, a day untouched, are removed as a new one is written.
"""

from __future__ import absolute_import, division, print_function

import base64
import hashlib
import io
import os
import sys
import tempfile
import time
import zipfile

AGENT = ("__init__.py", "__main__.py", "exporter.py", "checkpoint_relay.py", "tls_check.py", "authn.py", "kube.py",
         "pods.py", "metrics/__init__.py", "metrics/numa_metrics.py", "metrics/topology.py", "metrics/node.py",
         "metrics/assignment.py", "metrics/locality.py", "metrics/text.py", "metrics/server.py")
MODULE_UTILS = ("quantity.py", "numa/__init__.py", "numa/sysfs.py")
PACKAGES = ("ansible_collections", "ansible_collections/numa", "ansible_collections/numa/kube",
            "ansible_collections/numa/kube/plugins", "ansible_collections/numa/kube/plugins/module_utils")
MAIN = b"import sys\n\nfrom numa_agent.__main__ import main\n\nsys.exit(main())\n"
STAMP = (1980, 1, 1, 0, 0, 0)
# packs of other code in the cache folder untouched for this long are removed
STALE_SECONDS = 86400


def entries(root):
    """[(name in the archive, bytes)], sorted."""
    found = [("__main__.py", MAIN)]
    for name in AGENT:
        with open(os.path.join(root, "agent", "numa_agent", name), "rb") as handle:
            found.append(("numa_agent/" + name, handle.read()))
    for package in PACKAGES:
        found.append((package + "/__init__.py", b""))
    for name in MODULE_UTILS:
        with open(os.path.join(root, "plugins", "module_utils", name), "rb") as handle:
            found.append((PACKAGES[-1] + "/" + name, handle.read()))
    return sorted(found)


def packed(root):
    """The archive's bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries(root):
            info = zipfile.ZipInfo(name, STAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, data)
    return buffer.getvalue()


def write_whole(path, data):
    """Write ``data`` to ``path`` through a temporary file beside it, renamed into place: a reader
    never sees half a file."""
    handle, partial = tempfile.mkstemp(prefix=".numa-exporter-", suffix=".part", dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise


def cache_folder():
    folder = os.path.join(tempfile.gettempdir(), "numa-kube-%d" % os.getuid())
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.stat(folder).st_uid != os.getuid():
        raise SystemExit("%s belongs to another user: remove it, or set TMPDIR to a folder of yours" % folder)
    return folder


def cached(root, now=None):
    """The path of the pack of ``root`` in the cache folder, written when missing; stale packs of
    other code removed."""
    data = packed(root)
    folder = cache_folder()
    path = os.path.join(folder, "numa-exporter-%s.pyz" % hashlib.sha256(data).hexdigest()[:32])
    if not os.path.exists(path):
        write_whole(path, data)
    else:
        os.utime(path)  # in use: not stale
    now = time.time() if now is None else now
    for name in os.listdir(folder):
        other = os.path.join(folder, name)
        if other != path and name.startswith("numa-exporter-") and name.endswith(".pyz"):
            try:
                if now - os.stat(other).st_mtime > STALE_SECONDS:
                    os.unlink(other)
            except OSError:  # another run removed it first
                pass
    return path


def main(argv):
    if len(argv) == 2 and argv[0] == "--base64":
        print(base64.b64encode(packed(argv[1])).decode("ascii"))
        return 0
    if not 1 <= len(argv) <= 2 or "--base64" in argv:
        sys.stderr.write(__doc__)
        return 2
    if len(argv) == 2:
        with open(argv[1], "wb") as out:
            out.write(packed(argv[0]))
        print(argv[1])
        return 0
    print(cached(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
