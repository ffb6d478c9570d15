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
    description:
      - HTTP proxy URL to reach the API server through. A password in it is kept out of the task's
        results.
    type: str
  adopt:
    description:
      - Whether the module may take over an object of the same name that it did not make (one
        without the label C(app.kubernetes.io/managed-by=numa.kube)). By default such an object
        stops the task before anything is changed, naming it and its current manager, and
        O(state=absent) leaves it alone (listed in the result C(kept)).
      - Set it only after checking that the existing object is a copy of this stack nobody else
        runs (for example one deployed by hand before numa.kube).
      - M(numa.kube.volcano_numa_aware) makes no object (it edits Volcano's own configuration, which is
        its purpose) and ignores this option, as does M(numa.kube.node_labels) (it changes only its own
        labels of existing Nodes).
    type: bool
    default: false
notes:
  - Every object the module applies carries the label C(app.kubernetes.io/managed-by=numa.kube);
    server-side apply takes over conflicting fields (C(force)) only on such objects.
  - Every request gives up after 10 s without a connection or 60 s without an answer. The whole
    task, its waits and retries included, ends by one deadline, the option C(wait_ceiling) where the module has
    it and C(wait_timeout) otherwise.
  - An API server that answers 429, or a 5xx with C(Retry-After), is asked again after the seconds
    it names, up to 10 times, as client-go does, unless the wait would pass the task's deadline.
    Other errors end the task at once, naming the request.
  - Credentials inside O(kubeconfig) given as a mapping (tokens, keys, passwords, an exec plugin's
    environment) are kept out of the task's results.
requirements:
  - kubernetes (the Python client) on the host that runs the module, usually the controller
"""
