package e2e

import (
	"testing"
	"time"
)

// TestAPIServerRestart: the apiserver goes away under a running election
// (stopped, left down for a lease duration, started again; the proxies
// follow it should its port change). The leader steps down within the
// renew deadline of the apiserver's exit, nobody leads while it is down,
// and a leader is back soon after it is, with a larger fence.
func TestAPIServerRestart(t *testing.T) {
	c := requireCluster(t)
	testRestart(t, c, "apiserver", c.restartAPIServer)
}

// TestEtcdRestart: the same with etcd stopped and started again under a
// running apiserver, which then answers with errors or not at all.
func TestEtcdRestart(t *testing.T) {
	c := requireCluster(t)
	testRestart(t, c, "etcd", c.restartEtcd)
}

func testRestart(t *testing.T, c *cluster, what string, restart func(*testing.T, time.Duration) restartTimes) {
	lease := leaseName(t)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	b := c.startCandidate(t, "b", candOpts{lease: lease})
	cc := c.startCandidate(t, "c", candOpts{lease: lease})
	all := []*candidate{a, b, cc}
	before := waitLeader(t, leaseDuration+maxAcquireWait()+slack, all...)
	time.Sleep(leaseDuration)

	addr := c.apiAddr()
	r := restart(t, leaseDuration)
	t.Logf("%s restart: Stop took %s, down (no process) %s, Start took %s (apiserver %s, was %s)",
		what, ms(r.stopped.Sub(r.stopCalled)), ms(r.startCalled.Sub(r.stopped)), ms(r.ready.Sub(r.startCalled)), c.apiAddr(), addr)

	after, on, _ := waitNewLeader(t, leaseDuration+2*maxAcquireWait()+leaseDuration+2*slack, r.stopCalled, all...)
	t.Logf("leader before: %s; after: %s, leading %s after Start was called (%s after it returned)",
		before.id, after.id, ms(on.Sub(r.startCalled)), ms(on.Sub(r.ready)))
	// The fence goes on growing across the restart (checkFences, below).
	beforeIv, _ := before.firstAfter(time.Time{})
	afterIv, _ := after.firstAfter(r.stopCalled)
	t.Logf("fence before the %s restart %s (term %d), after %s (term %d)", what, beforeIv.Fence, beforeIv.Term, afterIv.Fence, afterIv.Term)

	// Everyone stepped down within the renew deadline of the old process's
	// exit (judged by what the samples prove: history.Interval.DoneBy),
	// and nobody led until the new one was started.
	quiet := r.stopped.Add(renewDeadline)
	for _, cand := range all {
		for _, iv := range cand.intervals() {
			if iv.Start.Before(r.startCalled) && !iv.DoneBy(quiet) {
				t.Errorf("%s led while the %s was down: %v (exited %v, started again %v)", cand.id, what, iv,
					r.stopped.Format("15:04:05.000"), r.startCalled.Format("15:04:05.000"))
			}
			if iv.Start.Before(r.stopCalled) && iv.End.After(r.stopCalled) {
				t.Logf("%s stepped down %s after Stop was called (%s after the process exited)",
					cand.id, ms(iv.End.Sub(r.stopCalled)), ms(iv.End.Sub(r.stopped)))
			}
		}
	}

	time.Sleep(leaseDuration)
	for _, cand := range all {
		cand.terminate()
	}
	ivs := checkSafety(t, all...)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}
