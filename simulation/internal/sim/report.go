package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Totals aggregates the checks of many histories of one implementation. It
// is safe for concurrent use.
type Totals struct {
	mu        sync.Mutex
	schedules int
	// per class: violations, and schedules with at least one
	violations map[Class]int
	affected   map[Class]int
	byRule     map[string]int // keyed "class/rule"
	// per known finding: violations, schedules, and a few example seeds
	explained map[Finding]int
	explSched map[Finding]int
	// explainedSafety counts the safety violations a finding explains.
	explainedSafety int
	examples        map[Finding][]uint64
	calls           int
	candTime        time.Duration
	coverage        map[string]int // applied faults by coverage key
	changes         []changeCost   // every leadership change
	// costliest is the undisturbed change with the most calls, and the
	// seed it happened in.
	costliest     LeadershipChange
	costliestSeed uint64
	// Work liveness: calls and campaigning time of the schedules without
	// it ([0]) and with it ([1]), and what became of stuck work.
	callsBy    [2]int
	candTimeBy [2]time.Duration
	stuck      stuckTotals
	// The leaders' writes, per store (store.go).
	fencing map[Store]*fenceTotals
}

// stuckTotals is what Totals keeps of stuck work (checkwork.go).
type stuckTotals struct {
	schedules int // with work liveness
	// StuckEpisodes: all, judged, judged that kept the lease beyond the
	// deadline, and the longest beyond (and its seed).
	episodes, judged, kept int
	beyond                 time.Duration
	beyondSeed             uint64
	handovers              int // terms ended for stuck work
	// Outages: how many, their stuck handovers, how many had a chain over
	// its bound (each a stuck-handovers violation; the first three seeds),
	// and the one with the most handovers (and its seed).
	outages, outageHandovers, overBound int
	overBoundSeeds                      []uint64 // the first three
	worst                               Outage
	worstSeed                           uint64
	// gaps are the judged StepDownGaps, by cause; steps the longest of
	// them in succession steps (RetryPeriod/2), and its seed.
	gaps      map[string][]time.Duration
	steps     float64
	stepsSeed uint64
}

// add adds the stuck work of h, played from the schedule of seed, and its
// step-down gaps (Yields are in every schedule).
func (st *stuckTotals) add(seed uint64, h *History) {
	for _, g := range StepDownGaps(h) {
		if g.Excused == "" {
			if st.gaps == nil {
				st.gaps = map[string][]time.Duration{}
			}
			st.gaps[g.Cause] = append(st.gaps[g.Cause], g.Gap)
			if n := float64(g.Gap) / float64(h.Timing.RetryPeriod/2); n > st.steps {
				st.steps, st.stepsSeed = n, seed
			}
		}
	}
	if !h.Work.On() {
		return
	}
	st.schedules++
	for _, e := range StuckEpisodes(h) {
		st.episodes++
		if e.Excused != "" {
			continue
		}
		st.judged++
		if b := e.Beyond(); b > 0 {
			st.kept++
			if b > st.beyond {
				st.beyond, st.beyondSeed = b, seed
			}
		}
	}
	for _, e := range h.Events {
		if e.Kind == Stopped && e.Cause == CauseWorkStuck {
			st.handovers++
		}
	}
	for _, o := range Outages(h) {
		st.outages++
		st.outageHandovers += o.Handovers
		if slices.ContainsFunc(o.Chains, func(c Chain) bool { k, _ := c.tooSoon(h.Work); return k > 0 }) {
			st.overBound++
			if len(st.overBoundSeeds) < 3 {
				st.overBoundSeeds = append(st.overBoundSeeds, seed)
			}
		}
		if st.outages == 1 || o.Handovers > st.worst.Handovers {
			st.worst, st.worstSeed = o, seed
		}
	}
}

// changeCost is what Totals keeps of a LeadershipChange.
type changeCost struct {
	how               string
	undisturbed, line bool
	calls, peak       int
}

// Result is what Add learnt from one history: its violations, and what
// became of the leaders' writes to each store. A test fails on any of
// relect's violations (Explain names the fixed finding one repeats), which
// include the fence store's late writes, and on a fence store's history
// that porcupine finds not linearizable.
type Result struct {
	Violations []Violation
	Stores     []StoreResult
}

// Add checks h (played from the schedule of seed) and adds it to the
// totals. It checks the stores' histories with porcupine, against a clock
// of real time: it must not be called inside a synctest bubble.
func (t *Totals) Add(seed uint64, h *History) Result {
	vs := Check(h)
	var res Result
	res.Violations = vs
	res.Stores = checkStores(h)
	calls, candTime := Usage(h)
	changes := LeadershipChanges(h)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.violations == nil {
		t.violations, t.affected, t.byRule = map[Class]int{}, map[Class]int{}, map[string]int{}
		t.explained, t.explSched, t.examples = map[Finding]int{}, map[Finding]int{}, map[Finding][]uint64{}
		t.coverage = map[string]int{}
	}
	t.schedules++
	t.calls += calls
	t.candTime += candTime
	on := 0
	if h.Work.On() {
		on = 1
	}
	t.callsBy[on] += calls
	t.candTimeBy[on] += candTime
	t.stuck.add(seed, h)
	if t.fencing == nil {
		t.fencing = map[Store]*fenceTotals{}
	}
	for _, sr := range res.Stores {
		ft := t.fencing[sr.Store]
		if ft == nil {
			ft = &fenceTotals{}
			t.fencing[sr.Store] = ft
		}
		ft.add(h, sr)
	}
	seenClass := map[Class]bool{}
	seenFinding := map[Finding]bool{}
	for _, v := range vs {
		t.violations[v.Class]++
		t.byRule[string(v.Class)+"/"+v.Rule]++
		if !seenClass[v.Class] {
			seenClass[v.Class] = true
			t.affected[v.Class]++
		}
		f := Explain(h, v)
		if f == "" {
			continue
		}
		t.explained[f]++
		if v.Class == Safety {
			t.explainedSafety++
		}
		if !seenFinding[f] {
			seenFinding[f] = true
			t.explSched[f]++
			if len(t.examples[f]) < 3 {
				t.examples[f] = append(t.examples[f], seed)
			}
		}
	}
	for _, a := range h.Actions {
		if k := a.CoverageKey(); k != "" && a.Skipped == "" {
			t.coverage[k]++
		}
	}
	for _, ch := range changes {
		t.changes = append(t.changes, changeCost{ch.How, ch.Disturbed == "", ch.Line, ch.Calls, ch.Peak})
		if ch.Disturbed == "" && ch.Calls > t.costliest.Calls {
			t.costliest, t.costliestSeed = ch, seed
		}
	}
	return res
}

// Usage returns the Lease calls h's candidates started before End and the
// total time their runs were campaigning (from Run to cancellation) before
// End.
func Usage(h *History) (calls int, candidateTime time.Duration) {
	for _, c := range h.Calls {
		if c.Start < h.End {
			calls++
		}
	}
	for _, r := range h.Runs {
		candidateTime += max(0, min(r.Cancelled, h.End)-r.Start)
	}
	return calls, candidateTime
}

// Schedules returns how many histories were added.
func (t *Totals) Schedules() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.schedules
}

// Violations returns the violations of class c, and the histories with at
// least one.
func (t *Totals) Violations(c Class) (violations, schedules int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.violations[c], t.affected[c]
}

// ByRule returns the violations per rule, keyed "class/rule".
func (t *Totals) ByRule() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.byRule {
		out[k] = v
	}
	return out
}

// Explained returns the violations attributed to finding f, the histories
// with at least one, and up to three of their seeds.
func (t *Totals) Explained(f Finding) (violations, schedules int, seeds []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.explained[f], t.explSched[f], slices.Clone(t.examples[f])
}

// Coverage returns how many times each fault was applied (an edit of a
// missing Lease does not count).
func (t *Totals) Coverage() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, v := range t.coverage {
		out[k] = v
	}
	return out
}

// CallsPerCandidateMinute is the mean Lease API load of one candidate.
func (t *Totals) CallsPerCandidateMinute() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.candTime == 0 {
		return 0
	}
	return float64(t.calls) / t.candTime.Minutes()
}

// CallsPerCandidateMinuteWork is CallsPerCandidateMinute of the schedules
// with work liveness (on) or without it.
func (t *Totals) CallsPerCandidateMinuteWork(on bool) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := 0
	if on {
		i = 1
	}
	if t.candTimeBy[i] == 0 {
		return 0
	}
	return float64(t.callsBy[i]) / t.candTimeBy[i].Minutes()
}

// Table formats totals per implementation as a markdown table: schedules,
// violations per class (and in how many schedules), and API calls per
// candidate-minute.
func Table(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	b.WriteString("| implementation | schedules |")
	for _, c := range Classes {
		label := string(c)
		if c == Events {
			label = "event"
		}
		fmt.Fprintf(&b, " %s violations |", label)
	}
	b.WriteString(" API calls per candidate-minute |\n|---|---:|")
	for range Classes {
		b.WriteString("---:|")
	}
	b.WriteString("---:|\n")
	for _, impl := range impls {
		t := totals[impl]
		fmt.Fprintf(&b, "| %s | %d |", impl, t.Schedules())
		for _, c := range Classes {
			v, s := t.Violations(c)
			if v == 0 {
				b.WriteString(" 0 |")
			} else {
				fmt.Fprintf(&b, " %d (in %d) |", v, s)
			}
		}
		fmt.Fprintf(&b, " %.1f |\n", t.CallsPerCandidateMinute())
	}
	return b.String()
}

// header writes a markdown table header: first, then one column per
// implementation.
func header(b *strings.Builder, first string, impls []Impl) {
	fmt.Fprintf(b, "| %s |", first)
	for _, impl := range impls {
		fmt.Fprintf(b, " %s |", impl)
	}
	b.WriteString("\n|---|")
	for range impls {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
}

// RuleTable formats the violations per rule, per implementation, as a
// markdown table.
func RuleTable(impls []Impl, totals map[Impl]*Totals) string {
	rules := map[string]bool{}
	per := map[Impl]map[string]int{}
	for _, impl := range impls {
		per[impl] = totals[impl].ByRule()
		for k := range per[impl] {
			rules[k] = true
		}
	}
	var b strings.Builder
	header(&b, "rule", impls)
	for _, k := range slices.Sorted(mapsKeys(rules)) {
		fmt.Fprintf(&b, "| %s |", k)
		for _, impl := range impls {
			fmt.Fprintf(&b, " %d |", per[impl][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// FindingTable formats how many violations each known finding explains,
// per implementation, as a markdown table; the last row counts the safety
// violations none explains.
func FindingTable(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	header(&b, "finding", impls)
	rest := map[Impl]int{}
	for _, impl := range impls {
		rest[impl], _ = totals[impl].Violations(Safety)
		rest[impl] -= totals[impl].safetyExplained()
	}
	for _, f := range Findings {
		fmt.Fprintf(&b, "| %s (fixed in relect) |", f)
		for _, impl := range impls {
			v, s, seeds := totals[impl].Explained(f)
			fmt.Fprintf(&b, " %d in %d schedules %v |", v, s, seeds)
		}
		b.WriteString("\n")
	}
	b.WriteString("| safety violations none of them explains |")
	for _, impl := range impls {
		fmt.Fprintf(&b, " %d |", rest[impl])
	}
	b.WriteString("\n")
	return b.String()
}

// CoverageTable formats how often each fault was applied, per
// implementation, as a markdown table.
func CoverageTable(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	header(&b, "fault", impls)
	covs := map[Impl]map[string]int{}
	for _, impl := range impls {
		covs[impl] = totals[impl].Coverage()
	}
	for _, k := range AllCoverageKeys() {
		fmt.Fprintf(&b, "| %s |", k)
		for _, impl := range impls {
			fmt.Fprintf(&b, " %d |", covs[impl][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// changeRows are the rows of ChangeTable: which changes each summarises.
var changeRows = []struct {
	label string
	keep  func(changeCost) bool
}{
	{"all", func(changeCost) bool { return true }},
	{"undisturbed (no fault, edit, start or stop in the window)", func(c changeCost) bool { return c.undisturbed }},
	{"undisturbed, the freed record named a line of succession", func(c changeCost) bool { return c.undisturbed && c.line }},
	{"undisturbed, no line: every follower tries at once", func(c changeCost) bool { return c.undisturbed && !c.line }},
	{"undisturbed, after a release (stop, yield)", func(c changeCost) bool { return c.undisturbed && c.how == FreedByRelease }},
	{"undisturbed, after a handover", func(c changeCost) bool { return c.undisturbed && c.how == FreedByHandOver }},
	{"undisturbed, after an expiry (kill, partition)", func(c changeCost) bool { return c.undisturbed && c.how == FreedByExpiry }},
	{"after a hand edit freed the lease", func(c changeCost) bool { return c.how == FreedByHand }},
}

// ChangeTable formats the calls per leadership change (LeadershipChanges),
// per implementation, as a markdown table: for each kind of change, how
// many there were and the median, 99th percentile (nearest rank) and most
// calls one cost; then the most calls any change made within PeakWindow.
func ChangeTable(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	header(&b, "leadership changes: count, calls per change median / p99 / max", impls)
	for _, row := range changeRows {
		fmt.Fprintf(&b, "| %s |", row.label)
		for _, impl := range impls {
			var calls []int
			for _, c := range totals[impl].changeCosts() {
				if row.keep(c) {
					calls = append(calls, c.calls)
				}
			}
			if len(calls) == 0 {
				b.WriteString(" 0 |")
				continue
			}
			slices.Sort(calls)
			fmt.Fprintf(&b, " %d: %d / %d / %d |", len(calls), nearestRank(calls, 50), nearestRank(calls, 99), calls[len(calls)-1])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| most calls of one change within %v |", PeakWindow)
	for _, impl := range impls {
		peak := 0
		for _, c := range totals[impl].changeCosts() {
			peak = max(peak, c.peak)
		}
		fmt.Fprintf(&b, " %d |", peak)
	}
	b.WriteString("\n")
	return b.String()
}

// nearestRank is the p-th percentile of sorted xs, by nearest rank.
func nearestRank(xs []int, p int) int {
	i := (p*len(xs)+99)/100 - 1
	return xs[max(i, 0)]
}

func (t *Totals) changeCosts() []changeCost {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.changes)
}

// Costliest returns the undisturbed leadership change with the most calls,
// and the seed of its schedule.
func (t *Totals) Costliest() (LeadershipChange, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.costliest, t.costliestSeed
}

func (t *Totals) safetyExplained() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.explainedSafety
}

func (t *Totals) stuckTotals() stuckTotals {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stuck
	st.gaps = map[string][]time.Duration{}
	for k, v := range t.stuck.gaps {
		st.gaps[k] = slices.Clone(v)
	}
	return st
}

// stuckRows are the rows of StuckTable: a label, and the cell of one
// implementation's totals.
var stuckRows = []struct {
	label string
	cell  func(t *Totals, st stuckTotals) string
}{
	{"schedules with work liveness", func(_ *Totals, st stuckTotals) string { return strconv.Itoa(st.schedules) }},
	{"terms whose work got stuck while they held the lease", func(_ *Totals, st stuckTotals) string { return strconv.Itoa(st.episodes) }},
	{"… judged (still stuck at the deadline, another candidate able to take over)", func(_ *Totals, st stuckTotals) string { return strconv.Itoa(st.judged) }},
	{"… of them, the lease still with the stuck leader after its deadline", func(_ *Totals, st stuckTotals) string { return strconv.Itoa(st.kept) }},
	{"longest a stuck leader kept the lease beyond its deadline", func(_ *Totals, st stuckTotals) string {
		if st.kept == 0 {
			return "0"
		}
		return fmt.Sprintf("%v (seed %d)", st.beyond.Round(time.Millisecond), st.beyondSeed)
	}},
	{"terms ended for stuck work (stuck handovers)", func(_ *Totals, st stuckTotals) string { return strconv.Itoa(st.handovers) }},
	{"fleet-wide outages: count, stuck handovers in them", func(_ *Totals, st stuckTotals) string {
		return fmt.Sprintf("%d: %d", st.outages, st.outageHandovers)
	}},
	{"… outages with a stuck handover sooner than the cooldowns allow", func(_ *Totals, st stuckTotals) string {
		if st.overBound == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (seeds %v)", st.overBound, st.overBoundSeeds)
	}},
	{"… most stuck handovers in one outage (its bound)", func(_ *Totals, st stuckTotals) string {
		if st.worst.Handovers == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (%d), %v, seed %d", st.worst.Handovers, st.worst.Bound(), (st.worst.To - st.worst.From).Round(time.Millisecond), st.worstSeed)
	}},
	{"nobody leads after a stuck handover, undisturbed: count: median / p99 / max", func(_ *Totals, st stuckTotals) string {
		return durationStats(st.gaps[CauseWorkStuck])
	}},
	{"… after a Yield, undisturbed", func(_ *Totals, st stuckTotals) string { return durationStats(st.gaps[CauseYielded]) }},
	{"… the longest of either, in succession steps (RetryPeriod/2; the bound: 7 and the calls' time)", func(_ *Totals, st stuckTotals) string {
		if st.steps == 0 {
			return "0"
		}
		return fmt.Sprintf("%.2f (seed %d)", st.steps, st.stepsSeed)
	}},
	{"API calls per candidate-minute, schedules without work liveness", func(t *Totals, _ stuckTotals) string {
		return fmt.Sprintf("%.1f", t.CallsPerCandidateMinuteWork(false))
	}},
	{"… with work liveness", func(t *Totals, _ stuckTotals) string { return fmt.Sprintf("%.1f", t.CallsPerCandidateMinuteWork(true)) }},
}

// durationStats formats ds as "count: median / p99 / max" (nearest rank),
// or "0".
func durationStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "0"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	rank := func(p int) time.Duration { return ds[max((p*len(ds)+99)/100-1, 0)] }
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d: %v / %v / %v", len(ds), r(rank(50)), r(rank(99)), r(ds[len(ds)-1]))
}

// StuckTable formats what became of stuck work (relect's Options.Work;
// checkwork.go), per implementation, as a markdown table. The client-go
// loop does the same work and cannot see it stuck: its terms keep the
// lease.
func StuckTable(impls []Impl, totals map[Impl]*Totals) string {
	var b strings.Builder
	header(&b, "stuck work", impls)
	sts := map[Impl]stuckTotals{}
	for _, impl := range impls {
		sts[impl] = totals[impl].stuckTotals()
	}
	for _, row := range stuckRows {
		fmt.Fprintf(&b, "| %s |", row.label)
		for _, impl := range impls {
			fmt.Fprintf(&b, " %s |", row.cell(totals[impl], sts[impl]))
		}
		b.WriteString("\n")
	}
	return b.String()
}
