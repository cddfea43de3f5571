package relecttest

import (
	"context"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher is one open watch. Events are queued without bound and pumped by
// one goroutine, so a slow consumer never blocks the store; the goroutine
// ends when the watch is stopped or the context given to Watch is done.
type watcher struct {
	api       *LeaseAPI
	namespace string
	name      string // "" for every Lease of the namespace
	out       chan watch.Event

	mu    sync.Mutex
	queue []watch.Event
	wake  chan struct{}
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
}

func (a *LeaseAPI) watch(ctx context.Context, namespace, name string) *watcher {
	w := &watcher{
		api: a, namespace: namespace, name: name,
		out:  make(chan watch.Event),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	a.mu.Lock()
	a.watchers[w] = struct{}{}
	a.mu.Unlock()
	go w.pump(ctx)
	return w
}

// notifyLocked queues an event for every matching watcher. a.mu is held.
func (a *LeaseAPI) notifyLocked(t watch.EventType, l *coordinationv1.Lease) {
	for w := range a.watchers {
		if (w.namespace == "" || w.namespace == l.Namespace) && (w.name == "" || w.name == l.Name) {
			w.push(watch.Event{Type: t, Object: l.DeepCopy()})
		}
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
