package e2e

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaseHandEdits: an operator deletes or edits the Lease under a running
// election of three relect candidates, one edit after another:
//
//   - deleted: the leader steps down; nobody creates the Lease again
//     before a lease duration has passed (a candidate cannot tell a
//     deletion from a Lease that never existed, so it waits as for a silent
//     holder), and the term numbers go on growing;
//   - holder set to a follower's identity: the leader steps down, and
//     nobody, not even the named follower, takes the Lease before it
//     expires (relect treats a record naming it that it did not write as a
//     stranger's); then the term grows;
//   - holder empty with a huge lease duration (1e6 s): a leader is back
//     within about one of our lease durations — the absurd duration is not
//     waited out — and not before one;
//   - holder "ghost" with renewTime an hour ahead: respected for one lease
//     duration from when it was seen (renewTime is never compared with the
//     local clock), then taken over;
//   - every field null: a leader is back within about one lease duration.
//
// In every case the leader steps down within the renew deadline, and never
// do two candidates lead at once: deleting the Lease or emptying its holder
// frees it behind the leader's back (client-go would take it at once, while
// the old leader learns of the edit only at its next renewal), and relect
// waits such an edit out.
func TestLeaseHandEdits(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	b := c.startCandidate(t, "b", candOpts{lease: lease})
	cc := c.startCandidate(t, "c", candOpts{lease: lease})
	all := []*candidate{a, b, cc}
	leader := waitLeader(t, leaseDuration+maxAcquireWait()+slack, all...)
	time.Sleep(retryPeriod)

	// stepsDown checks that the leader's interval that was open at sent
	// ended by done + RenewDeadline, and logs when, and how long it
	// overlapped the next leader's, which began at on.
	// Both judge by what the samples prove (history.Interval.DoneBy and
	// OnlyAfter): the sampler's own delays are not the candidate's.
	stepsDown := func(what string, l *candidate, sent, done, on time.Time) {
		t.Helper()
		for _, iv := range l.intervals() {
			if iv.Start.Before(sent) && !iv.End.Before(sent) {
				t.Logf("%s: %s stepped down %s after the edit; two leaders for %s", what, l.id, ms(iv.End.Sub(sent)), ms(max(0, iv.End.Sub(on))))
				if !iv.DoneBy(done.Add(renewDeadline)) {
					t.Errorf("%s: %s led after the renew deadline since the edit: %v", what, l.id, iv)
				}
				return
			}
		}
		t.Errorf("%s: %s was not leading when the Lease was edited", what, l.id)
	}
	// nobodyBefore checks that no interval that began at or after from
	// began before until.
	nobodyBefore := func(what string, from, until time.Time) {
		t.Helper()
		for _, cand := range all {
			for _, iv := range cand.intervals() {
				if !iv.Start.Before(from) && !iv.OnlyAfter(until) {
					t.Errorf("%s: %s took the lease %v after the edit, before it could have expired (%v): %v", what, cand.id,
						iv.SurelyFrom.Sub(from), until.Sub(from), iv)
				}
			}
		}
	}

	// 1. Deleted by hand.
	sent, done := c.deleteLease(t, lease)
	w.await(t, sent, 2*time.Second, "the lease to be seen deleted", func(o leaseObs) bool { return !o.exists })
	_, before := leader.firstOnAfter(time.Time{}) // its one term so far
	next, on, term := waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, sent, all...)
	stepsDown("deleted", leader, sent, done, on)
	t.Logf("deleted: %s leads %s after the deletion, term %d (was %d)", next.id, ms(on.Sub(sent)), term, before)
	nobodyBefore("deleted", sent, sent.Add(leaseDuration-50*time.Millisecond))
	if term <= before {
		t.Errorf("deleted: the new term is %d, not above %d", term, before)
	}
	leader = next
	time.Sleep(leaseDuration)

	// 2. Holder set to a follower's identity.
	prevTerm := term
	named := others(leader, all...)[0]
	sent, done = c.editLease(t, lease, func(s *coordinationv1.LeaseSpec) {
		s.HolderIdentity = &named.id
		now := metav1.NewMicroTime(time.Now())
		s.RenewTime = &now
	})
	next, on, term = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+leaseDuration+slack, sent, all...)
	stepsDown("holder edited", leader, sent, done, on)
	t.Logf("holder edited to %s: %s leads %s after the edit (lease %v), term %d (was %d)", named.id, next.id, ms(on.Sub(sent)), leaseDuration, term, prevTerm)
	nobodyBefore("holder edited", sent, sent.Add(leaseDuration-50*time.Millisecond))
	if term <= prevTerm {
		t.Errorf("holder edited: term %d after the edit, not above %d", term, prevTerm)
	}
	leader = next
	time.Sleep(leaseDuration)

	// 3. Holder empty, huge duration.
	sent, done = c.editLease(t, lease, func(s *coordinationv1.LeaseSpec) {
		empty, huge := "", int32(1_000_000)
		s.HolderIdentity, s.LeaseDurationSeconds = &empty, &huge
	})
	next, on, term = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, sent, all...)
	stepsDown("empty holder, huge duration", leader, sent, done, on)
	t.Logf("empty holder, leaseDurationSeconds 1e6: %s leads %s after the edit, term %d", next.id, ms(on.Sub(sent)), term)
	nobodyBefore("empty holder, huge duration", sent, sent.Add(leaseDuration-50*time.Millisecond))
	leader = next
	time.Sleep(leaseDuration)

	// 4. renewTime in the future.
	sent, done = c.editLease(t, lease, func(s *coordinationv1.LeaseSpec) {
		ghost := "ghost"
		future := metav1.NewMicroTime(time.Now().Add(time.Hour))
		s.HolderIdentity, s.RenewTime, s.AcquireTime = &ghost, &future, &future
	})
	next, on, term = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+leaseDuration+slack, sent, all...)
	stepsDown("renewTime in the future", leader, sent, done, on)
	t.Logf("holder ghost, renewTime +1h: %s leads %s after the edit (lease %v), term %d", next.id, ms(on.Sub(sent)), leaseDuration, term)
	nobodyBefore("renewTime in the future", sent, sent.Add(leaseDuration-50*time.Millisecond))
	leader = next
	time.Sleep(leaseDuration)

	// 5. Every field null (leaseTransitions too: term numbers start over).
	sent, done = c.editLease(t, lease, func(s *coordinationv1.LeaseSpec) { *s = coordinationv1.LeaseSpec{} })
	next, on, term = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, sent, all...)
	stepsDown("null fields", leader, sent, done, on)
	t.Logf("null spec: %s leads %s after the edit, term %d", next.id, ms(on.Sub(sent)), term)
	nobodyBefore("null fields", sent, sent.Add(leaseDuration-50*time.Millisecond))
	wiped := sent

	time.Sleep(retryPeriod)
	for _, cand := range all {
		cand.terminate()
	}
	ivs := checkSafety(t, all...)
	// Term numbers start over only when leaseTransitions is wiped by hand:
	// check each stretch on its own.
	checkTerms(t, ivs, time.Time{}, wiped)
	checkTerms(t, ivs, wiped, time.Time{})
	// Fences never start over: one check over every edit.
	checkFences(t, ivs)
}
