# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exporter program the numa_exporter role installs (the node agent's, packed by files/bundle.py),
served for real on 127.0.0.1 and scraped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys
import threading
import types
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.numa.kube.tests.unit.plugins.sysfs_tree import two_socket_interleaved

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUNDLE = os.path.join(ROOT, "roles", "numa_exporter", "files", "bundle.py")
sys.path.insert(0, os.path.join(ROOT, "agent"))
# the units' own options, as the role's template writes them before the ones each test adds
UNIT_OPTIONS = ["exporter", "--kubelet-data=checkpoints", "--authentication=none", "--cgroup-root=",
                "--pod-resources-socket="]


def load_script():
    """The programs the role's units run, from the agent's package (what the bundle holds)."""
    from numa_agent import __main__ as agent, checkpoint_relay, exporter, tls_check

    return types.SimpleNamespace(
        parse_args=lambda argv: agent.parse_args(UNIT_OPTIONS + list(argv)),
        serve=lambda args, ready=None, stop=None: exporter.main(args, stop=stop, ready=ready),
        Relay=checkpoint_relay.Relay, relay=checkpoint_relay.main, parse_relay_args=checkpoint_relay.parse_relay_args,
        tls_problems=tls_check.tls_problems, main=agent.main)


@pytest.fixture
def served(tmp_path):
    """Run the exporter on an ephemeral loopback port; yield a function that scrapes it."""
    script = load_script()
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    kubelet = tmp_path / "copies"
    kubelet.mkdir()
    args = script.parse_args(["--port", "0", "--sysfs-root", sys_root, "--checkpoint-dir", str(kubelet)])
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


def test_the_program_the_role_packs_runs_from_its_one_file(tmp_path):
    """Pack what tasks/main.yml packs (bundle.py, the same bytes twice) and run the exporter from that file
    alone, with an isolated interpreter, as the units do."""
    import subprocess

    import yaml

    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "numa_exporter", "tasks", "main.yml")))
    pack = next(t for t in tasks if t["name"] == "Pack the exporter program on the controller")
    assert pack["ansible.builtin.command"]["argv"][1] == "{{ role_path }}/files/bundle.py"
    for output in ("one.pyz", "two.pyz"):
        subprocess.run([sys.executable, BUNDLE, ROOT, str(tmp_path / output)], check=True, capture_output=True,
                       timeout=60)
    assert (tmp_path / "one.pyz").read_bytes() == (tmp_path / "two.pyz").read_bytes(), "the same code packs the same"
    sys_root, _proc = two_socket_interleaved().write(str(tmp_path / "m"))
    code = ("import sys; sys.path.insert(0, %r); from numa_agent import __main__ as m, exporter as e; "
            "a = m.parse_args(%r); print([l for l in e.Exporter(a).render().splitlines() "
            "if l.startswith('numa_node_cpus_count{numa_node=\"1\"}')])"
            % (str(tmp_path / "one.pyz"), UNIT_OPTIONS + ["--sysfs-root", sys_root, "--checkpoint-dir", str(tmp_path)]))
    env = dict((k, v) for k, v in os.environ.items() if k != "PYTHONPATH")
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(['numa_node_cpus_count{numa_node="1"} 8'])
    helped = subprocess.run([sys.executable, "-I", str(tmp_path / "one.pyz"), "checkpoint-relay", "--help"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert helped.returncode == 0 and "--kubelet-root" in helped.stdout, helped.stderr


def test_the_pack_lands_in_a_cache_named_by_its_bytes_and_nothing_is_left_to_remove(tmp_path):
    """Hosts packing at once (strategy free) or in turn get one path and one whole file; the play
    has no task removing it (a copy that failed everywhere leaves nothing new behind), and a stale
    pack of other code goes when a new one is written."""
    import subprocess

    import yaml

    env = dict(os.environ, TMPDIR=str(tmp_path))
    cache = tmp_path / ("numa-kube-%d" % os.getuid())
    cache.mkdir(mode=0o700)
    stale, fresh = cache / "numa-exporter-old.pyz", cache / "numa-exporter-other.pyz"
    stale.write_text("old")
    fresh.write_text("another run's")
    os.utime(str(stale), (1, 1))
    paths = set()
    for _round in range(2):
        done = subprocess.run([sys.executable, BUNDLE, ROOT], env=env, capture_output=True, text=True, timeout=60,
                              check=True)
        paths.add(done.stdout.strip())
    assert len(paths) == 1
    path = paths.pop()
    assert os.path.dirname(path) == str(cache) and re.match(r"numa-exporter-[0-9a-f]{32}\.pyz$", os.path.basename(path))
    assert sorted(os.listdir(str(cache))) == sorted([os.path.basename(path), fresh.name]), "only the stale one went"
    subprocess.run([sys.executable, BUNDLE, ROOT, str(tmp_path / "out.pyz")], check=True, capture_output=True,
                   timeout=60)
    assert (tmp_path / "out.pyz").read_bytes() == open(path, "rb").read()
    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles", "numa_exporter", "tasks", "main.yml")))
    assert not [t for t in tasks if "delegate_to" in t and "file" in str(t.get("ansible.builtin.file", ""))]
    assert not [t for t in tasks if "from the controller" in t.get("name", "")]


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
    args = script.parse_args(["--listen-address", "127.0.0.1", "--port", "0", "--sysfs-root", sys_root,
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


def test_the_relay_leaves_a_reason_the_exporter_reports(served):
    scrape, copies, dummy = served
    (copies / "cpu_manager_state").write_text(json.dumps({"policyName": "static", "entries": {}}))
    assert scrape()[("numa_kubelet_checkpoint_readable", (("file", "cpu_manager_state"),))] == 1
    (copies / "memory_manager_state.error").write_text("cannot read /var/lib/kubelet/memory_manager_state\n")
    assert scrape()[("numa_kubelet_checkpoint_readable", (("file", "memory_manager_state"),))] == 0
    (copies / "cpu_manager_state").write_text("{not json")
    assert scrape()[("numa_kubelet_checkpoint_readable", (("file", "cpu_manager_state"),))] == 0


# --- the relay: kubelet's checkpoints copied for the exporter's group --------------------------------

CPU_STATE = {"policyName": "static", "defaultCpuSet": "0-1,3", "entries": {"uid-1": {"main": "2"}}}


def kubelet_write(folder, name, document):
    """Write a checkpoint as kubelet does: a 0600 temporary file in the same folder, renamed over."""
    temporary = folder / (".%s.tmp" % name)
    handle = os.open(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(handle, json.dumps(document).encode())
    os.close(handle)
    os.replace(str(temporary), str(folder / name))


@pytest.fixture
def relay(tmp_path):
    kubelet, copies = tmp_path / "kubelet", tmp_path / "copies"
    kubelet.mkdir()
    copies.mkdir()
    return load_script().Relay(str(kubelet), str(copies)), kubelet, copies


def test_the_relay_copies_each_checkpoint_readable_by_its_group_only(relay):
    worker, kubelet, copies = relay
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    assert worker.once() == ["cpu_manager_state"]
    copy = copies / "cpu_manager_state"
    assert json.loads(copy.read_text()) == CPU_STATE
    assert oct(os.stat(str(copy)).st_mode & 0o777) == oct(0o640)
    assert sorted(os.listdir(str(copies))) == ["cpu_manager_state"], "no temporary file is left behind"
    assert worker.once() == [], "an unchanged checkpoint is not copied again"


def test_the_relay_follows_kubelet_writing_the_file_anew(relay):
    worker, kubelet, copies = relay
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    worker.once()
    changed = dict(CPU_STATE, entries={"uid-1": {"main": "2"}, "uid-2": {"app": "3"}})
    kubelet_write(kubelet, "cpu_manager_state", changed)
    assert worker.once() == ["cpu_manager_state"]
    assert json.loads((copies / "cpu_manager_state").read_text()) == changed


def test_the_relay_removes_the_copy_of_a_checkpoint_kubelet_removed(relay):
    worker, kubelet, copies = relay
    kubelet_write(kubelet, "memory_manager_state", {"policyName": "Static"})
    worker.once()
    os.unlink(str(kubelet / "memory_manager_state"))
    assert worker.once() == ["memory_manager_state"]
    assert os.listdir(str(copies)) == []


def test_the_relay_says_why_it_could_not_copy_and_drops_the_stale_copy(relay, capsys):
    worker, kubelet, copies = relay
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    worker.once()
    os.unlink(str(kubelet / "cpu_manager_state"))
    (kubelet / "cpu_manager_state").mkdir()  # something kubelet never writes: not read
    assert worker.once() == ["cpu_manager_state"]
    assert not (copies / "cpu_manager_state").exists()
    reason = copies / "cpu_manager_state.error"
    assert "is a directory, not a regular file" in reason.read_text()
    written = os.stat(str(reason)).st_ino
    assert worker.once() == []
    assert os.stat(str(reason)).st_ino == written, "a lasting problem is written once"
    assert capsys.readouterr().err.count("not a regular file") == 1, "and logged once"
    os.rmdir(str(kubelet / "cpu_manager_state"))
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    worker.once()
    assert sorted(os.listdir(str(copies))) == ["cpu_manager_state"], "the reason goes with the problem"


@pytest.mark.parametrize("make,kind", [
    (lambda path, secret: os.symlink(str(secret), str(path)), "a symbolic link"),
    (lambda path, secret: os.mkfifo(str(path)), "a pipe"),
])
def test_the_relay_copies_no_link_and_nothing_but_a_regular_file(relay, tmp_path, make, kind):
    """The relay is root: a link planted in kubelet's folder must not make it copy root's other files
    (here a stand-in for /etc/shadow) where the exporter's group reads them, and a pipe must not hang it."""
    worker, kubelet, copies = relay
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret:19000::::::\n")
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    worker.once()
    os.unlink(str(kubelet / "cpu_manager_state"))
    make(kubelet / "cpu_manager_state", secret)
    assert worker.once() == ["cpu_manager_state"]
    assert not (copies / "cpu_manager_state").exists(), "the copy of the last good file is dropped"
    assert "is %s, not a regular file" % kind in (copies / "cpu_manager_state.error").read_text()
    assert not any("secret" in (copies / name).read_text() for name in os.listdir(str(copies)))
    os.unlink(str(kubelet / "cpu_manager_state"))
    kubelet_write(kubelet, "cpu_manager_state", CPU_STATE)
    assert worker.once() == ["cpu_manager_state"] and sorted(os.listdir(str(copies))) == ["cpu_manager_state"]


def test_the_relay_refuses_a_file_too_large_to_be_a_checkpoint(tmp_path):
    kubelet, copies = tmp_path / "kubelet", tmp_path / "copies"
    kubelet.mkdir()
    copies.mkdir()
    (kubelet / "cpu_manager_state").write_bytes(b"x" * 101)
    worker = load_script().Relay(str(kubelet), str(copies), limit=100)
    worker.once()
    assert not (copies / "cpu_manager_state").exists()
    assert "larger than 100 bytes" in (copies / "cpu_manager_state.error").read_text()


def test_the_relay_program_waits_for_kubelets_folder_and_stops_on_request(tmp_path):
    script = load_script()
    copies = tmp_path / "copies"
    copies.mkdir()
    missing = ["--kubelet-root", str(tmp_path / "absent"), "--into", str(copies)]
    assert script.relay(missing) == 3, "systemd starts it again until kubelet made its folder"
    (tmp_path / "kubelet").mkdir()
    kubelet_write(tmp_path / "kubelet", "cpu_manager_state", CPU_STATE)
    stop = threading.Event()
    stop.set()
    assert script.relay(["--kubelet-root", str(tmp_path / "kubelet"), "--into", str(copies)], stop=stop) == 0
    assert json.loads((copies / "cpu_manager_state").read_text()) == CPU_STATE
    with pytest.raises(SystemExit):
        script.parse_relay_args(["--interval", "0"])


# --- check-tls: your certificate, key and CA, as the exporter's OpenSSL sees them ----------------------

class Authority(object):
    """Certificates made with cryptography, written as PEM files into a folder."""

    def __init__(self, folder, name="test CA"):
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.folder = folder
        self.now = datetime.datetime.now(datetime.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(self.now - datetime.timedelta(days=1))
                     .not_valid_after(self.now + datetime.timedelta(days=3650))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.write("%s.crt" % name.replace(" ", "-"), self.pem(self.cert))
        self.file = str(folder / ("%s.crt" % name.replace(" ", "-")))

    @staticmethod
    def pem(obj):
        from cryptography.hazmat.primitives import serialization

        if hasattr(obj, "private_bytes"):
            return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
        return obj.public_bytes(serialization.Encoding.PEM)

    def write(self, name, data, mode=0o600):
        path = self.folder / name
        path.write_bytes(data)
        os.chmod(str(path), mode)
        return str(path)

    def issue(self, name, sans=("127.0.0.1", "node-a"), start_days=-1, end_days=400, ca=None, intermediate=False):
        """(certificate file, key file) for a server named ``sans``, valid from/to days from now."""
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        signer_key, signer, chain = self.key, self.cert, b""
        if intermediate:
            signer_key = ec.generate_private_key(ec.SECP256R1())
            subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "intermediate")])
            signer = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
                      .public_key(signer_key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(self.now - datetime.timedelta(days=1))
                      .not_valid_after(self.now + datetime.timedelta(days=1000))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .sign(self.key, hashes.SHA256()))
            chain = self.pem(signer)
        key = ec.generate_private_key(ec.SECP256R1())
        names = []
        for san in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                names.append(x509.DNSName(san))
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(signer.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(self.now + datetime.timedelta(days=start_days))
                .not_valid_after(self.now + datetime.timedelta(days=end_days))
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(signer_key, hashes.SHA256()))
        return (self.write(name + ".crt", self.pem(cert) + chain, 0o644), self.write(name + ".key", self.pem(key)))


@pytest.fixture
def authority(tmp_path):
    return Authority(tmp_path)


def problems(*args, **kwargs):
    return [what for what, _fix in load_script().tls_problems(*args, **kwargs)["problems"]]


def test_a_good_certificate_passes_under_every_name(authority):
    cert, key = authority.issue("good")
    result = load_script().tls_problems(cert, key, authority.file, ["127.0.0.1", "node-a"])
    assert result["problems"] == []
    assert result["not_after"].endswith("GMT")


def test_a_chain_through_an_intermediate_in_the_certificate_file_passes(authority):
    cert, key = authority.issue("chained", intermediate=True)
    assert problems(cert, key, authority.file, ["127.0.0.1"]) == []


def test_the_key_of_another_certificate_is_refused(authority):
    cert, dummy = authority.issue("one")
    dummy, other_key = authority.issue("two")
    found = problems(cert, other_key, authority.file, ["127.0.0.1"])
    assert len(found) == 1 and "is not the key of the certificate" in found[0], found


def test_a_certificate_another_ca_signed_is_refused(authority, tmp_path):
    cert, key = Authority(tmp_path, "other CA").issue("foreign")
    found = problems(cert, key, authority.file, ["127.0.0.1"])
    assert len(found) == 1 and "is not signed by a CA of %s" % authority.file in found[0], found


def test_a_certificate_that_does_not_name_the_scraped_address_is_refused(authority):
    cert, key = authority.issue("narrow", sans=("node-a",))
    found = problems(cert, key, authority.file, ["node-a", "10.0.0.5"])
    assert len(found) == 1 and "not valid for 10.0.0.5" in found[0], found


@pytest.mark.parametrize("start, end, expected", [
    (-30, -1, "has expired"),
    (2, 400, "not valid yet"),
    (-1, 10, "within 30 days"),
])
def test_certificates_out_of_date_are_refused(authority, start, end, expected):
    cert, key = authority.issue("dated", start_days=start, end_days=end)
    found = problems(cert, key, authority.file, ["127.0.0.1"])
    assert len(found) == 1 and expected in found[0], found


def test_a_key_every_user_can_read_is_refused(authority):
    cert, key = authority.issue("open")
    os.chmod(key, 0o644)
    found = problems(cert, key, authority.file, ["127.0.0.1"])
    assert len(found) == 1 and "open to every user" in found[0], found


def test_missing_files_are_named(authority, tmp_path):
    cert, dummy = authority.issue("lonely")
    found = problems(cert, str(tmp_path / "absent.key"), authority.file, ["127.0.0.1"])
    assert len(found) == 1 and "absent.key cannot be read" in found[0], found


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_the_exporters_user_must_be_able_to_read_the_key():
    import pathlib
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="numa-exporter-tls-")  # pytest's own folders are root's alone
    os.chmod(folder, 0o755)
    try:
        check_as_nobody(Authority(pathlib.Path(folder)))
    finally:
        shutil.rmtree(folder)


def check_as_nobody(authority):
    cert, key = authority.issue("private")
    result = load_script().tls_problems(cert, key, authority.file, ["127.0.0.1"], as_user="nobody")
    assert result["user_checked"]
    assert [what for what, _fix in result["problems"]] == ["user nobody cannot read %s (Permission denied)" % key]
    os.chmod(key, 0o640)
    os.chown(key, 0, __import__("pwd").getpwnam("nobody").pw_gid)
    assert load_script().tls_problems(cert, key, authority.file, ["127.0.0.1"], as_user="nobody")["problems"] == []
    absent = load_script().tls_problems(cert, key, authority.file, ["127.0.0.1"], as_user="no-such-user-here")
    assert absent["problems"] == [] and not absent["user_checked"]


def test_check_tls_prints_json_the_role_reads(authority, capsys):
    cert, key = authority.issue("printed")
    assert load_script().main(["check-tls", "--cert-file", cert, "--key-file", key, "--ca-file", authority.file,
                               "--name", "10.9.9.9"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["problems"]) == 1 and len(printed["problems"][0]) == 2, printed


# --- what the role renders --------------------------------------------------------------------------

def ansible_jinja(env):
    """``env`` with Ansible's own filters (bool, basename, unique, regex_replace, ...)."""
    from ansible.plugins.filter.core import FilterModule as Core
    from ansible.plugins.filter.mathstuff import FilterModule as Math

    env.filters.update(Core().filters())
    env.filters.update(Math().filters())
    return env


def ansible_templar(**variables):
    """Ansible's own templating (its escaping of backslashes included), over ``variables``."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    return Templar(loader=DataLoader(), variables=variables)


def load_trusted(path):
    """A YAML file of the role as Ansible loads it: its strings are templates."""
    from ansible.parsing.dataloader import DataLoader

    return DataLoader().load_from_file(path, trusted_as_template=True)


def role_variables(**overrides):
    """The role's defaults and vars, templated by Ansible for a host reached at 10.1.2.3."""
    variables = {"ansible_host": "10.1.2.3", "inventory_hostname": "node-a", "inventory_dir": "/inv",
                 "playbook_dir": "/play"}
    for part in ("defaults", "vars"):
        variables.update(load_trusted(os.path.join(ROOT, "roles", "numa_exporter", part, "main.yml")))
    variables.update(overrides)
    templar = ansible_templar(**variables)
    return dict((key, templar.template(value)) for key, value in variables.items())


def render_unit(name, **overrides):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROOT, "roles", "numa_exporter", "templates")),
                             trim_blocks=True)
    return ansible_jinja(env).get_template(name).render(ansible_managed="managed", **role_variables(**overrides)).splitlines()


def directive(lines, name):
    return [line.split("=", 1)[1] for line in lines if line.startswith(name + "=")]


@pytest.mark.parametrize("overrides, cert", [
    ({}, "/etc/numa-exporter/tls/tls.crt"),
    ({"numa_exporter_tls_cert_file": "/etc/pki/n.crt", "numa_exporter_tls_key_file": "/etc/pki/n.key",
      "numa_exporter_tls_ca_file": "/etc/pki/ca.crt"}, "/etc/pki/n.crt"),
    ({"numa_exporter_tls": False}, None),
])
def test_the_exporter_unit_serves_https_by_default_without_any_capability(overrides, cert):
    unit = render_unit("numa-exporter.service.j2", **overrides)
    exec_start = directive(unit, "ExecStart")
    assert len(exec_start) == 1, exec_start
    words = exec_start[0].split()
    assert words[words.index("--checkpoint-dir") + 1] == "/run/numa-exporter"
    assert words[words.index("--listen-address") + 1] == "10.1.2.3"
    if cert:
        assert words[words.index("--tls-cert-file") + 1] == cert
    else:
        assert "--tls-cert-file" not in words
    assert directive(unit, "CapabilityBoundingSet") == [""] and directive(unit, "AmbientCapabilities") == [""]
    assert not [line for line in unit if "CAP_" in line], "no capability is named anywhere"
    assert directive(unit, "User") == ["numa-exporter"] and "Restart=on-failure" in unit
    assert directive(unit, "NoNewPrivileges") == ["true"] and directive(unit, "ProtectSystem") == ["strict"]
    assert directive(unit, "Wants") == ["network-online.target numa-exporter-checkpoints.service"]


def test_the_relay_unit_is_root_without_capabilities_network_or_kubelets_secrets():
    unit = render_unit("numa-exporter-checkpoints.service.j2")
    exec_start = directive(unit, "ExecStart")
    assert len(exec_start) == 1 and exec_start[0].split()[3] == "checkpoint-relay", exec_start
    words = exec_start[0].split()
    assert words[words.index("--into") + 1] == "/run/numa-exporter"
    assert words[words.index("--kubelet-root") + 1] == "/var/lib/kubelet"
    assert directive(unit, "User") == [], "root: kubelet's files are root's, mode 0600"
    assert directive(unit, "Group") == ["numa-exporter"], "its copies belong to the exporter's group"
    assert directive(unit, "RuntimeDirectory") == ["numa-exporter"] and directive(unit, "RuntimeDirectoryMode") == ["0750"]
    assert directive(unit, "CapabilityBoundingSet") == [""] and directive(unit, "PrivateNetwork") == ["true"]
    assert directive(unit, "ProtectSystem") == ["strict"] and directive(unit, "TemporaryFileSystem") == ["/var:ro"]
    hidden = directive(unit, "InaccessiblePaths")[0].split()
    assert {"-/var/lib/kubelet/pods", "-/var/lib/kubelet/pki", "-/etc/kubernetes"} <= set(hidden)
    assert any("kill" in line for line in directive(unit, "SystemCallFilter"))
    assert directive(unit, "RestrictAddressFamilies") == ["none"], "no socket: not even root's local ones"
    assert directive(unit, "PrivateIPC") == ["true"] and directive(unit, "ProcSubset") == ["pid"]


@pytest.mark.parametrize("overrides, names", [
    ({}, ["10.1.2.3", "node-a"]),
    ({"numa_exporter_listen_address": "0.0.0.0"}, ["10.1.2.3", "node-a"]),
    ({"ansible_host": "node-a"}, ["node-a"]),
])
def test_the_certificate_names_the_address_prometheus_scrapes(overrides, names):
    assert role_variables(**overrides)["numa_exporter_tls_names"] == names


def test_addresses_become_ip_entries_and_names_dns_entries():
    """The subject_alt_name expression of tasks/tls_issue.yml, templated by Ansible."""
    tasks = load_trusted(os.path.join(ROOT, "roles", "numa_exporter", "tasks", "tls_issue.yml"))
    block = next(t for t in tasks if "block" in t)["block"]
    expression = next(t for t in block if "community.crypto.openssl_csr_pipe" in t)[
        "community.crypto.openssl_csr_pipe"]["subject_alt_name"]
    names = ["10.1.2.3", "node-a", "fd00::5", "node-a.example.org", "127.0.0.1"]
    assert ansible_templar(numa_exporter_tls_names=names).template(expression) == [
        "IP:10.1.2.3", "DNS:node-a", "IP:fd00::5", "DNS:node-a.example.org", "IP:127.0.0.1"]


# --- the CA on the controller (tasks/tls_ca.yml, run by ansible-playbook on this machine) ---------------

CA_PLAY = """
- name: The exporters' CA on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Keep the CA
      ansible.builtin.include_role:
        name: numa.kube.numa_exporter
        tasks_from: tls_ca
      vars:
        numa_exporter_tls_ca_dir: "{{ ca_dir }}"
"""


def run_play(tmp_path, text, *options):
    """ansible-playbook on this machine with the play ``text``: its completed process."""
    import subprocess

    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook):
        pytest.skip("ansible-playbook is not beside this Python")
    play = tmp_path / "play.yml"
    play.write_text(text)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(p for p in sys.path if p),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"))
    return subprocess.run([playbook, str(play)] + list(options), capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path), check=False)


def run_ca_play(tmp_path, ca_dir):
    done = run_play(tmp_path, CA_PLAY, "-e", "ca_dir=%s" % ca_dir)
    if "couldn't resolve module/action 'community.crypto" in done.stdout + done.stderr:
        pytest.skip("community.crypto is not installed")
    return done


def test_the_ca_folder_is_git_ignored_and_a_key_others_can_read_is_refused(tmp_path):
    import subprocess

    inventory = tmp_path / "inventory"
    inventory.mkdir()
    subprocess.run(["git", "init", "-q", str(inventory)], check=True)
    ca_dir = inventory / "numa-kube-exporter-ca"
    done = run_ca_play(tmp_path, ca_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(os.listdir(str(ca_dir))) == [".gitignore", "ca.crt", "ca.key"]
    assert "*" in (ca_dir / ".gitignore").read_text().splitlines()
    assert oct(os.stat(str(ca_dir / "ca.key")).st_mode & 0o777) == oct(0o600)
    status = subprocess.run(["git", "-C", str(inventory), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True).stdout
    assert status == "", "git sees nothing of the CA folder, its key included: %s" % status

    os.chmod(str(ca_dir / "ca.key"), 0o640)
    done = run_ca_play(tmp_path, ca_dir)
    assert done.returncode != 0
    assert "%s/ca.key on the controller has mode 0640" % ca_dir in done.stdout, done.stdout
    assert "chmod 600 %s/ca.key" % ca_dir in done.stdout

    os.chmod(str(ca_dir / "ca.key"), 0o600)
    (ca_dir / ".gitignore").write_text("ca.key\n")
    done = run_ca_play(tmp_path, ca_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (ca_dir / ".gitignore").read_text() == "ca.key\n", "an existing CA is used as it is"


@pytest.mark.parametrize("containers", ["all", "exclusive", "none"])
def test_the_exporter_unit_is_a_command_line_the_program_takes(containers):
    """The unit's words after the program file parse as the agent's exporter options, limit included."""
    from numa_agent import __main__ as agent

    exec_start = directive(render_unit("numa-exporter.service.j2", numa_exporter_containers=containers), "ExecStart")
    words = exec_start[0].split()
    assert words[:3] == ["/usr/bin/python3", "-I", "/opt/numa-exporter/numa-exporter.pyz"], words
    args = agent.parse_args(words[3:])
    assert (args.program, args.kubelet_data, args.authentication) == ("exporter", "checkpoints", "none")
    assert args.containers == containers and args.checkpoint_dir == "/run/numa-exporter" and args.cgroup_root == ""


# --- what releases before the packed program left on a node (tasks/main.yml, one task) ----------------

def load_plain(*path):
    import yaml

    with open(os.path.join(ROOT, "roles", "numa_exporter", *path)) as handle:
        return yaml.safe_load(handle)


def leftover_tasks():
    tasks = load_plain("tasks", "main.yml")
    found = [dict(t) for t in tasks if "previous release" in t.get("name", "")]
    assert len(found) == 2, "one task removes the files, one the folders left empty"
    return found


def test_the_leftovers_are_the_old_script_and_our_tree_in_lib_whatever_the_folder():
    for folder in ("/opt/numa-exporter", "/usr/local", "/opt/acme", "/srv/tools"):
        leftovers = [re.sub("/+", "/", p) for p in
                     role_variables(numa_exporter_install_dir=folder)["_numa_exporter_leftovers"]]
        assert leftovers == [folder + "/numa_exporter.py", folder + "/lib/ansible_collections/numa/kube"], folder


def run_leftover_tasks(tmp_path, install, steps):
    """The role's two tasks, run by ansible-playbook against this machine, once per step (name,
    whether the program changed, check mode); the registered results by step name."""
    import yaml

    variables = load_plain("vars", "main.yml")
    tasks = []
    for name, program_changed, check in steps:
        for number, task in enumerate(leftover_tasks()):
            tasks.append(dict(task, check_mode=check, diff=True,
                              vars={"__numa_exporter_program": {"changed": program_changed}}))
            tasks.append({"name": "Keep %s %d" % (name, number), "ansible.builtin.set_fact": {
                "%s_%d" % (name, number): "{{ %s }}" % task["register"]}})
        if name == "preview":
            tasks.append({"name": "What the preview left", "ansible.builtin.stat": {"path": str(install / "lib")},
                          "register": "after_preview"})
    keep = ", ".join("'%s_%d': %s_%d" % (name, n, name, n) for name, _c, _m in steps for n in (0, 1))
    tasks.append({"name": "Keep the results", "ansible.builtin.copy": {
        "dest": str(tmp_path / "results.json"),
        "content": "{{ {%s, 'after_preview': after_preview.stat.exists | default(none)} | to_json }}" % keep}})
    play = [{"name": "Leftovers", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable, "numa_exporter_install_dir": str(install),
                      "_numa_exporter_leftovers": variables["_numa_exporter_leftovers"]},
             "tasks": tasks}]
    done = run_play(tmp_path, yaml.safe_dump(play))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "results.json").read_text())


def old_release(install):
    module_utils = install / "lib" / "ansible_collections" / "numa" / "kube" / "plugins" / "module_utils"
    module_utils.mkdir(parents=True)
    (module_utils / "numa_metrics.py").write_text("# old\n")
    (install / "numa_exporter.py").write_text("# old\n")
    (install / "numa-exporter.pyz").write_text("new")


def test_the_old_script_and_tree_go_with_check_mode_diff_and_no_change_the_second_time(tmp_path):
    """Skipped while the program is unchanged (a re-run asks the node nothing), previewed with a
    diff in check mode, then removed with the folders left empty, leaving the program; unchanged
    the second time."""
    install = tmp_path / "opt" / "numa-exporter"
    old_release(install)
    results = run_leftover_tasks(tmp_path, install, [("unchanged", False, False), ("preview", True, True),
                                                     ("removal", True, False), ("again", True, False)])
    assert results["unchanged_0"].get("skipped") and results["unchanged_1"].get("skipped")
    preview = results["preview_0"]
    assert preview["changed"] and results["after_preview"], "check mode reports and removes nothing"
    diffs = dict((r["item"], r["diff"]) for r in preview["results"])
    tree = str(install / "lib" / "ansible_collections" / "numa" / "kube")
    assert diffs[tree]["before"]["state"] == "directory" and diffs[tree]["after"]["state"] == "absent"
    assert diffs[str(install / "numa_exporter.py")]["before"]["state"] == "file"
    assert results["removal_0"]["changed"] and results["removal_1"]["changed"]
    assert sorted(os.listdir(str(install))) == ["numa-exporter.pyz"], "the program stays, lib/ was only ours"
    assert not results["again_0"]["changed"] and not results["again_1"]["changed"], "a second run changes nothing"


def test_a_lib_folder_with_anything_else_in_it_stays(tmp_path):
    """A shared folder (/usr/local, or yours): lib/ and lib/ansible_collections hold more than the
    old release's tree, and only that tree goes."""
    install = tmp_path / "usr" / "local"
    old_release(install)
    (install / "lib" / "python3").mkdir()
    (install / "lib" / "ansible_collections" / "acme" / "tools").mkdir(parents=True)
    results = run_leftover_tasks(tmp_path, install, [("removal", True, False)])
    assert results["removal_0"]["changed"] and results["removal_1"]["stdout_lines"] == ["lib/ansible_collections/numa"]
    assert sorted(os.listdir(str(install / "lib"))) == ["ansible_collections", "python3"]
    assert sorted(os.listdir(str(install / "lib" / "ansible_collections"))) == ["acme"], "numa/ went, empty"
