package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/leadership"
)

// What the checkers make of the shards (shards.go, shardrun.go):
//
//   - safety (CheckShardSafety): never two terms of one shard at one
//     instant (shard-two-holders: ShardOptions.Run's contexts, half-open,
//     exact), nor two candidates' Elector.Shards listing one shard at one
//     sampled instant (shard-two-listed); each shard's fence grows from
//     term to term (shard-fence-not-growing); and the store each shard's
//     holders write to with its fence never applies a deposed term's
//     write after a newer term's (shard-fence-late-write; porcupine checks
//     the same history for linearizability: CheckShardStores);
//   - liveness (CheckShardLiveness): after the last fault, no shard goes
//     without a holder for longer than ShardLivenessBound (shard-unheld);
//     and once settled, at the end of the run, every shard is held and the
//     balance holds: each eligible candidate (running, not standing by,
//     registered since before the settle window) holds ⌊S/N⌋ or ⌈S/N⌉ of
//     the S shards (shard-unbalanced), and no other candidate holds any
//     (shard-held-by-ineligible).
//
// The bounds, from docs/design.md "Shards" (see ShardLivenessBound): the
// election needs its own liveness bound to have a leader that keeps
// leading; that leader starts assigning half a RetryPeriod into its term
// and needs its views (the registry's, the shard Leases', the table: a
// list each); a holder that stopped renewing is followed by a taker that
// takes its shard within LD + 2·RP of its last renewal, a candidate given a
// free shard that does not take it is left out after LD + 2·RP, and a
// missing shard Lease is created LD after it was watched missing — each
// one "takeover", LD + 2·RP; each identity that may still be registered
// while dead (one per kill or stop) may be given a free shard once, and
// cost a takeover; a shard Elector may be in its backoff (BackoffMax) when
// the faults end; and newcomers wait JoinDelay.

// ShardTakeover is the design's bound for one change of a shard's holder
// that is not graceful: LeaseDuration + 2·RetryPeriod.
func ShardTakeover(t Timing) time.Duration { return t.LeaseDuration + 2*t.RetryPeriod }

// mayBeDeadRegistered counts the actions of acts that may leave an
// identity registered though no process runs it: every kill (a crash does
// not deregister) and every stop (its deregistration may fail under a
// fault).
func mayBeDeadRegistered(acts []Action) int {
	n := 0
	for _, a := range acts {
		if a.Kind == Kill || a.Kind == Stop {
			n++
		}
	}
	return n
}

// ShardLivenessBound is how long after the last fault (Quiet) a shard may
// go without a holder, for timing t, join delay jd and the schedule's
// actions acts: the election's liveness bound (LivenessBound with the
// backoff cap, and SuccessionAllowance), 2·RetryPeriod for the new
// leader's assignment to start and read its views, one ShardTakeover for
// the shard itself and one more per identity that may be registered while
// dead (mayBeDeadRegistered), the shard Elector's backoff cap, and
// JoinDelay. See the file's comment.
func ShardLivenessBound(t Timing, jd time.Duration, acts []Action) time.Duration {
	t = t.withDefaults()
	election := LivenessBound(t, t.BackoffMax) + SuccessionAllowance(t)
	return election + 2*t.RetryPeriod + time.Duration(1+mayBeDeadRegistered(acts))*ShardTakeover(t) +
		t.BackoffMax + jd
}

// ShardSettle is how long after the last fault the shards must be settled
// (every shard held, balanced): ShardLivenessBound, then JoinDelay for the
// candidates still to be admitted (a candidate left out renews its
// registration at once, and is a newcomer), one ShardTakeover for the
// moves that admitting them makes, and a RetryPeriod.
func ShardSettle(t Timing, jd time.Duration, acts []Action) time.Duration {
	t = t.withDefaults()
	return ShardLivenessBound(t, jd, acts) + jd + ShardTakeover(t) + t.RetryPeriod
}

// shardLivenessBound and shardSettle are the bounds of history h.
func shardLivenessBound(h *History) time.Duration {
	return ShardLivenessBound(h.Timing, h.Shards.JoinDelay, actionsOf(h))
}

func shardSettle(h *History) time.Duration {
	return ShardSettle(h.Timing, h.Shards.JoinDelay, actionsOf(h))
}

func actionsOf(h *History) []Action {
	out := make([]Action, len(h.Actions))
	for i, a := range h.Actions {
		out[i] = a.Action
	}
	return out
}

// CheckShards runs the shard checkers over h (nil without shards), with
// the range checkers for range shards (CheckShardRanges).
func CheckShards(h *History) []Violation {
	if h.Shards == nil {
		return nil
	}
	ranges, _ := CheckShardRanges(h)
	return append(append(CheckShardSafety(h), ranges...), CheckShardLiveness(h)...)
}

// CheckWithShards is Check (TestSimulation's checkers) for a history with
// shards: the same, but that a run's shard calls in flight count as Lease
// calls for stopped-campaigning (checkCampaigning). They are kept out of
// History.Calls, which the budget and call checkers read (each shard
// Elector and the leader's assignment have token buckets of their own);
// but a run whose campaign waits for one of them — a leader's term ends
// only once its assignment's calls returned, which a Pause stalls — is
// waiting on a Lease call, as the checker allows.
func CheckWithShards(h *History) []Violation {
	vs := Check(h)
	if h.Shards == nil {
		return vs
	}
	with := *h
	with.Calls = append(slices.Clone(h.Calls), h.Shards.Calls...)
	var out []Violation
	for _, v := range vs {
		if v.Rule != "stopped-campaigning" {
			out = append(out, v)
		}
	}
	return append(out, checkCampaigning(&with)...)
}

// termEnd is the end of shard term t in h (End if it never ended).
func termEnd(h *History, t ShardTerm) time.Duration {
	if t.End < 0 {
		return math.MaxInt64
	}
	return t.End
}

type holderRun = [2]int // candidate, run

// CheckShardSafety: shard-two-holders, shard-two-listed,
// shard-fence-not-growing, shard-fence-late-write (see the file's comment).
func CheckShardSafety(h *History) []Violation {
	sh := h.Shards
	var out []Violation
	for _, name := range sh.Names {
		var terms []leadership.Span[holderRun, time.Duration]
		var idx []int
		for i, t := range sh.Terms {
			if t.Shard == name {
				terms = append(terms, leadership.Span[holderRun, time.Duration]{Who: holderRun{t.Candidate, t.Run}, From: t.Start, To: termEnd(h, t)})
				idx = append(idx, i)
			}
		}
		for _, o := range leadership.Overlaps(terms, leadership.HalfOpen) {
			a, b := sh.Terms[idx[o.A]], sh.Terms[idx[o.B]]
			d := "until the end"
			if o.To != math.MaxInt64 {
				d = fmt.Sprintf("for %v", o.To-o.From)
			}
			out = append(out, Violation{Class: Safety, Rule: "shard-two-holders", At: o.From, Candidates: []int{a.Candidate, b.Candidate},
				Detail: fmt.Sprintf("shard %s: two terms' contexts alive %s (fences %s, %s)", name, d, a.Fence, b.Fence)})
		}
		var held []leadership.Span[holderRun, time.Duration]
		for _, s := range sh.Held {
			if s.Shard == name {
				held = append(held, leadership.Span[holderRun, time.Duration]{Who: holderRun{s.Candidate, s.Run}, From: s.From, To: s.To})
			}
		}
		for _, o := range leadership.Overlaps(held, leadership.HalfOpen) {
			out = append(out, Violation{Class: Safety, Rule: "shard-two-listed", At: o.From,
				Candidates: []int{held[o.A].Who[0], held[o.B].Who[0]},
				Detail:     fmt.Sprintf("shard %s: in both candidates' Elector.Shards for %v", name, o.To-o.From)})
		}
		last := -1
		for _, i := range idx {
			t := sh.Terms[i]
			switch f := relect.Fence(t.Fence); {
			case !f.Valid():
				out = append(out, Violation{Class: Safety, Rule: "shard-fence-not-growing", At: t.Start, Candidates: []int{t.Candidate},
					Detail: fmt.Sprintf("shard %s: term %d has no valid fence (%q)", name, t.Number, t.Fence)})
			case last >= 0 && f.Compare(relect.Fence(sh.Terms[last].Fence)) <= 0:
				p := sh.Terms[last]
				out = append(out, Violation{Class: Safety, Rule: "shard-fence-not-growing", At: t.Start,
					Candidates: []int{p.Candidate, t.Candidate},
					Detail: fmt.Sprintf("shard %s: fence %s of %s's term after fence %s of %s's (begun %s)", name, t.Fence,
						CandidateName(t.Candidate), p.Fence, CandidateName(p.Candidate), fmtDur(p.Start))})
			}
			if relect.Fence(t.Fence).Valid() {
				last = i
			}
		}
		sub := shardStoreHistory(h, name)
		late, _ := LateWrites(sub, StoreFence)
		for _, l := range late {
			w, newer := l.Write, sh.Terms[l.Newer]
			out = append(out, Violation{Class: Safety, Rule: "shard-fence-late-write", At: w.Applied,
				Candidates: []int{w.Candidate, newer.Candidate},
				Detail: fmt.Sprintf("shard %s: its store accepted a write with fence %s (sent %s) after one of the newer term with fence %s reached it",
					name, w.Token, fmtDur(w.Sent), newer.Fence)})
		}
	}
	return out
}

// shardStoreHistory is the history of shard's store in h as the fence
// checkers read a leader's store (LateWrites, CheckLinearizable): the
// shard terms as Terms (a write's Term indexes them), its writes as
// StoreFence's, and its final content.
func shardStoreHistory(h *History, shard string) *History {
	sub := &History{Candidates: h.Candidates, FinalAt: h.FinalAt, Final: map[Store]string{StoreFence: h.Final[ShardStore(shard)]}}
	for _, t := range h.Shards.Terms {
		sub.Terms = append(sub.Terms, Term{Candidate: t.Candidate, Run: t.Run, Number: t.Number, Start: t.Start, Cancelled: t.End})
	}
	for _, w := range h.Writes {
		if w.Store == ShardStore(shard) {
			w.Store = StoreFence
			sub.Writes = append(sub.Writes, w)
		}
	}
	return sub
}

// ShardStoreResult is porcupine's verdict on one shard's store.
type ShardStoreResult struct {
	Shard string
	Ops   int // operations checked: the writes, and the final read
	Lin   Linearizability
}

// CheckShardStores checks every shard's store history with porcupine
// (CheckLinearizable), outside the bubble.
func CheckShardStores(h *History, timeout time.Duration) []ShardStoreResult {
	if h.Shards == nil {
		return nil
	}
	var out []ShardStoreResult
	for _, name := range h.Shards.Names {
		sub := shardStoreHistory(h, name)
		out = append(out, ShardStoreResult{Shard: name, Ops: len(sub.Writes) + 1, Lin: CheckLinearizable(sub, StoreFence, timeout)})
	}
	return out
}

// unheld returns, for shard, the intervals within [from, to) during which
// no term of it was alive.
func unheld(h *History, shard string, from, to time.Duration) [][2]time.Duration {
	var iv [][2]time.Duration
	for _, t := range h.Shards.Terms {
		if t.Shard == shard {
			iv = append(iv, [2]time.Duration{t.Start, min(termEnd(h, t), to)})
		}
	}
	held := mergeIntervals(iv)
	var out [][2]time.Duration
	at := from
	for _, x := range held {
		if x[1] <= at {
			continue
		}
		if x[0] > at {
			out = append(out, [2]time.Duration{at, min(x[0], to)})
		}
		at = max(at, x[1])
		if at >= to {
			break
		}
	}
	if at < to {
		out = append(out, [2]time.Duration{at, to})
	}
	return out
}

// ShardGapAfterQuiet returns the longest time after h.Quiet (or after
// ShardsAvailable) that a shard went without a holder, and which.
func ShardGapAfterQuiet(h *History) (gap time.Duration, shard string) {
	from, ok := ShardsAvailable(h)
	if !ok {
		return 0, ""
	}
	for _, name := range h.Shards.Names {
		for _, g := range unheld(h, name, from, h.End) {
			if d := g[1] - g[0]; d > gap {
				gap, shard = d, name
			}
		}
	}
	return gap, shard
}

// Balance is what the settled check found at the end of a run.
type Balance struct {
	At time.Duration
	// Eligible are the candidates that must hold their share: running,
	// not standing by, their registration live throughout the settle
	// window and their registry on. Uncertain are those whose
	// registration exists but was not live throughout (registered again
	// late), or whose registry is off (a 403 to a registry call: its
	// registration is no longer renewed, but lapses in the leader's view
	// only a lease duration after the leader last saw it change, and a
	// candidate left out cannot renew it to come back): each may hold its
	// share or nothing.
	Eligible, Uncertain []int
	Held                map[int]int // candidate → shards held (terms alive at At)
	Unheld              []string    // shards nobody held
	// Excused says why the balance was not judged ("" if it was).
	Excused string
}

// liveThroughout reports whether identity's registration was live
// throughout [from, to] by its own writes: present, and each instant
// within the lease duration of the write before it (the leader, which
// counts from when it saw a write, may count it live longer, never
// shorter).
func liveThroughout(h *History, identity string, from, to time.Duration) bool {
	var last *RegistrationChange
	for i := range h.Shards.Registrations {
		c := &h.Shards.Registrations[i]
		if c.Identity != identity {
			continue
		}
		if c.At > to {
			break
		}
		if c.At > from && (last == nil || !last.Present || c.At > last.At+last.Lives) {
			return false // a gap before this write
		}
		last = c
	}
	return last != nil && last.Present && to < last.At+last.Lives
}

// SettledBalance judges h's shards at its last instant (End − 1 ns), which
// ShardSettle leaves after the last fault (Span).
func SettledBalance(h *History) Balance {
	at := h.End - 1
	b := Balance{At: at, Held: map[int]int{}}
	if h.End-h.Quiet < shardSettle(h) {
		b.Excused = "the run ends before the settle window"
		return b
	}
	held := map[string]int{}
	for _, t := range h.Shards.Terms {
		if t.Start <= at && at < termEnd(h, t) {
			held[t.Shard] = t.Candidate
			b.Held[t.Candidate]++
		}
	}
	for _, name := range h.Shards.Names {
		if _, ok := held[name]; !ok {
			b.Unheld = append(b.Unheld, name)
		}
	}
	since := at - h.Shards.JoinDelay - ShardTakeover(h.Timing) - h.Timing.RetryPeriod
	for c := range h.Candidates {
		if c < len(h.Standby) && h.Standby[c] {
			continue
		}
		var run *Run
		for i := range h.Runs {
			if r := &h.Runs[i]; r.Candidate == c && r.Start <= at && at < r.Cancelled {
				run = r
			}
		}
		switch {
		case run == nil:
		case registryOff(h, c, at):
			// Its registration, if any, is no longer renewed: it takes
			// part while the leader counts it live, and not once left out.
			if presentAt(h, run.Identity, at) {
				b.Uncertain = append(b.Uncertain, c)
			}
		case liveThroughout(h, run.Identity, since, at):
			b.Eligible = append(b.Eligible, c)
		case presentAt(h, run.Identity, at):
			b.Uncertain = append(b.Uncertain, c)
		}
	}
	if len(b.Eligible)+len(b.Uncertain) == 0 {
		b.Excused = "no eligible candidate"
	}
	return b
}

// balanced reports whether the shards of b are balanced over the eligible
// candidates and some of the uncertain ones (the others holding none), and
// describes what is wrong with the likeliest case (all uncertain ones
// counted if they hold shards) if not.
func (b Balance) balanced(s int) (ok bool, why string) {
	if len(b.Unheld) > 0 {
		return false, fmt.Sprintf("unheld %v", b.Unheld)
	}
	u := b.Uncertain[:min(len(b.Uncertain), 10)]
	for mask := 0; mask < 1<<len(u); mask++ {
		in := slices.Clone(b.Eligible)
		good := true
		for i, c := range u {
			switch {
			case mask&(1<<i) != 0:
				in = append(in, c)
			case b.Held[c] > 0:
				good = false
			}
		}
		if !good || len(in) == 0 {
			continue
		}
		n := len(in)
		lo, hi := s/n, (s+n-1)/n
		var bad []string
		for _, c := range in {
			if k := b.Held[c]; k < lo || k > hi {
				bad = append(bad, fmt.Sprintf("%s holds %d", CandidateName(c), k))
			}
		}
		if len(bad) == 0 {
			return true, ""
		}
		if why == "" || mask == 1<<len(u)-1 {
			why = fmt.Sprintf("%d shards over %d candidates want %d–%d each; %s", s, n, lo, hi, strings.Join(bad, ", "))
		}
	}
	if why == "" {
		why = fmt.Sprintf("held %v", b.Held)
	}
	return false, why
}

// presentAt reports whether identity's registration existed at t (after
// the changes at t), by the watch's record, live or not.
func presentAt(h *History, identity string, t time.Duration) bool {
	present := false
	for _, c := range h.Shards.Registrations {
		if c.At > t {
			break
		}
		if c.Identity == identity {
			present = c.Present
		}
	}
	return present
}

// anyEligibleAt reports whether some candidate could hold shards at t:
// not standing by, with a run alive, and its registration live (a
// candidate whose registry is off, after a 403, or whose registration was
// deleted by hand, takes no part until it registers again).
func anyEligibleAt(h *History, t time.Duration) bool {
	for _, r := range h.Runs {
		standby := r.Candidate < len(h.Standby) && h.Standby[r.Candidate]
		if !standby && r.Start <= t && t < r.Cancelled && liveThroughout(h, r.Identity, t, t) && !registryOff(h, r.Candidate, t) {
			return true
		}
	}
	return false
}

// ShardsAvailable returns the instant from which the shards of h must be
// held within the bound: Quiet, or, if no candidate could hold a shard
// then, the instant from which one could until the end (a registration
// deleted by hand is created again only at its candidate's next renewal,
// RegistrationRenewal later: until then the leader gives it nothing, by
// design). ok is false if nobody could at the end.
func ShardsAvailable(h *History) (from time.Duration, ok bool) {
	points := []time.Duration{h.Quiet}
	for _, c := range h.Shards.Registrations {
		if c.At > h.Quiet && c.At < h.End {
			points = append(points, c.At)
		}
	}
	for _, r := range h.Runs {
		for _, t := range []time.Duration{r.Start, r.Cancelled} {
			if t > h.Quiet && t < h.End {
				points = append(points, t)
			}
		}
	}
	slices.Sort(points)
	from, ok = -1, false
	for _, p := range points {
		switch e := anyEligibleAt(h, p); {
		case e && !ok:
			from, ok = p, true
		case !e:
			ok = false
		}
	}
	return from, ok
}

// CheckShardLiveness: shard-unheld, shard-unbalanced,
// shard-held-by-ineligible (see the file's comment).
func CheckShardLiveness(h *History) []Violation {
	sh := h.Shards
	var out []Violation
	bound := shardLivenessBound(h)
	if from, ok := ShardsAvailable(h); ok {
		for _, name := range sh.Names {
			for _, g := range unheld(h, name, from, h.End) {
				if d := g[1] - g[0]; d > bound {
					out = append(out, Violation{Class: Liveness, Rule: "shard-unheld", At: g[0],
						Detail: fmt.Sprintf("shard %s: no holder from %s to %s (%v; faults healed at %s, bound %v)",
							name, fmtDur(g[0]), fmtDur(g[1]), d, fmtDur(h.Quiet), bound)})
				}
			}
		}
	}
	b := SettledBalance(h)
	if b.Excused != "" {
		return out
	}
	if ok, why := b.balanced(len(sh.Names)); !ok {
		out = append(out, Violation{Class: Liveness, Rule: "shard-unbalanced", At: b.At, Candidates: b.Eligible,
			Detail: fmt.Sprintf("settled (%v after the faults; eligible %v, uncertain %v): %s",
				b.At-h.Quiet, b.Eligible, b.Uncertain, why)})
	}
	for c, k := range b.Held {
		if !slices.Contains(b.Eligible, c) && !slices.Contains(b.Uncertain, c) && k > 0 {
			out = append(out, Violation{Class: Liveness, Rule: "shard-held-by-ineligible", At: b.At, Candidates: []int{c},
				Detail: fmt.Sprintf("settled: %s holds %d shards, but is not running, stands by or is not registered", CandidateName(c), k)})
		}
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Rule, b.Rule) })
	return out
}

// ShardTimeline is the shards' part of h's timeline: terms, the table's
// writes, the shard Leases' and the registrations' changes.
func ShardTimeline(h *History) string {
	if h.Shards == nil {
		return ""
	}
	type line struct {
		at time.Duration
		s  string
	}
	var lines []line
	add := func(at time.Duration, format string, args ...any) {
		lines = append(lines, line{at, fmt.Sprintf("%9s ", fmtDur(at)) + fmt.Sprintf(format, args...)})
	}
	for _, t := range h.Shards.Terms {
		add(t.Start, "SHARD %s: %s (run %d) term %d fence %s starts", t.Shard, CandidateName(t.Candidate), t.Run, t.Number, t.Fence)
		if t.End >= 0 {
			add(t.End, "SHARD %s: %s (run %d) term %d context ends", t.Shard, CandidateName(t.Candidate), t.Run, t.Number)
		}
	}
	for _, c := range h.Shards.Changes {
		s := fmt.Sprintf("holder=%q", c.Holder)
		switch {
		case c.Deleted:
			s = "deleted"
		case c.Released:
			s = "released"
		}
		if c.ByHand {
			s += " (by hand)"
		}
		add(c.At, "SHARD LEASE %s %s", c.Shard, s)
	}
	for _, c := range h.Shards.Tables {
		s := ""
		switch {
		case c.Deleted:
			s = "deleted"
		case c.Malformed:
			s = "malformed"
		default:
			s = fmt.Sprintf("holders=%v takers=%v out=%v", sortedMap(c.Assigned), sortedMap(c.Takers), sortedMap(c.Out))
		}
		if c.ByHand {
			s += " (by hand)"
		}
		add(c.At, "TABLE %s", s)
	}
	for _, c := range h.Shards.Registrations {
		add(c.At, "REGISTRATION %s present=%v", c.Identity, c.Present)
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at < lines[j].at })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.s)
		b.WriteByte('\n')
	}
	return b.String()
}

func sortedMap(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(mapsKeys(m)) {
		kv = append(kv, k+":"+m[k])
	}
	return "{" + strings.Join(kv, " ") + "}"
}

// ShardResult is what ShardTotals.Add found in one history.
type ShardResult struct {
	Shards []Violation // CheckShards'
	// Findings are the fixed findings the shard violations repeat, in
	// Shards' order ("" for an unexplained one).
	Findings []ShardFinding
	Election []Violation // CheckWithShards': TestSimulation's checkers, on the same run
	Stores   []ShardStoreResult
	Balance  Balance
	Gap      time.Duration // ShardGapAfterQuiet
	Bound    time.Duration // shardLivenessBound
	Ranges   RangeCoverage // CheckShardRanges' (zero without range shards)
}

// ShardTotals aggregates the shard checks of many histories. It is safe
// for concurrent use.
type ShardTotals struct {
	mu              sync.Mutex
	Schedules       int
	Terms           int
	Writes          int
	StoreOps        int            // porcupine operations checked
	Lin             map[string]int // porcupine's verdicts, per shard store
	ByRule          map[string]int // shard violations, "class/rule"
	Election        map[string]int // Check's violations, "class/rule"
	Judged, Excused int            // settled balances judged, and not
	Coverage        map[string]int
	Crashes, Calls  int
	WorstGap        time.Duration // the longest gap after the faults
	WorstGapSeed    uint64
	// WorstRatio is the largest ratio of a gap after the faults to its
	// bound, in the runs without a shard violation.
	WorstRatio     float64
	WorstRatioSeed uint64
	// Open counts the schedules that repeat each fixed finding, and
	// OpenSeeds the first few; Unexplained, the schedules with a
	// violation no finding explains.
	Open                   map[ShardFinding]int
	OpenSeeds              map[ShardFinding][]uint64
	Unexplained            int
	Shards, Candidates     int // summed, for means
	SettleTime, QuietTotal time.Duration
	// Range shards (CheckShardRanges): the schedules with range shards,
	// by S; their terms, whose contexts' ranges were checked; the
	// instants checked for overlaps, and those of them at which every
	// shard was held, checked for a gap.
	RangeSplits                           map[int]int
	RangeTerms, RangeInstants, RangeWhole int
}

// Add checks h, played from the schedule of seed, and adds it to the
// totals. It runs porcupine (real time): not inside a synctest bubble.
func (t *ShardTotals) Add(seed uint64, h *History) ShardResult {
	res := ShardResult{Shards: CheckShards(h), Election: CheckWithShards(h), Stores: CheckShardStores(h, LinearizabilityTimeout),
		Balance: SettledBalance(h), Bound: shardLivenessBound(h)}
	res.Gap, _ = ShardGapAfterQuiet(h)
	_, res.Ranges = CheckShardRanges(h)
	for _, v := range res.Shards {
		res.Findings = append(res.Findings, ExplainShard(h, v))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Lin == nil {
		t.Lin, t.ByRule, t.Election, t.Coverage = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
		t.Open, t.OpenSeeds = map[ShardFinding]int{}, map[ShardFinding][]uint64{}
	}
	t.addRanges(h, res.Ranges)
	seen := map[ShardFinding]bool{}
	for _, f := range res.Findings {
		if !seen[f] {
			seen[f] = true
			if f == "" {
				t.Unexplained++
				continue
			}
			t.Open[f]++
			if len(t.OpenSeeds[f]) < 5 {
				t.OpenSeeds[f] = append(t.OpenSeeds[f], seed)
			}
		}
	}
	t.Schedules++
	t.Terms += len(h.Shards.Terms)
	t.Crashes += h.Shards.Crashes
	t.Calls += len(h.Shards.Calls)
	t.Shards += len(h.Shards.Names)
	t.Candidates += h.Candidates
	for _, w := range h.Writes {
		if strings.HasPrefix(string(w.Store), "shard ") {
			t.Writes++
		}
	}
	for _, sr := range res.Stores {
		t.StoreOps += sr.Ops
		t.Lin[sr.Lin.Result]++
	}
	for _, v := range res.Shards {
		t.ByRule[string(v.Class)+"/"+v.Rule]++
	}
	for _, v := range res.Election {
		t.Election[string(v.Class)+"/"+v.Rule]++
	}
	if res.Balance.Excused == "" {
		t.Judged++
	} else {
		t.Excused++
	}
	if res.Gap > t.WorstGap {
		t.WorstGap, t.WorstGapSeed = res.Gap, seed
	}
	if r := float64(res.Gap) / float64(res.Bound); len(res.Shards) == 0 && r > t.WorstRatio {
		t.WorstRatio, t.WorstRatioSeed = r, seed
	}
	for _, a := range h.Actions {
		if k := a.CoverageKey(); k != "" && a.Skipped == "" {
			t.Coverage[k]++
		}
	}
	if h.Shards.Rolling {
		t.Coverage[RollingRestartKey]++
	}
	return res
}

// addRanges adds the range checks of h (cov: CheckShardRanges'), if it
// has range shards. Requires t.mu.
func (t *ShardTotals) addRanges(h *History, cov RangeCoverage) {
	if h.Shards.Ranges == "" {
		return
	}
	if t.RangeSplits == nil {
		t.RangeSplits = map[int]int{}
	}
	t.RangeSplits[len(h.Shards.Names)]++
	t.RangeTerms += len(h.Shards.Terms)
	t.RangeInstants += cov.Instants
	t.RangeWhole += cov.Whole
}

// Count returns the shard violations of class/rule rule added.
func (t *ShardTotals) Count(rule string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ByRule[rule]
}

// ShardFinding names a finding of the shard simulation: a library bug it
// found, since fixed (then in shardassign.go, now internal/shards; the repros are in the root's
// shard_break_test.go). ExplainShard attributes a violation to one, so
// that a regression is named; TestSimulationShards fails on it all the
// same.
type ShardFinding string

// The fixed findings (see TestSimulationShards' report), as they were.
const (
	// ShardLeftOutForGood: a candidate named by a shard Lease that
	// expired is left out (Table.Out) by every assignment while that
	// Lease still names it (internal/shards/plan.go, expiredCurrent:
	// "p.fail(failed)"); it renews its registration to come back, and the
	// next plan leaves it out again at once. When every eligible
	// candidate is so left out, nobody campaigns for the expired Lease,
	// it never changes, and no shard is ever held again.
	ShardLeftOutForGood ShardFinding = "S1 left out for good"
	// ShardTableEditStands: the leader plans from its own copy of the
	// table (assigner.table) and reads the table again only after a
	// failed write; a table edited by hand (a shard given to another
	// candidate) is what the members follow, while the leader's plan
	// keeps what its copy says, finds nothing to write, and the edit
	// stands, unbalanced, until something else makes the leader write or
	// a new leader reads it.
	ShardTableEditStands ShardFinding = "S2 table edit stands"
	// ShardGivenToTheDead: a shard whose Lease expired naming a holder
	// that is gone (crashed) is assigned afresh on every plan, to the
	// candidate furthest below its quota — which is often an identity
	// still registered though no process runs it (a crash, or a
	// deregistration refused), holding nothing. The rule that leaves out
	// a candidate given a shard it does not take within LD + 2·RP is in a
	// branch (internal/shards/plan.go, currentOf: "case assigned != \"\"") that a
	// shard whose Lease expired unreleased never reaches, and no taker is
	// named for a Lease already expired: the shard stays with the dead
	// identity, unheld, until its registration lapses (three
	// RegistrationRenewals: 45 minutes by default).
	ShardGivenToTheDead ShardFinding = "S3 given to the dead"
)

// ExplainShard returns the fixed finding v (a shard violation of h)
// repeats, or "".
func ExplainShard(h *History, v Violation) ShardFinding {
	if v.Class != Liveness || h.Shards == nil || len(h.Shards.Tables) == 0 {
		return ""
	}
	last := h.Shards.Tables[len(h.Shards.Tables)-1]
	b := SettledBalance(h)
	allOut := len(b.Eligible) > 0
	for _, c := range b.Eligible {
		if id := identityAt(h, c, b.At); last.Out[id] == "" {
			allOut = false
		}
	}
	deadAssignee := false
	for _, sh := range b.Unheld {
		if id := last.Assigned[sh]; id != "" && !slices.ContainsFunc(h.Runs, func(r Run) bool {
			return r.Identity == id && r.Start <= b.At && b.At < r.Cancelled
		}) {
			deadAssignee = true
		}
	}
	switch {
	case allOut && len(last.Assigned) == 0 && (v.Rule == "shard-unheld" || v.Rule == "shard-unbalanced"):
		return ShardLeftOutForGood
	case deadAssignee && (v.Rule == "shard-unheld" || v.Rule == "shard-unbalanced"):
		return ShardGivenToTheDead
	case last.ByHand && v.Rule == "shard-unbalanced" && len(b.Unheld) == 0:
		return ShardTableEditStands
	}
	return ""
}
