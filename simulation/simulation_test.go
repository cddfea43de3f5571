package simulation_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/race"
	"github.com/relect/relect/simulation/internal/sim"
)

// TestSimulation's knobs. Flags go after -args and work only when this
// package alone is tested (go test ./simulation -args -seed=N); the environment works
// everywhere.
var (
	simSeed     = flag.String("seed", "", "TestSimulation: replay the schedule of this seed (or RELECT_SIM_SEED)")
	simMinimize = flag.Bool("minimize", false, "TestSimulation -seed: shrink the schedule while it still fails (or RELECT_SIM_MINIMIZE=1)")
)

// How many schedules TestSimulation runs unless RELECT_SIM_SCHEDULES says.
const (
	simSchedules      = 10000
	simSchedulesShort = 1000 // -short
	simSchedulesRace  = 300  // -race slows the simulation about tenfold
)

// TestSimulation plays thousands of generated fault schedules against
// relect and, side by side, against a plain client-go LeaderElector run in a
// loop by hand (the fix of elastic-agent PR #4542), checks every history
// for safety, liveness, API budget, event order and stuck work
// (internal/sim), prints the comparison and the fault coverage (with -v),
// and fails if relect has any violation at all (sim.Explain names a known
// finding it repeats: every one is fixed, so that is a regression), or if
// some fault was never applied. The client-go loop's violations are
// counted, not asserted: they are expected.
//
// Environment: RELECT_SIM_SCHEDULES (count), RELECT_SIM_BASE (first seed),
// RELECT_SIM_SEED (replay one seed; with RELECT_SIM_REPEAT replays and
// RELECT_SIM_MINIMIZE=1, and RELECT_SIM_IMPL=relect or "client-go loop" to
// replay one implementation only), RELECT_SIM_REPORT (file to write the
// markdown report to). See docs/reliability.md.
func TestSimulation(t *testing.T) {
	if seed, ok := simReplaySeed(t); ok {
		simReplay(t, seed)
		return
	}
	n := simSchedules
	switch {
	case race.Enabled:
		n = simSchedulesRace
	case testing.Short():
		n = simSchedulesShort
	}
	n = envInt(t, "RELECT_SIM_SCHEDULES", n)
	base := uint64(envInt(t, "RELECT_SIM_BASE", 0))
	workers := runtime.GOMAXPROCS(0)
	// The simulation allocates briskly but holds little (~50 MB): fewer
	// collections save a fifth of its CPU time.
	defer debug.SetGCPercent(debug.SetGCPercent(400))

	totals := map[sim.Impl]*sim.Totals{}
	for _, impl := range sim.Impls {
		totals[impl] = &sim.Totals{}
	}
	var (
		mu       sync.Mutex
		failures []string // one line per failing seed
		timeline string   // of the first failing run
	)
	start := time.Now()
	t.Run("schedules", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < n; i += workers {
					seed := base + uint64(i)
					s := sim.Generate(seed)
					for _, impl := range sim.Impls {
						var h *sim.History
						synctest.Test(t, func(t *testing.T) { h = sim.Play(s, impl) })
						// Checked outside the bubble: porcupine's timeout is
						// real time.
						res := totals[impl].Add(seed, h)
						if impl != sim.Relect {
							continue
						}
						for _, sr := range res.Stores {
							if sr.Lin != nil && sr.Lin.Result == sim.LinUnknown {
								t.Logf("seed %d: porcupine's check of the %s store timed out (%v): unknown", seed, sr.Store, sim.LinearizabilityTimeout)
							}
						}
						broken, nonLin := fenceBroken(res)
						if len(res.Violations) == 0 && !broken {
							continue
						}
						msg := fmt.Sprintf("seed %d: %v", seed, res.Violations)
						if nonLin {
							msg += " [porcupine: the fence store's history is not linearizable]"
						}
						msg += "\n    replay: " + replayCommand(seed)
						if broken {
							msg += "\n    porcupine's visualization of the fence store: " + visualize(t, seed, res)
						}
						mu.Lock()
						failures = append(failures, msg)
						if timeline == "" {
							// The timeline holds the candidates' logs too.
							timeline = fmt.Sprintf("seed %d, replay: %s\nschedule:\n%s\nhistory:\n%s", seed, replayCommand(seed), s, h.Timeline(false))
						}
						mu.Unlock()
					}
				}
			})
		}
	})
	wall := time.Since(start)

	report := simReport(n, base, workers, wall, totals)
	t.Log("\n" + report)
	if path := os.Getenv("RELECT_SIM_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}

	if len(failures) > 0 {
		shown := failures[:min(len(failures), 10)]
		t.Errorf("relect violated the checkers in %d schedules (first %d below):\n%s\n\nfirst failing run:\n%s",
			len(failures), len(shown), strings.Join(shown, "\n"), timeline)
	}
	if n >= 200 {
		cov := totals[sim.Relect].Coverage()
		for _, k := range sim.AllCoverageKeys() {
			if cov[k] == 0 {
				t.Errorf("fault %q was never applied in %d schedules", k, n)
			}
		}
	}
}

// simReport is the markdown report TestSimulation prints.
func simReport(n int, base uint64, workers int, wall time.Duration, totals map[sim.Impl]*sim.Totals) string {
	var b strings.Builder
	cmd := "go test -run 'TestSimulation$' -v ."
	if race.Enabled {
		cmd = "go test -race -run 'TestSimulation$' -v ."
	}
	if n != simSchedules {
		cmd = fmt.Sprintf("RELECT_SIM_SCHEDULES=%d %s", n, cmd)
	}
	if base != 0 {
		cmd = fmt.Sprintf("RELECT_SIM_BASE=%d %s", base, cmd)
	}
	fmt.Fprintf(&b, "%d schedules (seeds %d…%d), %d workers, %v wall: `%s`\n\n", n, base, base+uint64(n)-1,
		workers, wall.Round(100*time.Millisecond), cmd)
	b.WriteString(sim.Table(sim.Impls, totals))
	b.WriteString("\nViolations by known finding (the checkers count every violation; every finding is fixed in relect, so any of relect's is a regression; see docs/reliability.md):\n\n")
	b.WriteString(sim.FindingTable(sim.Impls, totals))
	b.WriteString("\nViolations by rule:\n\n")
	b.WriteString(sim.RuleTable(sim.Impls, totals))
	b.WriteString("\nStuck work (Options.Work; see docs/reliability.md):\n\n")
	b.WriteString(sim.StuckTable(sim.Impls, totals))
	b.WriteString("\nFencing: every leader's writes to a store, through a network with its candidate's faults (see docs/reliability.md):\n\n")
	b.WriteString(sim.FencingTable(sim.Impls, totals))
	b.WriteString("\nCalls per leadership change (see docs/reliability.md for the definition):\n\n")
	b.WriteString(sim.ChangeTable(sim.Impls, totals))
	if ch, seed := totals[sim.Relect].Costliest(); ch.Calls > 0 {
		fmt.Fprintf(&b, "\nrelect's costliest undisturbed change: seed %d, %v\n", seed, ch)
	}
	b.WriteString("\nFaults applied:\n\n")
	b.WriteString(sim.CoverageTable(sim.Impls, totals))
	return b.String()
}

// fenceBroken reports whether relect's store guarded by its fence failed
// in res: it accepted late writes (violations already: Check), or
// porcupine found its history not linearizable (nonLin).
func fenceBroken(res sim.Result) (broken, nonLin bool) {
	for _, sr := range res.Stores {
		if sr.Store == sim.StoreFence {
			nonLin = sr.Lin != nil && sr.Lin.Result == sim.NotLinearizable
			return nonLin || len(sr.Late) > 0, nonLin
		}
	}
	return false, false
}

// visDir is the directory porcupine's visualizations go to:
// RELECT_SIM_VIS, or a temporary directory made at the first.
var visDir = sync.OnceValues(func() (string, error) {
	if d := os.Getenv("RELECT_SIM_VIS"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "relect-sim-vis-")
})

// visualize writes porcupine's visualization of the fence store's history
// of seed in res, and returns its path (or why it could not).
func visualize(t *testing.T, seed uint64, res sim.Result) string {
	t.Helper()
	dir, err := visDir()
	if err != nil {
		return "no visualization: " + err.Error()
	}
	for _, sr := range res.Stores {
		if sr.Store == sim.StoreFence && sr.Lin != nil {
			path := filepath.Join(dir, fmt.Sprintf("seed-%d-fence.html", seed))
			if err := sr.Lin.Visualize(path); err != nil {
				return "no visualization: " + err.Error()
			}
			return path
		}
	}
	return "no visualization: the fence store was not checked"
}

func replayCommand(seed uint64) string {
	return fmt.Sprintf("go test -run 'TestSimulation$' -v ./simulation -args -seed=%d   (or RELECT_SIM_SEED=%d go test -run 'TestSimulation$' -v ./simulation)", seed, seed)
}

func simReplaySeed(t *testing.T) (uint64, bool) {
	v := *simSeed
	if v == "" {
		v = os.Getenv("RELECT_SIM_SEED")
	}
	if v == "" {
		return 0, false
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("bad seed %q: %v", v, err)
	}
	return seed, true
}

// simReplay plays one seed's schedule RELECT_SIM_REPEAT times (20) against
// each implementation, and prints the schedule, the violations and the
// timeline of the first run that had any — or of the last run. The schedule
// is the same every time; interleavings are not (see docs/reliability.md),
// hence the repeats.
func simReplay(t *testing.T, seed uint64) {
	repeat := envInt(t, "RELECT_SIM_REPEAT", 20)
	s := sim.Generate(seed)
	t.Logf("schedule:\n%s", s)
	for _, impl := range sim.Impls {
		if only := os.Getenv("RELECT_SIM_IMPL"); only != "" && only != impl.String() {
			continue
		}
		var shown *sim.History
		var vs []sim.Violation
		failed := 0
		var shownRes sim.Result
		for range repeat {
			var h *sim.History
			synctest.Test(t, func(t *testing.T) { h = sim.Play(s, impl) })
			res := (&sim.Totals{}).Add(seed, h) // outside the bubble: porcupine's timeout is real time
			v := res.Violations
			if _, nonLin := fenceBroken(res); nonLin {
				v = append(v, sim.Violation{Class: sim.Safety, Rule: "fence-not-linearizable", Detail: "porcupine"})
			}
			if len(v) > 0 {
				failed++
				if vs == nil {
					shown, vs, shownRes = h, v, res
				}
			} else if vs == nil {
				shown, shownRes = h, res
			}
		}
		for _, sr := range shownRes.Stores {
			lin := "not checked"
			if sr.Lin != nil {
				lin = sr.Lin.Result
			}
			t.Logf("%s: the %s store: %d late writes; porcupine: %s", impl, sr.Store, len(sr.Late), lin)
		}
		if broken, _ := fenceBroken(shownRes); impl == sim.Relect && broken {
			t.Logf("porcupine's visualization of the fence store: %s", visualize(t, seed, shownRes))
		}
		var lines []string
		for _, v := range vs {
			f := sim.Explain(shown, v)
			if f == "" {
				f = "unexplained"
			} else {
				f += " (fixed: regression)"
			}
			lines = append(lines, fmt.Sprintf("  %v  [%s]", v, f))
		}
		t.Logf("%s: %d of %d replays had violations; the first:\n%s\ntimeline:\n%s",
			impl, failed, repeat, strings.Join(lines, "\n"), shown.Timeline(true))
		if impl == sim.Relect && len(vs) > 0 {
			t.Errorf("relect violated the checkers in seed %d", seed)
		}
		if len(vs) > 0 && (*simMinimize || os.Getenv("RELECT_SIM_MINIMIZE") == "1") {
			simMinimizeSchedule(t, s, impl, vs[0])
		}
	}
}

// simMinimizeSchedule shrinks s while some of 10 replays still breaks the
// rule that want broke, and prints the result.
func simMinimizeSchedule(t *testing.T, s *sim.Schedule, impl sim.Impl, want sim.Violation) {
	var last *sim.History
	fails := func(s *sim.Schedule) bool {
		for range 10 {
			hit := false
			synctest.Test(t, func(t *testing.T) {
				h := sim.Play(s, impl)
				for _, v := range sim.Check(h) {
					if v.Class == want.Class && v.Rule == want.Rule {
						hit, last = true, h
						return
					}
				}
			})
			if hit {
				return true
			}
		}
		return false
	}
	if !fails(s) {
		t.Logf("%s: %s/%s did not recur; nothing to minimise", impl, want.Class, want.Rule)
		return
	}
	m := sim.Minimize(s, fails)
	fails(m)
	var vs []string
	for _, v := range sim.Check(last) {
		vs = append(vs, "  "+v.String())
	}
	t.Logf("%s: minimised schedule for %s/%s:\n%s\nviolations:\n%s\ntimeline:\n%s",
		impl, want.Class, want.Rule, m, strings.Join(vs, "\n"), last.Timeline(true))
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// TestSimulationOutage plays the target of issue 20 against both
// implementations: four candidates with the default durations, whose work's
// downstream fails for everyone for 10 minutes. relect (Options.Work with a
// BeatWindow of 30 s, or a Check, and the default Cooldown of 1 minute)
// hands over at most Work.StuckHandoverBound times — ⌊log2(10 + 1)⌋ + 1 = 4
// — never with two leaders, and with nobody leading only between a stuck
// handover and the next leader (at most sim.GapBound each: with a Check,
// every follower's check fails too, and they all stand back); the client-go
// loop's stuck leader keeps the lease throughout. So does a BeatWindow
// longer than the Cooldown (90 s), which once showed F5.
func TestSimulationOutage(t *testing.T) {
	const (
		outageFrom = time.Minute
		outage     = 10 * time.Minute
	)
	beats := func(window time.Duration) sim.Work { return sim.Work{BeatWindow: window, BeatEvery: 10 * time.Second} }
	cases := []struct {
		name string
		impl sim.Impl
		work sim.Work
	}{
		{"relect, BeatWindow 30 s", sim.Relect, beats(30 * time.Second)},
		{"relect, Check (defaults: every 10 s, 3 failures)", sim.Relect, sim.Work{Check: true}},
		{"relect, BeatWindow 90 s (once F5)", sim.Relect, beats(90 * time.Second)},
		{"client-go loop (the same work)", sim.ClientGoLoop, beats(30 * time.Second)},
	}
	var b strings.Builder
	b.WriteString("| 10-minute fleet-wide outage, 4 candidates, 15 s / 10 s / 2 s | stuck handovers (bound) | nobody leads, in all | longest one leader keeps the lease | relect's violations |\n|---|---:|---:|---:|---|\n")
	for _, tc := range cases {
		var (
			o               sim.Outage
			leaderless, gap time.Duration
			kept            time.Duration
			vs              []sim.Violation
		)
		synctest.Test(t, func(t *testing.T) {
			h := sim.Play(outageSchedule(tc.work, outageFrom, outage), tc.impl)
			o, vs = sim.Outages(h)[0], sim.Check(h)
			leaderless, gap = h.Leaderless(outageFrom, outageFrom+outage), sim.GapBound(h)
			kept = longestHeld(h, outageFrom, outageFrom+outage)
		})
		broken := "none"
		if tc.impl != sim.Relect {
			broken = "—"
		} else if len(vs) > 0 {
			var rules []string
			for _, v := range vs {
				rules = append(rules, string(v.Class)+"/"+v.Rule)
			}
			broken = strings.Join(rules, ", ")
		}
		fmt.Fprintf(&b, "| %s | %d (%d) | %v | %v | %s |\n", tc.name, o.Handovers, o.Bound(), leaderless.Round(time.Millisecond),
			kept.Round(time.Second), broken)
		if tc.impl != sim.Relect {
			continue
		}
		if o.Handovers > o.Bound() || o.Handovers < 2 || len(vs) > 0 {
			t.Errorf("%s: %d stuck handovers (bound %d; the first is not held, and the holds end), violations %v",
				tc.name, o.Handovers, o.Bound(), vs)
		}
		if limit := time.Duration(o.Handovers) * gap; leaderless > limit {
			t.Errorf("%s: nobody led for %v of the outage, more than %v for %d handovers", tc.name, leaderless, limit, o.Handovers)
		}
	}
	t.Log("\n" + b.String())
}

// longestHeld returns the longest that one holder kept the Lease within
// [from, to] (its records in a row, until another holder's or a release).
func longestHeld(h *sim.History, from, to time.Duration) time.Duration {
	var longest time.Duration
	since, holder := time.Duration(-1), ""
	for _, c := range append(slices.Clone(h.Changes), sim.Change{At: to, Deleted: true}) {
		at := min(max(c.At, from), to)
		if c.Deleted || c.Holder != holder {
			if holder != "" && since >= 0 {
				longest = max(longest, at-since)
			}
			since, holder = at, c.Holder
			if c.Deleted {
				holder = ""
			}
		}
	}
	return longest
}

// outageSchedule is the schedule of TestSimulationOutage: four candidates
// with the default durations and work w, started a second apart; the
// downstream fails for everyone from `from` for d.
func outageSchedule(w sim.Work, from, d time.Duration) *sim.Schedule {
	const n = 4
	s := &sim.Schedule{Candidates: n, Priority: make([]int32, n), Standby: make([]bool, n), Work: w,
		Timing: sim.Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}}
	for i := range n {
		s.Actions = append(s.Actions, sim.Action{At: time.Duration(i) * time.Second, Kind: sim.Start, Target: i, Initial: true})
	}
	s.Actions = append(s.Actions, sim.Action{At: from, Kind: sim.FailDownstream, Target: -1},
		sim.Action{At: from + d, Kind: sim.HealDownstream, Target: -1})
	s.Quiet = from + d
	s.Span = s.Quiet + 5*time.Minute // the last hold ends, and the streak with it
	return s
}
