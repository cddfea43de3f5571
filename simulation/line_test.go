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
		lineReplay(t, uint64(v))
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

// lineReplay plays one seed's widened schedule RELECT_SIM_REPEAT times (20)
// and logs the schedule and the timeline of the first failing replay (or
// of the last). The schedule is the same every time; interleavings are
// not (see docs/reliability.md), hence the repeats.
func lineReplay(t *testing.T, seed uint64) {
	repeat := envInt(t, "RELECT_SIM_REPEAT", 20)
	s := sim.Widen(sim.Generate(seed), 10)
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
		t.Errorf("seed %d (widened by 10): %d of %d replays broke a rule; the shown one: %v", seed, failed, repeat, shownVs)
	} else {
		t.Logf("seed %d (widened by 10): %d replays, none broke a rule", seed, repeat)
	}
}
