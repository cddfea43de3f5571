// Package notify calls the OnNewLeader callback of relect's Options in
// order, one call at a time, from a goroutine of its own, so that a slow
// callback never blocks the election. It knows nothing of elections but a
// holder's identity.
package notify

import (
	"sync"

	"github.com/relect/relect/internal/ondemand"
)

// MaxQueued bounds the holders waiting for a slow callback.
const MaxQueued = 16

// Notifier calls a callback in order, one call at a time, from one
// goroutine, so that a slow callback never blocks the election (client-go
// starts a goroutine per call, so its calls can arrive out of order). It
// lives for one Run: New makes it, Stop returns once every queued call was
// made. The goroutine runs only while calls wait (internal/ondemand): an
// idle follower, which sees no new leader, costs none.
//
// A holder is a state, not an event: what a slow callback must not miss is
// the newest. So at most MaxQueued holders wait; when one more comes, the
// oldest waiting is dropped (hashicorp/raft's keep-newest), and onDrop is
// told. The last call of a Run always names the last holder pushed.
//
// A Notifier is safe for concurrent use.
type Notifier struct {
	call   func(identity string) // nil: Push does nothing
	onDrop func(identity string) // told of a holder dropped unannounced
	caller ondemand.Runner

	mu    sync.Mutex // guards queue
	queue []string   // at most MaxQueued
}

// New returns a Notifier that calls call (Options.OnNewLeader, wrapped so
// that it does not panic; nil: none) for each holder pushed, and onDrop,
// which must not block, for each holder dropped unannounced.
func New(call, onDrop func(identity string)) *Notifier {
	return &Notifier{call: call, onDrop: onDrop}
}

// Push queues a call for identity, dropping the oldest waiting one if
// MaxQueued wait. It never blocks, and never calls out while the caller
// may hold a lock but onDrop, which must not block either.
func (n *Notifier) Push(identity string) {
	if n.call == nil {
		return
	}
	n.mu.Lock()
	var dropped string
	if len(n.queue) == MaxQueued {
		dropped = n.queue[0]
		n.queue = append(n.queue[:0], n.queue[1:]...)
	}
	n.queue = append(n.queue, identity)
	n.caller.Kick(n.callWaiting)
	n.mu.Unlock()
	if dropped != "" {
		n.onDrop(dropped)
	}
}

// callWaiting makes the calls that wait, and reports whether there were
// any.
func (n *Notifier) callWaiting() bool {
	n.mu.Lock()
	batch := n.queue
	n.queue = nil
	n.mu.Unlock()
	for _, id := range batch {
		n.call(id)
	}
	return len(batch) > 0
}

// Stop blocks until every queued call was made.
func (n *Notifier) Stop() { n.caller.Wait() }
