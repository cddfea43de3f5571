package relect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
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
func (o WorkOptions) enabled() bool { return o.BeatWindow > 0 || o.Check != nil }

// cooldown is the cooldown of the k-th stuck handover in a row (k ≥ 1):
// Cooldown × 2^(k−1), at most MaxCooldown; zero for k < 1.
func (o WorkOptions) cooldown(k int) time.Duration {
	if k < 1 {
		return 0
	}
	d := o.Cooldown
	for i := 1; i < k && d < o.MaxCooldown; i++ {
		d *= 2
	}
	return min(d, o.MaxCooldown)
}

// ErrWorkStuck ends a term whose work was stuck (Options.Work): no beat
// within WorkOptions.BeatWindow, or WorkOptions.CheckFailures failures of
// the check in a row. It is wrapped with what showed it; it is also the
// Err of EventWorkStuck, and what HealthCheck reports when a leader's work
// has been stuck longer than HealthOptions.WorkStuckTimeout.
var ErrWorkStuck = errors.New("relect: the leader's work is stuck")

// Beat records that the work of the term whose context ctx is (or derives
// from) has made progress (WorkOptions.BeatWindow). It reports whether ctx
// carries a term. It never blocks and is safe for concurrent use; a beat
// from a term that has ended counts for nothing.
func Beat(ctx context.Context) bool {
	tv, ok := ctx.Value(termKey{}).(*termValue)
	if !ok {
		return false
	}
	tv.beat.Store(time.Now().UnixNano())
	if tv.stuck.Load() {
		select {
		case tv.woken <- struct{}{}:
		default:
		}
	}
	return true
}

// workReports is what the checker tells the Elector's state, and asks of
// it.
type workReports interface {
	// checkWanted reports whether Check should run now: this candidate
	// leads, or is named in the line of succession.
	checkWanted() bool
	// workChecked records the outcome of one call (nil: healthy).
	workChecked(err error)
}

// checkWork calls cfg.Work.Check every CheckInterval while up wants it,
// until ctx (Run's) is done; each call in a goroutine of its own, so that
// one that hangs is counted a failure at every interval it is still
// running. It returns once the last call has returned.
func checkWork(ctx context.Context, cfg *config, up workReports) {
	o := cfg.Work
	var (
		calls   sync.WaitGroup
		running chan error // the call in flight; nil if none
	)
	defer calls.Wait()
	tick := time.NewTicker(o.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if running != nil { // still running, an interval later
			select {
			case err := <-running:
				running = nil
				_ = err // its outcome was counted at its timeout
			default:
				up.workChecked(fmt.Errorf("relect: the work check has not returned after %v", o.CheckInterval))
				continue
			}
		}
		if !up.checkWanted() {
			continue
		}
		done := make(chan error, 1)
		cctx, cancel := context.WithTimeout(ctx, o.CheckTimeout)
		calls.Go(func() {
			defer cancel()
			var err error
			if p := callSafely("Work.Check", func() { err = o.Check(cctx) }); p != nil {
				err = p
			}
			done <- err
		})
		timeout := time.NewTimer(o.CheckTimeout)
		select {
		case err := <-done:
			timeout.Stop()
			up.workChecked(err)
		case <-timeout.C:
			up.workChecked(fmt.Errorf("relect: the work check did not return within %v", o.CheckTimeout))
			running = done
		case <-ctx.Done():
			timeout.Stop()
			return
		}
	}
}
