package simulation_test

import (
	"flag"
	"fmt"
	"os"
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

var simShardSeed = flag.String("shard-seed", "", "TestSimulationShards: replay the shard schedule of this seed (or RELECT_SIM_SHARD_SEED)")

// How many schedules TestSimulationShards runs unless
// RELECT_SIM_SHARD_SCHEDULES says: a short size by default (CI), fewer
// under -race; 10,000 is the full size (simShardSchedulesFull).
const (
	simShardSchedules     = 300
	simShardSchedulesRace = 40
	simShardSchedulesFull = 10000
)

// TestSimulationShards plays TestSimulation's schedules with shards
// against relect, in two modes (subtests; -run
// 'TestSimulationShards$/ranges$' runs one):
//
//   - shards: sim.GenerateShards — every relect candidate takes part in S
//     numbered or named shards, S in 1–12; hand edits of a shard's Lease
//     and of the shard table; rolling restarts. Every schedule is also
//     played against the baseline of one client-go loop per shard Lease
//     (sim.ShardComparison: Knative's buckets), and the two are reported
//     side by side; the baseline's figures are measured, not judged, but
//     it must have played every schedule.
//   - ranges: sim.GenerateShardRanges — the same schedules with S range
//     shards (ShardOptions{Count: S, Ranges: shardrange.UID}), S in 1–16;
//     relect only. sim.CheckShardRanges adds its checks: at every instant
//     a shard term starts or stops, the ranges of the terms running never
//     overlap as hash intervals, and cover [0, 2^64) whenever every shard
//     is held; each term's context carries exactly shardrange.Of(uid, i,
//     S). Every S in 1–16 must have been played, and the coverage checked.
//
// Each mode fails on any violation of the shard checkers (sim.CheckShards:
// never two holders of a shard, each shard's fence grows, its fenced store
// accepts no late write and is linearizable by porcupine, no shard unheld
// longer than sim.ShardLivenessBound after the faults, settled balance;
// and the range checks) or of TestSimulation's checkers on the same runs,
// and if some shard fault was never applied.
//
// Environment: RELECT_SIM_SHARD_SCHEDULES (count, per mode; 10000 is the
// full size), RELECT_SIM_SHARD_BASE (first seed), RELECT_SIM_SHARD_SEED or
// -shard-seed (replay one seed RELECT_SIM_REPEAT times in each mode run,
// with RELECT_SIM_MINIMIZE=1 or -minimize to shrink it).
func TestSimulationShards(t *testing.T) {
	for _, m := range shardModes {
		t.Run(m.name, func(t *testing.T) {
			if seed, ok := shardReplaySeed(t); ok {
				shardReplay(t, m, seed)
				return
			}
			simulateShards(t, m)
		})
	}
}

// shardMode is one way TestSimulationShards plays its schedules.
type shardMode struct {
	name     string
	generate func(seed uint64) *sim.Schedule
	// baseline: play each schedule against the client-go baseline too,
	// and report the two side by side.
	baseline bool
}

var shardModes = []shardMode{
	{"shards", sim.GenerateShards, true},
	{"ranges", sim.GenerateShardRanges, false},
}

// run is the command that runs mode m's schedules.
func (m shardMode) run() string {
	return "go test -run 'TestSimulationShards$/" + m.name + "$' -v ./simulation"
}

// simulateShards plays mode m's schedules, prints its report and fails on
// any violation (see TestSimulationShards).
func simulateShards(t *testing.T, m shardMode) {
	n := simShardSchedules
	if race.Enabled {
		n = simShardSchedulesRace
	}
	n = envInt(t, "RELECT_SIM_SHARD_SCHEDULES", n)
	base := uint64(envInt(t, "RELECT_SIM_SHARD_BASE", 0))
	workers := runtime.GOMAXPROCS(0)
	defer debug.SetGCPercent(debug.SetGCPercent(400))

	totals := &sim.ShardTotals{}
	side := &sim.ShardComparison{}
	var (
		mu       sync.Mutex
		failures []string
		timeline string
	)
	start := time.Now()
	t.Run("schedules", func(t *testing.T) {
		for w := range workers {
			t.Run(strconv.Itoa(w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < n; i += workers {
					msg, tl := playShards(t, m, base+uint64(i), totals, side)
					if msg == "" {
						continue
					}
					mu.Lock()
					failures = append(failures, msg)
					if timeline == "" {
						timeline = tl
					}
					mu.Unlock()
				}
			})
		}
	})
	t.Log("\n" + shardReport(m, n, base, workers, time.Since(start), totals))
	if m.baseline {
		shardBaseline(t, n, side)
	}
	if len(failures) > 0 {
		slices.Sort(failures)
		shown := failures[:min(len(failures), 10)]
		t.Errorf("relect violated the shard checkers in %d schedules (first %d below):\n%s\n\nfirst failing run:\n%s",
			len(failures), len(shown), strings.Join(shown, "\n"), timeline)
	}
	if n >= 200 {
		shardCoverage(t, m, n, totals)
	}
}

// playShards plays the schedule of seed in mode m, adds it to totals (and
// side), and returns its failure line and timeline, or "" if relect
// broke no rule.
func playShards(t *testing.T, m shardMode, seed uint64, totals *sim.ShardTotals, side *sim.ShardComparison) (failure, timeline string) {
	s := m.generate(seed)
	var h *sim.History
	synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
	if m.baseline {
		var base *sim.History
		synctest.Test(t, func(t *testing.T) { base = sim.Play(s, sim.ClientGoLoop) })
		side.Add(h, base)
	}
	res := totals.Add(seed, h) // outside the bubble: porcupine's timeout is real time
	vs := shardViolations(res)
	if len(vs) == 0 {
		return "", ""
	}
	return fmt.Sprintf("seed %d: %v\n    replay: RELECT_SIM_SHARD_SEED=%d %s", seed, vs, seed, m.run()),
		fmt.Sprintf("schedule:\n%s\nhistory:\n%s\nshards:\n%s", s, h.Timeline(false), sim.ShardTimeline(h))
}

// shardBaseline prints the side-by-side report of n schedules, and fails
// unless the baseline played every one with a shard term.
func shardBaseline(t *testing.T, n int, side *sim.ShardComparison) {
	t.Helper()
	t.Log("\nside by side, the same schedules: relect's shards, and the baseline of one client-go loop per shard Lease, every candidate campaigning (Knative's buckets):\n" + side.Report())
	if b := side.Runs(sim.ClientGoLoop); len(b) != n || slices.ContainsFunc(b, func(f sim.ShardFigures) bool { return f.Terms == 0 }) {
		t.Errorf("the baseline did not play every schedule with a shard term: %d runs of %d", len(b), n)
	}
}

// shardCoverage fails if n schedules of mode m did not apply every shard
// fault or, for range shards, did not play every S in 1–16 or never had
// every shard held (the instants whose union is checked).
func shardCoverage(t *testing.T, m shardMode, n int, totals *sim.ShardTotals) {
	t.Helper()
	for _, k := range sim.ShardCoverageKeys() {
		if totals.Coverage[k] == 0 {
			t.Errorf("shard fault %q was never applied in %d schedules", k, n)
		}
	}
	if m.name != "ranges" {
		return
	}
	for s := 1; s <= 16; s++ {
		if totals.RangeSplits[s] == 0 {
			t.Errorf("no schedule of %d range shards in %d schedules", s, n)
		}
	}
	if totals.RangeWhole == 0 {
		t.Errorf("every shard was never held at once in %d schedules: the union of the ranges was never checked", n)
	}
}

// shardViolations is every violation res counts against relect: the shard
// checkers' (those that repeat a fixed finding included: a regression),
// the violations of TestSimulation's checkers on the same run, and a
// shard store porcupine finds not linearizable.
func shardViolations(res sim.ShardResult) []sim.Violation {
	vs := slices.Clone(res.Shards)
	vs = append(vs, res.Election...)
	for _, sr := range res.Stores {
		if sr.Lin.Result == sim.NotLinearizable {
			vs = append(vs, sim.Violation{Class: sim.Safety, Rule: "shard-store-not-linearizable", Detail: "shard " + sr.Shard + ": porcupine"})
		}
	}
	return vs
}

// shardReport is the summary TestSimulationShards prints.
func shardReport(m shardMode, n int, base uint64, workers int, wall time.Duration, t *sim.ShardTotals) string {
	var b strings.Builder
	cmd := shardCommand(m, n, base)
	fmt.Fprintf(&b, "%s: %d shard schedules (seeds %d…%d), %d workers, %v wall: `%s`\n\n", m.name, n, base, base+uint64(n)-1,
		workers, wall.Round(100*time.Millisecond), cmd)
	count := func(rule string) int { return t.ByRule[rule] }
	row := func(k string, v any) { fmt.Fprintf(&b, "| %s | %v |\n", k, v) }
	b.WriteString("| | |\n|---|---:|\n")
	row("schedules", t.Schedules)
	if t.Schedules > 0 {
		row("mean shards / candidates per schedule", fmt.Sprintf("%.1f / %.1f", float64(t.Shards)/float64(t.Schedules), float64(t.Candidates)/float64(t.Schedules)))
	}
	row("shard terms (calls of ShardOptions.Run)", t.Terms)
	row("shard calls (Lease API)", t.Calls)
	row("crashes (kills cutting a process's shard calls off)", t.Crashes)
	row("overlaps: two terms of one shard at once (must be 0)", count("safety/shard-two-holders"))
	row("overlaps: one shard in two candidates' Elector.Shards (must be 0)", count("safety/shard-two-listed"))
	row("fences that did not grow (must be 0)", count("safety/shard-fence-not-growing"))
	row("shard store writes", t.Writes)
	row("late writes a shard store accepted (must be 0)", count("safety/shard-fence-late-write"))
	row("store operations checked by porcupine", t.StoreOps)
	row("shard stores checked: linearizable / not / unknown", fmt.Sprintf("%d / %d / %d",
		t.Lin[sim.Linearizable], t.Lin[sim.NotLinearizable], t.Lin[sim.LinUnknown]))
	row("settled balances judged / excused", fmt.Sprintf("%d / %d", t.Judged, t.Excused))
	row("settle-balance failures", count("liveness/shard-unbalanced")+count("liveness/shard-held-by-ineligible"))
	row("liveness failures (a shard unheld beyond the bound after the faults)", count("liveness/shard-unheld"))
	row("longest gap after the faults", fmt.Sprintf("%v (seed %d)", t.WorstGap.Round(time.Millisecond), t.WorstGapSeed))
	row("largest gap / bound after the faults (runs without a shard violation)", fmt.Sprintf("%.2f (seed %d)", t.WorstRatio, t.WorstRatioSeed))
	for _, f := range []sim.ShardFinding{sim.ShardLeftOutForGood, sim.ShardTableEditStands, sim.ShardGivenToTheDead} {
		row("schedules repeating fixed finding "+string(f)+" (must be 0)", fmt.Sprintf("%d (seeds %v)", t.Open[f], t.OpenSeeds[f]))
	}
	row("schedules with a shard violation no finding explains (must be 0)", t.Unexplained)
	if m.name == "ranges" {
		rangeRows(row, count, t)
	}
	var el []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range t.Election {
			if !yield(k) {
				return
			}
		}
	}) {
		el = append(el, fmt.Sprintf("%s %d", k, t.Election[k]))
	}
	row("TestSimulation's checkers on the same runs (must be none)", strings.Join(append(el, "")[:max(len(el), 1)], ", "))
	var cov []string
	for _, k := range sim.ShardCoverageKeys() {
		cov = append(cov, fmt.Sprintf("%s %d", k, t.Coverage[k]))
	}
	row("shard faults applied", strings.Join(cov, ", "))
	return b.String()
}

// shardCommand is the command that plays n schedules of mode m from seed
// base.
func shardCommand(m shardMode, n int, base uint64) string {
	cmd := m.run()
	if race.Enabled {
		cmd = strings.Replace(cmd, "go test", "go test -race", 1)
	}
	if n != simShardSchedules {
		cmd = fmt.Sprintf("RELECT_SIM_SHARD_SCHEDULES=%d %s", n, cmd)
	}
	if base != 0 {
		cmd = fmt.Sprintf("RELECT_SIM_SHARD_BASE=%d %s", base, cmd)
	}
	return cmd
}

// rangeRows are the rows of the range checks (sim.CheckShardRanges) in
// shardReport.
func rangeRows(row func(string, any), count func(string) int, t *sim.ShardTotals) {
	var splits []string
	for s := range 17 {
		if k := t.RangeSplits[s]; k > 0 {
			splits = append(splits, fmt.Sprintf("%d: %d", s, k))
		}
	}
	row("schedules by S, range shards of the uid hash", strings.Join(splits, ", "))
	row("range terms: contexts checked to carry shardrange.Of(uid, i, S)", t.RangeTerms)
	row("wrong or missing range in a term's context (must be 0)", count("safety/shard-range-context"))
	row("instants checked (a range term starts or stops)", t.RangeInstants)
	row("overlaps: two running ranges sharing a hash (must be 0)", count("safety/shard-range-overlap"))
	row("instants with every shard held, union checked to be [0, 2^64)", t.RangeWhole)
	row("hashes in no running range with every shard held (must be 0)", count("safety/shard-range-gap"))
}

func shardReplaySeed(t *testing.T) (uint64, bool) {
	v := *simShardSeed
	if v == "" {
		v = os.Getenv("RELECT_SIM_SHARD_SEED")
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

// shardReplay plays one seed's shard schedule of mode m RELECT_SIM_REPEAT times (20)
// and prints the schedule, the violations and the timelines of the first
// run that had any (or of the last), and minimises it if asked.
func shardReplay(t *testing.T, m shardMode, seed uint64) {
	repeat := envInt(t, "RELECT_SIM_REPEAT", 20)
	s := m.generate(seed)
	t.Logf("schedule:\n%s", s)
	var (
		shown  *sim.History
		vs     []sim.Violation
		failed int
	)
	for range repeat {
		var h *sim.History
		synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
		res := (&sim.ShardTotals{}).Add(seed, h)
		v := shardViolations(res)
		for i, f := range res.Findings {
			if f != "" {
				v[i].Detail += " [repeats fixed finding " + string(f) + "]"
			}
		}
		if len(v) > 0 {
			failed++
			if vs == nil {
				shown, vs = h, v
			}
		} else if vs == nil {
			shown = h
		}
	}
	var lines []string
	for _, v := range vs {
		lines = append(lines, "  "+v.String())
	}
	b := sim.SettledBalance(shown)
	gap, sh := sim.ShardGapAfterQuiet(shown)
	t.Logf("%d of %d replays had violations; the first:\n%s\nsettled: %+v; longest gap after the faults: %v (shard %s)\ntimeline:\n%s\nshards:\n%s",
		failed, repeat, strings.Join(lines, "\n"), b, gap, sh, shown.Timeline(true), sim.ShardTimeline(shown))
	if len(vs) > 0 {
		t.Errorf("relect violated the checkers in shard seed %d", seed)
		if *simMinimize || os.Getenv("RELECT_SIM_MINIMIZE") == "1" {
			shardMinimize(t, s, vs[0])
		}
	}
}

// shardMinimize shrinks s while some of 10 replays still breaks want's
// rule, and prints the result.
func shardMinimize(t *testing.T, s *sim.Schedule, want sim.Violation) {
	var last *sim.History
	fails := func(s *sim.Schedule) bool {
		if !healed(s) {
			return false // a liveness violation must come after every fault healed
		}
		for range 10 {
			var h *sim.History
			synctest.Test(t, func(t *testing.T) { h = sim.Play(s, sim.Relect) })
			for _, v := range append(sim.CheckShards(h), sim.CheckWithShards(h)...) {
				if v.Class == want.Class && v.Rule == want.Rule {
					last = h
					return true
				}
			}
		}
		return false
	}
	if !fails(s) {
		t.Logf("%s/%s did not recur; nothing to minimise", want.Class, want.Rule)
		return
	}
	m := sim.Minimize(s, fails)
	fails(m)
	var vs []string
	for _, v := range append(sim.CheckShards(last), sim.CheckWithShards(last)...) {
		vs = append(vs, "  "+v.String())
	}
	t.Logf("minimised schedule for %s/%s:\n%s\nviolations:\n%s\ntimeline:\n%s\nshards:\n%s",
		want.Class, want.Rule, m, strings.Join(vs, "\n"), last.Timeline(true), sim.ShardTimeline(last))
}

// healed reports whether every fault of s on a candidate's handle (errors,
// latency, partition; pause) is undone by a later Heal (Resume): the
// minimiser drops a Heal alone, which would leave its fault on to the end.
func healed(s *sim.Schedule) bool {
	open := map[int]bool{}
	paused := map[int]bool{}
	for _, a := range s.Actions {
		switch a.Kind {
		case sim.FailNext, sim.Fail, sim.FailVerb, sim.Latency, sim.Partition:
			open[a.Target] = true
		case sim.Heal:
			open[a.Target] = false
		case sim.Pause:
			paused[a.Target] = true
		case sim.Resume:
			paused[a.Target] = false
		}
	}
	for c := range s.Candidates {
		if open[c] || paused[c] {
			return false
		}
	}
	return true
}
