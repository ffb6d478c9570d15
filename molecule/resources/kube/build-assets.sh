#!/usr/bin/env bash
# Everything the cluster scenario runs besides the guest image, built once and cached outside the
# repository keyed by the recipe: the Kubernetes binaries (build-kube.sh), etcd from Debian's
# etcd-server package, and the container images: pause compiled from kubernetes' own
# build/pause/linux/pause.c, a workload image holding Debian's busybox-static, kube-proxy with
# Debian's nftables, and the collection's node agent (agent/Containerfile's recipe: the packages of
# agent/packages.txt, stubs generated from the pinned k8s.io/kubelet module by the generator of
# agent/stub-generator.txt, the agent's code and module_utils). Container images cannot be pulled
# here, so images are Debian packages unpacked with what they depend on, written as OCI archives
# for `ctr images import`. What the guests need is also packed into a
# read-only ext4 disk, guest.img (label numa-assets), that every guest gets attached at boot: reading
# it is far quicker than copying through SSH into an emulated guest. Prints the assets folder on stdout.
#
# --go-only: only the four Go builds, printing nothing (tools/run-tiers starts them this way when a
# run begins, beside its first tiers; vm-bed's own call then waits for each where it is under way).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
mirror=$(bash "$here/../../../tools/debian-mirror")  # the machine's apt mirror, or NUMA_KUBE_DEBIAN_MIRROR
suite=trixie
debs=(etcd-server=3.5.16-4 busybox-static=1:1.37.0-6+b9)
pause_tag=3.10.2
# the Prometheus that prometheus-operator runs in the cluster (operator and reloader: build-stacks.sh)
prometheus_deb=prometheus=2.53.3+ds1-2
prometheus_image=numa.kube/prometheus:v2.53.3
# the tag of the Volcano images (build-volcano.sh builds that release)
volcano_tag=v1.14.1
# the tag of the NodeResourceTopology scheduler's image (build-nrt-scheduler.sh: scheduler-plugins' release)
nrt_scheduler_tag=v0.34.7
log() { echo "build-assets: $*" >&2; }

# shellcheck source=../../../tools/steps.sh
source "$here/../../../tools/steps.sh"

# The four Go builds at once: on a cold machine each spends part of its time fetching modules and
# linking on one core, which the others' compilation fills. Each prints its folder.
# The compiler collects garbage less often (GOGC 400; GOMEMLIMIT keeps each Go process under 2 GiB,
# the largest, the link, peaked at 1.5 GiB either way): a cold build of kubelet alone took 140-143 s
# against 169-176 s with Go's default 100 (docs/ci-times.md). It changes no output, so the builds'
# cache keys stay as they are. Each build also compiles without DWARF (-gcflags=all=-dwarf=false,
# which -ldflags=-s -w would strip at the link anyway): the standard library alone took 31 s of CPU
# against 37 s with it (docs/ci-times.md); the oracle of tests/differential is built the same way,
# so it finds Kubernetes' packages compiled.
export GOGC=${GOGC:-400} GOMEMLIMIT=${GOMEMLIMIT:-2GiB}
# One build of each at a time: a second call waits on the first's lock, then finds its output made.
mkdir -p "$cache"
built=$(mktemp -d)
pids=()
# (the early builds' steps are named apart: vm-bed's call times its wait for them under the plain name)
label=
[ "${1:-}" != --go-only ] || label=", beside the first tiers"
for build in kube stacks volcano nrt-scheduler; do
  step "go build ($build$label)" flock "$cache/.go-build-$build.lock" bash "$here/build-$build.sh" > "$built/$build" &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
if [ "${1:-}" = --go-only ]; then
  rm -rf "$built"
  exit "$failed"
fi
kube=$(cat "$built/kube") stacks=$(cat "$built/stacks") volcano=$(cat "$built/volcano")
nrt_scheduler=$(cat "$built/nrt-scheduler")
rm -rf "$built"
[ "$failed" = 0 ] || { log "a Go build failed (its lines above say which)"; exit 1; }
repo=$(cd "$here/../../.." && pwd)
# the agent image follows the collection's code, so its sources are part of the key
agent_sources=$(cd "$repo" && find agent plugins/module_utils -type f \( -name '*.py' -o -name '*.txt' -o -name '*.sh' \) \
  ! -path '*/__pycache__/*' | sort)
key=$( (cat "$0" "$here/oci_image.py"; echo "$kube" "$stacks" "$volcano" "$nrt_scheduler" "$nrt_scheduler_tag" "${debs[@]}" "$suite" "$prometheus_deb"; cd "$repo" && cat $agent_sources) \
  | sha256sum | cut -c1-12)
out=$cache/assets/$key
if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
work=$(mktemp -d "$cache/assets.XXXXXX")
trap 'rm -rf "$work"' EXIT

phase "debian packages"; log "download ${debs[*]} from Debian $suite"
apt_dir=$cache/apt-$suite
mkdir -p "$apt_dir/lists/partial"
echo "deb $mirror $suite main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o Dir::State::status=/dev/null -o Debug::NoLocking=1
          -o APT::Sandbox::User=root -qq)
apt-get "${apt_opts[@]}" update
debs_dir=$cache/debs-$suite
mkdir -p "$debs_dir"
# fetch PKG[=VERSION]...: the .deb files, kept across builds; prints their paths
fetch() {
  local pin name version file
  for pin in "$@"; do
    name=${pin%%=*}
    version=$(if [ "$pin" != "$name" ]; then echo "${pin#*=}"; else
      apt-cache "${apt_opts[@]}" show --no-all-versions "$name" | sed -n 's/^Version: //p'; fi)
    file=$(ls "$debs_dir/${name}_${version//:/%3a}_"*.deb 2>/dev/null | head -n 1 || true)
    if [ -z "$file" ]; then
      (cd "$debs_dir" && apt-get "${apt_opts[@]}" download "$name=$version") >&2
      file=$(ls "$debs_dir/${name}_${version//:/%3a}_"*.deb 2>/dev/null | head -n 1 || true)
    fi
    [ -n "$file" ] || { log "could not download $name=$version"; echo /nonexistent/$name.deb; continue; }
    echo "$file"
  done
}
# Packages no image here runs (configuration tooling that a recursive Depends drags in).
# Prometheus' package also pulls in its old console's fonts and JavaScript and adduser for its
# maintainer scripts: the image serves the API only and never runs those scripts.
not_needed=(debconf cdebconf dpkg tar tzdata libdebian-installer4 libnewt0.52 libslang2 libtextwrap1
            adduser fonts-glyphicons-halflings libjs-bootstrap4 libjs-eonasdan-bootstrap-datetimepicker
            libjs-jquery libjs-jquery-hotkeys libjs-moment libjs-moment-timezone libjs-mustache
            libjs-popper.js libjs-rickshaw)
# unpack DIR PKG[=VERSION]...: the packages and everything they depend on, unpacked into DIR, with
# the /bin, /lib... links of a merged-/usr system (what base-files would lay down)
unpack() {
  local dir=$1 pin; shift
  local names=() pins=()
  for pin in "$@"; do names+=("${pin%%=*}"); pins+=("$pin"); done
  local closure
  closure=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
              --no-breaks --no-replaces --no-enhances "${names[@]}" | grep -v '^[ <]' | sort -u \
            | grep -vxF -f <(printf '%s\n' "${not_needed[@]}" "${names[@]}") || true)
  mkdir -p "$dir/usr/bin" "$dir/usr/sbin" "$dir/usr/lib" "$dir/usr/lib64"
  for link in bin sbin lib lib64; do ln -sfn "usr/$link" "$dir/$link"; done
  for deb in $(fetch "${pins[@]}" $closure); do dpkg-deb -x "$deb" "$dir"; done
}
# the packages of a list file (comments and blank lines skipped)
list() { grep -v '^ *\(#\|$\)' "$1"; }

for deb in $(fetch "${debs[@]}"); do dpkg-deb -x "$deb" "$work/x"; done

phase "pause"; log "compile pause $pause_tag from k8s.io/kubernetes $(basename "$kube" | cut -d- -f1)"
src=$(cd "$here" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
mkdir -p "$work/pause"
gcc -Os -static -DVERSION="v$pause_tag" -o "$work/pause/pause" "$src"
strip "$work/pause/pause"

mkdir -p "$work/busybox/bin"
cp "$work/x/usr/bin/busybox" "$work/busybox/bin/busybox"
for tool in sh sleep cat ls grep; do ln -s busybox "$work/busybox/bin/$tool"; done

kube_version=$(basename "$kube" | cut -d- -f1)
phase "kube-proxy image"; log "kube-proxy $kube_version image with Debian's nftables"
unpack "$work/kube-proxy" nftables
install -D -m 0755 "$kube/kube-proxy" "$work/kube-proxy/usr/local/bin/kube-proxy"

phase "node agent image"; log "node agent image (agent/Containerfile's recipe)"
unpack "$work/agent" $(list "$repo/agent/packages.txt")
unpack "$work/generator" $(list "$repo/agent/stub-generator.txt")
# the generator is trixie's, run on this host through its own dynamic loader and libraries
loader() {
  printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$work/generator/usr/lib64/ld-linux-x86-64.so.2" \
    "$work/generator/usr/lib/x86_64-linux-gnu" "$work/generator/usr/bin/$1" > "$work/$1"
  chmod +x "$work/$1"
}
loader protoc
loader grpc_python_plugin
kubelet_module=$(cd "$here" && go mod download -json k8s.io/kubelet | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
opt=$work/agent/opt/numa-agent
mkdir -p "$opt/ansible_collections/numa/kube/plugins"
PROTOC=$work/protoc GRPC_PYTHON_PLUGIN=$work/grpc_python_plugin \
  sh "$repo/agent/generate-stubs.sh" "$kubelet_module" "$work/stubs"
cp -r "$repo/plugins/module_utils" "$opt/ansible_collections/numa/kube/plugins/"
cp -r "$repo/agent/numa_agent" "$opt/"
cp -r "$work/stubs/numa_agent/." "$opt/numa_agent/"
find "$opt" -name __pycache__ -prune -exec rm -rf {} +

phase "Prometheus image"; log "Prometheus image: Debian's prometheus and prometheus-operator's config reloader"
unpack "$work/prometheus" "$prometheus_deb"
install -D -m 0755 "$stacks/prometheus-operator/prometheus-config-reloader" \
  "$work/prometheus/usr/bin/prometheus-config-reloader"
mkdir -p "$work/prometheus/prometheus"

phase "OCI archives and guest.img"
guest=$out.tmp/guest
mkdir -p "$guest"
# pause under the test bed's own name: prepare-node.sh makes it the guests' containerd sandbox image
python3 "$here/oci_image.py" "$work/pause" "numa.kube/pause:$pause_tag" '["/pause"]' "$guest/pause.tar"
python3 "$here/oci_image.py" "$work/busybox" "numa.kube/busybox:test" '["/bin/sleep", "infinity"]' \
  "$guest/busybox.tar"
python3 "$here/oci_image.py" "$work/kube-proxy" "numa.kube/kube-proxy:$kube_version" \
  '["/usr/local/bin/kube-proxy"]' "$guest/kube-proxy.tar"
python3 "$here/oci_image.py" "$work/agent" "numa.kube/node-agent:test" '["python3", "-m", "numa_agent"]' \
  "$guest/node-agent.tar" '["PYTHONPATH=/opt/numa-agent", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"]'
python3 "$here/oci_image.py" "$work/prometheus" "$prometheus_image" '["/usr/bin/prometheus"]' "$guest/prometheus.tar"
# Volcano's scheduler and controllers as its release images lay them out (/vc-<name>, the
# entrypoint), tagged as numa.kube.volcano_stack's image_registry and image_tag name them
for component in scheduler controller-manager; do
  install -D -m 0755 "$volcano/vc-$component" "$work/vc-$component/vc-$component"
  python3 "$here/oci_image.py" "$work/vc-$component" "numa.kube/vc-$component:$volcano_tag" "[\"/vc-$component\"]" \
    "$guest/vc-$component.tar"
done
# kube-scheduler with NodeResourceTopologyMatch, at /nrt-scheduler as numa.kube.topology_scheduler runs it
install -D -m 0755 "$nrt_scheduler/nrt-scheduler" "$work/nrt-scheduler/nrt-scheduler"
python3 "$here/oci_image.py" "$work/nrt-scheduler" "numa.kube/nrt-scheduler:$nrt_scheduler_tag" '["/nrt-scheduler"]' \
  "$guest/nrt-scheduler.tar"
cp "$kube/kubelet" "$kube/kubeadm" "$guest/"
echo "$pause_tag" > "$guest/pause-tag"
cp "$kube/kube-apiserver" "$kube/kube-controller-manager" "$kube/kube-scheduler" "$work/x/usr/bin/etcd" "$out.tmp/"
cp -r "$stacks/prometheus-operator" "$out.tmp/"
cp "$volcano/volcano-development.yaml" "$nrt_scheduler/noderesourcetopology-crd.yaml" "$out.tmp/"
size_mb=$(( $(du -sm "$guest" | cut -f1) * 5 / 4 + 16 ))
/usr/sbin/mkfs.ext4 -q -F -L numa-assets -d "$guest" "$out.tmp/guest.img" "${size_mb}M"
phase ""
touch "$out.tmp/done"
rm -rf "$out" && mv "$out.tmp" "$out"
# older builds (each agent change makes one) go, but the newest few stay for branches in flight
ls -1dt "$cache"/assets/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
log "done: $out"
echo "$out"
