# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test bed only (installed in the guest image, loaded by a .pth file): keep bytecode compiled
from zip archives.

Ansible sends every module as a fresh zip file (AnsiballZ) and Python's zipimport compiles each
source it imports from there again, every task: about 1.3 s of a 3-4 s module run on a TCG guest.
This wraps zipimport's compile step with a cache keyed by the source's SHA-256 and hands the code
back under the caller's file name, so tracebacks still point into the current zip. Nothing else
about the interpreter or the modules changes; a guest without this file behaves the same, slower.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import marshal
import os
import sys
import zipimport

CACHE = "/var/cache/numa-kube-zipimport"
_compile_source = getattr(zipimport, "_compile_source", None)


def _renamed(code, filename):
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached_compile(pathname, source):
    path = os.path.join(CACHE, "%s-%s" % (sys.implementation.cache_tag, hashlib.sha256(source).hexdigest()))
    try:
        with open(path, "rb") as handle:
            return _renamed(marshal.loads(handle.read()), pathname)
    except (OSError, ValueError, EOFError, TypeError):
        pass
    code = _compile_source(pathname, source)
    try:
        os.makedirs(CACHE, mode=0o700, exist_ok=True)
        temp = "%s.%d" % (path, os.getpid())
        with open(temp, "wb") as handle:
            handle.write(marshal.dumps(code))
        os.replace(temp, path)
    except OSError:
        pass
    return code


if _compile_source is not None:
    zipimport._compile_source = _cached_compile
