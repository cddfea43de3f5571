package ctrlrt_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// testCache is a controller-runtime cache of ConfigMaps over a client-go
// clientset (the fake one in these tests), with real client-go shared
// informers, so that event handlers are registered, served by their own
// goroutines and removed exactly as on a real manager. It counts the event
// handlers registered on its informer that were not removed.
type testCache struct {
	cs     kubernetes.Interface
	scheme *runtime.Scheme

	handlers atomic.Int64 // registered and not removed
	indexed  atomic.Int64 // IndexField calls that reached the informer

	// hold, if not nil, keeps the informer from syncing (as a slow or
	// forbidden list would) until it is closed.
	hold chan struct{}

	// newInformer, if not nil, makes the informer instead of client-go's
	// informer factory, over a ListerWatcher of the clientset's
	// ConfigMaps (cache.Options.NewInformer: a shard's cache). selector
	// is the ShardSelector of its last list, lists their number; running
	// is whether Start is in progress, stopped whether it returned.
	newInformer func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer
	selector    atomic.Value // string
	lists       atomic.Int64
	listedAt    atomic.Value // time.Time of the first list
	live        atomic.Bool
	stopped     atomic.Bool

	mu       sync.Mutex
	informer *countingInformer // created on first use
	ctx      context.Context   // set by Start
	running  sync.WaitGroup
}

func newTestCache(cs kubernetes.Interface, scheme *runtime.Scheme) *testCache {
	return &testCache{cs: cs, scheme: scheme}
}

var configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")

func (c *testCache) informerFor(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (*countingInformer, error) {
	if gvk != configMapGVK {
		return nil, fmt.Errorf("testCache: only ConfigMaps, not %v", gvk)
	}
	c.mu.Lock()
	if c.informer == nil {
		f := informers.NewSharedInformerFactory(c.cs, 0)
		si := f.Core().V1().ConfigMaps().Informer()
		if c.newInformer != nil {
			si = c.newInformer(c.listWatch(), &corev1.ConfigMap{}, 0, toolscache.Indexers{})
		}
		c.informer = &countingInformer{SharedIndexInformer: si, c: c}
		if c.ctx != nil {
			c.run(c.ctx)
		}
	}
	i := c.informer
	c.mu.Unlock()
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.BlockUntilSynced == nil || *o.BlockUntilSynced {
		if c.hold != nil {
			select {
			case <-c.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if !toolscache.WaitForCacheSync(ctx.Done(), i.HasSynced) {
			return nil, ctx.Err()
		}
	}
	return i, nil
}

// listWatch lists and watches the clientset's ConfigMaps, recording each
// list's ShardSelector (the fake clientset ignores it: a shard cache's
// ListerWatcher filters on its side, as with the apiserver's gate off).
func (c *testCache) listWatch() toolscache.ListerWatcher {
	cms := c.cs.CoreV1().ConfigMaps("")
	return noWatchList{&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			c.selector.Store(o.ShardSelector)
			if c.lists.Add(1) == 1 {
				c.listedAt.Store(time.Now())
			}
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cms.Watch(ctx, o)
		},
	}}
}

// noWatchList tells client-go's reflector to list first: the fake
// clientset cannot stream the initial list as watch events.
type noWatchList struct{ *toolscache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// objects returns the names of the ConfigMaps the informer holds; nil
// without an informer.
func (c *testCache) objects() []string {
	c.mu.Lock()
	i := c.informer
	c.mu.Unlock()
	if i == nil {
		return nil
	}
	return i.GetStore().ListKeys()
}

// run starts the informer; c.mu must be held.
func (c *testCache) run(ctx context.Context) {
	i := c.informer
	c.running.Go(func() { i.RunWithContext(ctx) })
}

func (c *testCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.informerFor(ctx, gvk, opts...)
}

func (c *testCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informerFor(ctx, gvk, opts...)
}

func (c *testCache) RemoveInformer(context.Context, client.Object) error { return nil }

// Start runs the informers until ctx is done, as controller-runtime's
// cache does, and returns once they have stopped.
func (c *testCache) Start(ctx context.Context) error {
	c.live.Store(true)
	defer func() { c.live.Store(false); c.stopped.Store(true) }()
	c.mu.Lock()
	c.ctx = ctx
	if c.informer != nil {
		c.run(ctx)
	}
	c.mu.Unlock()
	<-ctx.Done()
	c.running.Wait()
	return nil
}

func (c *testCache) WaitForCacheSync(ctx context.Context) bool {
	c.mu.Lock()
	i := c.informer
	c.mu.Unlock()
	return i == nil || toolscache.WaitForCacheSync(ctx.Done(), i.HasSynced)
}

func (c *testCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	i, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	c.indexed.Add(1)
	return i.AddIndexers(toolscache.Indexers{"field:" + field: func(obj any) ([]string, error) {
		return extract(obj.(client.Object)), nil
	}})
}

func (c *testCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	i, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	item, ok, err := i.(*countingInformer).GetStore().GetByKey(key.String())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("testCache: %v not found", key)
	}
	item.(*corev1.ConfigMap).DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

func (c *testCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("testCache: List is not implemented")
}

// countingInformer counts the handlers registered on it.
type countingInformer struct {
	toolscache.SharedIndexInformer
	c *testCache
}

func (i *countingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (i *countingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, d time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &d})
}

func (i *countingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	r, err := i.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
	if err == nil {
		i.c.handlers.Add(1)
	}
	return r, err
}

func (i *countingInformer) RemoveEventHandler(r toolscache.ResourceEventHandlerRegistration) error {
	err := i.SharedIndexInformer.RemoveEventHandler(r)
	if err == nil {
		i.c.handlers.Add(-1)
	}
	return err
}

var _ cache.Cache = (*testCache)(nil)
