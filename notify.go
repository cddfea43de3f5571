package relect

import "sync"

// notifier calls OnNewLeader in order, one call at a time, from one
// goroutine, so that a slow callback never blocks the election (client-go
// starts a goroutine per call, so its calls can arrive out of order). It
// lives for one Run: newNotifier starts it, stop ends it once every queued
// call was made.
type notifier struct {
	call    func(identity string) // Options.OnNewLeader; nil: push does nothing
	onPanic func(*PanicError)     // told of a panic in call

	mu    sync.Mutex // guards queue
	queue []string
	wake  chan struct{} // 1-buffered: identities are queued
	quit  chan struct{} // closed by stop
	done  chan struct{} // closed when the goroutine returned
}

func newNotifier(call func(string), onPanic func(*PanicError)) *notifier {
	n := &notifier{call: call, onPanic: onPanic, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if call == nil {
		close(n.done)
		return n
	}
	go n.run()
	return n
}

// push queues a call for identity. It never blocks.
func (n *notifier) push(identity string) {
	if n.call == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, identity)
	n.mu.Unlock()
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
