# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the scenarios' testinfra tests share (import after adding this folder to sys.path)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import kubernetes

# The deadlines the tests name were set for the guests' speed in the runs of docs/ci-times.md. The
# speed of TCG guests varies from machine to machine and hour to hour, two to three times on
# machines of this kind (issue 31): every deadline of the test bed's readiness and of a wait for
# the behaviour under test is the figure a test names times SLOWER. Only a failing test waits
# longer for it; the run's time guard (tools/run-tiers) still bounds the whole.
SLOWER = 3


def converge_vars(scenario="cluster"):
    """The variables the scenario's converge.yml gives site.yml (its first play's ``vars``)."""
    import yaml  # pinned in requirements-dev.txt; imported here, as not every test needs it

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", scenario, "converge.yml")
    with open(path) as handle:
        return yaml.safe_load(handle)[0]["vars"]


def deadline_in(seconds):
    """The time (time.time()) ``seconds`` from now at the slowest guests' pace (``SLOWER``)."""
    return time.time() + seconds * SLOWER


def exporter_metrics(guest, cafile="/etc/numa-exporter/tls/ca.crt", address="127.0.0.1", port=9201):
    """The systemd exporter's samples as {(name, ((label, value), ...)): value}, scraped inside the
    guest over HTTPS with its certificate verified against ``cafile`` under ``address``, as
    Prometheus verifies it."""
    script = ("import ssl, sys, urllib.request as u\n"
              "context = ssl.create_default_context(cafile=sys.argv[1])\n"
              "url = 'https://%s:%s/metrics' % (sys.argv[2], sys.argv[3])\n"
              "print(u.urlopen(url, timeout=30, context=context).read().decode())\n")
    out = guest.check_output("python3 -c %s %s %s %d" % (shlex.quote(script), shlex.quote(cafile), address, port))
    values = {}
    for line in out.splitlines():
        match = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if match:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match.group(2))))
            values[(match.group(1), labels)] = float(match.group(3))
    return values


def guest_get(host, url, timeout=20):
    """The body of ``url`` fetched inside the guest (a TLS certificate is not checked)."""
    script = ("import ssl, urllib.request as u\n"
              "print(u.urlopen(%r, timeout=%d, context=ssl._create_unverified_context()).read().decode())\n"
              % (url, timeout))
    return host.check_output("python3 -c %s" % shlex.quote(script))


def configz(host):
    """The configuration the guest's kubelet runs with: its /configz, asked through the API server as
    the admin (the test bed's kubelets let in only whom the API server authenticates and authorizes,
    as kubeadm's do)."""
    import kubernetes  # pinned in requirements-dev.txt; imported here, as not every test needs it

    kubeconfig = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              "tests", "output", "vm", os.environ.get("MOLECULE_SCENARIO_NAME", "cluster"),
                              "control-plane", "admin.kubeconfig")
    core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(kubeconfig))
    answer = core.connect_get_node_proxy_with_path(host.backend.get_hostname(), "configz", _preload_content=False)
    return json.loads(answer.data)["kubeletconfig"]


def wait_kubelet_healthy(host, settle=15, timeout=300):
    """Readiness of the test bed after a restart a test made itself: healthz ok for ``settle`` s."""
    script = ("import time, urllib.request as u\n"
              "good = None\n"
              "end = time.time() + %d\n"
              "while time.time() < end:\n"
              "    try:\n"
              "        ok = u.urlopen('http://127.0.0.1:10248/healthz', timeout=5).read() == b'ok'\n"
              "    except Exception:\n"
              "        ok = False\n"
              "    good = (good or time.time()) if ok else None\n"
              "    if good and time.time() - good >= %d:\n"
              "        raise SystemExit(0)\n"
              "    time.sleep(2)\n"
              "raise SystemExit(1)\n" % (timeout * SLOWER, settle))
    assert host.run("python3 -c %s" % shlex.quote(script)).rc == 0, "kubelet did not become healthy"


def node_memory(host, node):
    """MemTotal of one NUMA node of the guest, in bytes."""
    text = host.file("/sys/devices/system/node/node%d/meminfo" % node).content_string
    return int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1)) * 1024


def boot_time(host):
    """When the guest booted, in seconds since the epoch (its clock comes from the host's)."""
    return int(re.search(r"^btime (\d+)$", host.file("/proc/stat").content_string, re.M).group(1))


def cpu_list(text):
    """A kernel CPU (or node) list such as 0-2,5 as a set of numbers."""
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def node_cpus(host, numa):
    """The CPUs of one NUMA node of the guest."""
    return cpu_list(host.file("/sys/devices/system/node/node%d/cpulist" % numa).content_string)


def wait(what, check, timeout=300, interval=1.0):
    """``check()``'s first true value within ``timeout`` seconds at the slowest guests' pace (SLOWER
    times ``timeout``); the test fails naming ``what`` otherwise."""
    until = deadline_in(timeout)
    value = None
    while time.time() < until:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("%s: not within %d s (last seen: %r)" % (what, timeout * SLOWER, value))


class AuditLog(object):
    """What the collection's controller (user numa-kube-admin) asked of the test bed's API server."""

    def __init__(self, path):
        self.path = path

    def mark(self):
        """The log's length now, to read only what comes after."""
        with open(self.path) as handle:
            return sum(1 for _line in handle)

    def node_requests(self, since=0, times=False, labels=False, node=None):
        """Cordons, evictions and uncordons in order, as (verb, name) pairs, or (verb, name, epoch
        seconds) with ``times``, from line ``since`` on; with ``labels`` also each change of a
        Node's labels (verb ``label``). With ``node``, only that Node's and the evictions of pods
        placed on it (or on a node the log does not tell): the tests that run beside others
        (conftest's lanes) see their own node's."""
        requests, placed = [], {}
        with open(self.path) as handle:
            for number, line in enumerate(handle):
                if not line.endswith("\n"):  # the API server still writing it (the lanes read while it writes)
                    break
                event = json.loads(line)
                if event.get("stage") != "ResponseComplete" or event.get("responseStatus", {}).get("code", 500) >= 300:
                    continue
                ref = event["objectRef"]
                if ref["resource"] == "pods" and event["verb"] == "create" and ref.get("subresource") in (None, "binding"):
                    body = event.get("requestObject") or {}
                    target = ((body.get("target") or {}).get("name") if ref.get("subresource") == "binding"
                              else (body.get("spec") or {}).get("nodeName"))
                    name = ref.get("name") or (body.get("metadata") or {}).get("name")
                    if target and name:
                        placed[(ref.get("namespace"), name)] = target
                    continue
                if number < since or event["user"]["username"] != "numa-kube-admin":
                    continue
                verb = None
                if ref["resource"] == "nodes" and not ref.get("subresource") and event["verb"] in ("patch", "update"):
                    spec = (event.get("requestObject") or {}).get("spec") or {}
                    if "unschedulable" in spec:  # other node changes (labels, taints) are neither
                        verb = "cordon" if spec["unschedulable"] else "uncordon"
                    elif labels and "labels" in ((event.get("requestObject") or {}).get("metadata") or {}):
                        verb = "label"
                elif ref.get("subresource") == "eviction":
                    verb = "evict"
                where = placed.get((ref.get("namespace"), ref["name"])) if verb == "evict" else ref["name"]
                if verb and (node is None or where in (node, None)):
                    requests.append((verb, ref["name"], _epoch(event["stageTimestamp"])))
        return requests if times else [(verb, name) for verb, name, _when in requests]


def account_token(api, account, namespace, pod=None, seconds=600):
    """A token of service account ``account``, bound to ``pod`` as kubelet's projected one is (or
    bound to nothing, so that it names no node)."""
    spec = {"audiences": [], "expirationSeconds": seconds}
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}
    answer = api.create_namespaced_service_account_token(
        account, namespace, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    return answer.status.token


def custom_objects_as(token, kubeconfig):
    """CustomObjectsApi against ``kubeconfig``'s API server, authenticated by ``token`` alone (no
    client certificate: the admin's would authenticate first)."""
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(kubeconfig, client_configuration=config)
    config.cert_file = config.key_file = None
    config.api_key = {"authorization": "Bearer " + token}
    return kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(config))


def _epoch(stamp):
    """RFC 3339 time of the audit log (UTC, microseconds) as seconds since the epoch."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + stamp[19:].rstrip("Z"))


PLAYBOOK_LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "output", "logs",
                             "playbook-runs")


def run_playbook(args, timeout=1800):
    """ansible-playbook with the scenario's inventory, as a user runs it; returns the finished process.
    Its time and its slowest tasks (the scenario's profile_tasks recap) go to the verify's log, its
    whole output to tests/output/logs/playbook-runs/ (every task's time: where a test's minutes go)."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"]] + list(args)
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout * SLOWER, check=False,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                                   PROFILE_TASKS_TASK_OUTPUT_LIMIT="all"))
    took = time.time() - started
    if not os.path.isdir(PLAYBOOK_LOGS):
        os.makedirs(PLAYBOOK_LOGS)
    name = "%s-%d-%d.log" % (time.strftime("%H%M%S", time.localtime(started)), os.getpid(), len(os.listdir(PLAYBOOK_LOGS)))
    log = os.path.join(PLAYBOOK_LOGS, name)
    with open(log, "w") as handle:
        handle.write("%s\n(took %d s, exit %d)\n%s\n%s"
                     % (shlex.join(command), took, done.returncode, done.stdout, done.stderr))
    print("\nplaybook run took %d s (exit %d, %s): %s"
          % (took, done.returncode, os.path.basename(log), " ".join(args)[:300]))
    print("\n".join("  " + line for line in slowest_tasks(done.stdout)))
    return done


def slowest_tasks(output, count=6):
    """The first ``count`` entries of profile_tasks' recap in a playbook's output, one line each."""
    recap = output.split("TASKS RECAP", 1)[-1] if "TASKS RECAP" in output else ""
    entries = re.findall(r"^(\S.*?) -+ (\d+\.\d+s)$", recap, re.M)
    return ["%s %s" % (seconds, task) for task, seconds in entries[:count]]


class PausedGuest(object):
    """Hold a guest's qemu stopped (SIGSTOP) while tests use only the other guests, then let it go.

    An idle guest still costs about 40 % of a host core under TCG (its kubelet and containerd
    housekeeping, emulated); on a 2-core machine that slows the guest under test. The paused
    guest's kubelet misses its heartbeats meanwhile; numa_vm.py's stop continues a paused qemu.
    The guest's clock follows the host's through the pause, so a task that was running on a vCPU
    when qemu stopped is charged the whole pause (its kernel also logs that its RCU thread
    starved): under a CPU limit of L cores it is then throttled for about the pause divided by L.
    Prometheus' config reloader runs without its 10m limit for that reason (control_plane.py).
    """

    def __init__(self, workdir):
        with open(os.path.join(workdir, "qemu.pid")) as handle:
            self.pid = int(handle.read().strip())
        self.previous = None

    def __enter__(self):
        # a TERM (the run's time guard) ends pytest without its teardown: the guest is let go first
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._terminated)
        os.kill(self.pid, signal.SIGSTOP)
        return self

    def resume(self):
        """Let the guest go (a running one is not touched)."""
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:  # qemu ended meanwhile: the test's own failure says why
            pass

    def _terminated(self, signum, frame):
        self.resume()
        previous, self.previous = self.previous, None
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
            self.previous = None
        self.resume()
        return False


def _literal(value):
    """``value`` with every string that looks like a template wrapped in a raw block: ad-hoc module
    arguments are templated, and a Grafana legend such as ``{{node}}`` would be read as a variable
    (a playbook's ``lookup('file')`` hands the module the same text untemplated)."""
    if isinstance(value, dict):
        return dict((key, _literal(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_literal(item) for item in value]
    if isinstance(value, str) and ("{{" in value or "{%" in value or "{#" in value):
        return "{% raw %}" + value + "{% endraw %}"
    return value


def run_module(module, args, check=False, diff=False, timeout=900):
    """One module run on the controller (localhost), as a playbook's delegated task runs it; returns
    its result (``failed`` and ``msg`` on failure)."""
    command = ["ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", module, "-a", json.dumps(_literal(args))]
    command += (["--check"] if check else []) + (["--diff"] if diff else [])
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    # Not the scenario's ansible.cfg (molecule verify exports it): its callbacks (profile_tasks)
    # print their own lines on stdout around the JSON report.
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_CALLBACKS_ENABLED"):
        env.pop(name, None)
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout * SLOWER, check=False, env=env)
    try:
        report = json.loads(done.stdout)
        return report["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible %s gave no result (exit %d): %s %s" % (module, done.returncode, done.stdout,
                                                                             done.stderr))
