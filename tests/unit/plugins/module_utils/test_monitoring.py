# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring stack's objects, its TLS Secret and the order of the module's steps.

Against a real API server, prometheus-operator and Prometheus it is proven in the cluster scenario
(molecule/cluster/tests/test_monitoring.py); here the pure parts, with an in-memory stand-in for
the API so that a refusal provably comes before any change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import os
import shutil
import ssl
import sys
import tempfile

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from numa_agent.metrics import server as metrics_server
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring
from ansible_collections.numa.kube.plugins.module_utils.stacks import monitoring_objects
from numa_agent.metrics import numa_metrics
from ansible_collections.numa.kube.tests.unit.plugins.module_utils.test_resource_plugin import MemoryApi, no_wait, node
from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

PARAMS = {"state": "present", "name": "numa-exporter", "namespace": "volcano-system", "image": "r/agent:1",
          "image_pull_policy": "IfNotPresent", "port": 9201, "tls_secret": "", "interval": "30s",
          "service_monitor": True, "service_monitor_labels": {"release": "kps"}, "prometheus_rule": True,
          "rule_labels": {}, "memory_threshold": 0.9, "miss_ratio_threshold": 0.1, "dashboard": {"title": "NUMA"},
          "dashboard_labels": {"grafana_dashboard": "1"}, "dashboard_namespace": "", "without_operator": "fail",
          "node_selector": {}, "tolerations": None, "priority_class_name": "system-node-critical",
          "resources": None, "labels": {}, "wait": True, "wait_timeout": 5, "exporter_authentication": True,
          "exporter_containers": "all"}
SERVICE = "numa-exporter.volcano-system.svc"
SECRET = "/api/v1/namespaces/volcano-system/secrets/numa-exporter-tls"
NOW = datetime.datetime.now(datetime.timezone.utc)


def encoded(pem):
    return dict((key, base64.b64encode(value).decode()) for key, value in pem.items())


def decoded(secret):
    return dict((key, base64.b64decode(value)) for key, value in secret["data"].items())


def leaf_sha256(pem):
    return x509.load_pem_x509_certificate(pem).fingerprint(hashes.SHA256()).hex()


class StackApi(MemoryApi):
    """MemoryApi plus the discovery answer for monitoring.coreos.com/v1 and the exporters' answers.

    Each exporter answers as the agent does: /healthz names the certificate it serves (``served``
    by node name; by default the one in the stored Secret, as once kubelet has updated its volume),
    /metrics without a token is refused with 401 (``open_metrics``: served, as an old image did)."""

    def __init__(self, nodes, operator=True):
        super(StackApi, self).__init__(nodes, {})
        self.operator = operator
        self.served = {}
        self.open_metrics = False
        self.secret = SECRET

    def get(self, path, **params):
        if path == "/apis/monitoring.coreos.com/v1":
            self.calls.append(("get", path))
            return {"resources": [{"name": "servicemonitors"}, {"name": "prometheusrules"}]} if self.operator else None
        if path.endswith("/pods") and "volcano-system" in path:
            self.calls.append(("pods", params.get("label_selector")))
            return {"items": [{"metadata": {"name": "x-" + n["metadata"]["name"]},
                               "spec": {"nodeName": n["metadata"]["name"]}, "status": {"phase": "Running"}}
                              for n in self.node_list]}
        return super(StackApi, self).get(path, **params)

    def request(self, method, path, body=None, **params):
        self.calls.append(("request", method, path))
        pod = path.split("/pods/https:", 1)[1].split(":", 1)[0]
        if path.endswith("/healthz"):
            secret = self.store.get(self.secret)
            current = leaf_sha256(decoded(secret)["tls.crt"]) if secret else "0" * 64
            return "ok\ncertificate-sha256: %s\n" % self.served.get(pod[2:], current)
        if self.open_metrics:
            return "# HELP numa_node_cpus_count x\nnuma_node_cpus_count{numa_node=\"0\"} 2\n"
        raise monitoring.KubeApiError("GET %s: 401 numa-exporter: unauthorized: no bearer token" % path, 401)


def kinds(api, verb="apply"):
    return [call[1] for call in api.calls if call[0] == verb]


def test_objects_follow_the_guides_conventions():
    found = dict((o["kind"], o) for o in monitoring_objects.objects(PARAMS))
    service = found["Service"]
    assert service["metadata"]["name"] == "numa-exporter" and service["metadata"]["labels"]["app"] == "numa-exporter"
    assert service["spec"]["ports"][0]["name"] == "https" and service["spec"]["clusterIP"] == "None"
    endpoint = found["ServiceMonitor"]["spec"]["endpoints"][0]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https" and endpoint["interval"] == "30s"
    assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "numa-exporter-tls", "key": "ca.crt"}},
                                     "serverName": SERVICE}
    # the workload's namespace/pod/container labels, as the exporter writes them, win over the
    # exporter pod's own target labels (else queries by pod find nothing: seen on the test bed)
    assert endpoint["honorLabels"] is True
    assert found["ServiceMonitor"]["metadata"]["labels"]["release"] == "kps"
    assert found["ServiceMonitor"]["spec"]["selector"]["matchLabels"]["app"] == "numa-exporter"
    # the job label is the stack's name, the job the alert rules select
    job_label = found["ServiceMonitor"]["spec"]["jobLabel"]
    assert service["metadata"]["labels"][job_label] == "numa-exporter"
    pod = found["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    args = pod["containers"][0]["args"]
    assert "--listen-address=$(NODE_IP)" in args and any(a.startswith("--tls-cert-file") for a in args)
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert all(m.get("readOnly") for m in pod["containers"][0]["volumeMounts"])
    assert found["ConfigMap"]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert set(found) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service",
                          "ServiceMonitor", "PrometheusRule", "ConfigMap"}
    plain = [o["kind"] for o in monitoring_objects.objects(dict(PARAMS, dashboard=None), operator=False)]
    assert "ServiceMonitor" not in plain and "PrometheusRule" not in plain and "ConfigMap" not in plain


def test_scrapers_authenticate_and_the_exporter_may_do_only_what_it_needs():
    found = dict((o["kind"], o) for o in monitoring_objects.objects(PARAMS))
    assert found["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]
    endpoint = found["ServiceMonitor"]["spec"]["endpoints"][0]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert "authorization" not in endpoint, "v0.88's authorization takes a Secret's key, never a file"
    container = found["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in container["args"] if a.startswith("--authentication")], "the agent's default: on"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    open_stack = dict((o["kind"], o) for o in monitoring_objects.objects(dict(PARAMS, exporter_authentication=False)))
    assert open_stack["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert "bearerTokenFile" not in open_stack["ServiceMonitor"]["spec"]["endpoints"][0]
    assert "--authentication=none" in open_stack["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("containers, limit", [
    ("all", []), ("exclusive", ["--containers=exclusive"]), ("none", ["--containers=none"])])
def test_the_series_limit_reaches_the_exporter_and_all_passes_nothing(containers, limit):
    """Each value becomes the exporter's own option; ``all`` (its default) is left out, so that an
    image older than the option, whose parser refuses --containers, still starts."""
    pod = dict((o["kind"], o) for o in monitoring_objects.objects(dict(PARAMS, exporter_containers=containers)))[
        "DaemonSet"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert [a for a in args if a.startswith("--containers")] == limit
    # the agent's own parser takes the DaemonSet's arguments and reads the limit from them
    agent_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "agent")
    if agent_dir not in sys.path:
        sys.path.insert(0, agent_dir)
    from numa_agent import __main__ as agent

    parsed = agent.parse_args([a.replace("$(NODE_IP)", "10.0.0.1") for a in args])
    assert parsed.program == "exporter" and parsed.containers == containers
    assert parsed.sysfs == "/host/sys" and parsed.cgroup_root == "/host/sys/fs/cgroup"


def test_the_daemonset_without_the_option_renders_as_before():
    """Params without exporter_containers (a caller of run() that predates it) render no limit."""
    without = dict(PARAMS)
    del without["exporter_containers"]
    assert monitoring_objects.daemonset(without) == monitoring_objects.daemonset(PARAMS)
    monitoring.check_params(without)


def test_only_the_sysfs_subtrees_the_exporter_reads_are_mounted():
    pod = dict((o["kind"], o) for o in monitoring_objects.objects(PARAMS))["DaemonSet"]["spec"]["template"]["spec"]
    volumes = dict((v["name"], v) for v in pod["volumes"])
    host_paths = sorted(v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v)
    assert host_paths == ["/sys/bus/pci/devices", "/sys/devices", "/sys/fs/cgroup", "/var/lib/kubelet/pod-resources"]
    mounts = dict((m["name"], m["mountPath"]) for m in pod["containers"][0]["volumeMounts"])
    for name, path in monitoring_objects.SYSFS_MOUNTS:
        assert mounts[name] == "/host" + path, "each subtree where it is on the host, under /host"
    args = pod["containers"][0]["args"]
    assert "--sysfs=/host/sys" in args and "--cgroup-root=/host/sys/fs/cgroup" in args
    context = pod["containers"][0]["securityContext"]
    assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False


def container_view(host_sys, root, mounts):
    """What the container sees under /host/sys when only ``mounts`` (host paths under /sys) are
    mounted, each at /host<path>: a copy that keeps every symlink as it is, so that a relative link
    is resolved in the container's tree, as it is through a bind mount."""
    for path in mounts:
        shutil.copytree(os.path.join(host_sys, path[len("/sys/"):]), os.path.join(root, "host", path.lstrip("/")),
                        symlinks=True)
    return os.path.join(root, "host", "sys")


def test_the_mounted_subtrees_give_the_exporter_all_it_reads(tmp_path):
    machine = two_socket_interleaved()
    machine.add_pci("0000:3b:00.0", 0x020000, numa_node=1)
    machine.add_pci("0000:af:00.0", 0x010802, numa_node=0, vendor="0x144d", device="0xa808")
    host_sys, _proc = machine.write(str(tmp_path / "node"))
    container_id = "c" * 64
    cgroup = os.path.join(host_sys, "fs/cgroup/kubepods/burstable/pod0a1b2c3d-0000-4000-8000-00000000abcd",
                          container_id)
    os.makedirs(cgroup)
    with open(os.path.join(cgroup, "memory.numa_stat"), "w") as handle:
        handle.write("anon N0=4096 N1=0\nfile N0=0 N1=8192\n")
    containers = {container_id: ("prod", "db-0", "db")}

    def scrape(sys_root):
        text = numa_metrics.Scraper(sys_root, os.path.join(sys_root, "fs/cgroup")).scrape(containers=containers)
        return [line for line in text.splitlines() if not line.startswith("numa_exporter_scrape_duration_seconds")]

    on_the_host = scrape(host_sys)
    assert 'numa_pci_device_info{address="0000:3b:00.0",class="0x020000",vendor="0x8086",device="0x1572",' \
        'numa_node="1"} 1' in on_the_host
    assert any(line.startswith("numa_container_memory_bytes{") for line in on_the_host)
    mounted = [path for _name, path in monitoring_objects.SYSFS_MOUNTS]
    assert scrape(container_view(host_sys, str(tmp_path / "pod"), mounted)) == on_the_host
    # without /sys/devices the PCI links dangle (and the NUMA nodes are gone): the test would see it
    without = scrape(container_view(host_sys, str(tmp_path / "bare"), ["/sys/bus/pci/devices", "/sys/fs/cgroup"]))
    assert [line for line in without if line.startswith("numa_pci_device_info{")] == [
        'numa_pci_device_info{address="0000:3b:00.0",class="",vendor="",device="",numa_node="-1"} 1',
        'numa_pci_device_info{address="0000:af:00.0",class="",vendor="",device="",numa_node="-1"} 1']


def test_this_machines_pci_links_resolve_inside_the_mounts():
    """On this machine's own /sys, by reasoning on paths (nothing mounted): each /sys/bus/pci/devices
    link, resolved from where the container sees it, lands in the mounted /sys/devices and at the
    device the host's link names."""
    mounts = dict((path, "/host" + path) for _name, path in monitoring_objects.SYSFS_MOUNTS)
    bus = "/sys/bus/pci/devices"
    for name in sorted(os.listdir(bus)) if os.path.isdir(bus) else []:
        link = os.readlink(os.path.join(bus, name))
        seen = os.path.normpath(os.path.join(mounts[bus], link))  # resolved in the container's tree
        assert seen.startswith(mounts["/sys/devices"] + "/"), (name, link, seen)
        on_the_host = "/sys/devices/" + seen[len(mounts["/sys/devices"] + "/"):]
        assert on_the_host == os.path.realpath(os.path.join(bus, name)), (name, link)


def serves_under(pem, name):
    """A TLS handshake in memory with ``pem``'s certificate and CA bundle: raises unless they verify."""
    folder = tempfile.mkdtemp()
    for key, value in pem.items():
        with open(os.path.join(folder, key), "wb") as handle:
            handle.write(value)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key"))
    client = ssl.create_default_context(cafile=os.path.join(folder, "ca.crt"))
    client_side, server_side = ssl.MemoryBIO(), ssl.MemoryBIO()
    conn = client.wrap_bio(server_side, client_side, server_hostname=name)
    peer = server.wrap_bio(client_side, server_side, server_side=True)
    for _round in range(10):
        for end in (conn, peer):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
    shutil.rmtree(folder)
    return conn.getpeercert()


def test_the_certificate_verifies_under_the_service_name():
    names = [SERVICE]
    pem = monitoring.make_certificates(names)
    assert serves_under(pem, names[0])["subjectAltName"] == (("DNS", names[0]),)
    secret = {"data": encoded(pem)}
    assert monitoring.certificate_problems(secret, names) == []
    later = NOW + datetime.timedelta(days=monitoring_objects.CERTIFICATE_DAYS - 10)
    assert monitoring.certificate_problems(secret, names, now=later)[0][0].endswith(", within 30 days")
    assert monitoring.certificate_problems({"data": {"tls.crt": "eA=="}}, names)[0][0] == "it has no ca.crt, tls.key"
    leaf = x509.load_pem_x509_certificate(pem["tls.crt"])
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


# --- a user's Secret ----------------------------------------------------------------------------

def _name(text):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _sign(subject, key, issuer, issuer_key, ca, names=(), start=None, end=None):
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start or NOW - datetime.timedelta(days=1))
               .not_valid_after(end or NOW + datetime.timedelta(days=90))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def cert_manager_style(names=(SERVICE,), end=None, key_type="ec"):
    """A root CA (ca.crt), an intermediate, and a leaf followed by the intermediate (tls.crt)."""
    generate = (lambda: ec.generate_private_key(ec.SECP256R1())) if key_type == "ec" else (
        lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))
    root_key, middle_key, key = generate(), generate(), generate()
    root = _sign("Example Root", root_key, "Example Root", root_key, True)
    middle = _sign("Example Issuing CA", middle_key, "Example Root", root_key, True)
    leaf = _sign("exporter", key, "Example Issuing CA", middle_key, False, names, end=end)
    return {"ca.crt": monitoring._pem(root), "tls.crt": monitoring._pem(leaf) + monitoring._pem(middle),
            "tls.key": monitoring._key_pem(key)}


def refusal(pem, **params):
    """The run's refusal of a user's Secret holding ``pem``: (problems, what was applied)."""
    api = StackApi([node("w1")])
    if pem is not None:
        api.store["/api/v1/namespaces/volcano-system/secrets/mine"] = {"kind": "Secret", "data": encoded(pem)}
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, dict(PARAMS, tls_secret="mine", **params), False, no_wait)
    return caught.value.problems, kinds(api)


def test_a_users_chain_with_an_intermediate_and_a_wildcard_passes():
    for key_type in ("ec", "rsa"):
        pem = cert_manager_style(names=("*.volcano-system.svc",), key_type=key_type)
        assert monitoring.certificate_problems({"data": encoded(pem)}, [SERVICE]) == []
        serves_under(pem, SERVICE)  # and OpenSSL agrees
    api = StackApi([node("w1")])
    api.secret = "/api/v1/namespaces/volcano-system/secrets/mine"
    pem = cert_manager_style()
    api.store["/api/v1/namespaces/volcano-system/secrets/mine"] = {"kind": "Secret", "data": encoded(pem)}
    result = monitoring.run(api, dict(PARAMS, tls_secret="mine"), False, no_wait)
    assert result["tls"] == "Secret volcano-system/mine (yours) serves %s" % SERVICE
    assert "Secret" not in kinds(api), "a user's Secret is never changed"
    assert api.store["/api/v1/namespaces/volcano-system/secrets/mine"]["data"] == encoded(pem)
    assert result["nodes"] == {"w1": "serving"}


def test_three_different_pairs_are_refused_before_anything_is_applied():
    first, second, third = (monitoring.make_certificates([SERVICE]) for _i in range(3))
    problems, applied = refusal({"ca.crt": first["ca.crt"], "tls.crt": second["tls.crt"], "tls.key": third["tls.key"]})
    assert applied == []
    assert len(problems) == 2
    prefix = "the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: "
    assert problems[0] == (prefix + "its tls.key is not the key of its tls.crt (CN=%s): their public keys differ. "
                           "Fix: put tls.crt's own private key in tls.key (or the certificate of that key in tls.crt)"
                           % SERVICE)
    assert problems[1].startswith(prefix + "its tls.crt (CN=%s, issued by CN=numa.kube numa-exporter CA " % SERVICE)
    assert " is not signed by a CA in its ca.crt (CN=numa.kube numa-exporter CA " in problems[1]
    assert problems[1].endswith(". Fix: put the CA that issued tls.crt in ca.crt, and any intermediate CA in tls.crt "
                                "after the certificate")


def test_a_mismatched_key_alone_is_refused():
    pem = cert_manager_style()
    pem["tls.key"] = monitoring._key_pem(ec.generate_private_key(ec.SECP256R1()))
    problems, applied = refusal(pem)
    assert applied == [] and len(problems) == 1
    assert "its tls.key is not the key of its tls.crt (CN=exporter): their public keys differ. Fix: " in problems[0]


def test_a_leaf_signed_by_the_right_name_but_another_key_is_refused():
    pem = cert_manager_style()
    forged = cert_manager_style()  # same names, other keys: only the signature tells them apart
    problems, _applied = refusal({"ca.crt": pem["ca.crt"], "tls.crt": forged["tls.crt"], "tls.key": forged["tls.key"]})
    assert problems == ["the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: its tls.crt "
                        "(CN=exporter, issued by CN=Example Issuing CA) is not signed by a CA in its ca.crt "
                        "(CN=Example Root). Fix: put the CA that issued tls.crt in ca.crt, and any intermediate CA in "
                        "tls.crt after the certificate"]


def test_an_expired_leaf_is_refused():
    end = NOW - datetime.timedelta(hours=2)
    problems, applied = refusal(cert_manager_style(end=end))
    assert applied == []
    assert problems == ["the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: its tls.crt "
                        "expired on %s. Fix: renew it" % end.replace(microsecond=0).isoformat()]
    soon = NOW + datetime.timedelta(days=5)
    problems, _applied = refusal(cert_manager_style(end=soon))
    assert problems[0].endswith("its tls.crt ends on %s, within 30 days. Fix: renew it (cert-manager renews a third "
                                "of the way before the end by default)" % soon.date().isoformat())


def test_an_expired_ca_is_refused():
    old = monitoring.make_certificates([SERVICE], now=NOW - datetime.timedelta(days=monitoring_objects.CERTIFICATE_DAYS + 5))
    problems, _applied = refusal(old)
    assert len(problems) == 2 and "its tls.crt expired on " in problems[0]
    assert "the CA CN=numa.kube numa-exporter CA " in problems[1] and " of its chain expired on " in problems[1]
    assert problems[1].endswith("Fix: renew that CA and the certificates it signed")


def test_a_wrong_name_is_refused():
    problems, applied = refusal(cert_manager_style(names=("numa-exporter.monitoring.svc",)))
    assert applied == []
    assert problems == ["the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: its tls.crt "
                        "does not name %s (it names numa-exporter.monitoring.svc). Fix: issue it with %s among its DNS "
                        "subject alternative names" % (SERVICE, SERVICE)]


def test_a_missing_or_malformed_secret_is_refused():
    problems, applied = refusal(None)
    assert applied == [] and problems == [
        "the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: it does not exist. Fix: "
        "create it in volcano-system (e.g. a cert-manager Certificate with secretName mine and dnsNames [%s]), or "
        "leave tls_secret empty and the module makes one" % SERVICE]
    problems, _applied = refusal({"tls.crt": b"x"})
    assert problems[0].endswith("it has no ca.crt, tls.key. Fix: give it ca.crt (the CA), tls.crt (the exporter's "
                                "certificate) and tls.key (that certificate's key), as cert-manager writes them")
    pem = cert_manager_style()
    problems, _applied = refusal(dict(pem, **{"ca.crt": b"nothing", "tls.key": b"-----BEGIN PRIVATE KEY-----"}))
    assert [p.split(": ", 1)[1].split(" (")[0].split(". Fix")[0] for p in problems] == [
        "its ca.crt holds no PEM certificate", "its tls.key is not an unencrypted PEM private key"]
    api = StackApi([node("w1")])
    api.store["/api/v1/namespaces/volcano-system/secrets/mine"] = {"kind": "Secret", "data": {"ca.crt": "!!"}}
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, dict(PARAMS, tls_secret="mine"), False, no_wait)
    assert caught.value.problems == [
        "the TLS Secret volcano-system/mine given as tls_secret cannot serve the exporter: its ca.crt is not base64 "
        "(a Secret's data must be). Fix: store each value base64-encoded, or use stringData"]


class WithoutDirectCheck(object):
    """A certificate as cryptography before 40 shows it (no verify_directly_issued_by)."""

    def __init__(self, cert):
        self.cert = cert

    def __getattr__(self, name):
        if name == "verify_directly_issued_by":
            raise AttributeError(name)
        return getattr(self.cert, name)


def test_signatures_are_checked_with_older_cryptography_too():
    for key_type in ("ec", "rsa"):
        pem = cert_manager_style(key_type=key_type)
        leaf, middle = monitoring._certificates(pem["tls.crt"])
        root = monitoring._certificates(pem["ca.crt"])[0]
        other_root = monitoring._certificates(cert_manager_style(key_type=key_type)["ca.crt"])[0]
        assert monitoring._issued_by(WithoutDirectCheck(leaf), middle)
        assert monitoring._issued_by(WithoutDirectCheck(middle), root)
        assert not monitoring._issued_by(WithoutDirectCheck(middle), other_root), "same name, other key"
        assert not monitoring._issued_by(WithoutDirectCheck(leaf), root), "not its issuer"


# --- the module's own Secret: made, kept, renewed with the old CA in the bundle, trimmed ---------

def bundle(secret):
    return [c.subject.rfc4514_string() for c in monitoring._certificates(decoded(secret)["ca.crt"])]


def test_a_renewal_keeps_the_old_ca_until_every_exporter_serves_the_new_certificate():
    api = StackApi([node("w1"), node("w2")])
    ending = monitoring.make_certificates([SERVICE],
                                          now=NOW - datetime.timedelta(days=monitoring_objects.CERTIFICATE_DAYS - 20))
    api.store[SECRET] = {"kind": "Secret", "metadata": {"name": "numa-exporter-tls"}, "data": encoded(ending)}
    old_ca = monitoring._certificates(ending["ca.crt"])[0].subject.rfc4514_string()
    renewed = monitoring.run(api, PARAMS, False, no_wait)
    assert renewed["tls"].startswith("Secret volcano-system/numa-exporter-tls renewed (its tls.crt ends on ")
    assert renewed["tls"].endswith("; its old CA stays in ca.crt until every exporter serves the new certificate")
    secret = api.store[SECRET]
    new = decoded(secret)
    assert bundle(secret)[1] == old_ca and bundle(secret)[0] != old_ca, "the new CA first, the old one after it"
    assert secret["metadata"]["annotations"][monitoring_objects.ROTATION_ANNOTATION].endswith("Z")
    # Prometheus with the new bundle verifies the old certificate and the new one
    serves_under(dict(ending, **{"ca.crt": new["ca.crt"]}), SERVICE)
    serves_under(new, SERVICE)
    assert renewed["nodes"] == {"w1": "serving", "w2": "serving"}

    # w2's kubelet has not updated its Secret volume: the old CA stays, nothing is applied
    api.served = {"w2": leaf_sha256(ending["tls.crt"])}
    api.calls = []
    kept = monitoring.run(api, dict(PARAMS, wait=False), False, no_wait)
    assert "Secret" not in kinds(api) and bundle(api.store[SECRET])[1] == old_ca
    assert kept["tls"].startswith("Secret volcano-system/numa-exporter-tls serves %s; its old CA stays in ca.crt until "
                                  "every exporter serves the new certificate (w2: it serves the certificate sha256:"
                                  % SERVICE)
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, PARAMS, False, no_wait)
    assert "w2: it serves the certificate sha256:%s, not the Secret's" % leaf_sha256(ending["tls.crt"])[:16] in (
        caught.value.problems[0])

    # every exporter serves it: the old CA leaves, and with it the annotation
    api.served = {}
    api.calls = []
    trimmed = monitoring.run(api, PARAMS, False, no_wait)
    assert kinds(api).count("Secret") == 1
    assert trimmed["tls"] == ("Secret volcano-system/numa-exporter-tls serves %s; the old CA left ca.crt (every "
                              "exporter serves the new certificate)" % SERVICE)
    secret = api.store[SECRET]
    assert len(bundle(secret)) == 1 and bundle(secret)[0] != old_ca
    assert decoded(secret)["tls.crt"] == new["tls.crt"] and decoded(secret)["tls.key"] == new["tls.key"]
    assert "annotations" not in secret["metadata"]
    api.calls = []
    assert not monitoring.run(api, PARAMS, False, no_wait)["changed"]
    assert "Secret" not in kinds(api)


def test_an_expired_old_ca_leaves_even_while_an_exporter_lags():
    api = StackApi([node("w1")])
    current = monitoring.make_certificates([SERVICE])
    old = monitoring.make_certificates([SERVICE], now=NOW - datetime.timedelta(days=monitoring_objects.CERTIFICATE_DAYS + 1))
    live = monitoring.make_certificates([SERVICE], now=NOW - datetime.timedelta(days=100))
    pem = dict(current, **{"ca.crt": current["ca.crt"] + old["ca.crt"] + live["ca.crt"]})
    api.store[SECRET] = {"kind": "Secret", "metadata": {"name": "numa-exporter-tls",
                                                        "annotations": {monitoring_objects.ROTATION_ANNOTATION: "x"}},
                         "data": encoded(pem)}
    api.served = {"w1": leaf_sha256(live["tls.crt"])}
    result = monitoring.run(api, dict(PARAMS, wait=False), False, no_wait)
    assert result["tls"].endswith("; the old CA left ca.crt (expired)")
    secret = api.store[SECRET]
    assert decoded(secret)["ca.crt"] == current["ca.crt"] + live["ca.crt"]
    assert secret["metadata"]["annotations"] == {monitoring_objects.ROTATION_ANNOTATION: "x"}, "a rotation still under way"


def test_a_renewal_drops_expired_cas_and_a_broken_secret_is_made_anew():
    api = StackApi([node("w1")])
    expired = monitoring.make_certificates([SERVICE],
                                           now=NOW - datetime.timedelta(days=monitoring_objects.CERTIFICATE_DAYS + 1))
    api.store[SECRET] = {"kind": "Secret", "metadata": {"name": "numa-exporter-tls"}, "data": encoded(expired)}
    result = monitoring.run(api, dict(PARAMS, wait=False), False, no_wait)
    assert "its tls.crt expired on " in result["tls"] and "old CA stays" not in result["tls"]
    assert len(bundle(api.store[SECRET])) == 1 and "annotations" not in api.store[SECRET]["metadata"]
    api.store[SECRET] = {"kind": "Secret", "metadata": {"name": "numa-exporter-tls"}, "data": {"ca.crt": "%%"}}
    result = monitoring.run(api, dict(PARAMS, wait=False), False, no_wait)
    assert result["tls"] == ("Secret volcano-system/numa-exporter-tls renewed (its ca.crt is not base64 (a Secret's "
                             "data must be))")
    assert monitoring.certificate_problems(api.store[SECRET], [SERVICE]) == []


# --- the run ------------------------------------------------------------------------------------

def test_without_the_operator_the_run_stops_before_anything_is_applied():
    api = StackApi([node("w1")], operator=False)
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, PARAMS, False, no_wait)
    assert "does not serve monitoring.coreos.com/v1" in caught.value.problems[0]
    assert "without_operator: service" in caught.value.problems[0]
    assert kinds(api) == []


def test_without_cryptography_the_run_stops_before_anything_is_applied(monkeypatch):
    monkeypatch.setattr(monitoring, "HAS_CRYPTOGRAPHY", False)
    api = StackApi([node("w1")])
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, PARAMS, False, no_wait)
    assert caught.value.problems == ["checking and making the exporter's TLS Secret needs the Python library "
                                     "cryptography where the module runs: install it there (python3-cryptography, "
                                     "pip install cryptography)"]
    assert kinds(api) == []


def test_without_the_operator_service_mode_deploys_the_exporter_alone():
    api = StackApi([node("w1")], operator=False)
    result = monitoring.run(api, dict(PARAMS, without_operator="service"), False, no_wait)
    assert "ServiceMonitor" not in kinds(api) and "PrometheusRule" not in kinds(api)
    assert "DaemonSet" in kinds(api) and result["nodes"] == {"w1": "serving"}


def test_a_second_run_keeps_the_secret_and_changes_nothing():
    api = StackApi([node("w1"), node("w2")])
    first = monitoring.run(api, PARAMS, False, no_wait)
    assert first["changed"] and first["nodes"] == {"w1": "serving", "w2": "serving"}
    assert kinds(api)[:2] == ["Namespace", "Secret"]
    secret = dict(api.store[SECRET])
    api.calls = []
    second = monitoring.run(api, PARAMS, False, no_wait)
    assert "Secret" not in kinds(api) and "Namespace" not in kinds(api)
    assert not second["changed"], second["objects"]
    assert api.store[SECRET] == secret
    proxied = [call[2] for call in api.calls if call[0] == "request"]
    base = "/api/v1/namespaces/volcano-system/pods/https:x-%s:9201/proxy"
    assert proxied == [base % n + path for n in ("w1", "w2") for path in ("/healthz", "/metrics")]
    assert ("pods", "app=numa-exporter,app.kubernetes.io/instance=numa-exporter") in api.calls


def test_the_readiness_check_proves_authentication_is_in_force():
    api = StackApi([node("w1")])
    monitoring.run(api, PARAMS, False, no_wait)
    pod = {"metadata": {"name": "x-w1"}}
    current = leaf_sha256(decoded(api.store[SECRET])["tls.crt"])
    assert monitoring.exporter_answers(api, PARAMS, pod, current) is None
    api.open_metrics = True
    assert monitoring.exporter_answers(api, PARAMS, pod, current) == (
        "its /metrics answers without a token: the exporter does not authenticate its scrapers (is its image older "
        "than this collection, or does it run with --authentication=none?)")
    assert monitoring.exporter_answers(api, dict(PARAMS, exporter_authentication=False), pod, current) is None
    api.open_metrics = False
    assert monitoring.exporter_answers(api, dict(PARAMS, exporter_authentication=False), pod, current).startswith(
        "its /metrics without a token answers: GET ")

    class Answers(StackApi):
        def __init__(self, health=None, error=None):
            super(Answers, self).__init__([node("w1")])
            self.health, self.error = health, error

        def request(self, method, path, body=None, **params):
            if self.error is not None:
                raise self.error
            return self.health

    assert monitoring.exporter_answers(Answers("ok\n"), PARAMS, pod, current) == (
        "its /healthz names no certificate (is its image older than this collection?)")
    assert monitoring.exporter_answers(Answers("starting"), PARAMS, pod, current) == "its /healthz answers 'starting'"
    failed = monitoring.exporter_answers(Answers(error=monitoring.KubeApiError("GET x: 503 no endpoints", 503)),
                                         PARAMS, pod, current)
    assert failed == "its /healthz does not answer: GET x: 503 no endpoints"


def test_a_users_secret_that_cannot_serve_is_refused_and_never_replaced():
    api = StackApi([node("w1")])
    api.store["/api/v1/namespaces/volcano-system/secrets/mine"] = {"kind": "Secret", "data": {"tls.crt": "eA=="}}
    with pytest.raises(monitoring_objects.MonitoringError) as caught:
        monitoring.run(api, dict(PARAMS, tls_secret="mine"), False, no_wait)
    assert "tls_secret" in caught.value.problems[0] and "no ca.crt, tls.key" in caught.value.problems[0]
    assert kinds(api) == [], "not even the namespaces"


class StrictApi(StackApi):
    """Refuses a dry run into a namespace that does not exist, as the API server does (404)."""

    def apply(self, obj, check_mode=False):
        namespace = obj["metadata"].get("namespace")
        if namespace and "/api/v1/namespaces/%s" % namespace not in self.store:
            raise monitoring.KubeApiError("PATCH %s: 404 namespaces %r not found" % (obj["kind"], namespace), 404)
        return super(StrictApi, self).apply(obj, check_mode)


def test_check_mode_applies_nothing_and_absent_removes_what_was_made():
    api = StrictApi([node("w1")])
    preview = monitoring.run(api, dict(PARAMS, dashboard_namespace="grafana"), True, no_wait)
    assert preview["changed"] and api.store == {}
    previewed = [o["object"] for o in preview["objects"] if o["changed"]]
    assert previewed[:2] == ["Namespace grafana", "Namespace volcano-system"]
    assert "ConfigMap grafana/numa-exporter-dashboard" in previewed and "Secret volcano-system/numa-exporter-tls" in previewed
    assert preview["tls"] == "Secret volcano-system/numa-exporter-tls would be made"
    made = monitoring.run(api, dict(PARAMS, dashboard_namespace="grafana"), False, no_wait)
    assert "/api/v1/namespaces/grafana/configmaps/numa-exporter-dashboard" in api.store, made["objects"]
    api = StackApi([node("w1")])
    monitoring.run(api, PARAMS, False, no_wait)
    gone = monitoring.run(api, dict(PARAMS, state="absent"), False, no_wait)
    assert gone["changed"]
    assert not [path for path in api.store if "numa-exporter" in path]
    assert not monitoring.run(api, dict(PARAMS, state="absent"), False, no_wait)["changed"]


def test_rules_use_the_thresholds_and_the_job():
    groups = monitoring_objects.rule_groups(dict(PARAMS, memory_threshold=0.8, name="numa"))
    rules = dict((r["alert"], r) for r in groups[0]["rules"])
    assert set(rules) == {"NumaNodeMemoryNearlyExhausted", "NumaNodeMissRatioHigh",
                          "NumaHugePagesExhaustedOnOneNode", "NumaExporterDown"}
    assert rules["NumaNodeMemoryNearlyExhausted"]["expr"].endswith(' numa_node_memory_total_bytes{job="numa"} > 0.8')
    assert 'up{job="numa"} == 0' == rules["NumaExporterDown"]["expr"]


def test_the_healthz_fingerprint_is_the_modules():
    pem = monitoring.make_certificates([SERVICE])
    assert metrics_server.fingerprint(pem["tls.crt"]) == monitoring._leaf_fingerprint(pem)
    assert monitoring._leaf_fingerprint(pem) == leaf_sha256(pem["tls.crt"])


@pytest.mark.parametrize("change,words", [
    ({"interval": "30 seconds"}, "interval must be a Prometheus duration such as 30s or 1m30s, got '30 seconds'"),
    ({"port": 70000}, "port must be a TCP port"),
    ({"memory_threshold": 1.5}, "memory_threshold must be a fraction between 0 and 1"),
    ({"image": ""}, "image is empty: it must name an image"),
    ({"name": "numa/../../secrets"}, "name 'numa/../../secrets' is not a valid Kubernetes object name"),
    ({"dashboard_namespace": "Grafana"}, "dashboard_namespace 'Grafana' is not a valid namespace name"),
    ({"node_selector": {"numa": "true,zone!=x"}}, "node_selector: value 'true,zone!=x'"),
    ({"service_monitor_labels": {"release": "kube prometheus"}}, "service_monitor_labels: value"),
    ({"exporter_containers": "pinned"}, "exporter_containers must be one of all, exclusive, none .*got 'pinned'"),
    ({"exporter_containers": ""}, "exporter_containers must be one of all, exclusive, none .*got ''"),
])
def test_options_are_refused_before_any_request(change, words):
    api = StackApi([node("w1")])
    with pytest.raises(monitoring_objects.MonitoringError, match=words):
        monitoring.run(api, dict(PARAMS, **change), False, no_wait)
    assert api.calls == [], "nothing was asked of the API server"


def test_every_object_of_the_stack_is_claimed_before_the_first_write():
    api = StackApi([node("w1")])
    monitoring.run(api, dict(PARAMS, wait=False), False, no_wait)
    kinds = [call for call in api.calls if call[0] in ("claim", "apply")]
    assert kinds[0][0] == "claim", kinds
    assert kinds[0][1][0] == "Secret" and "DaemonSet" in kinds[0][1] and "ServiceMonitor" in kinds[0][1]
