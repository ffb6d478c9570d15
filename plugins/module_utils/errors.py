# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The error type every numa.kube check raises: one or more problems, each a full sentence."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ProblemsError(ValueError):
    """Input that something downstream (kubelet, containerd, grub) would refuse.

    ``problems`` lists every finding, so a user can fix them all in one go.
    """

    def __init__(self, problems):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        ValueError.__init__(self, "; ".join(self.problems))
