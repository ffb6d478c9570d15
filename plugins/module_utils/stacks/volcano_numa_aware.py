# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The volcano_numa_aware module's work: switch numa-aware in the scheduler's ConfigMap and make the
scheduler run it, as one transaction.

1. Everything is checked before anything is written: the options (names, weight, the scheduler
   selector's syntax), the ConfigMap and its configuration, and the scheduler as the activation
   will need it (its pods can be listed; its Deployment exists).
2. The new configuration is written with the resourceVersion that was read, so a concurrent edit
   fails the write instead of being lost.
3. The scheduler is made to run it (its own reload, or a restart of its Deployment) and watched
   until it has kept running on it.
4. Any failure after the write puts the previous configuration back, again under the
   resourceVersion the write produced (a change someone else made meanwhile is kept and reported,
   never overwritten), makes the scheduler read it again, and fails naming both what went wrong
   and what became of the previous configuration.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.numa.kube.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.numa.kube.plugins.module_utils.k8s.objects import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.k8s.waiting import deployment_ready, pod_running
from ansible_collections.numa.kube.plugins.module_utils.k8s.selectors import SelectorError, label_selector_text
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_conf import (
    PLUGIN,
    VolcanoError,
    check_weight,
    conf_digest,
    parse,
    render,
    state,
    switch,
)
from ansible_collections.numa.kube.plugins.module_utils.stacks.volcano_nodes import node_report

# How long each scheduler pod must keep running after it loaded the new configuration: it runs a
# scheduling session every second (its default schedule period), and a plugin that fails there ends
# the container, which kubelet reports within a few seconds.
SETTLE_SECONDS = 10
# What the scheduler logs (at -v=2 or more) each time it has read its configuration file:
# "Finished loading scheduler config. Final state: actions=[...], plugins=[name name ...]"
_LOADED = re.compile(r"Finished loading scheduler config\. Final state: actions=\[([^\]]*)\], plugins=\[([^\]]*)\]")
CONF_ANNOTATION = "numa.kube/scheduler-conf"
MERGE_PATCH = "application/merge-patch+json"

# Seconds a failed switch may still spend putting the previous configuration back, beyond the
# task's deadline (which the failed wait may have used up): a few requests, each with its timeouts.
ROLLBACK_SECONDS = 30


def loaded_plugins(log_text):
    """The plugin lists of each configuration load in a scheduler log, oldest first."""
    return [match.group(2).split() for match in _LOADED.finditer(log_text or "")]


def scheduler_selector(value):
    """The scheduler_selector option (a mapping of labels, or selector text) as selector text."""
    try:
        if isinstance(value, dict):
            return k8s_objects.label_selector(value)
        return label_selector_text(value, "scheduler_selector")
    except (KubeApiError, SelectorError) as exc:
        raise VolcanoError("%s; nothing was changed" % exc)


def checked(params):
    """The module's parameters, each checked before anything is read or written; the scheduler
    selector in its canonical text form. VolcanoError naming the first wrong value otherwise."""
    try:
        k8s_objects.check_namespace(params["namespace"])
        k8s_objects.check_name(params["configmap"], "configmap")
        if params["activation"] == "restart":
            k8s_objects.check_name(params["scheduler_deployment"], "scheduler_deployment")
        k8s_objects.check_labels(params.get("node_selector") or {}, "node_selector")
    except KubeApiError as exc:
        raise VolcanoError("%s; nothing was changed" % exc)
    check_weight(params["weight"])
    return dict(params, scheduler_selector=scheduler_selector(params["scheduler_selector"]))


def _configmap(api, params):
    path = "/api/v1/namespaces/%s/configmaps/%s" % (params["namespace"], params["configmap"])
    configmap = api.get(path)
    where = "ConfigMap %s/%s" % (params["namespace"], params["configmap"])
    if configmap is None:
        raise VolcanoError("%s does not exist: is Volcano installed (numa.kube.volcano deploys it), and are "
                           "namespace and configmap the ones your installation uses (Helm names it "
                           "<release>-scheduler-configmap)?" % where)
    data = configmap.get("data") or {}
    if params["config_key"] not in data:
        raise VolcanoError("%s has no key %r (it has %s): set config_key to the scheduler's file name"
                           % (where, params["config_key"], ", ".join(sorted(data)) or "no data"))
    return path, configmap, data[params["config_key"]], "%s key %s" % (where, params["config_key"])


def _deployment_path(params):
    return "/apis/apps/v1/namespaces/%s/deployments/%s" % (params["namespace"], params["scheduler_deployment"])


def _scheduler_pods(api, params):
    answer = api.get("/api/v1/namespaces/%s/pods" % params["namespace"], label_selector=params["scheduler_selector"])
    return [pod for pod in (answer or {}).get("items", []) if pod_running(pod)[0]]


def _ready_to_activate(api, params):
    """Refuse, before the write, a scheduler the activation could not reach."""
    how = params["activation"]
    if how == "reload":
        try:
            _scheduler_pods(api, params)
        except KubeApiError as exc:
            raise VolcanoError("cannot list the scheduler's pods in %s (scheduler_selector %s), which activation "
                               "reload needs: %s; fix scheduler_selector or the credentials' rights (list pods) "
                               "- nothing was changed" % (params["namespace"], params["scheduler_selector"], exc))
    elif how == "restart" and api.get(_deployment_path(params)) is None:
        raise VolcanoError("Deployment %s/%s does not exist, so activation restart cannot roll it: set "
                           "scheduler_deployment to the scheduler's Deployment (Helm names it <release>-scheduler) "
                           "- nothing was changed" % (params["namespace"], params["scheduler_deployment"]))


def _restarts(pod):
    """(restarts of the pod's containers, what ended the last one that ended)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ended = [s["lastState"]["terminated"] for s in statuses if (s.get("lastState") or {}).get("terminated")]
    why = ("%s, exit code %s" % (ended[-1].get("reason"), ended[-1].get("exitCode"))) if ended else None
    return sum(s.get("restartCount", 0) for s in statuses), why


def _wait_reloaded(api, params, pods, enabled, waited_since, wait_for, clock):
    """Wait until every scheduler pod running now has logged a configuration load with numa-aware in
    (or out of) its plugins and then kept running for SETTLE_SECONDS (a plugin that fails in the
    scheduling sessions after the load ends the container): a pod that ran before the change, a load
    since the change; a pod that took the place of one (a crash, a rollout), its last load, since it
    started after the change or reloads like the others. Pods are listed again at each look."""
    namespace = params["namespace"]
    before = set(pod["metadata"]["name"] for pod in pods)
    last, loaded, crashes = {}, {}, {}

    def check():
        running = _scheduler_pods(api, params)
        current = [pod["metadata"]["name"] for pod in running]
        for table in (last, loaded):
            for name in [name for name in table if name not in current]:
                del table[name]
        for pod in running:
            name = pod["metadata"]["name"]
            restarts, why = _restarts(pod)
            if name in loaded and restarts != loaded[name][1]:
                # ended after the load: its log is read again for the load of the fresh start
                crashes[name] = (restarts, why)
                del loaded[name], last[name]
            plugins = last.get(name)
            if isinstance(plugins, list) and (PLUGIN in plugins) == enabled:
                continue
            query = [("sinceSeconds", int(clock() - waited_since) + 2)] if name in before else []
            try:
                text = api.request("GET", "/api/v1/namespaces/%s/pods/%s/log" % (namespace, name),
                                   query_params=query, header_params={"Accept": "*/*"}, text=True)
            except KubeApiError as exc:  # a container waiting to (re)start has no log to give yet
                last[name] = str(exc)
                continue
            loads = loaded_plugins(text or "")
            last[name] = loads[-1] if loads else None
            if loads and (PLUGIN in loads[-1]) == enabled:
                loaded[name] = (clock(), restarts)
        done = bool(current) and all(name in loaded and clock() - loaded[name][0] >= SETTLE_SECONDS
                                     for name in current)
        return done, dict((name, last.get(name)) for name in current)

    done, seen, waited = wait_for(check, params["wait_timeout"], interval=3.0)
    if not done:
        crashed = ["%s restarted %d times, the last after loading the new configuration (%s): see kubectl -n %s "
                   "logs %s --previous" % (name, crashes[name][0], crashes[name][1], namespace, name)
                   for name in sorted(seen) if name in crashes]
        if crashed:
            raise VolcanoError("the scheduler does not keep running the new configuration: %s" % "; ".join(crashed))
        stale = ["%s (%s)" % (name, _how_far(plugins, loaded.get(name), clock))
                 for name, plugins in sorted(seen.items())] or \
            ["no scheduler pod runs (selector %s)" % params["scheduler_selector"]]
        raise VolcanoError("the scheduler did not take in the new configuration within %ss: %s. It reloads its "
                           "file when kubelet refreshes the ConfigMap volume and logs the load at -v=2 or more; "
                           "a subPath mount never refreshes and a lower -v hides the load: use activation: "
                           "restart there" % (params["wait_timeout"], "; ".join(stale)))
    return waited


def _how_far(plugins, loaded, clock):
    """How far a scheduler pod got with the new configuration when the wait ended."""
    if loaded:
        return "loaded it %.0f s before the deadline, but had not kept running on it for %d s yet" % (
            clock() - loaded[0], SETTLE_SECONDS)
    if isinstance(plugins, list):
        return "last load: plugins=%s" % " ".join(plugins)
    return plugins or "no configuration load logged since the change"


def _roll(api, params, stamp):
    """Roll the scheduler's Deployment (as kubectl rollout restart does)."""
    patch = {"spec": {"template": {"metadata": {"annotations": {CONF_ANNOTATION: stamp}}}}}
    api.request("PATCH", _deployment_path(params), body=patch, content_type=MERGE_PATCH)


def _restart(api, params, stamp, wait_for):
    """Roll the scheduler's Deployment and wait until only pods of the new revision run, all available."""
    _roll(api, params, stamp)
    done, status, waited = wait_for(lambda: deployment_ready(api.get(_deployment_path(params))),
                                    params["wait_timeout"], interval=3.0)
    if not done:
        raise VolcanoError("Deployment %s/%s did not finish its restart within %ss: %s"
                           % (params["namespace"], params["scheduler_deployment"], params["wait_timeout"], status))
    return waited


def _mark(api, params, pods, digest):
    """Annotate each pod: a changed pod makes kubelet sync it, which refreshes its ConfigMap volume at
    once instead of at its next periodic sync (up to a minute or more later)."""
    for pod in pods:
        try:
            api.request("PATCH", "/api/v1/namespaces/%s/pods/%s" % (params["namespace"], pod["metadata"]["name"]),
                        body={"metadata": {"annotations": {CONF_ANNOTATION: digest}}}, content_type=MERGE_PATCH)
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            # gone meanwhile: the pod that replaces it starts with the ConfigMap as it is now


def _activate(api, params, enabled, digest, started, wait_for, clock):
    how = params["activation"]
    if how == "none":
        return {"how": how}
    if how == "restart":
        return {"how": how, "seconds": round(_restart(api, params, digest, wait_for), 1)}
    pods = _scheduler_pods(api, params)
    if not pods:
        return {"how": how, "pods": [], "note": "no scheduler pod runs (selector %s): it reads the new "
                                                "configuration when it starts" % params["scheduler_selector"]}
    _mark(api, params, pods, digest)
    if not params["wait"]:
        return {"how": how, "pods": [p["metadata"]["name"] for p in pods]}
    waited = _wait_reloaded(api, params, pods, enabled, started, wait_for, clock)
    return {"how": how, "pods": [p["metadata"]["name"] for p in pods], "seconds": round(waited, 1)}


def _write(api, path, where, key, configmap, text, new_text):
    """Write ``new_text`` under the resourceVersion read; the resourceVersion the write produced."""
    body = {"metadata": {"resourceVersion": configmap["metadata"]["resourceVersion"]}, "data": {key: new_text}}
    try:
        return api.request("PATCH", path, body=body, content_type=MERGE_PATCH)["metadata"]["resourceVersion"]
    except KubeApiError as exc:
        if exc.status == 409:
            raise VolcanoError("%s changed after this task read it (resourceVersion %s): someone else is editing it; "
                               "nothing was changed: run the task again" % (where, configmap["metadata"]
                                                                            ["resourceVersion"]))
        # the answer may be lost while the write went through: what the ConfigMap holds tells
        current = api.get(path)
        if current is not None and (current.get("data") or {}).get(key) == new_text:
            return current["metadata"]["resourceVersion"]
        if current is not None and (current.get("data") or {}).get(key) == text:
            raise VolcanoError("writing %s failed: %s; nothing was changed" % (where, exc))
        raise


def _put_back(api, params, path, where, text, version):
    """Put ``text`` back under ``version`` (what the failed switch's write produced) and make the
    scheduler read it again; what became of it as {restored, message, ...}."""
    key = params["config_key"]
    body = {"metadata": {"resourceVersion": version}, "data": {key: text}}
    try:
        answer = api.request("PATCH", path, body=body, content_type=MERGE_PATCH)
    except KubeApiError as exc:
        if exc.status == 409:
            try:
                now = ((api.get(path) or {}).get("metadata") or {}).get("resourceVersion", "unknown")
            except KubeApiError:
                now = "unknown"
            return {"restored": False, "conflict": True, "previous": text,
                    "message": "the previous configuration was NOT put back: someone else changed %s after this "
                               "task wrote it (resourceVersion %s, now %s), and their change is kept; compare it "
                               "with the previous configuration (rollback.previous in this result) and put that "
                               "back by hand if theirs is not meant to stay" % (where, version, now)}
        return {"restored": False, "conflict": False, "previous": text,
                "message": "the previous configuration could NOT be put back (%s): %s still holds the new one; put "
                           "rollback.previous of this result back by hand" % (exc, where)}
    restored = {"restored": True, "resource_version": answer["metadata"]["resourceVersion"],
                "message": "the previous configuration was put back in %s (resourceVersion %s)"
                           % (where, answer["metadata"]["resourceVersion"])}
    how, digest = params["activation"], conf_digest(text)
    try:
        if how == "reload":
            pods = [pod["metadata"]["name"] for pod in _scheduler_pods(api, params)]
            _mark(api, params, [{"metadata": {"name": name}} for name in pods], digest)
            restored["message"] += (" and the scheduler reads it again: kubelet refreshes the volume of the marked "
                                    "pods %s, and the scheduler reloads it (not waited for)" % ", ".join(pods)
                                    if pods else
                                    "; no scheduler pod runs: it reads it when it starts")
        elif how == "restart":
            _roll(api, params, digest)
            restored["message"] += (" and Deployment %s/%s was restarted again to read it (not waited for)"
                                    % (params["namespace"], params["scheduler_deployment"]))
    except KubeApiError as exc:
        restored["message"] += (", but making the scheduler read it again failed (%s): run kubectl -n %s rollout "
                                "restart deployment/%s" % (exc, params["namespace"], params["scheduler_deployment"]))
    return restored


def _switch(api, params, path, where, configmap, text, new_text, enabled, wait_for, clock):
    """Write the new configuration and activate it; on any failure after the write, put the old one
    back and fail reporting both."""
    started = clock()
    version = _write(api, path, where, params["config_key"], configmap, text, new_text)
    try:
        return _activate(api, params, enabled, conf_digest(new_text), started, wait_for, clock)
    except Exception as exc:  # pylint: disable=broad-except  # whatever failed, the old configuration goes back
        failure = str(exc) if isinstance(exc, (VolcanoError, KubeApiError)) else "%s: %s" % (type(exc).__name__, exc)
    # the put-back gets time of its own: the failure may have used the task's deadline up
    api.extend_deadline(ROLLBACK_SECONDS)
    rollback = _put_back(api, params, path, where, text, version)
    raise VolcanoError([failure, rollback.pop("message")], details={"rollback": rollback})


def run(api, params, check_mode, wait_for, clock):
    """The module's work: query, or switch numa-aware and make the scheduler run it."""
    params = checked(params)
    path, configmap, text, where = _configmap(api, params)
    conf = parse(text, where)
    before = state(conf)
    result = {"changed": False, "status": before["status"], "weight": before["weight"], "before": before,
              "diff": {"before": text, "after": text, "before_header": where, "after_header": where}}
    if params["state"] != "query":
        enabled = params["state"] == "enabled"
        new = switch(conf, enabled, params["weight"] if enabled else None)
        if new != conf:
            new_text = render(new)
            after = state(new)
            _ready_to_activate(api, params)
            result.update(changed=True, status=after["status"], weight=after["weight"])
            result["diff"]["after"] = new_text
            if not check_mode:
                result["activation"] = _switch(api, params, path, where, configmap, text, new_text, enabled,
                                               wait_for, clock)
    try:
        result["nodes"] = node_report(api, params)
    except KubeApiError as exc:  # a report, after the change is done: it must not fail the switch
        result["nodes"] = {}
        result["node_report_error"] = "the nodes could not be reported: %s" % exc
    return result
