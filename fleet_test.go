package relect_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/fleetbench"
	"github.com/relect/relect/internal/race"
)

// TestFleetChanges measures what a change of leader costs a fleet of N
// candidates on one Lease, relect and the plain client-go loop side by side
// (internal/fleetbench), in simulated time: every call takes 1 ms, the
// durations are the defaults. For each N and implementation it plays
// graceful stops and crashes of the leader, each also with the apiserver
// shedding the burst of acquiring writes (429), and prints (with -v) the
// markdown report: calls per change beyond the steady background, the most
// calls in any 10 ms, how long no one leads, and the targets of issue 12.
// It fails only if the benchmark is broken — a change that brings no new
// leader, calls that the wire and the Lease API count differently — never
// on a figure. See docs/performance.md, "Changes of leader at fleet size
// (in memory)".
//
// Sizes: N = 2, 10, 50, 200, 5 changes per scenario, by default (about
// 4 s on 2 cores); with -short or -race, N ≤ 50 and 2 changes;
// RELECT_FLEET=full adds N = 1,000 (about 15 s); RELECT_FLEET=5000 runs
// N = 1,000 and 5,000 (the node limit of a cluster, hence of a DaemonSet),
// 2 changes per scenario. RELECT_FLEET_OUT=FILE
// writes the report, RELECT_FLEET_SVG=FILE the plot, RELECT_FLEET_CALLS=1
// logs every change's calls (relect's changes that miss a target are
// logged anyway).
func TestFleetChanges(t *testing.T) {
	sizes, changes, mode := fleetSizes(t)
	start := time.Now()
	var results []*fleetbench.Result
	for _, n := range sizes {
		for _, impl := range bench.Impls {
			synctest.Test(t, func(t *testing.T) {
				r, err := fleetbench.Run(fleetbench.Config{Impl: impl, N: n, Changes: changes})
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, r)
			})
			if t.Failed() {
				return
			}
		}
	}
	wall := time.Since(start)
	if os.Getenv("RELECT_FLEET_CALLS") == "1" {
		for _, r := range results {
			for _, ch := range r.Changes {
				t.Log("\n" + ch.Log())
			}
		}
	} else {
		for _, ch := range fleetbench.Missed(results) {
			t.Log("a change that misses a target:\n" + ch.Log())
		}
	}

	report := fmt.Sprintf("relect vs the client-go loop (elastic-agent PR #4542), changes of leader on one in-memory Lease, "+
		"simulated time (every call 1 ms; LD 15s / RD 10s / RP 2s); one run of `%s` in %v on %s.\n\n%s",
		mode, wall.Round(100*time.Millisecond), fleetMachine(), fleetbench.Report(results))
	t.Log("\n" + report)
	for env, content := range map[string]string{"RELECT_FLEET_OUT": report, "RELECT_FLEET_SVG": fleetbench.Plot(results)} {
		if path := os.Getenv(env); path != "" {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// fleetSizes returns the fleet sizes and changes per scenario of this run,
// and the command that runs it.
func fleetSizes(t *testing.T) (sizes []int, changes int, command string) {
	const cmd = "go test -count=1 -run '^TestFleetChanges$' -v ."
	files := ""
	for _, env := range []string{"RELECT_FLEET_OUT", "RELECT_FLEET_SVG", "RELECT_FLEET_CALLS"} {
		if v := os.Getenv(env); v != "" {
			files += env + "=" + v + " "
		}
	}
	switch mode := os.Getenv("RELECT_FLEET"); {
	case mode == "full":
		return []int{2, 10, 50, 200, 1000}, 5, "RELECT_FLEET=full " + files + cmd
	case mode == "5000":
		return []int{1000, 5000}, 2, "RELECT_FLEET=5000 " + files + cmd
	case mode != "":
		t.Fatalf("RELECT_FLEET=%q: want full, 5000, or nothing", mode)
	case race.Enabled:
		// The race detector allows 8,128 goroutines, and slows the
		// fleets about tenfold.
		return []int{2, 10, 50}, 2, files + strings.Replace(cmd, "-count=1", "-race -count=1", 1)
	case testing.Short():
		return []int{2, 10, 50}, 2, files + strings.Replace(cmd, "-v", "-short -v", 1)
	}
	return []int{2, 10, 50, 200}, 5, files + cmd
}

// fleetMachine describes where the benchmark ran.
func fleetMachine() string {
	cpu := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	built := ""
	if race.Enabled {
		built = " — built with -race"
	}
	return fmt.Sprintf("%d CPUs (%s); %s %s/%s%s", runtime.NumCPU(), cpu, runtime.Version(), runtime.GOOS, runtime.GOARCH, built)
}
