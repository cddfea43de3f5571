package shards

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Assign over a fake port and a fake Lease API (the table store): it
// writes a table that shares the shards between the registered
// candidates, creates the shard Leases it watched missing for
// LeaseDuration, released, and keeps the counters; it returns once its
// context is done, with ShardsFailing and ShardSetsDiffer back to 0.
func TestAssignWritesTheTableAndCreatesMissingLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0", "1", "2", "3")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		port := &fakeLeader{regs: twoCandidates}
		s := New[*fakeChild](cfg)
		ctx, cancel := context.WithCancel(t.Context())
		var done sync.WaitGroup
		done.Go(func() { s.Assign(ctx, 7, port) })

		time.Sleep(rp)
		synctest.Wait()
		l := api.Lease(testNS, wire.ShardTableName(testLease))
		require.NotNil(t, l, "the table is written")
		table := wire.TableOf(l)
		require.NotNil(t, table)
		assert.Equal(t, map[string]int{"a": 2, "b": 2}, count(table.Assigned))
		assert.Equal(t, 1, port.Count(VerbPostTable), "one write")
		for _, sh := range cfg.Shards {
			assert.Nil(t, api.Lease(testNS, wire.ShardLeaseName(testLease, sh)), "shard %s: not created before LeaseDuration", sh)
		}

		time.Sleep(ld + rp)
		synctest.Wait()
		for _, sh := range cfg.Shards {
			sl := api.Lease(testNS, wire.ShardLeaseName(testLease, sh))
			if assert.NotNil(t, sl, "shard %s: created once watched missing for LeaseDuration", sh) {
				assert.True(t, wire.Released(sl), "shard %s: created released, for its holder to take at once", sh)
			}
		}
		assert.Equal(t, 4, port.Count(VerbCreateShardLease))
		assert.Equal(t, 1, port.Count(VerbPostTable), "nothing changed: no second write")

		cancel()
		done.Wait()
		port.with(func() {
			assert.Zero(t, port.failing)
			assert.Zero(t, port.differ)
		})
	})
}

// A table edited by someone else, which the member saw (Seen), is read
// again before the next plan, and the assigner's table written over it.
func TestAssignRereadsATableTheMemberSawEdited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0", "1")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		port := &fakeLeader{regs: twoCandidates}
		s := New[*fakeChild](cfg)
		ctx, cancel := context.WithCancel(t.Context())
		var done sync.WaitGroup
		done.Go(func() { s.Assign(ctx, 7, port) })
		time.Sleep(rp)
		synctest.Wait()
		name := wire.ShardTableName(testLease)
		before := wire.TableOf(api.Lease(testNS, name))
		require.NotNil(t, before)
		gets := port.Count(VerbGetTable)

		require.NoError(t, api.Edit(testNS, name, func(l *leaseT) {
			wire.SetTable(l, testLease, "someone", 1, &wire.Table{Assigned: map[string]string{"0": "b", "1": "b"}}, time.Now())
		}))
		s.seen.Saw(api.Lease(testNS, name).ResourceVersion, nil)
		time.Sleep(rp)
		synctest.Wait()
		assert.Equal(t, gets+1, port.Count(VerbGetTable), "read again")
		assert.Equal(t, count(before.Assigned), count(wire.TableOf(api.Lease(testNS, name)).Assigned), "written over")
		cancel()
		done.Wait()
	})
}
