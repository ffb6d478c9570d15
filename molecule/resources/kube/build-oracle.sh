#!/usr/bin/env bash
# Build the differential tests' oracle (oracle/main.go: kubelet's own parsing, validation and Memory
# Manager, from the k8s.io/kubernetes module pinned in go.mod), once, cached outside the repository
# and keyed by go.mod, go.sum, the oracle's source and this script. It compiles kubelet packages
# with build-kube.sh's flags, so after that build Go's cache makes it a matter of seconds.
# Prints the binary's path on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
key=$(cat "$0" "$here/go.mod" "$here/go.sum" "$here"/oracle/*.go | sha256sum | cut -c1-12)
out=$cache/oracle/$key/oracle
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { echo "build-oracle: Go is not installed" >&2; exit 1; }
echo "build-oracle: go build ./oracle" >&2
mkdir -p "$(dirname "$out")"
(cd "$here" && CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$out.tmp" ./oracle)
mv "$out.tmp" "$out"
echo "$out"
