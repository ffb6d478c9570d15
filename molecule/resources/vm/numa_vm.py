# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start and stop test VMs with an emulated NUMA topology (qemu, host side).

    python3 numa_vm.py start --name NAME --workdir DIR --image BASE.qcow2 --key ID_FILE --layout JSON
    python3 numa_vm.py stop --workdir DIR

``start`` boots a copy-on-write overlay of the base image with the NUMA layout given, forwards a free
port on 127.0.0.1 to the guest's SSH, waits until SSH answers and prints the instance as JSON
(address, port, user, identity_file). ``--data-disk`` attaches a raw image read-only as the second
virtio disk (several guests can share one). The guest console goes to DIR/console.log. A boot that does
not answer SSH in time (or whose qemu dies) is ended and tried again from a fresh overlay, up to
``--boot-attempts`` times; the console of each failed attempt is kept as DIR/console.attemptN.log
and its last lines are printed. KVM is used only when a probe boot under it works. ``stop`` saves the
journal of the services under test to DIR/journal.log, ends the VM and removes the overlay; it
succeeds when there is nothing to stop. A ``start`` still booting (its pid in DIR/launcher.pid) is
asked to end first, so that a ``stop`` run while the guest boots (a scenario whose create failed
early, its boots started in the background) leaves no qemu behind: the launcher stops at its next
step, ends its own qemu and exits with 143.

A layout is ``{"nodes": [{"cpus": 2, "memory_mb": 1024}, {"cpus": 0, "memory_mb": 512}],
"distances": [[10, 21], [21, 10]]}``; nodes without CPUs are memory-only nodes.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

__metaclass__ = type  # pylint: disable=invalid-name


LAUNCHER_PID = "launcher.pid"
_STOP_ASKED = []  # set by SIGTERM in a running ``start``: end the boot at the next step


def stop_asked():
    return bool(_STOP_ASKED)


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def numa_args(layout):
    """qemu arguments for a layout; returns (args, total memory MiB, CPU count)."""
    nodes = layout.get("nodes") or [{"cpus": 2, "memory_mb": 2048}]
    args = []
    cpu = 0
    total_mb = 0
    for index, node in enumerate(nodes):
        memory = int(node["memory_mb"])
        cpus = int(node.get("cpus", 0))
        total_mb += memory
        args += ["-object", "memory-backend-ram,id=m%d,size=%dM" % (index, memory)]
        spec = "node,nodeid=%d,memdev=m%d" % (index, index)
        if cpus:
            spec += ",cpus=%d-%d" % (cpu, cpu + cpus - 1)
            cpu += cpus
        args += ["-numa", spec]
    for src, row in enumerate(layout.get("distances") or []):
        for dst, value in enumerate(row):
            if src < dst:
                args += ["-numa", "dist,src=%d,dst=%d,val=%d" % (src, dst, value)]
    if cpu == 0:
        raise SystemExit("the layout has no CPUs")
    return args, total_mb, cpu


def end_process(pid, group=False):
    """SIGTERM, then SIGKILL after 20 s, ``pid`` (or its whole process group); quiet when it is gone."""
    kill = os.killpg if group else os.kill
    for signum, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            kill(pid, signum)
        except OSError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.3)


def kvm_works(image, workdir, seconds=30):
    """Boot the image under KVM for a few seconds (writes discarded) and see whether the kernel starts.

    /dev/kvm can exist while guests cannot run under it (qemu then aborts on an MSR it cannot set);
    only a real boot tells.
    """
    if not os.access("/dev/kvm", os.W_OK):
        return False
    log = os.path.join(workdir, "kvm-probe.log")
    command = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "512", "-display", "none", "-snapshot",
               "-no-reboot", "-drive", "file=%s,format=qcow2,if=virtio" % os.path.abspath(image),
               "-serial", "file:%s" % log]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + seconds
        while time.time() < deadline and process.poll() is None and not stop_asked():
            with open(log, "a+") as seen:
                seen.seek(0)
                if "Linux version" in seen.read():
                    return True
            time.sleep(1)
        return False
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def ssh_answers(port, key):
    """One bounded SSH attempt: True when the guest ran ``true``."""
    command = ["ssh", "-i", key, "-p", str(port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1", "true"]
    try:
        return subprocess.call(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60) == 0
    except subprocess.TimeoutExpired:
        return False


def process_alive(pidfile):
    try:
        with open(pidfile) as handle:
            os.kill(int(handle.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def boot_once(command, port, key, pidfile, timeout):
    """Start qemu and wait for SSH. Returns None when the guest answers, else why it did not."""
    subprocess.check_call(command)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if stop_asked():
            return "stopped"
        if ssh_answers(port, key):
            return None
        if not process_alive(pidfile):
            return "qemu exited"
        for _second in range(5):
            if stop_asked():
                break
            time.sleep(1)
    return "no SSH answer within %d s" % timeout


def console_tail(path, lines=15):
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return "(no console log)\n"


def host_state():
    """Free memory and load of the host, for the report of a failed boot."""
    try:
        with open("/proc/meminfo") as handle:
            available = re.search(r"MemAvailable:\s+(\d+) kB", handle.read()).group(1)
        return "host: %d MiB available, load %.2f" % (int(available) // 1024, os.getloadavg()[0])
    except (OSError, AttributeError):
        return "host: state unknown"


def lan_mac(address):
    """The MAC address of the LAN card of the guest at address: unique within the LAN, from its last octet."""
    return "52:54:00:4c:00:%02x" % int(address.rsplit(".", 1)[1])


def lan_card(args):
    """A second network card on the guests' shared segment (lan_hub.py), when asked for."""
    if not args.lan_port:
        return []
    return ["-netdev", "socket,id=n1,connect=127.0.0.1:%d" % args.lan_port,
            "-device", "virtio-net-pci,netdev=n1,mac=%s" % lan_mac(args.lan_ip)]


def start(args):
    """Boot the guest; a boot that hangs or dies is retried (boot readiness only), its console kept.

    The launcher's pid is in DIR/launcher.pid while it runs; SIGTERM (sent by ``stop``) ends the boot.
    """
    marker = os.path.join(args.workdir, LAUNCHER_PID)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _STOP_ASKED.append(True))
    with open(marker, "w") as handle:
        handle.write("%d\n" % os.getpid())
    try:
        return boot(args)
    finally:
        if launcher_pid(args.workdir) == os.getpid():
            os.remove(marker)


def stopped(args):
    """End a boot that ``stop`` asked to end: its qemu, overlay and record go."""
    stop(args, keep_logs=True)
    sys.stderr.write("the boot of %s was stopped (numa_vm.py stop)\n" % args.name)
    return 143


def boot(args):
    overlay = os.path.join(args.workdir, "disk.qcow2")
    pidfile = os.path.join(args.workdir, "qemu.pid")
    console = os.path.join(args.workdir, "console.log")
    if os.path.exists(pidfile):
        stop(args)
    layout = json.loads(args.layout) if args.layout else {}
    numa, memory_mb, cpus = numa_args(layout)
    accel = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    if args.accel == "kvm" or (args.accel == "auto" and kvm_works(args.image, args.workdir)):
        accel = ["-accel", "kvm", "-cpu", "host"]
    if stop_asked():
        return stopped(args)
    data_disk = []
    if args.data_disk:  # read-only and shared by every guest: the assets the test bed installs from
        data_disk = ["-drive", "file=%s,format=raw,if=virtio,readonly=on" % os.path.abspath(args.data_disk)]
    failures = []
    for attempt in range(1, args.boot_attempts + 1):
        if stop_asked():
            return stopped(args)
        if os.path.exists(overlay):
            os.remove(overlay)
        subprocess.check_call(["qemu-img", "create", "-q", "-f", "qcow2", "-b", os.path.abspath(args.image), "-F",
                               "qcow2", overlay])
        port = free_port()
        # further guest ports forwarded to free loopback ports (e.g. kubelet's, for egress_proxy.py)
        forwards = dict((str(guest), free_port()) for guest in args.forward)
        # on a LAN, to the guest's LAN address: the node IP, where node services may bind alone
        # (qemu resolves it by ARP over the user network, which the guest answers for any address)
        target = args.lan_ip if args.lan_port else ""
        hostfwd = "".join(",hostfwd=tcp:127.0.0.1:%d-%s:%s" % (host, target, guest)
                          for guest, host in sorted(forwards.items()))
        command = ["qemu-system-x86_64", "-machine", "q35"] + accel + [
            "-smp", str(cpus), "-m", "%dM" % memory_mb] + numa + [
            "-drive", "file=%s,format=qcow2,if=virtio" % overlay] + data_disk + [
            "-netdev", "user,id=n0,dhcpstart=%s,hostfwd=tcp:127.0.0.1:%d-:22%s" % (args.guest_ip, port, hostfwd),
            "-device", "virtio-net-pci,netdev=n0",
        ] + lan_card(args) + [
            "-display", "none", "-serial", "file:%s" % console,
            "-daemonize", "-pidfile", pidfile]
        instance = {"instance": args.name, "address": "127.0.0.1", "port": port, "user": "root",
                    "identity_file": args.key, "accel": accel[1], "workdir": args.workdir,
                    "forwards": forwards, "guest_ip": args.guest_ip, "lan_ip": args.lan_ip if args.lan_port else None}
        with open(os.path.join(args.workdir, "instance.json"), "w") as handle:
            json.dump(instance, handle)
        started = time.time()
        why = boot_once(command, port, args.key, pidfile, args.boot_timeout)
        if why is None:
            sys.stderr.write("%s answered SSH after %d s (attempt %d, %s)\n"
                             % (args.name, time.time() - started, attempt, accel[1]))
            print(json.dumps(instance))
            return 0
        if why == "stopped":
            return stopped(args)
        kept = os.path.join(args.workdir, "console.attempt%d.log" % attempt)
        failures.append("attempt %d: %s (%s); console %s ends with:\n%s"
                        % (attempt, why, host_state(), kept, console_tail(console)))
        stop(args, keep_logs=True)
        if os.path.exists(console):
            os.replace(console, kept)
    summary = "the guest %s did not boot in %d attempts:\n" % (args.name, args.boot_attempts)
    sys.stderr.write(summary + "".join(failures))
    return 1


def save_journal(workdir):
    """Keep the guest's journal of the services under test next to its console log (best effort)."""
    path = os.path.join(workdir, "instance.json")
    if not os.path.exists(path):
        return
    with open(path) as handle:
        instance = json.load(handle)
    command = ["ssh", "-i", instance["identity_file"], "-p", str(instance["port"]), "-o", "StrictHostKeyChecking=no",
               "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "BatchMode=yes",
               "-o", "LogLevel=ERROR", "root@127.0.0.1",
               "journalctl --no-pager -b -u kubelet -u containerd -u numa-exporter -u prometheus"]
    with open(os.path.join(workdir, "journal.log"), "w") as out:
        try:
            subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, timeout=90)
        except subprocess.TimeoutExpired:
            out.write("(the guest did not answer within 90 s)\n")


def launcher_pid(workdir):
    """The pid of the ``start`` still running for ``workdir``, if any (a pid since reused is not it)."""
    try:
        with open(os.path.join(workdir, LAUNCHER_PID)) as handle:
            pid = int(handle.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = [arg.decode(errors="replace") for arg in handle.read().split(b"\0")]
        cwd = os.readlink("/proc/%d/cwd" % pid)
    except (OSError, ValueError):
        return None
    if not any(arg.endswith("numa_vm.py") for arg in argv) or "start" not in argv:
        return None
    theirs = [argv[i + 1] if arg == "--workdir" and i + 1 < len(argv) else arg[len("--workdir="):]
              for i, arg in enumerate(argv) if arg == "--workdir" or arg.startswith("--workdir=")]
    mine = os.path.realpath(workdir)
    return pid if any(os.path.realpath(os.path.join(cwd, path)) == mine for path in theirs) else None


def end_launcher(workdir, seconds=120):
    """Ask a ``start`` still booting this guest to end (it ends its own qemu), then wait for it.

    Its steps are bounded (an SSH attempt at most 60 s), so it answers within ``seconds``; if it does
    not, it is killed and its qemu is ended by ``stop`` from the pid file like any other.
    """
    pid = launcher_pid(workdir)
    if pid is None or pid == os.getpid():
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.time() + seconds
    while time.time() < deadline and launcher_pid(workdir) == pid:
        time.sleep(0.5)
    if launcher_pid(workdir) == pid:
        end_process(pid)
        time.sleep(2)  # a qemu it was starting writes its pid file before it daemonizes


def stop(args, keep_logs=True):
    end_launcher(args.workdir)
    pidfile = os.path.join(args.workdir, "qemu.pid")
    try:  # a test may have left the guest paused (SIGSTOP): let it answer for its journal
        with open(pidfile) as handle:
            os.kill(int(handle.read().strip()), signal.SIGCONT)
    except (OSError, ValueError):
        pass
    save_journal(args.workdir)
    if os.path.exists(pidfile):
        with open(pidfile) as handle:
            text = handle.read().strip()
        if text.isdigit():
            end_process(int(text))
        if os.path.exists(pidfile):  # qemu removes it itself when it exits cleanly
            os.remove(pidfile)
    for name in ["disk.qcow2", "instance.json"] + ([] if keep_logs else ["console.log"]):
        path = os.path.join(args.workdir, name)
        if os.path.exists(path):
            os.remove(path)
    return 0


def start_stop_cli(doc, start_options, start_fn, stop_fn, argv=None):
    """A ``start``/``stop`` command line sharing ``--workdir``; ``start_options`` are (flag, kwargs) pairs."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    begin = sub.add_parser("start")
    end = sub.add_parser("stop")
    for command in (begin, end):
        command.add_argument("--workdir", required=True)
    for flag, options in start_options:
        begin.add_argument(flag, **options)
    args = parser.parse_args(argv)
    if args.action == "start":
        os.makedirs(args.workdir, exist_ok=True)
        return start_fn(args)
    return stop_fn(args)


def main(argv=None):
    return start_stop_cli(__doc__, [
        ("--name", {"required": True}),
        ("--image", {"required": True}),
        ("--key", {"required": True}),
        ("--layout", {"default": ""}),
        ("--data-disk", {"default": "", "help": "a raw disk image attached read-only as the second disk"}),
        ("--guest-ip", {"default": "10.0.2.15",
                        "help": "the address qemu's DHCP gives the guest (10.0.2.x; distinct per guest, so that "
                                "each Node has an address of its own)"}),
        ("--lan-port", {"type": int, "default": 0, "help": "the port of lan_hub.py: adds a card on the guests' LAN"}),
        ("--lan-ip", {"default": "", "help": "the guest's address on that LAN (the card's MAC follows from it)"}),
        ("--forward", {"action": "append", "type": int, "default": [],
                       "help": "a guest TCP port to forward to a free port on 127.0.0.1 (instance.json: forwards)"}),
        ("--accel", {"choices": ["auto", "kvm", "tcg"], "default": "auto"}),
        ("--boot-timeout", {"type": int, "default": 420, "help": "seconds one boot may take to answer SSH"}),
        ("--boot-attempts", {"type": int, "default": 3, "help": "boots to try before giving up"}),
    ], start, stop, argv)


if __name__ == "__main__":
    sys.exit(main())
