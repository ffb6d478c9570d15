# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus' text exposition format 0.0.4: metric families and their rendering, standard library only.

A sample's labels are rendered to text when the sample is added, so a caller that repeats the same
labels on many samples (a container's namespace, pod and container) escapes them once with
``label_text`` and adds the result with ``Family.add_text``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def escape(value):
    """A label value as the text format writes it: backslash, newline and double quote escaped."""
    text = str(value)
    if "\\" in text or "\n" in text or '"' in text:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return text


def label_text(labels):
    """``a="1",b="2"`` for the label pairs ``(("a", 1), ("b", 2))``, values escaped."""
    return ",".join('%s="%s"' % (key, escape(value)) for key, value in labels)


def number(value):
    """A sample value: an integer without a decimal point, a fraction as Python writes it."""
    if isinstance(value, float) and value != int(value):
        return repr(value)
    return str(int(value))


class Family(object):
    """One metric family: name, type, help and samples (rendered labels, value)."""

    def __init__(self, name, kind, documentation):
        self.name = name
        self.kind = kind
        self.documentation = documentation
        self.samples = []

    def add(self, labels, value):
        """Add a sample with the label pairs ``labels``."""
        self.samples.append((label_text(labels), value))
        return self

    def add_text(self, labels, value):
        """Add a sample whose labels are already rendered (``label_text``)."""
        self.samples.append((labels, value))
        return self

    def lines(self):
        # text format 0.0.4 names a counter's family by its sample name, _total included
        name = self.name + ("_total" if self.kind == "counter" and not self.name.endswith("_total") else "")
        yield "# HELP %s %s" % (name, self.documentation)
        yield "# TYPE %s %s" % (name, self.kind)
        with_labels = name + "{"
        for labels, value in self.samples:
            # integers, the common case, without number()'s checks
            text = str(value) if isinstance(value, int) and not isinstance(value, bool) else number(value)
            if labels:
                yield with_labels + labels + "} " + text
            else:
                yield name + " " + text


def render(families):
    """The Prometheus text exposition (format 0.0.4) of the families, in order."""
    lines = []
    for family in families:
        lines.extend(family.lines())
    return "\n".join(lines) + "\n"
