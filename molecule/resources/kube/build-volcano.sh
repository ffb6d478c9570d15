#!/usr/bin/env bash
# Build Volcano's scheduler and controller manager from the volcano.sh/volcano Go module at a
# pinned release (through the Go module proxy), once, cached outside the repository and keyed by
# this script. Prints the folder holding them on stdout:
#   vc-scheduler, vc-controller-manager, volcano-development.yaml (the release's own manifest)
#
# The module's go.mod replaces volcano.sh/apis with its staging folder, which the module zip
# leaves out: the build takes the published volcano.sh/apis release instead. Static binaries
# (CGO off), as the release images' alpine base runs them.
set -euo pipefail

cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
module=volcano.sh/volcano
version=v1.14.1
apis_version=v1.14.0
key=$(sha256sum "$0" | cut -c1-12)
out=$cache/volcano/$key
log() { echo "build-volcano: $*" >&2; }

if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is not installed; the test bed builds Volcano with it"; exit 1; }
mkdir -p "$cache/volcano"
work=$(mktemp -d "$cache/volcano/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "go build $module $version: vc-scheduler, vc-controller-manager (minutes the first time)"
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
mkdir -p "$work/out"
(cd "$work/src" && go mod edit -replace="volcano.sh/apis=volcano.sh/apis@$apis_version" \
  && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$work/out/" \
       ./cmd/scheduler ./cmd/controller-manager)
# the release images' names for them
for cmd in scheduler controller-manager; do mv "$work/out/$cmd" "$work/out/vc-$cmd"; done
cp "$work/src/installer/volcano-development.yaml" "$work/out/"

touch "$work/out/done"
rm -rf "$out" && mv "$work/out" "$out"
ls -1dt "$cache"/volcano/*/ 2>/dev/null | grep -v '/build\.' | tail -n +3 | xargs -r rm -rf
log "done: $out"
echo "$out"
