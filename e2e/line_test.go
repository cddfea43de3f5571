package e2e

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/relect/relect/internal/wire"
)

// TestWholeLineStops: twelve candidate processes, so that the leader
// posts its line (docs/design.md, "Only the line watches"): the leader,
// its three successors and its keeper watch the election's Lease, the
// seven others follow the line Lease, and one of them, the warden, reads
// the election's Lease every two retry periods. The leader, its successors
// and its keeper get SIGTERM at one instant — a rollout with a large
// maxUnavailable, a drain of several nodes — and release or deregister.
// The warden sees the release at its next read and leads at its turn
// after the keeper: within 4 retry periods (2 s here; 8 s at the default
// durations) plus the calls' time, where before the warden the seven
// waited for the line Lease to go stale, ten minutes at the defaults.
func TestWholeLineStops(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	candidateBinary(t)
	var all []*candidate
	for i := range 12 {
		all = append(all, c.startCandidate(t, fmt.Sprintf("c%02d", i), candOpts{lease: lease}))
	}
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, all...)
	// The line is posted once the leader has listed the registry and each
	// candidate has registered (a retry period or so after it started).
	var line *wire.Succession
	waitFor(t, leaseDuration+10*retryPeriod, "the line posted, with a warden", func() bool {
		l := c.getLease(t, lease)
		line = nil
		if l != nil {
			line = wire.SuccessionOf(l)
		}
		return line != nil && line.Posted && line.Warden != "" && len(line.Next) == 3 && len(line.Keepers) == 1
	})
	byID := map[string]*candidate{}
	for _, cand := range all {
		byID[cand.id] = cand
	}
	gone := []*candidate{byID[line.From], byID[line.Keepers[0]]}
	for _, s := range line.Next {
		gone = append(gone, byID[s.Identity])
	}
	var rest []*candidate
	for _, cand := range all {
		if !slices.Contains(gone, cand) {
			rest = append(rest, cand)
		}
	}
	t.Logf("leader %s, line %v, keeper %s, warden %s", line.From, line.Next, line.Keepers[0], line.Warden)

	stopped := time.Now()
	for _, cand := range gone {
		cand.signal(syscall.SIGTERM)
	}
	bound := 4*retryPeriod + 2*slack
	leader, on, _ := waitNewLeader(t, bound+leaseDuration, stopped, rest...)
	took := on.Sub(stopped)
	t.Logf("SIGTERM to the leader, its successors and its keeper at once: %s leads %s later (bound %s: two retry periods for the warden's read, four succession steps)",
		leader.id, ms(took), bound)
	if took > bound {
		t.Errorf("a new leader %s after the whole line stopped, want within %s", ms(took), bound)
	}
	if leader.id != line.Warden {
		t.Errorf("%s leads, want the warden %s: the only candidate left that reads the election's Lease", leader.id, line.Warden)
	}
	for _, cand := range gone {
		select {
		case <-cand.waited:
		case <-time.After(renewDeadline + 10*time.Second):
			t.Fatalf("%s did not exit within %v of SIGTERM", cand.id, renewDeadline+10*time.Second)
		}
	}
	for _, cand := range rest {
		cand.terminate()
	}
	ivs := checkSafety(t, all...)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}
