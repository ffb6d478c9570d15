# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter script the numa_exporter role installs, served for real on 127.0.0.1 and scraped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "numa_exporter", "files", "numa_exporter.py")


def load_script():
    spec = importlib.util.spec_from_file_location("numa_exporter_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def served(tmp_path):
    """Run the exporter on an ephemeral loopback port; yield a function that scrapes it."""
    script = load_script()
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    args = script.parse_args(["--port", "0", "--sysfs-root", sys_root, "--kubelet-root", str(kubelet), "--lib", ""])
    port = []
    bound = threading.Event()
    stop = threading.Event()

    def ready(number):
        port.append(number)
        bound.set()

    thread = threading.Thread(target=script.serve, args=(args, ready, stop))
    thread.start()
    assert bound.wait(30), "the exporter did not start"

    def scrape():
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port[0], timeout=30) as response:
            text = response.read().decode()
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    yield scrape, kubelet, tmp_path
    stop.set()
    thread.join(30)


def test_scrape_reports_each_node(served):
    scrape, dummy, dummy2 = served
    samples = scrape()
    assert samples[("numa_node_cpus_count", (("numa_node", "0"),))] == 8
    assert samples[("numa_node_cpus_count", (("numa_node", "1"),))] == 8
    assert samples[("numa_node_memory_total_bytes", (("numa_node", "1"),))] == 8 * 2 ** 30
    assert samples[("numa_node_distance", (("numa_node", "0"), ("to_node", "1")))] == 21
    assert samples[("numa_exporter_topology_error", ())] == 0


def test_every_scrape_reads_the_node_afresh(served):
    scrape, kubelet, dummy = served
    assert ("numa_node_cpus_exclusive", (("numa_node", "0"),)) not in scrape()
    (kubelet / "cpu_manager_state").write_text(json.dumps(
        {"policyName": "static", "defaultCpuSet": "", "entries": {"p": {"c": "0,2"}}}))
    assert scrape()[("numa_node_cpus_exclusive", (("numa_node", "0"),))] == 2


def test_a_broken_topology_is_reported_and_the_last_good_one_kept(served):
    scrape, dummy, tmp_path = served
    (tmp_path / "m" / "sys" / "devices" / "system" / "cpu" / "online").write_text("3-1\n")
    samples = scrape()
    assert samples[("numa_exporter_topology_error", ())] == 1
    assert samples[("numa_node_cpus_count", (("numa_node", "0"),))] == 8


def test_the_files_the_role_installs_are_enough_to_run(tmp_path):
    """Copy exactly what tasks/main.yml installs and import the exporter's code from there alone."""
    import shutil
    import subprocess
    import sys

    import yaml

    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "numa_exporter", "tasks", "main.yml")))
    install = next(t for t in tasks if t["name"] == "Install the collection code the exporter imports")
    lib = tmp_path / "lib"
    target = lib / "ansible_collections" / "numa" / "kube" / "plugins" / "module_utils"
    target.mkdir(parents=True)
    for name in install["loop"]:
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), str(target / name))
    shutil.copy(SCRIPT, str(tmp_path / "numa_exporter.py"))
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    code = ("import sys; sys.path.insert(0, %r); import numa_exporter as e; "
            "a = e.parse_args(['--lib', %r, '--sysfs-root', %r]); "
            "print([l for l in e.build_render(a)().splitlines() if l.startswith('numa_node_cpus_count{numa_node=\"1\"}')])"
            % (str(tmp_path), str(lib), sys_root))
    env = dict((k, v) for k, v in os.environ.items() if k != "PYTHONPATH")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(['numa_node_cpus_count{numa_node="1"} 8'])


def test_serves_tls_and_picks_up_a_renewed_certificate(tmp_path):
    import ssl
    import subprocess

    def certificate(name):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=" + name,
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "new.key"),
                        "-out", str(tmp_path / "new.crt")], check=True, capture_output=True)
        (tmp_path / ("%s.crt" % name)).write_bytes((tmp_path / "new.crt").read_bytes())
        os.replace(str(tmp_path / "new.key"), str(tmp_path / "tls.key"))
        os.replace(str(tmp_path / "new.crt"), str(tmp_path / "tls.crt"))

    certificate("first")
    script = load_script()
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    args = script.parse_args(["--listen-address", "127.0.0.1", "--port", "0", "--sysfs-root", sys_root, "--lib", "",
                              "--tls-cert-file", str(tmp_path / "tls.crt"), "--tls-key-file", str(tmp_path / "tls.key")])
    port, bound, stop = [], threading.Event(), threading.Event()
    thread = threading.Thread(target=script.serve, args=(args, lambda n: (port.append(n), bound.set()), stop))
    thread.start()
    try:
        assert bound.wait(30)

        def peer_name(ca):
            context = ssl.create_default_context(cafile=str(tmp_path / ca))
            with urllib.request.urlopen("https://127.0.0.1:%d/metrics" % port[0], context=context, timeout=30) as got:
                assert b"numa_node_cpus_count" in got.read()

        peer_name("first.crt")
        with pytest.raises(OSError):  # plain HTTP is not answered
            urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port[0], timeout=10).read()
        certificate("second")
        peer_name("second.crt")
    finally:
        stop.set()
        thread.join(30)


@pytest.mark.parametrize("tls", [False, True])
def test_the_unit_gives_systemd_one_exec_line_and_the_restart_policy(tls):
    """Rendered as Ansible's template module does (trim_blocks): each directive on its own line."""
    import jinja2
    import yaml

    with open(os.path.join(ROOT, "roles", "numa_exporter", "defaults", "main.yml")) as handle:
        variables = yaml.safe_load(handle)
    if tls:
        variables.update(numa_exporter_tls_cert_file="/etc/x/tls.crt", numa_exporter_tls_key_file="/etc/x/tls.key")
    variables = dict((key, jinja2.Template(str(value)).render(**variables) if isinstance(value, str) else value)
                     for key, value in variables.items())
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", "numa_exporter", "templates")),
                             trim_blocks=True)
    unit = env.get_template("numa-exporter.service.j2").render(ansible_managed="managed", **variables)
    lines = unit.splitlines()
    exec_start = [line for line in lines if line.startswith("ExecStart=")]
    assert len(exec_start) == 1 and exec_start[0].split()[-1 if not tls else -5] == "/opt/numa-exporter/lib", exec_start
    assert "Restart=on-failure" in lines
    assert ("--tls-key-file /etc/x/tls.key" in exec_start[0]) is tls
