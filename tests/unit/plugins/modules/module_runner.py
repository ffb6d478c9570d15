# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's main() in-process with given arguments and capture what it returns."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    def __init__(self, result, failed):
        Exception.__init__(self, result)
        self.result = result
        self.failed = failed


def _exit(self, **kwargs):
    raise ModuleExit(kwargs, failed=False)


def _fail(self, msg, **kwargs):
    kwargs["msg"] = msg
    raise ModuleExit(kwargs, failed=True)


def run(module, args, check_mode=False, diff=False):
    """Return (failed, result) of running ``module.main()`` with ``args``."""
    args = dict(args)
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail):
        try:
            module.main()
        except ModuleExit as done:
            return done.failed, done.result
    raise AssertionError("the module returned without exit_json or fail_json")
