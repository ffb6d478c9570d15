# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start and stop test VMs with an emulated NUMA topology (qemu, host side).

    python3 numa_vm.py start --name NAME --workdir DIR --image BASE.qcow2 --key ID_FILE --layout JSON
    python3 numa_vm.py stop --workdir DIR

``start`` boots a copy-on-write overlay of the base image with the NUMA layout given, forwards a free
port on 127.0.0.1 to the guest's SSH, waits until SSH answers and prints the instance as JSON
(address, port, user, identity_file). The guest console goes to DIR/console.log. ``stop`` saves the
journal of the services under test to DIR/journal.log, ends the VM and removes the overlay; it
succeeds when there is nothing to stop.

A layout is ``{"nodes": [{"cpus": 2, "memory_mb": 1024}, {"cpus": 0, "memory_mb": 512}],
"distances": [[10, 21], [21, 10]]}``; nodes without CPUs are memory-only nodes.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

__metaclass__ = type  # pylint: disable=invalid-name


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


def kvm_works(kernel, workdir, seconds=20):
    """Boot the guest kernel under KVM for a few seconds and see whether it prints anything."""
    if not os.access("/dev/kvm", os.W_OK) or not kernel:
        return False
    log = os.path.join(workdir, "kvm-probe.log")
    command = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256", "-nographic", "-no-reboot",
               "-kernel", kernel, "-append", "console=ttyS0 panic=-1"]
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + seconds
        while time.time() < deadline and process.poll() is None:
            time.sleep(1)
            with open(log) as seen:
                if "Linux version" in seen.read():
                    process.kill()
                    process.wait()
                    return True
        if process.poll() is None:
            process.kill()
            process.wait()
    return False


def wait_for_ssh(port, key, timeout):
    """Retry SSH until the guest answers (boot readiness only) or the time is up."""
    deadline = time.time() + timeout
    command = ["ssh", "-i", key, "-p", str(port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1", "true"]
    while time.time() < deadline:
        if subprocess.call(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            return True
        time.sleep(5)
    return False


def start(args):
    os.makedirs(args.workdir, exist_ok=True)
    overlay = os.path.join(args.workdir, "disk.qcow2")
    pidfile = os.path.join(args.workdir, "qemu.pid")
    console = os.path.join(args.workdir, "console.log")
    if os.path.exists(pidfile):
        stop(args)
    layout = json.loads(args.layout) if args.layout else {}
    numa, memory_mb, cpus = numa_args(layout)
    subprocess.check_call(["qemu-img", "create", "-q", "-f", "qcow2", "-b", os.path.abspath(args.image), "-F", "qcow2",
                           overlay])
    accel = ["-accel", "tcg,thread=multi", "-cpu", "max"]
    if args.accel == "kvm" or (args.accel == "auto" and kvm_works(args.probe_kernel, args.workdir)):
        accel = ["-accel", "kvm", "-cpu", "host"]
    port = free_port()
    command = ["qemu-system-x86_64", "-machine", "q35"] + accel + [
        "-smp", str(cpus), "-m", "%dM" % memory_mb] + numa + [
        "-drive", "file=%s,format=qcow2,if=virtio" % overlay,
        "-netdev", "user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22" % port,
        "-device", "virtio-net-pci,netdev=n0",
        "-display", "none", "-serial", "file:%s" % console,
        "-daemonize", "-pidfile", pidfile]
    subprocess.check_call(command)
    instance = {"instance": args.name, "address": "127.0.0.1", "port": port, "user": "root",
                "identity_file": args.key, "accel": accel[1], "workdir": args.workdir}
    with open(os.path.join(args.workdir, "instance.json"), "w") as handle:
        json.dump(instance, handle)
    if not wait_for_ssh(port, args.key, args.boot_timeout):
        sys.stderr.write("the guest did not answer SSH within %d s; console: %s\n" % (args.boot_timeout, console))
        stop(args, keep_logs=True)
        return 1
    print(json.dumps(instance))
    return 0


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


def stop(args, keep_logs=True):
    pidfile = os.path.join(args.workdir, "qemu.pid")
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    begin = sub.add_parser("start")
    begin.add_argument("--name", required=True)
    begin.add_argument("--workdir", required=True)
    begin.add_argument("--image", required=True)
    begin.add_argument("--key", required=True)
    begin.add_argument("--layout", default="")
    begin.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    begin.add_argument("--probe-kernel", default="")
    begin.add_argument("--boot-timeout", type=int, default=900)
    end = sub.add_parser("stop")
    end.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    return start(args) if args.action == "start" else stop(args)


if __name__ == "__main__":
    sys.exit(main())
