package sim

import (
	"fmt"
	"slices"
	"time"
)

// LineGoneOutcome is how one LineLeaves was judged (CheckLineGone).
type LineGoneOutcome struct {
	Leave Kind          // Stop, Kill or Partition
	At    time.Duration // when the line left
	// From is the instant the bound counts from: At for Stop; for Kill and
	// Partition, the last write of the election's Lease by the line's
	// holder (its last renewal: at or before At, but for one in flight
	// then).
	From time.Duration
	// Deadline is when an outsider must lead by: From + LineGoneAllowance,
	// plus the LeaseDuration for Kill and Partition.
	Deadline time.Duration
	// Excuse is why the rule was not judged ("" if it was).
	Excuse string
	// Led is when the first outsider's IsLeader became true at or after
	// At, −1 if none did before End.
	Led time.Duration
	// Leader is that outsider, −1 if none.
	Leader int
	// Line is what the LineLeaves resolved. Warden is the candidate whose
	// identity at At is the line's warden (−1: none), and WardenRunning
	// whether it was running then: a candidate that left may stay the
	// warden until its registration lapses.
	Line          *LineGone
	Warden        int
	WardenRunning bool
}

// Late reports whether the rule was judged and broken.
func (o LineGoneOutcome) Late() bool {
	return o.Excuse == "" && (o.Led < 0 || o.Led > o.Deadline)
}

// Why the line-gone rule is not judged (LineGoneOutcome.Excuse).
const (
	ExcuseNoSurvivor = "no outsider runs, unfaulted and not standing by, through the window"
	ExcuseEdited     = "the election's Lease edited by hand in the window"
	ExcuseShort      = "the run ends before the deadline"
	// ExcuseWardenJustLeft: the warden the line names had left, or was cut
	// off, and it did so, or was named, within its replacement window
	// (WardenWindow) before the line left: the documented limit of one
	// warden (docs/design.md, "Liveness, and what a user sees": a fleet then waits
	// for the line Lease to go stale).
	ExcuseWardenJustLeft = "the warden gone, and gone or named within its replacement window before the line left (the limit of one warden)"
)

// WardenWindow is how long a warden that left or was cut off may stay
// named, as docs/design.md promises it: the leader names another when it
// has not seen it beat for three beats of a LeaseDuration each, at its
// next renewal; two retry periods more cover that renewal and the beat's
// own read.
func WardenWindow(t Timing) time.Duration { return 3*t.LeaseDuration + 2*t.RetryPeriod }

// CheckLineGone: after a LineLeaves (linegone.go) at T that made the line
// leave — the holder of the election's Lease, its successors and its
// keepers — a candidate the line did not name leads by the deadline:
//
//   - Stop (a graceful stop of all of them): T + LineGoneAllowance
//     (10 s at the defaults);
//   - Kill or Partition: R + LeaseDuration + LineGoneAllowance, where R
//     is the holder's last write of the election's Lease (its last
//     renewal, at or before T but for one in flight at T): the lease
//     expires at R + LeaseDuration, so the bound is the issue's "LD +
//     10 s of a crash" counted from the last instant the lease was known
//     alive rather than from the crash.
//
// It is judged only when some candidate the line did not name could lead
// throughout [T, deadline]: its run is alive, it does not stand by, and no
// fault is on its API handle (faultWindows). A hand edit of the election's
// Lease in [From, deadline] excuses it too (an edit may name a stranger or
// set a renew time an hour ahead: the Lease then tells nobody it is free).
// So does a warden that is gone (left, or cut off) and went so, or was
// named, within WardenWindow before T (ExcuseWardenJustLeft: the
// documented limit of one warden; a warden gone and named earlier is the
// leader's to replace, and is judged). Nothing
// else does: in particular not a warden cut off longer, while another
// outsider is not, and not a slow or empty registry.
func CheckLineGone(h *History) []Violation {
	var out []Violation
	for _, o := range LineGoneOutcomes(h) {
		if !o.Late() {
			continue
		}
		what := "no outsider led before the end"
		if o.Led >= 0 {
			what = fmt.Sprintf("the first outsider (%s) led at %s", CandidateName(o.Leader), fmtDur(o.Led))
		}
		out = append(out, Violation{Class: Liveness, Rule: "line-gone-late", At: o.Deadline,
			Detail: fmt.Sprintf("the whole line left by %v at %s (counted from %s): %s, after the deadline %s; the line: successors %v, keepers %v, warden %q (running: %v)",
				o.Leave, fmtDur(o.At), fmtDur(o.From), what, fmtDur(o.Deadline), o.Line.Successors, o.Line.Keepers, o.Line.Warden, o.WardenRunning)})
	}
	return out
}

// LineGoneOutcomes judges every LineLeaves of h that was applied (see
// CheckLineGone).
func LineGoneOutcomes(h *History) []LineGoneOutcome {
	var out []LineGoneOutcome
	faults := faultWindows(h)
	for _, a := range h.Actions {
		if a.Kind != LineLeaves || a.Line == nil {
			continue
		}
		o := LineGoneOutcome{Leave: a.Leave, At: a.At, From: a.At, Led: -1, Leader: -1, Line: a.Line, Warden: -1}
		for c := range h.Candidates {
			if a.Line.Warden != "" && identityAt(h, c, a.At) == a.Line.Warden {
				o.Warden, o.WardenRunning = c, runsThrough(h, c, a.At, a.At)
			}
		}
		if a.Leave != Stop {
			o.From = lastRenewal(h, a.Line.Holder, a.At)
			o.Deadline = h.Timing.LeaseDuration
		}
		o.Deadline += o.From + LineGoneAllowance(h.Timing)
		outsider := func(c int) bool { return !slices.Contains(a.Line.Named, c) }
		survivor := func(c int) bool {
			return outsider(c) && !h.Standby[c] && runsThrough(h, c, o.At, o.Deadline) &&
				!overlapsAny(faults[c], o.At, o.Deadline)
		}
		switch {
		case !slices.ContainsFunc(candidates(h), survivor):
			o.Excuse = ExcuseNoSurvivor
		case editedBetween(h, o.From, o.Deadline):
			o.Excuse = ExcuseEdited
		case o.Warden >= 0 && wardenGoneWithin(h, faults[o.Warden], o.Warden, a.Line.Warden, o.At, WardenWindow(h.Timing)):
			o.Excuse = ExcuseWardenJustLeft
		case h.End < o.Deadline:
			o.Excuse = ExcuseShort
		}
		for _, s := range h.Leading {
			if outsider(s.Candidate) && s.From >= o.At && (o.Led < 0 || s.From < o.Led) {
				o.Led, o.Leader = s.From, s.Candidate
			}
		}
		out = append(out, o)
	}
	return out
}

// wardenGoneWithin reports whether candidate c, the warden id, at at, is
// not running or has a fault on its API handle (faults: its fault
// windows), and either left or was cut off, or was named the warden, no
// earlier than window before at: a leader names a warden without knowing
// it is alive (a crashed candidate's registration stays in view), and
// finds it dead three beats later.
func wardenGoneWithin(h *History, faults [][2]time.Duration, c int, id string, at, window time.Duration) bool {
	gone := time.Duration(-1)
	if !runsThrough(h, c, at, at) {
		for _, r := range h.Runs {
			if r.Candidate == c && r.Start <= at && r.Cancelled >= 0 && r.Cancelled <= at {
				gone = max(gone, r.Cancelled)
			}
		}
	}
	for _, f := range faults {
		if f[0] <= at && at <= f[1] {
			gone = max(gone, f[0])
		}
	}
	if gone < 0 {
		return false
	}
	return at-max(gone, namedSince(h, id, at)) <= window
}

// namedSince returns when the election's Lease began to name id its
// warden without a break up to at, −1 if it did not name it at at.
func namedSince(h *History, id string, at time.Duration) time.Duration {
	since := time.Duration(-1)
	for _, c := range h.Changes {
		if c.At > at {
			break
		}
		switch {
		case c.Warden != id:
			since = -1
		case since < 0:
			since = c.At
		}
	}
	return since
}

// lastRenewal returns when holder last wrote the election's Lease, up to
// the first write by anyone else after at (a crashed or cut-off holder's
// renewal in flight at at may still land), or at if it wrote nothing.
func lastRenewal(h *History, holder string, at time.Duration) time.Duration {
	last := time.Duration(-1)
	for _, c := range h.Changes {
		if c.At > at && (c.Deleted || c.Holder != holder) {
			break
		}
		if !c.ByHand && !c.Deleted && c.Holder == holder {
			last = c.At
		}
	}
	if last < 0 {
		return at
	}
	return last
}

// candidates returns 0 … h.Candidates−1.
func candidates(h *History) []int {
	out := make([]int, h.Candidates)
	for i := range out {
		out[i] = i
	}
	return out
}
