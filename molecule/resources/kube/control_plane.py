# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a real etcd and kube-apiserver on 127.0.0.1 for the kubelet scenario (host side).

    python3 control_plane.py start --workdir DIR --assets DIR [--node-name NAME]
    python3 control_plane.py stop --workdir DIR

``start`` makes a CA and certificates with openssl, starts etcd and kube-apiserver (Node and RBAC
authorization) on free loopback ports, waits until the API server is ready, and prints JSON with
the API server's port and two kubeconfigs: ``admin`` (for the controller, 127.0.0.1) and
``kubelet`` (for the guest, which reaches the host's loopback as 10.0.2.2 through qemu's user
network). Logs go to DIR/*.log; DIR/audit.log records every change to a Node object and every
eviction (JSON lines), so tests can see what a drain asked for. ``stop`` ends both and removes the
data; it succeeds when there is nothing to stop.
"""

from __future__ import absolute_import, division, print_function

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import time

try:
    from urllib.request import HTTPSHandler, build_opener
except ImportError:  # pragma: no cover - Python 2 is not supported by the test bed
    raise

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm"))
from numa_vm import end_process, free_port, start_stop_cli  # noqa: E402  pylint: disable=wrong-import-position

__metaclass__ = type  # pylint: disable=invalid-name

GUEST_SEES_HOST_AS = "10.0.2.2"


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    verbs: [create, patch, update]
    resources:
      - group: ""
        resources: [nodes, pods/eviction]
  - level: None
"""


def openssl(*args):
    subprocess.check_call(["openssl"] + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def certificate(pki, name, subject, ca=True, san=None):
    """A key and a certificate signed by pki/ca (or the CA itself)."""
    key = os.path.join(pki, name + ".key")
    crt = os.path.join(pki, name + ".crt")
    openssl("genrsa", "-out", key, "2048")
    if name == "ca":
        openssl("req", "-x509", "-new", "-key", key, "-subj", subject, "-days", "3", "-out", crt)
        return key, crt
    csr = os.path.join(pki, name + ".csr")
    ext = os.path.join(pki, name + ".ext")
    with open(ext, "w") as handle:
        handle.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n")
        handle.write("extendedKeyUsage=%s\n" % ("serverAuth" if san else "clientAuth"))
        if san:
            handle.write("subjectAltName=%s\n" % san)
    openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr)
    openssl("x509", "-req", "-in", csr, "-CA", os.path.join(pki, "ca.crt"), "-CAkey", os.path.join(pki, "ca.key"),
            "-CAcreateserial", "-days", "3", "-extfile", ext, "-out", crt)
    return key, crt


def kubeconfig(path, server, ca, crt, key, user):
    def data(name):
        with open(name, "rb") as handle:
            return base64.b64encode(handle.read()).decode()

    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "numa",
        "clusters": [{"name": "numa", "cluster": {"server": server, "certificate-authority-data": data(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": data(crt), "client-key-data": data(key)}}],
        "contexts": [{"name": "numa", "context": {"cluster": "numa", "user": user}}],
    }
    with open(path, "w") as handle:
        json.dump(config, handle, indent=2)
    os.chmod(path, 0o600)


def spawn(workdir, name, command):
    log = open(os.path.join(workdir, name + ".log"), "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with open(os.path.join(workdir, name + ".pid"), "w") as handle:
        handle.write(str(process.pid))
    return process


def wait_ready(port, pki, process, timeout):
    context = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
    context.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    opener = build_opener(HTTPSHandler(context=context))
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            return False
        try:
            if opener.open("https://127.0.0.1:%d/readyz" % port, timeout=5).read() == b"ok":
                return True
        except Exception:  # not listening yet, or still starting its hooks
            pass
        time.sleep(1)
    return False


def start(args):
    if os.path.exists(os.path.join(args.workdir, "control-plane.json")):
        stop(args)
    pki = os.path.join(args.workdir, "pki")
    os.makedirs(pki, exist_ok=True)
    certificate(pki, "ca", "/CN=numa-kube-test-ca")
    certificate(pki, "apiserver", "/CN=kube-apiserver",
                san="IP:127.0.0.1,IP:%s,DNS:localhost,DNS:kubernetes" % GUEST_SEES_HOST_AS)
    certificate(pki, "admin", "/O=system:masters/CN=numa-kube-admin")
    certificate(pki, "node", "/O=system:nodes/CN=system:node:%s" % args.node_name)
    openssl("genrsa", "-out", os.path.join(pki, "sa.key"), "2048")
    openssl("rsa", "-in", os.path.join(pki, "sa.key"), "-pubout", "-out", os.path.join(pki, "sa.pub"))

    # The audit log lets the tests see what the role asked of the API: cordon, evictions, uncordon.
    audit_policy = os.path.join(args.workdir, "audit-policy.yaml")
    with open(audit_policy, "w") as handle:
        handle.write(AUDIT_POLICY)
    audit_log = os.path.join(args.workdir, "audit.log")
    if os.path.exists(audit_log):
        os.remove(audit_log)

    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    data = os.path.join(args.workdir, "etcd-data")
    shutil.rmtree(data, ignore_errors=True)
    etcd = spawn(args.workdir, "etcd", [
        os.path.join(args.assets, "etcd"), "--name=numa", "--data-dir=" + data,
        "--listen-client-urls=http://127.0.0.1:%d" % etcd_port,
        "--advertise-client-urls=http://127.0.0.1:%d" % etcd_port,
        "--listen-peer-urls=http://127.0.0.1:%d" % peer_port,
        "--initial-advertise-peer-urls=http://127.0.0.1:%d" % peer_port,
        "--initial-cluster=numa=http://127.0.0.1:%d" % peer_port,
        "--listen-metrics-urls=", "--log-level=warn"])
    apiserver = spawn(args.workdir, "kube-apiserver", [
        os.path.join(args.assets, "kube-apiserver"),
        "--etcd-servers=http://127.0.0.1:%d" % etcd_port,
        "--bind-address=127.0.0.1", "--secure-port=%d" % api_port,
        "--advertise-address=" + GUEST_SEES_HOST_AS, "--endpoint-reconciler-type=none",
        "--tls-cert-file=" + os.path.join(pki, "apiserver.crt"),
        "--tls-private-key-file=" + os.path.join(pki, "apiserver.key"),
        "--client-ca-file=" + os.path.join(pki, "ca.crt"),
        "--service-account-key-file=" + os.path.join(pki, "sa.pub"),
        "--service-account-signing-key-file=" + os.path.join(pki, "sa.key"),
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=Node,RBAC",
        # No controller-manager runs, so nothing creates service accounts: pods go without one.
        "--disable-admission-plugins=ServiceAccount",
        "--enable-priority-and-fairness=false",
        "--audit-policy-file=" + audit_policy, "--audit-log-path=" + audit_log, "--audit-log-format=json"])
    if not wait_ready(api_port, pki, apiserver, args.timeout):
        sys.stderr.write("kube-apiserver did not become ready (exit %s); see %s/kube-apiserver.log and etcd.log\n"
                         % (apiserver.poll(), args.workdir))
        stop(args, keep_logs=True)
        return 1
    admin = os.path.join(args.workdir, "admin.kubeconfig")
    kubelet = os.path.join(args.workdir, "kubelet.kubeconfig")
    kubeconfig(admin, "https://127.0.0.1:%d" % api_port, os.path.join(pki, "ca.crt"),
               os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"), "admin")
    kubeconfig(kubelet, "https://%s:%d" % (GUEST_SEES_HOST_AS, api_port), os.path.join(pki, "ca.crt"),
               os.path.join(pki, "node.crt"), os.path.join(pki, "node.key"), "node")
    state = {"port": api_port, "admin_kubeconfig": admin, "kubelet_kubeconfig": kubelet,
             "pids": [etcd.pid, apiserver.pid], "workdir": args.workdir}
    with open(os.path.join(args.workdir, "control-plane.json"), "w") as handle:
        json.dump(state, handle)
    print(json.dumps(state))
    return 0


def stop(args, keep_logs=True):
    for name in ("kube-apiserver", "etcd"):
        pidfile = os.path.join(args.workdir, name + ".pid")
        if not os.path.exists(pidfile):
            continue
        with open(pidfile) as handle:
            text = handle.read().strip()
        if text.isdigit():
            end_process(int(text), group=True)
        os.remove(pidfile)
    for name in ("etcd-data", "pki", "control-plane.json", "admin.kubeconfig", "kubelet.kubeconfig"):
        path = os.path.join(args.workdir, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)
    if not keep_logs:
        for name in ("kube-apiserver.log", "etcd.log", "audit.log", "audit-policy.yaml"):
            path = os.path.join(args.workdir, name)
            if os.path.exists(path):
                os.remove(path)
    return 0


def main(argv=None):
    return start_stop_cli(__doc__, [
        ("--assets", {"required": True}),
        ("--node-name", {"default": "numa-guest"}),
        ("--timeout", {"type": int, "default": 180, "help": "seconds the API server may take to be ready"}),
    ], start, stop, argv)


if __name__ == "__main__":
    sys.exit(main())
