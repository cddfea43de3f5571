package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/wire"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Row g with relect's successors apart: the leader and the two successors
// it names first run as candidate processes of their own (e2e/cmd/candidate,
// straight to the apiserver), with a higher Priority than the other N − 3,
// which run in the test process as in every other run of row g. The line of
// succession puts the higher priority first, so every change of leader is
// from one such process to another, and the successor's path — the release
// arriving on its watch, its acquiring write, its OnStartedLeading — runs
// in a process that decodes one watch, not N − 1 of them.

// Candidates apart from the test process in a run with fleetKey.apart.
const (
	apartCandidates = 3 // the leader and two successors
	apartPriority   = 1 // the others' is 0
)

// apartFleet is a fleet whose leader and first successors are candidate
// processes (apart), the others in-process (the embedded fleet).
type apartFleet struct {
	*fleet
	apart []*candidate
	w     *leaseWatch
}

// addApart starts one more candidate process, and returns it once it has
// written its first record.
func (f *apartFleet) addApart() *candidate {
	f.t.Helper()
	lt := productionTiming
	args := []string{"-lease-duration", lt.ld.String(), "-renew-deadline", lt.rd.String(), "-retry-period", lt.rp.String(),
		"-priority", fmt.Sprint(apartPriority)}
	if f.k.json {
		args = append(args, "-json")
	}
	id := fmt.Sprintf("%s-proc-%d", f.k, f.seq)
	f.seq++
	cand := f.c.startCandidate(f.t, id, candOpts{mode: modeRelect, lease: f.lease, direct: true, args: args, user: f.c.serviceAccountConfig(f.t)})
	f.apart = append(f.apart, cand)
	return cand
}

// startedSince is the first start of a term of cand after from (relect's
// EventStartedLeading, stamped by the Elector just before it calls
// OnStartedLeading), if any.
func startedSince(cand *candidate, from time.Time) (time.Time, bool) {
	if rs := cand.events("started-leading", from); len(rs) > 0 {
		return rs[0].Time(), true
	}
	return time.Time{}, false
}

// line returns the successors the Lease names, first in line first.
func (f *apartFleet) line() []string {
	f.t.Helper()
	l := f.c.getLease(f.t, f.lease)
	if l == nil {
		return nil
	}
	var line struct {
		Next []struct {
			ID string `json:"id"`
		} `json:"next"`
	}
	if err := json.Unmarshal([]byte(l.Annotations["relect.io/succession"]), &line); err != nil {
		return nil
	}
	var ids []string
	for _, s := range line.Next {
		ids = append(ids, s.ID)
	}
	return ids
}

// inLine waits until the Lease names every one of cands, and nobody before
// them, first in its line of succession.
func (f *apartFleet) inLine(cands ...*candidate) {
	f.t.Helper()
	waitFor(f.t, 20*time.Second, fmt.Sprintf("the line of succession to begin with %s", names(cands)), func() bool {
		return f.lineBegins(cands)
	})
}

// lineBegins reports whether the line of succession the Lease names
// begins with cands, in any order.
func (f *apartFleet) lineBegins(cands []*candidate) bool {
	var want []string
	for _, c := range cands {
		want = append(want, c.id)
	}
	line := f.line()
	if len(line) < len(want) {
		return false
	}
	got := slices.Clone(line[:len(want)])
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// apartSettled waits until exactly one candidate apart leads and the line
// of succession begins with the other two, and returns that leader and
// when its last term began (after begin). A fleet of 1,000 forming on a
// loaded machine may lose its first leader to renewals slower than the
// renew deadline (a fresh-clone .ci/run beside other work, TestAPF): the
// measurement starts from whoever leads once the fleet settles.
func (f *apartFleet) apartSettled(begin time.Time) (*candidate, time.Time) {
	f.t.Helper()
	var leader *candidate
	waitFor(f.t, 90*time.Second, "a candidate apart leading, the line beginning with the other two", func() bool {
		leader = nil
		for _, c := range f.apart {
			if c.leading() {
				if leader != nil {
					return false
				}
				leader = c
			}
		}
		return leader != nil && f.lineBegins(others(leader, f.apart...))
	})
	rs := leader.events("started-leading", begin)
	if len(rs) == 0 {
		f.t.Fatalf("%s leads, with no started-leading since the fleet began", leader.id)
	}
	return leader, rs[len(rs)-1].Time()
}

// followLine waits until every in-process candidate but the leader and
// those its line of succession names follows the line Lease, not the
// election's: the fleet's steady state, in which a change of leader is
// measured. A fleet that forms at once is shed (429) by API Priority and
// Fairness, and its followers reach the line over their backoffs, up to
// the line Lease's refresh period (RegistrationRenewal / 3, 5 minutes).
func (f *fleet) followLine() {
	f.t.Helper()
	refresh := defaults.RegistrationRenewal / 3
	outside := func() int {
		sc := wire.SuccessionOf(f.c.getLease(f.t, f.lease))
		if sc == nil || !sc.Posted {
			return len(f.live) + 1 // no line posted yet
		}
		n := 0
		for _, p := range f.live {
			if p.id != sc.From && !sc.Names(p.id) {
				n++
			}
		}
		return n
	}
	var on, want int
	if !bench.Await(refresh+slack, 100*time.Millisecond, func() bool {
		on, want = onLine(f.live, f.lease), outside()
		return on >= want
	}) {
		f.t.Fatalf("%v after the fleet settled, %d of the %d in-process candidates outside the line follow the line Lease", refresh+slack, on, want)
	}
}

// apartScene is the bench.Fleet of a fleet with its successors apart:
// its candidates are the candidate processes, whose renewals are seen on
// the test's watch on the Lease.
type apartScene struct {
	f     *apartFleet
	leave func(leader *candidate) (time.Time, error)
}

// Renewal waits up to two RetryPeriods and slack until the watch has seen
// a renewal by holder sent at or after from, and returns when it saw it.
func (s apartScene) Renewal(holder *candidate, from time.Time) (time.Time, error) {
	var at time.Time
	if !bench.Await(2*productionTiming.rp+slack, 10*time.Millisecond, func() bool {
		s.f.w.mu.Lock()
		defer s.f.w.mu.Unlock()
		for _, o := range s.f.w.obs {
			if o.exists && o.holder == holder.id && !o.at.Before(from) {
				at = o.at
				return true
			}
		}
		return false
	}) {
		return time.Time{}, fmt.Errorf("the watch saw no renewal by %s", holder.id)
	}
	return at, nil
}

func (s apartScene) Leave(leader *candidate) (time.Time, error) { return s.leave(leader) }

// Next waits for the term of another candidate process; a term of an
// in-process candidate is an error: the successors are apart.
func (s apartScene) Next(from time.Time, gone *candidate) (bench.Mark[*candidate], error) {
	var next bench.Mark[*candidate]
	var inProcess *proc
	bench.Await(electionTimeout(productionTiming), 10*time.Millisecond, func() bool {
		for _, cand := range others(gone, s.f.apart...) {
			if at, ok := startedSince(cand, from); ok {
				next = bench.Mark[*candidate]{Who: cand, At: at, Start: true}
				return true
			}
		}
		if m := s.f.terms.Between(from, time.Now().Add(time.Hour)); len(m) > 0 {
			inProcess = m[0].Who
			return true
		}
		return false
	})
	switch {
	case inProcess != nil:
		return next, fmt.Errorf("%s led: not a candidate apart", inProcess.id)
	case next.Who == nil:
		return next, fmt.Errorf("no candidate apart led within %v", electionTimeout(productionTiming))
	}
	return next, nil
}

// benchFleetApart is benchFleet for relect with the successors apart
// (fleetKey.apart): the candidate processes first, then the k.n − 3
// in-process ones, then changes changes of leader, each the leader's
// process sent SIGTERM (its Run cancelled: it releases) between two
// renewals, at least RetryPeriod into its term, as in row b.
func benchFleetApart(t *testing.T, c *cluster, k fleetKey, changes int) fleetRun {
	lt := productionTiming
	f := &apartFleet{fleet: &fleet{t: t, c: c, k: k, lease: leaseName(t), terms: &termLog{}}}
	f.opts = termOpts(f.terms, procOpts{mode: k.mode, lease: f.lease, timing: lt, json: k.json, user: c.serviceAccountConfig(t)})
	c.createReleasedLease(t, f.lease)
	f.w = c.watchLease(t, f.lease)
	t.Cleanup(func() {
		if err := stopProcs(f.live); err != nil {
			t.Error(err)
		}
	})
	begin := time.Now()
	for range apartCandidates {
		f.addApart()
	}
	waitLeader(t, electionTimeout(lt), f.apart...)
	for i := range k.n - apartCandidates {
		f.add()
		if i%fleetBatch == fleetBatch-1 {
			time.Sleep(fleetBatchPause)
		}
	}
	f.settled(f.live...)
	leader, leaderAt := f.apartSettled(begin)
	settled := time.Now()
	f.followLine()
	t.Logf("%s: %d candidates started and settled in %v; %s leads; the in-process ones outside the line all followed the line Lease %v later",
		k, k.n, settled.Sub(begin).Round(time.Millisecond), leader.id, time.Since(settled).Round(time.Millisecond))

	var run fleetRun
	for len(run.latency) < changes {
		next, nextAt, latency, cw, qw := f.change(leader, leaderAt)
		throttled := throttledBetween(f.live, nextAt.Add(-latency), nextAt.Add(lt.rp+fleetSettle))
		t.Logf("%s: the in-process candidates' requests of the change window: %s; %d follow the line",
			k, tallyBetween(f.live, f.lease, nextAt.Add(-latency), nextAt.Add(lt.rp+fleetSettle)), onLine(f.live, f.lease))
		checkAPF(t, k, cw, throttled)
		run.latency = append(run.latency, latency)
		run.change, run.quiet = append(run.change, cw), append(run.quiet, qw)
		run.throttled = append(run.throttled, throttled)
		leader, leaderAt = next, nextAt
	}
	reqs, writes, cpu := run.perChange()
	q := run.quietTotal()
	t.Logf("%s: per change beyond the background: %v lease requests (%v writes), %v apiserver CPU ms; background: %.2f lease requests/s, "+
		"CPU of kube-apiserver %.2f cores, of the test process (the %d candidates in it) %.2f cores",
		k, reqs, writes, cpu, run.background(), q.apiCPU.Seconds()/q.d.Seconds(), k.n-apartCandidates, q.selfCPU.Seconds()/q.d.Seconds())
	return run
}

// change makes one change of leader from leader, whose term began at
// from, to the successor it names first; the windows are fleet.change's.
func (f *apartFleet) change(leader *candidate, from time.Time) (next *candidate, nextAt time.Time, latency time.Duration, cw, qw window) {
	t, lt := f.t, productionTiming
	var a load
	scene := apartScene{f: f, leave: func(leader *candidate) (time.Time, error) {
		if !leader.leading() {
			return time.Time{}, fmt.Errorf("%s stopped leading by itself", leader.id)
		}
		a = f.sample()
		return leader.signal(syscall.SIGTERM), nil
	}}
	cancelled, m, err := bench.Change(scene, bench.Mark[*candidate]{Who: leader, At: from, Start: true}, lt.rp)
	if err != nil {
		t.Fatalf("a SIGTERM of %s: %v", leader.id, err)
	}
	next, nextAt = m.Who, m.At
	select {
	case <-leader.waited:
	case <-time.After(lt.rd + slack):
		t.Fatalf("%s did not exit within %v of SIGTERM", leader.id, lt.rd+slack)
	}
	if err := leader.err(); err != nil {
		t.Errorf("%s: exit after SIGTERM: %v", leader.id, err)
	}
	time.Sleep(time.Until(nextAt.Add(lt.rp + fleetSettle)))
	b := f.sample()
	f.apart = others(leader, f.apart...)
	f.addApart()
	f.inLine(others(next, f.apart...)...)
	cw, qw = windows(f.fleet, bench.Fleet[*candidate](scene), m, a, b)
	latency = nextAt.Sub(cancelled)
	t.Logf("%s: %s → %s in %s; lease requests in the %v window %.0f (%s), in the %v quiet one %.0f (%s); apiserver CPU %v and %v; watch bytes %.0f and %.0f",
		f.k, leader.id, next.id, ms(latency), cw.d.Round(time.Millisecond), cw.reqs, cw.verbs, qw.d.Round(time.Millisecond), qw.reqs, qw.verbs,
		cw.apiCPU, qw.apiCPU, cw.watchBytes, qw.watchBytes)
	return next, nextAt, latency, cw, qw
}
