package relect

import (
	"golang.org/x/time/rate"

	"github.com/relect/relect/internal/pace"
)

// Pacing: the token bucket every Lease API call waits on (used by the
// gateway alone), and the backoffs between campaigns and between a
// follower's retries (internal/pace, which also holds the one way relect
// sleeps).

// newLimiter returns the token bucket every Lease API call of one Elector
// waits on. It starts full, so a fresh candidate is not delayed.
func newLimiter(c *config) *rate.Limiter {
	if c.RateLimit == rate.Inf {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(c.RateLimit, c.RateBurst)
}

// newCampaignBackoff paces campaigns after terms that were not stable:
// BackoffInitial doubling to BackoffMax.
func newCampaignBackoff(c *config) *pace.Backoff {
	return pace.NewBackoff(c.BackoffInitial, c.BackoffMax)
}

// newRetryBackoff paces a follower's retries while its calls fail: the
// first after about RetryPeriod (client-go's cadence), then doubling to
// BackoffMax (at least RetryPeriod). A follower retries only to observe the
// Lease; polling a failing API every RetryPeriod, as client-go does, only
// adds to an API server's trouble. After the API recovers, the follower
// notices within BackoffMax — by default LeaseDuration, the time a failover
// takes anyway.
func newRetryBackoff(c *config) *pace.Backoff {
	return pace.NewBackoff(c.RetryPeriod, max(c.RetryPeriod, c.BackoffMax))
}
