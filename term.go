package relect

import (
	"context"
	"time"

	"github.com/relect/relect/internal/work"
)

// A term is one tenure of this candidate as leader: from the write that
// acquired the Lease to the return of OnStartedLeading. Its life, and every
// transition of it, is in this file:
//
//	acquiring write succeeds (state.wrote)
//	              │
//	              ▼
//	           pending ──────────────────────────┐
//	              │                              │ lost or expired before
//	              │ serve starts the work        │ serve runs (end,
//	              │ (start)                      │ start)
//	              ▼                              ▼
//	           serving                        aborted
//	              │  IsLeader while now < validUntil;
//	              │  renewals move validUntil (renew)
//	              │
//	              │ ends (end): its validity passed, the
//	              │ Lease seen held by another or deleted, Run's context
//	              │ done, client-go gave up, the work returned or panicked
//	              ▼
//	        steppingDown   IsLeader false; the work still runs
//	              │
//	              │ OnStartedLeading returned (finish)
//	              ▼
//	            done
//
// The fields set by newTerm and start never change afterwards; the others
// are guarded by the state's mutex, which every method of term requires
// (the state calls them, and reports the transitions as events).
type term struct {
	phase phase
	// number is the term's number, the Lease's leaseTransitions at
	// acquisition; fence its fencing token, the resourceVersion of the
	// write that began it ("" if unknown).
	number int64
	fence  Fence
	// acquired is t_send of the acquiring write; validUntil is t_pub of the
	// last successful write + RenewDeadline (see state.wrote).
	acquired, validUntil time.Time
	// held is the leaseTransitions of the last record we wrote.
	held int
	// renewed wakes the watchdog when validUntil moves; 1-buffered.
	renewed chan struct{}
	// ctx is the context OnStartedLeading runs with, cancel ends it; both
	// set when serving begins.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// stopCampaign ends the campaign the term belongs to, which stops
	// client-go's renew loop.
	stopCampaign context.CancelCauseFunc
	// cause is why the term ended, endedAt when; zero while it has not.
	cause   error
	endedAt time.Time
	// stepDown is the Yield or HandOver that ended the term, if one did.
	stepDown *stepDownRequest
	// served is closed when serve returns. client-go starts serve (its
	// OnStartedLeading) in a goroutine it never joins, exactly once, right
	// after its acquire loop's write succeeded — the write that made this
	// term. So a campaign that finds a term after client-go's Run returned
	// waits on served, and no goroutine of the term outlives the campaign.
	served chan struct{}

	// value is what the term's context carries (its number, its fence,
	// its beats: context.go); startedAt when serving began.
	value     *termValue
	startedAt time.Time
	// work is the term's work liveness (internal/work), set when serving
	// begins.
	work *work.Term
}

// stepDownRequest is a Yield (to empty) or a HandOver to to, asked of a
// leading term; done receives the outcome of the release or handover write.
type stepDownRequest struct {
	to   string
	done chan error // 1-buffered
}

// phase is where a term is in its life (see term).
type phase uint8

const (
	termPending      phase = iota // acquired; OnStartedLeading not started yet
	termServing                   // OnStartedLeading runs; leading while valid
	termSteppingDown              // ended; OnStartedLeading still runs
	termDone                      // OnStartedLeading returned
	termAborted                   // ended before OnStartedLeading started
)

// newTerm is a term acquired by a write of leaseTransitions transitions,
// whose resourceVersion is fence, sent at sent and valid until validUntil,
// in the campaign stopCampaign ends.
func newTerm(transitions int, fence Fence, sent, validUntil time.Time, stopCampaign context.CancelCauseFunc) *term {
	return &term{
		phase:        termPending,
		number:       int64(transitions),
		fence:        fence,
		acquired:     sent,
		validUntil:   validUntil,
		held:         transitions,
		renewed:      make(chan struct{}, 1),
		stopCampaign: stopCampaign,
		served:       make(chan struct{}),
		value:        &termValue{number: int64(transitions), fence: fence, beats: work.NewBeats()},
	}
}

// leading reports whether t is a term this candidate leads at now. It is the
// one answer to "are we leading?": Term, IsLeader and Stats ask it. A term
// whose context is done no longer leads, even before the watchdog has
// ended it: IsLeader never says yes to work that was told to stop (as
// when client-go's renew loop gives up, or Run's context ends).
func (t *term) leading(now time.Time) bool {
	return t != nil && t.phase == termServing && now.Before(t.validUntil) && t.ctx.Err() == nil
}

// working reports whether t's OnStartedLeading runs.
func (t *term) working() bool {
	return t != nil && (t.phase == termServing || t.phase == termSteppingDown)
}

// renew moves t's validity to validUntil after a successful renewal (never
// back), unless t has ended: a late success cannot revive a term.
func (t *term) renew(transitions int, validUntil time.Time) {
	if t.phase != termPending && t.phase != termServing {
		return
	}
	t.held = transitions
	if validUntil.After(t.validUntil) {
		t.validUntil = validUntil
	}
	select {
	case t.renewed <- struct{}{}:
	default:
	}
}

// start moves t from pending to serving, with the context its work runs
// with, unless it was lost or expired before (a paused process, or a Get
// that already saw another holder): then it is aborted. It reports whether
// the work may start.
func (t *term) start(ctx context.Context, cancel context.CancelCauseFunc, now time.Time) bool {
	t.ctx, t.cancel = ctx, cancel
	if t.phase != termPending || !now.Before(t.validUntil) {
		t.end(ErrLeaseExpired, now)
		return false
	}
	t.phase, t.startedAt = termServing, now
	return true
}

// end ends t for cause at now, once: IsLeader is false from here on, the
// term's context is cancelled, and so is its campaign, which stops
// client-go's renew loop. A serving term steps down (its work may still
// run), and end reports true; a pending one is aborted. Later calls do
// nothing.
func (t *term) end(cause error, now time.Time) (steppedDown bool) {
	switch t.phase {
	case termPending:
		t.phase = termAborted
	case termServing:
		t.phase = termSteppingDown
	default:
		return false
	}
	t.cause, t.endedAt = cause, now
	if t.cancel != nil {
		t.cancel(cause)
	}
	t.stopCampaign(cause)
	return t.phase == termSteppingDown
}

// expired reports whether t's validity has passed at now.
func (t *term) expired(now time.Time) bool { return !now.Before(t.validUntil) }

// finish records that t's OnStartedLeading returned: it is done. The caller
// ended it first.
func (t *term) finish() { t.phase = termDone }
