package relect

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"
)

// Pacing: the token bucket every Lease API call waits on (used by the
// gateway alone), the exponential backoffs between campaigns and between a
// follower's retries, and the one way relect sleeps.

// newLimiter returns the token bucket every Lease API call of one Elector
// waits on. It starts full, so a fresh candidate is not delayed.
func newLimiter(c *config) *rate.Limiter {
	if c.RateLimit == rate.Inf {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(c.RateLimit, c.RateBurst)
}

// expBackoff paces retries: exponential from an initial wait, doubling,
// ±50 % jitter, never above a cap, never giving up. Campaigns after terms
// that were not stable use BackoffInitial and BackoffMax
// (newCampaignBackoff); a follower's retries after failed calls start at
// RetryPeriod (newRetryBackoff). cenkalti/backoff caps the interval before
// jitter, so its waits can reach 1.5 × MaxInterval; the clamp in next makes
// the cap a true cap.
type expBackoff struct {
	b   *backoff.ExponentialBackOff
	max time.Duration
}

func newExpBackoff(initial, maxWait time.Duration) *expBackoff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMaxInterval(maxWait),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0), // never backoff.Stop
	)
	return &expBackoff{b: b, max: maxWait}
}

// newCampaignBackoff paces campaigns: BackoffInitial doubling to BackoffMax.
func newCampaignBackoff(c *config) *expBackoff {
	return newExpBackoff(c.BackoffInitial, c.BackoffMax)
}

// newRetryBackoff paces a follower's retries while its calls fail: the
// first after about RetryPeriod (client-go's cadence), then doubling to
// BackoffMax (at least RetryPeriod). A follower retries only to observe the
// Lease; polling a failing API every RetryPeriod, as client-go does, only
// adds to an API server's trouble. After the API recovers, the follower
// notices within BackoffMax — by default LeaseDuration, the time a failover
// takes anyway.
func newRetryBackoff(c *config) *expBackoff {
	return newExpBackoff(c.RetryPeriod, max(c.RetryPeriod, c.BackoffMax))
}

// next returns the next wait.
func (eb *expBackoff) next() time.Duration {
	d := eb.b.NextBackOff()
	if d < 0 || d > eb.max { // < 0: the jitter overflowed a huge interval
		d = eb.max
	}
	return d
}

// reset starts the schedule over.
func (eb *expBackoff) reset() { eb.b.Reset() }

// sleep waits d, or until ctx is done, and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// jitter returns d ± fraction × d, at random.
func jitter(d time.Duration, fraction float64) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*fraction*float64(d))
}
