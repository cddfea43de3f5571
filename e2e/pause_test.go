package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/history"
)

// TestPausedLeader: SIGSTOP the leader for longer than the lease duration,
// while the follower takes over; on SIGCONT the paused candidate's IsLeader
// is already false (it never acts as leader after waking), it observes the
// new leader, and it campaigns again (it leads once the other one leaves).
func TestPausedLeader(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	b := c.startCandidate(t, "b", candOpts{lease: lease})
	paused := waitLeader(t, leaseDuration+maxAcquireWait()+slack, a, b)
	other := others(paused, a, b)[0]
	time.Sleep(retryPeriod) // a renewal or two

	stopAt := paused.signal(syscall.SIGSTOP)
	waitLeader(t, leaseDuration+2*maxAcquireWait()+slack, other)
	otherOn, _ := other.firstOnAfter(stopAt)
	// Stay stopped longer than the lease duration, and a while after the
	// takeover.
	if until := stopAt.Add(leaseDuration + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	time.Sleep(retryPeriod)
	contAt := paused.signal(syscall.SIGCONT)
	t.Logf("%s stopped for %s; %s took over %s after SIGSTOP", paused.id, ms(contAt.Sub(stopAt)), other.id, ms(otherOn.Sub(stopAt)))

	// It observes the new leader soon after waking.
	seen := waitFor(t, leaseDuration+2*maxAcquireWait()+slack, paused.id+" to observe "+other.id, func() bool {
		for _, r := range paused.events("new-leader", contAt) {
			if r.Leader == other.id {
				return true
			}
		}
		return false
	})
	t.Logf("%s observed %s as leader %s after SIGCONT", paused.id, other.id, ms(seen.Sub(contAt)))

	// Its history proves it did not act as leader after waking: the sampler
	// saw IsLeader true before the pause and false at the first sample
	// after it.
	var gap *history.Record
	for _, r := range paused.records() {
		if r.Kind == history.KindGap && r.View == history.ViewRelect && r.T >= contAt.UnixNano() && r.From <= contAt.UnixNano() {
			gap = &r
			break
		}
	}
	switch {
	case gap == nil:
		t.Errorf("%s: no sampling gap recorded across the SIGSTOP", paused.id)
	case !gap.Before || gap.After:
		t.Errorf("%s: IsLeader was %v before the pause and %v after it, want true then false", paused.id, gap.Before, gap.After)
	default:
		t.Logf("%s: last sample before the pause at SIGSTOP%+.1fms (leading), first after it at SIGCONT%+.1fms (not leading)",
			paused.id, float64(gap.From-stopAt.UnixNano())/1e6, float64(gap.T-contAt.UnixNano())/1e6)
	}
	if on, _ := paused.firstOnAfter(stopAt); !on.IsZero() {
		t.Errorf("%s led again at %v while %s led", paused.id, on, other.id)
	}
	// Its term ends on waking: by its watchdog (the lease expired) or by
	// seeing the new holder (the lease was lost), whichever runs first.
	stopped := paused.eventsAfterOne(t, "stopped-leading", contAt)
	if len(stopped) != 1 || !(strings.Contains(stopped[0].Err, "expired") || strings.Contains(stopped[0].Err, "lost")) {
		t.Errorf("%s: want one stopped-leading event (lease expired or lost) after waking, got %+v", paused.id, stopped)
	} else {
		t.Logf("%s: term ended on waking: %s", paused.id, stopped[0].Err)
	}
	campaigned := waitFor(t, leaseDuration+slack, paused.id+" to campaign again", func() bool {
		return len(paused.events("campaigning", contAt)) > 0
	})
	t.Logf("%s campaigned again %s after SIGCONT", paused.id, ms(campaigned.Sub(contAt)))

	// It really is a candidate again.
	w.betweenRenewals(t, other.id)
	sent, _ := other.terminate()
	waitLeader(t, maxAcquireWait()+slack, paused)
	on, _ := paused.firstOnAfter(sent)
	t.Logf("%s leads again %s after SIGTERM of %s", paused.id, ms(on.Sub(sent)), other.id)

	paused.terminate()
	ivs := checkSafety(t, a, b)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}

// TestClientGoPausedLeader is the control experiment for the checker: a
// plain client-go candidate, looped by hand, is paused while leading and a
// relect candidate takes over. client-go's OnStartedLeading context stays
// alive across the pause, so after waking the process believes it leads
// while the other one does: the checker must catch that overlap, or it
// would be checking nothing.
func TestClientGoPausedLeader(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	cg := c.startCandidate(t, "clientgo", candOpts{lease: lease, mode: modeClientGo})
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, cg)
	r := c.startCandidate(t, "relect", candOpts{lease: lease})
	time.Sleep(retryPeriod)

	stopAt := cg.signal(syscall.SIGSTOP)
	waitLeader(t, leaseDuration+2*maxAcquireWait()+slack, r)
	if until := stopAt.Add(leaseDuration + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	contAt := cg.signal(syscall.SIGCONT)
	time.Sleep(renewDeadline + maxAcquireWait())

	r.terminate()
	cg.terminate()
	ivs := append(cg.intervals(), r.intervals()...)
	overlaps := history.Overlaps(ivs)
	if len(overlaps) == 0 {
		t.Fatalf("the checker found no overlap: the client-go leader's context should have outlived its pause; intervals: %v", ivs)
	}
	for _, o := range overlaps {
		t.Logf("caught as expected: %v", o)
	}
	// client-go's own IsLeader after waking, for the record.
	for _, iv := range history.Intervals(cg.id, cg.records(), history.ViewIsLeader, cg.dead()) {
		if iv.Start.Before(contAt) && iv.End.After(contAt) {
			t.Logf("client-go IsLeader stayed true %s after SIGCONT", ms(iv.End.Sub(contAt)))
		}
	}
}
