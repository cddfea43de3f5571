// A holder whose registration is deleted by hand keeps its shards: it
// was a known shortcoming (shards moved away and back), run under the
// build tag shardknown; fixed, it runs with the other tests.

package relect_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakRegistrationDeletedKeepsAHealthyHolder: a candidate's
// registration deleted by hand while it holds shards and renews them. The
// leader drops it from its view of the registry at once, but a holder
// that renews its shard Leases lives: it keeps the shards it holds (and is
// given no new one until it registers again). Before, its shards moved
// away (the holder stepped down on the table's word) and back a JoinDelay
// later. Safety holds.
func TestBreakRegistrationDeletedKeepsAHealthyHolder(t *testing.T) {
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
