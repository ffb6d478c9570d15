# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node agent's package (agent/numa_agent) importable by every unit test, as in its image and
the exporter's pack, where it sits beside the collection's module_utils."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent")
if AGENT not in sys.path:
    sys.path.insert(0, AGENT)
