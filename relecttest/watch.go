package relecttest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher is one open watch. Events are queued without bound and pumped by
// one goroutine, so a slow consumer never blocks the store and never loses
// an event while its watch is open; the goroutine ends when the watch is
// stopped or the context given to Watch is done.
type watcher struct {
	api       *LeaseAPI
	namespace string
	name      string          // "" for every Lease of the namespace
	labels    labels.Selector // of the Leases watched
	out       chan watch.Event

	mu    sync.Mutex
	queue []watch.Event
	wake  chan struct{}
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
}

// How long a watch can resume from, as the apiserver's watch cache keeps
// its history (k8s.io/apiserver's cacher: DefaultEventFreshDuration and
// the bounds of its capacity): every change of the last historyWindow, and
// always the last historyMin changes, but never more than historyMax. A
// watch resumed from a resourceVersion older than that gets 410 Gone
// ("too old resource version"), as from the apiserver.
//
// The window is one of time, not of a count of changes, because a count
// loses the place of a watcher that is merely slow: a candidate reads the
// Lease, whose resourceVersion is its last renewal's, then opens its watch
// from it while a thousand others register beside it; with a window of
// 256 changes it got 410 Gone, where an apiserver keeps the 75 s.
const (
	historyWindow = 75 * time.Second
	historyMin    = 100
	historyMax    = 100 * 1024
)

// watch opens a watch. With a non-empty resourceVersion it first replays the
// changes after it, as the apiserver does, or fails with 410 Gone when they
// are no longer in the history (see historyWindow).
func (a *LeaseAPI) watch(ctx context.Context, namespace, name string, sel labels.Selector, resourceVersion string) (*watcher, error) {
	w := &watcher{
		api: a, namespace: namespace, name: name, labels: sel,
		out:  make(chan watch.Event),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	a.mu.Lock()
	if resourceVersion != "" && resourceVersion != "0" {
		from, err := strconv.ParseUint(resourceVersion, 10, 64)
		if err != nil {
			a.mu.Unlock()
			return nil, apierrors.NewBadRequest(fmt.Sprintf("relecttest: invalid resourceVersion %q", resourceVersion))
		}
		if len(a.history) > 0 && from+1 < a.history[0].rv && from < a.rv {
			oldest := a.history[0].rv - 1 // read before the unlock: the history moves
			a.mu.Unlock()
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, oldest))
		}
		for _, h := range a.history {
			if h.rv > from && w.matches(h.lease) {
				w.queue = append(w.queue, watch.Event{Type: h.typ, Object: h.lease.DeepCopy()})
			}
		}
	}
	a.watchers[w] = struct{}{}
	a.mu.Unlock()
	go w.pump(ctx)
	return w, nil
}

func (w *watcher) matches(l *coordinationv1.Lease) bool {
	return (w.namespace == "" || w.namespace == l.Namespace) && (w.name == "" || w.name == l.Name) &&
		w.labels.Matches(labels.Set(l.Labels))
}

// change is one entry of the LeaseAPI's history.
type change struct {
	rv    uint64
	at    time.Time // when it was made
	typ   watch.EventType
	lease *coordinationv1.Lease
}

// notifyLocked records a change in the history and queues an event for
// every matching watcher. a.mu is held.
func (a *LeaseAPI) notifyLocked(t watch.EventType, l *coordinationv1.Lease) {
	now := time.Now()
	a.history = append(a.history, change{rv: a.rv, at: now, typ: t, lease: l.DeepCopy()})
	a.trimHistoryLocked(now)
	for w := range a.watchers {
		if w.matches(l) {
			w.push(watch.Event{Type: t, Object: l.DeepCopy()})
		}
	}
}

// trimHistoryLocked forgets the changes no watch can resume from any more
// (see historyWindow). a.mu is held.
func (a *LeaseAPI) trimHistoryLocked(now time.Time) {
	drop := max(len(a.history)-historyMax, 0)
	for drop < len(a.history)-historyMin && now.Sub(a.history[drop].at) > historyWindow {
		drop++
	}
	if drop > 0 {
		// Reslicing leaves the dropped entries in the array until append
		// next grows it; clear them so that their Leases can be collected.
		clear(a.history[:drop])
		a.history = a.history[drop:]
	}
}

func (w *watcher) push(ev watch.Event) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pump(ctx context.Context) {
	defer close(w.done)
	defer close(w.out)
	defer w.unregister()
	for {
		w.mu.Lock()
		var ev watch.Event
		ok := len(w.queue) > 0
		if ok {
			ev, w.queue = w.queue[0], w.queue[1:]
		}
		w.mu.Unlock()
		if !ok {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			}
		}
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface: it ends the watch and waits for its
// goroutine; the result channel is closed.
func (w *watcher) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *watcher) unregister() {
	w.api.mu.Lock()
	delete(w.api.watchers, w)
	w.api.mu.Unlock()
}

// Watchers returns how many watches are open on the Lease namespace/name:
// those opened on that one Lease by name, and those of the namespace (or of
// every namespace) whose label selector matches it as it is now (or would
// match a Lease without labels, if it does not exist). Safe for concurrent
// use; it does not block.
func (a *LeaseAPI) Watchers(namespace, name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := &coordinationv1.Lease{}
	if stored, ok := a.leases[types.NamespacedName{Namespace: namespace, Name: name}]; ok {
		l = stored
	}
	probe := l.DeepCopy()
	probe.Namespace, probe.Name = namespace, name
	n := 0
	for w := range a.watchers {
		if w.matches(probe) {
			n++
		}
	}
	return n
}

// CloseWatches ends every open watch, as an apiserver does when a watch
// times out or the server restarts: each watcher's result channel is closed.
func (a *LeaseAPI) CloseWatches() {
	a.mu.Lock()
	ws := make([]*watcher, 0, len(a.watchers))
	for w := range a.watchers {
		ws = append(ws, w)
	}
	a.mu.Unlock()
	for _, w := range ws {
		w.once.Do(func() { close(w.stop) })
	}
}
