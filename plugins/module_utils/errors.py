# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The error type every numa.kube check raises (one or more problems, each a full sentence), and how
a module ends its task with one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ProblemsError(ValueError):
    """Input that something downstream (kubelet, containerd, grub, the API server) would refuse, or a
    change that cannot be made as asked.

    ``problems`` lists every finding, so a user can fix them all in one go; ``result`` is what the
    task did before it stopped (the cluster stacks report what they applied), empty when nothing;
    ``summary``, when given, opens the message (what was refused as a whole) without being one of
    the problems.
    """

    def __init__(self, problems, result=None, summary=None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        self.result = dict(result or {})
        message = "; ".join(self.problems)
        ValueError.__init__(self, "%s: %s" % (summary, message) if summary else message)


def fail_with_problems(module, problems, prefix=""):
    """End ``module``'s task with every problem: joined by " | " in its message (after ``prefix``),
    listed in ``problems``."""
    problems = [problems] if isinstance(problems, str) else list(problems)
    module.fail_json(msg=prefix + " | ".join(problems), problems=problems)


def fail_from(module, exc):
    """End ``module``'s task with what ``exc`` says: its message, its problems when it has them, its
    warnings as the task's warnings, and the partial result it carries."""
    result = dict(getattr(exc, "result", None) or {})
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if getattr(exc, "problems", None) is not None:
        result["problems"] = list(exc.problems)
    module.fail_json(msg=str(exc), **result)
