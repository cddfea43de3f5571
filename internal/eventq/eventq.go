// Package eventq is the queue relect delivers its Events through
// (Elector.Events): in order, on a buffered channel, without ever blocking
// the sender — when the buffer is full the oldest buffered value is
// dropped and counted (hashicorp/raft's drop-and-count policy, keeping
// the newest). It knows no election; the root package imports it.
package eventq

import "sync"

// Queue is a drop-oldest queue of values of type T on a buffered channel.
// A new channel is made for each Run and closed when Run returns (Close).
// Make one with New; its methods are safe for concurrent use.
type Queue[T any] struct {
	mu      sync.Mutex
	ch      chan T
	size    int
	dropped uint64
}

// New returns a Queue whose channel buffers size values. size must be at
// least 1 (relect's Options.EventBuffer is): Send with no buffer would
// spin until a reader came.
func New[T any](size int) *Queue[T] {
	return &Queue[T]{ch: make(chan T, size), size: size}
}

// Channel returns the channel the current or next Run delivers on.
func (q *Queue[T]) Channel() <-chan T {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ch
}

// Send enqueues v, dropping the oldest buffered value if the buffer is full;
// it never blocks on the channel's reader. Holding mu makes concurrent
// sends ordered and the drop-then-send atomic with respect to other
// senders.
// After Close, v goes to the fresh channel of the next Run.
func (q *Queue[T]) Send(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		select {
		case q.ch <- v:
			return
		default:
		}
		select {
		case <-q.ch:
			q.dropped++
		default:
			// A reader took one in between; try again.
		}
	}
}

// Close closes the current channel and makes a fresh one for the next Run.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.ch)
	q.ch = make(chan T, q.size)
}

// Dropped returns how many values Send has dropped, over every Run.
func (q *Queue[T]) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
