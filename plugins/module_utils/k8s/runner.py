# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every cluster-stack module does first: its authentication and rollout options (kubernetes.core's
names), an AnsibleModule that keeps the credentials inside them out of its logs and results, and the
connection, with the shared bounds checked before any request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError, fail_from
from ansible_collections.numa.kube.plugins.module_utils.k8s.client import (
    DEFAULT_WAIT_CEILING,
    DEFAULT_WAIT_TIMEOUT,
    HAS_KUBERNETES,
    MAX_WAIT_CEILING,
    MAX_WAIT_TIMEOUT,
    KubeApi,
    KubeApiError,
)

try:
    from urllib.parse import unquote, urlsplit
except ImportError:  # Python 2 (sanity's compile test only)
    from urllib import unquote  # pylint: disable=no-name-in-module
    from urlparse import urlsplit

# The authentication options of every cluster-stack module (kubernetes.core's names and aliases).
AUTH_ARGUMENT_SPEC = {
    "kubeconfig": {"type": "raw", "fallback": (lambda: os.environ.get("K8S_AUTH_KUBECONFIG"),)},
    "context": {"type": "str", "fallback": (lambda: os.environ.get("K8S_AUTH_CONTEXT"),)},
    "host": {"type": "str", "fallback": (lambda: os.environ.get("K8S_AUTH_HOST"),)},
    "api_key": {"type": "str", "no_log": True, "fallback": (lambda: os.environ.get("K8S_AUTH_API_KEY"),)},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False},
    "proxy": {"type": "str"},
    # not a connection option, but every cluster-stack module takes it the same way
    "adopt": {"type": "bool", "default": False},
}

# The rollout and wait options of the cluster-stack modules with a DaemonSet (doc fragment
# numa.kube.stack_rollout): the DaemonSet's maxUnavailable, the share of unavailable nodes accepted,
# the time a wait may go without progress and the task's hard limit.
ROLLOUT_ARGUMENT_SPEC = {
    "max_unavailable": {"type": "raw", "default": "10%"},
    "unavailable_nodes_allowed": {"type": "raw", "default": "5%"},
    "wait_timeout": {"type": "int", "default": DEFAULT_WAIT_TIMEOUT},
    "wait_ceiling": {"type": "int", "default": DEFAULT_WAIT_CEILING},
}


_SECRET_KEYS = ("token", "password", "key-data", "secret", "credential", "config")


def _masked(value):
    # Ansible masks a no_log value wherever it appears as a substring: a value of one or two
    # characters would blot out every message, so only real credentials are listed
    return isinstance(value, str) and len(value) >= 3


def secret_values(params):
    """Credentials inside the options that Ansible's no_log cannot see: in a kubeconfig given as a
    mapping, every value under a key that names a secret (token, password, client-key-data,
    an auth provider's config), an exec plugin's environment values and the argument after (or
    in) an argument that names a secret; a proxy URL's password."""
    found = []

    def walk(value, secret=False):
        if isinstance(value, dict):
            for key, item in value.items():
                words = str(key).lower()
                if words == "exec" and isinstance(item, dict):
                    walk_exec(item)
                    continue
                walk(item, secret or any(word in words for word in _SECRET_KEYS))
        elif isinstance(value, list):
            for item in value:
                walk(item, secret)
        elif secret and _masked(value):
            found.append(value)

    def walk_exec(plugin):
        for entry in plugin.get("env") or []:
            if isinstance(entry, dict) and _masked(entry.get("value")):
                found.append(entry["value"])
        args = [arg for arg in plugin.get("args") or [] if isinstance(arg, str)]
        for number, arg in enumerate(args):
            if not any(word in arg.lower() for word in _SECRET_KEYS):
                continue
            flag, equals, value = arg.partition("=")
            if equals and _masked(value):
                found.append(value)
            elif not equals and number + 1 < len(args) and _masked(args[number + 1]):
                found.append(args[number + 1])

    kubeconfig = params.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        walk(kubeconfig)
    proxy = params.get("proxy")
    if proxy:
        try:
            password = urlsplit(proxy).password
        except ValueError:
            password = None
        if password:
            found.extend([password, unquote(password)])
    return found


def stack_module(**kwargs):
    """The AnsibleModule of a cluster-stack module, which masks the credentials inside its options
    before it logs its invocation (syslog, the journal) as well as in its results."""
    from ansible.module_utils.basic import AnsibleModule

    class StackModule(AnsibleModule):
        def _log_invocation(self):
            for value in secret_values(self.params):
                self.no_log_values.add(value)
            super(StackModule, self)._log_invocation()

    return StackModule(**kwargs)


def connect(module, stack=None):
    """The API connection of a cluster-stack module (``stack``: which of numa.kube's stacks it
    manages): credentials kept out of its results, the shared bounds checked (failing the task,
    before any request, naming value and rule)."""
    if not HAS_KUBERNETES:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib("kubernetes"))
    for value in secret_values(module.params):
        module.no_log_values.add(value)
    timeout = module.params.get("wait_timeout")
    ceiling = module.params.get("wait_ceiling")
    if timeout is not None and not 1 <= timeout <= MAX_WAIT_TIMEOUT:
        module.fail_json(msg="wait_timeout must be between 1 and %d seconds (%s), got %s"
                             % (MAX_WAIT_TIMEOUT, "how long a wait may go without progress" if "wait_ceiling"
                                in module.params else "it bounds the whole task", timeout))
    if ceiling is not None and not 1 <= ceiling <= MAX_WAIT_CEILING:
        module.fail_json(msg="wait_ceiling must be between 1 and %d seconds (the hard limit of the whole task, "
                             "however its waits move), got %s" % (MAX_WAIT_CEILING, ceiling))
    if ceiling is not None and timeout is not None and ceiling < timeout:
        module.fail_json(msg="wait_ceiling (%s s, the hard limit of the whole task) is below wait_timeout (%s s, "
                             "how long one wait may go without progress): no wait could ever use its wait_timeout; "
                             "raise wait_ceiling to at least %s or lower wait_timeout" % (ceiling, timeout, timeout))
    try:
        return KubeApi(module.params, stack=stack)
    except KubeApiError as exc:
        module.fail_json(msg=str(exc))


def run_stack_module(module, api, work):
    """Run a cluster-stack module's ``work()`` (its stack's run, returning the result) and end its
    task the way every stack module does: the result's warnings as the task's, its diff only when
    asked for, the objects it kept (there, and not numa.kube's) named; a refusal or an API error
    ends the task with its problems and what was done before it."""
    try:
        result = work()
    except (ProblemsError, KubeApiError) as exc:
        fail_from(module, exc)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    diff = result.pop("diff")
    if module._diff:
        result["diff"] = diff
    result["kept"] = api.kept
    module.exit_json(**result)
