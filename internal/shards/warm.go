package shards

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/relect/relect/shardrange"
)

// Warm takers: while the member campaigns for a shard — as the holder the
// table names or as its taker, whose child follows the shard's Lease
// until it may take it — it runs Config.Warm for that shard, so that the
// user's code can list and watch the shard's data before it holds it.
// The protocol, on one screen: the child's goroutine (startLocked) starts
// Warm before the child's Run, and once that Run returned (its term's
// work returned, the Lease released) it cancels Warm's context and waits
// for Warm to return; only then does it leave runs, so that the shard is
// campaigned for again, and Join's wait returns, after Warm returned.

// warm starts Config.Warm for shard sh in a goroutine of its own, with a
// context of the Join's values that carries the shard (and its range),
// and returns the function that cancels that context and waits for Warm
// to return. A panic in Warm is recovered and logged at Error. Without
// Warm it starts nothing.
func (m *member[C]) warm(sh string) (cool func()) {
	f := m.cfg.Warm
	if f == nil {
		return func() {}
	}
	ranges := shardrange.Field(m.cfg.Ranges)
	ctx, cancel := context.WithCancel(TermContext(ranges, len(m.cfg.Shards), sh)(context.WithoutCancel(m.ctx)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				m.port.Log(slog.LevelError, "relect: Shards.Warm panicked", "lease", m.cfg.Describe, "shard", sh,
					"panic", v, "stack", string(debug.Stack()))
			}
		}()
		f(ctx)
	}()
	return func() {
		cancel()
		m.awaitWarm(sh, done)
	}
}

// awaitWarm waits for shard sh's Warm, whose context was just cancelled,
// to return (done closed). One that has not a LeaseDuration later is a
// Warn, once — until it returns, this candidate does not campaign for the
// shard and the Elector's Run cannot return — and its late return an Info.
func (m *member[C]) awaitWarm(sh string, done <-chan struct{}) {
	start := time.Now()
	select {
	case <-done:
		return
	case <-time.After(m.cfg.LeaseDuration):
	}
	m.port.Log(slog.LevelWarn, "relect: Shards.Warm has not returned since its context was cancelled",
		"lease", m.cfg.Describe, "shard", sh, "for", m.cfg.LeaseDuration,
		"consequence", "this candidate does not campaign for the shard, and its Run does not return, until Warm returns")
	<-done
	m.port.Log(slog.LevelInfo, "relect: Shards.Warm returned late", "lease", m.cfg.Describe, "shard", sh, "after", time.Since(start))
}
