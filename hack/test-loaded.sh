#!/usr/bin/env bash
# The time-dependent suites under load: the relect command's
# (./cmd/relect/...) and the controller-runtime adapter's (ctrlrt, a module
# of its own) with the race detector three times each, and the root
# package's once, while one busy loop per core keeps every core saturated.
# A test that only passes on an idle machine fails here more often than in
# CI; 0 failures is the bar (CONTRIBUTING.md, "Tests on a busy machine").
#
# RELECT_LOADED_COUNT=N runs the command's and ctrlrt's suites N times
# (default 3); RELECT_LOADED_BUSY=N starts N busy loops (default: one per
# core, nproc). Each suite's output is kept in a log under
# .cache/test-loaded/<run>/ (RELECT_TEST_LOGS to choose another directory),
# deleted when every suite passed. Exits 1 if any suite failed, after a
# summary: each suite's status, wall time, failing tests and its five
# slowest tests (-v). Each suite has 30 min (-timeout), not go test's
# default 10, which the -count runs of a package share.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

count="${RELECT_LOADED_COUNT:-3}"
busy="${RELECT_LOADED_BUSY:-$(nproc)}"
logs="${RELECT_TEST_LOGS:-$PWD/.cache/test-loaded/$(date +%Y%m%d-%H%M%S)-$$}"
mkdir -p "$logs"

# The busy loops: plain shell loops, one process each, killed on any exit.
loops=()
stop_loops() {
	for pid in "${loops[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${loops[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM

failed=0
results=()

# suite NAME DIR ARGS...: runs go test ARGS in DIR, its output in a log;
# records its status, wall time and failing tests.
suite() {
	local name=$1 dir=$2 log status start took
	shift 2
	log=$logs/$name.log
	echo "== $name: (cd $dir && go test $*)"
	start=$(date +%s)
	status=0
	(cd "$dir" && go test "$@") >"$log" 2>&1 || status=$?
	took=$(($(date +%s) - start))
	if [[ $status -eq 0 ]]; then
		results+=("ok    $name  ${took}s")
	else
		failed=1
		results+=("FAIL  $name  ${took}s  (exit $status, log: $log)")
		grep -E '^(\s*--- FAIL|panic:|FAIL\s)' "$log" | sort | uniq -c | sed 's/^/        /' >"$log.fails" || true
	fi
	tail -n 3 "$log"
	# The slowest tests, with -v: where a suite's time goes.
	grep -E '^--- (PASS|FAIL): ' "$log" | sed -E 's/^--- (PASS|FAIL): (\S+) \(([0-9.]+)s\)$/\3 \2/' |
		sort -rn | head -n 5 | awk '{printf "        %7.1f s  %s\n", $1, $2}' >"$log.slowest" || true
}

# Build first, without the loops: what is measured is the tests, not the
# compiler's share of the cores.
echo "== building the test binaries"
go test -race -count=1 -run '^$' ./cmd/relect/... . >/dev/null
(cd ctrlrt && go test -race -count=1 -run '^$' ./... >/dev/null)

echo "== $busy busy loops"
for _ in $(seq "$busy"); do
	(while :; do :; done) &
	loops+=($!)
done

start=$(date +%s)
suite cmd "." -race -count="$count" -timeout=30m -v ./cmd/relect/...
suite ctrlrt "ctrlrt" -race -count="$count" -timeout=30m -v ./...
suite root "." -race -count=1 -timeout=30m -v .
took=$(($(date +%s) - start))
stop_loops

echo
echo "== under $busy busy loops, $took s in all:"
for r in "${results[@]}"; do
	echo "  $r"
	name=$(awk '{print $2}' <<<"$r")
	if [[ -s "$logs/$name.log.fails" ]]; then
		cat "$logs/$name.log.fails"
	fi
	if [[ -s "$logs/$name.log.slowest" ]]; then
		echo "      slowest:"
		cat "$logs/$name.log.slowest"
	fi
done
if [[ $failed -ne 0 ]]; then
	echo "FAIL: logs kept in $logs"
	exit 1
fi
rm -rf "$logs"
echo "PASS: 0 failures"
