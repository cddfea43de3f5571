package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/shardrange"
)

// partitionName is the partition scenario's row in the report.
const partitionName = "partition of a follower (its proxy black-holed ≥ LD + 1 s), then healed"

// partitionRun is what the partition of one relect process measured.
type partitionRun struct {
	id     string
	lt     leaseTiming
	ranges int // the ranges it held when it was cut off
	// ended: the cut → each of its range terms' end (its own "off",
	// written once the range's informer stopped).
	ended []time.Duration
	// taken: its last renewal of each range's Lease (the Lease's
	// renewTime, or the cut if it was not seen) → the next holder's term
	// start; bound is what is asserted on them.
	taken []time.Duration
	bound time.Duration
	// healed: the heal → the fleet settled again, with it holding ranges.
	healed time.Duration
}

// partitionBounds are the partition's asserted bounds for durations lt:
// a range term's context ends within RenewDeadline of the last renewal
// sent, so its end is by the cut + RD, plus a retry period for the
// informer to stop and the "off" to be written (ended); the range's
// Lease expires LeaseDuration after the last renewal its taker saw,
// which its watch shows up to a retry period late, and the taker takes
// it then: LD + 2 × RP, the design's bound, plus the suite's slack for
// ten processes on two cores (taken).
func partitionBounds(lt leaseTiming) (ended, taken time.Duration) {
	return lt.rd + lt.rp, lt.ld + 2*lt.rp + slack
}

// partition cuts the follower holding the most ranges off from the
// apiserver (its proxy black-holed: requests are accepted and never
// answered; the process runs on and writes its history locally) until
// the others hold every range and LeaseDuration + slack have passed,
// then heals it and waits until the fleet is settled with it. Asserted:
// each of its range terms ended within partitionBounds' ended of the
// cut, before the next holder's began, and that began within its taken
// of the cut-off holder's last renewal. The fleet must be proxied.
func (f *rangeFleet) partition() (rangeWindow, *partitionRun) {
	f.t.Helper()
	v := f.victim(false)
	if v.proxy == nil {
		f.t.Fatalf("partition: %s has no proxy (the fleet is not proxied)", v.id)
	}
	mine := f.openOf(v)
	from := time.Now()
	if err := v.proxy.Blackhole(); err != nil {
		f.t.Fatal(err)
	}
	cut := time.Now()
	v.cut = cut
	// A renewal sent before the cut may land a moment after it; none
	// sent after lands. Half a renew deadline later, before any Lease of
	// its can have expired, each names its last renewal.
	time.Sleep(f.lt.rd / 2)
	renewed := f.renewals(v.id, mine)
	f.await(f.settleTime(), "the ranges of the cut-off "+v.id+" held elsewhere", func() bool { return f.settledWithout(v.id) })
	if until := cut.Add(f.lt.ld + slack); time.Now().Before(until) {
		time.Sleep(time.Until(until))
	}
	run := f.checkPartition(v, mine, cut, renewed)
	if err := v.proxy.Heal(); err != nil {
		f.t.Fatal(err)
	}
	healed := time.Now()
	v.healed = healed
	// It renews its registration once it reads the table leave it out,
	// then waits JoinDelay as a newcomer; settled, it holds ⌊S/n⌋ ranges
	// or more.
	f.await(f.settleTime(), "the fleet settled with the healed "+v.id, f.settled)
	run.healed = time.Since(healed)
	if v.exited() {
		f.t.Errorf("partition: %s exited (%v) instead of rejoining the fleet", v.id, v.err())
	}
	f.t.Logf("partition of %s (%d ranges): its terms ended %s after the cut (bound %v); taken %s after its last renewal (bound %v); healed, the fleet settled with it %s later",
		v.id, run.ranges, msList(run.ended), f.lt.rd+f.lt.rp, msList(run.taken), run.bound, ms(run.healed))
	return rangeWindow{partitionName, from, time.Now()}, run
}

// openOf returns the ranges p holds now; it fails the test if none.
func (f *rangeFleet) openOf(p *rangeProc) []holding {
	f.t.Helper()
	var out []holding
	for _, h := range holdingsOf(f.t, p.id, p.records(), time.Time{}) {
		if h.iv.Open {
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		f.t.Fatalf("%s holds no range", p.id)
	}
	return out
}

// renewals reads the Lease of each range in hs: its renewTime, by shard,
// where id holds it.
func (f *rangeFleet) renewals(id string, hs []holding) map[string]time.Time {
	out := map[string]time.Time{}
	split := wire.RangeSplit(string(shardrange.UID), f.size.shards)
	for _, h := range hs {
		l := f.c.getLease(f.t, wire.ShardLeaseNameIn(f.lease, split, h.iv.Shard))
		if l != nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == id && l.Spec.RenewTime != nil {
			out[h.iv.Shard] = l.Spec.RenewTime.Time
		}
	}
	return out
}

// checkPartition checks, for each range v held when it was cut off (mine)
// at cut, the end of its term there and the start of the next holder's;
// renewed are v's last renewals of the ranges' Leases.
func (f *rangeFleet) checkPartition(v *rangeProc, mine []holding, cut time.Time, renewed map[string]time.Time) *partitionRun {
	f.t.Helper()
	endBound, takeBound := partitionBounds(f.lt)
	run := &partitionRun{id: v.id, lt: f.lt, ranges: len(mine), bound: takeBound}
	all := f.holdings()
	slices.SortFunc(all, func(a, b holding) int { return a.iv.Start.Compare(b.iv.Start) })
	for _, old := range mine {
		old = sameTerm(all, old)
		if old.iv.Open {
			f.t.Errorf("partition: range %s still held by %s %s after the cut: %v", old.iv.Shard, v.id, ms(time.Since(cut)), old.iv)
			continue
		}
		run.ended = append(run.ended, old.iv.End.Sub(cut))
		if old.iv.End.After(cut.Add(endBound)) {
			f.t.Errorf("partition: range %s's term on %s ended %s after the cut, over RD + RP = %v: %v",
				old.iv.Shard, v.id, ms(old.iv.End.Sub(cut)), endBound, old.iv)
		}
		next, ok := nextHolder(all, old)
		if !ok {
			f.t.Errorf("partition: range %s not held elsewhere after %s was cut off", old.iv.Shard, v.id)
			continue
		}
		if !next.iv.Start.After(old.iv.End) {
			f.t.Errorf("partition: range %s began on %s at %v, before its term on the cut-off %s ended: %v",
				old.iv.Shard, next.iv.Candidate, next.iv.Start, v.id, old.iv)
		}
		last, seen := renewed[old.iv.Shard]
		if !seen {
			f.t.Logf("partition: range %s's Lease did not name %s half a renew deadline after the cut; measured from the cut", old.iv.Shard, v.id)
			last = cut
		}
		d := next.iv.Start.Sub(last)
		run.taken = append(run.taken, d)
		if d > takeBound {
			f.t.Errorf("partition: range %s began on %s %s after %s's last renewal, over LD + 2 × RP + slack = %v",
				old.iv.Shard, next.iv.Candidate, ms(d), v.id, takeBound)
		}
	}
	return run
}

// sameTerm returns h as it is in all (read later: closed since, maybe).
func sameTerm(all []holding, h holding) holding {
	for _, o := range all {
		if o.iv.Candidate == h.iv.Candidate && o.iv.Shard == h.iv.Shard && o.iv.Term == h.iv.Term && o.iv.Start.Equal(h.iv.Start) {
			return o
		}
	}
	return h
}

// nextHolder returns the first holding of h's range by another process
// that began after h did; all are sorted by start.
func nextHolder(all []holding, h holding) (holding, bool) {
	for _, n := range all {
		if n.iv.Shard == h.iv.Shard && n.iv.Candidate != h.iv.Candidate && n.iv.Start.After(h.iv.Start) {
			return n, true
		}
	}
	return holding{}, false
}

// String is the report's line on the partition.
func (r *partitionRun) String() string {
	endBound, _ := partitionBounds(r.lt)
	return fmt.Sprintf("partition of %s (%s ranges held, cut off ≥ LD + 1 s): its terms ended %s after the cut (bound RD + RP = %s); "+
		"each range began on another process %s after its last renewal (bound LD + 2 × RP + 1 s = %s); healed, the fleet settled with it again %s later",
		r.id, strconv.Itoa(r.ranges), quantiles(r.ended), ms(endBound), quantiles(r.taken), ms(r.bound), ms(r.healed))
}
