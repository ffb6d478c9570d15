# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Volcano's numa-aware scheduling: its switch in volcano-scheduler.conf, edited as data, and which
nodes its predicate could ever pass.

The scheduler configuration is YAML: ``actions`` and ``tiers``, each tier a list of ``plugins``
(``name`` and optional ``arguments`` and flags). numa-aware is one plugin there, with a ``weight``
argument. Switching it edits the parsed document: every other plugin, argument, tier and top-level
key stays as it was (comments do not survive a YAML round trip; the values do).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import hashlib
import re

from ansible_collections.numa.kube.plugins.module_utils.kube_api import KubeApiError
from ansible_collections.numa.kube.plugins.module_utils.quantity import Quantity, QuantityError
from ansible_collections.numa.kube.plugins.module_utils.topology import format_cpu_list

try:
    import yaml
    HAS_YAML = True
except ImportError:  # ansible-core depends on PyYAML; reported by the module all the same
    HAS_YAML = False

PLUGIN = "numa-aware"
# How long each scheduler pod must keep running after it loaded the new configuration: it runs a
# scheduling session every second (its default schedule period), and a plugin that fails there ends
# the container, which kubelet reports within a few seconds.
SETTLE_SECONDS = 10
# the tier the Volcano documentation puts numa-aware in: the one with predicates and nodeorder
NEIGHBOURS = ("predicates", "nodeorder", "binpack", "proportion")
POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
KUBELET_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
NUMATOPOLOGY_API = "nodeinfo.volcano.sh/v1alpha1"
# annotations the numa.kube publisher adds to a Numatopology (Volcano reads only the spec)
RESERVED_CPUS_ANNOTATION = "numa.kube/reserved-cpus"
STARTED_ANNOTATION = "numa.kube/publisher-started"


class VolcanoError(Exception):
    """The configuration or cluster cannot be handled as asked; the message says why and what to do."""


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


def node_problems(node, topology, pod_policy=None):
    """Why Volcano's numa-aware predicate would never pass ``node`` for a pod asking ``pod_policy``.

    ``topology`` is the node's Numatopology object (None when there is none). With a pod policy the
    predicate needs the object, the static CPU Manager, the same Topology Manager policy and free CPUs
    in it; without one (every policy the plugin knows), it names what the node could serve.
    """
    if topology is None:
        return ["%s: no Numatopology object, so numa-aware rejects every pod that asks for a NUMA policy: run "
                "the numa.kube node agent's topology publisher (or volcano-sh/resource-exporter) on it" % node]
    spec = topology.get("spec") or {}
    policies = spec.get("policies") or {}
    cpu = policies.get("CPUManagerPolicy") or "none"
    topology_policy = policies.get("TopologyManagerPolicy") or "none"
    problems = []
    if cpu != "static":
        problems.append("%s: kubelet runs cpuManagerPolicy %r, numa-aware passes only nodes with the static CPU "
                        "Manager: set kubelet_cpu_manager_policy static (numa.kube.kubelet)" % (node, cpu))
    if topology_policy == "none":
        problems.append("%s: kubelet runs topologyManagerPolicy none, which no pod's %s can match: set "
                        "kubelet_topology_manager_policy (numa.kube.kubelet)" % (node, POLICY_ANNOTATION))
    elif pod_policy and pod_policy != topology_policy:
        problems.append("%s: kubelet runs topologyManagerPolicy %r, pods annotated %s=%s never pass it "
                        "(the predicate wants them equal)" % (node, topology_policy, POLICY_ANNOTATION, pod_policy))
    cpus = ((spec.get("numares") or {}).get("cpu") or {}).get("allocatable")
    if not cpus:
        problems.append("%s: its Numatopology has no allocatable CPUs (numares.cpu.allocatable), so no pod with "
                        "a NUMA policy fits" % node)
    return problems


def reserved_memory(kubelet_config):
    """kubeReserved + systemReserved memory as kubelet's configz shows them ("" when none)."""
    total = None
    for field in ("kubeReserved", "systemReserved"):
        text = (kubelet_config.get(field) or {}).get("memory")
        if text is None:
            continue
        try:
            value = Quantity.parse(text)
        except QuantityError:
            continue  # kubelet refuses such a config at start; nothing sensible to publish
        total = value if total is None else total.add(value)
    return "" if total is None or total.is_zero() else str(total)


def numatopology_spec(cpus, kubelet_config, allocatable_cpus, assigned_cpus):
    """The spec of a node's Numatopology as Volcano's numa-aware plugin reads it.

    ``cpus``: the node's online CPUs as topology facts give them (``id``, ``numa_node``, ``socket``,
    ``core``); ``kubelet_config``: the configuration kubelet runs (its ``/configz``);
    ``allocatable_cpus``: PodResources' GetAllocatableResources CPUs (every CPU minus kubelet's
    reserved ones under the static policy, none under ``none``); ``assigned_cpus``: the CPUs
    PodResources' List reports as exclusively assigned to containers.

    ``numares.cpu.allocatable`` is the free CPU set the plugin picks from: kubelet's own allocatable
    set minus what is assigned. kubelet has already taken its reserved CPUs out of it, so
    ``resReserved`` carries no ``cpu``: given one, the plugin would take that many CPUs off again,
    chosen by its own rule, which is not kubelet's when ``reservedSystemCPUs`` names other CPUs.
    """
    online = sorted(cpu["id"] for cpu in cpus)
    cpu_policy = kubelet_config.get("cpuManagerPolicy") or "none"
    topology_policy = kubelet_config.get("topologyManagerPolicy") or "none"
    if cpu_policy == "static":
        free = set(allocatable_cpus) - set(assigned_cpus)
    else:
        # without the static policy every container shares every CPU; the plugin never places
        # a NUMA-annotated pod here anyway (it wants static), the set is for people reading it
        free = set(online)
    spec = {
        "policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": topology_policy},
        "numares": {"cpu": {"allocatable": format_cpu_list(sorted(c for c in free if c in set(online))),
                            "capacity": len(online)}},
        "cpuDetail": dict((str(cpu["id"]), {"numa": cpu.get("numa_node") or 0, "socket": cpu.get("socket") or 0,
                                            "core": cpu.get("core") or 0}) for cpu in cpus),
    }
    memory = reserved_memory(kubelet_config)
    if memory:
        spec["resReserved"] = {"memory": memory}
    return spec


def reserved_cpus(cpus, kubelet_config, allocatable_cpus):
    """The CPUs kubelet keeps for itself and the system (static policy only), as a CPU list."""
    if (kubelet_config.get("cpuManagerPolicy") or "none") != "static" or not allocatable_cpus:
        return ""
    return format_cpu_list(sorted(set(cpu["id"] for cpu in cpus) - set(allocatable_cpus)))


# What the scheduler logs (at -v=2 or more) each time it has read its configuration file:
# "Finished loading scheduler config. Final state: actions=[...], plugins=[name name ...]"
_LOADED = re.compile(r"Finished loading scheduler config\. Final state: actions=\[([^\]]*)\], plugins=\[([^\]]*)\]")
CONF_ANNOTATION = "numa.kube/scheduler-conf"


def loaded_plugins(log_text):
    """The plugin lists of each configuration load in a scheduler log, oldest first."""
    return [match.group(2).split() for match in _LOADED.finditer(log_text or "")]


def conf_digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


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


def _scheduler_pods(api, params):
    answer = api.get("/api/v1/namespaces/%s/pods" % params["namespace"], label_selector=params["scheduler_selector"])
    return [pod for pod in (answer or {}).get("items", [])
            if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")]


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
        stale = ["%s (%s)" % (name, "last load: plugins=%s" % " ".join(plugins) if isinstance(plugins, list)
                              else plugins or "no configuration load logged since the change")
                 for name, plugins in sorted(seen.items())
                 if not isinstance(plugins, list) or (PLUGIN in plugins) != enabled] or \
            ["no scheduler pod runs (selector %s)" % params["scheduler_selector"]]
        raise VolcanoError("the scheduler did not take in the new configuration within %ss: %s. It reloads its "
                           "file when kubelet refreshes the ConfigMap volume and logs the load at -v=2 or more; "
                           "a subPath mount never refreshes and a lower -v hides the load: use activation: "
                           "restart there" % (params["wait_timeout"], "; ".join(stale)))
    return waited


def _restart(api, params, stamp, wait_for):
    """Roll the scheduler's Deployment (as kubectl rollout restart does) and wait for it."""
    path = "/apis/apps/v1/namespaces/%s/deployments/%s" % (params["namespace"], params["scheduler_deployment"])
    patch = {"spec": {"template": {"metadata": {"annotations": {CONF_ANNOTATION: stamp}}}}}
    api.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def check():
        deployment = api.get(path) or {}
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        want = spec.get("replicas", 1)
        done = (status.get("observedGeneration", 0) >= deployment.get("metadata", {}).get("generation", 0)
                and status.get("updatedReplicas", 0) == want and status.get("availableReplicas", 0) == want
                and status.get("replicas", 0) == want)
        return done, status

    done, status, waited = wait_for(check, params["wait_timeout"], interval=3.0)
    if not done:
        raise VolcanoError("Deployment %s/%s did not finish its restart within %ss: status %r"
                           % (params["namespace"], params["scheduler_deployment"], params["wait_timeout"], status))
    return waited


def node_report(api, params):
    """{node: [problems]} for every Node (node_selector) that numa-aware would never pass."""
    selector = params.get("node_selector") or {}
    nodes = api.nodes(selector)
    try:
        answer = api.get("/apis/%s/numatopologies" % NUMATOPOLOGY_API)
    except Exception:  # pylint: disable=broad-except  # the CRD is not served: no object for any node
        answer = None
    topologies = dict((t["metadata"]["name"], t) for t in (answer or {}).get("items", []))
    report = {}
    for node in nodes:
        name = node["metadata"]["name"]
        problems = node_problems(name, topologies.get(name), params.get("topology_policy"))
        if problems:
            report[name] = problems
    return report


def run(api, params, check_mode, wait_for, clock):
    """The module's work: query, or switch numa-aware and make the scheduler run it."""
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
            result.update(changed=True, status=after["status"], weight=after["weight"])
            result["diff"]["after"] = new_text
            if not check_mode:
                body = {"metadata": {"resourceVersion": configmap["metadata"]["resourceVersion"]},
                        "data": {params["config_key"]: new_text}}
                started = clock()
                api.request("PATCH", path, body=body, content_type="application/merge-patch+json")
                result["activation"] = _activate(api, params, enabled, conf_digest(new_text), started,
                                                 wait_for, clock)
    result["nodes"] = node_report(api, params)
    return result


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
    for pod in pods:
        # a changed pod makes kubelet sync it, which refreshes its ConfigMap volume at once
        # instead of at its next periodic sync (up to a minute or more later)
        try:
            api.request("PATCH", "/api/v1/namespaces/%s/pods/%s" % (params["namespace"], pod["metadata"]["name"]),
                        body={"metadata": {"annotations": {CONF_ANNOTATION: digest}}},
                        content_type="application/merge-patch+json")
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            # gone meanwhile: the pod that replaces it starts with the new configuration
    if not params["wait"]:
        return {"how": how, "pods": [p["metadata"]["name"] for p in pods]}
    waited = _wait_reloaded(api, params, pods, enabled, started, wait_for, clock)
    return {"how": how, "pods": [p["metadata"]["name"] for p in pods], "seconds": round(waited, 1)}
