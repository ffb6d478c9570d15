# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""numa-aware's switch in volcano-scheduler.conf, edited as data."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.stacks import volcano_conf
from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError

# Volcano v1.14's shipped volcano-scheduler.conf (installer/helm/chart/volcano/config)
SHIPPED = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


def names(conf):
    return [[p["name"] for p in tier["plugins"]] for tier in conf["tiers"]]


def test_enable_adds_the_plugin_to_the_tier_of_predicates_and_keeps_the_rest():
    conf = volcano_conf.parse(SHIPPED)
    assert volcano_conf.state(conf) == {"status": "close", "weight": None, "tier": None}
    enabled = volcano_conf.switch(conf, True, weight=10)
    assert names(enabled) == [names(conf)[0], names(conf)[1] + ["numa-aware"]]
    assert enabled["tiers"][1]["plugins"][-1] == {"name": "numa-aware", "arguments": {"weight": 10}}
    assert enabled["tiers"][0]["plugins"][1] == {"name": "gang", "enablePreemptable": False}
    assert enabled["actions"] == "enqueue, allocate, backfill"
    assert volcano_conf.state(enabled) == {"status": "open", "weight": 10, "tier": 1}
    assert names(conf)[1][-1] == "binpack", "the input is left alone"
    # a round trip through the text keeps the data
    assert volcano_conf.parse(volcano_conf.render(enabled)) == enabled


def test_enable_without_a_neighbour_tier_goes_to_the_last_tier_or_a_new_one():
    conf = volcano_conf.parse("tiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: drf\n")
    assert names(volcano_conf.switch(conf, True)) == [["gang"], ["drf", "numa-aware"]]
    assert volcano_conf.switch({}, True) == {"tiers": [{"plugins": [{"name": "numa-aware",
                                                                     "arguments": {"weight": 1}}]}]}


def test_enable_again_is_no_change_and_a_new_weight_keeps_other_arguments():
    conf = volcano_conf.switch(volcano_conf.parse(SHIPPED), True, weight=10)
    assert volcano_conf.switch(conf, True, weight=10) == conf
    assert volcano_conf.switch(conf, True) == conf, "no weight asked: the existing one stays"
    conf["tiers"][1]["plugins"][-1]["arguments"]["extra"] = "x"
    reweighted = volcano_conf.switch(conf, True, weight=3)
    assert reweighted["tiers"][1]["plugins"][-1]["arguments"] == {"weight": 3, "extra": "x"}


def test_disable_removes_every_entry_and_nothing_else():
    conf = volcano_conf.parse(SHIPPED.replace("  - name: conformance\n",
                                              "  - name: conformance\n  - name: numa-aware\n"))
    conf = volcano_conf.switch(conf, True, weight=2)
    disabled = volcano_conf.switch(conf, False)
    assert volcano_conf.state(disabled)["status"] == "close"
    assert names(disabled) == names(volcano_conf.parse(SHIPPED))
    assert volcano_conf.switch(disabled, False) == disabled


@pytest.mark.parametrize("text,words", [
    ("actions: [unclosed\n", "is not valid YAML"),
    ("- just\n- a list\n", "not a mapping"),
    ("tiers: {plugins: x}\n", "tiers must be a list"),
    ("tiers:\n- plugins:\n  - weight: 3\n", "every plugin needs a name"),
])
def test_a_configuration_that_cannot_be_parsed_is_refused_with_the_reason(text, words):
    with pytest.raises(volcano_conf.VolcanoError) as caught:
        volcano_conf.parse(text)
    assert words in str(caught.value) and "nothing was changed" in str(caught.value)


@pytest.mark.parametrize("weight", [1, 10, 100])
def test_weights_volcano_reads_and_numa_kube_accepts(weight):
    assert volcano_conf.check_weight(weight) == weight


@pytest.mark.parametrize("weight", [0, -3, 101, 10 ** 30, 1.5, "10", True, None])
def test_a_weight_out_of_bounds_or_not_whole_is_refused_naming_it_and_the_range(weight):
    with pytest.raises(volcano_conf.VolcanoError) as caught:
        volcano_conf.check_weight(weight)
    assert str(caught.value) == (
        "weight must be a whole number from 1 to 100 (Volcano multiplies numa-aware's 0-100 node score by it; "
        "above 100 it alone decides every placement), got %r: set weight between 1 and 100" % (weight,))


def test_volcano_errors_are_problems_errors_and_carry_details():
    error = volcano_conf.VolcanoError(["one", "two"], details={"rollback": {"restored": True}})
    assert isinstance(error, ProblemsError) and str(error) == "one; two" and error.problems == ["one", "two"]
    assert error.details == {"rollback": {"restored": True}}
    assert volcano_conf.VolcanoError("alone").details == {}
