package relect

import (
	"context"
	"errors"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Stats is a snapshot of an Elector's state and counters, for metrics and
// health checks. Counters start at zero in New and never reset; they add up
// over successive Runs.
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
	// Calls counts Lease API calls by verb ("get", "create", "update",
	// "watch") and result (see CallKey).
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
	// watch).
	Verb string
	// Result is one of "ok", "not_found", "conflict", "forbidden",
	// "throttled" (429), "server_error" (5xx), "timeout" (the request's
	// deadline passed), "budget" (the token bucket could not grant a call
	// before the caller's deadline), "canceled" (the campaign stopped) and
	// "other".
	Result string
}

// Stats returns a snapshot of the Elector's state and counters. It never
// blocks on the API and is safe for concurrent use.
func (e *Elector) Stats() Stats {
	term, leading := e.Term()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Calls = maps.Clone(e.stats.Calls)
	s.Identity, s.Leader = e.Identity(), e.leader
	s.Leading, s.Term = leading, term
	if leading {
		s.ValidUntil = e.current.term.validUntil
	}
	s.DroppedEvents = e.events.droppedCount()
	return s
}

// callResult classifies a Lease API call's outcome for Stats.Calls.
func callResult(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "ok"
	case apierrors.IsNotFound(err):
		return "not_found"
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return "conflict"
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return "forbidden"
	case apierrors.IsTooManyRequests(err):
		return "throttled"
	case errors.Is(err, errBudget):
		return "budget"
	case ctx.Err() != nil:
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return "timeout"
	case apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err):
		return "server_error"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code >= 500 {
		return "server_error"
	}
	return "other"
}

// called records one Lease API call: counters, the degraded signal, and an
// EventError for a failure, unless the call failed only because ctx (the
// campaign) was being stopped.
func (e *Elector) called(ctx context.Context, verb string, err error, waited time.Duration) {
	result := callResult(ctx, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stats.Calls == nil {
		e.stats.Calls = map[CallKey]uint64{}
	}
	e.stats.Calls[CallKey{verb, result}]++
	e.stats.BucketWait += waited
	switch result {
	case "canceled":
		return
	case "ok", "not_found":
		e.stats.LastSuccess = time.Now()
		e.stats.ConsecutiveFailures = 0
		e.stats.FailingSince = time.Time{}
		if e.stats.Degraded {
			e.stats.Degraded = false
			e.emitLocked(Event{Kind: EventRecovered})
		}
		return
	}
	e.cfg.Logger.Debug("relect: lease API call failed", "verb", verb, "lease", e.lock.Describe(), "err", err)
	e.emitLocked(Event{Kind: EventError, Err: &CallError{Verb: verb, Err: err}})
	if e.stats.ConsecutiveFailures == 0 {
		e.stats.FailingSince = time.Now()
	}
	e.stats.ConsecutiveFailures++
	if !e.stats.Degraded && e.stats.ConsecutiveFailures >= e.cfg.DegradedAfter {
		e.stats.Degraded = true
		e.emitLocked(Event{Kind: EventDegraded, Err: &CallError{Verb: verb, Err: err}})
	}
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
