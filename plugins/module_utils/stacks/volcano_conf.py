# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano's scheduler configuration (volcano-scheduler.conf) as data: parse it, say whether
numa-aware is in it, switch it on or off, and write it back as text.

The scheduler configuration is YAML: ``actions`` and ``tiers``, each tier a list of ``plugins``
(``name`` and optional ``arguments`` and flags). numa-aware is one plugin there, with a ``weight``
argument. Switching it edits the parsed document: every other plugin, argument, tier and top-level
key stays as it was (comments do not survive a YAML round trip; the values do).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

try:
    import yaml
    HAS_YAML = True
except ImportError:  # ansible-core depends on PyYAML; reported by the module all the same
    HAS_YAML = False

PLUGIN = "numa-aware"
# the tier the Volcano documentation puts numa-aware in: the one with predicates and nodeorder
NEIGHBOURS = ("predicates", "nodeorder", "binpack", "proportion")
# Volcano reads the weight as a whole number (YAML int; anything else is ignored with a warning and
# the weight stays 1) and multiplies the plugin's 0-100 node score by it, with no bound of its own.
# Below 1 the score is switched off or turned upside down; above 100 numa-aware alone decides where
# every NUMA-annotated pod goes, whatever the other scoring plugins (weight 1 by default) say.
WEIGHT_MIN, WEIGHT_MAX = 1, 100


class VolcanoError(ProblemsError):
    """The configuration or cluster cannot be handled as asked; the message says why and what to do.

    ``details`` carries what a failed task reports beside its message (the rollback of a switch)."""

    def __init__(self, problems, details=None, summary=None):
        ProblemsError.__init__(self, problems, summary=summary)
        self.details = details or {}


def check_weight(weight):
    """VolcanoError unless ``weight`` is a whole number Volcano reads and numa.kube accepts."""
    if isinstance(weight, bool) or not isinstance(weight, int) or not WEIGHT_MIN <= weight <= WEIGHT_MAX:
        raise VolcanoError("weight must be a whole number from %d to %d (Volcano multiplies numa-aware's 0-100 "
                           "node score by it; above %d it alone decides every placement), got %r: set weight "
                           "between %d and %d" % (WEIGHT_MIN, WEIGHT_MAX, WEIGHT_MAX, weight, WEIGHT_MIN, WEIGHT_MAX))
    return weight


def parse(text, where="volcano-scheduler.conf"):
    """The scheduler configuration as data; VolcanoError naming the parse error otherwise."""
    try:
        conf = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        raise VolcanoError("%s is not valid YAML, so it cannot be edited safely: %s; fix it (or restore "
                           "Volcano's own) and run again - nothing was changed" % (where, exc))
    if conf is None:
        conf = {}
    if not isinstance(conf, dict):
        raise VolcanoError("%s is YAML but not a mapping (it is a %s): Volcano expects actions and tiers; "
                           "nothing was changed" % (where, type(conf).__name__))
    tiers = conf.get("tiers", [])
    if not isinstance(tiers, list) or not all(isinstance(t, dict) and isinstance(t.get("plugins", []), list)
                                              for t in tiers):
        raise VolcanoError("%s: tiers must be a list of {plugins: [...]}, found %r; nothing was changed"
                           % (where, tiers))
    for tier in tiers:
        for plugin in tier.get("plugins") or []:
            if not isinstance(plugin, dict) or "name" not in plugin:
                raise VolcanoError("%s: every plugin needs a name, found %r; nothing was changed" % (where, plugin))
    return conf


def render(conf):
    return yaml.safe_dump(conf, default_flow_style=False, sort_keys=False)


def conf_digest(text):
    """A short fingerprint of a configuration text (stamped on what the switch marks)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def state(conf):
    """What the openFuyao service's GET answers, and where the plugin sits: {status, weight, tier}."""
    for number, tier in enumerate(conf.get("tiers") or []):
        for plugin in tier.get("plugins") or []:
            if plugin.get("name") == PLUGIN:
                weight = (plugin.get("arguments") or {}).get("weight")
                return {"status": "open", "weight": weight, "tier": number}
    return {"status": "close", "weight": None, "tier": None}


def _target_tier(tiers):
    for number, tier in enumerate(tiers):
        if any(p.get("name") in NEIGHBOURS for p in tier.get("plugins") or []):
            return number
    return len(tiers) - 1 if tiers else None


def switch(conf, enabled, weight=None):
    """A new configuration with numa-aware on (with ``weight``) or off; the input is not touched."""
    conf = copy.deepcopy(conf)
    tiers = conf.setdefault("tiers", [])
    if not enabled:
        for tier in tiers:
            tier["plugins"] = [p for p in tier.get("plugins") or [] if p.get("name") != PLUGIN]
        return conf
    current = state(conf)
    if current["status"] == "open":
        if weight is not None:
            for plugin in tiers[current["tier"]]["plugins"]:
                if plugin.get("name") == PLUGIN:
                    arguments = plugin.get("arguments")
                    plugin["arguments"] = dict(arguments or {}, weight=weight)
        return conf
    entry = {"name": PLUGIN, "arguments": {"weight": 1 if weight is None else weight}}
    number = _target_tier(tiers)
    if number is None:
        tiers.append({"plugins": [entry]})
    else:
        tiers[number].setdefault("plugins", []).append(entry)
    return conf
