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
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakRegistrationDeletedEvictsAHealthyHolder: a candidate's
// registration deleted by hand while it holds shards and renews them. The
// leader drops it from its view at once and moves its shards away (the
// holder steps down on the table's word). Given no shard by the next
// table, the candidate registers again at once (it waited for its next
// renewal, RegistrationRenewal, 15 min ± 10 %, until the fix that
// TestBreakRegistrationsDeleted covers), and holds shards again a
// JoinDelay later: balanced again 30 s after the deletion, but its shards
// moved away and back, which is what still fails here. Safety holds.
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
