# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After the bad runs (converge asserted each failed in preflight, files unchanged), the node still
runs exactly what it ran before."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import shlex

testinfra_hosts = ["ansible://all"]


def test_kubelet_still_runs_its_original_configuration(host):
    script = ("import ssl, urllib.request as u\n"
              "print(u.urlopen('https://127.0.0.1:10250/configz', timeout=20,"
              " context=ssl._create_unverified_context()).read().decode())\n")
    running = json.loads(host.check_output("python3 -c %s" % shlex.quote(script)))["kubeletconfig"]
    assert running["cpuManagerPolicy"] == "none"
    assert running["memoryManagerPolicy"] == "None"
    assert not running.get("reservedMemory")


def test_nothing_was_installed_or_backed_up(host):
    assert not host.service("numa-exporter").is_running
    assert host.run("ls /var/lib/kubelet/config.yaml.*~ /etc/containerd/config.toml.*~ 2>/dev/null").stdout == ""
