package simulation_test

import (
	"cmp"
	"fmt"
	"os"
	"runtime"
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

// TestSimulationLineGone plays sim.GenerateLineGone's schedules: TestSimulation's
// widened by ten quiet candidates (a fleet of 12 to 17 that posts its
// line), then, once settled, everyone the line names — the leader, its
// three successors and its keeper — leaves at one instant: stopped
// gracefully, killed or partitioned, a third of the schedules each. Every
// checker of TestSimulation judges relect's runs, among them the line-gone
// rule (sim.CheckLineGone): a candidate the line did not name leads within
// five retry periods of a graceful stop (10 s at the defaults), and within
// LeaseDuration + five retry periods of the holder's last renewal after a
// kill or partition. It prints, per way of leaving, how many runs the rule
// judged and how long the outsiders took, and fails on any violation, or if
// the rule judged fewer than nine runs in ten of a way (the test would not
// exercise it). 100 schedules (20 with -race or -short);
// RELECT_SIM_LINE_GONE_SCHEDULES for another count, RELECT_SIM_LINE_GONE_BASE
// for the first seed, RELECT_SIM_LINE_GONE_SEEDS to play only the seeds
// listed (commas), RELECT_SIM_LINE_GONE_SEED to replay one seed with its
// timeline.
func TestSimulationLineGone(t *testing.T) {
	if v := envInt(t, "RELECT_SIM_LINE_GONE_SEED", -1); v >= 0 {
		h := replay(t, fmt.Sprintf("seed %d", v), sim.GenerateLineGone(uint64(v)))
		t.Logf("outcomes: %+v", sim.LineGoneOutcomes(h))
		return
	}
	n, seedOf := lineGoneSeeds(t)
	if n == 0 {
		t.Skip("no schedules asked for")
	}
	workers := runtime.GOMAXPROCS(0)
	var (
		mu       sync.Mutex
		failures []string
		seeds    []uint64 // failing
		timeline string
		tally    = map[sim.Kind]*lineGoneTally{}
	)
	for _, k := range lineGoneWays {
		tally[k] = &lineGoneTally{excused: map[string]int{}}
	}
	start := time.Now()
	t.Run("schedules", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < n; i += workers {
					seed := seedOf(i)
					s := sim.GenerateLineGone(seed)
					var h *sim.History
					synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
					vs := sim.Check(h)
					mu.Lock()
					tallyLineGone(tally, s, h)
					if len(vs) > 0 {
						seeds = append(seeds, seed)
						failures = append(failures, fmt.Sprintf("seed %d: %v\n    replay: RELECT_SIM_LINE_GONE_SEED=%d go test -run 'TestSimulationLineGone$' -v ./simulation", seed, vs, seed))
						if timeline == "" {
							timeline = fmt.Sprintf("schedule:\n%s\nhistory:\n%s", s, h.Timeline(false))
						}
					}
					mu.Unlock()
				}
			})
		}
	})
	t.Logf("%d schedules (seeds %d…%d) in %v", n, seedOf(0), seedOf(n-1), time.Since(start).Round(time.Second))
	t.Logf("\n%s", lineGoneTable(tally))
	if len(failures) > 0 {
		slices.Sort(seeds)
		t.Errorf("relect violated the checkers in %d of %d schedules (seeds %v):\n%s\nthe first: %s", len(failures), n, seeds,
			strings.Join(failures[:min(len(failures), 100)], "\n"), timeline)
	}
	for _, k := range lineGoneWays {
		if c := tally[k]; c.schedules > 0 && c.judged*10 < c.schedules*9 {
			t.Errorf("line-leaves by %v: the rule judged %d of %d schedules (excused %v, skipped %d): the test does not exercise it",
				k, c.judged, c.schedules, c.excused, c.skipped)
		}
	}
}

// lineGoneSeeds returns how many schedules TestSimulationLineGone plays
// and the seed of the i-th: RELECT_SIM_LINE_GONE_SEEDS's, else
// RELECT_SIM_LINE_GONE_SCHEDULES from RELECT_SIM_LINE_GONE_BASE.
func lineGoneSeeds(t *testing.T) (n int, seedOf func(i int) uint64) {
	t.Helper()
	if list := os.Getenv("RELECT_SIM_LINE_GONE_SEEDS"); list != "" {
		var only []uint64
		for f := range strings.FieldsFuncSeq(list, func(r rune) bool { return r == ',' || r == ' ' }) {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("RELECT_SIM_LINE_GONE_SEEDS=%q: want seeds separated by commas", list)
			}
			only = append(only, v)
		}
		return len(only), func(i int) uint64 { return only[i] }
	}
	n = 100
	if race.Enabled || testing.Short() {
		n = 20
	}
	n = envInt(t, "RELECT_SIM_LINE_GONE_SCHEDULES", n)
	base := uint64(envInt(t, "RELECT_SIM_LINE_GONE_BASE", 0))
	return n, func(i int) uint64 { return base + uint64(i) }
}

// lineGoneWays are the ways the line leaves, in report order.
var lineGoneWays = []sim.Kind{sim.Stop, sim.Kill, sim.Partition}

// lineGoneTally counts one way's runs.
type lineGoneTally struct {
	schedules, skipped, judged, late int
	lateNoWarden                     int // late, the line naming no warden
	lateWardenGone                   int // late, the warden it names not running
	lateFromCrash                    int // late even counted from the kill or partition
	excused                          map[string]int
	// gaps are how long the outsiders took, beyond the lease's expiry
	// after a kill or partition, in retry periods (the bound is 5);
	// defaults are those gaps in seconds for the schedules with the
	// default durations (LD 15 s, RP 2 s; the bound is 10 s).
	gaps, defaults []float64
}

func tallyLineGone(tally map[sim.Kind]*lineGoneTally, s *sim.Schedule, h *sim.History) {
	for _, a := range s.Actions {
		if a.Kind == sim.LineLeaves {
			tally[a.Leave].schedules++
		}
	}
	for _, a := range h.Actions {
		if a.Kind == sim.LineLeaves && a.Skipped != "" {
			tally[a.Leave].skipped++
		}
	}
	for _, o := range sim.LineGoneOutcomes(h) {
		c := tally[o.Leave]
		if o.Excuse != "" {
			c.excused[o.Excuse]++
			continue
		}
		c.judged++
		if o.Late() {
			c.late++
			switch {
			case o.Line.Warden == "":
				c.lateNoWarden++
			case !o.WardenRunning:
				c.lateWardenGone++
			}
			if o.Leave != sim.Stop && (o.Led < 0 || o.Led > o.At+h.Timing.LeaseDuration+sim.LineGoneAllowance(h.Timing)) {
				c.lateFromCrash++
			}
		}
		if o.Led < 0 {
			continue
		}
		took := o.Led - o.From
		if o.Leave != sim.Stop {
			took -= h.Timing.LeaseDuration
		}
		c.gaps = append(c.gaps, float64(took)/float64(h.Timing.RetryPeriod))
		if h.Timing.LeaseDuration == 15*time.Second && h.Timing.RetryPeriod == 2*time.Second {
			c.defaults = append(c.defaults, (o.Led - o.From).Seconds())
		}
	}
}

func lineGoneTable(tally map[sim.Kind]*lineGoneTally) string {
	var b strings.Builder
	b.WriteString("| line leaves by | schedules | skipped (no line) | judged | excused | late (the line naming no warden; a warden not running; late counted from the kill or partition too) | outsider leads, RP after the stop or the lease's expiry: median / p99 / max (bound 5) | default durations: s after the stop or the last renewal: n, median / max (bound 10 s; LD + 10 s) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, k := range lineGoneWays {
		c := tally[k]
		excused := 0
		for _, v := range c.excused {
			excused += v
		}
		fmt.Fprintf(&b, "| %v | %d | %d | %d | %d | %d (%d; %d; %d) | %s | %d, %s |\n", k, c.schedules, c.skipped, c.judged, excused, c.late, c.lateNoWarden, c.lateWardenGone, c.lateFromCrash,
			quantiles(c.gaps, "%.2f", 0.5, 0.99, 1), len(c.defaults), quantiles(c.defaults, "%.1f s", 0.5, 1))
	}
	for _, k := range lineGoneWays {
		for why, v := range tally[k].excused {
			fmt.Fprintf(&b, "excused (%v): %d: %s\n", k, v, why)
		}
	}
	return b.String()
}

// quantiles formats the qs quantiles of xs (nearest rank), or "—".
func quantiles(xs []float64, format string, qs ...float64) string {
	if len(xs) == 0 {
		return "—"
	}
	s := slices.Clone(xs)
	slices.SortFunc(s, cmp.Compare[float64])
	var out []string
	for _, q := range qs {
		i := min(len(s)-1, max(0, int(q*float64(len(s))+0.5)-1))
		out = append(out, fmt.Sprintf(format, s[i]))
	}
	return strings.Join(out, " / ")
}
