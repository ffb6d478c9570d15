#!/usr/bin/env bash
# Build the pods fingerprint oracle (main.go: the podfingerprint Go module that scheduler-plugins
# v0.34.7 signs pods with, pinned by this folder's go.mod and go.sum), once, cached outside the
# repository and keyed by its recipe (this script, main.go, go.mod, go.sum). It needs two small
# modules through whatever proxy `go env GOPROXY` names; a cold build took 6 s.
# Prints the binary's path on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
key=$(cat "$0" "$here/main.go" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
out=$cache/podfingerprint/$key/podfingerprint
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { echo "podfingerprint/build.sh: Go is not installed" >&2; exit 1; }
echo "podfingerprint/build.sh: go build (github.com/k8stopologyawareschedwg/podfingerprint as pinned in go.mod)" >&2
mkdir -p "$(dirname "$out")"
# bounded: a module proxy that stops answering ends the build instead of hanging it
(cd "$here" && CGO_ENABLED=0 timeout 300 go build -mod=readonly -trimpath -o "$out.tmp" .)
mv "$out.tmp" "$out"
echo "$out"
