package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/shardrange"
	"k8s.io/client-go/tools/cache"
)

// warmth holds the informers that relect's ShardOptions.Warm runs, by
// shard, for the shard's Run to read (-warm). It is safe for concurrent
// use.
//
// relect calls Warm when this candidate begins to campaign for a shard
// (as its holder or its taker), cancels it only after the shard's Run
// returned, and calls Warm again only after it returned; Run may start
// before Warm made the informer. So Warm and Run find the shard's entry
// under mu, whichever comes first; Warm fills it and closes ready, and
// removes it when it returns.
type warmth struct {
	h  holder
	mu sync.Mutex
	by map[string]*warmEntry // guarded by mu
}

type warmEntry struct {
	ready chan struct{}  // closed once ri is set
	ri    *rangeInformer // set once, before ready is closed
}

func (w *warmth) entry(shard string) *warmEntry {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.by[shard]
	if e == nil {
		e = &warmEntry{ready: make(chan struct{})}
		w.by[shard] = e
	}
	return e
}

// warm is ShardOptions.Warm: it runs the informer of the shard's range
// until ctx is done, and records the events "warm-synced" and "warm-off"
// (Shard, and the counts).
func (w *warmth) warm(ctx context.Context) {
	sh, _ := relect.ShardFromContext(ctx)
	r, ok := shardrange.FromContext(ctx)
	if !ok {
		fmt.Fprintln(os.Stderr, "rangeinformer: shard", sh, "has no range in Warm")
		os.Exit(3)
	}
	e := w.entry(sh)
	e.ri = w.h.inform(ctx, r, nil)
	close(e.ready)
	event := func(name string) history.Record {
		return e.ri.c.record(history.Record{Kind: history.KindEvent, Event: name, Shard: sh})
	}
	if cache.WaitForCacheSync(ctx.Done(), e.ri.reg.HasSynced) {
		must(w.h.w.Write(event("warm-synced")))
	}
	<-ctx.Done()
	e.ri.wg.Wait()
	w.mu.Lock()
	if w.by[sh] == e {
		delete(w.by, sh)
	}
	w.mu.Unlock()
	must(w.h.w.Write(event("warm-off")))
}

// hold is the shard's Run with -warm: it records the "on", waits for the
// Warm informer of the shard to have synced, records "first" as it reads
// the first object of its cache (the first the term handles) and
// "synced" with the warm informer's counts, and records the "off" when
// ctx is done (the informer is Warm's: it runs on).
func (w *warmth) hold(ctx context.Context, on history.Record, r shardrange.Range) {
	on.Kind, on.View, on.Range, on.T = history.KindOn, history.ViewShard, r.Selector(), time.Now().UnixNano()
	must(w.h.w.Write(on))
	event := func(name string) history.Record {
		return history.Record{Kind: history.KindEvent, Event: name, Shard: on.Shard, Term: on.Term}
	}
	e := w.entry(on.Shard)
	var c *counts
	select {
	case <-e.ready:
		c = e.ri.c
		if synced(ctx, e.ri.reg.HasSynced) {
			if len(e.ri.inf.GetStore().List()) > 0 {
				must(w.h.w.Write(event("first")))
			}
			must(w.h.w.Write(c.record(event("synced"))))
		}
	case <-ctx.Done():
	}
	<-ctx.Done()
	end := time.Now().UnixNano()
	off := history.Record{T: end, Kind: history.KindOff, View: history.ViewShard, Shard: on.Shard, Term: on.Term, LastTrue: end}
	if c != nil {
		off = c.record(off)
	}
	must(w.h.w.Write(off))
}

// synced waits until hasSynced (a handler registration's) is true,
// polling every 2 ms (client-go's WaitForCacheSync polls every 100 ms,
// which a cold start would add to the measured first object), and
// reports whether it did before ctx was done.
func synced(ctx context.Context, hasSynced func() bool) bool {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for !hasSynced() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
