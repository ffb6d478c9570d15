# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API server and the node's kubelet as the agent's programs reach them from their pod.

The pod's service account gives the token and the cluster's CA; the ``kubernetes`` Service's
variables give the API server's address. Only the standard library: the image stays small.
"""

import json
import os
import ssl
import urllib.error
import urllib.request

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(Exception):
    """A request that did not succeed: ``status`` is the HTTP status (0 when none came back)."""

    def __init__(self, status, message):
        super(ApiError, self).__init__("%s%s" % ("HTTP %d: " % status if status else "", message))
        self.status = status


def _host_port(host, port):
    return "%s:%s" % ("[%s]" % host if ":" in host else host, port)


class Client(object):
    """JSON requests with the service account's token.

    ``base`` defaults to the API server named by the pod's ``KUBERNETES_SERVICE_*`` variables;
    ``ca_file`` None with ``verify`` False skips the server certificate check (a kubelet's
    serving certificate is often self-signed).
    """

    def __init__(self, base=None, token_file=None, ca_file=None, verify=True, timeout=10.0):
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

    def usable(self):
        return bool(self.base and os.path.exists(self.token_file))

    def _context(self):
        if not self.verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            return context
        return ssl.create_default_context(cafile=self.ca_file)

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
            raise ApiError(0, "%s %s%s: %s" % (method, self.base, path, exc))

    def get(self, path):
        return self.request("GET", path)


def kubelet_client(url=None, ca_file=None, timeout=10.0):
    """The node's own kubelet, at ``url`` or https://$NODE_IP:10250 (env from the downward API)."""
    if url is None:
        host = os.environ.get("NODE_IP")
        url = "https://%s" % _host_port(host, 10250) if host else None
    return Client(base=url, ca_file=ca_file, verify=bool(ca_file), timeout=timeout)
