package relect_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
)

// warmBook records ShardOptions.Warm and Run across a fleet, and fails the
// test when Run runs without its candidate's Warm of that shard running
// (called, its context not done), when a Warm's context ends while Run
// runs, or when two Warms of one candidate and shard run at once.
type warmBook struct {
	t      *testing.T
	mu     sync.Mutex
	warms  map[string]*warmCall     // "candidate/shard" → the Warm running
	called map[string]chan struct{} // "candidate/shard" → closed when its next Warm is called
	runs   map[string]*warmCall     // "candidate/shard" → the Warm its Run runs in, while it runs
	holder map[string]string        // shard → the candidate whose Run runs it
	calls  int                      // Warm calls
	cooled int                      // Warms whose context ended after a Run in them returned
}

type warmCall struct {
	ctx  context.Context
	r    shardrange.Range
	runs int // Runs that began in this Warm
}

func newWarmBook(t *testing.T) *warmBook {
	return &warmBook{t: t, warms: map[string]*warmCall{}, called: map[string]chan struct{}{}, runs: map[string]*warmCall{}, holder: map[string]string{}}
}

// warm is ShardOptions.Warm for candidate id: it runs until its context
// ends, and then takes a while to return.
func (b *warmBook) warm(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		sh, ok := relect.ShardFromContext(ctx)
		require.True(b.t, ok, "Warm's context carries the shard")
		r, ok := shardrange.FromContext(ctx)
		require.True(b.t, ok, "Warm's context carries the range")
		key := id + "/" + sh
		w := &warmCall{ctx: ctx, r: r}
		b.mu.Lock()
		if b.warms[key] != nil {
			b.t.Errorf("%v: %s: Warm starts while the last one runs", time.Now(), key)
		}
		b.warms[key] = w
		b.calls++
		if c := b.called[key]; c != nil {
			close(c)
			delete(b.called, key)
		}
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		if b.runs[key] != nil {
			b.t.Errorf("%v: %s: Warm's context ended while Run runs", time.Now(), key)
		}
		if w.runs > 0 {
			b.cooled++
		}
		b.mu.Unlock()
		time.Sleep(rp / 2) // a slow Warm: relect waits for it
		b.mu.Lock()
		delete(b.warms, key)
		b.mu.Unlock()
	}
}

// run is ShardOptions.Run for candidate id.
func (b *warmBook) run(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		sh, _ := relect.ShardFromContext(ctx)
		r, _ := shardrange.FromContext(ctx)
		key := id + "/" + sh
		w := b.warmOf(key)
		b.mu.Lock()
		switch {
		case w == nil || w.ctx.Err() != nil:
			b.t.Errorf("%v: %s: Run starts without Warm running (%v)", time.Now(), key, w != nil)
		default:
			assert.Equal(b.t, w.r, r, "%s: Warm's range and Run's", key)
			w.runs++
		}
		b.runs[key], b.holder[sh] = w, id
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		defer b.mu.Unlock()
		if w != nil && (b.warms[key] != w || w.ctx.Err() != nil) {
			b.t.Errorf("%v: %s: Warm ended before Run returned", time.Now(), key)
		}
		delete(b.runs, key)
		delete(b.holder, sh)
	}
}

// warmOf returns the Warm of key running, waiting for one started but
// not yet called: in the bubble, time stands still while a goroutine may
// run, so a Warm whose goroutine was started before Run was called is
// called before the nanosecond passes. Nil if none.
func (b *warmBook) warmOf(key string) *warmCall {
	b.mu.Lock()
	w := b.warms[key]
	if w != nil && w.ctx.Err() == nil {
		b.mu.Unlock()
		return w
	}
	c := b.called[key]
	if c == nil {
		c = make(chan struct{})
		b.called[key] = c
	}
	b.mu.Unlock()
	select {
	case <-c:
	case <-time.After(time.Nanosecond):
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.warms[key]
}

// state returns the Warms running by candidate, the shards whose Run runs
// by candidate, and the counters.
func (b *warmBook) state() (warms, runs map[string]int, calls, cooled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	warms, runs = map[string]int{}, map[string]int{}
	for key := range b.warms {
		warms[key[:3]]++
	}
	for _, id := range b.holder {
		runs[id]++
	}
	return warms, runs, b.calls, b.cooled
}

// takers returns id's Warms running for the shards whose Run runs on
// from.
func (b *warmBook) takers(id, from string) map[string]*warmCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]*warmCall{}
	for sh, h := range b.holder {
		if h == from {
			out[sh] = b.warms[id+"/"+sh]
		}
	}
	return out
}

// runsIn returns, for each shard in ws, whether id's Run of it runs in
// that Warm.
func (b *warmBook) runsIn(id string, ws map[string]*warmCall) map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]bool{}
	for sh, w := range ws {
		out[sh] = w != nil && b.runs[id+"/"+sh] == w
	}
	return out
}

// TestShardWarm: 2 candidates, 4 range shards. Each runs Warm for the 2
// shards it holds and the 2 it would take; when a holder is cut off, its
// taker runs Run for its shards inside the Warm it began before the cut;
// when they move back, the taker's Warm ends after its Run returned; Run
// never runs without its Warm, and the Electors' Run returns after every
// Warm returned.
func TestShardWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newWarmBook(t)
		cs := fleet(t, api, 2, func(i int, o *relect.Options) {
			o.Priority = 0
			id := fmt.Sprintf("c%02d", i)
			o.Shards = relect.ShardOptions{Count: 4, Ranges: shardrange.UID, Run: b.run(id), Warm: b.warm(id)}
		})
		running := func(id string, n int) func() bool {
			return func() bool { _, runs, _, _ := b.state(); return runs[id] == n }
		}
		waitFor(t, 3*ld, "every shard runs", func() bool { _, runs, _, _ := b.state(); return runs["c00"]+runs["c01"] == 4 })
		time.Sleep(ld)
		synctest.Wait()
		warms, runs, calls, _ := b.state()
		assert.Equal(t, map[string]int{"c00": 2, "c01": 2}, runs)
		assert.Equal(t, map[string]int{"c00": 4, "c01": 4}, warms, "each warms the shards it holds and those it would take")

		require.NoError(t, cs[0].e.Yield(t.Context()))
		waitFor(t, rp, "c01 leads", cs[1].e.IsLeader)
		taking := b.takers("c01", "c00")
		require.Len(t, taking, 2, "c00 runs 2 shards")
		cs[0].client.Partition()
		waitFor(t, ld+3*rp, "c00's shards run on c01", running("c01", 4))
		_, _, after, before := b.state()
		in := b.runsIn("c01", taking)
		t.Logf("cut off: c00's shards run on c01 in the Warm c01 began before the cut: %v; Warm calls %d before, %d after", in, calls, after)
		for sh, ok := range in {
			assert.True(t, ok, "shard %s: the taker's Warm ran from before the takeover into Run", sh)
		}

		cs[0].client.Heal()
		waitFor(t, 3*ld, "c00 runs shards again", running("c00", 2))
		time.Sleep(ld)
		synctest.Wait()
		warms, _, _, cooled := b.state()
		t.Logf("moved back: %d of c01's Warms ended after their Run returned", cooled-before)
		assert.GreaterOrEqual(t, cooled-before, 2, "the 2 shards that moved back to c00")
		assert.Equal(t, map[string]int{"c00": 4, "c01": 4}, warms)
		stopAll(cs...)
		warms, runs, _, _ = b.state()
		assert.Empty(t, warms, "the Electors' Run returned after every Warm")
		assert.Empty(t, runs)
	})
}

// A Warm that does not return once its context is cancelled keeps its
// shard from being campaigned for again and the Elector's Run from
// returning: past WorkStopTimeout, HealthCheck fails with ErrWorkOverrun
// naming the shard, as for a Run that overran its term, so that a
// liveness probe restarts the process.
func TestShardWarmOverrunFailsHealthCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		release := make(chan struct{})
		cs := fleet(t, api, 1, func(_ int, o *relect.Options) {
			o.Shards = relect.ShardOptions{Count: 1, Run: func(ctx context.Context) { <-ctx.Done() },
				Warm: func(context.Context) { <-release }} // ignores its context
		})
		c := cs[0]
		waitFor(t, 3*ld, "shard 0 runs", func() bool { return len(c.e.Shards()) == 1 })
		check := c.e.HealthCheck(relect.HealthOptions{WorkStopTimeout: rd})
		require.NoError(t, check(nil))
		c.cancel(nil)
		time.Sleep(rd + time.Second)
		synctest.Wait()
		err := check(nil)
		require.ErrorIs(t, err, relect.ErrWorkOverrun)
		assert.Contains(t, err.Error(), "shard 0: Warm cancelled")
		close(release)
		require.ErrorIs(t, <-c.done, context.Canceled)
		assert.NoError(t, check(nil), "healthy once Warm returned")
	})
}
