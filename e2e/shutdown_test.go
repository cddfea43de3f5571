package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestShutdownWhileAcquiring: the leader exits gracefully (releasing the
// Lease) and the follower is told to stop a few milliseconds later, while
// its acquisition of the released Lease is in flight. Run promises to
// release the lease when its context is done (KeepLeaseOnCancel is false),
// so once both have exited the Lease must be free: a Lease left naming the
// exited follower makes every later candidate wait a full lease duration.
//
// A regression test: before the fix, when the follower's acquiring write
// succeeded (or was cancelled client-side after the apiserver applied it),
// Run returned without releasing, because no term was started: 5 or 6 tries
// of 6 on a two-core machine.
func TestShutdownWhileAcquiring(t *testing.T) {
	c := requireCluster(t)
	held := 0
	for i := 0; i < 6; i++ {
		lease := fmt.Sprintf("%s-%d", leaseName(t), i)
		w := c.watchLease(t, lease)
		a := c.startCandidate(t, fmt.Sprintf("a%d", i), candOpts{lease: lease})
		b := c.startCandidate(t, fmt.Sprintf("b%d", i), candOpts{lease: lease})
		leader := waitLeader(t, leaseDuration+maxAcquireWait()+slack, a, b)
		follower := others(leader, a, b)[0]
		w.betweenRenewals(t, leader.id)
		leader.terminate()
		time.Sleep(time.Duration(i) * time.Millisecond)
		follower.terminate()
		time.Sleep(100 * time.Millisecond)
		if h := ptrVal(c.getLease(t, lease).Spec.HolderIdentity); h != "" {
			held++
			t.Errorf("try %d (follower stopped %dms after the leader exited): the Lease is left held by %q, which exited; changes: %v",
				i, i, h, w.changes())
		}
	}
	t.Logf("%d of 6 tries left the Lease held", held)
}

// TestShutdownRightAfterTakeover: the leader is killed, the follower takes
// the expired Lease over, and is told to stop the moment it leads — while
// client-go's first renewal, sent right after the takeover, is in flight.
// Run must still release the lease.
//
// A regression test: before the fix, the renewal, cancelled on the client,
// was applied by the apiserver, so the release's conditional Update
// conflicted; the release then read the Lease, found a record naming it that
// it "did not write" (it never saw the answer) and gave up: the Lease stayed
// held until it expired. About one try in five on a two-core machine.
func TestShutdownRightAfterTakeover(t *testing.T) {
	c := requireCluster(t)
	held := 0
	const tries = 6
	for i := 0; i < tries; i++ {
		lease := fmt.Sprintf("%s-%d", leaseName(t), i)
		w := c.watchLease(t, lease)
		a := c.startCandidate(t, fmt.Sprintf("a%d", i), candOpts{lease: lease})
		b := c.startCandidate(t, fmt.Sprintf("b%d", i), candOpts{lease: lease})
		leader := waitLeader(t, leaseDuration+maxAcquireWait()+slack, a, b)
		next := others(leader, a, b)[0]
		leader.kill()
		waitLeader(t, leaseDuration+2*maxAcquireWait()+slack, next)
		next.terminate()
		if h := ptrVal(c.getLease(t, lease).Spec.HolderIdentity); h != "" {
			held++
			t.Errorf("try %d: the Lease is left held by %q, which exited; changes: %v", i, h, w.changes())
		}
	}
	t.Logf("%d of %d tries left the Lease held", held, tries)
}
