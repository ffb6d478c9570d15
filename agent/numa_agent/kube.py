# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API server and the node's kubelet as the agent's programs reach them from their pod.

The pod's service account gives the token and the cluster's CA; the ``kubernetes`` Service's
variables give the API server's address. Only the standard library: the image stays small.

The token goes to kubelet too, so kubelet's serving certificate is checked before it is sent
(``kubelet_client``), in one of three ways:

- ``node-cert``: against the node's own certificate, mounted from the host. Without
  ``tlsCertFile`` or ``serverTLSBootstrap`` (kubeadm's default) kubelet writes
  ``/var/lib/kubelet/pki/kubelet.crt`` at its first start: a certificate for its host name (its
  ``--hostname-override`` where given; no IP address) followed by the throw-away CA that signed it.
  That file is then the CA, and the name checked is the node's, not the address dialled.
- ``cluster-ca``: against the cluster's CA (the service account's ``ca.crt``), for kubelets whose
  serving certificate the cluster signs (``serverTLSBootstrap``); those carry the node's addresses,
  so the address dialled is checked.
- ``insecure``: no check at all, only when asked for by name.
"""

import json
import os
import ssl
import urllib.error
import urllib.request

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# where kubelet writes its self-signed serving certificate (its --cert-dir default)
KUBELET_CERT = "/var/lib/kubelet/pki/kubelet.crt"
KUBELET_TLS_MODES = ("node-cert", "cluster-ca", "insecure")


class ApiError(Exception):
    """A request that did not succeed: ``status`` is the HTTP status (0 when none came back);
    ``certificate`` tells that the server's certificate did not verify."""

    def __init__(self, status, message, certificate=False):
        super(ApiError, self).__init__("%s%s" % ("HTTP %d: " % status if status else "", message))
        self.status = status
        self.certificate = certificate


def _host_port(host, port):
    return "%s:%s" % ("[%s]" % host if ":" in host else host, port)


class _NamedContext(ssl.SSLContext):
    """A client context that checks the server's certificate for ``server_name`` whatever address
    was dialled: kubelet is reached at the node's IP, but its own certificate names the node."""

    server_name = None

    def wrap_socket(self, sock, *args, **kwargs):  # pylint: disable=arguments-differ
        kwargs["server_hostname"] = self.server_name
        return super(_NamedContext, self).wrap_socket(sock, *args, **kwargs)


def tls_context(ca_file=None, server_name=None, verify=True):
    """The client TLS context: no check at all without ``verify``; otherwise the certificate must
    chain to ``ca_file`` (the system's CAs when None) and carry ``server_name`` (when given) or
    the host of the URL."""
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if not server_name:
        return ssl.create_default_context(cafile=ca_file)
    context = _NamedContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname
    context.server_name = server_name
    # the same chain rules as the running Python's default context (strict from 3.13 on)
    context.verify_flags = ssl.create_default_context().verify_flags
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    else:
        context.load_default_certs()
    return context


class Client(object):
    """JSON requests with the service account's token.

    ``base`` defaults to the API server named by the pod's ``KUBERNETES_SERVICE_*`` variables and
    ``ca_file`` to the service account's CA; ``server_name`` is the name the server's certificate
    must carry when it is not the URL's host; ``verify`` False skips every check (``insecure``).
    """

    def __init__(self, base=None, token_file=None, ca_file=None, verify=True, timeout=10.0, server_name=None):
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        if base is None and host:
            base = "https://" + _host_port(host, os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
        self.base = base
        self.token_file = token_file or os.path.join(SERVICE_ACCOUNT, "token")
        if ca_file is None and verify:
            ca_file = os.path.join(SERVICE_ACCOUNT, "ca.crt")
        self.ca_file = ca_file
        self.verify = verify
        self.timeout = timeout
        self.server_name = server_name

    def usable(self):
        return bool(self.base and os.path.exists(self.token_file))

    def tls(self):
        """How the server's certificate is checked, in words (for the log)."""
        if not self.verify:
            return "its certificate NOT checked"
        return "its certificate checked against %s for the name %s" % (
            self.ca_file or "the system's CAs", self.server_name or "in the URL (its host)")

    def _context(self):
        # built for each request: a CA file rewritten in place is read again
        return tls_context(self.ca_file, self.server_name, self.verify)

    def request(self, method, path, body=None, content_type="application/json"):
        """The decoded JSON answer; ApiError with the status and the server's message otherwise."""
        with open(self.token_file) as handle:
            token = handle.read().strip()
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": "Bearer " + token, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read().decode("utf-8", "replace")).get("message") or exc.reason
            except ValueError:
                message = exc.reason
            raise ApiError(exc.code, message)
        except (OSError, ValueError) as exc:
            reason = exc if isinstance(exc, ssl.SSLCertVerificationError) else getattr(exc, "reason", None)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise ApiError(0, "%s %s%s: the server's certificate did not verify (%s): %s"
                               % (method, self.base, path, self.tls(), reason), certificate=True)
            raise ApiError(0, "%s %s%s: %s" % (method, self.base, path, exc))

    def get(self, path):
        return self.request("GET", path)


def kubelet_client(url=None, tls="node-cert", ca_file=None, server_name=None, node_name=None, timeout=10.0):
    """The node's own kubelet, at ``url`` or https://$NODE_IP:10250 (env from the downward API),
    its serving certificate checked as ``tls`` says (see the module's text). ``ca_file`` and
    ``server_name`` replace the mode's own: ``node-cert`` takes KUBELET_CERT and the node's name
    (``node_name``, else $NODE_NAME), ``cluster-ca`` the service account's CA and the address."""
    if url is None:
        host = os.environ.get("NODE_IP")
        url = "https://%s" % _host_port(host, 10250) if host else None
    if tls == "insecure":
        return Client(base=url, verify=False, timeout=timeout)
    if tls == "node-cert":
        server_name = server_name or node_name or os.environ.get("NODE_NAME") or None
        if not server_name:
            raise ValueError("kubelet TLS mode node-cert checks the node's name in kubelet's certificate, and "
                             "no node name is known: give --node-name (or NODE_NAME) or --kubelet-server-name")
        return Client(base=url, ca_file=ca_file or KUBELET_CERT, server_name=server_name, timeout=timeout)
    if tls == "cluster-ca":
        return Client(base=url, ca_file=ca_file or os.path.join(SERVICE_ACCOUNT, "ca.crt"), server_name=server_name,
                      timeout=timeout)
    raise ValueError("kubelet TLS mode %r is unknown: it must be one of %s" % (tls, ", ".join(KUBELET_TLS_MODES)))
