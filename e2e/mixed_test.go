package e2e

import (
	"testing"
	"time"
)

// TestMixedFleet: relect candidates and plain client-go candidates (looped
// by hand, ReleaseOnCancel) on one Lease, as in a rolling upgrade from one
// to the other. Handovers work in both directions, by release and by
// expiry, and two relect candidates never lead at once. Overlaps between a
// relect and a client-go candidate would be reported too: on these clean
// handovers there must be none.
func TestMixedFleet(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)

	cg1 := c.startCandidate(t, "cg1", candOpts{lease: lease, mode: modeClientGo})
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, cg1)
	r1 := c.startCandidate(t, "r1", candOpts{lease: lease})
	r2 := c.startCandidate(t, "r2", candOpts{lease: lease})
	time.Sleep(leaseDuration)
	if !cg1.leading() || r1.leading() || r2.leading() {
		t.Fatalf("cg1 should still lead alone")
	}

	// client-go → relect, by release.
	w.betweenRenewals(t, cg1.id)
	sent, _ := cg1.terminate()
	w.await(t, sent, 2*time.Second, "cg1's release", func(o leaseObs) bool { return o.exists && o.holder == "" })
	rl, on, _ := waitNewLeader(t, maxAcquireWait()+slack, sent, r1, r2)
	t.Logf("client-go → relect by release: %s leads %s after SIGTERM of cg1", rl.id, ms(on.Sub(sent)))

	// relect → client-go, by release (through the other relect candidate
	// if it wins the race).
	cg2 := c.startCandidate(t, "cg2", candOpts{lease: lease, mode: modeClientGo})
	time.Sleep(leaseDuration)
	live := []*candidate{r1, r2, cg2}
	for cur := rl; cur.mode == modeRelect; {
		w.betweenRenewals(t, cur.id)
		sent, _ = cur.terminate()
		live = others(cur, live...)
		var next *candidate
		next, on, _ = waitNewLeader(t, maxAcquireWait()+slack, sent, live...)
		t.Logf("%s → %s by release: %s after SIGTERM", cur.id, next.id, ms(on.Sub(sent)))
		cur = next
	}
	for _, x := range live {
		if x.mode == modeRelect {
			x.terminate() // the relect candidate that lost the race
		}
	}

	// client-go → relect, by expiry (SIGKILL: no release).
	r3 := c.startCandidate(t, "r3", candOpts{lease: lease})
	time.Sleep(leaseDuration)
	if !cg2.leading() || r3.leading() {
		t.Fatalf("cg2 should still lead alone")
	}
	killed := cg2.kill()
	_, on, _ = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, killed, r3)
	t.Logf("client-go → relect by expiry: r3 leads %s after SIGKILL of cg2", ms(on.Sub(killed)))
	r3.takenOverOnlyAfter(t, "client-go → relect by expiry", killed, killed.Add(minExpiryTakeover()))

	// relect → client-go, by expiry.
	cg3 := c.startCandidate(t, "cg3", candOpts{lease: lease, mode: modeClientGo})
	time.Sleep(leaseDuration)
	killed = r3.kill()
	_, on, _ = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, killed, cg3)
	t.Logf("relect → client-go by expiry: cg3 leads %s after SIGKILL of r3", ms(on.Sub(killed)))
	cg3.takenOverOnlyAfter(t, "relect → client-go by expiry", killed, killed.Add(minExpiryTakeover()))
	cg3.terminate()

	checkSafety(t, cg1, r1, r2, cg2, r3, cg3)
}
