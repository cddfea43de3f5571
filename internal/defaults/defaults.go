// Package defaults holds the values relect.New applies to zero-valued
// Options fields, for the packages of this repository that state or reuse
// them (the relect command's flag defaults and help, ctrlrt, the tests and
// benchmarks). Users read them in the Options fields' documentation; a
// program that wants the default leaves the field zero.
package defaults

import "time"

// The election's durations: the values Kubernetes' own control-plane
// components use (client-go itself applies no defaults).
const (
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second
)

const (
	// EventBuffer is the capacity of the Events channel.
	EventBuffer = 64

	// DegradedAfter is how many Lease API calls failing in a row make a
	// candidate degraded.
	DegradedAfter = 5

	// RegistrationRenewal is how often a registered candidate renews its
	// registration: one call every 15 minutes while idle.
	RegistrationRenewal = 15 * time.Minute

	// RateBurst is the token bucket's burst: what a candidate needs within
	// a second or two without waiting — starting to follow (a Get and a
	// Watch), losing one race for a released lease (the conflicting
	// Update), winning the next (its Update; client-go's Get, resuming
	// Update and first renewal of it are answered without a call after a
	// follower's write, but cost 3 calls when client-go polls) and
	// releasing at once (one Update), as in a quick rolling restart, with
	// tokens to spare for the candidate registry. With a burst of 6 the
	// release of a leader stopped right after its election waited up to
	// 1/RateLimit for a token (an earlier run: git log -p docs/performance.md).
	RateBurst = 10
)

// Work liveness (relect.WorkOptions).
const (
	WorkCheckInterval = 10 * time.Second
	WorkCheckFailures = 3
	WorkCooldown      = time.Minute
	WorkMaxCooldown   = time.Hour
)
