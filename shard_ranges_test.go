package relect_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
)

// rangeBook records the hash range of every shard term running across a
// fleet, and fails the test if two ranges running at one instant overlap,
// or if, whenever every shard runs, their union is not the whole space.
type rangeBook struct {
	t      *testing.T
	count  int
	mu     sync.Mutex
	held   map[string]shardrange.Range // shard → the range its work runs for
	wholes int                         // instants at which every shard ran
}

// run is ShardOptions.Run.
func (b *rangeBook) run(ctx context.Context) {
	sh, _ := relect.ShardFromContext(ctx)
	r, ok := shardrange.FromContext(ctx)
	require.True(b.t, ok, "a range shard's context carries its range")
	i, err := strconv.Atoi(sh)
	require.NoError(b.t, err, "range shards are numbered")
	// Count is a power of two here: range i starts at i · 2^64/count.
	assert.Equal(b.t, uint64(i)*(math.MaxUint64/uint64(b.count)+1), r.Start(), "shard %s's range", sh)
	assert.Equal(b.t, shardrange.UID, r.Field())
	b.mu.Lock()
	for other, o := range b.held {
		if o.Start() <= r.Last() && r.Start() <= o.Last() {
			b.t.Errorf("%v: shard %s's range %s starts while shard %s's %s runs", time.Now(), sh, r.Selector(), other, o.Selector())
		}
	}
	b.held[sh] = r
	if len(b.held) == b.count {
		b.checkWhole()
	}
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	delete(b.held, sh)
	b.mu.Unlock()
}

// checkWhole checks that the ranges held cover the hash space from 0 to
// 2^64 − 1 without a gap. Must hold mu.
func (b *rangeBook) checkWhole() {
	b.wholes++
	rs := slices.SortedFunc(func(yield func(shardrange.Range) bool) {
		for _, r := range b.held {
			if !yield(r) {
				return
			}
		}
	}, func(x, y shardrange.Range) int { return compareUint(x.Start(), y.Start()) })
	next := uint64(0)
	for i, r := range rs {
		if r.Start() != next || (i > 0 && r.Start() == 0) {
			b.t.Errorf("%v: the ranges held leave a gap or overlap at %#x: %s", time.Now(), next, r.Selector())
		}
		next = r.Last() + 1
	}
	assert.Equal(b.t, uint64(math.MaxUint64), rs[len(rs)-1].Last(), "the ranges held reach the end of the space")
}

func compareUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func (b *rangeBook) running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

// TestShardRanges: 3 candidates, 8 range shards of the uid hash. Each
// shard term's context carries the shard's range; the ranges running at
// any instant never overlap, and whenever all 8 run their union is the
// whole hash space — settled, after a holder's graceful stop, and after a
// holder is cut off (its ranges move to the other) and comes back.
func TestShardRanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const count = 8
		api := newAPI()
		b := &rangeBook{t: t, count: count, held: map[string]shardrange.Range{}}
		cs := fleet(t, api, 3, func(i int, o *relect.Options) {
			o.Priority = 0
			o.Shards = relect.ShardOptions{Count: count, Ranges: shardrange.UID, Run: b.run}
		})
		waitFor(t, 3*ld, "every range runs", func() bool { return b.running() == count })
		time.Sleep(ld)
		synctest.Wait()
		assert.ElementsMatch(t, []int{3, 3, 2}, heldCounts(cs), "8 ranges over 3 candidates")

		cs[2].stop()
		waitFor(t, rp, "the stopped holder's ranges run elsewhere", func() bool { return b.running() == count })
		require.NoError(t, cs[0].e.Yield(t.Context()))
		waitFor(t, rp, "c01 leads", cs[1].e.IsLeader)
		cs[0].client.Partition()
		waitFor(t, ld+3*rp, "the ranges of the holder cut off run on c01", func() bool { return len(cs[1].e.Shards()) == count })
		cs[0].client.Heal()
		waitFor(t, 3*ld, "c00 holds ranges again", func() bool { return len(cs[0].e.Shards()) == count/2 })
		b.mu.Lock()
		t.Logf("instants at which all %d ranges ran, each time covering the whole space: %d", count, b.wholes)
		assert.GreaterOrEqual(t, b.wholes, 3, "settled, after the graceful stop, after the partition")
		b.mu.Unlock()
		stopAll(cs[:2]...)
		assert.Zero(t, b.running())
	})
}

func heldCounts(cs []*candidate) []int {
	var n []int
	for _, c := range cs {
		n = append(n, len(c.e.Shards()))
	}
	return n
}

// TestShardRangesInvalid: New refuses Ranges without Count, with Names, or
// naming another field, and names Options.Shards.Ranges.
func TestShardRangesInvalid(t *testing.T) {
	api := newAPI()
	for _, c := range []struct {
		s       relect.ShardOptions
		related []string
	}{
		{relect.ShardOptions{Ranges: shardrange.UID, Run: func(context.Context) {}}, []string{"Options.Shards.Count"}},
		{relect.ShardOptions{Ranges: shardrange.UID}, []string{"Options.Shards.Count"}},
		{relect.ShardOptions{Names: []string{"a", "b"}, Ranges: shardrange.Namespace, Run: func(context.Context) {}}, []string{"Options.Shards.Names", "Options.Shards.Count"}},
		{relect.ShardOptions{Count: 4, Ranges: "name", Run: func(context.Context) {}}, nil},
	} {
		_, err := relect.New(relect.Options{Client: api.Client("x").Clientset(), Namespace: ns, Name: lease, Shards: c.s})
		require.ErrorIs(t, err, relect.ErrInvalidOptions, "%+v", c.s)
		var fe *relect.FieldError
		found := false
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			if errors.As(e, &fe) && fe.Field == "Options.Shards.Ranges" {
				found = true
				assert.Equal(t, c.related, fe.Related, "%+v", c.s)
			}
		}
		assert.True(t, found, "%+v: no FieldError names Options.Shards.Ranges in %v", c.s, err)
	}
	_, err := relect.New(relect.Options{Client: api.Client("x").Clientset(), Namespace: ns, Name: lease,
		Shards: relect.ShardOptions{Count: 1, Ranges: shardrange.Namespace, Run: func(context.Context) {}}})
	require.NoError(t, err, "one range: the whole space")
}
