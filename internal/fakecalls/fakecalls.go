// Package fakecalls is the components' tests' fake of the core's paced
// Lease calls (the Calls of internal/shards, internal/registry and
// internal/linelease): every call is made at once, counted by verb, and
// may be failed before it is made. It is safe for concurrent use.
package fakecalls

import (
	"context"
	"sync"

	"github.com/relect/relect/internal/leasewatch"

	"k8s.io/apimachinery/pkg/watch"
)

// Counter counts the calls made through it by verb. The zero value makes
// every call.
type Counter struct {
	mu    sync.Mutex
	calls map[string]int
	fail  func(verb string) error
}

// FailWith makes f asked before each call: a call it gives an error
// fails with it, unmade (counted all the same). nil makes every call.
func (c *Counter) FailWith(f func(verb string) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = f
}

// Do counts the call as verb and makes it, unless ctx is done or FailWith's
// function fails it; it returns fn's error, or that one.
func (c *Counter) Do(ctx context.Context, verb string, _ bool, fn func(context.Context) error) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[verb]++
	fail := c.fail
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if fail != nil {
		if err := fail(verb); err != nil {
			return err
		}
	}
	return fn(ctx)
}

// DoSpare is Do: the fake has no bucket to spare.
func (c *Counter) DoSpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	return c.Do(ctx, verb, bounded, fn)
}

// Ready returns ctx's error: the fake's bucket is never empty.
func (c *Counter) Ready(ctx context.Context) error { return ctx.Err() }

// Decode is leasewatch.Decode.
func (c *Counter) Decode(ev watch.Event, open bool) leasewatch.Event {
	return leasewatch.Decode(ev, open)
}

// Count returns how many calls were counted as verb.
func (c *Counter) Count(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[verb]
}
