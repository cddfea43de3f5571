package relect

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/time/rate"
)

// newLimiter returns the token bucket every Lease API call of one Elector
// waits on. It starts full, so a fresh candidate is not delayed.
func newLimiter(c *config) *rate.Limiter {
	if c.RateLimit == rate.Inf {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(c.RateLimit, c.RateBurst)
}

// campaignBackoff paces campaigns after terms that were not stable:
// exponential from BackoffInitial, doubling, ±50 % jitter, never above
// BackoffMax, never giving up. cenkalti/backoff caps the interval before
// jitter, so its waits can reach 1.5 × MaxInterval; the clamp in next makes
// BackoffMax a true cap.
type campaignBackoff struct {
	b   *backoff.ExponentialBackOff
	max time.Duration
}

func newCampaignBackoff(c *config) *campaignBackoff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.BackoffInitial),
		backoff.WithMaxInterval(c.BackoffMax),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0), // never backoff.Stop
	)
	return &campaignBackoff{b: b, max: c.BackoffMax}
}

// next returns the wait before the next campaign.
func (cb *campaignBackoff) next() time.Duration {
	d := cb.b.NextBackOff()
	if d < 0 || d > cb.max { // < 0: the jitter overflowed a huge interval
		d = cb.max
	}
	return d
}

// reset starts the schedule over, after a stable term.
func (cb *campaignBackoff) reset() { cb.b.Reset() }
