package ctrlrt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Shards (Options.ShardSetup): relect runs a shard Elector for each shard
// this replica campaigns for, as holder or taker; ctrlrt gives each one
// relect's Warm and Run (relect.ShardOptions):
//
//	Warm(shard) ──▶ the shard's cache made and started, ShardInformers synced ──▶ ready
//	    Run(term) ──▶ waits for ready ──▶ runTerm: ShardSetup on the shard's
//	                  manager, its controllers started; joined at the term's end
//	    Run(term) ...                       (the same cache, warm, at each term)
//	Warm's context done (after the last Run returned) ──▶ the cache stopped ──▶ Warm returns
//
// relect calls Warm before the shard's first Run and cancels it only after
// the last Run returned, so a term never outlives its cache; a Run may
// start before Warm made the cache, so both find the shard's entry with
// shardCaches.of.

// shardCaches are the caches of the shards this replica campaigns for, by
// shard. Safe for concurrent use.
type shardCaches struct {
	mu sync.Mutex // guards by
	by map[string]*shardCache
}

// shardCache is one shard's cache while this replica campaigns for it.
// Its fields are set once, before ready is closed, and read after.
type shardCache struct {
	ready   chan struct{} // closed once cache synced the ShardInformers, or err is set
	cache   cache.Cache   // the shard's; the manager's for plain shards
	indexer client.FieldIndexer
	indexes indexSet // the fields the shard's terms indexed in cache
	err     error
}

// of returns shard's entry, creating it if missing.
func (s *shardCaches) of(shard string) *shardCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*shardCache{}
	}
	if s.by[shard] == nil {
		s.by[shard] = &shardCache{ready: make(chan struct{})}
	}
	return s.by[shard]
}

// drop removes shard's entry e.
func (s *shardCaches) drop(shard string, e *shardCache) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by[shard] == e {
		delete(s.by, shard)
	}
}

// warmShard is relect's ShardOptions.Warm: it makes the shard's cache
// (for a range shard), starts it, syncs the ShardInformers, and keeps it
// until ctx is done, when it stops the cache and returns once it stopped.
func (m *Manager) warmShard(ctx context.Context) {
	sh, _ := relect.ShardFromContext(ctx)
	e := m.shards.of(sh)
	defer m.shards.drop(sh, e)
	log := m.log.WithValues("shard", sh)
	c, indexer := m.Manager.GetCache(), m.Manager.GetFieldIndexer()
	if r, ok := shardrange.FromContext(ctx); ok {
		sc, err := m.newShardCache(r, sh)
		if err != nil {
			e.set(nil, nil, fmt.Errorf("ctrlrt: making shard %s's cache: %w", sh, err))
			log.Error(e.err, "the shard's terms end at once")
			<-ctx.Done()
			return
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			if err := sc.Start(ctx); err != nil {
				log.Error(err, "the shard's cache stopped")
			}
		})
		c, indexer = sc, sc
	}
	err := syncInformers(ctx, c, m.shardInformers)
	if err != nil && ctx.Err() == nil {
		log.Error(err, "the shard's terms end at once")
	}
	e.set(c, indexer, err)
	if err == nil {
		log.Info("the shard's cache synced", "informers", len(m.shardInformers))
	}
	<-ctx.Done()
}

// set records the entry's cache, or err, and closes ready.
func (e *shardCache) set(c cache.Cache, indexer client.FieldIndexer, err error) {
	e.cache, e.indexer, e.err = c, indexer, err
	close(e.ready)
}

// syncInformers starts the informers of objs in c and waits until they
// are synced or ctx is done.
func syncInformers(ctx context.Context, c cache.Cache, objs []client.Object) error {
	for _, obj := range objs {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("ctrlrt: starting the informer of Options.ShardInformers for %T: %w", obj, err)
		}
	}
	return nil
}

// newShardCache makes the cache of range shard sh, r: as the manager's
// (manager.Options.NewCache with manager.Options.Cache), each informer's
// lists and watches restricted to r, and reads of a type it has no
// informer for failing (ErrResourceNotCached), for shardClient to read it
// elsewhere.
func (m *Manager) newShardCache(r shardrange.Range, sh string) (cache.Cache, error) {
	o := m.cacheOptions
	if o.HTTPClient == nil {
		o.HTTPClient = m.GetHTTPClient()
	}
	if o.Scheme == nil {
		o.Scheme = m.GetScheme()
	}
	if o.Mapper == nil {
		o.Mapper = m.GetRESTMapper()
	}
	o.ReaderFailOnMissingInformer = true
	newInformer := o.NewInformer
	if newInformer == nil {
		newInformer = toolscache.NewSharedIndexInformer
	}
	log := m.log.WithValues("shard", sh, "range", r.Selector())
	o.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
		return newInformer(shardrange.NewListerWatcher(lw, r, func() {
			log.Info("the apiserver does not filter lists by shard range (its ShardedListAndWatch gate is off?): this replica filters them", "type", fmt.Sprintf("%T", obj))
		}), obj, resync, idx)
	}
	return m.newCache(m.config, o)
}

// leadShard is relect's ShardOptions.Run: one term of a shard. It waits
// for the shard's cache (warmShard), then runs the term as lead does, with
// ShardSetup on the shard's manager.
func (m *Manager) leadShard(ctx context.Context) {
	sh, _ := relect.ShardFromContext(ctx)
	number, _ := relect.TermFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	log := m.log.WithValues("shard", sh, "term", number, "fence", string(fence))
	e := m.shards.of(sh)
	select {
	case <-e.ready:
	case <-ctx.Done():
		return
	}
	if e.err != nil {
		log.Error(e.err, "shard term ended: the shard's cache is not synced")
		return
	}
	log.Info("shard term started: starting the shard's controllers")
	spec := termSpec{setup: m.shardSetup, field: "Options.ShardSetup", cache: e.cache, indexer: e.indexer, indexes: &e.indexes}
	if e.cache != m.Manager.GetCache() {
		spec.client = shardClient{Client: m.Manager.GetClient(), cache: e.cache}
	} else {
		spec.indexes = &m.indexes // plain shards index the manager's cache
	}
	if err := m.runTerm(ctx, spec); err != nil {
		log.Error(err, "shard term ended: the shard's controllers have returned")
		return
	}
	log.Info("shard term ended: the shard's controllers have returned", "cause", context.Cause(ctx).Error())
}

// shardClient is a range shard term's client: it reads from the shard's
// cache the types that cache holds, and every other type, and writes, as
// the manager's client does.
type shardClient struct {
	client.Client // the manager's
	cache         cache.Cache
}

func (c shardClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.cache.Get(ctx, key, obj, opts...)
	if notCached(err) {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	return err
}

func (c shardClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.cache.List(ctx, list, opts...)
	if notCached(err) {
		return c.Client.List(ctx, list, opts...)
	}
	return err
}

func notCached(err error) bool {
	var nc *cache.ErrResourceNotCached
	return errors.As(err, &nc)
}

var _ client.Client = shardClient{}

// shardOptions returns relect's shard options with ctrlrt's Warm and Run.
func (m *Manager) shardOptions(s relect.ShardOptions) relect.ShardOptions {
	s.Run, s.Warm = m.leadShard, m.warmShard
	return s
}

// newCacheFunc is manager.Options.NewCache's default.
func newCacheFunc(f cache.NewCacheFunc) cache.NewCacheFunc {
	if f == nil {
		return cache.New
	}
	return f
}
