#!/usr/bin/env bash
# Everything the kubelet scenario runs besides the guest image, built once and cached outside the
# repository keyed by the recipe: kubelet and kube-apiserver (build-kube.sh), etcd from Debian's
# etcd-server package, the pause image compiled from kubernetes' own build/pause/linux/pause.c, and
# a workload image holding Debian's busybox-static. Container images cannot be pulled here, so both
# are written as OCI archives for `ctr images import`. Prints the assets folder on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
mirror=${NUMA_KUBE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=trixie
debs=(etcd-server=3.5.16-4 busybox-static=1:1.37.0-6+b9)
pause_tag=3.10.2
log() { echo "build-assets: $*" >&2; }

kube=$(bash "$here/build-kube.sh")
key=$( (cat "$0" "$here/oci_image.py"; echo "$kube" "${debs[@]}" "$suite") | sha256sum | cut -c1-12)
out=$cache/assets/$key
if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
work=$(mktemp -d "$cache/assets.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "download ${debs[*]} from Debian $suite"
apt_dir=$cache/apt-$suite
mkdir -p "$apt_dir/lists/partial"
echo "deb $mirror $suite main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
apt-get "${apt_opts[@]}" update
(cd "$work" && apt-get "${apt_opts[@]}" download "${debs[@]}")
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done

log "compile pause $pause_tag from k8s.io/kubernetes $(basename "$kube" | cut -d- -f1)"
src=$(cd "$here" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
mkdir -p "$work/pause"
gcc -Os -static -DVERSION="v$pause_tag" -o "$work/pause/pause" "$src"
strip "$work/pause/pause"

mkdir -p "$work/busybox/bin"
cp "$work/x/usr/bin/busybox" "$work/busybox/bin/busybox"
for tool in sh sleep cat ls grep; do ln -s busybox "$work/busybox/bin/$tool"; done

mkdir -p "$out.tmp"
python3 "$here/oci_image.py" "$work/pause" "registry.k8s.io/pause:$pause_tag" '["/pause"]' "$out.tmp/pause.tar"
python3 "$here/oci_image.py" "$work/busybox" "numa.kube/busybox:test" '["/bin/sleep", "infinity"]' \
  "$out.tmp/busybox.tar"
cp "$kube/kubelet" "$kube/kube-apiserver" "$work/x/usr/bin/etcd" "$out.tmp/"
echo "$pause_tag" > "$out.tmp/pause-tag"
touch "$out.tmp/done"
rm -rf "$out" && mv "$out.tmp" "$out"
log "done: $out"
echo "$out"
