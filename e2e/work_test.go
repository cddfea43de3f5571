package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/history"
)

// Work liveness (relect's Options.Work) on the real control plane: a
// leader whose work is stuck hands over, the command stops a CMD whose
// work check fails, and an outage of the work everywhere costs few
// handovers.

// stuckStops are cand's stopped-leading events at or after from whose
// cause is stuck work.
func (cand *candidate) stuckStops(from time.Time) []history.Record {
	var out []history.Record
	for _, r := range cand.events("stopped-leading", from) {
		if strings.Contains(r.Err, "work is stuck") {
			out = append(out, r)
		}
	}
	return out
}

// touchFile creates an empty file at path, and returns when.
func touchFile(t *testing.T, path string) time.Time {
	t.Helper()
	at := time.Now()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return at
}

// TestWorkStuckHandsOver: three candidates whose work beats (BeatWindow
// 2 s). The leader's work hangs: it ends its term, releases the Lease,
// and another candidate leads within BeatWindow + 2 × RetryPeriod of the
// last beat; the stuck process stays up, and follows. Never two leaders.
func TestWorkStuckHandsOver(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := c.watchLease(t, lease)
	dir := testDir(t)
	const window = 2 * time.Second
	start := func(id string) *candidate {
		return c.startCandidate(t, id, candOpts{lease: lease,
			args: []string{"-beat-window", window.String(), "-stuck-file", filepath.Join(dir, "stuck-"+id)}})
	}
	all := []*candidate{start("a"), start("b"), start("c")}
	first := waitLeader(t, leaseDuration+maxAcquireWait()+slack, all...)
	time.Sleep(2 * window) // its work beats: it leads on
	if !first.leading() || len(first.stuckStops(time.Time{})) != 0 {
		t.Fatalf("%s stopped leading while its work beat", first.id)
	}

	hung := touchFile(t, filepath.Join(dir, "stuck-"+first.id))
	rest := others(first, all...)
	bound := window + 2*retryPeriod
	second, on, _ := waitNewLeader(t, bound+slack, hung, rest...)
	var lastBeat time.Time
	waitFor(t, time.Second, first.id+"'s record of its last beat", func() bool {
		rs := first.events("beats-stopped", hung.Add(-window))
		if len(rs) > 0 {
			lastBeat = rs[0].Time()
		}
		return len(rs) > 0
	})
	stops := first.stuckStops(hung)
	if len(stops) != 1 {
		t.Fatalf("%s: %d stopped-leading events for stuck work after its work hung, want 1", first.id, len(stops))
	}
	if n := len(first.eventsAfterOne(t, "released", stops[0].Time())); n != 1 {
		t.Errorf("%s: %d released events after its stuck term, want 1 (released at once, as a Yield)", first.id, n)
	}
	released, ok := w.first(hung, func(o leaseObs) bool { return o.exists && o.holder == "" })
	if !ok || !released.at.Before(on) {
		t.Errorf("the lease was not seen released before %s led (released %v at %v, led at %v)", second.id, ok, released.at, on)
	}
	if took := on.Sub(lastBeat); took > bound {
		t.Logf("slow: %s led %s after %s's last beat, beyond BeatWindow + 2 × RetryPeriod = %v (a measurement, not a failure)",
			second.id, ms(took), first.id, bound)
	}
	t.Logf("%s's work hung %s after its last beat; its term ended %s after the last beat (BeatWindow %v), the lease was seen released %s later, and %s led %s after that: %s after the last beat (bound %v)",
		first.id, ms(hung.Sub(lastBeat)), ms(stops[0].Time().Sub(lastBeat)), window, ms(released.at.Sub(stops[0].Time())),
		second.id, ms(on.Sub(released.at)), ms(on.Sub(lastBeat)), bound)

	// The stuck one stays a candidate, following the new leader.
	waitFor(t, time.Second, first.id+" to follow "+second.id, func() bool {
		return slices.ContainsFunc(first.events("new-leader", hung), func(r history.Record) bool { return r.Leader == second.id })
	})
	time.Sleep(window)
	if first.exited() || first.leading() {
		t.Errorf("%s: exited %v, leading %v after its stuck handover; want a running follower", first.id, first.exited(), first.leading())
	}
	for _, cand := range all {
		cand.terminate()
	}
	ivs := checkSafety(t, all...)
	checkTerms(t, ivs, time.Time{}, time.Time{})
	checkFences(t, ivs)
}

// TestCommandRunWorkCheck: two `relect run` replicas with a work check
// (--check, failing while a file named after the replica exists). When
// the leader's check fails, its CMD is stopped as at any term's end, the
// Lease is released, and the other replica's CMD starts; the stuck relect
// stays up and follows. Never two CMDs at once.
func TestCommandRunWorkCheck(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	w := newWorkers(t)
	watch := c.watchLease(t, lease)
	dir := testDir(t)
	const interval, failures = 500 * time.Millisecond, 2
	check := []string{"--check=test ! -e " + dir + `/fail-"$RELECT_IDENTITY"`,
		"--check-interval=" + interval.String(), "--check-failures=2"}
	procs := map[string]*relectProc{}
	for _, id := range []string{"a", "b"} {
		procs[id] = c.startRelect(t, id, "run", runArgs(t, w, id, lease, check)...)
	}
	i1, first := w.awaitLine(t, 0, leaseDuration+maxAcquireWait()+10*time.Second, "the first CMD", func(l workerLine) bool { return l.Kind == "start" })
	leader, other := procs[first.ID], procs[map[string]string{"a": "b", "b": "a"}[first.ID]]
	waitFor(t, 10*time.Second, other.id+" to follow "+leader.id, func() bool { return other.logHas("new-leader", "leader="+leader.id) })

	failed := touchFile(t, filepath.Join(dir, "fail-"+leader.id))
	// The check fails at its next calls; then the term ends, CMD has
	// --grace to stop, and the lease is released at once.
	expected := (failures+1)*interval + defaultGrace() + maxAcquireWait()
	var second workerLine
	var i2 int
	waitFor(t, expected+slack, other.id+"'s CMD", func() bool {
		lines := w.lines(t)
		for i := i1 + 1; i < len(lines); i++ {
			if isStart(other.id)(lines[i]) {
				i2, second = i, lines[i]
				return true
			}
		}
		return false
	})
	lines := w.lines(t)
	stop := lineOf(lines, "stop", first.PID)
	if stop < 0 || stop > i2 {
		t.Fatalf("SAFETY: %s's CMD has no stop line before %s's CMD started (stop line %d, start %d)", leader.id, other.id, stop, i2)
	}
	stopped := lines[stop].time()
	released, ok := watch.first(failed, func(o leaseObs) bool { return o.exists && o.holder == "" })
	if !ok || !released.at.After(stopped) || !released.at.Before(second.time()) {
		t.Errorf("the lease was not seen released between %s's CMD's stop (%v) and %s's CMD's start (%v): %v %v",
			leader.id, stopped, other.id, second.time(), ok, released)
	}
	if !leader.logHas("the leader's work is stuck: handing over", "--check: exit status 1") {
		t.Errorf("relect %s did not log its stuck handover with the check's failure", leader.id)
	}
	t.Logf("%s's check began to fail: its CMD stopped %s later (interval %v, %d failures, grace %v), the lease was seen released %s after that, and %s's CMD started %s after the release: %s in all",
		leader.id, ms(stopped.Sub(failed)), interval, failures, defaultGrace(), ms(released.at.Sub(stopped)),
		other.id, ms(second.time().Sub(released.at)), ms(second.time().Sub(failed)))

	waitFor(t, 10*time.Second, leader.id+" to follow "+other.id, func() bool { return leader.logHas("new-leader", "leader="+other.id) })
	if leader.exited() {
		t.Errorf("relect %s exited after its stuck handover; it must stay a candidate", leader.id)
	}
	other.terminate()
	leader.terminate()
	w.checkSafety(t)
}

// TestWorkStuckEverywhere: three candidates whose work beats, with a
// Cooldown of 4 s; then the work hangs on every one of them for 45 s (its
// downstream is down). Each stuck handover in a row makes the next leader
// hold twice as long, so the k-th comes no sooner than Cooldown ×
// (2^(k−1) − 1) after the first, and the outage costs at most
// floor(log2(45/4 + 1)) + 1 = 4 handovers, not one per BeatWindow; each
// is a release, taken in a moment. Never two leaders.
func TestWorkStuckEverywhere(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	down := filepath.Join(testDir(t), "downstream-down")
	const (
		window   = 2 * time.Second
		cooldown = 4 * time.Second
		outage   = 45 * time.Second
	)
	var all []*candidate
	for _, id := range []string{"a", "b", "c"} {
		all = append(all, c.startCandidate(t, id, candOpts{lease: lease, args: []string{
			"-beat-window", window.String(), "-work-cooldown", cooldown.String(), "-stuck-file", down}}))
	}
	waitLeader(t, leaseDuration+maxAcquireWait()+slack, all...)
	time.Sleep(window)

	from := touchFile(t, down)
	time.Sleep(outage)
	until := time.Now()
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}

	// The stuck handovers of the outage, in order.
	type stuckStop struct {
		cand *candidate
		history.Record
	}
	var stops []stuckStop
	for _, cand := range all {
		for _, r := range cand.stuckStops(from) {
			if r.Time().Before(until) {
				stops = append(stops, stuckStop{cand, r})
			}
		}
	}
	slices.SortFunc(stops, func(a, b stuckStop) int { return a.Time().Compare(b.Time()) })
	most := int(math.Floor(math.Log2(float64(outage)/float64(cooldown)+1))) + 1
	var lines []string
	for k, r := range stops {
		line := fmt.Sprintf("  %d. %s %s ends term %d, %s into the outage", k+1, r.Time().Format("15:04:05.000"), r.cand.id, r.Term, ms(r.Time().Sub(from)))
		if k > 0 {
			// No sooner than Cooldown × (2^(k−1) − 1) after the first (k
			// from 1): the holds after each stuck handover in a row.
			since, lower := r.Time().Sub(stops[0].Time()), cooldown*time.Duration(1<<k-1)
			line += fmt.Sprintf(", %s after the one before, %s after the first (no sooner than %v)", ms(r.Time().Sub(stops[k-1].Time())), ms(since), lower)
			if since < lower-50*time.Millisecond {
				t.Errorf("stuck handover %d came %s after the first, sooner than Cooldown × (2^(k−1) − 1) = %v", k+1, ms(since), lower)
			}
		}
		lines = append(lines, line)
	}
	t.Logf("%d stuck handovers in an outage of %v (Cooldown %v, BeatWindow %v; at most %d):\n%s",
		len(stops), outage, cooldown, window, most, strings.Join(lines, "\n"))
	if len(stops) > most {
		t.Errorf("%d stuck handovers in an outage of %v, more than floor(log2(T/Cooldown + 1)) + 1 = %d", len(stops), outage, most)
	}
	if len(stops) < 2 {
		t.Errorf("%d stuck handovers in an outage of %v: the first is not held, and the next after Cooldown %v", len(stops), outage, cooldown)
	}
	for _, r := range stops {
		if len(r.cand.events("released", r.Time())) == 0 {
			t.Errorf("%s: no released event after its stuck term %d", r.cand.id, r.Term)
		}
	}

	// One leader at every instant of the outage but the handovers'.
	var ivs []history.Interval
	for _, cand := range all {
		ivs = append(ivs, cand.intervals()...)
	}
	slices.SortFunc(ivs, func(a, b history.Interval) int { return a.Start.Compare(b.Start) })
	var gaps []string
	var leaderless time.Duration
	for i := 1; i < len(ivs); i++ {
		end, next := ivs[i-1].End, ivs[i].Start
		if !next.After(from) || !end.Before(until) || !next.After(end) {
			continue
		}
		gap := next.Sub(end)
		leaderless += gap
		gaps = append(gaps, ms(gap))
		if gap > maxAcquireWait()+slack {
			t.Logf("slow: no leader for %s from %s (a measurement, not a failure)", ms(gap), end.Format("15:04:05.000"))
		}
	}
	t.Logf("no leader for %s in all during the %v outage: gaps %s", ms(leaderless), outage, strings.Join(gaps, ", "))
	for _, cand := range all {
		cand.terminate()
	}
	checkSafety(t, all...)
}
