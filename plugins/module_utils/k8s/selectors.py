# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A label selector given as text (what ``kubectl get -l`` takes), checked before anything uses it.

The grammar is the API server's: requirements separated by commas, each one of ``key``, ``!key``,
``key=value``, ``key==value``, ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``,
``key>N`` or ``key<N`` (N a whole number); keys are label keys (an optional DNS subdomain prefix and
``/``, then a name of at most 63 characters), values label values (at most 63 characters, possibly
empty for the equality forms). The answer is the selector written out in one canonical form.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?"
_KEY = r"(?:%s/)?%s" % (_PREFIX, _NAME)
_VALUE = r"(?:%s)?" % _NAME
_EXISTS = re.compile(r"^(!?)\s*(%s)$" % _KEY)
_EQUALITY = re.compile(r"^(%s)\s*(==|!=|=)\s*(%s)$" % (_KEY, _VALUE))
_SET = re.compile(r"^(%s)\s+(in|notin)\s*\(([^()]*)\)$" % _KEY)
_ORDER = re.compile(r"^(%s)\s*([<>])\s*(-?[0-9]+)$" % _KEY)
FORMS = "key=value, key!=value, key in (v1,v2), key notin (v1,v2), key, !key, key>N or key<N"


class SelectorError(ProblemsError):
    """A label selector the API server would refuse; the message names the requirement and the form."""


def _requirements(text):
    """The comma-separated parts of ``text``, commas inside parentheses kept in their part."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


def _too_long(key, values):
    prefix, _sep, name = key.rpartition("/")
    if len(prefix) > 253 or len(name) > 63:
        return "its key %r is longer than a label key may be (63 characters, a prefix of 253)" % key
    long_values = [value for value in values if len(value) > 63]
    if long_values:
        return "its value %r is longer than 63 characters" % long_values[0]
    return None


def _one(part):
    """(canonical text, None) for a requirement, or (None, why it is not one)."""
    match = _EXISTS.match(part)
    if match:
        return "%s%s" % match.groups(), _too_long(match.group(2), [])
    match = _EQUALITY.match(part)
    if match:
        key, operator, value = match.groups()
        return "%s%s%s" % (key, "!=" if operator == "!=" else "=", value), _too_long(key, [value])
    match = _SET.match(part)
    if match:
        key, operator, inside = match.groups()
        values = [value.strip() for value in inside.split(",")]
        if values == [""]:
            return None, "%s needs at least one value in its parentheses" % operator
        wrong = [value for value in values if not re.match(r"^%s$" % _VALUE, value) or not value]
        if wrong:
            return None, "%r is not a label value (letters, digits, '-', '_', '.', starting and ending " \
                         "with a letter or digit)" % wrong[0]
        return "%s %s (%s)" % (key, operator, ",".join(values)), _too_long(key, values)
    match = _ORDER.match(part)
    if match:
        return "%s%s%s" % match.groups(), _too_long(match.group(1), [])
    return None, "it is none of the forms %s" % FORMS


def label_selector_text(text, option="selector"):
    """``text`` as a canonical label selector; SelectorError naming ``option``, the part that is wrong,
    the rule and the fix otherwise. An empty selector is refused: it would select everything."""
    if not isinstance(text, str) or not text.strip():
        raise SelectorError("%s %r selects nothing in particular (an empty selector matches every object): "
                            "give requirements such as app=volcano-scheduler" % (option, text))
    canonical = []
    for part in _requirements(text):
        written, problem = _one(part)
        if problem:
            raise SelectorError("%s %r is not a label selector the API server accepts: the requirement %r is "
                                "wrong: %s; write requirements separated by commas, each one of %s, with "
                                "Kubernetes label keys and values (e.g. app=volcano-scheduler)"
                                % (option, text, part, problem, FORMS))
        canonical.append(written)
    return ",".join(canonical)
