package shardrange

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is a client-go cache.ListerWatcher restricted to a Range,
// for an informer (cache.NewSharedIndexInformer) or a reflector that must
// hold the range's objects only. Make it with NewListerWatcher. It is
// safe for concurrent use.
//
// Every list and watch it passes on asks the apiserver for the range
// (ListOptions.ShardSelector). A list answer whose ListMeta.ShardInfo
// echoes that selector was filtered by the apiserver and is returned as
// it is; any other answer (the ShardedListAndWatch gate off, an older
// apiserver) has its items outside the range removed. Watch events are
// always filtered: an Added, Modified or Deleted event whose object is
// outside the range is dropped (a uid and a namespace never change, so an
// object never enters or leaves a range); Bookmark and Error events, and
// objects without metadata, pass. The answer is thus the same either way.
type ListerWatcher struct {
	lw       cache.ListerWatcherWithContext
	inner    cache.ListerWatcher
	r        Range
	selector string            // r.Selector()
	matcher  sharding.Selector // r's, made once
	once     sync.Once
	notify   func()
}

// Compile-time checks: both of client-go's interfaces.
var (
	_ cache.ListerWatcher            = (*ListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*ListerWatcher)(nil)
)

// NewListerWatcher returns lw restricted to r (see ListerWatcher). The
// zero Range restricts nothing: lists and watches pass unchanged.
//
// serverDidNotFilter, if not nil, is called at most once, the first time
// the apiserver is seen not to filter — a list answer without
// ShardInfo, or a watch event outside the range — from the goroutine of
// that List or of the watch's filter; it must not block (a log line, a
// metric). A List, Watch or event it delays is delayed by as much.
func NewListerWatcher(lw cache.ListerWatcher, r Range, serverDidNotFilter func()) *ListerWatcher {
	return &ListerWatcher{lw: cache.ToListerWatcherWithContext(lw), inner: lw, r: r,
		selector: r.Selector(), matcher: r.selector(), notify: serverDidNotFilter}
}

// List lists with the range's selector (ListWithContext with
// context.Background()).
func (l *ListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

// Watch watches with the range's selector (WatchWithContext with
// context.Background()).
func (l *ListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// ListWithContext lists with options.ShardSelector set to the range's
// (replacing any), and removes the items outside the range unless the
// answer's ShardInfo says that the apiserver applied that selector. It
// returns the wrapped List's error unchanged, or an error of meta's
// ExtractList or SetList for an answer that is not a list.
func (l *ListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	if l.r.field == "" {
		return l.lw.ListWithContext(ctx, options)
	}
	options.ShardSelector = l.selector
	list, err := l.lw.ListWithContext(ctx, options)
	if err != nil {
		return list, err
	}
	applied, echoed := shardInfo(list)
	if echoed && applied == l.selector {
		return list, nil
	}
	if !echoed {
		l.didNotFilter()
	}
	return list, l.keep(list)
}

// WatchWithContext watches with options.ShardSelector set to the range's
// (replacing any), and drops the events of objects outside the range. It
// returns the wrapped Watch's error unchanged; stopping the returned
// watch stops the wrapped one.
func (l *ListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	if l.r.field == "" {
		return l.lw.WatchWithContext(ctx, options)
	}
	options.ShardSelector = l.selector
	w, err := l.lw.WatchWithContext(ctx, options)
	if err != nil {
		return w, err
	}
	return watch.Filter(w, l.event), nil
}

// IsWatchListSemanticsUnSupported is the wrapped ListerWatcher's, if it
// has one (client-go's reflector asks it whether it may stream the
// initial list as watch events), else false.
func (l *ListerWatcher) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.inner.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// event keeps the events of the range's objects, and every event that
// carries none.
func (l *ListerWatcher) event(e watch.Event) (watch.Event, bool) {
	switch e.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return e, true
	}
	in, err := l.matcher.Matches(e.Object)
	if err == nil && !in {
		l.didNotFilter()
	}
	return e, err != nil || in
}

// keep removes list's items outside the range.
func (l *ListerWatcher) keep(list runtime.Object) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, it := range items {
		if in, err := l.matcher.Matches(it); err != nil || in {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}

func (l *ListerWatcher) didNotFilter() {
	if l.notify != nil {
		l.once.Do(l.notify)
	}
}

// shardInfo returns the selector a list answer says the apiserver
// applied, and whether it says one.
func shardInfo(list runtime.Object) (selector string, ok bool) {
	switch t := list.(type) {
	case *unstructured.UnstructuredList:
		s, found, err := unstructured.NestedString(t.Object, "metadata", "shardInfo", "selector")
		return s, found && err == nil
	case metav1.ListMetaAccessor:
		if m, isMeta := t.GetListMeta().(*metav1.ListMeta); isMeta && m.ShardInfo != nil {
			return m.ShardInfo.Selector, true
		}
	}
	return "", false
}
