"""Make the collection importable as ansible_collections.numa.kube when pytest runs directly."""
import importlib.util
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_COLLECTIONS = os.path.join(_HERE, ".venv", "collections")


def _importable():
    try:
        return importlib.util.find_spec("ansible_collections.numa.kube") is not None
    except ImportError:
        return False


if not _importable():
    _LINK = os.path.join(_COLLECTIONS, "ansible_collections", "numa", "kube")
    if not os.path.exists(_LINK):
        os.makedirs(os.path.dirname(_LINK), exist_ok=True)
        try:
            os.symlink(_HERE, _LINK)
        except FileExistsError:  # another pytest-xdist worker made it first
            pass
    sys.path.insert(0, _COLLECTIONS)


def pytest_configure(config):
    # tools/run-tiers runs these in the foreground (tier "timed") and the rest of the unit tests beside
    # the scenario at idle CPU priority (tier "untimed"), where a test that times itself could starve
    config.addinivalue_line("markers", "wall_clock: the test asserts on wall time or races real threads, sockets "
                                       "or processes against a short deadline")


def _text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    # tools/run-tiers' "timed" collects only the files whose text names the marker: a test marked in
    # another way would run in neither tier
    unseen = sorted(set(str(item.fspath) for item in items if item.get_closest_marker("wall_clock")
                        and "pytest.mark.wall_clock" not in _text(str(item.fspath))))
    if unseen:
        raise pytest.UsageError("marked wall_clock without the words pytest.mark.wall_clock in the file, so that "
                                "tools/run-tiers timed would not collect them: %s" % ", ".join(unseen))
