// Package pace is how relect waits: the exponential backoff between
// retries and campaigns, a sleep that ends with its context, and jitter.
// It knows nothing of elections; the root package, the shards component
// and the command use it. Every function here is safe for concurrent use;
// a Backoff is not.
package pace

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Backoff paces retries: exponential from an initial wait, doubling,
// ±50 % jitter, never above a cap, never giving up. cenkalti/backoff caps
// the interval before jitter, so its waits can reach 1.5 × MaxInterval;
// the clamp in Next makes the cap a true cap.
//
// The zero value is not usable: use NewBackoff. A Backoff is not safe for
// concurrent use.
type Backoff struct {
	b   *backoff.ExponentialBackOff
	max time.Duration
}

// NewBackoff returns a Backoff whose first wait is initial (±50 %), each
// next one twice the one before, at most maxWait.
func NewBackoff(initial, maxWait time.Duration) *Backoff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMaxInterval(maxWait),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0), // never backoff.Stop
	)
	return &Backoff{b: b, max: maxWait}
}

// Next returns the next wait: never negative, never above the cap.
func (eb *Backoff) Next() time.Duration {
	d := eb.b.NextBackOff()
	if d < 0 || d > eb.max { // < 0: the jitter overflowed a huge interval
		d = eb.max
	}
	return d
}

// Reset starts the schedule over: the next wait is about the initial one.
func (eb *Backoff) Reset() { eb.b.Reset() }

// Sleep waits d, or until ctx is done, and then returns ctx.Err() (nil if
// d passed first). It blocks.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SleepUntil waits for changed to deliver (or be closed) or d to pass,
// whichever comes first, and returns nil; it returns ctx.Err() if ctx ends
// first. It blocks.
func SleepUntil(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C:
	}
	return nil
}

// Jitter returns d ± fraction × d, at random (uniform).
func Jitter(d time.Duration, fraction float64) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*fraction*float64(d))
}
