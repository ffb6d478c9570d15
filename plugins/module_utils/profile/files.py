# -*- coding: utf-8 -*-
# Copyright: numa.kube contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files a node profile puts on a node, as text: the huge page allocator (one script, one oneshot
unit per page size and NUMA node, and a drop-in that makes kubelet's service require them, so a
shortfall holds kubelet back instead of letting it start short), systemd's CPUAffinity, and
irqbalance's banned CPUs in a drop-in of its service.

Pure functions over the plan of profile/plan.py; the kubelet role writes what they return with
kubelet's configuration (kubelet_config's extra_files), inside the rollout envelope, and removes
them on the way back out. The units are never enabled: kubelet's service pulls them in."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.numa.kube.plugins.module_utils.numa.sysfs import format_cpu_list
from ansible_collections.numa.kube.plugins.module_utils.profile.plan import ALLOCATION_SECONDS, ProfileError

SCRIPT = "/usr/local/libexec/numa-kube/hugepages"
UNIT_DIR = "/etc/systemd/system"
AFFINITY_DROPIN = "/etc/systemd/system.conf.d/50-numa-kube-cpu-affinity.conf"
KUBELET_DROPIN = "50-numa-kube-hugepages.conf"
# where irqbalance's service reads its environment (Debian's family, then Red Hat's)
IRQBALANCE_ENV_FILES = ("/etc/default/irqbalance", "/etc/sysconfig/irqbalance")
IRQBALANCE_DROPIN = "/etc/systemd/system/irqbalance.service.d/50-numa-kube-banned-cpus.conf"
# the irqbalance that reads IRQBALANCE_BANNED_CPULIST
LIST_SINCE = (1, 8)

_BANNED_ANY = re.compile(r"^\s*(?:export\s+)?(IRQBALANCE_BANNED_CPU(?:S|LIST))\s*=\s*[\"']?([^\"'\s]*)")

# POSIX sh, for any node: no bash, no Python needed at boot
_SCRIPT_TEXT = """#!/bin/sh
# numa.kube: put COUNT huge pages of SIZE kB on NUMA node NODE and prove they are there (--check:
# only prove it, for pages the kernel command line allocates at boot).
# Run by numa-kube-hugepages-node<NODE>-<SIZE>kB.service before kubelet, which requires that unit:
# when the pages are short, this exits non-zero, the unit fails and kubelet does not start.
# Usage: hugepages [--check] NODE SIZE_KB COUNT [SECONDS]
# (NUMA_KUBE_SYSFS and NUMA_KUBE_PROCFS move /sys and /proc, for the tests)
set -u
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
node=$1 size=$2 want=$3 seconds=${4:-%(seconds)d}
sys=${NUMA_KUBE_SYSFS:-/sys} proc=${NUMA_KUBE_PROCFS:-/proc}
file=$sys/devices/system/node/node$node/hugepages/hugepages-${size}kB/nr_hugepages
unit=numa-kube-hugepages-node$node-${size}kB.service
count() {
  have=$(cat "$file" 2>/dev/null)
  case $have in ''|*[!0-9]*) have=0 ;; esac
}
if [ ! -e "$file" ]; then
  echo "numa.kube: $file is missing: this kernel offers no ${size} kB pages on NUMA node $node" >&2
  exit 1
fi
# the page sizes this boot's command line allocates (hugepagesz=), in kB
booted_sizes() {
  for word in $(cat "$proc/cmdline" 2>/dev/null); do
    case $word in
      hugepagesz=*)
        value=${word#hugepagesz=} number=${value%%[GgMmKk]}
        case $number in ''|*[!0-9]*) continue ;; esac
        case $value in
          *[Gg]) echo $(( number * 1048576 )) ;;
          *[Mm]) echo $(( number * 1024 )) ;;
          *[Kk]) echo "$number" ;;
          *) echo $(( number / 1024 )) ;;
        esac ;;
    esac
  done
}
if [ -n "$check" ] && ! booted_sizes | grep -qx "$size"; then
  # the change that adds the pages to the command line writes this unit before the reboot that
  # brings them: until then there is nothing to check
  echo "numa.kube: this boot's command line allocates no $size kB pages yet: the reboot that applies" \
       "the profile's kernel parameters does"
  exit 0
fi
count
before=$have
if [ -z "$check" ]; then
  end=$(( $(date +%%s) + seconds ))
  while :; do
    echo "$want" > "$file" 2>/dev/null
    count
    [ "$have" -ge "$want" ] && break
    [ "$(date +%%s)" -ge "$end" ] && break
    # free contiguous memory for the next try
    echo 1 > "$proc/sys/vm/compact_memory" 2>/dev/null
    sleep 1
  done
fi
if [ "$have" -lt "$want" ]; then
  if [ -z "$check" ] && [ "$have" != "$before" ]; then
    # give back what this try took: a short pool serves no one
    echo "$before" > "$file" 2>/dev/null
  fi
  echo "numa.kube: NUMA node $node holds $have of the $want huge pages of $size kB the profile asks for" \\
       "($(( want - have )) short); kubelet does not start without them. Free memory on that node or ask" \\
       "for fewer pages, then: systemctl restart $unit and start kubelet again" >&2
  exit 1
fi
echo "numa.kube: NUMA node $node holds $have huge pages of $size kB"
""" % {"seconds": ALLOCATION_SECONDS}


def unit_name(page):
    return "numa-kube-hugepages-node%d-%dkB.service" % (page["node"], page["size_kb"])


def hugepage_files(hugepages, service, seconds=ALLOCATION_SECONDS):
    """{path: text} of the script, one unit per page entry (allocating runtime pages, checking those
    the kernel command line allocates at boot), and the drop-in that makes ``service``
    (kubelet.service, rke2-agent.service, k3s.service...) require them; {} without huge pages.
    ``seconds``: how long a unit tries to allocate its pages before it fails."""
    if not hugepages:
        return {}
    files = {SCRIPT: _SCRIPT_TEXT}
    names = []
    for page in hugepages:
        name = unit_name(page)
        names.append(name)
        files["%s/%s" % (UNIT_DIR, name)] = (
            "# numa.kube's node profile\n"
            "[Unit]\n"
            "Description=numa.kube: %(count)d huge pages of %(size_kb)d kB on NUMA node %(node)d%(how)s\n"
            "Before=%(service)s\n"
            "\n"
            "[Service]\n"
            "Type=oneshot\n"
            "RemainAfterExit=yes\n"
            "ExecStart=%(script)s %(check)s%(node)d %(size_kb)d %(count)d%(seconds)s\n"
            "TimeoutStartSec=%(timeout)d\n"
            % dict(page, service=service, script=SCRIPT, timeout=seconds + 60,
                   seconds="" if page["at"] == "boot" or seconds == ALLOCATION_SECONDS else " %d" % seconds,
                   check="--check " if page["at"] == "boot" else "",
                   how=" (allocated at boot)" if page["at"] == "boot" else ""))
    files["%s/%s.d/%s" % (UNIT_DIR, service, KUBELET_DROPIN)] = (
        "# numa.kube's node profile: no start without the huge pages the profile asks for\n"
        "[Unit]\n"
        "Requires=%s\n"
        "After=%s\n" % (" ".join(names), " ".join(names)))
    return files


def affinity_dropin(cpus):
    """systemd's own drop-in: PID 1 and every service it starts (containerd, kubelet, the rest) run
    on the reserved CPUs from the next boot."""
    return ("# numa.kube's node profile: services run on the reserved CPUs\n"
            "[Manager]\n"
            "CPUAffinity=%s\n" % cpus)


def cpu_mask(cpus):
    """CPU ids as the hexadecimal mask irqbalance's IRQBALANCE_BANNED_CPUS takes (cpumask_parse_user):
    groups of 8 digits, the highest first, separated by commas; ``[2, 3, 33]`` -> ``00000002,0000000c``."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    digits = "%x" % value
    digits = digits.zfill(-(-len(digits) // 8) * 8)
    return ",".join(digits[index:index + 8] for index in range(0, len(digits), 8))


def irqbalance_dropin(banned, version, env_path, env_text):
    """The drop-in of irqbalance's service that bans ``banned`` (CPU ids) from its balancing:
    IRQBALANCE_BANNED_CPULIST from irqbalance 1.8, which reads it, else the older mask
    IRQBALANCE_BANNED_CPUS (which every version reads). systemd lets a variable of the service's
    EnvironmentFile win over the drop-in's Environment=, so an environment file (``env_path``,
    ``env_text``) that sets either variable is refused: its setting would silently replace the
    profile's."""
    for line in (env_text or "").splitlines():
        match = _BANNED_ANY.match(line)
        if match:
            raise ProfileError("%s sets %s (%s), which irqbalance would take over the profile's banned CPUs (%s): "
                               "systemd lets the service's environment file win over numa.kube's drop-in. Remove or "
                               "comment out that line, and the profile bans them"
                               % (env_path, match.group(1), match.group(2) or "empty", format_cpu_list(banned)))
    if version is not None and tuple(version[:2]) >= LIST_SINCE:
        setting = "IRQBALANCE_BANNED_CPULIST=%s" % format_cpu_list(banned)
    else:
        setting = "IRQBALANCE_BANNED_CPUS=%s" % cpu_mask(banned)
    return ("# numa.kube's node profile: no interrupts balanced onto the isolated CPUs\n"
            "[Service]\n"
            "Environment=%s\n" % setting)
