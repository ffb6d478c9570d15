# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the node agent checks kubelet's serving certificate before it sends its token there.

A loopback HTTPS server stands in for kubelet, serving a certificate made as kubelet makes its
self-signed one (client-go's GenerateSelfSignedCertKey: a leaf for the host name only, no IP
address, followed in the same file by the throw-away CA that signed it), or one a cluster CA
signed for the node's address (serverTLSBootstrap).
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import http.server
import ipaddress
import json
import logging
import os
import ssl
import sys
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "agent"))
from numa_agent import __main__ as agent_main  # noqa: E402 pylint: disable=wrong-import-position
from numa_agent import kube, publisher  # noqa: E402 pylint: disable=wrong-import-position

NODE = "w1"
CONFIGZ = {"kubeletconfig": {"cpuManagerPolicy": "static"}}


def _pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def _cert(subject, key, issuer, issuer_key, ca=False, dns=(), ips=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                              critical=False))
    if ca:
        builder = (builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                                content_commitment=False, data_encipherment=False, key_agreement=False,
                                                crl_sign=False, encipher_only=False, decipher_only=False),
                                  critical=True))
    else:
        names = [x509.DNSName(name) for name in dns] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = (builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    return builder.sign(issuer_key, hashes.SHA256())


def serving_pair(folder, name, host=None, ips=(), ca=None):
    """(certificate file, key file): kubelet's self-signed layout for ``host`` (leaf then its own CA),
    or with ``ca`` (cert, key) a leaf that CA signed; ``ips`` become IP SANs."""
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    if ca is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _cert(host + "-ca@1", ca_key, host + "-ca@1", ca_key, ca=True)
        leaf = _cert(host + "@1", leaf_key, host + "-ca@1", ca_key, dns=[host], ips=ips)
        chain = _pem(leaf) + _pem(ca_cert)
    else:
        ca_cert, ca_key = ca
        leaf = _cert(host or "node", leaf_key, "cluster-ca", ca_key, dns=[host] if host else [], ips=ips)
        chain = _pem(leaf)
    cert_file, key_file = os.path.join(folder, name + ".crt"), os.path.join(folder, name + ".key")
    with open(cert_file, "wb") as handle:
        handle.write(chain)
    with open(key_file, "wb") as handle:
        handle.write(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return cert_file, key_file


def cluster_ca(folder):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("cluster-ca", key, "cluster-ca", key, ca=True)
    path = os.path.join(folder, "cluster-ca.crt")
    with open(path, "wb") as handle:
        handle.write(_pem(cert))
    return (cert, key), path


class Kubelet(object):
    """A loopback HTTPS server answering /configz with the certificate chain it is given; records
    the Authorization headers that reached it."""

    def __init__(self, cert_file, key_file):
        tokens = self.tokens = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                tokens.append(self.headers.get("Authorization"))
                body = json.dumps(CONFIGZ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # pylint: disable=arguments-differ
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        return False


@pytest.fixture()
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text("secret-token\n")
    return str(path)


def client(url, token_file, *args, **kwargs):
    made = kube.kubelet_client(url, *args, **kwargs)
    made.token_file = token_file
    made.timeout = 5.0
    return made


def test_node_cert_verifies_kubelets_self_signed_certificate_for_the_node_name(tmp_path, token):
    cert, key = serving_pair(str(tmp_path), "kubelet", host=NODE)
    with Kubelet(cert, key) as kubelet:
        made = client(kubelet.url, token, "node-cert", ca_file=cert, node_name=NODE)
        assert (made.ca_file, made.server_name, made.verify) == (cert, NODE, True)
        assert made.get("/configz") == CONFIGZ
    assert kubelet.tokens == ["Bearer secret-token"]


def test_node_cert_refuses_another_kubelets_certificate_and_sends_no_token(tmp_path, token):
    cert, key = serving_pair(str(tmp_path), "kubelet", host=NODE)
    other, _other_key = serving_pair(str(tmp_path), "other", host=NODE)  # same name, another key and CA
    with Kubelet(cert, key) as kubelet:
        with pytest.raises(kube.ApiError) as caught:
            client(kubelet.url, token, "node-cert", ca_file=other, node_name=NODE).get("/configz")
    assert caught.value.certificate and caught.value.status == 0
    assert "did not verify (its certificate checked against %s for the name w1)" % other in str(caught.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert kubelet.tokens == [], "the token must not leave before the certificate is checked"


def test_node_cert_refuses_the_right_chain_for_another_name(tmp_path, token):
    cert, key = serving_pair(str(tmp_path), "kubelet", host=NODE)
    with Kubelet(cert, key) as kubelet:
        with pytest.raises(kube.ApiError, match="for the name w2.*CERTIFICATE_VERIFY_FAILED") as caught:
            client(kubelet.url, token, "node-cert", ca_file=cert, node_name="w2").get("/configz")
        assert caught.value.certificate
        # the self-signed certificate has no IP address: checking the address dialled cannot work,
        # which is why node-cert checks the node's name
        with pytest.raises(kube.ApiError, match="for the name in the URL") as caught:
            client(kubelet.url, token, "cluster-ca", ca_file=cert).get("/configz")
        assert caught.value.certificate
    assert kubelet.tokens == []


def test_cluster_ca_verifies_a_serving_certificate_the_cluster_signed_for_the_address(tmp_path, token):
    ca, ca_file = cluster_ca(str(tmp_path))
    cert, key = serving_pair(str(tmp_path), "serving", host=NODE, ips=["127.0.0.1"], ca=ca)
    with Kubelet(cert, key) as kubelet:
        made = client(kubelet.url, token, "cluster-ca", ca_file=ca_file)
        assert made.server_name is None
        assert made.get("/configz") == CONFIGZ
        # a certificate the same CA signed for another address is refused
    wrong, wrong_key = serving_pair(str(tmp_path), "wrong", host="w2", ips=["10.0.0.9"], ca=ca)
    with Kubelet(wrong, wrong_key) as kubelet:
        with pytest.raises(kube.ApiError, match="CERTIFICATE_VERIFY_FAILED"):
            client(kubelet.url, token, "cluster-ca", ca_file=ca_file).get("/configz")
    assert kubelet.tokens == []


def test_insecure_checks_nothing_and_says_so(tmp_path, token):
    cert, key = serving_pair(str(tmp_path), "kubelet", host="anything")
    with Kubelet(cert, key) as kubelet:
        made = client(kubelet.url, token, "insecure")
        assert made.get("/configz") == CONFIGZ
    assert made.verify is False and made.tls() == "its certificate NOT checked"


def test_the_modes_defaults(monkeypatch):
    monkeypatch.setenv("NODE_IP", "10.1.2.3")
    monkeypatch.setenv("NODE_NAME", "from-env")
    node = kube.kubelet_client()
    assert (node.base, node.ca_file, node.server_name) == ("https://10.1.2.3:10250", kube.KUBELET_CERT, "from-env")
    assert kube.kubelet_client(node_name=NODE).server_name == NODE
    assert kube.kubelet_client(node_name=NODE, server_name="host.example").server_name == "host.example"
    cluster = kube.kubelet_client(tls="cluster-ca")
    assert (cluster.ca_file, cluster.server_name) == (os.path.join(kube.SERVICE_ACCOUNT, "ca.crt"), None)
    monkeypatch.setenv("NODE_IP", "fd00::1")
    assert kube.kubelet_client(tls="insecure").base == "https://[fd00::1]:10250"


def test_a_mode_that_cannot_work_is_refused_with_the_way_out(monkeypatch):
    monkeypatch.delenv("NODE_NAME", raising=False)
    with pytest.raises(ValueError, match="node-cert checks the node's name .* give --node-name .* "
                                         "--kubelet-server-name"):
        kube.kubelet_client("https://10.0.0.1:10250")
    with pytest.raises(ValueError, match="mode 'verify' is unknown: it must be one of node-cert, cluster-ca, insecure"):
        kube.kubelet_client("https://10.0.0.1:10250", tls="verify")


def test_tls_context_choice(tmp_path):
    cert, _key = serving_pair(str(tmp_path), "kubelet", host=NODE)
    loose = kube.tls_context(verify=False)
    assert (loose.verify_mode, loose.check_hostname) == (ssl.CERT_NONE, False)
    named = kube.tls_context(cert, NODE)
    assert (named.verify_mode, named.check_hostname, named.server_name) == (ssl.CERT_REQUIRED, True, NODE)
    assert named.verify_flags == ssl.create_default_context().verify_flags, "the running Python's chain rules"
    assert len(named.get_ca_certs()) == 1, "the file's CA is trusted (its leaf is no CA)"
    plain = kube.tls_context(cert)
    assert not isinstance(plain, kube._NamedContext)  # pylint: disable=protected-access
    assert (plain.verify_mode, plain.check_hostname) == (ssl.CERT_REQUIRED, True)
    # the API server's client is as it was: the service account's CA, the URL's host
    api = kube.Client(base="https://10.96.0.1:443")
    assert (api.ca_file, api.server_name, api.verify) == (os.path.join(kube.SERVICE_ACCOUNT, "ca.crt"), None, True)


def test_the_publisher_names_the_way_out_when_kubelets_certificate_fails(tmp_path, token, caplog):
    cert, key = serving_pair(str(tmp_path), "kubelet", host=NODE)
    other, _other_key = serving_pair(str(tmp_path), "other", host=NODE)
    with Kubelet(cert, key) as kubelet:
        pub = publisher.Publisher(NODE, "/nonexistent", pod_resources=None, api=object(),
                                  kubelet=client(kubelet.url, token, "node-cert", ca_file=other, node_name=NODE))
        pub._cpus = lambda: []  # pylint: disable=protected-access
        pub.pod_resources = type("Pods", (), {"allocatable": lambda self: {"cpu_ids": []},
                                              "assigned": lambda self: []})()
        with caplog.at_level(logging.WARNING, logger="publisher"):
            assert pub.step() is False
    text = caplog.text
    assert "not publishing" in text and "CERTIFICATE_VERIFY_FAILED" in text
    assert "--kubelet-tls cluster-ca (numa.kube.volcano_stack's publisher_kubelet_tls)" in text
    assert "remove kubelet.crt and kubelet.key" in text
    assert publisher._certificate_hint(kube.ApiError(403, "forbidden")) == ""  # pylint: disable=protected-access


def _args(**changes):
    args = dict(node_name=NODE, kubelet_url="https://127.0.0.1:1", kubelet_tls="node-cert", kubelet_ca_file=None,
                kubelet_server_name=None, sysfs="/sys", pod_resources_socket="/nonexistent", period=1.0, resync=60.0)
    args.update(changes)
    return argparse.Namespace(**args)


def test_the_publisher_does_not_start_without_the_certificate_it_must_check(tmp_path, caplog):
    missing = str(tmp_path / "kubelet.crt")
    with caplog.at_level(logging.ERROR, logger="publisher"):
        assert publisher.main(_args(kubelet_ca_file=missing)) == 2
    assert ("--kubelet-tls node-cert checks kubelet's serving certificate against the node's own, and %s is not "
            "there: mount the node's kubelet.crt there" % missing) in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="publisher"):
        assert publisher.main(_args(kubelet_tls="cluster-ca", kubelet_ca_file=missing)) == 2
    assert "--kubelet-tls cluster-ca checks kubelet's serving certificate against %s, which is not there" % missing \
        in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="publisher"):
        assert publisher.main(_args(kubelet_tls="verify")) == 2  # from KUBELET_TLS, unseen by argparse
    assert "kubelet TLS mode 'verify' is unknown" in caplog.text
    assert publisher.kubelet_tls_problem(kube.kubelet_client("https://x", "insecure"), "insecure") is None


def test_the_publishers_flags(monkeypatch):
    seen = []
    monkeypatch.setattr(publisher, "main", seen.append)
    monkeypatch.delenv("KUBELET_TLS", raising=False)
    agent_main.main(["topology-publisher"])
    assert (seen[-1].kubelet_tls, seen[-1].kubelet_ca_file, seen[-1].kubelet_server_name) == ("node-cert", None, None)
    monkeypatch.setenv("KUBELET_TLS", "cluster-ca")
    agent_main.main(["topology-publisher", "--kubelet-server-name", "n.example"])
    assert (seen[-1].kubelet_tls, seen[-1].kubelet_server_name) == ("cluster-ca", "n.example")
    with pytest.raises(SystemExit):
        agent_main.main(["topology-publisher", "--kubelet-tls", "off"])
