package relect

import "sync"

// maxQueuedLeaders bounds the holders waiting for a slow OnNewLeader.
const maxQueuedLeaders = 16

// notifier calls OnNewLeader in order, one call at a time, from one
// goroutine, so that a slow callback never blocks the election (client-go
// starts a goroutine per call, so its calls can arrive out of order). It
// lives for one Run: newNotifier starts it, stop ends it once every queued
// call was made.
//
// A holder is a state, not an event: what a slow callback must not miss is
// the newest. So at most maxQueuedLeaders holders wait; when one more
// comes, the oldest waiting is dropped (hashicorp/raft's keep-newest), and
// onDrop is told. The last call of a Run always names the last holder
// observed.
type notifier struct {
	call    func(identity string) // Options.OnNewLeader; nil: push does nothing
	onPanic func(*PanicError)     // told of a panic in call
	onDrop  func(identity string) // told of a holder dropped unannounced

	mu    sync.Mutex    // guards queue
	queue []string      // at most maxQueuedLeaders
	wake  chan struct{} // 1-buffered: identities are queued
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when the goroutine returned
}

func newNotifier(call func(string), onPanic func(*PanicError), onDrop func(string)) *notifier {
	n := &notifier{call: call, onPanic: onPanic, onDrop: onDrop, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if call == nil {
		close(n.done)
		return n
	}
	go n.run()
	return n
}

// push queues a call for identity, dropping the oldest waiting one if
// maxQueuedLeaders wait. It never blocks, and never calls out while the
// caller may hold the state's lock: onDrop must not block either.
func (n *notifier) push(identity string) {
	if n.call == nil {
		return
	}
	n.mu.Lock()
	var dropped string
	if len(n.queue) == maxQueuedLeaders {
		dropped = n.queue[0]
		n.queue = append(n.queue[:0], n.queue[1:]...)
	}
	n.queue = append(n.queue, identity)
	n.mu.Unlock()
	if dropped != "" {
		n.onDrop(dropped)
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		batch := n.queue
		n.queue = nil
		n.mu.Unlock()
		for _, id := range batch {
			if p := callSafely("OnNewLeader", func() { n.call(id) }); p != nil {
				n.onPanic(p)
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-n.wake:
		case <-n.quit:
			n.mu.Lock()
			pending := len(n.queue) > 0
			n.mu.Unlock()
			if !pending {
				return
			}
		}
	}
}

// stop waits until every queued call was made, then ends the goroutine.
func (n *notifier) stop() {
	select {
	case <-n.done:
		return
	default:
	}
	close(n.quit)
	<-n.done
}
