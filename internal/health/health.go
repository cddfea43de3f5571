// Package health is the judgement of relect's health check
// (Elector.HealthCheck): from one snapshot of an Elector, and of its shard
// Electors, whether work overran its term, is stuck, or whether the Lease
// API calls have failed for too long. It knows no election: the root
// package gives it the snapshots (Source) and its errors (Options).
package health

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Snapshot is what a check reads of one Elector, at one instant.
type Snapshot struct {
	// Working: the term WorkingTerm's work still runs although the term
	// ended (or its validity passed) at WorkingEnded.
	Working      bool
	WorkingTerm  int64
	WorkingEnded time.Time
	// Stuck is why the leading term's work is stuck, since StuckAt; nil
	// when it is not (or not leading).
	Stuck   error
	StuckAt time.Time
	// Stats' fields of the same names.
	FailingSince, LastContact time.Time
	ConsecutiveFailures       int
	Degraded                  bool
}

// Shard is one shard Elector's Snapshot, and when the shard's
// ShardOptions.Warm was cancelled if it has not returned since (zero
// otherwise).
type Shard struct {
	Name          string
	Snapshot      Snapshot
	WarmCancelled time.Time
}

// Source is what a check reads at now: the Elector's Snapshot, whether its
// Run is active, and the Snapshots of the shard Electors running (none
// without shards), in the shards' order.
type Source interface {
	Snapshot(now time.Time) (snap Snapshot, running bool)
	Shards(now time.Time) []Shard
}

// Options are relect.HealthOptions, defaults applied, and the errors the
// check wraps (relect.ErrWorkOverrun, relect.ErrCutOff).
type Options struct {
	WorkStopTimeout, CutOffAfter, WorkStuckTimeout time.Duration
	ErrWorkOverrun, ErrCutOff                      error
}

// Check returns the check of src with options o: nil while healthy, else
// the first failure, in the order: the Elector's work overran its term,
// a shard's did, the work is stuck, the calls are cut off (only while Run
// is active). It reads the wall clock; it is safe for concurrent use if
// src is.
func Check(src Source, o Options) func(*http.Request) error {
	return func(*http.Request) error { return o.judge(src, time.Now()) }
}

// judge is the check at now.
func (o Options) judge(src Source, now time.Time) error {
	s, running := src.Snapshot(now)
	if s.Working && now.Sub(s.WorkingEnded) > o.WorkStopTimeout {
		return fmt.Errorf("%w: term %d ended %v ago, OnStartedLeading has not returned (WorkStopTimeout %v)",
			o.ErrWorkOverrun, s.WorkingTerm, now.Sub(s.WorkingEnded).Round(time.Millisecond), o.WorkStopTimeout)
	}
	var overrun []string
	for _, sh := range src.Shards(now) {
		if w := sh.Snapshot; w.Working && now.Sub(w.WorkingEnded) > o.WorkStopTimeout {
			overrun = append(overrun, fmt.Sprintf("shard %s: term %d ended %v ago", sh.Name, w.WorkingTerm, now.Sub(w.WorkingEnded).Round(time.Millisecond)))
		}
		if c := sh.WarmCancelled; !c.IsZero() && now.Sub(c) > o.WorkStopTimeout {
			overrun = append(overrun, fmt.Sprintf("shard %s: Warm cancelled %v ago", sh.Name, now.Sub(c).Round(time.Millisecond)))
		}
	}
	if len(overrun) > 0 {
		return fmt.Errorf("%w: %s; ShardOptions.Run or Warm has not returned (WorkStopTimeout %v)",
			o.ErrWorkOverrun, strings.Join(overrun, "; "), o.WorkStopTimeout)
	}
	if s.Stuck != nil && now.Sub(s.StuckAt) > o.WorkStuckTimeout {
		return fmt.Errorf("%w, for %v (WorkStuckTimeout %v)", s.Stuck, now.Sub(s.StuckAt).Round(time.Millisecond), o.WorkStuckTimeout)
	}
	if s.FailingSince.IsZero() || !running {
		return nil
	}
	failing := now.Sub(s.FailingSince)
	if failing <= o.CutOffAfter {
		return nil
	}
	last := "never"
	if !s.LastContact.IsZero() {
		last = s.LastContact.Format(time.RFC3339) + ", " + now.Sub(s.LastContact).Round(time.Millisecond).String() + " ago"
	}
	return fmt.Errorf("%w: calls failing for %v (CutOffAfter %v): %d failures in a row, degraded %t, last contact %s",
		o.ErrCutOff, failing.Round(time.Millisecond), o.CutOffAfter, s.ConsecutiveFailures, s.Degraded, last)
}
