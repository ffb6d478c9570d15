# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """How the cluster-stack modules reach the API server: kubernetes.core's options."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or its content as a dictionary. Default C(~/.kube/config)
        (the first file of E(KUBECONFIG)), else the in-cluster service account when neither that
        file nor O(host) is there.
      - Can be set with E(K8S_AUTH_KUBECONFIG).
    type: raw
  context:
    description: The kubeconfig context to use (E(K8S_AUTH_CONTEXT)). Default the current one.
    type: str
  host:
    description: URL of the API server, over what the kubeconfig says (E(K8S_AUTH_HOST)).
    type: str
  api_key:
    description: A bearer token for the API server (E(K8S_AUTH_API_KEY)).
    type: str
  validate_certs:
    description: Whether to check the API server's certificate. Default what the kubeconfig says.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: CA bundle to check the API server's certificate with.
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description: Client certificate for the API server.
    type: path
    aliases: [cert_file]
  client_key:
    description: Key of O(client_cert).
    type: path
    aliases: [key_file]
  proxy:
    description: HTTP proxy URL to reach the API server through.
    type: str
notes:
  - An API server that answers 429, or a 5xx with C(Retry-After), is asked again after the seconds
    it names, up to 10 times, as client-go does (needs kubernetes 37.0.0 or later; older clients
    try each request once). Other errors end the task at once, naming the request.
requirements:
  - kubernetes (the Python client) on the host that runs the module, usually the controller
"""
