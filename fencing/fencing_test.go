package fencing_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuard(t *testing.T) {
	var g fencing.Guard
	assert.ErrorIs(t, g.Admit(""), fencing.ErrNoFence)
	require.NoError(t, g.Admit("41"))
	require.NoError(t, g.Admit("41"), "the same term writes again")
	require.NoError(t, g.Admit("100"), "a newer term: compared as integers, not text")
	assert.ErrorIs(t, g.Admit("99"), fencing.ErrStale)
	assert.ErrorIs(t, g.Admit("41"), fencing.ErrStale, "the older term, once a newer one wrote")
	assert.Equal(t, relect.Fence("100"), g.Highest())
	require.NoError(t, g.Admit("18446744073709551616"), "beyond 64 bits too")
	for _, bad := range []relect.Fence{"garbage", "0100000000000000000000", "-1", "1x", " 2"} {
		err := g.Admit(bad)
		assert.ErrorIs(t, err, fencing.ErrNoFence, "%q", bad)
		assert.ErrorIs(t, err, relect.ErrInvalidFence, "%q", bad)
	}
	assert.Equal(t, relect.Fence("18446744073709551616"), g.Highest(), "a bad fence is never admitted")
}

// Do's check and write are one step: of writers racing with different
// fences, a write of an older fence never runs after one of a newer fence.
func TestGuardDoIsOneStep(t *testing.T) {
	var g fencing.Guard
	var mu sync.Mutex
	var order []relect.Fence
	var wg sync.WaitGroup
	for _, f := range []relect.Fence{"5", "7", "6", "9", "8", "7"} {
		wg.Go(func() {
			err := g.Do(f, func() error {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, f)
				return nil
			})
			if err != nil && !errors.Is(err, fencing.ErrStale) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(order); i++ {
		assert.GreaterOrEqual(t, order[i].Compare(order[i-1]), 0, "writes in order %v", order)
	}
	assert.Equal(t, relect.Fence("9"), order[len(order)-1], "the newest is admitted, whenever it comes: %v", order)
	assert.Equal(t, relect.Fence("9"), g.Highest())
}
