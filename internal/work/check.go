package work

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// RunChecks calls o.Check every CheckInterval while c wants it, until ctx
// is done; each call in a goroutine of its own, so that one that hangs is
// counted a failure at every interval it is still running. It blocks, and
// returns once the last call has returned. o.Check must not panic (the
// core wraps it to turn a panic into an error).
func RunChecks(ctx context.Context, o Options, c Checker) {
	var (
		calls   sync.WaitGroup
		running chan error // the call in flight; nil if none
	)
	defer calls.Wait()
	tick := time.NewTicker(o.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if running != nil { // still running, an interval later
			select {
			case <-running:
				running = nil // its outcome was counted at its timeout
			default:
				c.Checked(fmt.Errorf("relect: the work check has not returned after %v", o.CheckInterval))
				continue
			}
		}
		if !c.Wanted() {
			continue
		}
		var ok bool
		if running, ok = checkOnce(ctx, o, &calls, c); !ok {
			return
		}
	}
}

// checkOnce starts one call of o.Check and reports its outcome to c, or a
// failure once CheckTimeout passes: then it returns the call's channel,
// still running. ok is false if ctx ended first.
func checkOnce(ctx context.Context, o Options, calls *sync.WaitGroup, c Checker) (running chan error, ok bool) {
	done := make(chan error, 1)
	cctx, cancel := context.WithTimeout(ctx, o.CheckTimeout)
	calls.Go(func() {
		defer cancel()
		done <- o.Check(cctx)
	})
	timeout := time.NewTimer(o.CheckTimeout)
	defer timeout.Stop()
	select {
	case err := <-done:
		c.Checked(err)
		return nil, true
	case <-timeout.C:
		c.Checked(fmt.Errorf("relect: the work check did not return within %v", o.CheckTimeout))
		return done, true
	case <-ctx.Done():
		return nil, false
	}
}
