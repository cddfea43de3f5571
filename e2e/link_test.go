package e2e

import (
	"testing"
	"time"
)

// TestSlowAndCutLinks: the leader's link to the apiserver gets slow
// (100 ms each way, well under relect's per-call timeout of half the renew
// deadline, even on a loaded machine running the race detector), then has its connections cut a few times (client-go
// reconnects at the next call). Neither is a reason to lose the lease: the
// leader keeps leading throughout and nobody else leads.
func TestSlowAndCutLinks(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	b := c.startCandidate(t, "b", candOpts{lease: lease})
	leader := waitLeader(t, leaseDuration+maxAcquireWait()+slack, a, b)
	other := others(leader, a, b)[0]
	from := time.Now()

	if err := leader.proxy.SetLatency(100*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * leaseDuration)
	if err := leader.proxy.SetLatency(0, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := leader.proxy.Cut(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(retryPeriod + time.Duration(i)*100*time.Millisecond)
	}
	time.Sleep(leaseDuration)

	if !leader.leading() {
		t.Errorf("%s lost the lease to a slow or flaky link", leader.id)
	}
	ivs := leader.intervals()
	if n := len(ivs); n != 1 || ivs[0].Start.After(from) {
		t.Errorf("%s's leadership was interrupted: %v", leader.id, ivs)
	}
	if ivs := other.intervals(); len(ivs) != 0 {
		t.Errorf("%s led: %v", other.id, ivs)
	}
	errs := leader.events("error", from)
	t.Logf("%s kept the lease through %v of 100 ms latency each way and 5 cuts, with %d failed calls", leader.id, 2*leaseDuration, len(errs))
	for _, e := range errs {
		t.Logf("  %s", e.Err)
	}
	leader.terminate()
	other.terminate()
	checkSafety(t, a, b)
}
