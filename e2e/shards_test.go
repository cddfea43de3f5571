package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// envShards=full runs TestShards' fuller mode: more stops, kills (the
// election's leader's included) and partitions, and two rolling restarts,
// for percentiles worth the name (about 3½ min instead of 1½ on two
// cores).
const envShards = "RELECT_E2E_SHARDS"

// workEndGrace is how late the record of a shard work's end may be
// stamped after its context was done: half a retry period (the sampler
// records gaps of 50 to 100 ms between samples on a loaded machine).
func workEndGrace() time.Duration { return retryPeriod / 2 }

// failoverBound is how long after a holder's last renewal (a SIGKILL, a
// partition) its shards may take to run elsewhere; leader: the holder was
// the election's leader too. It is the design's bound: the holder's Lease
// expires LeaseDuration after its last renewal, and its taker, which
// follows the Lease, takes it then — LD + 2 × RP leaves a retry period
// more than the design needs (its watch may show the last renewal up to
// RP late) — plus the slack; for the leader twice that (the election
// changes hands first within the same bound). designed and asserted are
// the same since the takers follow every shard held; both are returned
// for the table's "designed" column.
func failoverBound(leader bool) (designed, asserted time.Duration) {
	designed = leaseDuration + 2*retryPeriod
	if leader {
		designed = 2 * (leaseDuration + 2*retryPeriod)
	}
	designed += slack
	return designed, designed
}

// The fleet of TestShards: shardProcs candidate processes taking part in
// shardCount shards (relect's Options.Shards), each shard term recorded by
// the candidate in view "shard" (e2e/cmd/candidate, -shards).
const (
	shardProcs = 10
	shardCount = 32
	// relayEvery is the relay probe's period: 8 writes a second beside
	// the fleet's 64 shard renewals (32 shards, each every RetryPeriod).
	relayEvery = 250 * time.Millisecond
)

// shardRounds are how many times each scenario of TestShards runs.
type shardRounds struct {
	graceful, kill, killLeader, partition, rolling int
}

// TestShards: 10 candidate processes, 32 shards, on the real control plane.
//
//   - settle: every shard runs on exactly one process, each holds 3 or 4,
//     Elector.Shards says what each runs, and a settled fleet moves no
//     shard;
//   - graceful stop (SIGTERM) of a holder: only its shards move, each runs
//     elsewhere once it stopped (a release, not an expiry: well within a
//     lease duration); measured from its stop on the old holder to its
//     start on the new one;
//   - SIGKILL of a holder: its shards run elsewhere within failoverBound of
//     the kill, and not before its Leases could have expired; in the full
//     mode also of the election's leader (a change of leader first);
//   - partition (the holder's proxy black-holed): its shards' work ends
//     within RenewDeadline of the partition, runs elsewhere within
//     failoverBound; healed, it is given shards again;
//   - rolling restart of all 10, the leader last (stop, start again with
//     the same identity, wait until the fleet is balanced again with it):
//     moves per shard counted, bounded by each restart moving its shards
//     away and back;
//
// and over every history of every process: never two processes running
// one shard at one instant, each shard's fences grow and its term numbers
// too. The figures are printed in a table at the end (t.Logf); the bounds
// asserted are loose, from the lease timings.
func TestShards(t *testing.T) {
	c := requireCluster(t)
	r := shardRounds{graceful: 1, kill: 1, partition: 1, rolling: 1}
	switch os.Getenv(envShards) {
	case "", "short":
	case "full":
		r = shardRounds{graceful: 5, kill: 4, killLeader: 2, partition: 2, rolling: 2}
	default:
		t.Fatalf("%s=%q: want short or full", envShards, os.Getenv(envShards))
	}
	candidateBinary(t)
	f := &shardFleet{t: t, c: c, lease: leaseName(t), live: map[string]*shardProc{}}
	f.w = c.watchShards(t, f.lease)
	start := time.Now()
	for i := range shardProcs {
		f.start(fmt.Sprintf("c%02d", i))
	}
	started := time.Now()
	// A first deployment: the election's Lease is created LeaseDuration
	// after it was found missing, and so is each shard's by the leader;
	// then the candidates registered later than the first are given
	// shards after JoinDelay (LeaseDuration).
	f.awaitSettled(3*leaseDuration+4*retryPeriod+slack, "the first settle")
	m := &shardMeasures{}
	m.settle = time.Since(start)
	t.Logf("%d processes started in %s; settled (every shard on one process, balanced) %s after the first start",
		shardProcs, ms(started.Sub(start)), ms(m.settle))

	// Settled, the table is a fixed point: nothing moves.
	quiet := time.Now()
	time.Sleep(2 * leaseDuration)
	if n := f.startsIn(quiet, time.Now()); n != 0 {
		t.Errorf("settled: %d shard terms began in %v without a fault", n, 2*leaseDuration)
	}
	f.checkShardsCall()
	t.Logf("settled: %s", f.balance())

	// The floor of a graceful move on this machine, beside the moves,
	// from the first graceful stop to the end of the rolling restarts.
	f.probe = c.startRelayProbe(t, f.lease+"-relay", relayEvery)
	for range r.graceful {
		gaps, phases := f.gracefulStop()
		m.graceful = append(m.graceful, gaps...)
		m.phases = append(m.phases, phases...)
		m.rebalance = append(m.rebalance, f.rejoin(f.lastStopped, "the stopped holder")...)
	}
	for range r.kill {
		m.kill = append(m.kill, f.killHolder(false)...)
		m.rebalance = append(m.rebalance, f.rejoin(f.lastStopped, "the killed holder")...)
	}
	for range r.killLeader {
		m.killLeader = append(m.killLeader, f.killHolder(true)...)
		m.rebalance = append(m.rebalance, f.rejoin(f.lastStopped, "the killed leader")...)
	}
	for range r.partition {
		stop, run := f.partition()
		m.cutStop = append(m.cutStop, stop...)
		m.cutRun = append(m.cutRun, run...)
	}
	for range r.rolling {
		rr := f.rollingRestart()
		m.rolling = append(m.rolling, rr)
		m.graceful = append(m.graceful, rr.graceful...)
		m.phases = append(m.phases, rr.phases...)
		m.rebalance = append(m.rebalance, rr.rebalance...)
	}
	relays, err := f.probe.end()
	if err != nil {
		// The probe measures the machine's floor beside the moves; a
		// write of its own that timed out on a loaded machine (the race
		// suites run beside this one in hack/test.sh) ends it early, and
		// the table's floor counts the relays it made. It says nothing of
		// relect: logged, not failed.
		t.Logf("%v: the floor below is of %d relays", err, len(relays))
	}
	m.relays = relays

	for _, p := range f.liveProcs() {
		p.cand.terminate()
	}
	f.checkHistories(m)
	t.Logf("TestShards: %d processes, %d shards (lease %v, renew %v, retry %v; %s=%s), %s in all:\n%s",
		shardProcs, shardCount, leaseDuration, renewDeadline, retryPeriod, envShards, os.Getenv(envShards),
		ms(time.Since(start)), m.table())
}

// shardProc is one candidate process of the fleet: id its identity, label
// its incarnation (id#n), which the checks tell apart (two processes of
// one identity must not run a shard at once either).
type shardProc struct {
	id, label string
	cand      *candidate
	started   time.Time
}

// shardFleet is TestShards' fleet: every process started, in order, and
// the one running for each identity.
type shardFleet struct {
	t     *testing.T
	c     *cluster
	lease string
	procs []*shardProc
	live  map[string]*shardProc
	// lastStopped is the identity the last scenario stopped, killed or
	// cut off.
	lastStopped string
	// cutOff is an identity cut off from the apiserver: not counted in
	// the balance (it runs no shard once its work ended).
	cutOff string
	w      *shardWatch
	// probe, if not nil, is kicked as each graceful stop and rolling
	// restart sends SIGTERM: the floor of a move at that instant.
	probe *relayProbe
}

// breakdown describes how shard sh moved from holder id, failed at from,
// to the term moved, as the test's watch saw it: the holder's last write
// of the Lease, the taker named in the table, the term's start; all
// relative to from.
func (f *shardFleet) breakdown(sh, id string, from time.Time, moved history.Interval) string {
	taker, _, _ := strings.Cut(moved.Candidate, "#")
	s := sh + ":"
	if at, ok := f.w.lastWrite(sh, id, moved.Start); ok {
		s += " last renewal " + ms(at.Sub(from))
	}
	if at, ok := f.w.takerNamed(sh, taker, from); ok && at.Before(moved.Start) {
		s += ", taker " + taker + " named " + ms(at.Sub(from))
	}
	return s + ", runs on " + moved.Candidate + " " + ms(moved.Start.Sub(from))
}

// start starts a process for identity id (its next incarnation).
func (f *shardFleet) start(id string) *shardProc {
	f.t.Helper()
	n := 1
	for _, p := range f.procs {
		if p.id == id {
			n++
		}
	}
	cand := f.c.startCandidate(f.t, id, candOpts{lease: f.lease, args: []string{"-shards", strconv.Itoa(shardCount)}})
	p := &shardProc{id: id, label: fmt.Sprintf("%s#%d", id, n), cand: cand, started: time.Now()}
	f.procs = append(f.procs, p)
	f.live[id] = p
	return p
}

// liveProcs returns the running processes, by identity.
func (f *shardFleet) liveProcs() []*shardProc {
	var out []*shardProc
	for _, p := range f.live {
		if !p.cand.exited() {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// intervals returns every shard term of every process, by shard, in start
// order.
func (f *shardFleet) intervals() map[string][]history.Interval {
	out := map[string][]history.Interval{}
	for _, p := range f.procs {
		for sh, ivs := range history.ShardIntervals(p.label, p.cand.records(), p.cand.dead()) {
			out[sh] = append(out[sh], ivs...)
		}
	}
	for _, ivs := range out {
		slices.SortFunc(ivs, func(a, b history.Interval) int { return a.Start.Compare(b.Start) })
	}
	return out
}

// running returns, by shard, the labels of the running processes whose
// work runs it now (an open term), and how many each identity runs.
func (f *shardFleet) running() (by map[string][]string, per map[string]int) {
	by, per = map[string][]string{}, map[string]int{}
	for _, p := range f.liveProcs() {
		if p.id != f.cutOff {
			per[p.id] = 0
		}
		for sh, ivs := range history.ShardIntervals(p.label, p.cand.records(), time.Time{}) {
			if n := len(ivs); n > 0 && ivs[n-1].Open {
				by[sh] = append(by[sh], p.label)
				per[p.id]++
			}
		}
	}
	return by, per
}

// settled reports whether every shard runs on exactly one process and the
// running processes each run ⌊S/n⌋ or ⌈S/n⌉.
func (f *shardFleet) settled() bool {
	by, per := f.running()
	if len(by) != shardCount {
		return false
	}
	for _, labels := range by {
		if len(labels) != 1 {
			return false
		}
	}
	n := len(per)
	for _, k := range per {
		if k < shardCount/n || k > (shardCount+n-1)/n {
			return false
		}
	}
	return true
}

// awaitSettled waits until the fleet is settled.
func (f *shardFleet) awaitSettled(expected time.Duration, what string) time.Time {
	f.t.Helper()
	return waitFor(f.t, expected, what, f.settled)
}

// balance describes who runs how many shards now.
func (f *shardFleet) balance() string {
	_, per := f.running()
	var s []string
	for _, p := range f.liveProcs() {
		s = append(s, fmt.Sprintf("%s:%d", p.label, per[p.id]))
	}
	return strings.Join(s, " ")
}

// startsIn counts the shard terms that began in [from, until).
func (f *shardFleet) startsIn(from, until time.Time) int {
	n := 0
	for _, ivs := range f.intervals() {
		for _, iv := range ivs {
			if !iv.Start.Before(from) && iv.Start.Before(until) {
				n++
			}
		}
	}
	return n
}

// checkShardsCall checks, on a settled fleet, that each process's last
// Elector.Shards (event "shards") names the shards its work runs.
func (f *shardFleet) checkShardsCall() {
	f.t.Helper()
	for _, p := range f.liveProcs() {
		recs := p.cand.records()
		var said []string
		for _, r := range recs {
			if r.Kind == history.KindEvent && r.Event == "shards" {
				said = r.Shards
			}
		}
		var runs []string
		for sh, ivs := range history.ShardIntervals(p.label, recs, time.Time{}) {
			if n := len(ivs); n > 0 && ivs[n-1].Open {
				runs = append(runs, sh)
			}
		}
		sortShards(said)
		sortShards(runs)
		if !slices.Equal(said, runs) {
			f.t.Errorf("%s: Elector.Shards said %v, its work runs %v", p.label, said, runs)
		}
	}
}

func sortShards(s []string) {
	slices.SortFunc(s, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
}

// leader returns the running process that leads the election now, nil if
// none (or more than one) does.
func (f *shardFleet) leader() *shardProc {
	var l *shardProc
	for _, p := range f.liveProcs() {
		if p.cand.leading() {
			if l != nil {
				return nil
			}
			l = p
		}
	}
	return l
}

// victim picks a process to stop: the election's leader if leader, else a
// follower running the most shards.
func (f *shardFleet) victim(leader bool) *shardProc {
	f.t.Helper()
	var l *shardProc
	waitFor(f.t, leaseDuration, "one leader of the election", func() bool { l = f.leader(); return l != nil })
	if leader {
		return l
	}
	_, per := f.running()
	var best *shardProc
	for _, p := range f.liveProcs() {
		if p != l && (best == nil || per[p.id] > per[best.id]) {
			best = p
		}
	}
	return best
}

// openAt returns the shard terms of p open at t (begun before, not ended).
func (f *shardFleet) openAt(p *shardProc, t time.Time) []history.Interval {
	var out []history.Interval
	for _, ivs := range history.ShardIntervals(p.label, p.cand.records(), p.cand.dead()) {
		for _, iv := range ivs {
			if iv.Start.Before(t) && (iv.Open || !iv.End.Before(t)) {
				out = append(out, iv)
			}
		}
	}
	return out
}

// next returns the first term of iv's shard on another process that began
// after iv did.
func next(all map[string][]history.Interval, iv history.Interval) (history.Interval, bool) {
	for _, n := range all[iv.Shard] {
		if n.Start.After(iv.Start) && n.Candidate != iv.Candidate {
			return n, true
		}
	}
	return history.Interval{}, false
}

// awaitElsewhere waits until every shard of ivs runs on another process
// than the one of ivs (a term begun after it), and returns those terms.
func (f *shardFleet) awaitElsewhere(expected time.Duration, what string, ivs []history.Interval) []history.Interval {
	f.t.Helper()
	var got []history.Interval
	waitFor(f.t, expected, what, func() bool {
		all := f.intervals()
		got = got[:0]
		for _, iv := range ivs {
			n, ok := next(all, iv)
			if !ok {
				return false
			}
			got = append(got, n)
		}
		return true
	})
	return got
}

// movedOnly checks that the shard terms begun in [from, until) are of the
// shards of ivs only (what moved was the stopped holder's).
func (f *shardFleet) movedOnly(what string, from, until time.Time, ivs []history.Interval) {
	f.t.Helper()
	mine := map[string]bool{}
	for _, iv := range ivs {
		mine[iv.Shard] = true
	}
	for sh, terms := range f.intervals() {
		for _, iv := range terms {
			if !iv.Start.Before(from) && iv.Start.Before(until) && !mine[sh] {
				f.t.Errorf("%s: shard %s moved too, though its holder did not stop: %v", what, sh, iv)
			}
		}
	}
}

// gracefulStop stops a follower that holds shards with SIGTERM, and
// returns, for each of its shards, the time from its stop on it to its
// start elsewhere.
func (f *shardFleet) gracefulStop() ([]time.Duration, []movePhases) {
	f.t.Helper()
	v := f.victim(false)
	f.lastStopped = v.id
	sent, _ := v.cand.terminate()
	f.probe.kick()
	mine := f.openAt(v, sent)
	if len(mine) == 0 {
		f.t.Fatalf("graceful stop: %s ran no shard", v.label)
	}
	moved := f.awaitElsewhere(retryPeriod+slack, "the shards of "+v.label+" to run elsewhere after SIGTERM", mine)
	var gaps []time.Duration
	var phases []movePhases
	var desc []string
	for i, old := range mine {
		if old.Open {
			f.t.Errorf("graceful stop: %s exited with shard %s's work running: %v", v.label, old.Shard, old)
			continue
		}
		gap := moved[i].Start.Sub(old.End)
		gaps = append(gaps, gap)
		ph := f.phases(sent, old, moved[i])
		phases = append(phases, ph)
		desc = append(desc, fmt.Sprintf("%s→%s %s (%s)", old.Shard, moved[i].Candidate, ms(gap), ph))
		// A release, not an expiry: the new holder did not wait for the
		// Lease to expire (at the earliest LeaseDuration − RetryPeriod
		// after the stop).
		if gap > retryPeriod+slack {
			f.t.Errorf("graceful stop: shard %s ran again %s after it stopped on %s (want a release, within %v): %v then %v",
				old.Shard, ms(gap), v.label, retryPeriod+slack, old, moved[i])
		}
	}
	done := f.awaitSettled(retryPeriod+slack, "the fleet to settle without "+v.label)
	f.movedOnly("graceful stop of "+v.label, sent, done.Add(retryPeriod), mine)
	f.t.Logf("graceful stop of %s (%d shards): %s; settled: %s", v.label, len(mine), strings.Join(desc, ", "), f.balance())
	return gaps, phases
}

// movePhases breaks a graceful move down as the test's watch saw it:
// from the end of the work on the old holder to the release of the shard
// Lease, to the new holder's acquiring write, to the start of its work;
// and whether the table named the new holder taker when the old one was
// stopped (a move without a taker waits for a table write).
type movePhases struct {
	release, acquire, start time.Duration
	taker, seen             bool
}

func (p movePhases) String() string {
	if !p.seen {
		return "release or acquisition not seen"
	}
	s := "release " + ms(p.release) + ", acquired " + ms(p.acquire) + ", runs " + ms(p.start)
	if !p.taker {
		s += ", not the taker named"
	}
	return s
}

// phases breaks down the move of old, whose holder was stopped at sent, to
// moved.
func (f *shardFleet) phases(sent time.Time, old, moved history.Interval) movePhases {
	taker, _, _ := strings.Cut(moved.Candidate, "#")
	var p movePhases
	p.taker = f.w.takerAt(old.Shard, sent) == taker
	rel, ok1 := f.w.firstWrite(old.Shard, "", sent)
	acq, ok2 := f.w.firstWrite(old.Shard, taker, rel)
	if !ok1 || !ok2 {
		return p
	}
	p.seen = true
	p.release, p.acquire, p.start = rel.Sub(old.End), acq.Sub(rel), moved.Start.Sub(acq)
	return p
}

// killHolder SIGKILLs a follower that holds shards (the election's leader
// if leader), and returns, for each of its shards, the time from the kill
// to its start elsewhere.
func (f *shardFleet) killHolder(leader bool) []time.Duration {
	f.t.Helper()
	v := f.victim(leader)
	f.lastStopped = v.id
	killed := v.cand.kill()
	mine := f.openAt(v, killed)
	if len(mine) == 0 {
		f.t.Fatalf("SIGKILL: %s ran no shard", v.label)
	}
	// Its last renewal was before the kill (failoverBound).
	designed, bound := failoverBound(leader)
	what := "SIGKILL of " + v.label
	if leader {
		what = "SIGKILL of the leader " + v.label
	}
	moved := f.awaitElsewhere(designed, "the shards of "+v.label+" to run elsewhere after SIGKILL", mine)
	var took []time.Duration
	var desc []string
	over := false
	for i, old := range mine {
		d := moved[i].Start.Sub(killed)
		took = append(took, d)
		desc = append(desc, f.breakdown(old.Shard, v.id, killed, moved[i]))
		over = over || d > designed
		if d > bound {
			f.t.Errorf("%s: shard %s ran again %s after the kill, over %v: %v", what, old.Shard, ms(d), bound, moved[i])
		}
		// Not before its Lease could have expired: its last renewal
		// was at most a retry period before the kill.
		if earliest := killed.Add(minExpiryTakeover()); !moved[i].OnlyAfter(earliest) {
			f.t.Errorf("%s: shard %s ran on %s %s after the kill, before its Lease could expire (%v)",
				what, old.Shard, moved[i].Candidate, ms(moved[i].SurelyFrom.Sub(killed)), minExpiryTakeover())
		}
	}
	f.awaitSettled(retryPeriod+slack, "the fleet to settle without "+v.label)
	f.t.Logf("%s (%d shards), after the kill: %s; %d table writes in %s; settled: %s", what, len(mine), strings.Join(desc, "; "),
		f.w.tableWrites(killed, time.Now()), ms(time.Since(killed)), f.balance())
	if over {
		f.t.Logf("%s: over the designed bound %v (failoverBound); the table's writes after the kill, holder/taker of its shards:\n%s",
			what, designed, f.w.tableLog(killed, time.Now(), shardsOf(mine)))
	}
	return took
}

// rejoin starts identity id again and waits until the fleet is balanced
// with it; it returns the time each shard moved to it took, from its stop
// on its previous holder to its start on id.
func (f *shardFleet) rejoin(id, what string) []time.Duration {
	f.t.Helper()
	p := f.start(id)
	// Registered at once; given shards after JoinDelay (LeaseDuration),
	// each moved by the table: its holder stops, releases, and p takes it.
	f.awaitSettled(leaseDuration+4*retryPeriod+slack, what+" "+p.label+" to be given shards")
	var gaps []time.Duration
	all := f.intervals()
	for _, ivs := range history.ShardIntervals(p.label, p.cand.records(), time.Time{}) {
		iv := ivs[0]
		var prev *history.Interval
		for _, o := range all[iv.Shard] {
			if o.Candidate != p.label && !o.Start.After(iv.Start) {
				prev = &o
			}
		}
		if prev != nil && !prev.Open {
			gaps = append(gaps, iv.Start.Sub(prev.End))
		}
	}
	f.t.Logf("%s %s holds %d shards %s after its start (rebalance moves %v); settled: %s",
		what, p.label, len(gaps), ms(time.Since(p.started)), msList(gaps), f.balance())
	return gaps
}

// partition black-holes the proxy of a follower that holds shards for
// longer than a lease duration, then heals it. It returns, for each of its
// shards, the time from the partition to the end of its work there, and
// to its start elsewhere.
func (f *shardFleet) partition() (stop, run []time.Duration) {
	f.t.Helper()
	v := f.victim(false)
	f.lastStopped = v.id
	time.Sleep(retryPeriod / 2)
	if err := v.cand.proxy.Blackhole(); err != nil {
		f.t.Fatal(err)
	}
	cut := time.Now()
	f.cutOff = v.id
	mine := f.openAt(v, cut)
	if len(mine) == 0 {
		f.t.Fatalf("partition: %s ran no shard", v.label)
	}
	designed, bound := failoverBound(false)
	moved := f.awaitElsewhere(designed, "the shards of "+v.label+" to run elsewhere after the partition", mine)
	all := f.intervals()
	var desc []string
	over := false
	for i, old := range mine {
		for _, iv := range all[old.Shard] {
			if iv.Candidate == old.Candidate && iv.Start.Equal(old.Start) {
				old = iv
			}
		}
		d := moved[i].Start.Sub(cut)
		run = append(run, d)
		// Every renewal that succeeded was sent before the partition:
		// the work's context ends within RenewDeadline of it. The
		// record of its end is written once the work's goroutine saw
		// it, which ten processes on two cores may schedule late:
		// allowed workEndGrace.
		if old.Open {
			f.t.Errorf("partition: shard %s's work still runs on %s %s after the partition, over the renew deadline %v: %v",
				old.Shard, v.label, ms(time.Since(cut)), renewDeadline, old)
			continue
		}
		stop = append(stop, old.End.Sub(cut))
		if !old.DoneBy(cut.Add(renewDeadline + workEndGrace())) {
			f.t.Errorf("partition: shard %s's work on %s ended %s after the partition, over the renew deadline %v: %v",
				old.Shard, v.label, ms(old.End.Sub(cut)), renewDeadline, old)
		}
		over = over || d > designed
		if d > bound {
			f.t.Errorf("partition: shard %s ran again %s after the partition, over %v: %v", old.Shard, ms(d), bound, moved[i])
		}
		desc = append(desc, fmt.Sprintf("%s, work stopped on %s %s", f.breakdown(old.Shard, v.id, cut, moved[i]), v.label, ms(old.End.Sub(cut))))
	}
	f.awaitSettled(retryPeriod+slack, "the fleet to settle around the cut-off "+v.label)
	if over {
		f.t.Logf("partition of %s: over the designed bound %v (failoverBound); the table's writes after the cut, holder/taker of its shards:\n%s",
			v.label, designed, f.w.tableLog(cut, time.Now(), shardsOf(mine)))
	}
	if until := cut.Add(leaseDuration + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	if err := v.cand.proxy.Heal(); err != nil {
		f.t.Fatal(err)
	}
	healed := time.Now()
	f.cutOff = ""
	// It renews its registration once it sees the table leave it out,
	// then waits JoinDelay (LeaseDuration) as a newcomer.
	f.awaitSettled(leaseDuration+6*retryPeriod+slack, "the healed "+v.label+" to be given shards again")
	f.t.Logf("partition of %s (%d shards), after the cut: %s; healed, it holds shards again %s later; settled: %s",
		v.label, len(mine), strings.Join(desc, "; "), ms(time.Since(healed)), f.balance())
	return stop, run
}

// rollingResult is one rolling restart of every process.
type rollingResult struct {
	took      time.Duration
	moves     map[string]int // shard → terms begun during the restart
	graceful  []time.Duration
	phases    []movePhases
	rebalance []time.Duration
}

// rollingRestart restarts every identity in turn, the election's leader
// last, each once the fleet is balanced with the one before.
func (f *shardFleet) rollingRestart() rollingResult {
	f.t.Helper()
	start := time.Now()
	var order []string
	l := f.victim(true)
	for _, p := range f.liveProcs() {
		if p != l {
			order = append(order, p.id)
		}
	}
	order = append(order, l.id)
	var res rollingResult
	var per []string
	for _, id := range order {
		old := f.live[id]
		sent, _ := old.cand.terminate()
		f.probe.kick()
		mine := f.openAt(old, sent)
		moved := f.awaitElsewhere(retryPeriod+slack, "the shards of "+old.label+" to run elsewhere after SIGTERM", mine)
		for i, iv := range mine {
			if iv.Open {
				f.t.Errorf("rolling restart: %s exited with shard %s's work running: %v", old.label, iv.Shard, iv)
				continue
			}
			res.graceful = append(res.graceful, moved[i].Start.Sub(iv.End))
			res.phases = append(res.phases, f.phases(sent, iv, moved[i]))
		}
		gaps := f.rejoin(id, "rolling restart:")
		res.rebalance = append(res.rebalance, gaps...)
		per = append(per, fmt.Sprintf("%s %d away, %d back", id, len(mine), len(gaps)))
	}
	res.took = time.Since(start)
	res.moves = map[string]int{}
	for sh, ivs := range f.intervals() {
		res.moves[sh] = 0
		for _, iv := range ivs {
			if !iv.Start.Before(start) {
				res.moves[sh]++
			}
		}
	}
	total := 0
	for _, n := range res.moves {
		total += n
	}
	f.t.Logf("rolling restart of %d processes in %s: %d moves (%s); per shard %s",
		len(order), ms(res.took), total, strings.Join(per, ", "), movesSummary(res.moves))
	// Each restart moves the stopped holder's shards away and as many
	// back (≤ ⌈S/N⌉ each way); the leader's restart may move ⌈S/N⌉ twice
	// more (the new leader plans before the old registered again).
	ceil := (shardCount + shardProcs - 1) / shardProcs
	if bound := 2*len(order)*ceil + 2*ceil; total > bound {
		f.t.Errorf("rolling restart: %d moves, over the bound %d (each restart moves its shards away and back)", total, bound)
	}
	return res
}

// checkHistories checks every process's shard terms: never two processes
// running one shard at one instant, each shard's fences and term numbers
// growing; and every term recorded a fence and ended before its process
// did (the processes were all stopped gracefully or killed).
func (f *shardFleet) checkHistories(m *shardMeasures) {
	f.t.Helper()
	all := f.intervals()
	var shards []string
	for sh := range all {
		shards = append(shards, sh)
	}
	sortShards(shards)
	if len(shards) != shardCount {
		f.t.Errorf("%d shards ran, want %d: %v", len(shards), shardCount, shards)
	}
	for _, sh := range shards {
		ivs := all[sh]
		m.terms += len(ivs)
		for _, o := range history.Overlaps(ivs) {
			m.overlaps++
			f.t.Errorf("SAFETY VIOLATION: shard %s: %v", sh, o)
		}
		for _, v := range history.FenceRegressions(ivs) {
			m.fenceRegressions++
			f.t.Errorf("FENCING: shard %s: %s", sh, v)
		}
		// Term numbers by identity: a process started again with the
		// same identity may take its Lease back without a transition.
		byID := slices.Clone(ivs)
		for i := range byID {
			byID[i].Candidate, _, _ = strings.Cut(byID[i].Candidate, "#")
		}
		for _, v := range history.TermRegressions(byID) {
			f.t.Errorf("TERM NUMBERS: shard %s: %s", sh, v)
		}
		for _, iv := range ivs {
			if iv.Fence == "" {
				f.t.Errorf("shard %s: a term without a fence: %v", sh, iv)
			}
		}
	}
	// The election itself: one leader at a time across the processes.
	var lead []history.Interval
	for _, p := range f.procs {
		lead = append(lead, history.Intervals(p.label, p.cand.records(), history.ViewRelect, p.cand.dead())...)
	}
	for _, o := range history.Overlaps(lead) {
		f.t.Errorf("SAFETY VIOLATION: the election: %v", o)
	}
	var lines []string
	for _, sh := range shards {
		var s []string
		for _, iv := range all[sh] {
			s = append(s, fmt.Sprintf("%s(t%d,f%s)", iv.Candidate, iv.Term, iv.Fence))
		}
		lines = append(lines, fmt.Sprintf("  shard %s: %s", sh, strings.Join(s, " ")))
	}
	f.t.Logf("shard terms (%d over %d processes, %d elections terms):\n%s", m.terms, len(f.procs), len(lead), strings.Join(lines, "\n"))
}

// shardMeasures are TestShards' figures.
type shardMeasures struct {
	settle           time.Duration
	graceful         []time.Duration // SIGTERM of a holder: stop on it → start elsewhere
	phases           []movePhases    // the graceful moves broken down
	rebalance        []time.Duration // moved to a newcomer by the table: stop on the old → start on it
	kill             []time.Duration // SIGKILL of a follower holding shards: kill → start elsewhere
	killLeader       []time.Duration // SIGKILL of the election's leader
	cutStop, cutRun  []time.Duration // partition → work ended on the cut-off holder; → start elsewhere
	rolling          []rollingResult
	relays           []relaySample // the relay probe's, beside the moves
	terms            int
	overlaps         int
	fenceRegressions int
}

// table formats the figures.
func (m *shardMeasures) table() string {
	var b strings.Builder
	row := func(what string, ds []time.Duration, bound string) {
		if len(ds) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %-52s %4d  %7s  %7s  %7s  %7s  %s\n", what, len(ds),
			ms(percentile(ds, 0.5)), ms(percentile(ds, 0.99)), ms(slices.Min(ds)), ms(slices.Max(ds)), bound)
	}
	fmt.Fprintf(&b, "  %-52s %4s  %7s  %7s  %7s  %7s  %s\n", "", "n", "p50", "p99", "min", "max", "bound asserted")
	row("graceful move (SIGTERM): stop → start elsewhere", m.graceful, "≤ "+(retryPeriod+slack).String())
	var rel, acq, run, byTaker, byOther []time.Duration
	for i, p := range m.phases {
		if !p.seen {
			continue
		}
		rel, acq, run = append(rel, p.release), append(acq, p.acquire), append(run, p.start)
		if p.taker {
			byTaker = append(byTaker, m.graceful[i])
		} else {
			byOther = append(byOther, m.graceful[i])
		}
	}
	row("  its stop → release seen by the test's watch", rel, "—")
	row("  release seen → acquiring write seen", acq, "—")
	row("  acquiring write seen → start", run, "—")
	row("  moves to the taker named at the stop", byTaker, "—")
	row("  moves to another candidate", byOther, "—")
	whole, seen, write := relayFloor(m.relays, true)
	row("floor at the SIGTERM: two writes, no relect", whole, "—")
	row("  the write sent → seen by the other client's watch", seen, "—")
	row("  seen → the other client's write answered", write, "—")
	whole, seen, write = relayFloor(m.relays, false)
	row(fmt.Sprintf("floor, every %v: two writes, no relect", relayEvery), whole, "—")
	row("  the write sent → seen by the other client's watch", seen, "—")
	row("  seen → the other client's write answered", write, "—")
	row("rebalance to a newcomer: stop → start on it", m.rebalance, "—")
	bounds := func(leader bool) string {
		d, a := failoverBound(leader)
		return fmt.Sprintf("≤ %v (designed: %v)", a, d)
	}
	row("SIGKILL of a follower: kill → start elsewhere", m.kill, bounds(false))
	row("SIGKILL of the leader: kill → start elsewhere", m.killLeader, bounds(true))
	row("partition: cut → work ended on the cut-off holder", m.cutStop, "≤ "+(renewDeadline+workEndGrace()).String())
	row("partition: cut → start elsewhere", m.cutRun, bounds(false))
	fmt.Fprintf(&b, "  first settle (first start → every shard on one process, balanced): %s\n", ms(m.settle))
	for i, r := range m.rolling {
		total := 0
		for _, n := range r.moves {
			total += n
		}
		fmt.Fprintf(&b, "  rolling restart %d of %d processes: %s, %d moves, per shard %s\n",
			i+1, shardProcs, ms(r.took), total, movesSummary(r.moves))
	}
	fmt.Fprintf(&b, "  shard terms %d; overlaps %d; fence regressions %d\n", m.terms, m.overlaps, m.fenceRegressions)
	return b.String()
}

// movesSummary describes moves per shard: min, median, max, mean, and
// how many shards moved each number of times.
func movesSummary(moves map[string]int) string {
	var ns []int
	hist := map[int]int{}
	sum := 0
	for _, n := range moves {
		ns = append(ns, n)
		hist[n]++
		sum += n
	}
	if len(ns) == 0 {
		return "—"
	}
	med, _ := bench.Quantile(ns, 0.5)
	var counts []string
	var keys []int
	for k := range hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		counts = append(counts, fmt.Sprintf("%d×%d", hist[k], k))
	}
	return fmt.Sprintf("min %d, median %d, max %d, mean %.2f (shards×moves: %s)",
		slices.Min(ns), med, slices.Max(ns), float64(sum)/float64(len(ns)), strings.Join(counts, " "))
}

// msList formats durations in milliseconds.
func msList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, ms(d))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// shardWatch follows, from the test process, the shard Leases and the
// shard table of an election, and keeps every write it saw, stamped when
// its event arrived: for the breakdown of a failover (the holder's last
// renewal, the taker named, the Lease taken).
type shardWatch struct {
	mu     sync.Mutex
	leases []shardLeaseObs
	tables []tableObs
	stop   context.CancelFunc
	done   sync.WaitGroup
}

type shardLeaseObs struct {
	at     time.Time
	shard  string
	holder string
	rv     string
}

type tableObs struct {
	at time.Time
	t  wire.Table
}

func (c *cluster) watchShards(t *testing.T, lease string) *shardWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &shardWatch{stop: cancel}
	follow := func(opts metav1.ListOptions, add func(*coordinationv1.Lease)) {
		defer w.done.Done()
		for ctx.Err() == nil {
			cfg := c.adminConfig()
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return
			}
			leases := cs.CoordinationV1().Leases(namespace)
			if list, err := leases.List(ctx, opts); err == nil {
				for i := range list.Items {
					add(&list.Items[i])
				}
				o := opts
				o.ResourceVersion = list.ResourceVersion
				if wi, err := leases.Watch(ctx, o); err == nil {
					for ev := range wi.ResultChan() {
						l, ok := ev.Object.(*coordinationv1.Lease)
						if !ok {
							break
						}
						if ev.Type == watch.Added || ev.Type == watch.Modified {
							add(l)
						}
					}
					wi.Stop()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	w.done.Add(2)
	go follow(metav1.ListOptions{LabelSelector: wire.ShardSelector(lease)}, func(l *coordinationv1.Lease) {
		o := shardLeaseObs{at: time.Now(), shard: l.Annotations[wire.AnnotationShard], holder: ptrVal(l.Spec.HolderIdentity), rv: l.ResourceVersion}
		w.mu.Lock()
		w.leases = append(w.leases, o)
		w.mu.Unlock()
	})
	go follow(metav1.ListOptions{FieldSelector: "metadata.name=" + wire.ShardTableName(lease)}, func(l *coordinationv1.Lease) {
		if tb := wire.TableOf(l); tb != nil {
			w.mu.Lock()
			w.tables = append(w.tables, tableObs{at: time.Now(), t: *tb})
			w.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		w.stop()
		w.done.Wait()
		w.save(t, filepath.Join(testDir(t), "shard-watch.jsonl"))
	})
	return w
}

// save writes every table and shard Lease write seen to path, one JSON
// object a line, for a failed run's logs (envKeep).
func (w *shardWatch) save(t *testing.T, path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, o := range w.tables {
		_ = enc.Encode(map[string]any{"t": o.at.UnixNano(), "table": o.t})
	}
	for _, o := range w.leases {
		_ = enc.Encode(map[string]any{"t": o.at.UnixNano(), "shard": o.shard, "holder": o.holder, "rv": o.rv})
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Error(err)
	}
}

// lastWrite is the last write of shard's Lease naming holder seen before
// until.
func (w *shardWatch) lastWrite(shard, holder string, until time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at time.Time
	for _, o := range w.leases {
		if o.shard == shard && o.holder == holder && o.at.Before(until) {
			at = o.at
		}
	}
	return at, !at.IsZero()
}

// firstWrite is the first write of shard's Lease naming holder ("": a
// release) seen after from.
func (w *shardWatch) firstWrite(shard, holder string, from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.leases {
		if o.shard == shard && o.holder == holder && o.at.After(from) {
			return o.at, true
		}
	}
	return time.Time{}, false
}

// takerAt is shard's taker in the last table write seen before at.
func (w *shardWatch) takerAt(shard string, at time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	taker := ""
	for _, o := range w.tables {
		if o.at.Before(at) {
			taker = o.t.Takers[shard]
		}
	}
	return taker
}

// takerNamed is the first table write seen after from that names taker as
// shard's taker.
func (w *shardWatch) takerNamed(shard, taker string, from time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.tables {
		if o.at.After(from) && o.t.Takers[shard] == taker {
			return o.at, true
		}
	}
	return time.Time{}, false
}

// tableWrites counts the table writes seen in [from, until).
func (w *shardWatch) tableWrites(from, until time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, o := range w.tables {
		if !o.at.Before(from) && o.at.Before(until) {
			n++
		}
	}
	return n
}

// shardsOf returns the shards of ivs.
func shardsOf(ivs []history.Interval) []string {
	var out []string
	for _, iv := range ivs {
		out = append(out, iv.Shard)
	}
	return out
}

// tableLog describes the table writes seen in [from, until) for shards.
func (w *shardWatch) tableLog(from, until time.Time, shards []string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lines []string
	for _, o := range w.tables {
		if o.at.Before(from) || !o.at.Before(until) {
			continue
		}
		var s []string
		for _, sh := range shards {
			s = append(s, fmt.Sprintf("%s:%s/%s", sh, o.t.Assigned[sh], o.t.Takers[sh]))
		}
		lines = append(lines, fmt.Sprintf("    %s holder/taker %s out %v", ms(o.at.Sub(from)), strings.Join(s, " "), o.t.Out))
	}
	return strings.Join(lines, "\n")
}
