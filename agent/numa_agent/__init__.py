# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa.kube's node agent: the node-side programs of the cluster stacks, in one image.

Each program is a subcommand of ``python3 -m numa_agent`` and runs as well as a plain process on
a node as in a container: the sysfs root and the kubelet's socket folders are options.
"""
