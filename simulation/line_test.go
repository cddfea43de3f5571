package simulation_test

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/relect/relect/internal/race"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/simulation/internal/sim"
)

// TestSimulationLine plays TestSimulation's schedules widened by ten quiet
// candidates (sim.Widen): a fleet of 12 to 17, large enough for relect to
// post its line, so that the faults the schedule plays on its own
// candidates — kills, partitions, pauses, hand edits, handovers, stuck
// work — hit a fleet where only the line watches the election's Lease
// (docs/design.md, "Only the line watches"). Every checker of
// TestSimulation judges relect's runs (safety, liveness, events, calls,
// the fenced stores), and the line Lease must have been used in most runs,
// so that the test exercises it. 1,000 schedules (100 with -race or
// -short; RELECT_SIM_LINE_SCHEDULES for another count);
// RELECT_SIM_LINE_SEED replays one seed with its timeline.
func TestSimulationLine(t *testing.T) {
	if v := envInt(t, "RELECT_SIM_LINE_SEED", -1); v >= 0 {
		replay(t, fmt.Sprintf("seed %d (widened by 10)", v), sim.Widen(sim.Generate(uint64(v)), 10))
		return
	}
	n := 1000
	if race.Enabled || testing.Short() {
		n = 100
	}
	n = envInt(t, "RELECT_SIM_LINE_SCHEDULES", n)
	workers := runtime.GOMAXPROCS(0)
	var (
		posted   atomic.Int32
		mu       sync.Mutex
		failures []string
	)
	t.Run("schedules", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < n; i += workers {
					seed := uint64(i)
					s := sim.Widen(sim.Generate(seed), 10)
					var h *sim.History
					synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
					for _, c := range h.Calls {
						if c.Name == wire.LineName(sim.LeaseName) {
							posted.Add(1)
							break
						}
					}
					if vs := sim.Check(h); len(vs) > 0 {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("seed %d (widened by 10): %v\n    replay: RELECT_SIM_LINE_SEED=%d go test -run 'TestSimulationLine$' -v ./simulation", seed, vs, seed))
						mu.Unlock()
					}
				}
			})
		}
	})
	t.Logf("%d widened schedules; the line Lease was used in %d", n, posted.Load())
	if len(failures) > 0 {
		t.Errorf("relect violated the checkers in %d widened schedules:\n%s", len(failures), strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
	if int(posted.Load()) < n/2 {
		t.Errorf("the line Lease was used in %d of %d runs: the test does not exercise the line", posted.Load(), n)
	}
}

// replay plays s RELECT_SIM_REPEAT times (20), logs it and the timeline
// of the first replay that broke a rule (or of the last), and fails if
// any did; what names the schedule in the failure. The schedule is the
// same every time; interleavings are not (see docs/reliability.md), hence
// the repeats. It returns the history it showed.
func replay(t *testing.T, what string, s *sim.Schedule) *sim.History {
	repeat := envInt(t, "RELECT_SIM_REPEAT", 20)
	t.Logf("schedule:\n%s", s)
	failed := 0
	var shown *sim.History
	var shownVs []sim.Violation
	for range repeat {
		var h *sim.History
		synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
		vs := sim.Check(h)
		if len(vs) > 0 {
			failed++
		}
		if len(shownVs) == 0 {
			shown, shownVs = h, vs
		}
	}
	t.Logf("history:\n%s", shown.Timeline(true))
	if failed > 0 {
		t.Errorf("%s: %d of %d replays broke a rule; the shown one: %v", what, failed, repeat, shownVs)
	} else {
		t.Logf("%s: %d replays, none broke a rule", what, repeat)
	}
	return shown
}
