package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// History is what one simulated run recorded, in simulated time since the
// run began. It depends on nothing but the standard library; the checks it
// shares with the e2e suite's histories of a real control plane (overlaps,
// fencing tokens) are internal/leadership's.
type History struct {
	Impl       string // which implementation ran
	Candidates int    // candidates are numbered 0 … Candidates−1
	Timing     Timing // with defaults applied
	// Standby says which candidates stand by: they never lead.
	Standby []bool
	// Budget is the token bucket every process is held to: Burst calls at
	// once, Rate calls per second sustained.
	Budget struct {
		Rate  float64
		Burst int
	}
	// Work is the schedule's work liveness, relect's defaults applied
	// (Schedule.Work): relect's candidates watch their work so; the
	// client-go loop's do the same work, unwatched.
	Work Work
	// BackoffCap is the longest wait of the implementation between
	// campaigns (zero if it has none).
	BackoffCap time.Duration
	// Quiet is when the last fault was undone; End is when the run
	// stopped the candidates. Liveness is judged in [Quiet, End].
	Quiet, End time.Duration

	Runs    []Run     // one per call of Run (per loop, for client-go)
	Leading []Span    // when each candidate's IsLeader was true
	Terms   []Term    // the term contexts
	Calls   []Call    // every Lease API call
	Events  []Event   // term started/stopped notifications
	Actions []Applied // the schedule's actions, as applied
	// Resets are the instants the Lease was deleted by hand: the lease's
	// transition count, hence term numbers, start over.
	Resets []time.Duration
	// Changes are the Lease's successive states, as a watch saw them.
	Changes []Change
	// Checks are the calls of relect's work check (Options.Work.Check).
	Checks []CheckCall
	// Writes are the leaders' writes to the stores (store.go, wire.go),
	// in the order they were sent. Final is the highest token each store
	// had accepted at FinalAt, after every write was delivered or lost.
	Writes  []Write
	Final   map[Store]string
	FinalAt time.Duration
	// Shards is what the shards did (shards.go), nil for a schedule
	// without them. Their writes are in Writes, each shard's to a store
	// of its own (ShardStore); their Lease calls are not in Calls.
	Shards *ShardHistory
	// Logs are what relect's candidates logged (Warn and above), in the
	// order logged; the client-go loop's logs are discarded.
	Logs []Log
}

// Write is one write of a leader to a store (store.go): sent while its
// term's context was alive (or as soon as its process resumed, if paused
// then), it travels the candidate's network (wire.go) with a context of
// its own, not the term's.
type Write struct {
	Store     Store
	Candidate int
	Term      int    // its term: an index into Terms
	Token     string // the token it carries ("" for StorePlain)
	Sent      time.Duration
	// Applied is when it reached the store, -1 if the network lost it;
	// Order is its place among the writes the store received (from 0),
	// -1 if lost; Accepted, whether the store took it.
	Applied  time.Duration
	Order    int
	Accepted bool
	// Answered is when the writer learnt the outcome, -1 if it never did
	// (its timeout came first): the write is "maybe applied".
	Answered time.Duration
}

// CheckCall is one call of a candidate's work check, [Start, End).
type CheckCall struct {
	Candidate  int
	Run        int // the candidate's current or last run when it was called
	Start, End time.Duration
	Failed     bool
}

// Change is one write to the Lease, by a candidate or by hand.
type Change struct {
	At          time.Duration
	Deleted     bool
	Holder      string
	Transitions int32
	Duration    string // leaseDurationSeconds: "15", or "nil"
	// Visible is the record as client-go's followers compare it (the JSON
	// of its LeaderElectionRecord, whose times have one-second
	// resolution): a follower restarts its expiry clock only when it
	// changes.
	Visible string
	// ByHand: an edit by hand (an action), not a candidate's write.
	ByHand bool
	// HandOverTo is the holder a handover record names (relect's
	// HandOver: written by the leader, naming a successor that has not
	// acquired yet), or "" if the record is not one.
	HandOverTo string
	// Line is the line of succession published with the record, first in
	// line first (relect with its registry), or nil; Keepers, Warden and
	// Passed the keepers, the warden and the passed over it names, Posted
	// whether it is posted to the line Lease (docs/design.md, "Only the
	// line watches").
	Line    []string
	Keepers []string
	Warden  string
	Passed  []string
	Posted  bool
	// Streak is the stuck handovers in a row the line carries (relect's
	// Options.Work): the leader that acquires this record holds
	// Work.Cooldown × 2^(Streak−1) before it may hand over for stuck work.
	// Cooling are the candidates the line says are in their cooldown after
	// a stuck handover: they stand back when the lease is free.
	Streak  int
	Cooling []string
}

// Run is one campaigning process of a candidate: from the call of Run to
// its context's cancellation, and its return.
type Run struct {
	Candidate int
	ID        int    // unique in the history
	Elector   int    // the budget scope: runs of one elector share a bucket
	Identity  string // the holder identity it writes
	Start     time.Duration
	Cancelled time.Duration // when its context was cancelled; End if never
	Returned  time.Duration // when Run returned; -1 if it did not
	KeepLease bool          // cancelled as a crash (no release)
	Dropped   uint64        // notifications lost (relect's Events buffer full)
}

// Span is an interval [From, To) during which Candidate's IsLeader was true.
type Span struct {
	Candidate int
	Run       int // Run.ID
	From, To  time.Duration
}

// Term is one call of the OnStartedLeading callback: its context is alive
// and not cancelled in [Start, Cancelled).
type Term struct {
	Candidate int
	Run       int
	Number    int64 // the fencing token, -1 if unknown
	Start     time.Duration
	Cancelled time.Duration // -1 if never
}

// Call is one Lease API call: counted at Start, answered at End; a watch
// is in flight from Start until it closes at End.
type Call struct {
	Candidate  int
	Run        int // -1 if made outside any run (should not happen)
	Elector    int
	Verb       string
	Start, End time.Duration
	Err        string // "" on success
	// Registry: the call concerns relect's candidate registry (a
	// registration, or the list or watch of them), not the election's
	// Lease.
	Registry bool
	// Line: the call concerns relect's line Lease (docs/design.md, "Only
	// the line watches"): neither a registration nor the election's Lease.
	Line bool
	// Name is the Lease the call names ("" for a list or watch by label).
	Name string
}

// Election reports whether the call concerns the election's Lease.
func (c Call) Election() bool { return !c.Registry && !c.Line }

// EventKind is the kind of a recorded notification.
type EventKind string

// Notifications the events checker reads. Others are recorded for the
// timeline only.
const (
	Started EventKind = "started-leading"
	Stopped EventKind = "stopped-leading"
)

// Event is a notification an implementation gave its user.
type Event struct {
	Candidate int
	Run       int
	At        time.Duration
	Kind      EventKind
	Term      int64 // -1 if the notification carries none
	Detail    string
	// Cause is why a stopped-leading term ended, when it was a step-down
	// the user asked for (CauseYielded, CauseHandedOver) or relect's for
	// stuck work (CauseWorkStuck), else "".
	Cause string
}

// Notifications of relect's that the events checker reads too.
const (
	Released   EventKind = "released"
	HandedOver EventKind = "handed-over"
	WorkStuck  EventKind = "work-stuck" // relect's EventWorkStuck
)

// Causes of a stopped-leading (Event.Cause): a step-down a user asked for,
// or relect's for stuck work (its Err wraps relect.ErrWorkStuck).
const (
	CauseYielded    = "yielded"
	CauseHandedOver = "handed-over"
	CauseWorkStuck  = "work-stuck"
)

// Applied is an action of the schedule as the driver applied it.
type Applied struct {
	Action
	At      time.Duration // when it was applied
	Skipped string        // why it had no effect (no Lease to edit), or ""

	// Yield and HandOver: the run of the candidate that led and was
	// asked to step down (-1 if none), and what the call returned: "ok",
	// an error, or "" if it had not returned by the end of the run.
	Run    int
	Result string
	// HandOver: the identity it named, the state the target was in
	// (TargetLive, ...), and whether the leader listed it as standing by
	// when asked (relect's Candidates): then HandOver must fail.
	To           string
	ToState      string
	StandbyKnown bool
	// DeleteRegistration, StaleRegistration: the registration edited.
	Registration string
	// LineLeaves: the line it read and whom it made leave; LineHeal: whom
	// it healed (Gone). Nil if skipped.
	Line *LineGone
}

// CoverageKey is the action's (Action.CoverageKey), with a HandOver's told
// apart by the state of its target.
func (a Applied) CoverageKey() string {
	if a.Kind == HandOver && !a.FailWrite {
		return "handover-to-" + a.ToState
	}
	return a.Action.CoverageKey()
}

// Timeline returns the history as one chronological log, for reports and
// replays. Calls are included only if withCalls.
func (h *History) Timeline(withCalls bool) string {
	type line struct {
		at  time.Duration
		seq int
		s   string
	}
	var lines []line
	add := func(at time.Duration, format string, args ...any) {
		lines = append(lines, line{at, len(lines), fmt.Sprintf("%9s ", fmtDur(at)) + fmt.Sprintf(format, args...)})
	}
	for _, a := range h.Actions {
		s := "ACTION " + a.Action.describe()
		if a.ToState != "" {
			s += " (" + a.ToState + ")"
		}
		if a.Run >= 0 {
			s += fmt.Sprintf(" asked of run %d: %s", a.Run, a.Result)
		}
		if a.Skipped != "" {
			s += " (skipped: " + a.Skipped + ")"
		}
		if g := a.Line; g != nil {
			s += g.describe()
		}
		add(a.At, "%s", s)
	}
	for i, c := range h.Changes {
		switch {
		case c.Deleted:
			add(c.At, "LEASE deleted")
		default:
			vis := ""
			if i > 0 && c.Visible == h.Changes[i-1].Visible {
				vis = " (invisible to followers: record JSON unchanged)"
			}
			if c.ByHand {
				vis += " (by hand)"
			}
			if c.HandOverTo != "" {
				vis += " (handover record)"
			}
			if c.Line != nil {
				vis += fmt.Sprintf(" line=%v", c.Line)
			}
			if c.Keepers != nil {
				vis += fmt.Sprintf(" keepers=%v", c.Keepers)
			}
			if c.Warden != "" {
				vis += " warden=" + c.Warden
			}
			if c.Posted {
				vis += " posted"
			}
			if c.Passed != nil {
				vis += fmt.Sprintf(" passed=%v", c.Passed)
			}
			if c.Streak != 0 {
				vis += fmt.Sprintf(" streak=%d", c.Streak)
			}
			if c.Cooling != nil {
				vis += fmt.Sprintf(" cooling=%v", c.Cooling)
			}
			add(c.At, "LEASE holder=%q transitions=%d duration=%s%s", c.Holder, c.Transitions, c.Duration, vis)
		}
	}
	for _, ch := range LeadershipChanges(h) {
		add(ch.Settled, "CHANGE %v", ch)
	}
	for _, r := range h.Runs {
		add(r.Start, "%s run %d starts (elector %d, identity %s, keep lease %v)", CandidateName(r.Candidate), r.ID, r.Elector, r.Identity, r.KeepLease)
		if r.Cancelled < h.End || r.Returned >= 0 {
			add(r.Cancelled, "%s run %d cancelled", CandidateName(r.Candidate), r.ID)
		}
		if r.Returned >= 0 {
			add(r.Returned, "%s run %d returned", CandidateName(r.Candidate), r.ID)
		}
	}
	for _, s := range h.Leading {
		add(s.From, "%s IsLeader=true", CandidateName(s.Candidate))
		add(s.To, "%s IsLeader=false", CandidateName(s.Candidate))
	}
	for _, t := range h.Terms {
		add(t.Start, "%s term %d context alive", CandidateName(t.Candidate), t.Number)
		if t.Cancelled >= 0 {
			add(t.Cancelled, "%s term %d context cancelled", CandidateName(t.Candidate), t.Number)
		}
	}
	for _, e := range h.Events {
		s := fmt.Sprintf("%s event %s", CandidateName(e.Candidate), e.Kind)
		if e.Term >= 0 {
			s += fmt.Sprintf(" term=%d", e.Term)
		}
		if e.Detail != "" {
			s += " " + e.Detail
		}
		if e.Cause != "" {
			s += " cause=" + e.Cause
		}
		add(e.At, "%s", s)
	}
	if withCalls {
		for _, c := range h.Checks {
			res := "ok"
			if c.Failed {
				res = "failed"
			}
			add(c.End, "%s work check (called %s): %s", CandidateName(c.Candidate), fmtDur(c.Start), res)
		}
		for _, c := range h.Calls {
			res := "ok"
			if c.Err != "" {
				res = c.Err
			}
			verb := c.Verb
			switch {
			case c.Registry:
				verb = "registry " + verb
			case c.Line:
				verb = "line " + verb
			}
			if c.Verb == "watch" && c.Err == "" {
				add(c.Start, "%s %s opened (closed %s)", CandidateName(c.Candidate), verb, fmtDur(c.End))
				continue
			}
			add(c.End, "%s %s (sent %s): %s", CandidateName(c.Candidate), verb, fmtDur(c.Start), res)
		}
	}
	for _, l := range h.Logs {
		add(l.At, "%s log: %s", CandidateName(l.Candidate), l.Text)
	}
	slices.SortStableFunc(lines, func(a, b line) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.s)
		b.WriteByte('\n')
	}
	return b.String()
}

// Leaderless returns how long within [from, to] no candidate's IsLeader
// was true.
func (h *History) Leaderless(from, to time.Duration) time.Duration {
	led := time.Duration(0)
	for _, s := range mergeSpans(h.Leading, func(Span) bool { return true }) {
		led += max(0, min(s[1], to)-max(s[0], from))
	}
	return to - from - led
}
