# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a one-layer OCI image archive from a folder, for `ctr images import` (no registry needed).

    python3 oci_image.py ROOTFS NAME ENTRYPOINT_JSON OUT.tar [ENV_JSON]

ENV_JSON is a list of NAME=value strings added to the usual PATH.
"""

from __future__ import absolute_import, division, print_function

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

__metaclass__ = type  # pylint: disable=invalid-name


def layer_bytes(rootfs):
    """A gzip'd tar of the folder, with fixed owners and times so the digest is reproducible."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(folder, name)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as handle:
                        tar.addfile(info, handle)
                else:
                    tar.addfile(info)
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    packed = io.BytesIO()
    # the fastest level: 9, gzip's default, took most of the assets' last step (about 10 MB/s, some
    # 500 MB of layers) for files a tenth smaller; inflating in the guest is as fast either way
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=1) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue(), diff_id


def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return "sha256:" + digest, len(data)


def main(rootfs, name, entrypoint, out, env="[]"):
    layer, diff_id = layer_bytes(rootfs)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": json.loads(entrypoint), "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + json.loads(env)},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }, sort_keys=True).encode()
    with tarfile.open(out, "w") as tar:
        layer_digest, layer_size = blob(tar, layer)
        config_digest, config_size = blob(tar, config)
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                       "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest,
                        "size": layer_size}],
        }, sort_keys=True).encode()
        manifest_digest, manifest_size = blob(tar, manifest)
        index = json.dumps({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                           "size": manifest_size, "platform": {"architecture": "amd64", "os": "linux"},
                           "annotations": {"io.containerd.image.name": name,
                                           "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}],
        }, sort_keys=True).encode()
        for member, data in (("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", index)):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(*sys.argv[1:])
