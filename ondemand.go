package relect

import "sync"

// onDemand runs a goroutine only while there is work for it: the log queue
// and the OnNewLeader notifier use one each, so that an idle follower, which
// logs nothing and sees no new leader, costs no goroutine for them (issue
// 22: goroutines per idle follower). kick starts one unless it runs; it
// calls drain until drain finds nothing to do and no kick came meanwhile,
// then ends. wait returns once it has ended.
type onDemand struct {
	mu      sync.Mutex // guards running and again
	running bool
	again   bool // kicked while running: drain once more before ending
	wg      sync.WaitGroup
}

// kick makes sure drain runs soon, on the goroutine of onDemand's. It never
// blocks, so it may be called with a lock held.
func (o *onDemand) kick(drain func() bool) {
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

// wait returns once no goroutine of o's runs.
func (o *onDemand) wait() { o.wg.Wait() }
