# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the control plane of the cluster scenario on 127.0.0.1 (host side).

    python3 control_plane.py start --workdir DIR --assets DIR --guests DIR [--node-name NAME ...]
    python3 control_plane.py stop --workdir DIR

``start`` makes a CA and certificates with openssl and starts etcd, kube-apiserver (Node and RBAC
authorization), kube-controller-manager and kube-scheduler on loopback, each with an identity of
its own (and, when the assets hold it, prometheus-operator after its CRDs, and vm/lan_hub.py, the
guests' shared LAN), so that Deployments, DaemonSets, service accounts and the ``kubernetes`` Service work as in
any cluster. The API server advertises itself as 10.0.2.2, the address under which the guests
(behind qemu's user network) reach the host's loopback, so pods reach it through the ``kubernetes``
Service; it reaches the kubelets through egress_proxy.py. It waits until the API server is ready
and prints JSON with the API server's port and two kubeconfigs: ``admin`` (for the controller,
127.0.0.1) and ``kubelet`` (for each guest). Logs go to DIR/*.log; DIR/audit.log records every
change to a Node object and every eviction (JSON lines), so tests can see what a drain asked for.
``stop`` ends them all and removes the data; it succeeds when there is nothing to stop.
"""

from __future__ import absolute_import, division, print_function

import base64
import glob
import json
import os
import shutil
import ssl
import subprocess
import sys
import time

try:
    from urllib.error import HTTPError
    from urllib.request import HTTPSHandler, Request, build_opener
except ImportError:  # pragma: no cover - Python 2 is not supported by the test bed
    raise

VM_RESOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm")
sys.path.insert(0, VM_RESOURCES)
from numa_vm import end_process, free_port, start_stop_cli  # noqa: E402  pylint: disable=wrong-import-position

__metaclass__ = type  # pylint: disable=invalid-name

GUEST_SEES_HOST_AS = "10.0.2.2"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"   # the first address of SERVICE_CIDR
# the image of the Prometheus that prometheus-operator runs (and of its config reloader): build-assets.sh
PROMETHEUS_IMAGE = "numa.kube/prometheus:v2.53.3"


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
  # where each pod runs (its nodeName at creation, or the scheduler's binding): the tests tell one
  # node's evictions from another's
  - level: Request
    verbs: [create]
    resources:
      - group: ""
        resources: [pods, pods/binding]
  - level: None
"""


# The API server dials kubelets through egress_proxy.py (HTTP CONNECT over a unix socket).
EGRESS_SELECTOR = """\
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: %s
"""

# The rest of the control plane, with the flags that differ from their defaults (PKI: the
# certificates' folder). Serving ports are off: nothing here scrapes them, and two runs of the
# test bed on one host must not collide on fixed ports.
COMPONENTS = {
    "kube-controller-manager": [
        "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
        "--use-service-account-credentials=true", "--service-account-private-key-file=PKI/sa.key",
        "--root-ca-file=PKI/ca.crt",
        # the tests hold guests paused (SIGSTOP) for minutes and stop kubelets on purpose: the node
        # lifecycle controller (which lifts kubelet's not-ready taint) must not also take them for
        # lost and evict their pods meanwhile
        "--node-monitor-grace-period=30m",
    ],
    "kube-scheduler": ["--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"],
}


def openssl(*args):
    subprocess.check_call(["openssl"] + list(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def certificate(pki, name, subject, ca=True, san=None):
    """A key and a certificate signed by pki/ca (or the CA itself)."""
    key = os.path.join(pki, name + ".key")
    crt = os.path.join(pki, name + ".crt")
    openssl("genrsa", "-out", key, "2048")
    if name == "ca":
        # the extensions strict verifiers (Python 3.13's ssl, for one) demand of a CA
        openssl("req", "-x509", "-new", "-key", key, "-subj", subject, "-days", "3", "-out", crt,
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-addext", "subjectKeyIdentifier=hash")
        return key, crt
    csr = os.path.join(pki, name + ".csr")
    ext = os.path.join(pki, name + ".ext")
    with open(ext, "w") as handle:
        handle.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                     "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
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


def spawn(workdir, name, command, env=None):
    log = open(os.path.join(workdir, name + ".log"), "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    with open(os.path.join(workdir, name + ".pid"), "w") as handle:
        handle.write(str(process.pid))
    return process


def admin_opener(pki):
    context = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
    context.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    return build_opener(HTTPSHandler(context=context))


def create_crds(port, pki, folder, timeout=120):
    """Create the CustomResourceDefinitions of folder/*.yaml (kept if there) and wait until served."""
    import yaml  # the test bed runs this with Ansible's Python, which has it

    class Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        """YAML 1.1 reads a bare "=" (an enum value in these CRDs) as its "value" tag: a string here."""

    Loader.add_constructor("tag:yaml.org,2002:value", Loader.construct_yaml_str)
    opener = admin_opener(pki)
    base = "https://127.0.0.1:%d/apis/apiextensions.k8s.io/v1/customresourcedefinitions" % port
    names = []
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml"))):
        with open(path) as handle:
            crd = yaml.load(handle, Loader=Loader)  # noqa: S506 - a safe loader
        names.append(crd["metadata"]["name"])
        request = Request(base, data=json.dumps(crd).encode(), headers={"Content-Type": "application/json"},
                          method="POST")
        try:
            opener.open(request, timeout=60).read()
        except HTTPError as exc:
            if exc.code != 409:
                raise SystemExit("creating the CRD %s failed: %s %s" % (path, exc.code, exc.read()[:500]))
    deadline = time.time() + timeout
    for name in names:
        while True:
            crd = json.loads(opener.open("%s/%s" % (base, name), timeout=30).read())
            if any(c["type"] == "Established" and c["status"] == "True"
                   for c in crd.get("status", {}).get("conditions", [])):
                break
            if time.time() > deadline:
                raise SystemExit("the CRD %s was not established within %d s" % (name, timeout))
            time.sleep(1)


def wait_ready(port, pki, process, timeout):
    opener = admin_opener(pki)
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


def start_lan_hub(workdir, timeout=30):
    """Start the guests' shared segment (vm/lan_hub.py); its port, once it accepts connections."""
    port_file = os.path.join(workdir, "lan-hub.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    hub = spawn(workdir, "lan-hub", [sys.executable, os.path.join(VM_RESOURCES, "lan_hub.py"),
                                     "--port-file", port_file])
    deadline = time.time() + timeout
    while not os.path.exists(port_file):
        if hub.poll() is not None or time.time() > deadline:
            raise SystemExit("lan_hub.py did not start; see %s/lan-hub.log" % workdir)
        time.sleep(0.2)
    with open(port_file) as handle:
        return int(handle.read())


def start(args):
    if os.path.exists(os.path.join(args.workdir, "control-plane.json")):
        stop(args)
    pki = os.path.join(args.workdir, "pki")
    os.makedirs(pki, exist_ok=True)
    certificate(pki, "ca", "/CN=numa-kube-test-ca")
    # and as the kubernetes Service (its cluster IP and names), where pods reach it in-cluster
    certificate(pki, "apiserver", "/CN=kube-apiserver",
                san="IP:127.0.0.1,IP:%s,IP:%s,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
                % (GUEST_SEES_HOST_AS, KUBERNETES_SERVICE_IP))
    certificate(pki, "admin", "/O=system:masters/CN=numa-kube-admin")
    # the API server's identity towards kubelets (logs, exec, /configz), which authorize as kubeadm's do
    certificate(pki, "apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    for name in COMPONENTS:
        certificate(pki, name, "/CN=system:" + name)
    # one identity per node, as the Node authorizer wants (a kubelet may only touch its own Node)
    for name in args.node_name:
        certificate(pki, "node-" + name, "/O=system:nodes/CN=system:node:%s" % name)
    openssl("genrsa", "-out", os.path.join(pki, "sa.key"), "2048")
    openssl("rsa", "-in", os.path.join(pki, "sa.key"), "-pubout", "-out", os.path.join(pki, "sa.pub"))

    # The audit log lets the tests see what the role asked of the API: cordon, evictions, uncordon.
    audit_policy = os.path.join(args.workdir, "audit-policy.yaml")
    with open(audit_policy, "w") as handle:
        handle.write(AUDIT_POLICY)
    audit_log = os.path.join(args.workdir, "audit.log")
    if os.path.exists(audit_log):
        os.remove(audit_log)

    proxy_socket = os.path.join(args.workdir, "egress.sock")
    egress_config = os.path.join(args.workdir, "egress-selector.yaml")
    with open(egress_config, "w") as handle:
        handle.write(EGRESS_SELECTOR % proxy_socket)
    proxy = spawn(args.workdir, "egress-proxy", [
        sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "egress_proxy.py"),
        "--socket", proxy_socket, "--guests", args.guests])

    lan_port = start_lan_hub(args.workdir)

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
        "--advertise-address=" + GUEST_SEES_HOST_AS,
        "--egress-selector-config-file=" + egress_config, "--kubelet-preferred-address-types=InternalIP",
        "--tls-cert-file=" + os.path.join(pki, "apiserver.crt"),
        "--tls-private-key-file=" + os.path.join(pki, "apiserver.key"),
        "--client-ca-file=" + os.path.join(pki, "ca.crt"),
        "--kubelet-client-certificate=" + os.path.join(pki, "apiserver-kubelet-client.crt"),
        "--kubelet-client-key=" + os.path.join(pki, "apiserver-kubelet-client.key"),
        "--service-account-key-file=" + os.path.join(pki, "sa.pub"),
        "--service-account-signing-key-file=" + os.path.join(pki, "sa.key"),
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=%s" % SERVICE_CIDR,
        "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        "--enable-priority-and-fairness=false",
        "--audit-policy-file=" + audit_policy, "--audit-log-path=" + audit_log, "--audit-log-format=json"])
    if not wait_ready(api_port, pki, apiserver, args.timeout):
        sys.stderr.write("kube-apiserver did not become ready (exit %s); see %s/kube-apiserver.log and etcd.log\n"
                         % (apiserver.poll(), args.workdir))
        stop(args, keep_logs=True)
        return 1
    admin = os.path.join(args.workdir, "admin.kubeconfig")
    kubeconfig(admin, "https://127.0.0.1:%d" % api_port, os.path.join(pki, "ca.crt"),
               os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"), "admin")
    pids = [proxy.pid, etcd.pid, apiserver.pid]
    for name, flags in sorted(COMPONENTS.items()):
        config = os.path.join(args.workdir, name + ".kubeconfig")
        kubeconfig(config, "https://127.0.0.1:%d" % api_port, os.path.join(pki, "ca.crt"),
                   os.path.join(pki, name + ".crt"), os.path.join(pki, name + ".key"), name)
        pids.append(spawn(args.workdir, name, [os.path.join(args.assets, name), "--kubeconfig=" + config,
                                               "--authentication-kubeconfig=" + config,
                                               "--authorization-kubeconfig=" + config]
                          + [flag.replace("PKI", pki) for flag in flags]).pid)
    operator = os.path.join(args.assets, "prometheus-operator")
    if os.path.isdir(operator):
        # prometheus-operator as a process of the host, as any controller with a kubeconfig runs:
        # its CRDs first (it leaves out the kinds whose CRD it does not find at start)
        create_crds(api_port, pki, os.path.join(operator, "crds"))
        # No CPU limit on the config reloader (the operator's default is 10m). Tests hold a guest
        # stopped for minutes (testlib.PausedGuest) while its clock goes on with the host's; when
        # it runs again, a task that happened to be running on a vCPU is charged the whole pause,
        # and its cgroup repays that at its limit's rate: 100 times the pause at 10m. The guests'
        # kernel (6.12) throttles the whole cgroup, so SIGKILL cannot end the task (it must run to
        # die) and the Prometheus pod stays terminating: every drain of that node ran out of time
        # in a whole run on 2026-11-26.
        pids.append(spawn(args.workdir, "prometheus-operator", [
            os.path.join(operator, "operator"), "--web.listen-address=127.0.0.1:%d" % free_port(),
            "--prometheus-config-reloader=" + PROMETHEUS_IMAGE, "--config-reloader-cpu-limit=0",
            "--log-level=info"],
            env=dict(os.environ, KUBECONFIG=admin)).pid)
    kubelets = {}
    for name in args.node_name:
        kubelets[name] = os.path.join(args.workdir, "kubelet-%s.kubeconfig" % name)
        kubeconfig(kubelets[name], "https://%s:%d" % (GUEST_SEES_HOST_AS, api_port), os.path.join(pki, "ca.crt"),
                   os.path.join(pki, "node-%s.crt" % name), os.path.join(pki, "node-%s.key" % name), name)
    state = {"port": api_port, "lan_port": lan_port, "admin_kubeconfig": admin, "kubelet_kubeconfigs": kubelets,
             "pids": pids, "workdir": args.workdir, "assets": os.path.abspath(args.assets)}
    with open(os.path.join(args.workdir, "control-plane.json"), "w") as handle:
        json.dump(state, handle)
    print(json.dumps(state))
    return 0


def stop(args, keep_logs=True):
    for name in ["prometheus-operator"] + sorted(COMPONENTS) + ["kube-apiserver", "etcd", "egress-proxy", "lan-hub"]:
        pidfile = os.path.join(args.workdir, name + ".pid")
        if not os.path.exists(pidfile):
            continue
        with open(pidfile) as handle:
            text = handle.read().strip()
        if text.isdigit():
            end_process(int(text), group=True)
        os.remove(pidfile)
    names = ["etcd-data", "pki", "control-plane.json", "admin.kubeconfig", "egress.sock", "lan-hub.port"]
    names += [name + ".kubeconfig" for name in COMPONENTS]
    names += [name for name in os.listdir(args.workdir) if name.startswith("kubelet-")] if os.path.isdir(args.workdir) else []
    for name in names:
        path = os.path.join(args.workdir, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)
    if not keep_logs:
        for name in ["kube-apiserver.log", "etcd.log", "egress-proxy.log", "lan-hub.log", "prometheus-operator.log", "audit.log", "audit-policy.yaml",
                     "egress-selector.yaml"] + [name + ".log" for name in COMPONENTS]:
            path = os.path.join(args.workdir, name)
            if os.path.exists(path):
                os.remove(path)
    return 0


def main(argv=None):
    return start_stop_cli(__doc__, [
        ("--assets", {"required": True}),
        ("--guests", {"required": True, "help": "the folder of the guests' instance.json (egress_proxy.py)"}),
        ("--node-name", {"action": "append", "required": True, "help": "a node to make a kubelet kubeconfig for"}),
        ("--timeout", {"type": int, "default": 180, "help": "seconds the API server may take to be ready"}),
    ], start, stop, argv)


if __name__ == "__main__":
    sys.exit(main())
