#!/usr/bin/env bash
# Build the real Kubernetes components the test bed runs from the k8s.io/kubernetes Go module
# (through the Go module proxy), once, cached outside the repository and keyed by this folder's
# go.mod, go.sum and this script. Prints the folder holding the binaries on stdout.
#
# kubelet and kube-apiserver run today; kubeadm re-renders a node's kubelet configuration as
# `kubeadm upgrade node` does; kube-scheduler, kube-controller-manager and kube-proxy are the rest
# of the cluster the cluster stacks are deployed into. They share one module graph, so they are
# built together and one cold build covers them all.
#
# `go install k8s.io/kubernetes/cmd/kubelet@vX` cannot work: that module's go.mod replaces its
# staging modules with folders of its own repository. go.mod here requires k8s.io/kubernetes and
# replaces each staging module with its published v0.<minor>.<patch> build instead.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${NUMA_KUBE_CACHE:-$HOME/.cache/numa-kube}
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/go.mod")
key=$(cat "$0" "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
out=$cache/kube/$version-$key
log() { echo "build-kube: $*" >&2; }

commands=(kubelet kube-apiserver kubeadm kube-scheduler kube-controller-manager kube-proxy)
missing=0
for cmd in "${commands[@]}"; do [ -x "$out/$cmd" ] || missing=1; done
if [ "$missing" = 0 ]; then
  echo "$out"
  exit 0
fi
command -v go >/dev/null || { log "Go is not installed; the test bed builds Kubernetes with it"; exit 1; }

minor=${version#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean"
mkdir -p "$out.tmp"
# One go build for all of them: the packages they share are compiled once, the compiler works on
# several commands' packages at a time and each link overlaps the others' compilation.
log "go build ${commands[*]} from k8s.io/kubernetes $version (several minutes the first time)"
packages=()
for cmd in "${commands[@]}"; do packages+=("k8s.io/kubernetes/cmd/$cmd"); done
(cd "$here" && CGO_ENABLED=0 go build -mod=readonly -trimpath -gcflags=all=-dwarf=false -ldflags "$ldflags" \
  -o "$out.tmp/" "${packages[@]}")
rm -rf "$out" && mv "$out.tmp" "$out"
log "done: $out"
echo "$out"
