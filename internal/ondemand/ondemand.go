// Package ondemand runs a goroutine only while there is work for it: the
// log queue (internal/logq) and the OnNewLeader notifier (internal/notify)
// use one each, so that an idle follower, which logs nothing and sees no
// new leader, costs no goroutine for them (issue 22: goroutines per idle
// follower). It knows nothing of elections.
package ondemand

import "sync"

// Runner runs drain on a goroutine of its own while drain finds work.
// Kick starts one unless it runs; it calls drain until drain finds nothing
// to do and no Kick came meanwhile, then ends. Wait returns once it has
// ended. The zero value is ready to use; a Runner is safe for concurrent
// use, and must not be copied once used.
type Runner struct {
	mu      sync.Mutex // guards running and again
	running bool
	again   bool // kicked while running: drain once more before ending
	wg      sync.WaitGroup
}

// Kick makes sure drain runs soon, on the Runner's goroutine; drain
// reports whether it found work (and is then called again). Kick never
// blocks, so it may be called with a lock held. Every Kick of one Runner
// should pass the same drain: a Kick while one runs calls the running one.
func (o *Runner) Kick(drain func() bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running {
		o.again = true
		return
	}
	o.running = true
	o.wg.Go(func() {
		for {
			if drain() {
				continue
			}
			o.mu.Lock()
			if !o.again {
				o.running = false
				o.mu.Unlock()
				return
			}
			o.again = false
			o.mu.Unlock()
		}
	})
}

// Wait blocks until no goroutine of the Runner's runs.
func (o *Runner) Wait() { o.wg.Wait() }
