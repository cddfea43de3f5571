//go:build shardknown

// Known shortcomings of shards that the break-it pass found and that are
// not fixed yet: each test reproduces one and fails today. They are kept
// out of the default build so that the suite stays green; run them with
//
//	go test -tags shardknown -run TestBreak .
//
// Safety holds in every one of them (the shard book sees no two holders
// and no fence going back): what fails is liveness or cost.

package relect_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakForgedHolderIsLeftOut: a held shard Lease's holder edited by
// hand to another live candidate's identity, c02, which does not campaign
// for that shard. The holder ends its term at once (its watch shows
// another holder) and the shard runs again once the forged record expired
// (LD): safe. But when it expires the leader takes c02 — which never held
// that shard and renews its own — for a failed holder: it leaves c02 out
// (Table.Out), moves c02's two healthy shards away, and, while the forged
// record stands, writes the table again at each of c02's renewals (its
// registration version in Out changes: left out, renewed, back, left out
// again); c02 gets shards again only JoinDelay later. 5 shard starts where
// 1 was needed.
func TestBreakForgedHolderIsLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := settledShardFleet(t, api, b, 3, 6)
		sh := shardsOf(b, "c01")[0]
		var idx int
		fmt.Sscan(sh, &idx)
		c2had := shardsOf(b, "c02")
		starts := b.startCount()
		defer traceShards(t, api, 6)()
		require.NoError(t, api.SetHolder(ns, shardLease(idx), "c02"))
		synctest.Wait()
		assert.NotContains(t, shardsOf(b, "c01"), sh, "the edit ends the holder's term at once")
		took := until(t, 2*ld+3*rp, "the shard runs again", func() bool { return b.running() == 6 })
		t.Logf("forged holder: shard ran again after %v, on %s; held %v", took, api.Holder(ns, shardLease(idx)), b.held())
		assert.GreaterOrEqual(t, took, ld-rp, "the forged record is nobody's term: it is waited out")
		time.Sleep(2 * ld)
		synctest.Wait()
		t.Logf("forged holder: 2 LD later held %v, %d shard starts since the edit", b.held(), b.startCount()-starts)
		assert.True(t, isBalanced(b, 6, 3), "held %v", b.held())
		assert.Subset(t, shardsOf(b, "c02"), c2had, "the candidate the edit named lost its own shards")
		assert.Equal(t, starts+1, b.startCount(), "only the edited shard should move")
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestBreakHandEditedTableIsNeverReread: after the edits of
// TestBreakForgedRecordOfTheTaker, c02 holds the shard (the stored table,
// edited by hand, names it taker) while the leader's own idea of the
// table says c01 holds it. The leader reads the table only when a write
// of its own fails, and writes only when its plan differs from its idea:
// its plan waits for c02 to step down ("moved by the table"), c02 never
// does, nothing is written — the fleet stays unbalanced (2/1/3) for good:
// here 10 minutes. Safety holds.
func TestBreakHandEditedTableIsNeverReread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, b, cs, _ := forgeTakersRecord(t)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		t.Logf("10 minutes later: held %v; stored table %+v", b.held(), tableOf(api))
		assert.True(t, isBalanced(b, 6, 3), "held %v", b.held())
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestBreakLeader403FreezesAssignment: one 403 to the leader's list (RBAC
// applied late, an authorizer's hiccup) turns its candidate registry off
// for good (registryForbidden), and with it the shard assignment: after
// the heal, a holder that stops gracefully is never replaced while this
// leader leads — its shards run nowhere (here for 5 minutes).
func TestBreakLeader403FreezesAssignment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stopped, starts, _, move := leaderBlind(t, []string{relecttest.VerbList, relecttest.VerbWatch}, 403)
		assert.Zero(t, stopped)
		assert.Zero(t, starts)
		assert.GreaterOrEqual(t, move, time.Duration(0), "a graceful stop after a healed 403 was not acted on")
		assert.Less(t, move, rp)
	})
}

// TestBreakRegistrationDeletedEvictsAHealthyHolder: a candidate's
// registration deleted by hand while it holds shards and renews them. The
// leader drops it from its view at once and moves its shards away (the
// holder steps down on the table's word); the candidate does not notice
// that its registration is gone and registers again only at its next
// renewal, RegistrationRenewal (15 min ± 10 %) later; only then, and a
// JoinDelay more, does it hold shards again. Safety holds.
func TestBreakRegistrationDeletedEvictsAHealthyHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := settledShardFleet(t, api, b, 3, 6)
		starts := b.startCount()
		deleted := time.Now()
		require.NoError(t, api.Delete(ns, wire.RegistrationName(lease, "c01")))
		time.Sleep(2 * ld)
		synctest.Wait()
		t.Logf("registration deleted: 2 LD later held %v, %d shard starts", b.held(), b.startCount()-starts)
		assert.Equal(t, starts, b.startCount(), "a healthy holder lost its shards with its registration")
		until(t, 20*time.Minute, "balanced again", func() bool { return isBalanced(b, 6, 3) })
		t.Logf("registration deleted: balanced again %v after the deletion, %d shard starts", time.Since(deleted), b.startCount()-starts)
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestBreakCreateMissingStaleAnswer: a shard Lease deleted by hand is
// created again, released, by the leader (createMissing) and taken by its
// holder; if the leader's Create answer reaches it after its watch showed
// the holder's acquisition, the leader applies the older answer over the
// newer view: it sees the holder "release" the shard it holds, counts that
// as giving it up (gaveUp), and moves the shard away for a cooldown — two
// needless moves. The answer is delayed here (3 s, the apiserver committed
// the write and the watch delivered it first); without the delay the same
// interleaving happens by goroutine scheduling alone, about 1 run in 300 of
// a one-shard deletion.
func TestBreakCreateMissingStaleAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := settledShardFleet(t, api, b, 3, 6)
		require.True(t, cs[0].e.IsLeader())
		sh := shardsOf(b, "c01")[0]
		var idx int
		fmt.Sscan(sh, &idx)
		// c01 is a little slow, so that the leader's Create wins; the
		// leader's Create answers come late.
		cs[1].client.SetLatency(600 * time.Millisecond)
		stop := api.Observe(func(c relecttest.Call) {
			if c.Client == "c00" && c.Verb == relecttest.VerbCreate && c.Name == shardLease(idx) && c.Err == nil {
				time.Sleep(3 * time.Second)
			}
		})
		defer stop()
		starts := b.startCount()
		require.NoError(t, api.Delete(ns, shardLease(idx)))
		until(t, 2*ld+3*rp, "the shard runs again", func() bool { return b.running() == 6 })
		time.Sleep(3 * ld)
		synctest.Wait()
		t.Logf("stale create answer: shard %s on %s, %d starts since the deletion (1 needed), held %v", sh, api.Holder(ns, shardLease(idx)), b.startCount()-starts, b.held())
		assert.Equal(t, starts+1, b.startCount(), "the shard moved away from the holder that took it back")
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestBreakCreateMissingStallsAssignment: on a first deployment every
// shard Lease is missing; LD later the leader creates them one by one
// (createMissing), each Create waiting for a token of its bucket (1 call/s
// by default, burst 10) even when a member created that Lease meanwhile
// (409), and the assignment waits in that loop: with S = 60 the table is
// frozen for about 50 s. A graceful stop in that time is not acted on: the
// stopped holder's shards stay stopped until the loop ends. (The first
// table, written RP/2 into the term, also gives every shard to the one
// candidate registered then; the others wait JoinDelay.)
func TestBreakCreateMissingStallsAssignment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := shardFleet(t, api, b, 3, 60, nil)
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == 60 })
		t.Logf("first deployment: all 60 shards run, held %v, leader %v", b.held(), leaders(cs...))
		var victim *candidate
		for _, c := range cs {
			if c.e.IsLeader() {
				continue
			}
			if victim == nil || len(c.e.Shards()) > len(victim.e.Shards()) {
				victim = c
			}
		}
		victim.stop()
		took := until(t, 3*ld+time.Minute, "the stopped holder's shards run elsewhere", func() bool { return b.running() == 60 })
		t.Logf("first deployment of 60 shards: the graceful stop of %s right after took %v to move (a settled fleet: 10 ms)", victim.name, took)
		assert.Less(t, took, rp, "the assignment is stalled behind createMissing")
		assert.Zero(t, b.overlaps)
		for _, c := range cs {
			if c != victim {
				c.stop()
				c.checkEvents()
			}
		}
	})
}
