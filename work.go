package relect

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/relect/relect/internal/shardpace"
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
	return shardpace.Doubling(o.Cooldown, o.MaxCooldown, k) // the one rule, shards' too
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

// Work liveness's own state: workCheck across terms, termWork per term. The
// state holds both and calls the methods below under its mutex, as it
// calls the lineage for the cooldowns and the streak that travel with the
// Lease (succession.go).

// workCheck is what the work check last said: its failures in a row, and
// the last one's error.
type workCheck struct {
	failures int
	err      error
}

// failing reports whether the check fails enough to mean stuck work:
// CheckFailures failures in a row. The one rule, for standing back in line
// (follower, polling campaign) and for judging a leader's term (which
// counts its own failures, termWork.checkFailures).
func (w *workCheck) failing(o WorkOptions) bool {
	return o.Check != nil && w.failures >= o.CheckFailures
}

// termWork is one term's work liveness: holdUntil, when it may hand over
// for stuck work (the fleet's streak, inherited at acquisition), and
// streak that streak; stuck why its work is stuck now (nil: it is not),
// since stuckAt; checkFailures, the work check's failures in a row during
// this term (workCheck's count goes on across terms).
type termWork struct {
	holdUntil     time.Time
	streak        int
	stuck         error
	stuckAt       time.Time
	holdLogged    bool // the wait to hand over was logged once
	checkFailures int
}

// Work liveness (work.go): the checker's reports (workReports), and what
// the term's watchdog asks (workDue).

// checkWanted reports whether the work check should run now: this
// candidate leads, or the line of succession names it (a successor, a
// keeper, or the warden: each may take the lease at its turn, and stands
// back if its check fails).
func (s *state) checkWanted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, id := s.succession.line, s.cfg.identity
	return s.term.leading(time.Now()) || (!s.cfg.Standby && line != nil && (line.Names(id) || line.Warden == id))
}

// workChecked records one call of the work check (nil: healthy) and, on a
// leader, what it means for its term.
func (s *state) workChecked(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.term
	leading := t.leading(time.Now())
	if err == nil {
		s.check.failures, s.check.err = 0, nil
		if leading {
			t.work.checkFailures = 0
		}
	} else {
		s.check.failures++
		s.check.err = err
		if leading {
			t.work.checkFailures++
		}
		s.logs.log(slog.LevelDebug, "relect: the work check failed", "lease", s.cfg.describe, "failuresInARow", s.check.failures, "err", err)
	}
	s.stats.WorkCheckFailures = s.check.failures
	if leading {
		s.evaluateWorkLocked(t, time.Now())
	}
}

// checkFailing reports whether this candidate's own work check is failing:
// then it stands back in the line of succession (follower.expiry).
func (s *state) checkFailing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check.failing(s.cfg.Work)
}

// workDue evaluates term t's work now and returns when the watchdog must
// look again: the next beat's deadline, or the end of the term's hold
// while there is one to watch; zero when nothing is due (Work off).
func (s *state) workDue(t *term) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.cfg.Work.enabled() || !t.leading(time.Now()) {
		return time.Time{}
	}
	now := time.Now()
	s.evaluateWorkLocked(t, now)
	var next time.Time
	earliest := func(at time.Time) {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if w := s.cfg.Work.BeatWindow; w > 0 {
		earliest(s.lastBeatLocked(t).Add(w))
	}
	if t.work.stuck != nil {
		earliest(t.work.holdUntil)
	}
	if t.work.streak > 0 {
		earliest(s.streakEndsLocked(t))
	}
	return next
}

// streakEndsLocked is when term t, if its work is not stuck then, ends the
// fleet's streak of stuck handovers: once it has held its hold, and its
// work had twice the time it takes to be judged stuck — so a term does not
// end the streak merely because its stuck work was not judged yet (a
// BeatWindow longer than the hold), nor because it beat once and stalled.
// Requires mu.
func (s *state) streakEndsLocked(t *term) time.Time {
	o := s.cfg.Work
	judge := o.BeatWindow
	if o.Check != nil {
		judge = max(judge, o.CheckInterval*time.Duration(o.CheckFailures)+o.CheckTimeout)
	}
	if proved := t.startedAt.Add(2 * judge); proved.After(t.work.holdUntil) {
		return proved
	}
	return t.work.holdUntil
}

// lastBeatLocked is when t's work last beat, or its start. Requires mu.
func (s *state) lastBeatLocked(t *term) time.Time {
	if b := t.value.lastBeat(); b.After(t.startedAt) {
		return b
	}
	return t.startedAt
}

// stuckReasonLocked says why t's work is stuck at now, or nil. Requires mu.
func (s *state) stuckReasonLocked(t *term, now time.Time) error {
	o := s.cfg.Work
	if o.BeatWindow > 0 {
		if since := now.Sub(s.lastBeatLocked(t)); since >= o.BeatWindow {
			return fmt.Errorf("%w: no beat for %v (BeatWindow %v)", ErrWorkStuck, since.Round(time.Millisecond), o.BeatWindow)
		}
	}
	// A term is judged by the checks of its own: a successor whose check
	// failed while it stood back (and which leads all the same, nobody
	// else taking the lease) gets its CheckFailures chances.
	if o.Check != nil && t.work.checkFailures >= o.CheckFailures {
		return fmt.Errorf("%w: the work check failed %d times in a row: %w", ErrWorkStuck, t.work.checkFailures, s.check.err)
	}
	return nil
}

// evaluateWorkLocked updates t's stuck state at now, reports its changes,
// ends the streak once t held its hold without stuck work, and hands over
// if t is stuck and may. Requires mu.
func (s *state) evaluateWorkLocked(t *term, now time.Time) {
	why := s.stuckReasonLocked(t, now)
	switch {
	case why == nil && t.work.stuck != nil:
		s.emitLocked(Event{Kind: EventWorkRecovered, Leader: s.cfg.identity, Term: t.number, Fence: t.fence,
			Delay: now.Sub(t.work.stuckAt)})
		t.work.stuck = nil
	case why != nil && t.work.stuck == nil:
		t.work.stuck, t.work.stuckAt = why, now
		s.emitLocked(Event{Kind: EventWorkStuck, Leader: s.cfg.identity, Term: t.number, Fence: t.fence, Err: why})
	case why != nil:
		t.work.stuck = why // as of now: the failures counted so far, the time since the last beat
	}
	t.value.stuck.Store(t.work.stuck != nil)
	s.stats.WorkStuck, s.stats.WorkStuckSince = t.work.stuck != nil, time.Time{}
	if t.work.stuck != nil {
		s.stats.WorkStuckSince = t.work.stuckAt
	}
	if t.work.streak > 0 && t.work.stuck == nil && !now.Before(s.streakEndsLocked(t)) {
		t.work.streak, s.succession.streak = 0, 0 // held its hold, and its work proved healthy: the streak ends
	}
	if t.work.stuck != nil {
		s.handOverStuckLocked(t, now)
	}
}

// handOverStuckLocked ends stuck term t and releases the lease to the line
// of succession, unless t must hold (its holdUntil: the fleet's streak of
// stuck handovers), or nobody else is known who could take over. The
// release publishes the streak, one longer, and this candidate's cooldown
// (lineage.next). Requires mu.
func (s *state) handOverStuckLocked(t *term, now time.Time) {
	switch {
	case t.stepDown != nil:
		return // already stepping down
	case now.Before(t.work.holdUntil):
		if !t.work.holdLogged {
			t.work.holdLogged = true
			s.logs.log(slog.LevelWarn, "relect: the leader's work is stuck; holding the lease, as the fleet's last stuck handover was recent",
				"lease", s.cfg.describe, "term", t.number, "until", t.work.holdUntil.Format(time.RFC3339), "streak", t.work.streak, "err", t.work.stuck)
		}
		return
	case !s.succession.someoneElse(s.cfg, now):
		if !t.work.holdLogged {
			t.work.holdLogged = true
			s.logs.log(slog.LevelWarn, "relect: the leader's work is stuck, and no other candidate is known to take over: leading on",
				"lease", s.cfg.describe, "term", t.number, "err", t.work.stuck)
		}
		return
	}
	s.succession.stuckReleasing(s.cfg, now)
	s.stats.WorkStuckHandovers++
	s.logs.log(slog.LevelWarn, "relect: the leader's work is stuck: handing over to the line of succession", "lease", s.cfg.describe,
		"term", t.number, "err", t.work.stuck)
	s.stepDownForLocked("", t.work.stuck)
}
