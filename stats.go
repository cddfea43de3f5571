package relect

import "time"

// Stats is a snapshot of an Elector's state and counters, all read at one
// instant, for metrics and health checks (Elector.Stats). Counters start at
// zero in New and never reset; they add up over successive Runs.
type Stats struct {
	// Identity is this candidate's holder identity.
	Identity string
	// Leader is the holder last observed (see Elector.Leader).
	Leader string
	// Leading and Term are what Elector.Term returns.
	Leading bool
	Term    int64
	// ValidUntil is when the current term's validity ends unless renewed
	// (t_send of the last successful renewal + RenewDeadline); zero when
	// not leading.
	ValidUntil time.Time
	// TermsStarted counts the terms this candidate has led.
	TermsStarted uint64
	// LastRenewal is when the last successful write naming this candidate
	// (acquisition or renewal) was sent; zero if none yet.
	LastRenewal time.Time
	// LastSuccess is when the Lease API last answered a call of this
	// candidate, NotFound included; zero if never.
	LastSuccess time.Time
	// Calls counts Lease API calls by verb and result (see CallKey).
	Calls map[CallKey]uint64
	// BucketWait is the total time calls waited on the token bucket.
	BucketWait time.Duration
	// Backoffs counts the waits before a campaign; BackoffTime adds their
	// delays.
	Backoffs    uint64
	BackoffTime time.Duration
	// DroppedEvents is what Elector.DroppedEvents returns.
	DroppedEvents uint64
	// FailingSince is when the current run of failed Lease API calls
	// began; zero when the last call succeeded (or none failed yet).
	FailingSince time.Time
	// ConsecutiveFailures counts Lease API calls that failed in a row
	// (NotFound and calls abandoned because a campaign stopped do not
	// count); a call that succeeds resets it.
	ConsecutiveFailures int
	// Degraded is true from the moment ConsecutiveFailures reaches
	// Options.DegradedAfter until the next successful call (EventDegraded,
	// EventRecovered).
	Degraded bool
}

// CallKey names a class of Lease API calls in Stats.Calls.
type CallKey struct {
	// Verb is "get", "create", "update" or "watch" (a follower opening its
	// watch) for calls on the election's Lease; for the candidate
	// registry, "register" (a read or write of this candidate's
	// registration), "deregister" (its deletion when Run returns), and, on
	// the leader, "list-candidates", "watch-candidates" and
	// "delete-candidate" (a lapsed registration).
	Verb string
	// Result is one of "ok", "not_found", "conflict", "forbidden",
	// "throttled" (429), "server_error" (5xx), "timeout" (the request's
	// deadline passed), "budget" (the token bucket could not grant a call
	// before the caller's deadline), "canceled" (the campaign stopped) and
	// "other".
	Result string
}

// CallError is the Err of an EventError for a failed Lease API call.
type CallError struct {
	// Verb is "get", "create", "update" or "watch".
	Verb string
	// Err is the client's error: an apierrors.APIStatus for an answer of
	// the apiserver, a context or network error otherwise.
	Err error
}

// Error returns "relect: lease <verb>: <the client's error>".
func (c *CallError) Error() string { return "relect: lease " + c.Verb + ": " + c.Err.Error() }

// Unwrap returns the client's error, so apierrors.IsForbidden and the like
// work on it.
func (c *CallError) Unwrap() error { return c.Err }
