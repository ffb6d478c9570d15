# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """What the modules that run numa.kube's topology publisher (module_utils/stacks/publisher.py) share."""

    DOCUMENTATION = r"""
options:
  publisher_resources:
    description:
      - The publisher container's resources; empty for the default, requests of 10m CPU and 40Mi, a
        limit of 96Mi memory.
    type: dict
    default: {}
"""
