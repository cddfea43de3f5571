package ctrlrt

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// group runs the runnables of one term, each in a goroutine of its own with
// the term's context, and joins them all. Runnables added before run are
// queued and started by run; those added after, at once; those added after
// stop, never (ErrTermEnded). The first error (or panic) of a runnable
// cancels the context, which ends the term. Start and join are on this
// screen: add and run start, stop joins every goroutine started.
type group struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	queued  []manager.Runnable
	running bool  // run was called: add starts at once
	stopped bool  // stop was called: add refuses
	err     error // the first runnable's error
}

func newGroup(ctx context.Context, cancel context.CancelCauseFunc) *group {
	return &group{ctx: ctx, cancel: cancel}
}

// add starts r, or queues it until run; it returns ErrTermEnded after stop.
func (g *group) add(r manager.Runnable) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r == nil || isNil(r):
		return errors.New("ctrlrt: the term's manager: Add: nil runnable")
	case g.stopped:
		return ErrTermEnded
	case !g.running:
		g.queued = append(g.queued, r)
	default:
		g.start(r)
	}
	return nil
}

// run starts the queued runnables, and every one added from now on.
func (g *group) run() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.running = true
	for _, r := range g.queued {
		g.start(r)
	}
	g.queued = nil
}

// start runs r in a goroutine of the group; g.mu must be held (so that
// stop's Wait never races an Add of the WaitGroup).
func (g *group) start(r manager.Runnable) {
	g.wg.Go(func() {
		err := startSafely(g.ctx, r)
		if err == nil || (g.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
			return // returned, or stopped by the term's end
		}
		g.mu.Lock()
		if g.err == nil {
			g.err = err
		}
		g.mu.Unlock()
		g.cancel(err)
	})
}

// stop cancels the group's context with cause (if not cancelled yet),
// refuses further runnables, waits for every started one to return, and
// returns the first error one returned (nil if none did).
func (g *group) stop(cause error) error {
	g.mu.Lock()
	g.stopped = true
	g.queued = nil
	g.mu.Unlock()
	g.cancel(cause)
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// startSafely calls r.Start(ctx) and turns a panic into an error: a panic
// in a term's runnable ends the term, not the process (controller-runtime's
// controllers recover the panics of Reconcile themselves).
func startSafely(ctx context.Context, r manager.Runnable) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("ctrlrt: runnable %T panicked: %v\n%s", r, v, debug.Stack())
		}
	}()
	if err := r.Start(ctx); err != nil {
		return fmt.Errorf("ctrlrt: runnable %T: %w", r, err)
	}
	return nil
}
