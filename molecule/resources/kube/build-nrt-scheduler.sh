#!/usr/bin/env bash
# Build the NodeResourceTopology-aware second scheduler the test bed runs: kube-scheduler with
# scheduler-plugins' NodeResourceTopologyMatch registered, from the sigs.k8s.io/scheduler-plugins Go
# module at a pinned release (through the Go module proxy), once, cached outside the repository and
# keyed by this script. Prints the folder holding:
#   nrt-scheduler                 the scheduler binary
#   noderesourcetopology-crd.yaml the NodeResourceTopology CRD from its own API module
#
# Why not the 1.36 modules the rest of the cluster is built from (build-kube.sh): the plugin at
# v0.34.7 does not compile against them (its podprovider uses framework.Handle, which moved out of
# k8s.io/kubernetes/pkg/scheduler/framework; controller-runtime v0.22 lacks client-go 1.36's
# HasSyncedChecker). So it keeps its own 1.34 graph: a v1.34 kube-scheduler against the bed's v1.36
# API server, two minors apart (kube-scheduler's supported skew is one), and the README says which
# pair is proven.
# Why Kubernetes v1.34.4 and not the v1.34.7 the release pins: several k8s.io staging modules at
# v0.34.7 are refused by the module proxy here (cluster-bootstrap, csi-translation-lib); v0.34.4 is
# the newest patch of which every staging module the build needs is served. legacy-cloud-providers
# is named in the release's replace lines but no package of it is built, and no v0.34 of it is served.
# Only the one plugin is registered (cmd/nrt-scheduler, written here): the release's cmd/scheduler
# also compiles a dozen other plugins and their dependencies the bed never runs.
set -euo pipefail

cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
module=sigs.k8s.io/scheduler-plugins
version=v0.34.7
kube_version=v1.34.4
api_module=github.com/k8stopologyawareschedwg/noderesourcetopology-api
api_version=v0.1.2
key=$(sha256sum "$0" | cut -c1-12)
out=$cache/nrt-scheduler/$key
log() { echo "build-nrt-scheduler: $*" >&2; }
# each Go step's bound: a cold build fetches the Kubernetes graph and compiles it (minutes), and a
# proxy that stops answering must end the build, not hang it (timeout --foreground: in the caller's
# process group, which the run's time guard ends)
go_seconds=1200

if [ -f "$out/done" ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is not installed; the test bed builds the scheduler with it"; exit 1; }
mkdir -p "$cache/nrt-scheduler"
work=$(mktemp -d "$cache/nrt-scheduler/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# dir MODULE VERSION: where the module proxy's copy of the module is unpacked
dir() {
  (cd "$work" && GOFLAGS=-mod=mod timeout --foreground "$go_seconds" go mod download -json "$1@$2" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
}

log "go build $module $version with Kubernetes $kube_version: nrt-scheduler (minutes the first time)"
cp -r "$(dir "$module" "$version")" "$work/src" && chmod -R u+w "$work/src"
edits=()
for staging in $(sed -n 's/^[[:space:]]*\(k8s\.io\/[a-z0-9-]*\) => k8s\.io\/.*/\1/p' "$work/src/go.mod"); do
  case $staging in
    k8s.io/kubernetes) edits+=(-require="$staging@$kube_version" -replace="$staging=$staging@$kube_version") ;;
    k8s.io/legacy-cloud-providers) edits+=(-dropreplace="$staging") ;;
    *) edits+=(-replace="$staging=$staging@v0.${kube_version#v1.}") ;;
  esac
done
mkdir -p "$work/src/cmd/nrt-scheduler" "$work/out"
cat > "$work/src/cmd/nrt-scheduler/main.go" <<'EOF'
// kube-scheduler with NodeResourceTopologyMatch, and the plugin's argument types in its scheme.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/noderesourcetopology"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand(app.WithPlugin(noderesourcetopology.Name, noderesourcetopology.New))))
}
EOF
(cd "$work/src" && go mod edit "${edits[@]}" \
  && CGO_ENABLED=0 GOFLAGS=-mod=mod timeout --foreground "$go_seconds" go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w \
     -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 \
     -X k8s.io/component-base/version.gitMinor=$(echo "$kube_version" | cut -d. -f2)" \
     -o "$work/out/nrt-scheduler" ./cmd/nrt-scheduler)
cp "$(dir "$api_module" "$api_version")/manifests/crd.yaml" "$work/out/noderesourcetopology-crd.yaml"
chmod u+w "$work/out/noderesourcetopology-crd.yaml"

touch "$work/out/done"
rm -rf "$out" && mv "$work/out" "$out"
ls -1dt "$cache"/nrt-scheduler/*/ 2>/dev/null | grep -v '/build\.' | tail -n +3 | xargs -r rm -rf
log "done: $out"
echo "$out"
