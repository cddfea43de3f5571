package sim

import (
	"testing"
	"time"
)

const ms = time.Millisecond

// changesHistory: c0 leads, then stops: it releases at 10 s and c1, first
// in line, takes over; c1 is then cut off, a stranger is named by hand at
// 20 s, and c2 takes over once that record expires (20 s + LD 15 s).
func changesHistory() *History {
	h := history()
	h.Candidates = 3
	h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0", Cancelled: 200 * s}, {Candidate: 1, ID: 1, Identity: "c1", Cancelled: 200 * s},
		{Candidate: 2, ID: 2, Identity: "c2", Cancelled: 200 * s}}
	h.Changes = []Change{
		{At: 1 * s, Holder: "c0"},          // the first acquisition: not a change
		{At: 3 * s, Holder: "c0"},          // a renewal
		{At: 10 * s, Line: []string{"c1"}}, // the release
		{At: 10*s + 2*ms, Holder: "c1"},    // acquired
		{At: 10*s + 4*ms, Holder: "c1"},    // client-go's resume
		{At: 10*s + 6*ms, Holder: "c1"},    // the first renewal of the term
		{At: 20 * s, Holder: "intruder", ByHand: true},
		{At: 35*s + 2*ms, Holder: "c2"},
	}
	h.Terms = []Term{{Candidate: 1, Run: 1, Start: 10*s + 5*ms, Cancelled: -1}, {Candidate: 2, Run: 2, Start: 35*s + 3*ms, Cancelled: -1}}
	h.Leading = []Span{{0, 0, 1 * s, 10*s - 2*ms}, {1, 1, 10*s + 6*ms, 19 * s}, {2, 2, 35*s + 4*ms, 200 * s}}
	call := func(c int, verb string, at time.Duration, registry bool) Call {
		return Call{Candidate: c, Run: c, Elector: c, Verb: verb, Start: at, End: at + ms, Registry: registry}
	}
	h.Calls = []Call{
		call(0, "update", 8*s, false),          // c0's renewal: before the change
		call(0, "update", 10*s-1*ms, false),    // the release: counted as the freeing write
		call(0, "delete", 10*s, true),          // c0 deregisters
		call(1, "update", 10*s+1*ms, false),    // c1 acquires
		call(2, "update", 10*s+2*ms, true),     // c2's registration heartbeat: background
		call(1, "get", 10*s+3*ms, false),       // client-go resumes c1's write
		call(1, "update", 10*s+3*ms, false),    //
		call(2, "watch", 10*s+4*ms, false),     // c2 follows again
		call(1, "update", 10*s+5*ms, false),    // c1's first renewal: the end of the window
		call(1, "update", 12*s, false),         // a later renewal
		call(2, "update", 35*s+1*ms, false),    // c2 acquires
		call(2, "get", 35*s+2*ms, false),       //
		call(2, "update", 35*s+2*ms, false),    //
		call(2, "update", 35*s+3*ms, false),    // c2's first renewal
		call(0, "update", 35*s+3500*us, false), // after the window
	}
	return h
}

const us = time.Microsecond

func TestLeadershipChanges(t *testing.T) {
	h := changesHistory()
	got := LeadershipChanges(h)
	want := []LeadershipChange{
		{Holder: "c1", Candidate: 1, How: FreedByRelease, Free: 10 * s, Acquired: 10*s + 2*ms, Settled: 10*s + 5*ms,
			Calls: 6, Peak: 6, Line: true},
		{Holder: "c2", Candidate: 2, How: FreedByExpiry, Free: 35 * s, Acquired: 35*s + 2*ms, Settled: 35*s + 3*ms,
			Calls: 3, Peak: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if v := CheckCalls(h); len(v) != 0 {
		t.Errorf("CheckCalls: %v", v)
	}
}

func TestCheckCalls(t *testing.T) {
	h := changesHistory()
	// Every other follower of a fleet of three tries many times: more than
	// 4·3 + 1 calls for the first change.
	for i := range 8 {
		h.Calls = append(h.Calls, Call{Candidate: 2, Run: 2, Verb: "get", Start: 10*s + time.Duration(i)*100*us})
	}
	if got := rules(CheckCalls(h)); len(got) != 1 || got[0] != "calls/costly-change" {
		t.Errorf("got %v, want one costly change", got)
	}
	// The same while a fault is active is not judged.
	h.Actions = []Applied{{Action: Action{Kind: Latency, Target: 2}, At: 9 * s}, {Action: Action{Kind: Heal, Target: 2}, At: 11 * s}}
	if got := CheckCalls(h); len(got) != 0 {
		t.Errorf("disturbed: %v", got)
	}
	if d := LeadershipChanges(h)[0].Disturbed; d != "fault" {
		t.Errorf("disturbed by %q, want fault", d)
	}
}
