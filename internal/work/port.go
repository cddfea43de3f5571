package work

import (
	"log/slog"
	"time"
)

// Port is what the component needs from the election core. The core
// calls Liveness's methods under its own lock, and Liveness calls Port's
// and Leader's methods under that lock: none of them may take it.
type Port interface {
	// Log logs through the core's log queue; it never blocks.
	Log(level slog.Level, msg string, args ...any)
	// SomeoneElse reports whether a candidate other than this one is
	// known at now who may take the lease over.
	SomeoneElse(now time.Time) bool
	// EndStreak ends the fleet's streak of stuck handovers as this
	// candidate will publish it in its line of succession.
	EndStreak()
	// CheckFailures records the check's failures in a row
	// (Stats.WorkCheckFailures).
	CheckFailures(n int)
	// StuckSince records since when the leading term's work is stuck
	// (Stats.WorkStuck, Stats.WorkStuckSince); zero: it is not.
	StuckSince(at time.Time)
}

// Leader is the core's side of one leading term (Liveness.Start).
type Leader interface {
	// Number is the term's number (for logs).
	Number() int64
	// SteppingDown reports whether the term already ends (a Yield or a
	// HandOver was asked of it).
	SteppingDown() bool
	// Stuck reports that the term's work became stuck, for why
	// (EventWorkStuck); Recovered that it no longer is, after stuckFor
	// (EventWorkRecovered).
	Stuck(why error)
	Recovered(stuckFor time.Duration)
	// HandOver ends the term for why at now and releases the lease to the
	// line of succession: the release publishes the fleet's streak one
	// longer, and this candidate cooling for that streak's cooldown
	// (Options.CooldownOf); it counts Stats.WorkStuckHandovers.
	HandOver(why error, now time.Time)
}

// Checker is what RunChecks asks of the core, and tells it. Its methods
// are called from RunChecks' goroutine; they take the core's lock.
type Checker interface {
	// Wanted reports whether the check should run now: this candidate
	// leads, or is named in the line of succession.
	Wanted() bool
	// Checked records the outcome of one call (nil: healthy): the core
	// passes it to Liveness.Checked under its lock.
	Checked(err error)
}
