package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect/internal/defaults"
)

// Stuck work (relect's Options.Work; the schedule's work and its faults are
// in work.go): when the work of a term was stuck, what relect had to do
// about it, and the checkers of class StuckWork.

// StuckWork is the class of the rules on stuck work (relect's
// Options.Work).
const StuckWork Class = "stuck-work"

// The means by which relect sees stuck work.
const (
	byBeat  = iota // no beat within BeatWindow
	byCheck        // CheckFailures failures of the check in a row
)

var meansNames = [...]string{byBeat: "beats", byCheck: "check"}

// stuckWindows returns, for each means (byBeat, byCheck) and candidate, the
// merged, sorted intervals [from, to) during which the candidate's work was
// stuck as that means shows it: hung (HangWork, or the downstream failing)
// if a BeatWindow is set, its check failing (FailCheck, or the downstream)
// if a Check is. A fault never undone lasts until End.
func stuckWindows(h *History) [2]map[int][][2]time.Duration {
	var out [2]map[int][][2]time.Duration
	out[byBeat], out[byCheck] = map[int][][2]time.Duration{}, map[int][][2]time.Duration{}
	open := [2]map[int]time.Duration{{}, {}}
	add := func(m, c int, start bool, at time.Duration) {
		from, ok := open[m][c]
		switch {
		case start && !ok:
			open[m][c] = at
		case !start && ok:
			out[m][c] = append(out[m][c], [2]time.Duration{from, at})
			delete(open[m], c)
		}
	}
	for _, a := range h.Actions {
		who := []int{a.Target}
		if a.Target < 0 {
			who = nil
			for c := range h.Candidates {
				who = append(who, c)
			}
		}
		for _, c := range who {
			switch a.Kind {
			case HangWork, UnhangWork:
				add(byBeat, c, a.Kind == HangWork, a.At)
			case FailCheck, HealCheck:
				add(byCheck, c, a.Kind == FailCheck, a.At)
			case FailDownstream, HealDownstream:
				// One fault on each candidate, separate from its own:
				// keyed apart, merged below.
				add(byBeat, -1-c, a.Kind == FailDownstream, a.At)
				add(byCheck, -1-c, a.Kind == FailDownstream, a.At)
			}
		}
	}
	for m := range open {
		for c, from := range open[m] {
			out[m][c] = append(out[m][c], [2]time.Duration{from, h.End})
		}
	}
	beat, check := h.Work.detection()
	for m, on := range []bool{byBeat: beat > 0, byCheck: check > 0} {
		merged := map[int][][2]time.Duration{}
		if on {
			for c := range h.Candidates {
				merged[c] = mergeIntervals(append(slices.Clone(out[m][c]), out[m][-1-c]...))
			}
		}
		out[m] = merged
	}
	return out
}

// mergeIntervals merges iv, touching ones included, into sorted disjoint
// intervals.
func mergeIntervals(iv [][2]time.Duration) [][2]time.Duration {
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

// stuckAt reports whether candidate c's work is stuck, by any means
// relect watches, at some instant of [from, to].
func stuckAt(ws [2]map[int][][2]time.Duration, c int, from, to time.Duration) bool {
	return overlapsAny(ws[byBeat][c], from, to) || overlapsAny(ws[byCheck][c], from, to)
}

// StuckAllowance is what stuck-kept allows, beyond the instant relect must
// decide to hand over, for the lease to leave a stuck leader: two retry
// periods (relect looks again at every renewal, a retry period apart) and
// two token waits (the release write, and the call it may wait behind).
func StuckAllowance(h *History) time.Duration {
	return 2*h.Timing.RetryPeriod + 2*time.Duration(float64(time.Second)/h.Budget.Rate) + 10*RoundTrip
}

// StuckEpisode is a term whose work became stuck while it held the lease,
// and what stuck-kept makes of it.
type StuckEpisode struct {
	Candidate, Run int
	Term           int64
	Means          string // how relect would see it: "beats" or "check"
	// Streak is that of the record the term acquired from, and Hold what
	// it makes the term hold from its start: Cooldown × 2^(Streak−1), at
	// most MaxCooldown (zero for relect's streak 0, and for the client-go
	// loop, which has none).
	Streak int
	Hold   time.Duration
	// From: when the work became stuck (or the term began, if later);
	// Decided: by when relect must have decided to hand over — the
	// detection (From + BeatWindow, or + CheckFailures × CheckInterval +
	// CheckTimeout), the end of the hold, or when another candidate
	// became able to take over, whichever is last; Deadline: Decided +
	// StuckAllowance.
	From, Decided, Deadline time.Duration
	// Until: when the Lease stopped naming the leader (End if never);
	// Recovered: when the work was no longer stuck (End if never).
	Until, Recovered time.Duration
	// Excused says why the episode is not judged ("" if it is): the work
	// recovered by the deadline, the run ended, an API fault hit the
	// leader, a hand edit, or no other candidate could take over (all
	// down, standing by, unregistered, or stuck themselves: then leading
	// on is right).
	Excused string
}

// Beyond is how long the stuck leader kept the lease past its deadline
// while its work was still stuck (zero if it did not, or is excused).
func (e StuckEpisode) Beyond() time.Duration {
	if e.Excused != "" {
		return 0
	}
	return max(0, min(e.Until, e.Recovered)-e.Deadline)
}

func (e StuckEpisode) String() string {
	return fmt.Sprintf("%s term %d: work stuck from %s (%s), streak %d (hold %v), must hand over by %s + %v = %s; the lease named it until %s, the work recovered at %s",
		CandidateName(e.Candidate), e.Term, fmtDur(e.From), e.Means, e.Streak, e.Hold, fmtDur(e.Decided),
		e.Deadline-e.Decided, fmtDur(e.Deadline), fmtDur(e.Until), fmtDur(e.Recovered))
}

// StuckEpisodes returns, for every term of h whose work became stuck while
// the Lease named it, the episode stuck-kept judges: of its stuck spans
// (by each means relect watches), the one with the earliest deadline that
// the work did not recover by, else the first.
func StuckEpisodes(h *History) []StuckEpisode {
	if !h.Work.On() {
		return nil
	}
	ws := stuckWindows(h)
	faults := faultWindows(h)
	beat, check := h.Work.detection()
	detect := [2]time.Duration{byBeat: beat, byCheck: check}
	allowance := StuckAllowance(h)
	var out []StuckEpisode
	for _, tm := range h.Terms {
		id := identityAt(h, tm.Candidate, tm.Start)
		until := leaseLeft(h, id, tm.Start)
		streak := 0
		if i := acquiredFrom(h, id, tm.Start); i >= 0 && h.Impl == Relect.String() {
			streak = h.Changes[i].Streak
		}
		hold := h.Work.hold(streak)
		var best *StuckEpisode
		end := tm.Cancelled
		if end < 0 {
			end = h.End
		}
		cause := stopCause(h, tm)
		for m, d := range detect {
			if d == 0 {
				continue
			}
			for _, w := range ws[m][tm.Candidate] {
				from := max(w[0], tm.Start)
				if w[1] <= tm.Start || from >= min(until, end) {
					continue // not stuck while this term held the lease
				}
				e := StuckEpisode{Candidate: tm.Candidate, Run: tm.Run, Term: tm.Number, Means: meansNames[m], Streak: streak,
					Hold: hold, From: from, Until: until, Recovered: w[1]}
				e.Decided = max(from+d, tm.Start+hold)
				e.Deadline = e.Decided + allowance
				e.Excused = excuseStuck(h, ws, faults, &e, tm)
				if e.Excused == "" && end < e.Deadline && cause != CauseWorkStuck {
					e.Excused = "the term ended otherwise"
				}
				if best == nil || better(e, *best) {
					best = &e
				}
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

// stopCause returns the Cause of the stopped-leading event that ended term
// tm, or "" if none did (the client-go loop's carry no term).
func stopCause(h *History, tm Term) string {
	for _, e := range h.Events {
		if e.Kind == Stopped && e.Run == tm.Run && e.Term == tm.Number && e.At >= tm.Start {
			return e.Cause
		}
	}
	return ""
}

// better reports whether episode a is judged before b: judged before
// excused, then the earlier deadline.
func better(a, b StuckEpisode) bool {
	if (a.Excused == "") != (b.Excused == "") {
		return a.Excused == ""
	}
	return a.Deadline < b.Deadline
}

// excuseStuck says why episode e of term tm is not judged, or "": the
// work recovered by the deadline; the run ended before it (a kill keeps
// the lease until it expires); an API fault hit the leader in [From,
// Deadline] (its release may fail); the Lease was edited by hand then (a
// release that conflicts with an edit is given up); or no other candidate
// could take over. If one could only later than Decided, Decided and Deadline move
// to then.
func excuseStuck(h *History, ws [2]map[int][][2]time.Duration, faults map[int][][2]time.Duration, e *StuckEpisode, tm Term) string {
	allowance := e.Deadline - e.Decided
	at, ok := takerFrom(h, ws, tm, e.Decided, e.Recovered-allowance, allowance)
	if ok {
		e.Decided, e.Deadline = at, at+allowance
	}
	switch {
	case !ok && e.Recovered > e.Deadline:
		return "nobody else could take over"
	case e.Recovered <= e.Deadline:
		return "recovered"
	case !runsThrough(h, tm.Candidate, e.From, e.Deadline):
		return "run ended"
	case overlapsAny(faults[tm.Candidate], e.From, e.Deadline), failedStepDown(h, tm.Run, tm.Start, e.Deadline):
		return "API fault"
	case editedBetween(h, e.From, e.Deadline):
		return "hand edit" // the release may conflict with it and leave the record (docs/reliability.md, F3)
	}
	return ""
}

// failedStepDown reports whether a Yield or HandOver whose write fails was
// asked of run in [from, to]: its injected failure hits the run's next
// call, whichever it is (a stuck release, if the step-down was refused).
func failedStepDown(h *History, run int, from, to time.Duration) bool {
	return slices.ContainsFunc(h.Actions, func(a Applied) bool {
		return a.FailWrite && a.Run == run && a.At >= from && a.At <= to
	})
}

// takerFrom returns the first instant in [from, to] at which the leader of
// term tm knows that another candidate is there (knowsOthers), and one
// could take the lease over and stays able to for span: it runs, does not
// stand by, its work is not stuck, and (relect) its registration, which
// tells the leader it is there, exists.
func takerFrom(h *History, ws [2]map[int][][2]time.Duration, tm Term, from, to, span time.Duration) (time.Duration, bool) {
	instants := []time.Duration{from}
	for _, r := range h.Runs {
		instants = append(instants, r.Start)
	}
	for _, k := range h.Calls {
		if k.Registry && k.Err == "" && (k.Verb == "create" || k.Verb == "update" || k.Verb == "list") {
			instants = append(instants, k.End)
		}
	}
	for m := range ws {
		for _, iv := range ws[m] {
			for _, w := range iv {
				instants = append(instants, w[1])
			}
		}
	}
	slices.Sort(instants)
	for _, t := range instants {
		if t < from || t > to || !knowsOthers(h, tm, t) {
			continue
		}
		for o := range h.Candidates {
			if o != tm.Candidate && ableThrough(h, ws, o, t, t+span) {
				return t, true
			}
		}
	}
	return 0, false
}

// knowsOthers reports whether, at t, the leader of term tm can know of a
// candidate other than itself (relect's rule for leading on with stuck
// work: "no other candidate is known to take over"): its candidate
// registry is off (then it counts on anyone), the record it acquired
// named a line of succession, or it has listed the registry in this term
// (half a RetryPeriod into it, or later: with the smallest bucket,
// registry calls wait for a full one). The client-go loop has no such
// rule.
func knowsOthers(h *History, tm Term, t time.Duration) bool {
	if h.Impl != Relect.String() {
		return true
	}
	el := slices.IndexFunc(h.Runs, func(r Run) bool { return r.ID == tm.Run })
	if el < 0 {
		return false
	}
	elector := h.Runs[el].Elector
	id := identityAt(h, tm.Candidate, tm.Start)
	if i := acquiredFrom(h, id, tm.Start); i >= 0 && slices.ContainsFunc(h.Changes[i].Line, func(n string) bool { return n != id }) {
		return true
	}
	return slices.ContainsFunc(h.Calls, func(k Call) bool {
		off := k.Elector == elector && k.Registry && strings.Contains(k.Err, "forbidden") && k.End <= t
		listed := k.Run == tm.Run && k.Registry && k.Verb == "list" && k.Err == "" && k.End >= tm.Start && k.End <= t
		return off || listed
	})
}

// ableThrough reports whether candidate o could take the lease over
// throughout [from, to]: a run of it is alive, it does not stand by, its
// work is not stuck, and (relect) its registration exists throughout.
func ableThrough(h *History, ws [2]map[int][][2]time.Duration, o int, from, to time.Duration) bool {
	if o < len(h.Standby) && h.Standby[o] || stuckAt(ws, o, from, to) {
		return false
	}
	i := slices.IndexFunc(h.Runs, func(r Run) bool { return r.Candidate == o && r.Start <= from && r.Cancelled >= to })
	if i < 0 {
		return false
	}
	return h.Impl != Relect.String() || registeredThrough(h, h.Runs[i], from, to)
}

// registeredThrough reports whether run r's registration is live for the
// leader throughout [from, to]: written at or before from, no older than
// its lease duration at to (three renewal periods, in whole seconds: the
// leader counts from when it saw it, no sooner than it was written), and
// not deleted since (by its candidate, a leader, or by hand) until to.
func registeredThrough(h *History, r Run, from, to time.Duration) bool {
	name := registrationOf(h, r)
	if name == "" {
		return false
	}
	written := time.Duration(-1)
	for _, k := range h.Calls {
		if k.Registry && k.Name == name && k.Err == "" && (k.Verb == "create" || k.Verb == "update") && k.End <= from {
			written = max(written, k.End)
		}
	}
	if written < 0 || written+registrationLives(h) < to {
		return false
	}
	deleted := slices.ContainsFunc(h.Calls, func(k Call) bool {
		return k.Registry && k.Name == name && k.Err == "" && k.Verb == "delete" && k.Start > written && k.Start <= to
	}) || slices.ContainsFunc(h.Actions, func(a Applied) bool {
		return a.Kind == DeleteRegistration && a.Skipped == "" && a.Registration == name && a.At > written && a.At <= to
	})
	return !deleted
}

// leaseLeft returns the first instant after t at which the Lease stopped
// naming identity id: released, handed over, taken, edited or deleted; End
// if never.
func leaseLeft(h *History, id string, t time.Duration) time.Duration {
	for _, c := range h.Changes {
		if c.At > t && (c.Deleted || c.Holder != id) {
			return c.At
		}
	}
	return h.End
}

// acquiredFrom returns the index in h.Changes of the record that identity
// id acquired, for a term that began at t: the change just before the
// run of id's own records (not by hand, not handover records) that ends
// at or before t; -1 if there is none (the Lease was created).
func acquiredFrom(h *History, id string, t time.Duration) int {
	own := func(c Change) bool { return !c.Deleted && !c.ByHand && c.Holder == id && c.HandOverTo == "" }
	j := -1
	for i, c := range h.Changes {
		if c.At <= t {
			j = i
		}
	}
	if j < 0 || !own(h.Changes[j]) {
		return -1
	}
	for j > 0 && own(h.Changes[j-1]) {
		j--
	}
	return j - 1
}

// CheckWork runs the checkers of stuck work over a relect history:
//
//   - stuck-kept: a term whose work is stuck keeps the lease no longer
//     than the deadline of its StuckEpisode — unless excused;
//   - stuck-handovers: while the downstream fails for everyone, the k-th
//     stuck handover in a row comes no sooner than the cooldowns allow, so
//     in a span T at most Work.StuckHandoverBound(T) terms end for stuck
//     work (checkOutages);
//   - stuck-unfounded: a term ends for stuck work only if its work was
//     stuck within the detection time before (checkFounded).
//
// The client-go loop cannot see stuck work: its figures are reported
// (StuckEpisodes), not checked.
func CheckWork(h *History) []Violation {
	if h.Impl != Relect.String() || !h.Work.On() {
		return nil
	}
	var out []Violation
	for _, e := range StuckEpisodes(h) {
		if e.Beyond() > 0 {
			out = append(out, Violation{Class: StuckWork, Rule: "stuck-kept", At: e.Deadline, Candidates: []int{e.Candidate},
				Detail: fmt.Sprintf("%v: %v beyond", e, e.Beyond())})
		}
	}
	out = append(out, checkOutages(h)...)
	return append(out, checkFounded(h)...)
}

// Outage is one span during which the work's downstream failed for
// everyone (FailDownstream … HealDownstream), and the stuck handovers in
// it.
type Outage struct {
	From, To time.Duration
	// Handovers are the terms that ended for stuck work from From until
	// To + OutageSlack.
	Handovers int
	// Chains are the runs of those handovers in a row, by the streak each
	// release published; a release that was not written (an API fault, a
	// kill) published none, so the count starts over after it (its
	// successor acquires a record that expired, and the streak in it).
	// So it does after a deletion of the Lease by hand: the record that
	// carried the streak is gone, the next leader creates one without, and
	// a chain ends at the deletion, the next one starting there. Each
	// chain gets the bound of the span from its start (From, the last
	// handover of the chain before, or the deletion) to its last handover
	// (Work.StuckHandoverBound).
	Chains []Chain
}

// Chain is a run of stuck handovers in a row within an Outage.
type Chain struct {
	From, To         time.Duration
	Handovers, Bound int
	// At are the instants of the handovers (their terms' ends).
	At []time.Duration
}

// tooSoon returns the first k (1-based) whose handover came sooner after
// the chain's first than relect promises — the k-th no sooner than
// Work.leastSpan(k) after the first (WorkOptions.Cooldown; docs/design.md,
// "Safety, and the bound on handovers") — and that least span; 0 if none
// did.
func (c Chain) tooSoon(w Work) (k int, least time.Duration) {
	for i := 1; i < len(c.At); i++ {
		if least = w.leastSpan(i + 1); c.At[i]-c.At[0] < least {
			return i + 1, least
		}
	}
	return 0, 0
}

// Bound is the most stuck handovers the outage's chains allow together.
func (o Outage) Bound() int {
	n := 0
	for _, c := range o.Chains {
		n += c.Bound
	}
	return n
}

// OutageSlack is how long after the downstream recovers relect may still
// see the work stuck: until the next beat (BeatEvery) or the next call of
// the check (CheckInterval).
func OutageSlack(h *History) time.Duration {
	slack := h.Work.BeatEvery
	if h.Work.Check {
		slack = max(slack, h.Work.CheckInterval)
	}
	return slack + RoundTrip
}

// Outages returns the fleet-wide outages of h's work and their stuck
// handovers.
func Outages(h *History) []Outage {
	var out []Outage
	from := time.Duration(-1)
	for _, a := range h.Actions {
		switch {
		case a.Kind == FailDownstream:
			from = a.At
		case a.Kind == HealDownstream && from >= 0:
			out = append(out, Outage{From: from, To: a.At})
			from = -1
		}
	}
	if from >= 0 {
		out = append(out, Outage{From: from, To: h.End})
	}
	slack := OutageSlack(h)
	for i := range out {
		o := &out[i]
		until := min(o.To+slack, h.End)
		chain := Chain{From: o.From, To: until}
		for _, e := range h.Events {
			if e.Kind != Stopped || e.Cause != CauseWorkStuck || e.At < o.From || e.At > until {
				continue
			}
			since := chain.From
			if len(chain.At) > 0 {
				since = chain.At[len(chain.At)-1]
			}
			if r, ok := lastReset(h, since, e.At); ok {
				if len(chain.At) > 0 {
					chain.To = r
					o.Chains = append(o.Chains, chain)
				}
				chain = Chain{From: r, To: until}
			}
			o.Handovers++
			chain.Handovers++
			chain.At = append(chain.At, e.At)
			if releaseWritten(h, e) < 0 {
				chain.To = e.At
				o.Chains = append(o.Chains, chain)
				chain = Chain{From: e.At, To: until}
			}
		}
		o.Chains = append(o.Chains, chain)
		for j := range o.Chains {
			c := &o.Chains[j]
			c.Bound = h.Work.StuckHandoverBound(c.To - c.From)
		}
	}
	return out
}

// lastReset returns the last instant in (from, to] the Lease was deleted
// by hand, if it was.
func lastReset(h *History, from, to time.Duration) (time.Duration, bool) {
	last, ok := time.Duration(0), false
	for _, t := range h.Resets {
		if t > from && t <= to && (!ok || t > last) {
			last, ok = t, true
		}
	}
	return last, ok
}

// releaseWritten returns the index in h.Changes of the release that the
// term that stopped leading at e wrote, within StuckAllowance of it (a
// record without a holder, not by hand, with the term's leaseTransitions),
// or -1 if it wrote none (its write failed: it gave the record up).
func releaseWritten(h *History, e Event) int {
	until := e.At + StuckAllowance(h)
	return slices.IndexFunc(h.Changes, func(c Change) bool {
		return c.At >= e.At && c.At <= until && !c.Deleted && !c.ByHand && c.Holder == "" && int64(c.Transitions) == e.Term
	})
}

// checkOutages (stuck-handovers): in a fleet-wide outage, the k-th stuck
// handover in a row comes no sooner than the promised Work.leastSpan(k)
// after the first (Chain.tooSoon); so no run of them is longer than its
// bound, Work.StuckHandoverBound of its span.
func checkOutages(h *History) []Violation {
	var out []Violation
	for _, o := range Outages(h) {
		for _, c := range o.Chains {
			if k, least := c.tooSoon(h.Work); k > 0 {
				out = append(out, Violation{Class: StuckWork, Rule: "stuck-handovers", At: c.At[k-1],
					Detail: fmt.Sprintf("stuck handover %d in a row came %v after the first (at %s), sooner than the cooldowns allow (%v; cooldown %v, max %v); %d in a row from %s to %s (%v; bound %d) while the downstream failed from %s to %s",
						k, c.At[k-1]-c.At[0], fmtDur(c.At[0]), least, h.Work.Cooldown, h.Work.MaxCooldown,
						c.Handovers, fmtDur(c.From), fmtDur(c.To), c.To-c.From, c.Bound, fmtDur(o.From), fmtDur(o.To))})
			}
		}
	}
	return out
}

// StepDownGap is the time nobody led after a term stepped down by
// releasing the lease: a Yield, or relect's handover for stuck work.
type StepDownGap struct {
	Candidate int
	Cause     string        // CauseYielded or CauseWorkStuck
	At        time.Duration // the term ended: its IsLeader turned false
	Gap       time.Duration // until some candidate's IsLeader turned true (End if none did)
	// Bound is the longest the gap may be (gapBound, for the follower
	// whose turn comes first), and Excused says why it is not judged
	// ("" if it is): the step-down's write failed, the window was
	// disturbed (an API fault, an action other than a work fault), or no
	// other candidate followed the Lease to take it.
	Bound   time.Duration
	Excused string
}

// GapBound is the longest turn relect's followers may wait for a released
// lease plus gapSlack: three successors named, a spread of two succession
// steps and two more for one that stands back — seven steps of half a
// RetryPeriod. gapBound is what a step-down is judged against.
func GapBound(h *History) time.Duration {
	return 7*h.Timing.RetryPeriod/2 + gapSlack(h)
}

// gapSlack is what a change of holder adds to a follower's turn: token
// waits for the release write, the follower's acquiring write and
// client-go's read and write that resume it, a round trip per call and a
// few for the callbacks.
func gapSlack(h *History) time.Duration {
	return 4*time.Duration(float64(time.Second)/h.Budget.Rate) + 10*RoundTrip
}

// gapBound returns the longest candidate o, following the Lease, may leave
// the lease released by record rel free: its turn (relect's follower.expiry
// and turn: r succession steps, of half a RetryPeriod, at rank r of the
// line the release published; after the line and a spread of up to two
// steps if it is not in it, or stands back — then two steps more) plus
// gapSlack. o may stand back if the line has it cooling after a stuck
// handover, or, with a Check, if its check failed at any time before t
// (relect counts failures until the next call, which a candidate out of
// line does not make).
func gapBound(h *History, ws [2]map[int][][2]time.Duration, rel Change, o int, t time.Duration) time.Duration {
	step := h.Timing.RetryPeriod / 2
	id := identityAt(h, o, t)
	line := rel.Line[:min(len(rel.Line), 3)]
	back := slices.Contains(rel.Cooling, id) ||
		h.Work.Check && slices.ContainsFunc(ws[byCheck][o], func(w [2]time.Duration) bool { return w[0] <= t })
	turn := time.Duration(len(line)+2) * step
	if r := slices.Index(line, id); r >= 0 && !back {
		turn = time.Duration(r) * step
	} else if back {
		turn += 2 * step
	}
	return turn + gapSlack(h)
}

// StepDownGaps returns the gaps after every Yield and every handover for
// stuck work of h, in order.
func StepDownGaps(h *History) []StepDownGap {
	faults := faultWindows(h)
	ws := stuckWindows(h)
	var out []StepDownGap
	for _, e := range h.Events {
		if e.Kind != Stopped || (e.Cause != CauseYielded && e.Cause != CauseWorkStuck) {
			continue
		}
		g := StepDownGap{Candidate: e.Candidate, Cause: e.Cause, At: e.At, Gap: h.End - e.At, Bound: GapBound(h)}
		for _, s := range h.Leading {
			if s.From >= e.At && s.From-e.At < g.Gap {
				g.Gap = s.From - e.At
			}
		}
		g.Excused = judgeGap(h, faults, ws, e, &g)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b StepDownGap) int { return cmp.Compare(a.At, b.At) })
	return out
}

// judgeGap sets g.Bound, the least gapBound of the candidates that could
// take the lease released at e — other than e's, not standing by,
// following the Lease (a watch open, no other call in flight) and running
// until the bound — and says why g is not judged, or "".
func judgeGap(h *History, faults map[int][][2]time.Duration, ws [2]map[int][][2]time.Duration, e Event, g *StepDownGap) string {
	rel := releaseWritten(h, e)
	if rel < 0 && failedStepDown(h, e.Run, 0, e.At) {
		return "its write failed" // the failure a Yield or HandOver armed (refused, if the term ended for stuck work)
	}
	if rel < 0 && editedBefore(h, e.At) {
		// The release is conditional on the record the term last wrote or
		// saw; an edit by hand since makes it conflict, and relect gives
		// the record up (F3's fix) to expire, as a crashed leader's.
		return "its release conflicted with a hand edit"
	}
	if e.At+g.Bound > h.End {
		return "the run ends"
	}
	for c := range h.Candidates {
		if overlapsAny(faults[c], e.At, e.At+g.Bound) {
			return "API fault"
		}
	}
	for _, a := range h.Actions {
		_, work := workUndo[a.Kind]
		undo := a.Kind == UnhangWork || a.Kind == HealCheck || a.Kind == HealDownstream
		stepDown := a.Kind == Yield || a.Kind == HandOver
		if a.Skipped == "" && a.At >= e.At && a.At <= e.At+g.Bound && !work && !undo && !stepDown {
			return "disturbed: " + a.Kind.String()
		}
	}
	loose, found := g.Bound, false
	for o := range h.Candidates {
		standby := o < len(h.Standby) && h.Standby[o]
		if o == e.Candidate || standby || !followsAt(h, o, e.At) || callingAt(h, o, e.At) {
			continue
		}
		b := loose // no release record seen: the loosest turn
		if rel >= 0 {
			b = gapBound(h, ws, h.Changes[rel], o, e.At)
		}
		if runsThrough(h, o, e.At, e.At+b) && (!found || b < g.Bound) {
			g.Bound, found = b, true
		}
	}
	if !found {
		return "no other candidate followed"
	}
	return ""
}

// editedBefore reports whether the last change of the Lease at or before
// t was an edit by hand.
func editedBefore(h *History, t time.Duration) bool {
	i := -1
	for j, c := range h.Changes {
		if c.At <= t {
			i = j
		}
	}
	return i >= 0 && h.Changes[i].ByHand
}

// checkStepDownGaps (step-down-gap): after an undisturbed Yield or handover
// for stuck work, with another candidate following the Lease, somebody
// leads within the bound of the follower whose turn comes first.
func checkStepDownGaps(h *History) []Violation {
	if h.Impl != Relect.String() {
		return nil
	}
	var out []Violation
	for _, g := range StepDownGaps(h) {
		if g.Excused == "" && g.Gap > g.Bound {
			out = append(out, Violation{Class: Liveness, Rule: "step-down-gap", At: g.At, Candidates: []int{g.Candidate},
				Detail: fmt.Sprintf("nobody led for %v after the term ended (%s); bound %v", g.Gap, g.Cause, g.Bound)})
		}
	}
	return out
}

// registrationLives is the lease duration of a registration: three
// registration renewal periods, in whole seconds (relect's default period
// if the schedule draws none).
func registrationLives(h *History) time.Duration {
	rr := h.Timing.RegistrationRenewal
	if rr == 0 {
		rr = defaults.RegistrationRenewal
	}
	return rr / time.Second * 3 * time.Second
}

// checkFounded (stuck-unfounded): a term ends for stuck work only if its
// work was stuck, by the means relect names (no beat, or the check), at
// some instant of that means' detection time before (foundedWithin):
// relect sees stuck work from what happened in that time — the beats that
// did not come, the checks that failed — so work that was healthy
// throughout it is not stuck.
func checkFounded(h *History) []Violation {
	var out []Violation
	ws := stuckWindows(h)
	beat, check := foundedWithin(h)
	for _, e := range h.Events {
		if e.Kind != Stopped || e.Cause != CauseWorkStuck {
			continue
		}
		m, within := byBeat, beat
		switch {
		case strings.Contains(e.Detail, "work check"):
			m, within = byCheck, check
		case !strings.Contains(e.Detail, "no beat"):
			if stuckAt(ws, e.Candidate, e.At-max(beat, check), e.At) {
				continue // which means, relect's message does not say
			}
		}
		if overlapsAny(ws[m][e.Candidate], e.At-within, e.At) {
			continue
		}
		out = append(out, Violation{Class: StuckWork, Rule: "stuck-unfounded", At: e.At, Candidates: []int{e.Candidate},
			Detail: fmt.Sprintf("run %d: term %d ended for stuck work (%s), though its work was healthy by that means for the %v before", e.Run, e.Term, e.Detail, within)})
	}
	return out
}

// foundedWithin is how far back what shows stuck work goes, by beats and
// by the check (zero for a means not in use): the beat window and a beat
// interval (recovered work beats within one); the check's failures in a
// row and an interval (the next call counts its recovery).
func foundedWithin(h *History) (beat, check time.Duration) {
	beat, check = h.Work.detection()
	if beat > 0 {
		beat += h.Work.BeatEvery + RoundTrip
	}
	if check > 0 {
		check += h.Work.CheckInterval + RoundTrip
	}
	return beat, check
}
