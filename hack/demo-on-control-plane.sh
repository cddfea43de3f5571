#!/usr/bin/env bash
# Runs examples/demo against the project's own real control plane
# (kube-apiserver v1.37.2 + etcd v3.7.3 on 127.0.0.1): builds the binaries if
# needed (cold 6 to 11 min, warm <1 s), starts them, runs the demo with any extra
# flags given here, and stops them.
#
#   hack/demo-on-control-plane.sh [-candidates 5 ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBEBUILDER_ASSETS="$(hack/build-control-plane.sh)"
export KUBEBUILDER_ASSETS
dir="$(mktemp -d)"
trap 'kill "$cp" 2>/dev/null; wait "$cp" 2>/dev/null; rm -rf "$dir"' EXIT

(cd e2e && go build -o "$dir/controlplane" ./cmd/controlplane)
"$dir/controlplane" -out "$dir/kubeconfig" > "$dir/ready" 2> "$dir/controlplane.log" &
cp=$!
for _ in $(seq 1 120); do
	grep -q relect-controlplane-ready "$dir/ready" 2>/dev/null && break
	kill -0 "$cp" 2>/dev/null || { tail -20 "$dir/controlplane.log" >&2; echo "the control plane failed to start" >&2; exit 1; }
	sleep 0.5
done
grep -q relect-controlplane-ready "$dir/ready" || { echo "the control plane did not start in 60s" >&2; exit 1; }
go run ./examples/demo -kubeconfig "$dir/kubeconfig" "$@"
