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
succeeds when there is nothing to stop.

A ``stop`` while a ``start`` still boots the guest (a scenario whose create failed early, its boots
running in the background) leaves no qemu behind: ``stop`` leaves DIR/stop.requested, asks the
launcher named in DIR/launcher.pid to end (SIGTERM) and waits for it; the launcher checks both at
every step, ends its own qemu and exits with 143. One that has not yet written its pid file sees the
request as its first step, if the request is not older than its ``--started-at`` (the time its
caller decided to start it; default: when it starts). A ``start`` on a directory whose launcher still
runs ends that launcher first.

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
STOP_REQUESTED = "stop.requested"
_STOP_ASKED = []  # set by SIGTERM in a running ``start``: end the boot at the next step
_LAUNCH = {}  # in a running ``start``: its workdir and since when a stop request counts


def stop_asked():
    """Whether this launcher was asked to end: by SIGTERM, or by a stop request made since it was started."""
    if _STOP_ASKED:
        return True
    if not _LAUNCH:
        return False
    try:
        return os.stat(os.path.join(_LAUNCH["workdir"], STOP_REQUESTED)).st_mtime >= _LAUNCH["since"]
    except OSError:
        return False


def process_identity(pid):
    """A live process's start time in clock ticks (with its pid, who it is), None when it is gone or a zombie.

    Only the start time: a state (sleeping, running) changes while a process handles a signal, and a
    waiter comparing it took a launcher busy ending its boot for another process and killed it."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command name: field 3 (state) is fields[0], field 22 (starttime) fields[19]
    return None if fields[0] in ("Z", "X") else fields[19]


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


def end_process(pid, group=False, steps=((signal.SIGTERM, 20), (signal.SIGKILL, 10))):
    """SIGTERM, then SIGKILL after 20 s, ``pid`` (or its whole process group); quiet when it is gone."""
    kill = os.killpg if group else os.kill
    for signum, wait in steps:
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


def ssh_answers(port, key, seconds=60):
    """One bounded SSH attempt: True when the guest ran ``true``; cut short when the boot is to end."""
    command = ["ssh", "-i", key, "-p", str(port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1", "true"]
    attempt = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + seconds
    try:
        while attempt.poll() is None and time.time() < deadline and not stop_asked():
            time.sleep(0.5)
        return attempt.poll() == 0
    finally:
        if attempt.poll() is None:
            attempt.kill()
        attempt.wait()


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
    since = time.time() if args.started_at is None else args.started_at
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _STOP_ASKED.append(True))
    end_launcher(args.workdir)  # one still booting this guest (a create run again) ends first
    marker = os.path.join(args.workdir, LAUNCHER_PID)
    partial = marker + ".%d" % os.getpid()
    with open(partial, "w") as handle:
        handle.write("%d %s %s\n" % (os.getpid(), process_identity(os.getpid()), os.path.realpath(args.workdir)))
    os.replace(partial, marker)
    # written before the first look at the stop request, which ``stop`` makes before it reads the pid
    # file: a stop either finds this launcher or is found by it
    _LAUNCH.update(workdir=args.workdir, since=since)
    try:
        if stop_asked():
            return stopped(args)
        return boot(args)
    finally:
        if launcher_pid(args.workdir) == os.getpid():
            os.remove(marker)


def stopped(args):
    """End a boot that ``stop`` asked to end: its qemu, overlay and record go (no journal: the guest
    has not answered SSH)."""
    stop(args, keep_logs=True, journal=False)
    sys.stderr.write("the boot of %s was stopped (numa_vm.py stop)\n" % args.name)
    return 143


def boot(args):
    overlay = os.path.join(os.path.realpath(args.workdir), "disk.qcow2")  # as ``stop`` looks for it
    pidfile = os.path.join(args.workdir, "qemu.pid")
    console = os.path.join(args.workdir, "console.log")
    if os.path.exists(pidfile):
        stop(args)
    layout = json.loads(args.layout) if args.layout else {}
    numa, memory_mb, cpus = numa_args(layout)
    # Under TCG, one host thread a guest runs all its vCPUs on (thread=single, the default), or one
    # thread each (multi). Two 4-vCPU guests on a 2-core host are eight vCPU threads in each other's
    # way under multi, and a guest's cross-vCPU work (TLB flushes, IPIs) waits for vCPUs not running.
    # Measured here on 2026-11-27 with both guests booting and working at once: SSH after 52-54 s
    # against 82-86 s, a mixed load (interpreter starts, fork and exec, four busy processes, a Go
    # binary) in 25 s against 31 s. A guest alone, the other held stopped, uses both cores only under
    # multi: 19 s against 24 s; yet the cluster scenario took longer in every phase with its main
    # guest under multi (molecule/README.md). A platform's tcg_thread chooses (create.yml).
    accel = ["-accel", "tcg,thread=%s" % args.tcg_thread, "-cpu", "max"]
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
            pid, started, path = handle.read().split(None, 2)
        pid = int(pid)
    except (OSError, ValueError):
        return None
    identity = process_identity(pid)
    if identity != started or path.strip() != os.path.realpath(workdir):
        return None
    return pid


def end_launcher(workdir, seconds=150):
    """Ask a ``start`` still booting this guest to end (it ends its own qemu), then wait until it is gone.

    Its steps are bounded (an SSH attempt, cut short, or a qemu starting), so it ends well within
    ``seconds``; if not, it is killed and ``stop`` ends its qemu like any other.
    """
    pid = launcher_pid(workdir)
    if pid is None or pid == os.getpid():
        return
    identity = process_identity(pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.time() + seconds
    while time.time() < deadline and identity is not None and process_identity(pid) == identity:
        time.sleep(0.2)
    if identity is not None and process_identity(pid) == identity:
        end_process(pid, steps=((signal.SIGKILL, 10),))


def end_strays(workdir):
    """End any qemu still running this guest's overlay: one whose launcher was killed while it started."""
    wanted = "file=%s," % os.path.join(os.path.realpath(workdir), "disk.qcow2")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]).startswith("qemu-system") and any(a.startswith(wanted) for a in argv):
            end_process(int(entry))


def stop_command(args):
    """``stop``: a launcher still booting the guest ends first (see the module's documentation)."""
    os.makedirs(args.workdir, exist_ok=True)  # a launcher not yet started looks here
    with open(os.path.join(args.workdir, STOP_REQUESTED), "w") as handle:
        handle.write("%f\n" % time.time())
    end_launcher(args.workdir)
    return stop(args)


def stop(args, keep_logs=True, journal=True):
    """End the guest's qemu and remove its overlay and record (the launcher's own clean-up, and ``stop``'s)."""
    pidfile = os.path.join(args.workdir, "qemu.pid")
    try:  # a test may have left the guest paused (SIGSTOP): let it answer for its journal
        with open(pidfile) as handle:
            os.kill(int(handle.read().strip()), signal.SIGCONT)
    except (OSError, ValueError):
        pass
    if journal:
        save_journal(args.workdir)
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
        if text.isdigit():
            end_process(int(text))
        os.remove(pidfile)  # qemu removes it itself when it exits cleanly
    except FileNotFoundError:
        pass
    if os.path.isdir(args.workdir):
        end_strays(args.workdir)
    for name in ["disk.qcow2", "instance.json"] + ([] if keep_logs else ["console.log"]):
        try:
            os.remove(os.path.join(args.workdir, name))
        except FileNotFoundError:
            pass
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
        ("--tcg-thread", {"choices": ["single", "multi"], "default": "single",
                          "help": "under TCG, one host thread for all the guest's vCPUs (single) or one each (multi)"}),
        ("--boot-timeout", {"type": int, "default": 420, "help": "seconds one boot may take to answer SSH"}),
        ("--boot-attempts", {"type": int, "default": 3, "help": "boots to try before giving up"}),
        ("--started-at", {"type": float, "default": None,
                          "help": "when the caller decided to start this guest (seconds since the epoch): a stop "
                                  "requested since then ends the boot, even one requested before this launcher ran"}),
    ], start, stop_command, argv)


if __name__ == "__main__":
    sys.exit(main())
