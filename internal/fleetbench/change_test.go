package fleetbench

import (
	"testing"
	"time"

	"github.com/relect/relect/internal/bench"

	"github.com/relect/relect/relecttest"
)

// The definitions the report rests on: what counts as the steady
// background, and the busiest interval.
func TestChangeMeasures(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	renewal := func(who string, ms int) Call {
		return Call{Candidate: who, Verb: relecttest.VerbUpdate, Election: true, Holder: who, Stored: who, Start: at(ms)}
	}
	get := func(who, stored string, ms int) Call {
		return Call{Candidate: who, Verb: relecttest.VerbGet, Election: true, Stored: stored, Start: at(ms)}
	}
	registration := Call{Candidate: "b", Verb: relecttest.VerbUpdate, Start: at(500)}
	calls := []Call{
		{Candidate: "a", Verb: relecttest.VerbUpdate, Election: true, Holder: "", Stored: "a", Start: at(0)}, // release
		get("b", "", 3), // a poll that finds it released
		{Candidate: "b", Verb: relecttest.VerbUpdate, Election: true, Holder: "b", Stored: "", Start: at(4)}, // acquisition
		renewal("b", 5),   // the immediate renewal
		get("c", "b", 9),  // a poll
		get("b", "b", 12), // the holder's read
		registration,      // a registration renewal
		renewal("b", 2005),
	}
	for _, tc := range []struct {
		impl           bench.Impl
		beyond, peak10 int
	}{
		// relect: every call but the closing renewal and the
		// registration renewal.
		{bench.Relect, 6, 5},
		// the client-go loop: every call but the closing renewal and its
		// followers' polls (it has no registry, hence no registration
		// renewals; the holder's own read is no poll).
		{bench.ClientGoLoop, 5, 5},
	} {
		ch := &Change{Impl: tc.impl, To: "b", Start: at(0), Term: at(4), End: at(2005), Calls: calls}
		if got := ch.Beyond(); got != tc.beyond {
			t.Errorf("%v: Beyond = %d, want %d", tc.impl, got, tc.beyond)
		}
		if got := ch.Peak(10 * time.Millisecond); got != tc.peak10 {
			t.Errorf("%v: Peak(10ms) = %d, want %d (the calls at 0 to 9 ms)", tc.impl, got, tc.peak10)
		}
		if got := ch.Latency(); got != 4*time.Millisecond {
			t.Errorf("%v: Latency = %v, want 4ms", tc.impl, got)
		}
	}
}
