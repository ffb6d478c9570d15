#!/bin/sh
# Generate the Python gRPC stubs of the kubelet APIs the agent speaks from the k8s.io/kubelet Go
# module (the folder of k8s.io/kubelet@vX, e.g. its zip from the Go module proxy unpacked), into
# OUT/numa_agent/kubelet.
#   generate-stubs.sh KUBELET_MODULE_DIR OUT
# PROTOC and GRPC_PYTHON_PLUGIN name the generator (defaults: protoc, /usr/bin/grpc_python_plugin).
set -eu
module=$1
out=$2
protoc=${PROTOC:-protoc}
plugin=${GRPC_PYTHON_PLUGIN:-/usr/bin/grpc_python_plugin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for api in deviceplugin/v1beta1 podresources/v1; do
  # the proto sits at the path its stubs import each other by: numa_agent/kubelet/<api>/api.proto
  mkdir -p "$work/proto/numa_agent/kubelet/$api"
  cp "$module/pkg/apis/$api/api.proto" "$work/proto/numa_agent/kubelet/$api/api.proto"
  mkdir -p "$out"
  $protoc -I "$work/proto" --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
    "numa_agent/kubelet/$api/api.proto"
done
