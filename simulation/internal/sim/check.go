package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relect/relect/internal/leadership"
)

// Class groups the rules a history is checked against.
type Class string

// The classes of rules.
const (
	Safety   Class = "safety"
	Liveness Class = "liveness"
	Budget   Class = "budget"
	Events   Class = "events"
	Calls    Class = "calls"
)

// Classes lists every class, in report order (StuckWork: checkwork.go).
var Classes = []Class{Safety, Liveness, Budget, Events, Calls, StuckWork}

// Violation is one breach of a rule in a history.
type Violation struct {
	Class      Class
	Rule       string
	At         time.Duration
	Candidates []int
	Detail     string
}

func (v Violation) String() string {
	var names []string
	for _, c := range v.Candidates {
		names = append(names, CandidateName(c))
	}
	return fmt.Sprintf("%s/%s at %s %v: %s", v.Class, v.Rule, fmtDur(v.At), names, v.Detail)
}

// Check runs every checker over h and returns the violations, in class
// order.
func Check(h *History) []Violation {
	var out []Violation
	out = append(out, CheckSafety(h)...)
	out = append(out, CheckLiveness(h)...)
	out = append(out, CheckBudget(h)...)
	out = append(out, CheckEvents(h)...)
	out = append(out, CheckCalls(h)...)
	out = append(out, CheckWork(h)...)
	return out
}

// CheckSafety: no two candidates have IsLeader true at the same instant,
// and no two candidates have a term context alive and not cancelled at the
// same instant. Intervals are half-open, so one ending at the very instant
// another begins does not overlap it; anything longer does. A candidate
// that stands by never leads (standby-led), and after a handover record
// names a successor nobody else begins to lead before it does, while the
// record lasts (handover-usurped). The store guarded by relect's fence
// never applies a deposed term's write after a newer term's
// (fence-late-write, checkfence.go).
func CheckSafety(h *History) []Violation {
	out := checkOverlaps(h)
	out = append(out, checkStandbys(h)...)
	out = append(out, checkHandOvers(h)...)
	return append(out, checkFence(h)...)
}

// internal/leadership's shapes in a History: candidates by number, instants
// in simulated time since the run began.
type (
	leaderSpan = leadership.Span[int, time.Duration]
	termStart  = leadership.Term[int, time.Duration]
)

// checkOverlaps: no two leaders, no two live term contexts
// (leadership.Overlaps, half-open: instants here are exact).
func checkOverlaps(h *History) []Violation {
	var out []Violation
	var leading []leaderSpan
	for _, s := range h.Leading {
		leading = append(leading, leaderSpan{Who: s.Candidate, From: s.From, To: s.To})
	}
	for _, o := range leadership.Overlaps(leading, leadership.HalfOpen) {
		out = append(out, Violation{Class: Safety, Rule: "two-leaders", At: o.From,
			Candidates: []int{leading[o.A].Who, leading[o.B].Who}, Detail: fmt.Sprintf("both IsLeader for %v", o.To-o.From)})
	}
	var terms []leaderSpan
	for _, t := range h.Terms {
		end := t.Cancelled
		if end < 0 {
			end = math.MaxInt64
		}
		terms = append(terms, leaderSpan{Who: t.Candidate, From: t.Start, To: end})
	}
	for _, o := range leadership.Overlaps(terms, leadership.HalfOpen) {
		d := "until the end"
		if o.To != math.MaxInt64 {
			d = fmt.Sprintf("for %v", o.To-o.From)
		}
		out = append(out, Violation{Class: Safety, Rule: "two-term-contexts", At: o.From,
			Candidates: []int{terms[o.A].Who, terms[o.B].Who}, Detail: "both term contexts alive and not cancelled " + d})
	}
	return out
}

// checkStandbys: a candidate that stands by never has IsLeader true, nor a
// term context.
func checkStandbys(h *History) []Violation {
	var out []Violation
	standby := func(c int) bool { return c < len(h.Standby) && h.Standby[c] }
	for _, s := range h.Leading {
		if standby(s.Candidate) {
			out = append(out, Violation{Class: Safety, Rule: "standby-led", At: s.From, Candidates: []int{s.Candidate},
				Detail: fmt.Sprintf("a standby's IsLeader was true for %v", s.To-s.From)})
		}
	}
	for _, t := range h.Terms {
		if standby(t.Candidate) {
			out = append(out, Violation{Class: Safety, Rule: "standby-led", At: t.Start, Candidates: []int{t.Candidate},
				Detail: fmt.Sprintf("a standby's OnStartedLeading was called (term %d)", t.Number)})
		}
	}
	return out
}

// checkHandOvers: while a handover record that names X lasts (its lease
// duration), no other candidate begins to lead, until X begins to lead, X
// acquires the lease (a record of its own replaces the handover's, and the
// usual expiry rules apply to it), X releases it (X declined: it stopped
// before taking it), or the Lease is edited by hand.
func checkHandOvers(h *History) []Violation {
	var out []Violation
	for i, c := range h.Changes {
		if c.HandOverTo == "" || c.ByHand {
			continue
		}
		until := handOverEnd(h, i)
		for _, s := range h.Leading {
			if s.From < c.At || s.From >= until || identityAt(h, s.Candidate, s.From) == c.HandOverTo {
				continue
			}
			out = append(out, Violation{Class: Safety, Rule: "handover-usurped", At: s.From, Candidates: []int{s.Candidate},
				Detail: fmt.Sprintf("leads %v after the lease was handed over to %s, before it led", s.From-c.At, c.HandOverTo)})
		}
	}
	return out
}

// handOverEnd is when the promise of handover record h.Changes[i] ends: its
// lease duration after it was written, the moment its successor began to
// lead, the successor's acquiring write, the next release (only the
// successor, named in the record, may release it), or the next edit by
// hand, whichever is first.
func handOverEnd(h *History, i int) time.Duration {
	c := h.Changes[i]
	secs, _ := strconv.Atoi(c.Duration)
	until := c.At + time.Duration(secs)*time.Second
	for _, s := range h.Leading {
		if s.From >= c.At && s.From < until && identityAt(h, s.Candidate, s.From) == c.HandOverTo {
			until = s.From
		}
	}
	for _, d := range h.Changes[i+1:] {
		acquired := d.Holder == c.HandOverTo && d.HandOverTo == ""
		if (d.ByHand || d.Holder == "" || acquired) && d.At < until {
			until = d.At
			break
		}
	}
	return until
}

// identityAt is the identity candidate c campaigned with at t: that of its
// last run started at or before t ("" if none).
func identityAt(h *History, c int, t time.Duration) string {
	id := ""
	for _, r := range h.Runs {
		if r.Candidate == c && r.Start <= t {
			id = r.Identity
		}
	}
	return id
}

// CampaignGap is the longest a run may go, while its context is alive and
// it does not lead, without a Lease call started or in flight: the backoff
// cap, plus the longest acquire poll interval (2.2·RetryPeriod, client-go's
// jitter), plus one token-bucket wait (1/Rate).
func CampaignGap(h *History) time.Duration {
	return h.BackoffCap + time.Duration(2.2*float64(h.Timing.RetryPeriod)) +
		time.Duration(float64(time.Second)/h.Budget.Rate) + time.Millisecond
}

// CheckLiveness:
//
//   - leader: by Quiet + LivenessBound some candidate leads, and from then
//     until End some candidate always leads;
//   - campaigning: no run stops campaigning while its context is alive:
//     while it does not lead, it always has a Lease call in flight or
//     starts one within CampaignGap;
//   - handover: a successful HandOver to a live candidate that follows
//     the Lease undisturbed makes it lead (see checkHandOverTaken);
//   - line-gone: after everyone the line names leaves at once, a
//     candidate it did not name leads within LineGoneAllowance (see
//     CheckLineGone).
func CheckLiveness(h *History) []Violation {
	out := checkLeader(h)
	out = append(out, CheckLineGone(h)...)
	out = append(out, checkCampaigning(h)...)
	out = append(out, checkHandOverTaken(h)...)
	out = append(out, checkStepDownGaps(h)...)
	return append(out, checkRegistrations(h)...)
}

// checkRegistrations (relect's registry, with a registration renewal
// period short enough to renew within the run):
//
//   - registration-not-recreated: a registration deleted by hand while its
//     candidate runs is created again by its next renewal — within 1.1
//     renewal periods (the jitter), a retry period and two full buckets'
//     refills (the renewal's NotFound and the create each wait for spare
//     tokens) — unless the candidate stopped or had a fault meanwhile, its
//     registry is off (a 403 to one of its registry calls, before or
//     meanwhile, turns it off for the Elector), or the bucket is the
//     smallest (4), whose registry calls wait for a full bucket that the
//     election's own calls may hold off;
//   - registration-deleted-live: a leader deletes a registration only once
//     it is older than twice its lease duration (three renewal periods) by
//     the shared clock of the simulation, counted from its last write —
//     its candidate's renewal, or an edit, a lagging clock's included.
func checkRegistrations(h *History) []Violation {
	rr := h.Timing.RegistrationRenewal
	if rr == 0 || h.Impl != Relect.String() {
		return nil
	}
	// With the smallest bucket (a burst of 4), registry calls wait for a
	// full one, which a leader's own calls can hold off for many retry
	// periods: no bound on when a renewal is sent, so none is judged.
	judgeRecreation := h.Budget.Burst > 4
	var out []Violation
	faults := faultWindows(h)
	runOf := func(c int, at time.Duration) (Run, bool) {
		for _, r := range h.Runs {
			if r.Candidate == c && r.Start <= at && at < r.Cancelled {
				return r, true
			}
		}
		return Run{}, false
	}
	// The last write of each registration before an instant.
	lastWrite := func(name string, before time.Duration) time.Duration {
		last := time.Duration(-1)
		for _, c := range h.Calls {
			if c.Registry && c.Name == name && c.Err == "" && (c.Verb == "create" || c.Verb == "update") && c.End <= before {
				last = max(last, c.End)
			}
		}
		for _, a := range h.Actions {
			if a.Kind == StaleRegistration && a.Registration == name && a.Skipped == "" && a.At <= before {
				last = max(last, a.At)
			}
		}
		return last
	}
	for _, a := range h.Actions {
		if a.Kind != DeleteRegistration || a.Skipped != "" || !judgeRecreation {
			continue
		}
		r, ok := runOf(a.Target, a.At)
		// The renewal's NotFound and the create each wait for a spare
		// token: at most a full bucket's refill.
		refill := time.Duration(float64(h.Budget.Burst) / h.Budget.Rate * float64(time.Second))
		due := a.At + rr*11/10 + h.Timing.RetryPeriod + 2*refill
		failedStepDown := slices.ContainsFunc(h.Actions, func(b Applied) bool {
			return b.FailWrite && b.Run == r.ID && b.At <= due // its injected failure may hit a registry call
		})
		// A 403 to a registry call turns the registry off for the
		// Elector: it registers no more.
		off := slices.ContainsFunc(h.Calls, func(c Call) bool {
			return c.Elector == r.Elector && c.Registry && strings.Contains(c.Err, "forbidden") && c.Start <= due
		})
		if !ok || r.Cancelled < due || due > h.End || overlapsAny(faults[a.Target], a.At, due) || failedStepDown || off {
			continue
		}
		recreated := slices.ContainsFunc(h.Calls, func(c Call) bool {
			return c.Registry && c.Run == r.ID && c.Name == a.Registration && c.Verb == "create" && c.Err == "" &&
				c.Start > a.At && c.End <= due
		})
		if !recreated {
			out = append(out, Violation{Class: Liveness, Rule: "registration-not-recreated", At: due, Candidates: []int{a.Target},
				Detail: fmt.Sprintf("registration %s deleted at %s, not created again by %s", a.Registration, fmtDur(a.At), fmtDur(due))})
		}
	}
	lives := registrationLives(h)
	for _, c := range h.Calls {
		if !c.Registry || c.Verb != "delete" || c.Err != "" || c.Name == "" {
			continue
		}
		owner := slices.IndexFunc(h.Runs, func(r Run) bool { return r.ID == c.Run && registrationOf(h, r) == c.Name })
		if owner >= 0 {
			continue // a candidate deregistering itself
		}
		if w := lastWrite(c.Name, c.Start); w >= 0 && c.Start-w < 2*lives {
			out = append(out, Violation{Class: Liveness, Rule: "registration-deleted-live", At: c.Start, Candidates: []int{c.Candidate},
				Detail: fmt.Sprintf("deleted %s, last written at %s: %v before, less than twice its %v", c.Name, fmtDur(w), c.Start-w, lives)})
		}
	}
	return out
}

// registrationOf returns the name of the registration run r wrote, or "".
func registrationOf(h *History, r Run) string {
	for _, c := range h.Calls {
		if c.Registry && c.Run == r.ID && c.Err == "" && (c.Verb == "create" || c.Verb == "update") {
			return c.Name
		}
	}
	return ""
}

// checkLeader: a leader by the bound, and always one from then on.
func checkLeader(h *History) []Violation {
	var out []Violation
	bound := LivenessBound(h.Timing, h.BackoffCap)
	if h.Impl == Relect.String() {
		bound += SuccessionAllowance(h.Timing) // its turn in a line of succession
	}
	deadline := h.Quiet + bound
	// Merge leading spans of anyone; find the segment that reaches End.
	segs := mergeSpans(h.Leading, func(Span) bool { return true })
	var last *[2]time.Duration
	if n := len(segs); n > 0 && segs[n-1][1] >= h.End {
		last = &segs[n-1]
	}
	switch {
	case h.End < deadline:
		// The run is too short to judge; the schedule generator never
		// makes one.
		out = append(out, Violation{Class: Liveness, Rule: "too-short", At: h.End,
			Detail: fmt.Sprintf("run ends at %s, before quiet+bound %s", fmtDur(h.End), fmtDur(deadline))})
	case last == nil:
		at := h.Quiet
		if n := len(segs); n > 0 {
			at = max(at, segs[n-1][1])
		}
		out = append(out, Violation{Class: Liveness, Rule: "no-leader", At: at,
			Detail: fmt.Sprintf("nobody leads from %s to the end %s (faults healed at %s, bound %v)",
				fmtDur(at), fmtDur(h.End), fmtDur(h.Quiet), bound)})
	case last[0] > deadline:
		out = append(out, Violation{Class: Liveness, Rule: "late-leader", At: last[0],
			Detail: fmt.Sprintf("steady leadership only from %s, %v after faults healed at %s (bound %v)",
				fmtDur(last[0]), last[0]-h.Quiet, fmtDur(h.Quiet), bound)})
	}
	return out
}

// checkCampaigning: no run stops campaigning while its context is alive.
func checkCampaigning(h *History) []Violation {
	var out []Violation
	gap := CampaignGap(h)
	for _, r := range h.Runs {
		end := min(r.Cancelled, h.End)
		var busy [][2]time.Duration
		for _, c := range h.Calls {
			if c.Run == r.ID {
				busy = append(busy, [2]time.Duration{c.Start, c.End})
			}
		}
		for _, s := range h.Leading {
			if s.Run == r.ID {
				busy = append(busy, [2]time.Duration{s.From, s.To})
			}
		}
		slices.SortFunc(busy, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
		at := r.Start
		check := func(until time.Duration) bool {
			if until-at > gap {
				out = append(out, Violation{Class: Liveness, Rule: "stopped-campaigning", At: at,
					Candidates: []int{r.Candidate},
					Detail:     fmt.Sprintf("run %d: no Lease call and not leading for %v (limit %v)", r.ID, until-at, gap)})
				return false
			}
			return true
		}
		for _, b := range busy {
			if b[0] >= end {
				break
			}
			if b[0] > at && !check(b[0]) {
				break
			}
			at = max(at, b[1])
		}
		if at < end {
			check(end)
		}
	}
	return out
}

// checkHandOverTaken: after a HandOver that returned nil, to a live
// candidate X, X leads within the handover record's lease duration, if X
// could take it: X's run lasts that long, X has a watch on the Lease open
// when the record is written (it follows, and is not in a backoff wait)
// and no other call in flight, no fault is active on X's API handle in
// that time, and nobody edits the Lease by hand meanwhile.
func checkHandOverTaken(h *History) []Violation {
	var out []Violation
	faults := faultWindows(h)
	for _, a := range h.Actions {
		if a.Kind != HandOver || a.Result != "ok" || a.ToState != TargetLive {
			continue
		}
		i := slices.IndexFunc(h.Changes, func(c Change) bool { return c.At >= a.At && c.HandOverTo == a.To && !c.ByHand })
		if i < 0 {
			continue // not written (the lease was lost first): nothing was promised
		}
		rec := h.Changes[i]
		secs, _ := strconv.Atoi(rec.Duration)
		until := rec.At + time.Duration(secs)*time.Second
		x := a.Holder
		switch {
		case until > h.End, !followsAt(h, x, rec.At), !runsThrough(h, x, rec.At, until),
			overlapsAny(faults[x], rec.At, until), editedBetween(h, rec.At, until), callingAt(h, x, rec.At):
			continue
		}
		led := slices.ContainsFunc(h.Leading, func(s Span) bool { return s.Candidate == x && s.From >= rec.At && s.From < until })
		if !led {
			out = append(out, Violation{Class: Liveness, Rule: "handover-not-taken", At: rec.At, Candidates: []int{x},
				Detail: fmt.Sprintf("handed over to %s, which followed the Lease undisturbed, but did not lead within %ds", a.To, secs)})
		}
	}
	return out
}

// followsAt reports whether candidate c has a watch on the election's Lease
// open at t.
func followsAt(h *History, c int, t time.Duration) bool {
	return slices.ContainsFunc(h.Calls, func(k Call) bool {
		return k.Candidate == c && k.Verb == "watch" && k.Election() && k.Err == "" && k.Start <= t && t < k.End
	})
}

// callingAt reports whether candidate c has a call on the election's Lease
// in flight at t, other than its watch: a follower waiting on a call (one
// a fault slowed before it healed, say) reads no watch event until the
// call returns.
func callingAt(h *History, c int, t time.Duration) bool {
	return slices.ContainsFunc(h.Calls, func(k Call) bool {
		return k.Candidate == c && k.Verb != "watch" && k.Election() && k.Start <= t && t < k.End
	})
}

// runsThrough reports whether a run of candidate c is alive (started, not
// cancelled) throughout [from, to].
func runsThrough(h *History, c int, from, to time.Duration) bool {
	return slices.ContainsFunc(h.Runs, func(r Run) bool {
		return r.Candidate == c && r.Start <= from && r.Cancelled >= to
	})
}

// editedBetween reports whether the Lease was edited by hand in [from, to].
func editedBetween(h *History, from, to time.Duration) bool {
	return slices.ContainsFunc(h.Changes, func(c Change) bool { return c.ByHand && c.At >= from && c.At <= to })
}

// faultWindows returns, per candidate, the intervals during which a fault
// was active on its API handle: from FailNext, Fail, FailVerb, Latency or
// Partition (a LineLeaves' included) to the next Heal (or LineHeal), from
// Pause to the next Resume (or to End).
func faultWindows(h *History) map[int][][2]time.Duration {
	out := map[int][][2]time.Duration{}
	openErr, openPause := map[int]time.Duration{}, map[int]time.Duration{}
	for _, a := range h.Actions {
		switch a.Kind {
		case FailNext, Fail, FailVerb, Latency, Partition:
			if _, ok := openErr[a.Target]; !ok {
				openErr[a.Target] = a.At
			}
		case Heal:
			if from, ok := openErr[a.Target]; ok {
				out[a.Target] = append(out[a.Target], [2]time.Duration{from, a.At})
				delete(openErr, a.Target)
			}
		case Pause:
			if _, ok := openPause[a.Target]; !ok {
				openPause[a.Target] = a.At
			}
		case Resume:
			if from, ok := openPause[a.Target]; ok {
				out[a.Target] = append(out[a.Target], [2]time.Duration{from, a.At})
				delete(openPause, a.Target)
			}
		case LineLeaves: // a partition of each candidate it cut off
			for _, c := range a.cut() {
				if _, ok := openErr[c]; !ok {
					openErr[c] = a.At
				}
			}
		case LineHeal:
			for _, c := range a.cut() {
				if from, ok := openErr[c]; ok {
					out[c] = append(out[c], [2]time.Duration{from, a.At})
					delete(openErr, c)
				}
			}
		}
	}
	for c, from := range openErr {
		out[c] = append(out[c], [2]time.Duration{from, h.End})
	}
	for c, from := range openPause {
		out[c] = append(out[c], [2]time.Duration{from, h.End})
	}
	return out
}

// overlapsAny reports whether any of ws shares an instant with [from, to].
func overlapsAny(ws [][2]time.Duration, from, to time.Duration) bool {
	return slices.ContainsFunc(ws, func(w [2]time.Duration) bool { return w[0] <= to && from <= w[1] })
}

// mergeSpans merges the spans that keep, touching ones included, into
// sorted disjoint segments.
func mergeSpans(spans []Span, keep func(Span) bool) [][2]time.Duration {
	var iv [][2]time.Duration
	for _, s := range spans {
		if keep(s) && s.To > s.From {
			iv = append(iv, [2]time.Duration{s.From, s.To})
		}
	}
	slices.SortFunc(iv, func(a, b [2]time.Duration) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]time.Duration
	for _, x := range iv {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// CheckBudget: for every elector (the scope of one token bucket), the calls
// counted in any window [a, b] are at most Burst + Rate·(b − a).
func CheckBudget(h *History) []Violation {
	var out []Violation
	byElector := map[int][]Call{}
	for _, c := range h.Calls {
		byElector[c.Elector] = append(byElector[c.Elector], c)
	}
	for _, el := range slices.Sorted(mapsKeys(byElector)) {
		calls := byElector[el]
		slices.SortStableFunc(calls, func(a, b Call) int { return cmp.Compare(a.Start, b.Start) })
		rate, burst := h.Budget.Rate, float64(h.Budget.Burst)
		// Calls i..j exceed the budget iff
		// (j − rate·t_j) − (i − rate·t_i) + 1 > burst.
		minVal, minIdx := math.Inf(1), 0
		worst, wi, wj := 0.0, 0, -1
		for j, c := range calls {
			v := float64(j) - rate*c.Start.Seconds()
			if v < minVal {
				minVal, minIdx = v, j
			}
			if excess := v - minVal + 1 - burst; excess > 1e-6 && excess > worst {
				worst, wi, wj = excess, minIdx, j
			}
		}
		if wj >= 0 {
			w := calls[wj].Start - calls[wi].Start
			out = append(out, Violation{Class: Budget, Rule: "over-budget", At: calls[wi].Start,
				Candidates: []int{calls[wi].Candidate},
				Detail: fmt.Sprintf("elector %d: %d calls in %v, budget %.1f (burst %d + %.3g/s)",
					el, wj-wi+1, w, burst+rate*w.Seconds(), h.Budget.Burst, rate)})
		}
	}
	return out
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// CheckEvents: within each run, every stopped-leading follows a
// started-leading and names its term, and no started-leading comes while a
// term is open; per candidate, term numbers never decrease, except across a
// deletion of the Lease (which starts the count over). Step-downs: see
// checkStepDowns.
func CheckEvents(h *History) []Violation {
	return append(checkTermEvents(h), checkStepDowns(h)...)
}

// checkTermEvents: started and stopped pair up, term numbers grow, no
// event is dropped.
func checkTermEvents(h *History) []Violation {
	var out []Violation
	evs := slices.Clone(h.Events)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	type state struct {
		open bool
		term int64
	}
	runs := map[int]*state{}
	decreased := termDecreases(h, evs)
	for i, e := range evs {
		if e.Kind != Started && e.Kind != Stopped {
			continue
		}
		r := runs[e.Run]
		if r == nil {
			r = &state{}
			runs[e.Run] = r
		}
		bad := func(rule, format string, args ...any) {
			out = append(out, Violation{Class: Events, Rule: rule, At: e.At, Candidates: []int{e.Candidate},
				Detail: fmt.Sprintf("run %d: ", e.Run) + fmt.Sprintf(format, args...)})
		}
		switch e.Kind {
		case Started:
			if r.open {
				bad("started-twice", "started term %d while term %d was open", e.Term, r.term)
			}
			r.open, r.term = true, e.Term
			if prev, ok := decreased[i]; ok {
				bad("term-decreased", "term %d after term %d, no deletion in between", e.Term, evs[prev].Term)
			}
		case Stopped:
			switch {
			case !r.open:
				bad("stopped-without-started", "stopped leading without having started")
			case e.Term >= 0 && r.term >= 0 && e.Term != r.term:
				bad("stopped-other-term", "stopped term %d, started term %d", e.Term, r.term)
			}
			r.open = false
		}
	}
	for _, r := range h.Runs {
		if r.Dropped > 0 {
			out = append(out, Violation{Class: Events, Rule: "dropped", At: r.Start, Candidates: []int{r.Candidate},
				Detail: fmt.Sprintf("run %d dropped %d events", r.ID, r.Dropped)})
		}
	}
	return out
}

// termDecreases finds, per candidate, the started-leading events of evs
// (sorted by time) whose term is lower than that of the candidate's
// started-leading before, with no deletion of the Lease in between (which
// starts the count over). It maps the index of each to that of the one
// before.
func termDecreases(h *History, evs []Event) map[int]int {
	terms := map[int][]termStart{}
	index := map[int][]int{} // per candidate, the index in evs of each of its terms
	for i, e := range evs {
		if e.Kind == Started {
			terms[e.Candidate] = append(terms[e.Candidate], termStart{Who: e.Candidate, Number: e.Term, At: e.At})
			index[e.Candidate] = append(index[e.Candidate], i)
		}
	}
	out := map[int]int{}
	for c, ts := range terms {
		for _, reg := range leadership.TermRegressions(ts) {
			prev, cur := index[c][reg.Prev], index[c][reg.Cur]
			if !resetBetween(h, evs[prev].At, evs[cur].At) {
				out[cur] = prev
			}
		}
	}
	return out
}

// checkStepDowns: a term ends as yielded or handed over only in a run
// asked to (a Yield or HandOver applied to it before), and a handed-over
// event follows the stopped-leading of its term and names the identity
// HandOver was given; HandOver fails when asked to hand over to the leader
// itself, or to a candidate the leader lists as standing by.
func checkStepDowns(h *History) []Violation {
	var out []Violation
	asked := func(run int, kind Kind, to string, at time.Duration) bool {
		return slices.ContainsFunc(h.Actions, func(a Applied) bool {
			return a.Kind == kind && a.Run == run && a.At <= at && (to == "" || a.To == to)
		})
	}
	evs := slices.Clone(h.Events)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	stopped := map[[2]int64]bool{} // run, term
	for _, e := range evs {
		bad := func(rule, format string, args ...any) {
			out = append(out, Violation{Class: Events, Rule: rule, At: e.At, Candidates: []int{e.Candidate},
				Detail: fmt.Sprintf("run %d: ", e.Run) + fmt.Sprintf(format, args...)})
		}
		switch {
		case e.Kind == Stopped && e.Cause == CauseYielded && !asked(e.Run, Yield, "", e.At):
			bad("unasked-step-down", "term %d ended as yielded, but no Yield was asked of this run", e.Term)
		case e.Kind == Stopped && e.Cause == CauseHandedOver && !asked(e.Run, HandOver, "", e.At):
			bad("unasked-step-down", "term %d ended as handed over, but no HandOver was asked of this run", e.Term)
		case e.Kind == HandedOver && !stopped[[2]int64{int64(e.Run), e.Term}]:
			bad("handed-over-before-stop", "handed over term %d before it stopped", e.Term)
		case e.Kind == HandedOver && !asked(e.Run, HandOver, e.Detail, e.At):
			bad("unasked-step-down", "handed over to %s, but no HandOver to it was asked of this run", e.Detail)
		}
		if e.Kind == Stopped {
			stopped[[2]int64{int64(e.Run), e.Term}] = true
		}
	}
	for _, a := range h.Actions {
		refused := a.ToState == TargetSelf || a.ToState == TargetUnknown || a.ToState == TargetStandby && a.StandbyKnown
		if a.Kind == HandOver && refused && a.Result == "ok" {
			out = append(out, Violation{Class: Events, Rule: "handover-not-refused", At: a.At,
				Detail: fmt.Sprintf("HandOver to %s (%s) returned nil", a.To, a.ToState)})
		}
	}
	return append(out, checkGivenUp(h)...)
}

// checkGivenUp (given-up-resumed): a step-down whose write failed gives its
// record up; the run that stepped down never leads that term again (a
// resumed record keeps its term number; a lease taken over once it expired
// has a new one).
func checkGivenUp(h *History) []Violation {
	var out []Violation
	for _, a := range h.Actions {
		if (a.Kind != Yield && a.Kind != HandOver) || a.Run < 0 || !strings.Contains(a.Result, "releasing the lease") {
			continue // not a step-down whose write failed (refused, say)
		}
		var term int64 = -1
		for _, e := range h.Events {
			if e.Run == a.Run && e.Kind == Stopped && e.At >= a.At && (e.Cause == CauseYielded || e.Cause == CauseHandedOver) {
				term = e.Term
				break
			}
		}
		if term < 0 {
			continue // refused before the term ended, or not ended by it
		}
		for _, e := range h.Events {
			if e.Run == a.Run && e.Kind == Started && e.At > a.At && e.Term == term && !resetBetween(h, a.At, e.At) {
				out = append(out, Violation{Class: Events, Rule: "given-up-resumed", At: e.At, Candidates: []int{e.Candidate},
					Detail: fmt.Sprintf("run %d: its %s's write failed (%s), yet it led term %d again", a.Run, a.Kind, a.Result, term)})
				break
			}
		}
	}
	return out
}

func resetBetween(h *History, from, to time.Duration) bool {
	for _, t := range h.Resets {
		if t >= from && t <= to {
			return true
		}
	}
	return false
}
