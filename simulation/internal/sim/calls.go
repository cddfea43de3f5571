package sim

import (
	"fmt"
	"slices"
	"time"
)

// Calls per leadership change: what moving the lease from one holder to the
// next costs the API server, fleet-wide, beyond what it costs anyway.
//
// A leadership change is an acquisition: a candidate's write that names
// itself as holder when the record before it (leaving out hand edits that
// do not free the lease) was a release, a handover record, the Lease
// deleted or its holder emptied by hand, or a record naming another holder.
// The first acquisition of a run is not a change (nobody held the lease).
//
// The change's window runs from Free, when the lease became free, to
// Settled, when the new holder's term is established:
//
//   - Free: the release write, or the handover record, or the hand edit
//     that deleted the Lease or emptied its holder; otherwise (a takeover
//     of a held record) the lease's expiry as its followers count it: the
//     last change of the record, by anyone, plus LeaseDuration — every
//     candidate writes LeaseDuration, and relect floors shorter edited
//     durations at it. Never later than the acquisition.
//   - Settled: when the new holder sends its first renewal after its term
//     began (OnStartedLeading called). client-go's elector, which both
//     implementations run, renews right after acquiring, so this is a
//     round trip or a token wait after the term began: the window holds
//     the whole acquisition — for relect the follower's acquiring write
//     and client-go's resume of it (a get and an update) — and not the
//     new leader's registry list and watch, half a RetryPeriod into its
//     term. If the new holder's term never begins, or it sends no renewal
//     before the Lease moves on, the next write to the Lease (or the end
//     of the run) ends the window.
//
// Its calls are every Lease API call, of every candidate and verb, started
// in [Free, Settled), plus the write that freed the lease, if a candidate
// wrote it (release or handover: sent just before Free), minus the steady
// background, which goes on at the same pace whether or not the lease
// changes hands:
//
//   - renewals: an update of the election's Lease by a candidate whose
//     IsLeader is true when it sends it;
//   - registry heartbeats: reads and writes of a candidate's own
//     registration (relect's candidate registry).
//
// What is left is attributed to the change: acquiring writes (and the
// conflicts of those that lost), reads, watches opened, deregistrations.
// The client-go loop's followers poll the Lease (a get every RetryPeriod
// to 2.2 RetryPeriods each), and those polls count too: they are what
// tells its followers that the lease is free.

// PeakWindow is the window in which a change's peak of calls is counted.
const PeakWindow = 10 * time.Millisecond

// How a lease became free (LeadershipChange.How).
const (
	FreedByRelease  = "release"
	FreedByHandOver = "handover"
	FreedByExpiry   = "expiry"
	FreedByHand     = "hand edit" // deleted, or holder emptied
)

// LeadershipChange is one change of the Lease's holder, and what it cost.
type LeadershipChange struct {
	Holder    string // the new holder
	Candidate int    // the candidate that acquired; -1 if no run had that identity
	How       string // how the lease became free: FreedByRelease, ...

	Free, Acquired, Settled time.Duration

	Calls int // attributed to the change
	Peak  int // most attributed calls started within one PeakWindow
	// Line: the freed record published a line of succession (relect with
	// its registry, once the leader has listed the candidates). Without
	// one, every follower tries at once.
	Line bool
	// PassedOver counts the successors named before the new holder in
	// that line: they did not take their turn.
	PassedOver int
	// Disturbed says why the change is not judged against CallBound: an
	// action other than a step-down was applied, or a fault was active
	// on some candidate's API handle, in [Free, Settled]; "" if neither.
	Disturbed string
}

func (c LeadershipChange) String() string {
	return fmt.Sprintf("%s acquired at %s (%s; free %s, settled %s): %d calls, peak %d in %v",
		c.Holder, fmtDur(c.Acquired), c.How, fmtDur(c.Free), fmtDur(c.Settled), c.Calls, c.Peak, PeakWindow)
}

// LeadershipChanges returns h's leadership changes in order, with their
// calls (see above).
func LeadershipChanges(h *History) []LeadershipChange {
	var out []LeadershipChange
	// The records that count: candidates' writes, and the hand edits that
	// free the lease. Other hand edits (a stranger named, a duration
	// changed) leave the lease held.
	var recs []int
	for i, c := range h.Changes {
		if !c.ByHand || c.Deleted || c.Holder == "" {
			recs = append(recs, i)
		}
	}
	faults := faultWindows(h)
	for k := 1; k < len(recs); k++ {
		c, p := h.Changes[recs[k]], h.Changes[recs[k-1]]
		if c.ByHand || c.Holder == "" || c.HandOverTo != "" {
			continue
		}
		if !p.Deleted && p.Holder == c.Holder && p.HandOverTo == "" {
			continue // a renewal
		}
		ch := LeadershipChange{Holder: c.Holder, Acquired: c.At, Candidate: candidateWith(h, c.Holder, c.At)}
		ch.How, ch.Free = freed(h, p, h.Changes[recs[k]-1])
		ch.Free = min(ch.Free, c.At)
		ch.Settled = settled(h, ch.Candidate, recs[k])
		ch.Line, ch.PassedOver = len(p.Line) > 0, passedOver(p, c.Holder)
		ch.Calls, ch.Peak = changeCalls(h, ch)
		ch.Disturbed = disturbed(h, faults, ch.Free, ch.Settled)
		out = append(out, ch)
	}
	return out
}

// freed returns how the lease held in record p became free, and when;
// last is the last change of any kind before the acquisition.
func freed(h *History, p, last Change) (how string, at time.Duration) {
	switch {
	case p.HandOverTo != "":
		return FreedByHandOver, p.At
	case p.Deleted || p.ByHand:
		return FreedByHand, p.At
	case p.Holder == "":
		return FreedByRelease, p.At
	}
	return FreedByExpiry, last.At + h.Timing.LeaseDuration
}

// candidateWith returns the candidate campaigning as identity at t, or -1.
func candidateWith(h *History, identity string, t time.Duration) int {
	for c := range h.Candidates {
		if identityAt(h, c, t) == identity {
			return c
		}
	}
	return -1
}

// settled returns when the change acquired by h.Changes[i], by candidate
// c, settled: when c sent its first renewal after its term began; or the
// next write to the Lease if its term did not begin, or it sent no renewal,
// before the Lease moved on.
func settled(h *History, c, i int) time.Duration {
	acq := h.Changes[i]
	next := h.End
	for _, d := range h.Changes[i+1:] {
		if d.Deleted || d.Holder != acq.Holder {
			next = d.At
			break
		}
	}
	began := time.Duration(-1)
	for _, t := range h.Terms {
		if t.Candidate == c && t.Start >= acq.At && t.Start < next && (began < 0 || t.Start < began) {
			began = t.Start
		}
	}
	renewal := next
	for _, k := range h.Calls {
		if began >= 0 && k.Candidate == c && k.Verb == "update" && k.Election() && k.Start >= began && k.Start < renewal {
			renewal = k.Start
		}
	}
	if renewal == next && i+1 < len(h.Changes) {
		return min(next, h.Changes[i+1].At)
	}
	return renewal
}

// passedOver counts the successors in p's line before holder (all of them
// if holder is not in it).
func passedOver(p Change, holder string) int {
	if i := slices.Index(p.Line, holder); i >= 0 {
		return i
	}
	return len(p.Line)
}

// changeCalls returns the calls attributed to ch, and their peak in one
// PeakWindow.
func changeCalls(h *History, ch LeadershipChange) (calls, peak int) {
	var at []time.Duration
	if ch.How == FreedByRelease || ch.How == FreedByHandOver {
		at = append(at, ch.Free) // the freeing write, sent just before
	}
	for _, k := range h.Calls {
		if k.Start < ch.Free || k.Start >= ch.Settled || background(h, k) {
			continue
		}
		at = append(at, k.Start)
	}
	slices.Sort(at)
	for i, j := 0, 0; j < len(at); j++ {
		for at[j]-at[i] >= PeakWindow {
			i++
		}
		peak = max(peak, j-i+1)
	}
	return len(at), peak
}

// background reports whether call k goes on whether or not the lease
// changes hands: a renewal (an update of the election's Lease sent while
// its sender leads) or a registration's heartbeat.
func background(h *History, k Call) bool {
	if k.Registry {
		return k.Verb == "get" || k.Verb == "create" || k.Verb == "update"
	}
	return k.Verb == "update" && slices.ContainsFunc(h.Leading, func(s Span) bool {
		return s.Candidate == k.Candidate && s.From <= k.Start && k.Start < s.To
	})
}

// disturbed says what else happened in [from, to]: an action applied (not
// a step-down: those cause changes) or a fault active; "" if nothing.
func disturbed(h *History, faults map[int][][2]time.Duration, from, to time.Duration) string {
	for _, a := range h.Actions {
		if a.At >= from && a.At <= to && a.Skipped == "" && a.Kind != Yield && a.Kind != HandOver {
			return a.Kind.String()
		}
	}
	for c := range h.Candidates {
		if overlapsAny(faults[c], from, to) {
			return "fault"
		}
	}
	return ""
}

// CheckCalls: no undisturbed leadership change costs more than CallBound.
func CheckCalls(h *History) []Violation {
	var out []Violation
	for _, ch := range LeadershipChanges(h) {
		if b := CallBound(h, ch); ch.Disturbed == "" && ch.Calls > b {
			var who []int
			if ch.Candidate >= 0 {
				who = []int{ch.Candidate}
			}
			out = append(out, Violation{Class: Calls, Rule: "costly-change", At: ch.Acquired, Candidates: who,
				Detail: fmt.Sprintf("%v; bound %d", ch, b)})
		}
	}
	return out
}

// CallBound is the most calls an undisturbed change among n candidates may
// cost: 4n + 1. It is what relect's mechanisms allow, not a measurement
// (the simulation measured at most 11; see docs/reliability.md):
//
//   - the write that freed the lease: 1, or 3 if it conflicts (the release
//     reads the Lease and writes again);
//   - the old holder, once it stepped down: its deregistration if it
//     stopped, or, if it yielded, a read and a watch to follow again: 2;
//   - the new holder: its acquiring write, client-go's read and write that
//     resume it, and a watch if it acquired before it had one: 4;
//   - each of the other n − 2 candidates: a read and a watch if it starts
//     following in the window (after a backoff wait), one acquiring write
//     that loses (its turn came, or no line of succession was published),
//     and a read after that conflict if it had no watch yet: 4.
//
// 3 + 2 + 4 + 4(n − 2) = 4n + 1. With a line of succession, only the new
// holder writes; without one, every follower may. Dead successors cost
// time (a succession step each), not calls: they send nothing. A fault or
// an action in the window (a restart, a hand edit) adds calls of its own:
// those changes are not judged (Disturbed).
func CallBound(h *History, _ LeadershipChange) int {
	return 4*h.Candidates + 1
}
