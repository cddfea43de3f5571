package shardpace

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func alive(string, string) bool { return true }

// TestFailingEverywhere: a shard whose work fails on every candidate, 8 s
// into each term, given each time to the first candidate not passed over:
// each candidate's failures are at most ⌊log₂(T/C + 1)⌋ + 1 in T.
func TestFailingEverywhere(t *testing.T) {
	const c = 15 * time.Second
	p := New(c, time.Hour)
	ids := []string{"a", "b", "c"}
	now, T := t0, 10*time.Minute
	fails := map[string]int{}
	for now.Before(t0.Add(T)) {
		passed, next := p.Passed("x", now)
		holder := ""
		for _, id := range ids {
			if !contains(passed, id) {
				holder = id
				break
			}
		}
		if holder == "" {
			now = next // every candidate passed over: it waits
			continue
		}
		now = now.Add(8 * time.Second)
		require.Nil(t, p.Released("x", holder, "i", 0, now))
		fs := p.Settle(now.Add(2*time.Second), 2*time.Second, alive)
		require.Len(t, fs, 1)
		fails[holder]++
	}
	bound := int(math.Log2(float64(T/c)+1)) + 1
	t.Logf("10 min, C = 15 s: failures per candidate %v (at most %d each), streak %d", fails, bound, p.Streak("x"))
	for id, n := range fails {
		assert.LessOrEqual(t, n, bound, id)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestGracefulStopIsNoFailure: a release whose holder is gone by the
// grace is forgotten; one whose holder is still live is a failure.
func TestGracefulStopIsNoFailure(t *testing.T) {
	p := New(time.Minute, time.Hour)
	require.Nil(t, p.Released("x", "a", "i", 0, t0))
	ids, _ := p.Passed("x", t0)
	assert.Equal(t, []string{"a"}, ids, "passed over until judged")
	assert.Equal(t, map[string]bool{"a": true}, p.Pending())
	assert.Empty(t, p.Settle(t0.Add(time.Second), 2*time.Second, alive), "not judged before the grace")
	assert.Empty(t, p.Settle(t0.Add(2*time.Second), 2*time.Second, func(string, string) bool { return false }))
	ids, _ = p.Passed("x", t0.Add(2*time.Second))
	assert.Empty(t, ids)
	assert.Zero(t, p.Streak("x"))
	assert.Empty(t, p.Pending())
}

// TestRecordStreak: a release whose record carries a streak (stuck work)
// is a failure at once, with the record's count when it is ahead, and the
// record's cooldown: the leader applies what the record publishes.
func TestRecordStreak(t *testing.T) {
	p := New(time.Minute, time.Hour)
	f := p.Released("x", "a", "i", 3, t0)
	require.NotNil(t, f)
	assert.Equal(t, 3, f.Streak)
	assert.Equal(t, t0.Add(4*time.Minute), f.Until)
	ids, next := p.Passed("x", t0.Add(3*time.Minute))
	assert.Equal(t, []string{"a"}, ids)
	assert.Equal(t, t0.Add(4*time.Minute), next)
	ids, _ = p.Passed("x", t0.Add(4*time.Minute))
	assert.Empty(t, ids)
}

// TestHealthyTermEndsTheStreak: a term that lasts twice the cooldown of
// the streak it started in ends it; one that lasts the cooldown (a stuck
// holder's hold) does not.
func TestHealthyTermEndsTheStreak(t *testing.T) {
	p := New(time.Minute, time.Hour)
	p.Failed("x", "a", 0, t0)
	p.Failed("x", "b", 0, t0.Add(time.Second)) // streak 2: 2 min
	p.Held("x", "c", t0.Add(2*time.Second))
	p.Held("x", "c", t0.Add(2*time.Minute+2*time.Second))
	assert.Equal(t, 2, p.Streak("x"), "held its hold only")
	p.Held("x", "c", t0.Add(4*time.Minute+2*time.Second))
	assert.Zero(t, p.Streak("x"))
	assert.Empty(t, p.Failing())
}

func TestKeepOrder(t *testing.T) {
	p := New(time.Minute, time.Hour)
	p.Failed("1", "a", 0, t0.Add(time.Second))
	p.Failed("3", "a", 0, t0)
	assert.Equal(t, []string{"0", "2", "3", "1"}, p.KeepOrder([]string{"0", "1", "2", "3"}))
}
