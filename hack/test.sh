#!/usr/bin/env bash
# The project's test command (the README's second command): every test, on a
# fresh machine, with nothing installed by hand.
#
#   1. the library, relecttest, examples, the relect command, the deploy
#      checks and the fault simulation (simulation, a module of its own, at
#      race size) under the race detector, the monitoring kit's PromQL
#      checks (deploy/monitoring, a module of its own), the controller-runtime
#      adapter and its example under the race detector (ctrlrt and
#      examples/controller-runtime, modules of their own), then the fault
#      simulation at full size without the race detector (simulated time,
#      but many tests under the race detector: 15 min 38 s on 2 busy cores,
#      CONTRIBUTING.md, "How long each layer takes");
#   2. builds (or reuses) kube-apiserver and etcd from the Go module proxy
#      into .cache/ (cold: 6 to 11 min on 2 cores; warm: under a second);
#   3. the real-control-plane scenarios in the e2e module (the
#      controller-runtime scenario in its short mode, 10 changes of leader
#      per mode: docs/performance.md).
#      The e2e suite leaves the machine mostly idle (it waits on real lease
#      durations), so step 1 runs beside it: its output is shown when the
#      suite ends;
#   4. the side-by-side benchmark against plain client-go in its short mode
#      (≈ 7 min; prints the table; docs/performance.md has the full mode),
#      and TestAPF: a change of leader among 1,000 candidates under the
#      apiserver's default API Priority and Fairness sees no 429 (≈ 1 min),
#      alone, since it measures time and CPU.
#
# RELECT_SKIP_E2E=1 runs only step 1.
#
# Each step's output is also written to a log under .cache/test-logs/<run>/
# (RELECT_TEST_LOGS to choose another directory). A failing run ends with a
# one-screen summary: the step that failed, the failing tests, and where the
# full logs are — the step's output and, for the e2e steps, the control
# plane's logs and every candidate's stderr and history. A passing run
# deletes them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

logs="${RELECT_TEST_LOGS:-$PWD/.cache/test-logs/$(date +%Y%m%d-%H%M%S)-$$}"
mkdir -p "$logs"
step_name="" step_log=""

# step NAME LOG COMMAND...: runs COMMAND, its output shown and kept in LOG.
step() {
	step_name=$1 step_log=$logs/$2
	shift 2
	echo "== $step_name"
	"$@" 2>&1 | tee "$step_log"
}

fast_pid=""
summary() {
	local status=$?
	if [[ -n "$fast_pid" ]]; then
		kill -- "-$fast_pid" 2>/dev/null || true
	fi
	if [[ $status -eq 0 ]]; then
		rm -rf "$logs"
		return
	fi
	{
		echo
		echo "==================== hack/test.sh FAILED (exit $status) ===================="
		echo "step:   ${step_name:-before the first step}"
		if [[ -n "$step_log" && -f "$step_log" ]]; then
			local failed
			failed=$(grep -E -e '--- FAIL:|^FAIL|^panic:|\[build failed\]|test timed out|SAFETY VIOLATION|FENCING' "$step_log" |
				sed 's/^/        /' | head -25 || true)
			echo "failing tests and packages:"
			echo "${failed:-        (none named: see the log)}"
			echo "log of the step: $step_log"
		fi
		if [[ -d "$logs/e2e" ]]; then
			echo "e2e logs (control plane; each test's candidates: stderr.log, history.jsonl): $logs/e2e"
		fi
		echo "============================================================================"
	} >&2
}
trap summary EXIT

# The race suites get 30 min a package, not go test's 10: the root
# package's took over 10 min under the race detector on a loaded 2-core
# machine (hack/test-loaded.sh), and the alarm is no test's failure.
race_suite() {
	go test -race -count=1 -timeout 30m ./...
	(cd simulation && go test -race -count=1 -timeout 30m ./...)
}
simulation() {
	go test -count=1 -run '^TestSimulation(Line|LineGone|Shards)?$' -v ./simulation | grep -v '^=== \|^  *--- '
}
monitoring() {
	(cd deploy/monitoring && go test -count=1 ./...)
}
ctrlrt() {
	(cd ctrlrt && go test -race -count=1 -timeout 30m ./...)
	(cd examples/controller-runtime && go test -race -count=1 -timeout 30m ./...)
}
e2e_suite() {
	(cd e2e && RELECT_E2E_DIR="$logs/e2e" go test -count=1 -timeout 30m ./...)
}
e2e_benchmark() {
	(cd e2e && RELECT_E2E_DIR="$logs/e2e" RELECT_PERF=short RELECT_PERF_OUT="$logs/performance.md" \
		go test -count=1 -timeout 20m -run '^(TestPerformance|TestAPF)$' .)
}

# Step 1, each step's output in its own log. Run in the background beside
# the e2e suite, it leaves the name and log of the step it was in when it
# stopped in $logs/fast.last, for the summary.
fast_steps() {
	step "go test -race ./... (library, relecttest, examples, cmd/relect, deploy; the simulation module at race size)" race.log \
		race_suite
	step "deploy/monitoring: the dashboard's and alerts' PromQL, with Prometheus' parsers" monitoring.log \
		monitoring
	step "ctrlrt: controller-runtime in relect's terms, and its example (go test -race)" ctrlrt.log \
		ctrlrt
	step "the fault simulation at full size (10,000 schedules, 1,000 widened to post the line, and 100 in which the whole line leaves at once; RELECT_SIM_SCHEDULES for more), and 300 with shards and 300 with range shards (RELECT_SIM_SHARD_SCHEDULES=10000: the full size)" simulation.log \
		simulation
}

if [[ "${RELECT_SKIP_E2E:-}" == 1 || ! -d e2e ]]; then
	fast_steps
	if [[ -d e2e ]]; then echo "== RELECT_SKIP_E2E=1: skipping the real control plane"; fi
	exit 0
fi

step "building kube-apiserver and etcd (cached)" control-plane.log hack/build-control-plane.sh
KUBEBUILDER_ASSETS="$(tail -n 1 "$step_log")"
export KUBEBUILDER_ASSETS RELECT_E2E_REQUIRED=1 RELECT_E2E_KEEP=1

# The e2e suite waits on real lease durations and leaves two cores mostly
# idle (CONTRIBUTING.md), so step 1 runs beside it, in a process group of its
# own (set -m) that the summary can stop; its output is shown once it ends.
echo "== step 1 (race suites, monitoring, ctrlrt, the full simulation) runs beside the e2e suite; its output follows the suite's"
set -m
(
	trap 'printf "%s\n%s\n" "$step_name" "$step_log" >"$logs/fast.last"' EXIT
	fast_steps
) >"$logs/fast.out" 2>&1 &
fast_pid=$!
set +m
step "e2e: real kube-apiserver + etcd" e2e.log e2e_suite
fast_status=0
wait "$fast_pid" || fast_status=$?
fast_pid=""
cat "$logs/fast.out"
if [[ $fast_status -ne 0 ]]; then
	{ read -r step_name; read -r step_log; } <"$logs/fast.last"
	exit "$fast_status"
fi

# The benchmark measures time and CPU: it runs alone.
step "e2e: relect vs plain client-go, side by side (RELECT_PERF=short; docs/performance.md), and TestAPF" performance.log \
	e2e_benchmark
cat "$logs/performance.md"
