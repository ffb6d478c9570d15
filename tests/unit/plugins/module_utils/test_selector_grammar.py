# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Label selectors given as text: what the API server would accept, refused before any request otherwise."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.numa.kube.plugins.module_utils.errors import ProblemsError
from ansible_collections.numa.kube.plugins.module_utils.k8s.selectors import SelectorError, label_selector_text


@pytest.mark.parametrize("text,canonical", [
    ("app=volcano-scheduler", "app=volcano-scheduler"),
    ("app==volcano-scheduler", "app=volcano-scheduler"),
    (" app = volcano-scheduler , tier!=x ", "app=volcano-scheduler,tier!=x"),
    ("app.kubernetes.io/name=volcano,release=", "app.kubernetes.io/name=volcano,release="),
    ("app in (volcano-scheduler, vc-scheduler),env notin (dev)",
     "app in (volcano-scheduler,vc-scheduler),env notin (dev)"),
    ("app,!canary", "app,!canary"),
    ("! canary", "!canary"),
    ("replicas>1,rank<-2", "replicas>1,rank<-2"),
    ("A_b.c=D-e_F.g", "A_b.c=D-e_F.g"),
])
def test_selectors_the_api_server_accepts_are_written_in_one_form(text, canonical):
    assert label_selector_text(text) == canonical


@pytest.mark.parametrize("text,part,why", [
    ("app=volcano scheduler", "app=volcano scheduler", "none of the forms"),
    ("app=volcano-scheduler,", "", "none of the forms"),
    ("app=a,,b=c", "", "none of the forms"),
    ("app in ()", "app in ()", "in needs at least one value"),
    ("app in (a,,b)", "app in (a,,b)", "'' is not a label value"),
    ("app in (a b)", "app in (a b)", "'a b' is not a label value"),
    ("app in (a", "app in (a", "none of the forms"),
    ("app=-x", "app=-x", "none of the forms"),
    ("-app=x", "-app=x", "none of the forms"),
    ("Example.com/app=x", "Example.com/app=x", "none of the forms"),
    ("app>x", "app>x", "none of the forms"),
    ("app=%s" % ("v" * 64), "app=%s" % ("v" * 64), "longer than 63 characters"),
    ("%s=x" % ("k" * 64), "%s=x" % ("k" * 64), "longer than a label key may be"),
    ("%s/k=x" % ".".join(["p" * 60] * 5), "%s/k=x" % ".".join(["p" * 60] * 5), "longer than a label key may be"),
    ("app in (%s)" % ("v" * 64), "app in (%s)" % ("v" * 64), "longer than 63 characters"),
])
def test_a_selector_the_api_server_would_refuse_is_refused_naming_the_requirement_and_the_forms(text, part, why):
    with pytest.raises(SelectorError) as caught:
        label_selector_text(text, "scheduler_selector")
    message = str(caught.value)
    assert message.startswith("scheduler_selector %r is not a label selector the API server accepts: the "
                              "requirement %r is wrong: " % (text, part)), message
    assert why in message
    assert message.endswith("each one of key=value, key!=value, key in (v1,v2), key notin (v1,v2), key, !key, "
                            "key>N or key<N, with Kubernetes label keys and values (e.g. app=volcano-scheduler)")
    assert isinstance(caught.value, ProblemsError)


@pytest.mark.parametrize("text", ["", "   ", None, 3])
def test_an_empty_selector_is_refused_since_it_selects_everything(text):
    with pytest.raises(SelectorError) as caught:
        label_selector_text(text, "scheduler_selector")
    assert str(caught.value) == ("scheduler_selector %r selects nothing in particular (an empty selector matches "
                                 "every object): give requirements such as app=volcano-scheduler" % (text,))
