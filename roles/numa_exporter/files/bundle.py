# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pack the node agent's exporter into one file that ``python3`` runs: the numa_exporter role's program.

    python3 bundle.py COLLECTION_ROOT [OUTPUT]

The systemd exporter is the node agent's own program (``numa-agent exporter``, its
``checkpoint-relay`` and ``check-tls``), with the standard-library parts only: the agent's package
and the collection's module_utils it imports, in a Python zip application (PEP 441; a ``python3``
given a zip file runs its ``__main__.py``). The archive is the same byte for byte for the same
sources on any controller (entries sorted, stored uncompressed, one fixed date and mode), so the
role's copy changes the node only when the code changed. Without OUTPUT it writes a new file in
the temporary folder and prints its path (the role copies it to the nodes, then removes it).
"""

from __future__ import absolute_import, division, print_function

import os
import sys
import tempfile
import zipfile

AGENT = ("__init__.py", "__main__.py", "exporter.py", "checkpoint_relay.py", "tls_check.py", "authn.py", "kube.py",
         "pods.py")
MODULE_UTILS = ("quantity.py", "topology.py", "metrics_text.py", "metrics_server.py", "numa_metrics.py",
                "numa_metrics_topology.py", "numa_metrics_node.py", "numa_metrics_assignment.py",
                "numa_metrics_locality.py")
PACKAGES = ("ansible_collections", "ansible_collections/numa", "ansible_collections/numa/kube",
            "ansible_collections/numa/kube/plugins", "ansible_collections/numa/kube/plugins/module_utils")
MAIN = b"import sys\n\nfrom numa_agent.__main__ import main\n\nsys.exit(main())\n"
STAMP = (1980, 1, 1, 0, 0, 0)


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


def write(root, output):
    with zipfile.ZipFile(output, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries(root):
            info = zipfile.ZipInfo(name, STAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, data)


def main(argv):
    if not 1 <= len(argv) <= 2:
        sys.stderr.write(__doc__)
        return 2
    if len(argv) == 2:
        write(argv[0], argv[1])
        print(argv[1])
        return 0
    handle, output = tempfile.mkstemp(prefix="numa-exporter-", suffix=".pyz")
    os.close(handle)
    try:
        write(argv[0], output)
    except Exception:
        os.unlink(output)
        raise
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
