#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_files
short_description: Put several folders and whole files on a node in one run, writing only what differs
version_added: "0.1.0"
description:
  - Makes each folder of O(folders) (in order) and gives it its mode and owner; then writes each file of O(files) whose bytes differ from what
    the node holds, and gives every file its mode and owner.
  - One module run for what would take two per file with M(ansible.builtin.copy) or
    M(ansible.builtin.template) (a stat, then the copy or the attributes), changed or not. Render
    templates with the C(template) lookup and pass the text as O(files[].content).
  - Every folder and file is looked at before anything is written; a link or another kind of file
    where one goes, an owner the node lacks or a missing folder fails the run with nothing changed.
  - Each file is written whole through a new temporary file beside it, created with the file's
    final mode, given its owner through the open file and flushed, then renamed into place; the
    folder is flushed after. A crash leaves the old bytes or the new, and a key is never readable by
    anyone else in between. Links are never followed.
  - A file given as O(files[].secret_content) never shows in a diff, a result or a log.
author:
  - numa.kube contributors (@numa-kube)
options:
  folders:
    description:
      - Folders to make or keep, in order. Missing parents are made as M(ansible.builtin.file)
        makes them (root's, C(0755)).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The folder's absolute path.
        type: str
        required: true
      mode:
        description:
          - Its permission bits, an octal text in quotes such as C("0755"). A number is refused
            (YAML reads an unquoted C(0755) as 493).
        type: raw
        required: true
      owner:
        description: Its owner (name or number); unset keeps the owner.
        type: str
      group:
        description: Its group (name or number); unset keeps the group.
        type: str
  files:
    description: Whole files to write or keep, each in a folder that exists or is listed in O(folders).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file's absolute path.
        type: str
        required: true
      content:
        description: The file's bytes as text (see O(files[].encoding)), shown in the diff.
        type: str
      secret_content:
        description:
          - The file's bytes as text (see O(files[].encoding)), for a private key or a token,
            never shown in a diff, a result or a log. Give this or O(files[].content).
        type: str
      encoding:
        description: How O(files[].content) or O(files[].secret_content) carries the bytes.
        type: str
        choices: [utf-8, base64]
        default: utf-8
      mode:
        description:
          - Its permission bits, an octal text in quotes such as C("0644"). A number is refused
            (YAML reads an unquoted C(0644) as 420).
        type: raw
        required: true
      owner:
        description: Its owner (name or number); unset keeps the file's (root for a new file, also when the bytes change).
        type: str
      group:
        description: Its group (name or number); unset keeps the file's (root's for a new file, also when the bytes change).
        type: str
attributes:
  check_mode:
    support: full
    description:
      - Nothing is written; the results tell what a real run would change. An owner or group the
        node does not have yet (an earlier task creates it, which check mode did not run) counts as
        a change rather than a failure.
  diff_mode:
    support: full
    description:
      - Each changed text file before and after, a folder's state, mode and owner changes in the
        header; a binary file by its size, a secret by the word alone.
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Install a program, its unit and its TLS files
  numa.kube.node_files:
    folders:
      - {path: /opt/numa-exporter, mode: "0755", owner: root, group: root}
      - {path: /etc/numa-exporter/tls, mode: "0750", owner: root, group: numa-exporter}
    files:
      - path: /opt/numa-exporter/numa-exporter.pyz
        content: "{{ program_base64 }}"
        encoding: base64
        mode: "0644"
        owner: root
        group: root
      - path: /etc/systemd/system/numa-exporter.service
        content: "{{ lookup('ansible.builtin.template', 'numa-exporter.service.j2') }}"
        mode: "0644"
      - path: /etc/numa-exporter/tls/tls.key
        secret_content: "{{ private_key }}"
        mode: "0400"
        owner: numa-exporter
        group: numa-exporter
  register: installed

- name: Restart the service when its program or unit changed
  ansible.builtin.systemd_service:
    name: numa-exporter
    state: restarted
    daemon_reload: "{{ '/etc/systemd/system/numa-exporter.service' in installed.changed_paths }}"
  when: installed.changed_paths | intersect(['/opt/numa-exporter/numa-exporter.pyz',
        '/etc/systemd/system/numa-exporter.service']) | length > 0
"""

RETURN = r"""
changed_paths:
  description: The folders and files that were (in check mode, would be) changed, in the order given.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/numa-exporter.service]
folders:
  description: Each folder of O(folders) and whether it changed.
  returned: always
  type: list
  elements: dict
  sample: [{path: /opt/numa-exporter, changed: false}]
files:
  description:
    - Each file of O(files), whether it changed, whether its bytes did (C(content_changed)) and
      whether it was new (C(created)).
  returned: always
  type: list
  elements: dict
  sample: [{path: /etc/systemd/system/numa-exporter.service, changed: true, content_changed: true, created: false}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.numa.kube.plugins.module_utils.node.files import run


def main():
    folder = dict(path=dict(type="str", required=True), mode=dict(type="raw", required=True),
                  owner=dict(type="str"), group=dict(type="str"))
    module = AnsibleModule(
        argument_spec=dict(
            folders=dict(type="list", elements="dict", default=[], options=folder),
            files=dict(type="list", elements="dict", default=[], options=dict(
                folder, content=dict(type="str"), secret_content=dict(type="str", no_log=True),
                encoding=dict(type="str", default="utf-8", choices=["utf-8", "base64"]))),
        ),
        supports_check_mode=True,
    )
    run(module)


if __name__ == "__main__":
    main()
