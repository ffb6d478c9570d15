# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout role's protocol is what its argument specs say: every entry point a caller names
exists and is declared, callers pass only declared inputs, nobody outside the role reads its
private variables, and the facts it sets are the documented ones."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import jinja2
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "rollout")
ENTRY_POINTS = ("main", "recover", "begin", "step", "healthy", "end", "labels", "rollback")
PUBLIC_FACTS = ("rollout_record", "rollout_open", "rollout_drained", "rollout_kubelet_healthy", "rollout_recovered",
                "rollout_waits")
BEGIN_INPUTS = ("rollout_change_files", "rollout_change_services", "rollout_change_disruptive", "rollout_change_reason")


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


SPECS = load(os.path.join(ROLE, "meta", "argument_specs.yml"))["argument_specs"]
DEFAULTS = load(os.path.join(ROLE, "defaults", "main.yml"))


def tasks_of(data):
    """Every task in a task list, blocks, rescues and always sections included."""
    for task in data or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from tasks_of(task.get(section))


def callers():
    """(file, task) for every task outside the rollout role that includes or imports it."""
    files = [p for p in glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml")) if not p.startswith(ROLE)]
    files += glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    found = []
    for path in files:
        data = load(path)
        plays = data if path.startswith(os.path.join(ROOT, "playbooks")) else [{"tasks": data}]
        for play in plays or []:
            if not isinstance(play, dict):
                continue
            for section in ("pre_tasks", "tasks", "post_tasks"):
                for task in tasks_of(play.get(section)):
                    for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                        if (task.get(action) or {}).get("name") == "numa.kube.rollout":
                            found.append((os.path.relpath(path, ROOT), task, task[action]))
    return found


def test_every_entry_point_is_declared_and_has_its_tasks_file():
    assert sorted(SPECS) == sorted(ENTRY_POINTS)
    for name in ENTRY_POINTS:
        assert os.path.isfile(os.path.join(ROLE, "tasks", name + ".yml")), name
        assert SPECS[name].get("short_description") and SPECS[name].get("description"), name


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_validates_every_role_variable(entry):
    """ansible-core checks only what the entry point declares: each one declares all of the role's
    variables (with the same defaults), so a wrong type fails before the first task of any of them."""
    options = SPECS[entry]["options"]
    for name, value in DEFAULTS.items():
        assert name in options, "%s does not declare %s" % (entry, name)
        if not (isinstance(value, str) and "{{" in value):
            assert options[name].get("default") == value, (entry, name)


def test_begin_declares_its_inputs():
    options = SPECS["begin"]["options"]
    for name in BEGIN_INPUTS:
        assert name in options and options[name]["description"], name
    assert options["rollout_change_files"]["type"] == "list" and options["rollout_change_files"]["elements"] == "path"
    assert options["rollout_change_reason"].get("required") is True
    assert options["rollout_change_disruptive"]["default"] is True
    assert "rollout_kubelet_healthy" in SPECS["end"]["options"]
    assert SPECS["step"]["options"]["rollout_step"].get("required") is True


def test_callers_name_declared_entry_points_and_pass_only_declared_inputs():
    found = callers()
    used = set(args.get("tasks_from", "main") for _path, _task, args in found)
    assert {"recover", "begin", "end", "rollback"} <= used, used
    for path, task, args in found:
        entry = args.get("tasks_from", "main")
        assert entry in SPECS, "%s: %r is no entry point of numa.kube.rollout" % (path, entry)
        passed = set(task.get("vars") or {}) | set(args.get("vars") or {})
        unknown = [name for name in passed if name.startswith("rollout_") and name not in SPECS[entry]["options"]]
        assert not unknown, "%s passes %s to %s, which does not declare them" % (path, unknown, entry)
        if entry == "begin":
            assert "rollout_change_reason" in passed, "%s opens the envelope without a reason" % path


def test_nobody_outside_the_role_uses_its_private_variables():
    private = re.compile(r"\b_{1,2}rollout_\w+")
    files = [p for p in glob.glob(os.path.join(ROOT, "roles", "*", "**", "*.yml"), recursive=True)
             if not p.startswith(ROLE)]
    files += glob.glob(os.path.join(ROOT, "playbooks", "*.yml"))
    offenders = []
    for path in files:
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                if private.search(line.split("#", 1)[0]):
                    offenders.append("%s:%d: %s" % (os.path.relpath(path, ROOT), number, line.strip()))
    assert not offenders, "\n".join(offenders)


def test_the_facts_the_role_sets_are_the_documented_ones():
    set_here = set()
    for path in glob.glob(os.path.join(ROLE, "tasks", "*.yml")):
        for task in tasks_of(load(path)):
            set_here.update(task.get("ansible.builtin.set_fact") or {})
    public = set(name for name in set_here if not name.startswith("_"))
    assert public == set(PUBLIC_FACTS), public
    description = " ".join(SPECS["main"]["description"])
    with open(os.path.join(ROLE, "README.md")) as handle:
        readme = handle.read()
    for name in PUBLIC_FACTS:
        assert "V(%s)" % name in description, "argument_specs main does not document the fact %s" % name
        assert "`%s`" % name in readme, "README.md does not document the fact %s" % name


def test_every_write_to_the_record_names_this_run():
    """Each rollout_state call that changes the record passes the run's owner and lease."""
    calls = 0
    for path in glob.glob(os.path.join(ROLE, "tasks", "*.yml")):
        for task in tasks_of(load(path)):
            args = task.get("numa.kube.rollout_state")
            if args is None or args.get("state") == "query":
                continue
            calls += 1
            assert args.get("owner") == "{{ _rollout_owner }}", (path, task["name"])
            assert args.get("lease") == "{{ rollout_owner_lease }}", (path, task["name"])
    assert calls >= 5  # begin, step (take over), step (reached), restore, finish


def test_the_run_identity_is_asked_for_only_until_it_is_pinned():
    """lookup('numa.kube.rollout_owner') answers in the worker of each task: asked in every template
    it could name another run each time. It is asked only by the set_fact that pins it (recover,
    begin, rollback: whichever runs first) and by _rollout_owner before the pin; every write names
    _rollout_owner (test above)."""
    pins = []
    for path in glob.glob(os.path.join(ROLE, "tasks", "*.yml")):
        for task in tasks_of(load(path)):
            text = yaml.safe_dump(task["block"] if "block" in task else task)
            if "numa.kube.rollout_owner'" not in text:
                continue
            pin = task.get("ansible.builtin.set_fact") or {}
            assert list(pin) == ["__rollout_me"] and task.get("when") == "__rollout_me is not defined", \
                "%s: %s asks the lookup outside the pin" % (os.path.basename(path), task["name"])
            pins.append(os.path.basename(path))
    assert sorted(pins) == ["begin.yml", "recover.yml", "rollback.yml"], pins
    owner = load(os.path.join(ROLE, "vars", "main.yml"))["_rollout_owner"]
    assert owner.startswith("{{ __rollout_me if __rollout_me is defined else "), owner
    # recover pins before anything else, so the run that opens nothing still has one identity
    assert "__rollout_me" in (load(os.path.join(ROLE, "tasks", "recover.yml"))[0].get("ansible.builtin.set_fact") or {})


def test_the_drain_is_recorded_in_the_opening_write_and_only_that_step_uncordons():
    """k8s_drain cordons first: the write that opens the change records the drain's step whenever
    begin drains (so the record has it however the drain ends), and release uncordons only a record
    that has it (or the step an earlier build recorded after its drain)."""
    variables = load(os.path.join(ROLE, "vars", "main.yml"))
    assert variables["_rollout_cordon_step"] == "cordoning and draining"
    assert variables["_rollout_cordon_steps"] == ["{{ _rollout_cordon_step }}", "cordoned and drained"]
    tasks = load(os.path.join(ROLE, "tasks", "begin.yml"))
    opening = [task for task in tasks if (task.get("numa.kube.rollout_state") or {}).get("state") == "begin"]
    assert len(opening) == 1
    step = opening[0]["numa.kube.rollout_state"]["step"]
    assert step == "{{ _rollout_cordon_step if _rollout_drain_now | bool else omit }}"
    drains = [task for task in tasks if any("kubernetes.core.k8s_drain" in inner for inner in task.get("block") or [])]
    assert len(drains) == 1 and drains[0]["when"] == "_rollout_drain_now | bool"
    assert tasks.index(opening[0]) < tasks.index(drains[0])
    # a long drain is followed by a heartbeat, failed or not
    always = drains[0].get("always") or []
    assert [t.get("ansible.builtin.include_tasks") for t in always] == ["step.yml"], always
    assert "rollout_owner_lease | float / 4" in always[0]["when"]
    uncordon = [task for task in tasks_of(load(os.path.join(ROLE, "tasks", "release.yml")))
                if (task.get("kubernetes.core.k8s_drain") or {}).get("state") == "uncordon"]
    assert len(uncordon) == 1
    assert "_rollout_record.steps | default([]) | intersect(_rollout_cordon_steps) | length > 0" in uncordon[0]["when"]
    assert "_rollout_record.unschedulable is sameas false" in uncordon[0]["when"], "the operator's cordon stays"


def test_the_kernel_reboot_is_followed_by_a_heartbeat():
    tasks = load(os.path.join(ROOT, "roles", "kernel_args", "tasks", "reboot.yml"))
    reboot = [i for i, task in enumerate(tasks) if "ansible.builtin.reboot" in task]
    assert len(reboot) == 1
    after = tasks[reboot[0] + 1]
    assert after.get("ansible.builtin.include_role") == {"name": "numa.kube.rollout", "tasks_from": "step"}, after
    assert after["vars"]["rollout_step"]


def test_the_lease_outlasts_the_longest_wait_between_two_heartbeats():
    """Heartbeats: begin, the step after the drain, the step after a reboot, restore, finish. The
    longest gap is one of the waits between them; the default lease is at least twice the longest."""
    kernel = load(os.path.join(ROOT, "roles", "kernel_args", "defaults", "main.yml"))
    waits = {
        "reboot": kernel["kernel_args_reboot_timeout"],
        "drain": DEFAULTS["rollout_drain_timeout"],
        "health and Ready on a control-plane node": DEFAULTS["rollout_health_timeout"]
        + DEFAULTS["rollout_health_settle"] + 2 * DEFAULTS["rollout_ready_timeout"],
    }
    assert DEFAULTS["rollout_owner_lease"] == 7200
    for name, seconds in waits.items():
        assert DEFAULTS["rollout_owner_lease"] >= 2 * seconds, (name, seconds)
    described = " ".join(SPECS["main"]["options"]["rollout_owner_lease"]["description"])
    assert "reboot" in described and "1800 s" in described and "drain" in described, described


def test_the_kernel_failure_says_what_the_rollback_did():
    """Like the kubelet and containerd_nri roles: "put back" only when the rollback put a change back
    (rollout_recovered), otherwise that nothing was changed (begin refused, a drain that left pods)."""
    apply = load(os.path.join(ROOT, "roles", "kernel_args", "tasks", "apply.yml"))
    fail = [task for task in apply[0]["rescue"] if "ansible.builtin.fail" in task][0]
    environment = jinja2.Environment()
    environment.tests["skipped"] = lambda result: bool(result.get("skipped"))
    template = environment.from_string(fail["ansible.builtin.fail"]["msg"])
    facts = {"inventory_hostname": "numa-1", "ansible_failed_result": {"msg": "the drain left pods"},
             "__kernel_args_plan": {"files": ["/etc/default/grub"], "method": "grub_default"},
             "__kernel_args_grub_cfg": "/boot/grub/grub.cfg"}
    undone = template.render(facts, rollout_recovered=True)
    assert undone.startswith("numa.kube put the boot configuration of numa-1 back as it was "
                             "(/etc/default/grub, /boot/grub/grub.cfg). What failed: the drain left pods"), undone
    rebooted = template.render(facts, rollout_recovered=True, __kernel_args_now={"reboot_required": False})
    assert "runs the new command line until its next reboot" in rebooted, rebooted
    untouched = template.render(facts, rollout_recovered=False)
    assert untouched.startswith("numa.kube stopped before it changed anything on numa-1. What failed: the drain"), \
        untouched
    assert "back as it was" not in untouched
