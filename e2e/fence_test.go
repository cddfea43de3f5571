package e2e

import (
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
)

// TestFenceGrowsAcrossOwnTerms: the term number is no fencing token, the
// fence is. A lone relect candidate leads; its link is black-holed past the
// renew deadline, so its term ends, and once healed it takes its own
// record back — a new term with the same term number (nobody held the
// lease in between, so leaseTransitions did not move) and a larger fence
// (a cut that meets a renewal in flight, which lands unanswered, is made
// again: the number then moves, as for a stranger's record).
// Then it yields and, nobody else being there to take the lease, leads
// again after its backoff wait: a larger fence again. Storage that kept
// the highest fence it accepted refuses every earlier term's late write;
// with the term number it would have accepted the first term's after the
// second began.
func TestFenceGrowsAcrossOwnTerms(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, a)
	first, _ := a.firstAfter(time.Time{})

	// The cut must leave the Lease as a last wrote it, confirmed: a renewal
	// in flight when the link goes that lands without its answer leaves a
	// record a cannot tell from a stranger's, and its next term then counts
	// as a new holder's (the number moves, safely). So a cut that meets a
	// renewal is made again, up to three times.
	var second history.Interval
	for attempt := 1; ; attempt++ {
		time.Sleep(retryPeriod + retryPeriod/2) // between two renewals, most often
		if err := a.proxy.Blackhole(); err != nil {
			t.Fatal(err)
		}
		partitioned := time.Now()
		waitFor(t, renewDeadline+slack, "a to step down", func() bool { return !a.leading() })
		if err := a.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		healed := time.Now()
		waitNewLeader(t, leaseDuration+maxAcquireWait()+slack, partitioned, a)
		second, _ = a.firstAfter(partitioned)
		t.Logf("cut %d, the link cut for %s: term %d fence %s, then term %d fence %s, leading again %s after the link was healed",
			attempt, ms(healed.Sub(partitioned)), first.Term, first.Fence, second.Term, second.Fence, ms(second.Start.Sub(healed)))
		if relect.Fence(second.Fence).Compare(relect.Fence(first.Fence)) <= 0 {
			t.Errorf("a's term after the cut has fence %q, not above the one before's %q", second.Fence, first.Fence)
		}
		if second.Term == first.Term {
			break
		}
		if attempt == 3 {
			t.Errorf("after 3 cuts the second term's number %d is still not the first's %d: the case where the number fails as a token did not arise, and the test lost its point", second.Term, first.Term)
			break
		}
		first = second
	}
	time.Sleep(retryPeriod)

	called := a.control(sigYield).Time()
	waitNewLeader(t, leaseDuration+maxAcquireWait()+slack, called, a)
	third, _ := a.firstAfter(called)
	t.Logf("after its yield: term %d fence %s, leading again %s after the call", third.Term, third.Fence, ms(third.Start.Sub(called)))
	if relect.Fence(third.Fence).Compare(relect.Fence(second.Fence)) <= 0 {
		t.Errorf("a's term after its yield has fence %q, not above the one before's %q", third.Fence, second.Fence)
	}

	a.terminate()
	ivs := checkSafety(t, a)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}
