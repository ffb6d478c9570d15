# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the scenarios' testinfra tests share (import after adding this folder to sys.path)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def exporter_metrics(host, port=9201):
    """The NUMA exporter's samples as {(name, ((label, value), ...)): value}, scraped inside the guest."""
    out = host.check_output("python3 -c \"import urllib.request as u; "
                            "print(u.urlopen('http://127.0.0.1:%d/metrics', timeout=30).read().decode())\"" % port)
    values = {}
    for line in out.splitlines():
        match = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if match:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match.group(2))))
            values[(match.group(1), labels)] = float(match.group(3))
    return values
