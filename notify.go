package relect

import "sync"

// maxQueuedLeaders bounds the holders waiting for a slow OnNewLeader.
const maxQueuedLeaders = 16

// notifier calls OnNewLeader in order, one call at a time, from one
// goroutine, so that a slow callback never blocks the election (client-go
// starts a goroutine per call, so its calls can arrive out of order). It
// lives for one Run: newNotifier makes it, stop returns once every queued
// call was made. The goroutine runs only while calls wait (onDemand): an
// idle follower, which sees no new leader, costs none.
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
	caller  onDemand

	mu    sync.Mutex // guards queue
	queue []string   // at most maxQueuedLeaders
}

func newNotifier(call func(string), onPanic func(*PanicError), onDrop func(string)) *notifier {
	return &notifier{call: call, onPanic: onPanic, onDrop: onDrop}
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
	n.caller.kick(n.callWaiting)
	n.mu.Unlock()
	if dropped != "" {
		n.onDrop(dropped)
	}
}

// callWaiting makes the calls that wait, and reports whether there were
// any.
func (n *notifier) callWaiting() bool {
	n.mu.Lock()
	batch := n.queue
	n.queue = nil
	n.mu.Unlock()
	for _, id := range batch {
		if p := callSafely("OnNewLeader", func() { n.call(id) }); p != nil {
			n.onPanic(p)
		}
	}
	return len(batch) > 0
}

// stop returns once every queued call was made.
func (n *notifier) stop() { n.caller.wait() }
