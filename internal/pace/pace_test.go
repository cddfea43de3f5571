package pace

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackoffDoublesWithinCap: each wait is the one before doubled, ±50 %,
// and never above the cap; Reset starts over at the initial wait.
func TestBackoffDoublesWithinCap(t *testing.T) {
	const initial, maxWait = time.Second, 10 * time.Second
	b := NewBackoff(initial, maxWait)
	for round := range 2 {
		want := initial
		for i := range 8 {
			d := b.Next()
			lo, hi := want/2, min(want*3/2, maxWait)
			assert.GreaterOrEqual(t, d, lo, "round %d wait %d", round, i)
			assert.LessOrEqual(t, d, hi, "round %d wait %d", round, i)
			want = min(2*want, maxWait)
		}
		b.Reset()
	}
}

// TestBackoffHugeCapNeverNegative: a huge cap never yields a negative wait
// (cenkalti/backoff's jitter overflows there); the wait is the cap.
func TestBackoffHugeCapNeverNegative(t *testing.T) {
	b := NewBackoff(250*365*24*time.Hour, math.MaxInt64)
	for range 100 {
		require.GreaterOrEqual(t, b.Next(), time.Duration(0))
	}
}

// TestSleep: Sleep returns nil once d passed, and ctx's error (at once) if
// ctx ends first.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		require.NoError(t, Sleep(t.Context(), time.Minute))
		assert.Equal(t, time.Minute, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		require.ErrorIs(t, Sleep(ctx, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// TestSleepUntil: SleepUntil returns nil when changed delivers or d passes,
// whichever is first, and ctx's error if ctx ends first.
func TestSleepUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		changed := make(chan struct{}, 1)
		start := time.Now()
		require.NoError(t, SleepUntil(t.Context(), changed, time.Minute))
		assert.Equal(t, time.Minute, time.Since(start), "nothing changed: d passes")

		go func() { time.Sleep(time.Second); changed <- struct{}{} }()
		start = time.Now()
		require.NoError(t, SleepUntil(t.Context(), changed, time.Minute))
		assert.Equal(t, time.Second, time.Since(start), "a change ends the wait")

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start = time.Now()
		require.ErrorIs(t, SleepUntil(ctx, changed, time.Hour), context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}

// TestJitter: Jitter stays within d ± fraction × d, and varies.
func TestJitter(t *testing.T) {
	const d = 10 * time.Second
	seen := map[time.Duration]bool{}
	for range 1000 {
		j := Jitter(d, 0.1)
		require.GreaterOrEqual(t, j, 9*time.Second)
		require.LessOrEqual(t, j, 11*time.Second)
		seen[j] = true
	}
	assert.Greater(t, len(seen), 1, "Jitter returned one value 1000 times")
	assert.Equal(t, d, Jitter(d, 0), "no fraction, no jitter")
}
