package fleetbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect/internal/bench"

	"github.com/relect/relect/relecttest"
)

// Change is one change of leader, as measured.
//
// Its window runs from Start to End, both included:
//
//   - Start: graceful, the instant the leader's Run is cancelled — it
//     releases at once (its work returns at once); crash, the instant the
//     lease expires: LeaseDuration after the apiserver answered the dead
//     leader's last renewal, the earliest instant a follower may take over.
//   - End: the instant the new leader sends its first renewal at least half
//     a RetryPeriod into its term — the first of its steady renewals, one
//     RetryPeriod after it began to lead (client-go also renews once right
//     after acquiring; that one counts as part of the change).
//
// Every call sent in the window is in Calls; see Beyond for what is
// counted as the change's cost.
type Change struct {
	Impl     bench.Impl
	N        int
	Scenario Scenario
	// From is the leader that went, To the one that took over.
	From, To string
	// Start and End bound the window (see above); Term is when To's term
	// started (its OnStartedLeading was called).
	Start, Term, End time.Time
	// Calls are every candidate's calls sent in the window, in the order
	// they returned.
	Calls []Call
}

// Latency is how long the fleet had no leader: from Start (the stop, or
// the expiry) to the new leader's term.
func (ch *Change) Latency() time.Duration { return ch.Term.Sub(ch.Start) }

// Background reports whether c, a call of the window, is part of the steady
// background — what the fleet sends whether or not the leader changes —
// rather than a cost of the change. The steady background is, by class:
//
//   - the holder's renewals, one every RetryPeriod: the window, about one
//     RetryPeriod long, is closed by one (the new leader's first steady
//     renewal), which is background; the old leader sends none in the
//     window (it has stopped), and every other renewal in it is not steady;
//   - the client-go loop's polls: each follower reads the Lease every
//     RetryPeriod to 2.2 × RetryPeriod, whether or not the leader changed;
//     a Get of the election's Lease by a client-go candidate that does not
//     hold it is a poll. (relect's followers do not poll: they watch.)
//   - relect's registration renewals: one Update per candidate every
//     RegistrationRenewal (15 minutes); the line Lease's writes are not
//     among them: the new leader's are the change's.
func (ch *Change) Background(c Call) bool {
	switch {
	case c.Candidate == ch.To && c.renewal() && c.Start.Equal(ch.End):
		return true
	case ch.Impl == bench.ClientGoLoop && c.Election && c.Verb == relecttest.VerbGet && c.Stored != c.Candidate:
		return true
	case ch.Impl == bench.Relect && !c.Election && !c.Line && c.Verb == relecttest.VerbUpdate:
		return true
	}
	return false
}

// Beyond is the change's cost: the calls of the window that are not part
// of the steady background (see Background).
func (ch *Change) Beyond() int {
	n := 0
	for _, c := range ch.Calls {
		if !ch.Background(c) {
			n++
		}
	}
	return n
}

// Total is every call of the window, background included.
func (ch *Change) Total() int { return len(ch.Calls) }

// Shed is how many calls of the window the apiserver answered with 429.
func (ch *Change) Shed() int {
	n := 0
	for _, c := range ch.Calls {
		if c.Shed {
			n++
		}
	}
	return n
}

// Peak is the largest number of calls sent within any interval of length d
// in the window, background included: what the apiserver sees at once.
func (ch *Change) Peak(d time.Duration) int {
	starts := make([]time.Time, 0, len(ch.Calls))
	for _, c := range ch.Calls {
		starts = append(starts, c.Start)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	peak, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= d {
			j++
		}
		peak = max(peak, i-j+1)
	}
	return peak
}

// Log is the window's calls, one a line: when (from Start), who, what, on
// which object, the outcome, and "background" for the steady background.
func (ch *Change) Log() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v, N = %d, %v: %s → %s; term after %v; window %v; %d calls, %d beyond the background\n",
		ch.Impl, ch.N, ch.Scenario, ch.From, ch.To, ch.Latency(), ch.End.Sub(ch.Start), ch.Total(), ch.Beyond())
	for _, c := range ch.Calls {
		object := "registry"
		switch {
		case c.Election:
			object = "lease"
		case c.Line:
			object = "line lease"
		}
		what := c.Verb + " " + object
		if c.Election && (c.Verb == relecttest.VerbUpdate || c.Verb == relecttest.VerbCreate) {
			what += fmt.Sprintf(" holder %q (stored %q)", c.Holder, c.Stored)
		}
		outcome := "ok"
		switch {
		case c.Shed:
			outcome = "429 (shed)"
		case c.Err != nil:
			outcome = c.Err.Error()
		}
		note := ""
		if ch.Background(c) {
			note = "  [background]"
		}
		fmt.Fprintf(&b, "  %+10.3fs  %s  %s: %s%s\n", c.Start.Sub(ch.Start).Seconds(), c.Candidate, what, outcome, note)
	}
	return b.String()
}
