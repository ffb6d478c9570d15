# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA monitoring stack: the node agent's exporter as a DaemonSet, its Service, TLS Secret,
ServiceMonitor, PrometheusRule and Grafana dashboard ConfigMap, and the proof that it serves.

Conventions of the openFuyao guide unless overridden: Service ``numa-exporter`` labelled
``app: numa-exporter`` with a port named ``https`` served over TLS, a ServiceMonitor scraping it
every 30 s, everything in ``volcano-system``. The exporter runs in the node's network namespace (as
node exporters do), listening on the node's address only; Prometheus verifies its certificate
against the CA in the Secret, under the Service's DNS name, and sends its service account's token,
which the exporter has the API server review (TokenReview, then a SubjectAccessReview for the
non-resource URL /metrics, as kube-rbac-proxy does) before it answers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import datetime
import re
import time

from ansible_collections.numa.kube.plugins.module_utils.k8s.client import PROXY_CALL_SECONDS, bounded_map
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import (
    KubeApiError,
    check_name,
    check_namespace,
    comparable,
    describe,
    label_selector,
    option_problems,
)
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import (
    wait_daemonset,
    wait_pending,
    why_waiting_ended,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.daemonset import (
    allowed_down,
    daemonset_pods,
    nodes_by_name,
    not_ready,
    share_problems,
    too_many_down,
    warn_down,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.monitoring_objects import (
    APP,
    CERTIFICATE_DAYS,
    EXPORTER_CONTAINERS,
    EXPORTER_REFUSAL,
    MONITORING_GROUP,
    RENEW_DAYS,
    ROTATION_ANNOTATION,
    SERVING_SAMPLE,
    MonitoringError,
    object_meta,
    objects,
    server_name,
    tls_secret_name,
)

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # reported by the module when it must make a certificate
    HAS_CRYPTOGRAPHY = False

# --- the TLS Secret ------------------------------------------------------------------------------


def _pem(obj):
    return obj.public_bytes(serialization.Encoding.PEM)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certificates(names, now=None):
    """A CA of its own and a serving certificate for ``names`` (DNS names): {ca.crt, tls.crt, tls.key}."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=CERTIFICATE_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    # dated, so that the old and the new CA of a rotation tell apart in the bundle
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, u"numa.kube numa-exporter CA %s"
                                            % now.strftime("%Y-%m-%d %H:%M:%S"))])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {"ca.crt": _pem(ca), "tls.crt": _pem(leaf), "tls.key": _key_pem(key)}


def _now(now=None):
    return now or datetime.datetime.now(datetime.timezone.utc)


def _utc(cert, field):
    """A certificate's not_valid_before/after as an aware datetime, in every cryptography release."""
    value = getattr(cert, field + "_utc", None)
    return value or getattr(cert, field).replace(tzinfo=datetime.timezone.utc)


def _certificates(blob):
    """Every certificate of a PEM text (a bundle), in order; ValueError if one does not parse."""
    return [x509.load_pem_x509_certificate(block)
            for block in re.findall(b"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", blob, re.S)]


def _who(cert):
    return cert.subject.rfc4514_string() or "(no subject)"


def _issued_by(cert, issuer):
    """Whether ``issuer`` names and signed ``cert`` (its signature checked with issuer's key)."""
    if cert.issuer != issuer.subject:
        return False
    try:
        if hasattr(cert, "verify_directly_issued_by"):  # cryptography 40 and later
            cert.verify_directly_issued_by(issuer)
            return True
        key = issuer.public_key()
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:  # Ed25519, Ed448
            key.verify(cert.signature, cert.tbs_certificate_bytes)
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def _chain(leaf, intermediates, anchors):
    """The certificates from ``leaf`` up to one of ``anchors`` (ca.crt's), through the
    intermediates that follow the leaf in tls.crt; None when no CA of ca.crt signed it."""
    chain = [leaf]
    while len(chain) <= len(intermediates) + 1:
        anchor = next((ca for ca in anchors if _issued_by(chain[-1], ca)), None)
        if anchor is not None:
            return chain + [anchor]
        step = next((c for c in intermediates if c not in chain and _issued_by(chain[-1], c)), None)
        if step is None:
            return None
        chain.append(step)
    return None


def _dns_names(cert):
    try:
        return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        return []


def _names_host(pattern, host):
    """A DNS name of a certificate matches ``host`` (a wildcard stands for one whole left-most label)."""
    if pattern.startswith("*."):
        return "." in host and host.split(".", 1)[1] == pattern[2:]
    return pattern == host


def _decoded(secret):
    """The Secret's data as bytes by key; ValueError naming a value that is not base64."""
    found = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        try:
            found[key] = base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            raise ValueError("its %s is not base64 (a Secret's data must be)" % key)
    return found


def certificate_problems(secret, names, now=None):
    """What keeps a TLS Secret from serving ``names`` (the exporter's DNS names): a list of
    (what is wrong, the fix), empty when ca.crt, tls.crt and tls.key form a chain whose key matches,
    valid now for RENEW_DAYS more days and naming every one of ``names``."""
    now = _now(now)
    try:
        data = _decoded(secret)
    except ValueError as exc:
        return [(str(exc), "store each value base64-encoded, or use stringData")]
    missing = [key for key in ("ca.crt", "tls.crt", "tls.key") if not data.get(key)]
    if missing:
        return [("it has no %s" % ", ".join(missing),
                 "give it ca.crt (the CA), tls.crt (the exporter's certificate) and tls.key (that certificate's "
                 "key), as cert-manager writes them")]
    problems = []
    try:
        anchors = _certificates(data["ca.crt"])
    except ValueError as exc:
        anchors, problems = [], [("its ca.crt does not parse (%s)" % exc, "put the CA's certificate in ca.crt, PEM")]
    if not anchors and not problems:
        problems.append(("its ca.crt holds no PEM certificate",
                         "put the PEM certificate of the CA that signed tls.crt in ca.crt"))
    try:
        served = _certificates(data["tls.crt"])
    except ValueError as exc:
        served = []
        problems.append(("its tls.crt does not parse (%s)" % exc, "put the exporter's certificate in tls.crt, PEM"))
    else:
        if not served:
            problems.append(("its tls.crt holds no PEM certificate", "put the exporter's certificate (PEM, the "
                                                                     "certificate first, then any intermediate CA) "
                                                                     "in tls.crt"))
    try:
        key = serialization.load_pem_private_key(data["tls.key"], password=None)
    except (ValueError, TypeError) as exc:
        key = None
        problems.append(("its tls.key is not an unencrypted PEM private key (%s)" % exc,
                         "put tls.crt's private key in tls.key, PEM and without a passphrase"))
    if not served:
        return problems
    leaf = served[0]
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key is not None and key.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        problems.append(("its tls.key is not the key of its tls.crt (%s): their public keys differ" % _who(leaf),
                         "put tls.crt's own private key in tls.key (or the certificate of that key in tls.crt)"))
    chain = _chain(leaf, served[1:], anchors) if anchors else None
    if anchors and chain is None:
        problems.append(("its tls.crt (%s, issued by %s) is not signed by a CA in its ca.crt (%s)"
                         % (_who(leaf), leaf.issuer.rfc4514_string(), "; ".join(_who(ca) for ca in anchors)),
                         "put the CA that issued tls.crt in ca.crt, and any intermediate CA in tls.crt after the "
                         "certificate"))
    start, end = _utc(leaf, "not_valid_before"), _utc(leaf, "not_valid_after")
    if now < start:
        problems.append(("its tls.crt is valid only from %s" % start.isoformat(), "issue one valid now (are the "
                                                                                  "clocks right?)"))
    elif end <= now:
        problems.append(("its tls.crt expired on %s" % end.isoformat(), "renew it"))
    elif end - now < datetime.timedelta(days=RENEW_DAYS):
        problems.append(("its tls.crt ends on %s, within %d days" % (end.date().isoformat(), RENEW_DAYS),
                         "renew it (cert-manager renews a third of the way before the end by default)"))
    for ca in (chain or [])[1:]:
        if _utc(ca, "not_valid_after") <= now:
            ended = _utc(ca, "not_valid_after").isoformat()
            problems.append(("the CA %s of its chain expired on %s" % (_who(ca), ended),
                             "renew that CA and the certificates it signed"))
    sans = _dns_names(leaf)
    absent = [n for n in names if not any(_names_host(pattern, n) for pattern in sans)]
    if absent:
        problems.append(("its tls.crt does not name %s (it names %s)"
                         % (", ".join(absent), ", ".join(sans) or "nothing"),
                         "issue it with %s among its DNS subject alternative names" % ", ".join(absent)))
    return problems


def _served_names(params):
    return [server_name(params), "%s.%s.svc.cluster.local" % (params["name"], params["namespace"])]


def _secret_path(params):
    namespace = check_namespace(params["namespace"])
    return "/api/v1/namespaces/%s/secrets/%s" % (namespace, check_name(tls_secret_name(params), "tls_secret"))


def _leaf_fingerprint(data):
    return _certificates(data["tls.crt"])[0].fingerprint(hashes.SHA256()).hex()


def user_secret(api, params):
    """The user's Secret (``tls_secret``), checked before anything is applied: (note, the SHA-256
    of its certificate); MonitoringError naming each problem and its fix. Never changed."""
    name = "%s/%s" % (params["namespace"], tls_secret_name(params))
    current = api.get(_secret_path(params))
    if current is None:
        problems = [("it does not exist", "create it in %s (e.g. a cert-manager Certificate with secretName %s and "
                                          "dnsNames [%s]), or leave tls_secret empty and the module makes one"
                     % (params["namespace"], tls_secret_name(params), server_name(params)))]
    else:
        problems = certificate_problems(current, [server_name(params)])
    if problems:
        raise MonitoringError(["the TLS Secret %s given as tls_secret cannot serve the exporter: %s. Fix: %s"
                               % (name, what, fix) for what, fix in problems])
    return "Secret %s (yours) serves %s" % (name, server_name(params)), _leaf_fingerprint(_decoded(current))


def _secret(params, data, rotation_started=None):
    meta = object_meta(params, name=tls_secret_name(params))
    if rotation_started:
        meta["annotations"] = {ROTATION_ANNOTATION: rotation_started}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta,
            "data": dict((key, base64.b64encode(value).decode("ascii")) for key, value in sorted(data.items()))}


def own_secret(api, params, check_mode, serving, now=None):
    """The module's own Secret made, renewed or its CA bundle trimmed: (changed, before, after,
    note, the SHA-256 of the certificate it holds).

    Renewing (RENEW_DAYS before the end, or when the Secret cannot serve) makes a new CA and
    certificate, and keeps every unexpired CA of the old ca.crt next to the new one: Prometheus
    may still hold the old bundle and the exporters still serve the old certificate until kubelet
    updates their Secret volume (they read it again when it changes). The rule for the old CA:
    it leaves ca.crt on the first run that finds, before applying anything, every selected node's
    exporter serving the Secret's current certificate (``serving(fingerprint)``, from /healthz),
    or once it has expired.
    """
    now = _now(now)
    name = "%s/%s" % (params["namespace"], tls_secret_name(params))
    current = api.get(_secret_path(params))
    problems = ["it does not exist"] if current is None else [
        what for what, _fix in certificate_problems(current, [server_name(params)], now)]
    try:
        data = _decoded(current)
        bundle = _certificates(data.get("ca.crt") or b"")
    except ValueError:
        data, bundle = {}, []
    if problems:
        made = make_certificates(_served_names(params), now)
        kept = [ca for ca in bundle if _utc(ca, "not_valid_after") > now]
        made["ca.crt"] += b"".join(_pem(ca) for ca in kept)
        started = now.strftime("%Y-%m-%dT%H:%M:%SZ") if kept else None
        changed, before, after = api.apply(_secret(params, made, started), check_mode)
        note = "Secret %s %s (%s)" % (name, "made" if current is None else "renewed", "; ".join(problems))
        if kept:
            note += "; its old CA stays in ca.crt until every exporter serves the new certificate"
        return changed, before, after, note, _leaf_fingerprint(made)
    fingerprint = _leaf_fingerprint(data)
    served = _certificates(data["tls.crt"])
    chain = _chain(served[0], served[1:], bundle)
    old = [ca for ca in bundle if ca is not chain[-1]]
    if not old:
        return False, None, None, "Secret %s serves %s" % (name, server_name(params)), fingerprint
    expired = [ca for ca in old if _utc(ca, "not_valid_after") <= now]
    waiting = {}
    if len(expired) < len(old):
        waiting = dict(item for item in serving(fingerprint).items() if item[1] != "serving")
    drop = old if not waiting else expired
    why = "expired" if waiting or len(expired) == len(old) else "every exporter serves the new certificate"
    if not drop:
        return False, None, None, ("Secret %s serves %s; its old CA stays in ca.crt until every exporter serves the "
                                   "new certificate (%s)" % (name, server_name(params), "; ".join(
                                       "%s: %s" % item for item in sorted(waiting.items())))), fingerprint
    kept = [ca for ca in bundle if ca not in drop]
    started = ((current.get("metadata") or {}).get("annotations") or {}).get(ROTATION_ANNOTATION)
    data["ca.crt"] = b"".join(_pem(ca) for ca in kept)
    changed, before, after = api.apply(_secret(params, data, started if len(kept) > 1 else None), check_mode)
    return changed, before, after, ("Secret %s serves %s; the old CA left ca.crt (%s)"
                                    % (name, server_name(params), why)), fingerprint


# --- the run -------------------------------------------------------------------------------------

def operator_installed(api):
    """Whether the API server serves Prometheus Operator's ServiceMonitor and PrometheusRule."""
    resources = api.get("/apis/%s" % MONITORING_GROUP)
    names = set(r.get("name") for r in (resources or {}).get("resources") or [])
    return {"servicemonitors", "prometheusrules"} <= names


_SERVED = re.compile(r"^certificate-sha256: ([0-9a-f]{64})$", re.M)


def exporter_answers(api, params, pod, fingerprint=None, health_only=False):
    """None when the exporter in ``pod`` serves as it should, else why not. Asked through the API
    server's pod proxy, which passes on no credentials: /healthz answers ok and names the
    certificate served (the Secret's current one, ``fingerprint``, when given), and /metrics
    without a token is refused with 401 (with ``exporter_authentication``; else it answers with the
    metrics)."""
    base = "/api/v1/namespaces/%s/pods/https:%s:%d/proxy" % (
        check_namespace(params["namespace"]), check_name(pod["metadata"]["name"], "pod name"), params["port"])
    try:
        health = api.request("GET", base + "/healthz", text=True, **_proxy_timeout(api))
    except KubeApiError as exc:
        return "its /healthz does not answer: %s" % exc
    if not health.startswith("ok"):
        return "its /healthz answers %r" % health[:200]
    served = _SERVED.search(health)
    if fingerprint and not served:
        return "its /healthz names no certificate (is its image older than this collection?)"
    if fingerprint and served.group(1) != fingerprint:
        return ("it serves the certificate sha256:%s, not the Secret's sha256:%s (kubelet has not updated its "
                "Secret volume yet)" % (served.group(1)[:16], fingerprint[:16]))
    if health_only:
        return None
    try:
        text = api.request("GET", base + "/metrics", text=True, **_proxy_timeout(api))
    except KubeApiError as exc:
        # with authentication, the exporter's own 401 to a scrape without a token is the proof
        # that it authenticates its scrapers (the module holds no token Prometheus would accept,
        # so /metrics is not rendered here; /healthz proved the server runs). A 401 of the API
        # server (a Status "Unauthorized", this task's own credentials) proves nothing.
        if params["exporter_authentication"] and exc.status == 401 and EXPORTER_REFUSAL in str(exc):
            return None
        return "its /metrics without a token answers: %s" % exc
    if params["exporter_authentication"]:
        return ("its /metrics answers without a token: the exporter does not authenticate its scrapers (is its "
                "image older than this collection, or does it run with --authentication=none?)")
    return None if "numa_node_cpus_count" in text else "its /metrics has no numa_node_cpus_count"


def _proxy_timeout(api):
    """The request option that gives a call through the pod proxy its own (short) timeouts."""
    timeout = getattr(api, "proxy_timeout", None)
    return {"_request_timeout": timeout(), "_total_seconds": PROXY_CALL_SECONDS} if timeout else {}


def _running(pod):
    return (pod.get("status") or {}).get("phase") == "Running" and not (pod.get("metadata") or {}).get(
        "deletionTimestamp")


def exporter_pods(api, params, node=None):
    """The stack's exporter pods that run (on ``node`` alone when given), by node."""
    query = {"label_selector": label_selector({"app": APP, "app.kubernetes.io/instance": params["name"]})}
    if node:
        query["field_selector"] = "spec.nodeName=%s" % check_name(node, "node name")
    path = "/api/v1/namespaces/%s/pods" % check_namespace(params["namespace"])
    pods = api.list(path, **query) if hasattr(api, "list") else (api.get(path, **query) or {}).get("items", [])
    found = {}
    for pod in pods:
        name = (pod.get("spec") or {}).get("nodeName")
        if _running(pod) and name not in found:
            found[name] = pod
    return found


def exporter_states(api, params, names, fingerprint=None, health_only=False):
    """{node: "serving" or why not} for each of ``names`` (selected nodes), from their exporter pods
    (one list of the pods; then a few nodes at a time, PROXY_WORKERS)."""
    pods = exporter_pods(api, params)
    asked = [node for node in names if node in pods]
    answers = bounded_map(lambda node: exporter_answers(api, params, pods[node], fingerprint, health_only), asked)
    state = {}
    for node in names:
        if node not in pods:
            state[node] = "no running exporter pod"
        else:
            why, error = answers[node]
            state[node] = "serving" if why is None and error is None else why or str(error)
    return state


def spread(names, count, seed=0):
    """``count`` of ``names`` (sorted) spread evenly over them, starting ``seed`` places in (wrapping
    round): seed 0 takes the first, the last and between; another seed the same spacing shifted,
    so runs with different seeds ask different nodes."""
    names = sorted(names)
    if len(names) <= count:
        return names
    if count == 1:
        return [names[seed % len(names)]]
    return sorted(set(names[((len(names) - 1) * index // (count - 1) + seed) % len(names)] for index in range(count)))


def sample_seed():
    """Where this run's sample starts: the time, so that each run asks other exporters and a broken
    one the readiness probe does not see is found over a few runs (the nodes asked are named in the
    result's nodes)."""
    return int(time.time())


_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def check_params(params):
    """Every option that becomes an object, a URL, a selector or a Prometheus setting, checked
    before any request; MonitoringError listing each problem."""
    more = []
    if params.get("dashboard_namespace"):
        more.append(lambda: check_namespace(params["dashboard_namespace"], "dashboard_namespace"))
    if params.get("tls_secret"):
        more.append(lambda: check_name(params["tls_secret"], "tls_secret"))
    problems = option_problems(params, ("node_selector", "labels", "service_monitor_labels", "rule_labels",
                                        "dashboard_labels"), more)
    problems.extend(share_problems(params))
    if not _DURATION.match(str(params.get("interval") or "")):
        problems.append("interval must be a Prometheus duration such as 30s or 1m30s, got %r" % params.get("interval"))
    if not 1 <= params["port"] <= 65535:
        problems.append("port must be a TCP port (1-65535), got %s" % params["port"])
    containers = params.get("exporter_containers", "all")
    if containers not in EXPORTER_CONTAINERS:
        problems.append("exporter_containers must be one of %s (which containers get per-container series), got %r: "
                        "use none for node totals only, exclusive for pinned containers alone"
                        % (", ".join(EXPORTER_CONTAINERS), containers))
    for option in ("memory_threshold", "miss_ratio_threshold"):
        if not 0 < params[option] < 1:
            problems.append("%s must be a fraction between 0 and 1 (e.g. 0.9), got %s" % (option, params[option]))
    if problems:
        raise MonitoringError(problems)


def run(api, params, check_mode, wait_for):
    check_params(params)
    result = {"changed": False, "objects": [], "diff": [], "nodes": {}}

    def record(obj_name, changed, before, after):
        result["objects"].append({"object": obj_name, "changed": changed})
        if changed:
            result["changed"] = True
            result["diff"].append({"before": before, "after": after, "before_header": obj_name,
                                   "after_header": obj_name})

    operator = operator_installed(api)
    result["operator"] = operator
    if params["state"] == "absent":
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": object_meta(params, name=tls_secret_name(params))}
        owned = objects(params, operator) + ([] if params.get("tls_secret") else [secret])
        for obj in reversed(owned):
            changed, before = api.delete(obj, check_mode)
            record(describe(obj), changed, before, {})
        return result

    if not operator and (params["service_monitor"] or params["prometheus_rule"]) and not params["without_operator"] == "service":
        raise MonitoringError(["the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule: "
                               "install Prometheus Operator (e.g. kube-prometheus-stack) first, set "
                               "without_operator: service to deploy the exporter and its Service alone, or turn "
                               "service_monitor and prometheus_rule off"])
    if not HAS_CRYPTOGRAPHY:
        raise MonitoringError(["checking and making the exporter's TLS Secret needs the Python library cryptography "
                               "where the module runs: install it there (python3-cryptography, pip install "
                               "cryptography)"])
    nodes = api.nodes(params.get("node_selector"))
    names = [node["metadata"]["name"] for node in nodes]
    if not names:
        raise MonitoringError(["no Node matches node_selector %r: the exporter would run nowhere"
                               % (params.get("node_selector") or {})])
    allowed = allowed_down(params, len(names))
    down = not_ready(nodes)
    if len(down) > allowed:
        raise MonitoringError([too_many_down(down, allowed, len(names), "Nothing was applied")])
    if params.get("tls_secret"):  # the user's: refused before anything is applied, never changed
        user_note, fingerprint = user_secret(api, params)
    # nothing of the stack's names that numa.kube did not make is taken over (unless adopt)
    api.claim(([] if params.get("tls_secret") else
               [{"apiVersion": "v1", "kind": "Secret", "metadata": object_meta(params, name=tls_secret_name(params))}])
              + objects(params, operator))

    # the namespaces the stack lives in, made when missing; a preview cannot ask the API server
    # to dry-run objects into a namespace that does not exist yet, so it shows them as they are
    missing = set()
    for name in sorted(set([params["namespace"], params.get("dashboard_namespace") or params["namespace"]])):
        if api.get("/api/v1/namespaces/%s" % check_namespace(name)) is None:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            changed, before, after = api.apply(namespace, check_mode)
            record(describe(namespace), changed, before, after)
            missing.add(name)

    def apply(obj):
        if check_mode and obj["metadata"].get("namespace") in missing:
            return True, {}, comparable(obj)
        return api.apply(obj, check_mode)

    if params.get("tls_secret"):
        changed, before, after, result["tls"] = False, None, None, user_note
    elif check_mode and params["namespace"] in missing:
        changed, before, after = True, {}, {"kind": "Secret", "metadata": object_meta(params, name=tls_secret_name(params))}
        result["tls"] = "Secret %s/%s would be made" % (params["namespace"], tls_secret_name(params))
        fingerprint = None
    else:
        # whether every exporter serves the current certificate: /healthz alone names it
        changed, before, after, result["tls"], fingerprint = own_secret(
            api, params, check_mode, lambda served: exporter_states(api, params, names, served, health_only=True))
    record("Secret %s/%s" % (params["namespace"], tls_secret_name(params)), changed, before, after)
    for obj in objects(params, operator):
        changed, before, after = apply(obj)
        record(describe(obj), changed, before, after)
    warn_down(result, down)
    if check_mode or not params["wait"]:
        return result

    namespace, name = check_namespace(params["namespace"]), check_name(params["name"], "name")
    ds_path = "/apis/apps/v1/namespaces/%s/daemonsets/%s" % (namespace, name)
    stall = params["wait_timeout"]
    outcome = wait_daemonset(lambda: api.get(ds_path), names, wait_for, stall, down, allowed,
                             daemonset_pods(api, namespace, {"app": APP, "app.kubernetes.io/instance": name}),
                             nodes_by_name(api, params.get("node_selector") or {}))
    warn_down(result, down)
    done, text, waited = outcome
    if not done:
        raise MonitoringError(["the DaemonSet %s/%s did not roll out: %s; %s"
                               % (params["namespace"], params["name"], why_waiting_ended(outcome, stall), text)],
                              result)
    result["rollout_seconds"] = round(waited, 1)

    # a sample, each node asked until its exporter serves and then left alone
    sample = spread([node for node in names if node not in down], SERVING_SAMPLE, sample_seed())
    state = result["nodes"]

    def serving(pending):
        pods = {}
        for node in pending:
            pods.update(exporter_pods(api, params, node))
        answers = bounded_map(lambda node: exporter_answers(api, params, pods[node], fingerprint),
                              [node for node in pending if node in pods])
        found = {}
        for node in pending:
            why, error = answers.get(node, ("no running exporter pod", None))
            found[node] = None if why is None and error is None else why or str(error)
            state[node] = found[node] or "serving"
        return found

    outcome = wait_pending(sample, serving, wait_for, stall)
    if not outcome[0]:
        raise MonitoringError(["the exporter does not serve on %s (%d nodes asked of %d selected): %s; %s"
                               % (", ".join(sorted(outcome[1])), len(sample), len(names),
                                  why_waiting_ended(outcome, stall),
                                  "; ".join("%s: %s" % item for item in sorted(outcome[1].items())))], result)
    return result
