#!/usr/bin/env bash
# The project's test command (the README's second command): every test, on a
# fresh machine, with nothing installed by hand.
#
#   1. the library, relecttest, examples, the relect command and the
#      deploy checks under the race detector, the monitoring kit's PromQL
#      checks (deploy/monitoring, a module of its own), then the fault
#      simulation at full size without the race detector (simulated time:
#      about a minute in all);
#   2. builds (or reuses) kube-apiserver and etcd from the Go module proxy
#      into .cache/ (cold: ~15 min on 2 cores; warm: under a second);
#   3. the real-control-plane scenarios in the e2e module;
#   4. the side-by-side benchmark against plain client-go in its short mode
#      (≈ 3.5 min; prints the table; docs/performance.md has the full mode).
#
# RELECT_SKIP_E2E=1 runs only step 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== go test -race ./... (library, relecttest, examples, cmd/relect, deploy; the simulation at race size)"
go test -race -count=1 ./...

echo "== deploy/monitoring: the dashboard's and alerts' PromQL, with Prometheus' parsers"
(cd deploy/monitoring && go test -count=1 ./...)

echo "== the fault simulation at full size (10,000 schedules; RELECT_SIM_SCHEDULES for more)"
go test -count=1 -run 'TestSimulation$' -v . | grep -v '^=== \|^    --- \|^        --- '

if [[ "${RELECT_SKIP_E2E:-}" == 1 ]]; then
	echo "== RELECT_SKIP_E2E=1: skipping the real control plane"
	exit 0
fi

if [[ -d e2e ]]; then
	echo "== building kube-apiserver and etcd (cached)"
	KUBEBUILDER_ASSETS="$(hack/build-control-plane.sh)"
	export KUBEBUILDER_ASSETS
	echo "== e2e: real kube-apiserver + etcd"
	(cd e2e && RELECT_E2E_REQUIRED=1 go test -count=1 -timeout 30m ./...)
	echo "== e2e: relect vs plain client-go, side by side (RELECT_PERF=short; docs/performance.md)"
	perf_table="$(mktemp)"
	(cd e2e && RELECT_E2E_REQUIRED=1 RELECT_PERF=short RELECT_PERF_OUT="$perf_table" \
		go test -count=1 -timeout 15m -run '^TestPerformance$' .)
	cat "$perf_table"
	rm -f "$perf_table"
fi
