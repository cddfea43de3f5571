package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/internal/bench"
	"github.com/relect/relect/internal/wire"
)

// envShardFailKills is how many SIGKILLs TestCommandRunShardFailingCrash
// makes (default 3).
const envShardFailKills = "RELECT_E2E_SHARDFAIL_KILLS"

// The shards of TestCommandRunShardFailingCrash: shard failShard's CMD
// exits 3 failAfter after each start (8 s of the 15 s lease,
// scaled), the others run until stopped.
const (
	failCount = 4
	failShard = "1"
)

func failAfter() time.Duration { return leaseDuration * 8 / 15 }

// TestCommandRunShardFailingCrash: issue 48, part 3, on the real control
// plane. Two `relect run --shards=4` replicas (default --restart=never),
// shard 1's CMD exiting 3 every 8/15 LD. SIGKILL of one replica, in turn
// the one that does not lead and the leader: each of its healthy shards
// is held by the other within the crash bound of the shard's last renewal
// the watch saw — LD + 2 × RP, and for the leader twice that
// (failoverBound) — asserted with a margin of LD/2 more, that a loaded
// machine cannot miss: the shards are held again about LD after their
// last renewal, at most 3.6 s here (17.5 s with RELECT_E2E_TIME_SCALE=5,
// the durations). On ef822ed, before the doubling rule (6b4ff61: a
// shard's release made its holder rest for LD, taker of nothing), the
// follower's shards were held again 7.0 to 7.6 s after (the issue: 29.1 s
// against 19 s at the default durations). The killed replica is started
// again, and the next kill waits until the follower holds healthy shards
// and the failing shard failed again.
func TestCommandRunShardFailingCrash(t *testing.T) {
	c := requireCluster(t)
	kills := 3
	if s := os.Getenv(envShardFailKills); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a whole number ≥ 1", envShardFailKills, s)
		}
		kills = n
	}
	f := &failFleet{t: t, c: c, lease: leaseName(t), procs: map[string]*relectProc{},
		gaps: map[string][]time.Duration{}, fromKill: map[string][]time.Duration{}}
	f.w = c.watchShards(t, f.lease)
	f.start("a")
	f.start("b")
	for round := range kills {
		// Before the first kill, three failures in a row: the shard's
		// holders are passed over for 4 LD and more, and it waits
		// unassigned in between.
		streak := 1
		if round == 0 {
			streak = 3
		}
		leader, follower := f.awaitKillable(streak)
		survivor, victim := leader, follower
		if round%2 == 1 {
			survivor, victim = follower, leader
		}
		f.kill(round+1, victim, survivor, victim == leader)
		if round < kills-1 {
			f.start(victim)
		} else {
			delete(f.procs, victim)
		}
	}
	for _, p := range f.procs {
		p.terminate()
	}
	t.Logf("TestCommandRunShardFailingCrash: %d kills (LD %v, RD %v, RP %v: LD + 2 × RP = %v; shard %s's CMD exits 3 every %v; its failures in a row at the kills %v):\n  %s",
		kills, leaseDuration, renewDeadline, retryPeriod, leaseDuration+2*retryPeriod, failShard, failAfter(), f.failures, f.figures())
}

// failFleet is TestCommandRunShardFailingCrash's two relect run replicas,
// and what its kills measured: by "the follower" and "the leader", each
// healthy shard's time from its last renewal (gaps) and from the kill
// (fromKill) to its new holder.
type failFleet struct {
	t        *testing.T
	c        *cluster
	lease    string
	w        *shardWatch
	procs    map[string]*relectProc
	gaps     map[string][]time.Duration
	fromKill map[string][]time.Duration
	failures []int // the failing shard's failures in a row at each kill
}

// start starts replica id: shard failShard's CMD exits 3 failAfter after
// it starts, the others' run until stopped.
func (f *failFleet) start(id string) {
	script := fmt.Sprintf(`if [ "$RELECT_SHARD" = %s ]; then sleep %.3f; exit 3; fi; exec sleep 3600`,
		failShard, failAfter().Seconds())
	args := append([]string{"--identity=" + id, "--shards=" + strconv.Itoa(failCount)}, durationFlags()...)
	f.procs[id] = f.c.startRelect(f.t, id, "run", append(args, namespace+"/"+f.lease, "--", "sh", "-c", script)...)
}

// healthy returns the shards other than failShard that holders gives id.
func healthy(holders map[string]string, id string) []string {
	var out []string
	for sh, h := range holders {
		if h == id && sh != failShard {
			out = append(out, sh)
		}
	}
	slices.Sort(out)
	return out
}

// awaitKillable waits until the follower holds healthy shards, the same
// for a retry period (no table write that moves one in flight), the
// table names the failing shard with streak failures in a row or more,
// and it failed again since the call; it returns the election's leader
// and the follower.
func (f *failFleet) awaitKillable(streak int) (leader, follower string) {
	since := time.Now()
	waitFor(f.t, 10*leaseDuration, "the follower to hold healthy shards, the failing shard to fail again", func() bool {
		l := f.c.getLease(f.t, f.lease)
		if l == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false
		}
		leader = *l.Spec.HolderIdentity
		follower = map[string]string{"a": "b", "b": "a"}[leader]
		now := time.Now()
		held := healthy(f.w.holdersAt(now), follower)
		tb := f.w.tableAt(now)
		return len(held) > 0 && slices.Equal(held, healthy(f.w.holdersAt(now.Add(-retryPeriod)), follower)) &&
			tb != nil && tb.Failing[failShard] >= streak && f.w.failedSince(failShard, since)
	})
	return leader, follower
}

// kill SIGKILLs victim and measures, for each healthy shard it held, the
// time from its last renewal the watch saw, and from the kill, to the
// first write of its Lease naming survivor; it asserts the crash bound.
func (f *failFleet) kill(n int, victim, survivor string, leader bool) {
	t := f.t
	f.failures = append(f.failures, f.w.tableAt(time.Now()).Failing[failShard])
	killed := f.procs[victim].kill()
	mine := healthy(f.w.holdersAt(killed), victim)
	if len(mine) == 0 {
		t.Fatalf("kill %d: %s held no healthy shard at the kill: one moved meanwhile", n, victim)
	}
	var took map[string]time.Time
	if !bench.Await(4*leaseDuration+livenessGrace, 10*time.Millisecond, func() bool {
		took = map[string]time.Time{}
		for _, sh := range mine {
			if at, ok := f.w.firstWrite(sh, survivor, killed); ok {
				took[sh] = at
			}
		}
		return len(took) == len(mine)
	}) {
		t.Fatalf("kill %d: SIGKILL of %s: its healthy shards %v not held by %s after %v (held: %v)",
			n, victim, mine, survivor, 4*leaseDuration+livenessGrace, took)
	}
	designed, role := leaseDuration+2*retryPeriod, "the follower"
	if leader {
		designed, role = 2*designed, "the leader"
	}
	var desc []string
	for _, sh := range mine {
		renewed, _ := f.w.lastWrite(sh, victim, killed)
		gap, after := took[sh].Sub(renewed), took[sh].Sub(killed)
		f.gaps[role], f.fromKill[role] = append(f.gaps[role], gap), append(f.fromKill[role], after)
		desc = append(desc, fmt.Sprintf("shard %s held by %s %s after its last renewal (%s after the kill)", sh, survivor, ms(gap), ms(after)))
		if gap > designed+leaseDuration/2 {
			t.Errorf("kill %d: shard %s of %s %s unheld %s after its last renewal, over the bound %v (asserted with LD/2 more: %v)",
				n, sh, role, victim, ms(gap), designed, designed+leaseDuration/2)
		}
	}
	t.Logf("kill %d: SIGKILL of %s %s (shard %s failing, %d in a row): %s; the table's writes after the kill:\n%s",
		n, role, victim, failShard, f.failures[len(f.failures)-1], strings.Join(desc, "; "), f.w.tableLog(killed, time.Now(), append(mine, failShard)))
}

// figures says what the kills measured, by the role of the replica killed.
func (f *failFleet) figures() string {
	var out []string
	for _, role := range []string{"the follower", "the leader"} {
		g, k := f.gaps[role], f.fromKill[role]
		if len(g) == 0 {
			continue
		}
		slices.Sort(g)
		slices.Sort(k)
		out = append(out, fmt.Sprintf("SIGKILL of %s: its healthy shards held again %s after their last renewal (median %s), %s after the kill (median %s)",
			role, msList(g), ms(g[len(g)/2]), msList(k), ms(k[len(k)/2])))
	}
	return strings.Join(out, "\n  ")
}

// holdersAt returns each shard's holder by the last write of its Lease
// seen at or before at ("" where released or none seen), left out where it
// was last written more than a lease duration before at (expired).
func (w *shardWatch) holdersAt(at time.Time) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[string]shardLeaseObs{}
	for _, o := range w.leases {
		if !o.at.After(at) {
			last[o.shard] = o
		}
	}
	out := map[string]string{}
	for sh, o := range last {
		if o.holder != "" && at.Sub(o.at) < leaseDuration {
			out[sh] = o.holder
		}
	}
	return out
}

// failedSince reports whether shard's Lease was seen released (its CMD
// exited) after from.
func (w *shardWatch) failedSince(shard string, from time.Time) bool {
	_, ok := w.firstWrite(shard, "", from)
	return ok
}

// tableAt returns the last shard table seen at or before at; nil if none.
func (w *shardWatch) tableAt(at time.Time) *wire.Table {
	w.mu.Lock()
	defer w.mu.Unlock()
	var tb *wire.Table
	for i, o := range w.tables {
		if !o.at.After(at) {
			tb = &w.tables[i].t
		}
	}
	return tb
}
