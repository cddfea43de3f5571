package sim

import (
	"slices"
	"strings"
	"time"
)

// Finding is a known defect that accounts for some violations. The checkers
// do not know about findings: they report every violation. Explain
// attributes one after the fact, by a narrow rule, so that a report can say
// how many of the client-go loop's violations each known defect caused,
// and name a regression in relect.
type Finding string

// The known findings (see docs/reliability.md).
const (
	// InvisibleRenewal: client-go's followers (and relect's own, which
	// copy the rule) restart their expiry clock only when the record's
	// JSON changes, and LeaderElectionRecord marshals its times with
	// one-second resolution. A write by the holder that leaves that JSON
	// unchanged — a second renewal within one wall-clock second (any
	// RetryPeriod below 1 s), or a write whose renewTime client-go stamped
	// before token-bucket waits pushed its sending into a later second —
	// restarts nobody's clock, yet relect counts its send time as the start
	// of RenewDeadline. A follower that observed the unchanged record
	// earlier takes over while the holder still leads.
	InvisibleRenewal Finding = "F1 renewal invisible to followers"
	// RevokingEdit: a hand edit that frees a held Lease at once — deleting
	// it or emptying its holder — lets the next candidate that reads it
	// take over while the holder, which learns of the edit only at its next
	// renewal, still leads: for up to RetryPeriod, or up to RenewDeadline
	// if its own calls fail. (The other revoking edits, a missing, zero or
	// negative duration, relect defends by flooring the duration at its
	// own LeaseDuration.) relect now waits out an emptied holder like a
	// held lease, and creates a missing Lease only once it has watched it
	// missing for its LeaseDuration.
	RevokingEdit Finding = "F2 hand-deleted or emptied Lease"
	// StreakEndsUnseen: with Options.Work, a term that inherits a
	// streak of stuck handovers ends the streak once it has held its hold
	// (Cooldown × 2^(k−1)) without stuck work — but a term's work cannot
	// be seen stuck before BeatWindow has passed since the term began (or
	// CheckFailures checks, with a term whose check had not failed
	// before). With a hold shorter than that, every term of a fleet-wide
	// outage "holds healthy", the streak never passes 1, and the lease
	// changes hands once per BeatWindow for as long as the outage lasts.
	//
	// Fixed: a term ends the streak only once it has held its hold and
	// had twice the time its work takes to be judged stuck.
	StreakEndsUnseen Finding = "F5 a work streak ends before the work can be seen stuck"
	// StreakWithoutRegistry: the streak of stuck handovers, and the
	// cooldowns, travel in the line of succession, which a candidate whose
	// registry is off (Options.DisableRegistry, or a 403 to a registry
	// call) does not publish: its records — its stuck release, or those of
	// a term it leads in the middle of an outage — carry no streak, the
	// next leader hands over at once, and the count starts over. So does a
	// leader whose term ends before its first renewal: its acquiring write
	// carried the line's streak only from the next write on.
	//
	// Fixed: without the registry, the line names nobody but carries the
	// streak and the cooldowns; the acquiring write carries those of the
	// line it takes over.
	StreakWithoutRegistry Finding = "F6 a candidate without the registry publishes no streak"
	// PollerRetakes: a candidate that may not watch the Lease (a
	// 403 to its watch: it polls, through client-go's acquire loop) takes
	// a released lease as soon as it reads it, its own release for stuck
	// work too: it neither stands back for its cooldown nor takes the
	// streak from the line (its acquisition is not a follower's), so its
	// term does not hold and hands over again at once. While its work
	// stays stuck the lease goes round it with nobody leading, once per
	// backoff wait, and the streak never grows.
	//
	// Fixed: client-go's acquisition takes the line's streak and
	// cooldowns as a follower's does, and a polling candidate that stands
	// back has its acquisition refused until a follower's turn would come.
	PollerRetakes Finding = "F7 a polling candidate retakes the lease it released for stuck work"
	// StaleCheckFailures: relect counts the work check's failures
	// in a row until the next call, and calls the check only while this
	// candidate leads or is named in the line of succession. A candidate
	// out of line keeps the count of an outage that is over; a term it
	// begins later is judged stuck at once, on that count, before any
	// call — it hands over needlessly, or, if every candidate left has
	// such a count (and its registry is off, so it hands over anyway),
	// nobody leads though the work is healthy again.
	//
	// Fixed: a leader's term is judged by the checks of its own (a
	// successor that stood back has CheckFailures chances).
	StaleCheckFailures Finding = "F8 a term is judged stuck on check failures from before it"
)

// Findings lists the known findings in report order.
var Findings = []Finding{InvisibleRenewal, RevokingEdit, StreakEndsUnseen, StreakWithoutRegistry, PollerRetakes, StaleCheckFailures}

// F1 and F2 are fixed in relect, so any violation they explain is a
// regression:
//
//   - InvisibleRenewal while this simulator was written: validity counts
//     from the first write whose client-go view is the current one, and
//     relect.New requires RenewDeadline > RetryPeriod + 1 s, so that
//     renewals that followers can see come often enough;
//   - RevokingEdit after it: see its comment.
//
// No schedule has reproduced either since. F5–F8 were found by the
// simulation of stuck work and are fixed too (docs/reliability.md):
// Explain attributes a stuck-handovers violation to F5 or F6 by the release
// that lost the streak, a step-down gap to F7, a term ended for stale
// check failures to F8 — each a regression now. The liveness finding F4 of
// docs/reliability.md (seed 24417: a record being resumed, edited by hand,
// waited out by client-go's polling) is open and has no rule here: it has
// not been reproduced since, and a replay that flags it fails the run as
// liveness/late-leader.

// Explain returns the known finding that accounts for safety violation v
// of h, or "" if none does (and for any other class). Of v's two
// candidates, let O be the one that began leading first; w its last write
// to the Lease before v.At:
//
//   - RevokingEdit if the Lease was deleted or its holder emptied by hand
//     after w and at or before v.At: O's lease was taken from it by hand
//     and O had not written since, so it could not know;
//   - InvisibleRenewal if w left the record's JSON unchanged, so no
//     follower's expiry clock restarted at it.
func Explain(h *History, v Violation) Finding {
	switch {
	case v.Class == StuckWork && v.Rule == "stuck-handovers":
		return explainStreak(h, v)
	case v.Class == Liveness && v.Rule == "step-down-gap":
		if end := v.At + stepDownGapOf(h, v); pollerRetook(h, v.At, end) {
			return PollerRetakes
		}
		return ""
	case v.Class == StuckWork && v.Rule == "stuck-unfounded":
		if strings.Contains(v.Detail, "work check failed") {
			return StaleCheckFailures
		}
		return ""
	case v.Class == Liveness && (v.Rule == "no-leader" || v.Rule == "late-leader"):
		// Terms kept ending for check failures from before them after
		// the faults healed.
		if slices.ContainsFunc(checkFounded(h), func(u Violation) bool {
			return u.At >= h.Quiet && strings.Contains(u.Detail, "work check failed")
		}) {
			return StaleCheckFailures
		}
		return ""
	}
	if v.Class != Safety || len(v.Candidates) != 2 {
		return ""
	}
	o := firstLeader(h, v)
	if o < 0 {
		return ""
	}
	w := lastWrite(h, o, v.At)
	if w < 0 {
		return ""
	}
	for _, a := range h.Actions {
		if (a.Kind == DeleteLease || a.Kind == EmptyHolder) && a.Skipped == "" && h.Changes[w].At <= a.At && a.At <= v.At {
			return RevokingEdit
		}
	}
	if w > 0 && h.Changes[w].Visible == h.Changes[w-1].Visible {
		return InvisibleRenewal
	}
	return ""
}

// lastWrite returns the index in h.Changes of the last change before at
// that names the identity candidate c campaigned with then, or -1.
func lastWrite(h *History, c int, at time.Duration) int {
	id := ""
	for _, r := range h.Runs {
		if r.Candidate == c && r.Start <= at {
			id = r.Identity
		}
	}
	for i := len(h.Changes) - 1; i >= 0; i-- {
		if ch := h.Changes[i]; ch.At < at && !ch.Deleted && ch.Holder == id {
			return i
		}
	}
	return -1
}

// firstLeader returns which of v's two candidates began leading first, by
// v's rule, or -1.
func firstLeader(h *History, v Violation) int {
	best, since := -1, time.Duration(0)
	for _, c := range v.Candidates {
		from := time.Duration(-1)
		if v.Rule == "two-leaders" {
			for _, s := range h.Leading {
				if s.Candidate == c && s.From <= v.At && v.At < s.To {
					from = s.From
				}
			}
		} else {
			for _, tm := range h.Terms {
				if tm.Candidate == c && tm.Start <= v.At && (tm.Cancelled < 0 || v.At < tm.Cancelled) {
					from = tm.Start
				}
			}
		}
		if from >= 0 && (best < 0 || from < since) {
			best, since = c, from
		}
	}
	return best
}

// explainStreak returns the open finding that accounts for stuck-handovers
// violation v of h (a stuck handover in a row sooner than the cooldowns
// allow), or "":
//
//   - PollerRetakes (pollerRetook);
//   - StreakWithoutRegistry: a record of the chain's, up to v, written by a
//     candidate whose registry was off carried no line of succession (a
//     term's records, or its stuck release: relect publishes none then);
//   - StreakEndsUnseen: a stuck release of the chain's published a streak
//     no longer than the one its term inherited, k ≥ 1, while that term's
//     hold, Work.hold(k), was shorter than the time its work takes to be
//     seen stuck (BeatWindow; CheckFailures × CheckInterval +
//     CheckTimeout): the streak ended at the hold, unseen.
func explainStreak(h *History, v Violation) Finding {
	beat, check := h.Work.detection()
	detect := max(beat, check)
	for _, o := range Outages(h) {
		for _, c := range o.Chains {
			if !slices.Contains(c.At, v.At) {
				continue
			}
			if pollerRetook(h, c.From, c.To) {
				return PollerRetakes
			}
			if lineLostWithoutRegistry(h, c.From, v.At) {
				return StreakWithoutRegistry
			}
			for _, e := range h.Events {
				if e.Kind != Stopped || e.Cause != CauseWorkStuck || e.At < c.From || e.At > c.To {
					continue
				}
				id := identityAt(h, e.Candidate, e.At)
				rel := releaseWritten(h, e)
				if rel < 0 {
					continue
				}
				start := termStartOf(h, e)
				k := 0
				if i := acquiredFrom(h, id, start); i >= 0 {
					k = h.Changes[i].Streak
				}
				if k >= 1 && h.Changes[rel].Streak <= k && h.Work.hold(k) < detect {
					return StreakEndsUnseen
				}
			}
		}
	}
	return ""
}

// termStartOf returns when the term that stopped leading at e began.
func termStartOf(h *History, e Event) time.Duration {
	start := time.Duration(-1)
	for _, t := range h.Terms {
		if t.Run == e.Run && t.Start <= e.At {
			start = max(start, t.Start)
		}
	}
	return start
}

// stepDownGapOf returns the gap of step-down-gap violation v.
func stepDownGapOf(h *History, v Violation) time.Duration {
	for _, g := range StepDownGaps(h) {
		if g.At == v.At && slices.Contains(v.Candidates, g.Candidate) {
			return g.Gap
		}
	}
	return 0
}

// pollerRetook reports whether, in [from, to], a term of a polling
// candidate — its elector's watch of the Lease was refused (403) before —
// ended for stuck work before the hold of the record it acquired (a
// streak k ≥ 1: Work.hold(k)) had passed: PollerRetakes.
func pollerRetook(h *History, from, to time.Duration) bool {
	for _, e := range h.Events {
		if e.Kind != Stopped || e.Cause != CauseWorkStuck || e.At < from || e.At > to || !polling(h, e.Run, e.At) {
			continue
		}
		start := termStartOf(h, e)
		id := identityAt(h, e.Candidate, e.At)
		if i := acquiredFrom(h, id, start); i >= 0 && h.Changes[i].Streak >= 1 && e.At-start < h.Work.hold(h.Changes[i].Streak) {
			return true
		}
	}
	return false
}

// polling reports whether the elector of run had a watch of the Lease
// refused (403) before t: relect then polls it.
func polling(h *History, run int, t time.Duration) bool {
	i := slices.IndexFunc(h.Runs, func(r Run) bool { return r.ID == run })
	if i < 0 {
		return false
	}
	el := h.Runs[i].Elector
	return slices.ContainsFunc(h.Calls, func(k Call) bool {
		return k.Elector == el && k.Election() && k.Verb == "watch" && strings.Contains(k.Err, "forbidden") && k.End <= t
	})
}

// lineLostWithoutRegistry reports whether, in [from, to], a candidate whose
// registry was off wrote a record without a line of succession (a release
// is written by the holder of the record before it).
func lineLostWithoutRegistry(h *History, from, to time.Duration) bool {
	for i, x := range h.Changes {
		if x.At < from || x.At > to || x.ByHand || x.Deleted || x.Line != nil || x.Streak != 0 || i == 0 {
			continue
		}
		id := x.Holder
		if id == "" {
			id = h.Changes[i-1].Holder
		}
		if c := candidateWith(h, id, x.At); c >= 0 && registryOff(h, c, x.At) {
			return true
		}
	}
	return false
}

// registryOff reports whether candidate c's registry was off at t: a
// registry call of the elector of its run then was refused (403).
func registryOff(h *History, c int, t time.Duration) bool {
	el := -1
	for _, r := range h.Runs {
		if r.Candidate == c && r.Start <= t {
			el = r.Elector
		}
	}
	return el >= 0 && slices.ContainsFunc(h.Calls, func(k Call) bool {
		return k.Elector == el && k.Registry && strings.Contains(k.Err, "forbidden") && k.End <= t
	})
}
