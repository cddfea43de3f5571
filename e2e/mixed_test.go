package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
)

// TestMixedFleet: relect candidates — with the candidate registry on (the
// default), priorities, and a standby — and plain client-go candidates
// (looped by hand, ReleaseOnCancel) on one Lease, as in a rolling upgrade
// from one to the other. Handovers work in both directions, by release and
// by expiry; a relect HandOver to a relect candidate and a relect Yield
// work while a client-go candidate follows; a client-go leader whose
// record still carries the line of succession of the relect term before
// it (client-go writes back the annotations it read) confuses no relect
// follower; the standby never leads. When the Lease is deleted by hand and
// created again by a client-go candidate, the term numbers start over and
// the fences do not. No two candidates ever lead at once, relect or
// client-go.
func TestMixedFleet(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)
	relectArgs := func(priority, handOverTo string) candOpts {
		return candOpts{lease: lease, args: []string{"-priority", priority, "-handover-to", handOverTo}}
	}

	cg1 := c.startCandidate(t, "cg1", candOpts{lease: lease, mode: modeClientGo})
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, cg1)
	r1 := c.startCandidate(t, "r1", relectArgs("2", "r2"))
	r2 := c.startCandidate(t, "r2", relectArgs("1", "r1"))
	standby := c.startCandidate(t, "standby", candOpts{lease: lease, args: []string{"-standby"}})
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
	ro := others(rl, r1, r2)[0]

	// relect HandOver to a relect candidate, a client-go candidate
	// following: the named one leads next, and nobody else leads or holds
	// the Lease in between.
	cg2 := c.startCandidate(t, "cg2", candOpts{lease: lease, mode: modeClientGo})
	time.Sleep(leaseDuration) // rl lists the registrations and names its successor
	w.betweenRenewals(t, rl.id)
	called := rl.control(sigHandOver).Time()
	waitFor(t, slack, rl.id+"'s handed-over event", func() bool { return len(rl.events("handed-over", called)) == 1 })
	next, on, _ := waitNewLeader(t, maxAcquireWait()+slack, called, r1, r2, cg2)
	t.Logf("relect HandOver %s → %s: %s leads %s after the call", rl.id, ro.id, next.id, ms(on.Sub(called)))
	if next != ro {
		t.Errorf("HandOver from %s to %s: %s leads", rl.id, ro.id, next.id)
	}
	for _, o := range w.changes() {
		if !o.at.Before(called) && o.at.Before(on) && o.holder != rl.id && o.holder != ro.id {
			t.Errorf("HandOver from %s to %s: the Lease was seen held by %q in between (%v)", rl.id, ro.id, o.holder, o)
		}
	}
	for _, x := range []*candidate{rl, cg2} {
		if s, _ := x.firstOnAfter(called); !s.IsZero() && s.Before(on) {
			t.Errorf("HandOver from %s to %s: %s led in between, at %s", rl.id, ro.id, x.id, s.Format("15:04:05.000"))
		}
	}

	// relect Yield, a client-go candidate following: the lease is
	// released, and another candidate leads — the first in line (rl, once
	// it follows again) at once, or cg2 if its poll comes first.
	time.Sleep(leaseDuration)
	w.betweenRenewals(t, ro.id)
	called = ro.control(sigYield).Time()
	waitFor(t, slack, ro.id+"'s released event", func() bool { return len(ro.events("released", called)) == 1 })
	next, on, _ = waitNewLeader(t, maxAcquireWait()+slack, called, r1, r2, cg2)
	t.Logf("relect Yield of %s: %s leads %s after the call", ro.id, next.id, ms(on.Sub(called)))
	if next == ro {
		t.Errorf("%s led again right after its Yield", ro.id)
	}

	// relect → client-go, by release (through the other relect candidate
	// if it wins the race).
	live := []*candidate{r1, r2, cg2}
	for cur := next; cur.mode == modeRelect; {
		w.betweenRenewals(t, cur.id)
		sent, _ = cur.terminate()
		live = others(cur, live...)
		var nx *candidate
		nx, on, _ = waitNewLeader(t, maxAcquireWait()+slack, sent, live...)
		t.Logf("%s → %s by release: %s after SIGTERM", cur.id, nx.id, ms(on.Sub(sent)))
		cur = nx
	}
	for _, x := range live {
		if x.mode == modeRelect {
			x.terminate() // the relect candidate that lost the race
		}
	}

	// client-go → relect, by expiry (SIGKILL: no release).
	r3 := c.startCandidate(t, "r3", relectArgs("1", "r4"))
	r4 := c.startCandidate(t, "r4", relectArgs("0", "r3"))
	time.Sleep(leaseDuration)
	if !cg2.leading() || r3.leading() || r4.leading() {
		t.Fatalf("cg2 should still lead alone")
	}
	killed := cg2.kill()
	rl, on, _ = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, killed, r3, r4)
	t.Logf("client-go → relect by expiry: %s leads %s after SIGKILL of cg2", rl.id, ms(on.Sub(killed)))
	rl.takenOverOnlyAfter(t, "client-go → relect by expiry", killed, killed.Add(minExpiryTakeover()))
	ro = others(rl, r3, r4)[0]

	// relect → client-go, by expiry, the relect leader naming a successor
	// that is dead (killed: its registration stays). The client-go leader
	// writes back relect's annotations with its own records.
	cg3 := c.startCandidate(t, "cg3", candOpts{lease: lease, mode: modeClientGo})
	time.Sleep(leaseDuration) // rl names ro its successor
	ro.kill()
	killed = rl.kill()
	_, on, _ = waitNewLeader(t, leaseDuration+2*maxAcquireWait()+slack, killed, cg3)
	t.Logf("relect → client-go by expiry: cg3 leads %s after SIGKILL of %s", ms(on.Sub(killed)), rl.id)
	cg3.takenOverOnlyAfter(t, "relect → client-go by expiry", killed, killed.Add(minExpiryTakeover()))
	stale := staleLine(t, c, lease)
	t.Logf("cg3's record carries %s's line of succession, of the term before: %s", rl.id, stale)

	// A relect follower that joins now, and the standby, ignore that
	// line: they know of no successor while cg3 leads. When cg3 releases,
	// the new relect follower takes the lease at once, as from any
	// client-go leader, instead of waiting for the turns of the successors
	// the stale line names.
	r5 := c.startCandidate(t, "r5", candOpts{lease: lease})
	waitFor(t, maxAcquireWait()+slack, "r5 to observe cg3", func() bool { return len(newLeaderEvents(r5, "cg3")) > 0 })
	for _, x := range []*candidate{r5, standby} {
		for _, ev := range newLeaderEvents(x, "cg3") {
			if len(ev.Successors) > 0 {
				t.Errorf("%s: with cg3 leading, it knows of successors %v: the stale line was not ignored", x.id, ev.Successors)
			}
		}
	}
	w.betweenRenewals(t, cg3.id)
	sent, _ = cg3.terminate()
	_, on, _ = waitNewLeader(t, maxAcquireWait()+slack, sent, r5)
	t.Logf("client-go → relect by release, the stale line in the record: r5 leads %s after SIGTERM of cg3", ms(on.Sub(sent)))
	before, _ := r5.firstAfter(sent)
	time.Sleep(retryPeriod) // r5's first renewal publishes its fence

	// The Lease deleted by hand and created again by a plain client-go
	// candidate: term numbers start over, fences go on growing. r5
	// releases first (a deletion under a leader is TestLeaseHandEdits').
	r5.terminate()
	deleted, _ := c.deleteLease(t, lease)
	w.await(t, deleted, 2*time.Second, "the lease to be seen deleted", func(o leaseObs) bool { return !o.exists })
	cg4 := c.startCandidate(t, "cg4", candOpts{lease: lease, mode: modeClientGo})
	waitNewLeader(t, maxAcquireWait()+slack, deleted, cg4)
	r6 := c.startCandidate(t, "r6", candOpts{lease: lease})
	waitFor(t, maxAcquireWait()+slack, "r6 to observe cg4", func() bool { return len(newLeaderEvents(r6, "cg4")) > 0 })
	w.betweenRenewals(t, cg4.id)
	sent, _ = cg4.terminate()
	waitNewLeader(t, maxAcquireWait()+slack, sent, r6)
	after, _ := r6.firstAfter(sent)
	t.Logf("deleted and created again by client-go: r5 led with term %d fence %s, r6 after cg4 with term %d fence %s",
		before.Term, before.Fence, after.Term, after.Fence)
	if after.Term >= before.Term {
		t.Errorf("the term number did not start over after client-go created the Lease again (%d, was %d): the test lost its point", after.Term, before.Term)
	}
	if relect.Fence(after.Fence).Compare(relect.Fence(before.Fence)) <= 0 {
		t.Errorf("r6's fence %q after the Lease was created again is not above r5's %q", after.Fence, before.Fence)
	}
	r6.terminate()
	standby.terminate()

	ivs := checkSafety(t, cg1, r1, r2, standby, cg2, r3, r4, cg3, r5, cg4, r6)
	// Term numbers start over when the Lease is created again: each
	// stretch on its own. Fences never do: one check over both.
	checkTerms(t, ivs, time.Time{}, deleted)
	checkTerms(t, ivs, deleted, time.Time{})
	checkFences(t, ivs)
	if ivs := standby.intervals(); len(ivs) > 0 {
		t.Errorf("the standby led: %v", ivs)
	}
}

// newLeaderEvents returns cand's new-leader events naming leader.
func newLeaderEvents(cand *candidate, leader string) []history.Record {
	var out []history.Record
	for _, ev := range cand.events("new-leader", time.Time{}) {
		if ev.Leader == leader {
			out = append(out, ev)
		}
	}
	return out
}

// staleLine checks that the Lease, held now by someone who is not relect,
// still carries a line of succession, written by relect with a record of
// another term (leaseTransitions), and returns it. It reads relect's
// annotation relect.io/succession: {"term": N, "next": [{"id": ...}]}.
func staleLine(t *testing.T, c *cluster, lease string) string {
	t.Helper()
	l := c.getLease(t, lease)
	if l == nil {
		t.Fatal("no Lease")
	}
	raw, ok := l.Annotations["relect.io/succession"]
	if !ok {
		t.Fatalf("the Lease carries no line of succession: %v", l.Annotations)
	}
	var line struct {
		Term int32 `json:"term"`
		Next []struct {
			ID string `json:"id"`
		} `json:"next"`
	}
	if err := json.Unmarshal([]byte(raw), &line); err != nil {
		t.Fatalf("the line of succession %q: %v", raw, err)
	}
	if line.Term == ptrVal(l.Spec.LeaseTransitions) || len(line.Next) == 0 {
		t.Fatalf("want a line of another term than the record's (%d), naming someone: %s", ptrVal(l.Spec.LeaseTransitions), raw)
	}
	return fmt.Sprintf("%s (the record's leaseTransitions: %d)", raw, ptrVal(l.Spec.LeaseTransitions))
}
