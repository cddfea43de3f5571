package relect

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/relect/relect/internal/health"
)

// HealthOptions configure Elector.HealthCheck and Elector.HealthHandler.
// The zero value selects the defaults given in each field's comment;
// negative durations are invalid.
type HealthOptions struct {
	// WorkStopTimeout is how long OnStartedLeading (or ShardOptions.Run,
	// for a shard's term) may keep running after its term ended (its
	// context was cancelled, or its validity passed) before the check
	// fails with ErrWorkOverrun. Zero means the Elector's
	// RenewDeadline (10 s by default). Make it longer than the work's
	// slowest orderly shutdown.
	WorkStopTimeout time.Duration

	// WorkStuckTimeout is how long a leader's work may stay stuck
	// (Options.Work) before the check fails with ErrWorkStuck: a stuck
	// leader normally hands over at once, so this is the last resort for
	// one that cannot — it must hold while the fleet's stuck handovers
	// come in a row (the work fails everywhere), or no other candidate can
	// take over — and a restart would only hand the same trouble on. Zero
	// means Options.Work.MaxCooldown (1 hour by default); a follower's
	// check never depends on it.
	WorkStuckTimeout time.Duration

	// CutOffAfter is how long Lease API calls may keep failing, with
	// nothing heard from the API meanwhile (no answer, no watch event),
	// before the check fails with ErrCutOff. Zero means twice
	// the Elector's LeaseDuration (30 s by default): by then a leader has
	// long stepped down and followers have missed every chance to take
	// over.
	CutOffAfter time.Duration
}

// HealthCheck returns a health check in the shape of controller-runtime's
// healthz.Checker: it returns nil when healthy and an error saying why
// otherwise. It fails
//
//   - with ErrWorkOverrun when a term ended more than
//     HealthOptions.WorkStopTimeout ago and its OnStartedLeading has not
//     returned: the work ignores its context. (The term's end is when it
//     was ended, or when its validity passed if the watchdog has not ended
//     it yet.) IsLeader is already false then, so nothing in Stats shows
//     this; the check reads the Elector's term itself. The same holds for
//     each shard's term and its ShardOptions.Run, and for a shard's
//     ShardOptions.Warm cancelled more than WorkStopTimeout ago; the error
//     names every shard that overran.
//   - with ErrCutOff when Lease API calls have failed in a row for more
//     than HealthOptions.CutOffAfter while Run is active, and nothing was
//     heard from the API meanwhile (no answer to a call, no watch event).
//
// It passes otherwise: for a leader or a follower whose calls succeed,
// before Run and before the first call, while degraded (Stats.Degraded)
// for less than CutOffAfter, and while Run is not active.
//
// The cut-off is timed from Stats.FailingSince, the first failure of the
// current run of failures, which ends whenever the Elector hears from the
// API. (The age of Stats.LastContact alone would not do: a watching
// follower makes no call, and hears nothing while nobody writes the Lease,
// say a released Lease that no candidate takes.) docs/operations.md says
// when a liveness probe on this check restarts pods in an outage.
//
// The returned function is safe for concurrent use and ignores the
// request. It never waits on the API, only on the Elector's mutex, briefly;
// an Elector wedged holding it would make the check hang, which a probe's
// timeout reports as a failure. If a duration in opts is negative, the
// returned check always fails, with a *FieldError for each such field
// (see FieldErrors; it matches ErrInvalidOptions).
//
// Wire it to the liveness probe (controller-runtime: AddHealthzCheck): a
// restart is the remedy for both failures. Do not make readiness follow
// leadership: followers would never be Ready, a rolling update would wait
// forever for new pods (standbys) to become Ready, and the Service would
// lose every endpoint but the leader's. Readiness should say whether the
// pod can serve its own traffic; add this check to readiness only if a pod
// cut off from the API server cannot, and mind that an API server outage
// then takes every pod out of its Services at once.
func (e *Elector) HealthCheck(opts HealthOptions) func(*http.Request) error {
	invalid := opts.Validate()
	if e.st == nil {
		invalid = errNotInitialized
	}
	if invalid != nil {
		return func(*http.Request) error { return invalid }
	}
	if opts.WorkStopTimeout == 0 {
		opts.WorkStopTimeout = e.cfg.RenewDeadline
	}
	if opts.CutOffAfter == 0 {
		opts.CutOffAfter = 2 * e.cfg.LeaseDuration
	}
	if opts.WorkStuckTimeout == 0 {
		opts.WorkStuckTimeout = e.cfg.Work.MaxCooldown
	}
	return health.Check(healthSource{e}, health.Options{
		WorkStopTimeout: opts.WorkStopTimeout, CutOffAfter: opts.CutOffAfter, WorkStuckTimeout: opts.WorkStuckTimeout,
		ErrWorkOverrun: ErrWorkOverrun, ErrCutOff: ErrCutOff,
	})
}

// Validate returns nil if HealthCheck accepts opts, or a *FieldError for
// each negative duration, joined (see FieldErrors; each matches
// ErrInvalidOptions). The zero HealthOptions is valid. It is safe for
// concurrent use; programs that build a check later (package ctrlrt) use it
// to refuse bad options up front rather than serve a check that always
// fails.
func (opts HealthOptions) Validate() error {
	var bad []error
	if opts.WorkStopTimeout < 0 {
		bad = append(bad, newFieldError("HealthOptions", "WorkStopTimeout", "is negative (%v)", opts.WorkStopTimeout))
	}
	if opts.CutOffAfter < 0 {
		bad = append(bad, newFieldError("HealthOptions", "CutOffAfter", "is negative (%v)", opts.CutOffAfter))
	}
	if opts.WorkStuckTimeout < 0 {
		bad = append(bad, newFieldError("HealthOptions", "WorkStuckTimeout", "is negative (%v)", opts.WorkStuckTimeout))
	}
	return errors.Join(bad...)
}

// HealthHandler serves a health check made by HealthCheck(opts): status
// 200 with body "ok" when it passes, 503 with the error's message when it
// fails. It suits a liveness probe's httpGet.
func (e *Elector) HealthHandler(opts HealthOptions) http.Handler {
	check := e.HealthCheck(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := check(r); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// healthSource is the Elector as its health check reads it
// (health.Source).
type healthSource struct{ e *Elector }

func (e *Elector) healthSnapshot(now time.Time) (snapshot, bool) {
	return e.st.snapshot(now), e.running.Load()
}

// Snapshot is the Elector's snapshot at now, and whether Run is active.
func (h healthSource) Snapshot(now time.Time) (health.Snapshot, bool) {
	s, running := h.e.healthSnapshot(now)
	return s.health(), running
}

// Shards snapshots the shard Electors of the current Run, in the shards'
// order. A shard Elector stays listed until its Run returned, which waits
// for its work.
func (h healthSource) Shards(now time.Time) []health.Shard {
	if h.e.shards == nil {
		return nil
	}
	var out []health.Shard
	for _, r := range h.e.shards.Running() {
		snap, _ := r.Child.healthSnapshot(now)
		out = append(out, health.Shard{Name: r.Shard, Snapshot: snap.health(), WarmCancelled: r.WarmCancelled})
	}
	return out
}

// health is what the health check reads of s.
func (s snapshot) health() health.Snapshot {
	return health.Snapshot{
		Working: s.working, WorkingTerm: s.workingTerm, WorkingEnded: s.workingEnded,
		Stuck: s.stuck, StuckAt: s.stuckAt, FailingSince: s.FailingSince, LastContact: s.LastContact,
		ConsecutiveFailures: s.ConsecutiveFailures, Degraded: s.Degraded,
	}
}
