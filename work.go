package relect

import (
	"context"
	"time"

	"github.com/relect/relect/internal/work"
)

// Work liveness (docs/design.md, "Stuck work"): a leader that keeps its
// lease while its work is stuck is the same outage as no leader at all. With
// Options.Work, the leader's work proves it makes progress — by beats
// (Beat), by a check relect runs (WorkOptions.Check), or both — and a
// leader whose work is stuck ends its term and releases the lease, so that
// the next candidate in line takes over at once, as after a Yield. Two
// rules keep that from flapping when the work fails everywhere (its
// downstream is down): the stuck leader is passed over in the lines of
// succession for a cooldown, and the leader after it must hold for that
// cooldown before it may hand over for stuck work itself; both double with
// each stuck handover in a row across the fleet, a streak the line of
// succession carries from leader to leader.

// WorkOptions make the leader's work part of its leadership (Options.Work).
// The zero value turns work liveness off: no beat is expected, no check
// runs, and nothing in this struct costs anything. Set BeatWindow, Check,
// or both; the other fields have working defaults.
type WorkOptions struct {
	// BeatWindow, when positive, expects the work to call Beat with its
	// term's context at least once every BeatWindow: a term that goes
	// BeatWindow without a beat — counted from the term's start, then
	// from each beat — has stuck work. Zero: no beat is expected.
	BeatWindow time.Duration

	// Check, if not nil, reports whether this process can do the work (its
	// downstream answers, its loop is alive): nil when it can. relect calls
	// it every CheckInterval while this candidate leads, and while it is
	// named in the line of succession (so that a successor that could not
	// do the work stands back in line), never under the Elector's lock and
	// never two calls at once. Each call's context ends after
	// CheckTimeout; a call that returns an error, panics, or has not
	// returned by then is a failure, and CheckFailures failures in a row
	// mean the work is stuck — on a leader, counted within its term: a
	// successor whose check failed while it stood back, and which leads
	// all the same, has CheckFailures chances. A call that ignores its context is counted a
	// failure at every interval it is still running, and Run waits for it
	// to return.
	Check func(ctx context.Context) error

	// CheckInterval is the time between calls of Check. Zero means
	// 10 s.
	CheckInterval time.Duration
	// CheckTimeout bounds each call of Check. Zero means half of
	// CheckInterval; at most CheckInterval.
	CheckTimeout time.Duration
	// CheckFailures is how many failures of Check in a row mean the work
	// is stuck. Zero means 3.
	CheckFailures int

	// Cooldown is how long a leader whose work was stuck is passed over in
	// the lines of succession after it handed over, and how long the
	// leader after it holds before it may hand over for stuck work in its
	// turn. Both double with each stuck handover in a row (the streak),
	// from Cooldown up to MaxCooldown: when the work fails everywhere, the
	// k-th stuck handover of an outage comes no sooner than
	// Cooldown × (2^(k−1) − 1) after the first (docs/design.md). A term
	// ends the streak if its work is not stuck once it has held its hold
	// and had twice the time it takes to be judged stuck (BeatWindow, or
	// CheckFailures × CheckInterval + CheckTimeout). Zero means
	// 1 minute.
	Cooldown time.Duration
	// MaxCooldown caps the doubling. Zero means 1
	// hour; at least Cooldown.
	MaxCooldown time.Duration
}

// enabled reports whether o asks for work liveness at all.
func (o WorkOptions) enabled() bool { return work.Options(o).Enabled() }

// cooldown is the cooldown of the k-th stuck handover in a row (k ≥ 1):
// Cooldown × 2^(k−1), at most MaxCooldown; zero for k < 1.
func (o WorkOptions) cooldown(k int) time.Duration { return work.Options(o).CooldownOf(k) }

// resolved is o for the work liveness component (internal/work): a panic
// of Check is a failure, its error a *PanicError.
func (o WorkOptions) resolved() work.Options {
	w := work.Options(o)
	if check := o.Check; check != nil {
		w.Check = func(ctx context.Context) (err error) {
			if p := callSafely("Work.Check", func() { err = check(ctx) }); p != nil {
				err = p
			}
			return err
		}
	}
	return w
}
