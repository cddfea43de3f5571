package work

import (
	"fmt"
	"log/slog"
	"time"
)

// Liveness is one Elector's work liveness: what its check last said
// (across terms), and the rule that judges a leading term's work and hands
// its lease over when it is stuck. The zero value is not usable: use New.
// A Liveness is not safe for concurrent use: the core calls it under its
// lock (see Port).
type Liveness struct {
	o    Options
	port Port
	// failures is the check's failures in a row, err the last one's error.
	failures int
	err      error
}

// New returns the work liveness of options o (resolved), reporting to port.
func New(o Options, port Port) *Liveness { return &Liveness{o: o, port: port} }

// Term is one leading term's work liveness (Liveness.Start). Its fields are
// guarded by the core's lock.
type Term struct {
	leader    Leader
	beats     *Beats
	startedAt time.Time
	// holdUntil is when it may hand over for stuck work (the fleet's
	// streak, inherited at acquisition), streak that streak.
	holdUntil time.Time
	streak    int
	// stuck is why its work is stuck now (nil: it is not), since stuckAt.
	stuck   error
	stuckAt time.Time
	// holdLogged: the wait to hand over was logged once.
	holdLogged bool
	// checkFailures is the check's failures in a row during this term
	// (Liveness' count goes on across terms).
	checkFailures int
}

// Start begins the work liveness of a term that starts serving at now,
// whose work beats into beats; streak is the fleet's streak of stuck
// handovers the term took over (its line of succession's): the term holds
// for that streak's cooldown before it may hand over for stuck work.
func (l *Liveness) Start(leader Leader, beats *Beats, now time.Time, streak int) *Term {
	t := &Term{leader: leader, beats: beats, startedAt: now}
	if l.o.Enabled() && streak > 0 {
		t.streak, t.holdUntil = streak, now.Add(l.o.CooldownOf(streak))
	}
	return t
}

// Hold returns the fleet's streak t took over and when its hold ends; a
// zero streak when it has none.
func (t *Term) Hold() (streak int, until time.Time) { return t.streak, t.holdUntil }

// Failing reports whether the check fails enough to mean stuck work:
// CheckFailures failures in a row. The one rule for standing back in the
// line of succession (a follower, a polling campaign); a leader's term is
// judged by the failures of its own (Checked).
func (l *Liveness) Failing() bool { return l.o.Check != nil && l.failures >= l.o.CheckFailures }

// Checked records one call of the check at now (nil: healthy) and, if t
// is the leading term (nil when not leading), judges its work.
func (l *Liveness) Checked(err error, t *Term, now time.Time) {
	if err == nil {
		l.failures, l.err = 0, nil
		if t != nil {
			t.checkFailures = 0
		}
	} else {
		l.failures++
		l.err = err
		if t != nil {
			t.checkFailures++
		}
		l.port.Log(slog.LevelDebug, "relect: the work check failed", "failuresInARow", l.failures, "err", err)
	}
	l.port.CheckFailures(l.failures)
	if t != nil {
		l.evaluate(t, now)
	}
}

// Due judges leading term t's work at now and returns when it must be
// judged again: the next beat's deadline, or the end of the term's hold
// while there is one to watch; zero when nothing is due (work liveness
// off).
func (l *Liveness) Due(t *Term, now time.Time) time.Time {
	if !l.o.Enabled() {
		return time.Time{}
	}
	l.evaluate(t, now)
	var next time.Time
	earliest := func(at time.Time) {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if w := l.o.BeatWindow; w > 0 {
		earliest(t.lastBeat().Add(w))
	}
	if t.stuck != nil {
		earliest(t.holdUntil)
	}
	if t.streak > 0 {
		earliest(l.streakEnds(t))
	}
	return next
}

// Stuck returns since when leading term t's work is stuck, and why at now
// — as of now, not as last judged; a nil why when it was not judged stuck.
func (l *Liveness) Stuck(t *Term, now time.Time) (since time.Time, why error) {
	if t.stuck == nil {
		return time.Time{}, nil
	}
	if why = l.reason(t, now); why == nil {
		why = t.stuck
	}
	return t.stuckAt, why
}

// streakEnds is when term t, if its work is not stuck then, ends the
// fleet's streak of stuck handovers: once it has held its hold, and its
// work had twice the time it takes to be judged stuck — so a term does not
// end the streak merely because its stuck work was not judged yet (a
// BeatWindow longer than the hold), nor because it beat once and stalled.
func (l *Liveness) streakEnds(t *Term) time.Time {
	if proved := t.startedAt.Add(2 * l.o.judge()); proved.After(t.holdUntil) {
		return proved
	}
	return t.holdUntil
}

// lastBeat is when t's work last beat, or its start.
func (t *Term) lastBeat() time.Time {
	if b := t.beats.Last(); b.After(t.startedAt) {
		return b
	}
	return t.startedAt
}

// reason says why t's work is stuck at now, or nil.
func (l *Liveness) reason(t *Term, now time.Time) error {
	o := l.o
	if o.BeatWindow > 0 {
		if since := now.Sub(t.lastBeat()); since >= o.BeatWindow {
			return fmt.Errorf("%w: no beat for %v (BeatWindow %v)", ErrStuck, since.Round(time.Millisecond), o.BeatWindow)
		}
	}
	// A term is judged by the checks of its own: a successor whose check
	// failed while it stood back (and which leads all the same, nobody
	// else taking the lease) gets its CheckFailures chances.
	if o.Check != nil && t.checkFailures >= o.CheckFailures {
		return fmt.Errorf("%w: the work check failed %d times in a row: %w", ErrStuck, t.checkFailures, l.err)
	}
	return nil
}

// evaluate updates t's stuck state at now, reports its changes, ends the
// streak once t held its hold without stuck work, and hands over if t is
// stuck and may.
func (l *Liveness) evaluate(t *Term, now time.Time) {
	why := l.reason(t, now)
	switch {
	case why == nil && t.stuck != nil:
		t.leader.Recovered(now.Sub(t.stuckAt))
		t.stuck = nil
	case why != nil && t.stuck == nil:
		t.stuck, t.stuckAt = why, now
		t.leader.Stuck(why)
	case why != nil:
		t.stuck = why // as of now: the failures counted so far, the time since the last beat
	}
	t.beats.stuck.Store(t.stuck != nil)
	if t.stuck != nil {
		l.port.StuckSince(t.stuckAt)
	} else {
		l.port.StuckSince(time.Time{})
	}
	if t.streak > 0 && t.stuck == nil && !now.Before(l.streakEnds(t)) {
		t.streak = 0 // held its hold, and its work proved healthy: the streak ends
		l.port.EndStreak()
	}
	if t.stuck != nil {
		l.handOver(t, now)
	}
}

// handOver ends stuck term t and releases the lease to the line of
// succession (Leader.HandOver), unless t must hold (its holdUntil: the
// fleet's streak of stuck handovers), or nobody else is known who could
// take over.
func (l *Liveness) handOver(t *Term, now time.Time) {
	switch {
	case t.leader.SteppingDown():
		return // already stepping down
	case now.Before(t.holdUntil):
		if !t.holdLogged {
			t.holdLogged = true
			l.port.Log(slog.LevelWarn, "relect: the leader's work is stuck; holding the lease, as the fleet's last stuck handover was recent",
				"term", t.leader.Number(), "until", t.holdUntil.Format(time.RFC3339), "streak", t.streak, "err", t.stuck)
		}
		return
	case !l.port.SomeoneElse(now):
		if !t.holdLogged {
			t.holdLogged = true
			l.port.Log(slog.LevelWarn, "relect: the leader's work is stuck, and no other candidate is known to take over: leading on",
				"term", t.leader.Number(), "err", t.stuck)
		}
		return
	}
	l.port.Log(slog.LevelWarn, "relect: the leader's work is stuck: handing over to the line of succession",
		"term", t.leader.Number(), "err", t.stuck)
	t.leader.HandOver(t.stuck, now)
}
