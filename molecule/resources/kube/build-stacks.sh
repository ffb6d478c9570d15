#!/usr/bin/env bash
# Build the cluster stacks' own components the test bed runs, from their Go modules at pinned
# releases (through the Go module proxy), once, cached outside the repository and keyed by this
# script. Prints the folder holding them on stdout:
#   prometheus-operator/{operator,prometheus-config-reloader,crds/*.yaml}
#
# prometheus-operator's go.mod replaces its two nested modules (pkg/apis/monitoring, pkg/client)
# with folders the module zip leaves out; its require lines pin both at the same release, so the
# build drops the replaces and takes them from the proxy. Without the version ldflag the operator
# would not know its own version (and names a reloader image tagged "v").
set -euo pipefail

cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
operator_module=github.com/prometheus-operator/prometheus-operator
operator_version=v0.88.0
key=$(sha256sum "$0" | cut -c1-12)
out=$cache/stacks/$key
log() { echo "build-stacks: $*" >&2; }

if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is not installed; the test bed builds the stacks with it"; exit 1; }
mkdir -p "$cache/stacks"
work=$(mktemp -d "$cache/stacks/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# src MODULE VERSION: a writable copy of the module's source
src() {
  local dir
  dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$1@$2" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  cp -r "$dir" "$work/src-$(basename "$1")"
  chmod -R u+w "$work/src-$(basename "$1")"
  echo "$work/src-$(basename "$1")"
}

log "go build $operator_module $operator_version: operator, prometheus-config-reloader (minutes the first time)"
po=$(src "$operator_module" "$operator_version")
(cd "$po" && go mod edit -dropreplace="$operator_module/pkg/apis/monitoring" -dropreplace="$operator_module/pkg/client" \
  && go mod download "$operator_module/pkg/apis/monitoring" "$operator_module/pkg/client" \
  && mkdir -p "$work/out/prometheus-operator" \
  && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -gcflags=all=-dwarf=false \
       -ldflags "-s -w -X github.com/prometheus/common/version.Version=${operator_version#v}" \
       -o "$work/out/prometheus-operator/" ./cmd/operator ./cmd/prometheus-config-reloader)
mkdir -p "$work/out/prometheus-operator/crds"
cp "$po"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$work/out/prometheus-operator/crds/"

touch "$work/out/done"
rm -rf "$out" && mv "$work/out" "$out"
ls -1dt "$cache"/stacks/*/ 2>/dev/null | grep -v '/build\.' | tail -n +3 | xargs -r rm -rf
log "done: $out"
echo "$out"
