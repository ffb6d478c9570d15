# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The batches a node rollout runs in, as Ansible's ``serial`` makes them.

change_nodes.yml passes numa_kube_batch_size to the play keyword ``serial``: a whole number, a
percentage string ("5%") or a list of them (a ramp such as [1, "5%", "20%"], its last item repeated
until every host had its turn). ansible-core (lib/ansible/executor/playbook_executor.py,
``_get_serialized_batches``, with ``pct_to_int`` from lib/ansible/utils/helpers.py) turns a
percentage into ``int(pct / 100 * hosts)``, at least 1; this module does the same arithmetic, so
that the preflight can refuse a value ``serial`` would choke on and show the plan beforehand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_ITEM = re.compile(r"^(?:[1-9][0-9]*|(?:[1-9][0-9]?|100)%)\Z")
RULE = ("a whole number of nodes of 1 or more, a percentage of the workers from 1% to 100% (such as \"5%\", "
        "without spaces or line breaks), "
        "or a list of them (a ramp such as [1, \"5%\", \"20%\"], whose last item repeats until every node had "
        "its turn)")


def _items(value):
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def problems(value, name="numa_kube_batch_size"):
    """What is wrong with a batch size, as sentences naming the value, the rule and the fix."""
    if isinstance(value, dict) or value is None or value == [] or value == ():
        return ["%s is %r: it must be %s." % (name, value, RULE)]
    wrong = []
    for item in _items(value):
        # booleans are ints in Python, and a float would be cut by int(): both refused
        # and a text is taken as it is: ansible-core reads "5% " or "5%\n" as a whole number and fails
        if isinstance(item, bool) or not isinstance(item, (int, str)) or not _ITEM.match(str(item)):
            wrong.append(item)
    if wrong:
        return ["%s is %r: %s %s not a batch size; each item must be %s. Set, for instance, "
                "numa_kube_batch_size=10 or -e '{\"numa_kube_batch_size\": [1, \"5%%\", \"20%%\"]}'."
                % (name, value, ", ".join(repr(item) for item in wrong), "is" if len(wrong) == 1 else "are",
                   RULE)]
    return []


def item_size(item, total):
    """One item's batch size for ``total`` hosts (Ansible's pct_to_int)."""
    text = str(item)
    if text.endswith("%"):
        return int((int(text[:-1]) / 100.0) * total) or 1
    return int(text)


def sizes(value, total):
    """The size of each batch for ``total`` hosts, in order (their sum is ``total``)."""
    found = problems(value)
    if found:
        raise ValueError(found[0])
    items = _items(value)
    left, index, batches = int(total), 0, []
    while left > 0:
        size = min(item_size(items[index], total), left)
        batches.append(size)
        left -= size
        index = min(index + 1, len(items) - 1)
    return batches
