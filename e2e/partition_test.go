package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPartitionedLeader: black-hole the leader's connection to the
// apiserver (requests are accepted and never answered) for longer than the
// renew deadline. The leader steps down within RenewDeadline of its last
// successful renewal, the follower takes over only after that, and once the
// partition heals the old leader observes the new one and campaigns again.
func TestPartitionedLeader(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)
	a := c.startCandidate(t, "a", candOpts{lease: lease})
	b := c.startCandidate(t, "b", candOpts{lease: lease})
	cut := waitLeader(t, leaseDuration+maxAcquireWait()+slack, a, b)
	other := others(cut, a, b)[0]
	time.Sleep(retryPeriod)

	if err := cut.proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	partitioned := time.Now()
	waitLeader(t, leaseDuration+2*maxAcquireWait()+slack, other)
	otherOn, _ := other.firstOnAfter(partitioned)

	// Step-down: every renewal that succeeded was sent before the
	// partition, so IsLeader must turn false by partition + RenewDeadline.
	// Checked on what the samples prove (history.Interval.DoneBy): a
	// sampler starved after reading IsLeader records the end late.
	ivs := cut.intervals()
	last := ivs[len(ivs)-1]
	stepDown := last.End.Sub(partitioned)
	t.Logf("partitioned %s: it stepped down %s after the partition (renew deadline %v; its last sample seeing it lead began %s after); %s took over %s after it",
		cut.id, ms(stepDown), renewDeadline, ms(last.SurelyUntil.Sub(partitioned)), other.id, ms(otherOn.Sub(partitioned)))
	if !last.DoneBy(partitioned.Add(renewDeadline)) {
		t.Errorf("%s led after the renew deadline %v: %v", cut.id, renewDeadline, last)
	}
	other.takenOverOnlyAfter(t, "partition", partitioned, last.SurelyUntil)
	stopped := cut.eventsAfterOne(t, "stopped-leading", partitioned)
	if len(stopped) != 1 || !strings.Contains(stopped[0].Err, "expired") {
		t.Errorf("%s: want one stopped-leading event with the lease expired, got %+v", cut.id, stopped)
	}

	// Keep the partition a while longer: the cut-off candidate keeps
	// trying, within its budget.
	if until := partitioned.Add(leaseDuration + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	if err := cut.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	errs := 0
	for _, r := range cut.events("error", partitioned) {
		if r.Time().Before(healed) {
			errs++
		}
	}
	window := healed.Sub(partitioned)
	t.Logf("%s: %d failed Lease calls in the %s partition (%.1f/s)", cut.id, errs, ms(window), float64(errs)/window.Seconds())
	// relect's default budget: 2 calls per RetryPeriod, burst 4.
	if budget := int(window.Seconds()*2/retryPeriod.Seconds()) + 4; errs > budget {
		t.Errorf("%s: %d failed calls in %v, over its budget of %d", cut.id, errs, window, budget)
	}

	seen := waitFor(t, leaseDuration+2*maxAcquireWait()+slack, cut.id+" to observe "+other.id+" after healing", func() bool {
		for _, r := range cut.events("new-leader", healed) {
			if r.Leader == other.id {
				return true
			}
		}
		return false
	})
	t.Logf("%s observed %s %s after healing", cut.id, other.id, ms(seen.Sub(healed)))
	if on, _ := cut.firstOnAfter(partitioned); !on.IsZero() {
		t.Errorf("%s led again at %v while %s led", cut.id, on, other.id)
	}

	w.betweenRenewals(t, other.id)
	sent, _ := other.terminate()
	waitLeader(t, maxAcquireWait()+slack, cut)
	on, _ := cut.firstOnAfter(sent)
	t.Logf("%s leads again %s after SIGTERM of %s", cut.id, ms(on.Sub(sent)), other.id)

	cut.terminate()
	all := checkSafety(t, a, b)
	checkTerms(t, all, time.Time{}, time.Time{})
	checkFences(t, all)
}
