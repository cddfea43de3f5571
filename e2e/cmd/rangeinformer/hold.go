package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// holder runs the informer of one range for as long as a context lasts.
type holder struct {
	cfg              *rest.Config
	namespace, label string
	w                *history.Writer
}

// counts are what one range's informer received; safe for concurrent use.
type counts struct {
	objects, kept, bytes atomic.Int64
}

// record fills r's counters with the counts now.
func (c *counts) record(r history.Record) history.Record {
	r.Objects, r.Kept, r.Bytes = c.objects.Load(), c.kept.Load(), c.bytes.Load()
	return r
}

// hold records the range's "on" (on carries Shard, Term, Fence), runs an
// informer of the range's ConfigMaps until ctx is done, records "first" and
// "synced" as they happen, and records the "off" once the informer has
// stopped.
func (h holder) hold(ctx context.Context, on history.Record, r shardrange.Range) {
	on.Kind, on.View, on.Range, on.T = history.KindOn, history.ViewShard, r.Selector(), time.Now().UnixNano()
	must(h.w.Write(on))
	event := func(name string) history.Record {
		return history.Record{Kind: history.KindEvent, Event: name, Shard: on.Shard, Term: on.Term}
	}
	ri := h.inform(ctx, r, func() { must(h.w.Write(event("first"))) })
	if cache.WaitForCacheSync(ctx.Done(), ri.reg.HasSynced) {
		must(h.w.Write(ri.c.record(event("synced"))))
	}
	<-ctx.Done()
	ri.wg.Wait()
	end := time.Now().UnixNano()
	must(h.w.Write(ri.c.record(history.Record{T: end, Kind: history.KindOff, View: history.ViewShard,
		Shard: on.Shard, Term: on.Term, LastTrue: end})))
}

// rangeInformer is a running informer of one range's ConfigMaps and what
// it received.
type rangeInformer struct {
	inf cache.SharedIndexInformer
	// reg is the counting handler's registration: its HasSynced, unlike
	// the informer's, is true only once the handler has been called for
	// every object of the first list (the informer's store fills first,
	// its handlers are called after).
	reg cache.ResourceEventHandlerRegistration
	c   *counts
	wg  sync.WaitGroup // the informer's Run
}

// inform starts an informer of r's ConfigMaps that runs until ctx is done
// (wait for it on wg); first, if not nil, is called when its handler sees
// its first object.
func (h holder) inform(ctx context.Context, r shardrange.Range, first func()) *rangeInformer {
	ri := &rangeInformer{c: &counts{}}
	cs, err := kubernetes.NewForConfig(dataConfig(h.cfg, ri.c))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rangeinformer:", err)
		os.Exit(3)
	}
	plain := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", h.namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = h.label })
	lw := shardrange.NewListerWatcher(counting{plain, ri.c}, r, nil)
	ri.inf = cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	handle := func() {
		if ri.c.kept.Add(1) == 1 && first != nil {
			first()
		}
	}
	if ri.reg, err = ri.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { handle() },
		UpdateFunc: func(any, any) { handle() },
		DeleteFunc: func(any) { handle() },
	}); err != nil {
		fmt.Fprintln(os.Stderr, "rangeinformer:", err)
		os.Exit(3)
	}
	ri.wg.Go(func() { ri.inf.RunWithContext(ctx) })
	return ri
}

// Compile-time check: the informer's reflector calls the WithContext
// methods.
var _ cache.ListerWatcherWithContext = counting{}

// counting is a ListerWatcher that counts the objects the apiserver sent:
// a list's items and every watch event but bookmarks and errors.
type counting struct {
	lw *cache.ListWatch
	c  *counts
}

func (l counting) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

func (l counting) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}

func (l counting) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list, err := l.lw.ListWithContext(ctx, o)
	if err == nil {
		l.c.objects.Add(int64(meta.LenList(list)))
	}
	return list, err
}

func (l counting) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.lw.WatchWithContext(ctx, o)
	if err != nil {
		return w, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type != watch.Bookmark && e.Type != watch.Error {
			l.c.objects.Add(1)
		}
		return e, true
	}), nil
}

// countBytes wraps rt so that every response body read is counted.
func (c *counts) countBytes(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = countedBody{resp.Body, &c.bytes}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countedBody counts the bytes read from a response body.
type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
