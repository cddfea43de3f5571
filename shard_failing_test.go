package relect_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/testlog"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingBook is a shardBook whose shard "1" returns 8 s after each start,
// counting its terms.
func failingRun(b *shardBook, id string, mu *sync.Mutex, terms *int) func(ctx context.Context) {
	run := b.run(id)
	return func(ctx context.Context) {
		if sh, _ := relect.ShardFromContext(ctx); sh == "1" {
			mu.Lock()
			*terms++
			mu.Unlock()
			ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			run(ctx)
			return
		}
		run(ctx)
	}
}

// TestShardRunKeepsReturning: three candidates, four shards, shard 1's Run
// returning 8 s after each start, for 10 minutes.
func TestShardRunKeepsReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		logs := &testlog.Handler{Level: slog.LevelWarn}
		var mu sync.Mutex
		terms := 0
		cs := shardFleet(t, api, b, 3, 4, func(i int, o *relect.Options) {
			o.Shards.Run = failingRun(b, fmt.Sprintf("c%02d", i), &mu, &terms)
			o.Logger = slog.New(logs)
		})
		waitFor(t, 4*ld, "the healthy shards run", func() bool { return b.running() >= 3 })
		time.Sleep(ld)
		synctest.Wait()
		healthy := func() map[string]string {
			b.mu.Lock()
			defer b.mu.Unlock()
			out := map[string]string{}
			for sh, h := range b.holder {
				if sh != "1" {
					out[sh] = h
				}
			}
			return out
		}
		before, starts := healthy(), b.startCount()
		mu.Lock()
		terms0 := terms
		mu.Unlock()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		mu.Lock()
		n := terms - terms0
		mu.Unlock()
		warns := logs.Naming("keeps failing", "shard=1", "failuresInARow=")
		// Each candidate's own failures of the shard are passed over for
		// at least LD × 2^(i−1) after its i-th: at most ⌊log₂(T/LD + 1)⌋ + 1
		// each in T.
		bound := 3 * (int(math.Log2(float64(10*time.Minute/ld)+1)) + 1)
		t.Logf("10 min: %d terms of the failing shard (at most %d), %d shard starts in all, healthy %v → %v, %d Warn records naming it",
			n, bound, b.startCount()-starts, before, healthy(), len(warns))
		assert.LessOrEqual(t, n, bound, "the failing shard is paced by the doubling rule")
		assert.Equal(t, before, healthy(), "a healthy shard moved")
		assert.Equal(t, b.startCount()-starts, n, "only the failing shard started again")
		assert.NotEmpty(t, warns, "each failure is a warning naming the shard and its count")
		var leader *candidate
		for _, c := range cs {
			if c.e.IsLeader() {
				leader = c
			}
		}
		require.NotNil(t, leader)
		assert.Equal(t, 1, leader.e.Stats().ShardsFailing, "Stats.ShardsFailing")
		assert.GreaterOrEqual(t, tableOf(api).Failing["1"], 2, "the table names the failing shard with its count")
		for _, c := range cs {
			assert.Equal(t, tableOf(api).Failing, c.e.Stats().ShardFailing, "%s's Stats.ShardFailing: the table's, on every candidate", c.name)
		}
		worst := crashBeside(t, api, b, cs, healthy)
		t.Logf("a crash beside the failing shard: its healthy shards ran again at most %v after their last renewal (LD + 2 RP: %v)", worst, ld+2*rp)
		assert.LessOrEqual(t, worst, ld+2*rp)
		for _, c := range cs {
			c.client.Heal()
		}
		stopAll(cs...)
	})
}

// crashBeside cuts off a candidate that is not the leader and holds healthy
// shards, and returns the longest time from one of its shards' last
// renewal to that shard's next start elsewhere.
func crashBeside(t *testing.T, api *relecttest.LeaseAPI, b *shardBook, cs []*candidate, healthy func() map[string]string) time.Duration {
	t.Helper()
	var victim *candidate
	for _, c := range cs {
		if !c.e.IsLeader() && slices.Contains(slices.Collect(maps.Values(healthy())), c.name) {
			victim = c
		}
	}
	require.NotNil(t, victim)
	renewed := map[string]time.Time{}
	for sh, h := range healthy() {
		if h == victim.name {
			renewed[sh] = api.Lease(ns, wire.ShardLeaseName(lease, sh)).Spec.RenewTime.Time
		}
	}
	victim.client.Partition()
	var worst time.Duration
	for len(renewed) > 0 {
		time.Sleep(10 * time.Millisecond)
		for sh, h := range healthy() {
			if at, ok := renewed[sh]; ok && h != victim.name {
				worst = max(worst, time.Since(at))
				delete(renewed, sh)
			}
		}
		if len(renewed) > 0 && time.Since(slices.MinFunc(slices.Collect(maps.Values(renewed)), time.Time.Compare)) > 3*ld {
			t.Fatalf("shards %v not run again", renewed)
		}
	}
	return worst
}

// TestShardWorkStuckEverywhereIsPaced: with ShardOptions.Work, a shard
// whose work is stuck on every candidate (its downstream is down) is
// handed over by the doubling rule of Options.Work: the k-th stuck
// handover comes no sooner than C × (2^(k−1) − 1) after the first, so in
// T at most ⌊log₂(T/C + 1)⌋ + 1 — the leader passing each holder over for
// the cooldown its release record publishes, not a flat Cooldown.
func TestShardWorkStuckEverywhereIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		logs := &testlog.Handler{Level: slog.LevelWarn}
		const c = time.Minute
		var mu sync.Mutex
		var starts []time.Time
		cs := shardFleet(t, api, b, 3, 4, func(i int, o *relect.Options) {
			run := b.run(fmt.Sprintf("c%02d", i))
			o.Logger = slog.New(logs)
			o.Shards.Work = relect.WorkOptions{BeatWindow: 2 * rp, Cooldown: c}
			o.Shards.Run = func(ctx context.Context) {
				sh, _ := relect.ShardFromContext(ctx)
				if sh == "1" {
					mu.Lock()
					starts = append(starts, time.Now())
					mu.Unlock()
				}
				go func() {
					for sh != "1" && sleepCtx(ctx, rp) {
						relect.Beat(ctx)
					}
				}()
				run(ctx)
			}
		})
		waitFor(t, 4*ld, "every shard runs", func() bool { return b.running() == 4 })
		time.Sleep(2 * ld) // settled: every candidate admitted (JoinDelay)
		synctest.Wait()
		healthy := func() map[string]string {
			b.mu.Lock()
			defer b.mu.Unlock()
			out := map[string]string{}
			for sh, h := range b.holder {
				if sh != "1" {
					out[sh] = h
				}
			}
			return out
		}
		before := healthy()
		mu.Lock()
		first := len(starts)
		mu.Unlock()
		const T = 10 * time.Minute
		time.Sleep(T)
		synctest.Wait()
		mu.Lock()
		moves := len(starts) - first
		mu.Unlock()
		bound := int(math.Log2(float64(T/c)+1)) + 1
		t.Logf("a shard stuck everywhere, Cooldown %v: %d moves in %v (the doubling rule allows %d), healthy %v → %v, %d Warn records naming it",
			c, moves, T, bound, before, healthy(), len(logs.Naming("keeps failing", "shard=1")))
		assert.LessOrEqual(t, moves, bound)
		assert.Equal(t, before, healthy(), "a healthy shard moved")
		stopAll(cs...)
	})
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
