package work

import (
	"sync/atomic"
	"time"
)

// Beats are one term's beats (relect.Beat): written by its work from any
// goroutine, read by Liveness. Safe for concurrent use; use NewBeats.
type Beats struct {
	last atomic.Int64 // UnixNano of the last beat; 0: none
	// stuck is set while the term's work is stuck; then a beat wakes the
	// term's watchdog (woken, 1-buffered) to see it recover at once.
	stuck atomic.Bool
	woken chan struct{}
}

// NewBeats returns the beats of a term that has not beaten yet.
func NewBeats() *Beats { return &Beats{woken: make(chan struct{}, 1)} }

// Beat records a beat at now, and wakes the watchdog if the work is stuck.
// It never blocks.
func (b *Beats) Beat(now time.Time) {
	b.last.Store(now.UnixNano())
	if b.stuck.Load() {
		select {
		case b.woken <- struct{}{}:
		default:
		}
	}
}

// Last returns when the work last beat, or zero.
func (b *Beats) Last() time.Time {
	if n := b.last.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Woken receives after a beat of stuck work (1-buffered): the term's
// watchdog then asks Liveness.Due at once.
func (b *Beats) Woken() <-chan struct{} { return b.woken }
