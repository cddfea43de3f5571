package ctrlrt

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// termCache is the manager's cache as one term sees it. Reads and informers
// are the manager's; what is the term's is the event handlers it registers
// on them, which it records, and removes at the end of the term (close).
// controller-runtime's Kind source registers its handler and never removes
// it: on a long-lived manager every term would leave one behind, with its
// goroutines and buffer in the informer, calling the term's predicates and
// event handlers for every change until the process exits.
//
// A registration made after close is refused (ErrTermEnded): a source's
// goroutine, which its controller does not join, may still be asking for
// its informer when the term ends.
type termCache struct {
	cache.Cache                     // the manager's
	indexer     client.FieldIndexer // the manager's
	scheme      *runtime.Scheme
	indexes     *indexSet

	mu     sync.Mutex // guards closed and regs
	closed bool
	regs   map[*registration]struct{}
}

func newTermCache(c cache.Cache, indexer client.FieldIndexer, scheme *runtime.Scheme, indexes *indexSet) *termCache {
	return &termCache{Cache: c, indexer: indexer, scheme: scheme, indexes: indexes, regs: map[*registration]struct{}{}}
}

func (c *termCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	return &termInformer{Informer: i, c: c}, nil
}

func (c *termCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	i, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	if err != nil {
		return nil, err
	}
	return &termInformer{Informer: i, c: c}, nil
}

// RemoveInformer is refused: the informers are the manager's, warm for the
// next term and read by its client.
func (c *termCache) RemoveInformer(_ context.Context, obj client.Object) error {
	return fmt.Errorf("%w: RemoveInformer(%T): the informers outlive the terms", ErrNotPerTerm, obj)
}

func (c *termCache) Start(context.Context) error {
	return fmt.Errorf("%w: starting the cache: the manager starts it", ErrNotPerTerm)
}

// IndexField indexes field once for the process (see indexSet).
func (c *termCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return c.indexes.index(ctx, c.indexer, c.scheme, obj, field, extract)
}

// register registers h through add, gated, unless the term has ended.
func (c *termCache) register(i cache.Informer, h toolscache.ResourceEventHandler,
	add func(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error),
) (toolscache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: event handler not registered", ErrTermEnded)
	}
	g := &gate{h: h}
	inner, err := add(g)
	if err != nil {
		return nil, err
	}
	r := &registration{ResourceEventHandlerRegistration: inner, informer: i, gate: g}
	c.regs[r] = struct{}{}
	return r, nil
}

// unregister removes r, if it is one of this term's.
func (c *termCache) unregister(r *registration) error {
	c.mu.Lock()
	_, ours := c.regs[r]
	delete(c.regs, r)
	c.mu.Unlock()
	if !ours {
		return nil
	}
	return r.remove()
}

// close refuses further registrations and removes every one the term
// made, each once no call of its handler is in progress. It returns when
// every handler is gone; removal errors are not reported (the gate keeps a
// handler that could not be removed from ever calling into the term).
func (c *termCache) close() {
	c.mu.Lock()
	c.closed = true
	regs := c.regs
	c.regs = nil
	c.mu.Unlock()
	for r := range regs {
		_ = r.remove()
	}
}

// termInformer is one of the manager's informers as a term sees it: the
// event handlers added through it are the term's (see termCache).
type termInformer struct {
	cache.Informer
	c *termCache
}

func (i *termInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.c.register(i.Informer, h, i.Informer.AddEventHandler)
}

func (i *termInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.c.register(i.Informer, h, func(g toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		return i.Informer.AddEventHandlerWithResyncPeriod(g, resync)
	})
}

func (i *termInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.c.register(i.Informer, h, func(g toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
		return i.Informer.AddEventHandlerWithOptions(g, o)
	})
}

func (i *termInformer) RemoveEventHandler(h toolscache.ResourceEventHandlerRegistration) error {
	if r, ok := h.(*registration); ok {
		return i.c.unregister(r)
	}
	return i.Informer.RemoveEventHandler(h)
}

// AddIndexers is refused: an indexer stays in the manager's informer for
// good, and the next term's would conflict with it. Index fields with
// IndexField, or add indexers before the manager starts.
func (i *termInformer) AddIndexers(toolscache.Indexers) error {
	return fmt.Errorf("%w: AddIndexers: use the field indexer's IndexField, or add indexers before the manager starts", ErrNotPerTerm)
}

// registration is an event handler a term registered.
type registration struct {
	toolscache.ResourceEventHandlerRegistration // the informer's
	informer                                    cache.Informer
	gate                                        *gate
}

// syncWait is client-go's WaitForCacheSync poll period (syncedPollPeriod).
const syncWait = 100 * time.Millisecond

// HasSynced reports whether the handler has been given the informer's
// initial contents, waiting for that up to syncWait if it has not yet.
// controller-runtime's Kind source waits for its handler with client-go's
// WaitForCacheSync, which checks at once and then every 100 ms; a warm
// informer hands its store to a new handler within milliseconds, so the
// first check comes too early and the term's first reconcile would wait
// for the second, 100 ms after the promotion. Waiting here on the
// registration's own signal lets it start as soon as the handler is
// synced, and never makes the wait longer than polling would.
func (r *registration) HasSynced() bool {
	if r.ResourceEventHandlerRegistration.HasSynced() {
		return true
	}
	if c := r.HasSyncedChecker(); c != nil {
		t := time.NewTimer(syncWait)
		defer t.Stop()
		select {
		case <-c.Done():
		case <-t.C:
		}
	}
	return r.ResourceEventHandlerRegistration.HasSynced()
}

// remove closes the gate (waiting for a call in progress), removes the
// handler from the informer, and waits for the informer's goroutines that
// served it to end, when the registration says when (client-go's do).
func (r *registration) remove() error {
	r.gate.close()
	if err := r.informer.RemoveEventHandler(r.ResourceEventHandlerRegistration); err != nil {
		return err
	}
	if s, ok := r.ResourceEventHandlerRegistration.(interface{ ShutdownChan() <-chan struct{} }); ok {
		<-s.ShutdownChan()
	}
	return nil
}

// gate passes an informer's notifications to a term's handler until it is
// closed, and close waits for a call in progress: once closed, the handler
// is never called again. The informer calls a handler from one goroutine,
// so at most one call is ever in progress.
type gate struct {
	h toolscache.ResourceEventHandler

	mu     sync.RWMutex // held for reading by every call of h; close takes it to write
	closed bool
}

func (g *gate) OnAdd(obj any, isInInitialList bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		g.h.OnAdd(obj, isInInitialList)
	}
}

func (g *gate) OnUpdate(oldObj, newObj any) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		g.h.OnUpdate(oldObj, newObj)
	}
}

func (g *gate) OnDelete(obj any) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		g.h.OnDelete(obj)
	}
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

var (
	_ cache.Cache                                 = (*termCache)(nil)
	_ cache.Informer                              = (*termInformer)(nil)
	_ toolscache.ResourceEventHandler             = (*gate)(nil)
	_ client.FieldIndexer                         = (*termCache)(nil)
	_ toolscache.ResourceEventHandlerRegistration = (*registration)(nil)
)
