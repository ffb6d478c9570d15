# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_update.replace writes as every durable write of numa.kube's: the new bytes flushed before the
move, the folder after it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.numa.kube.plugins.module_utils.node import file_update


class Module(object):
    """What replace asks of an AnsibleModule: its atomic move (a rename here) and its params."""

    params = {}

    def atomic_move(self, source, destination, unsafe_writes=False):
        os.rename(source, destination)


def test_replace_flushes_the_bytes_before_the_move_and_the_folder_after(tmp_path, monkeypatch):
    flushed = []
    real_fsync = os.fsync

    def fsync(fd):
        flushed.append(os.readlink("/proc/self/fd/%d" % fd))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "config.toml"
    target.write_text("old\n")
    (tmp_path / ".config.toml.numa-kube.tmp").symlink_to(tmp_path / "elsewhere")  # left by a crash, or planted
    file_update.replace(Module(), str(target), "new\n")
    assert target.read_text() == "new\n"
    assert flushed == [str(tmp_path / ".config.toml.numa-kube.tmp"), str(tmp_path)], flushed
    assert not (tmp_path / "elsewhere").exists(), "the link left there was not followed"
