#!/usr/bin/env bash
# Build the differential tests' oracle (oracle/main.go: kubelet's own parsing, validation, feature
# gates, eviction thresholds and CPU, Topology and Memory Managers), once, cached outside the
# repository and keyed by its recipe: this script, the oracle's source, and the go.mod and go.sum
# that pin k8s.io/kubernetes for the test bed (molecule/resources/kube, read here, not copied in
# the repository: the oracle must answer for the very kubelet the test bed runs). The program is
# compiled in a scratch module made of those two files and the oracle's source; Go's module cache
# and build cache are the ones build-kube.sh fills, so after that build this takes seconds, and
# modules come through whatever proxy `go env GOPROXY` names.
# Prints the binary's path on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pin=$(cd "$here/../../molecule/resources/kube" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
key=$(cat "$0" "$pin/go.mod" "$pin/go.sum" "$here"/oracle/*.go | sha256sum | cut -c1-12)
out=$cache/oracle/$key/oracle
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { echo "build-oracle: Go is not installed" >&2; exit 1; }
echo "build-oracle: go build ./oracle (k8s.io/kubernetes as pinned in molecule/resources/kube/go.mod)" >&2
work=$cache/oracle/$key/src
rm -rf "$work" && mkdir -p "$work/oracle"
cp "$pin/go.mod" "$pin/go.sum" "$work/"
cp "$here"/oracle/*.go "$work/oracle/"
(cd "$work" && CGO_ENABLED=0 go build -mod=readonly -trimpath -gcflags=all=-dwarf=false -o "$out.tmp" ./oracle)
mv "$out.tmp" "$out"
rm -rf "$work"
echo "$out"
