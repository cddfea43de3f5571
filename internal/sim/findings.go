package sim

import "time"

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
)

// Findings lists the known findings in report order.
var Findings = []Finding{InvisibleRenewal, RevokingEdit}

// Both findings are fixed in relect, so any violation it has is a failure
// (a regression if Explain attributes it to one):
//
//   - InvisibleRenewal while this simulator was written: validity counts
//     from the first write whose client-go view is the current one, and
//     relect.New requires RenewDeadline > RetryPeriod + 1 s, so that
//     renewals that followers can see come often enough;
//   - RevokingEdit after it: see its comment.
//
// No schedule has reproduced either since. Explain attributes safety
// violations only; the liveness finding F4 of docs/reliability.md has no
// rule here.

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
