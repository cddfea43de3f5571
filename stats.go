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
	// Leading and Term are what Elector.Term returns; Fence is the
	// current term's fencing token (FenceFromContext inside its work), "" when not leading.
	Leading bool
	Term    int64
	Fence   Fence
	// ValidUntil is when the current term's validity ends unless renewed:
	// t_pub + RenewDeadline, where t_pub is when the first write whose
	// client-go view equals the last successful write's was sent — the
	// last change a client-go follower could see, since it compares whole
	// seconds (docs/design.md, "The safety argument"). Zero when not
	// leading.
	ValidUntil time.Time
	// TermsStarted counts the terms this candidate has led.
	TermsStarted uint64
	// LastRenewal is when the last successful write naming this candidate
	// (acquisition or renewal) was sent; zero if none yet.
	LastRenewal time.Time
	// LastContact is when this candidate last heard from the Lease API: an
	// answer to a call (NotFound and a conflict included), or an event
	// delivered on one of its watches (a change of the Lease or of a
	// registration). Zero if never. A watching follower makes no call
	// while the leader renews, and hears each renewal on its watch.
	LastContact time.Time
	// Calls counts Lease API calls by verb and result (see CallKey).
	Calls map[CallKey]uint64
	// BucketWait is the total time calls waited on the token bucket.
	BucketWait time.Duration
	// Backoffs counts the waits before a campaign; BackoffTime adds their
	// delays.
	Backoffs    uint64
	BackoffTime time.Duration
	// DroppedEvents counts the events dropped since New because the Events
	// buffer was full (see Elector.Events).
	DroppedEvents uint64
	// FailingSince is when the current run of failed Lease API calls
	// began; zero when none failed since this candidate last heard from
	// the API (LastContact), or none failed yet.
	FailingSince time.Time
	// ConsecutiveFailures counts Lease API calls that failed in a row
	// (NotFound, conflicts and calls abandoned because a campaign stopped
	// do not count); hearing from the API — a call that succeeds, or a
	// watch event — resets it.
	ConsecutiveFailures int
	// Degraded is true from the moment ConsecutiveFailures reaches
	// Options.DegradedAfter until this candidate next hears from the API
	// (EventDegraded, EventRecovered).
	Degraded bool

	// Work liveness (Options.Work; zero when it is off).

	// WorkStuck is true while this candidate leads and its work is stuck
	// (EventWorkStuck): no beat within Work.BeatWindow, or Work.Check
	// failing Work.CheckFailures times in a row. It leads on only while it
	// must hold (the fleet's streak of stuck handovers) or nobody else can
	// take over; otherwise its term ends at once. WorkStuckSince is when
	// that began; zero when not stuck.
	WorkStuck      bool
	WorkStuckSince time.Time
	// WorkStuckHandovers counts the terms this candidate ended because its
	// work was stuck.
	WorkStuckHandovers uint64
	// WorkStreak is, while this candidate leads, the fleet's streak of
	// stuck handovers in a row that its term took over (zero once its work
	// proved healthy, or when there was none), and WorkHoldUntil when its
	// hold ends: a stuck leader hands over no sooner (see WorkOptions).
	WorkStreak    int
	WorkHoldUntil time.Time
	// WorkCheckFailures is how many calls of Work.Check failed in a row
	// (the check runs while this candidate leads or is named in the line
	// of succession); zero after one succeeds.
	WorkCheckFailures int
	// LastBeat is when the current term's work last called Beat; zero
	// when not working, or before the first beat.
	LastBeat time.Time
	// WorkCooling are the candidates in their cooldown after a stuck
	// handover, passed over in the lines of succession, as this candidate
	// knows them — the line of the Lease it last observed, and as leader
	// its own — by identity, with when each cooldown ends on the local
	// clock (counted from when the record that carried it was first
	// observed). Nil when none; every candidate carries them, with or
	// without Options.Work.
	WorkCooling map[string]time.Time

	// Shards (Options.Shards; zero without).

	// ShardsHeld is how many shards this candidate holds now
	// (Elector.Shards).
	ShardsHeld int
	// ShardMoves counts, over this candidate's terms as leader, the shards
	// whose holder its shard table changed: an assignment, a move, a
	// taker made holder.
	ShardMoves uint64
	// ShardGaps counts, over its terms as leader, the times it saw a
	// shard's Lease taken after it was free (released, missing, or
	// expired); ShardGapTime adds how long each was free before, as it
	// observed them — the time a shard went without a holder.
	ShardGaps    uint64
	ShardGapTime time.Duration
	// ShardsFailing is, while this candidate leads, how many shards keep
	// failing: their holder gave them up, its work stuck or its Run
	// returned or panicked, and no term of theirs has lasted its
	// cooldown since (docs/design.md, "A shard whose work keeps
	// failing"); zero on a follower. ShardFailures counts, over its terms
	// as leader, each such giving up.
	ShardsFailing int
	ShardFailures uint64
	// ShardFailing are the shards whose work keeps failing as the shard
	// table this candidate last applied names them — on every candidate
	// that takes part in shards, the leader's count (ShardsFailing) as
	// the table published it — each with its failures in a row, as
	// `relect status` shows them (WORK "failing(k)"). Nil when none.
	ShardFailing map[string]int
	// ShardSetsDiffer is, while this candidate leads, how many registered
	// candidates run another shard set than its own (ShardOptions.Count
	// or Names differ: a rolling update that changes them); each is
	// warned of once, and given only shards it runs. Zero on a follower.
	ShardSetsDiffer int
}

// CallKey names a class of Lease API calls in Stats.Calls: what the call
// was for, and how it ended. Both are metric label values (package
// metrics), from closed sets.
//
// Verb, on the election's Lease: "get" (a read of it: a Get, or a List of
// it alone when a watch from its own resourceVersion got 410 Gone), "create" (its
// creation, when it is missing), "update" (an acquisition, renewal,
// release or handover), "watch" (opening a watch on it: a follower, or a
// leader); on the candidate registry: "register" (a read or write of this
// candidate's registration), "deregister" (its deletion when Run returns),
// "list-candidates" (the leader's list of the registry, or its read of one
// registration for a HandOver), "watch-candidates" (the leader's watch of
// it), "delete-candidate" (the leader's deletion of a lapsed
// registration); on the line Lease (docs/design.md, "Only the line
// watches"): "post-line" (the leader's read or write of it, or a
// follower's withdrawal of a line), "get-line" (a follower's read of it,
// a Get or a List),
// "watch-line" (a follower's watch of it); with Options.Shards
// (docs/design.md, "Shards"): "get-shard-table" and "watch-shard-table"
// (a member's list and watch of the shard table), and on the leader
// "post-shard-table" (its read or write of the table),
// "list-shard-leases" and "watch-shard-leases" (its one list and watch
// of every shard Lease) and "create-shard-lease" (a shard Lease watched
// missing for LeaseDuration, created released); with Shards.Ranges,
// "list-range-leases" and "release-shard-lease" (a range term's guard:
// docs/design.md, "Range shards"). A shard's own Lease calls are counted
// by that shard's Elector, not here.
//
// Result: "ok", "not_found" and "conflict" (409, or AlreadyExists: a lost
// race) are answers — contact with the API (Stats.LastContact) and no
// failure; "canceled" (the campaign stopped) is no failure either; the
// failures are "forbidden" (403 or 401), "throttled" (429),
// "server_error" (5xx), "timeout" (the request's deadline passed),
// "budget" (the token bucket could not grant the call before the caller's
// deadline) and "other".
type CallKey struct {
	Verb   string
	Result string
}

// The verbs and results of CallKey.
const (
	verbGet    = "get"
	verbCreate = "create"
	verbUpdate = "update"
	verbWatch  = "watch"

	// The registry's verbs are internal/registry's (registry.VerbRegister...).

	// The line Lease's verbs are internal/linelease's (linelease.VerbPost,
	// VerbGet, VerbWatch), the shards' internal/shards' (shards.VerbGetTable...).

	resultOK          = "ok"
	resultNotFound    = "not_found"
	resultConflict    = "conflict"
	resultForbidden   = "forbidden"
	resultThrottled   = "throttled"
	resultServerError = "server_error"
	resultTimeout     = "timeout"
	resultBudget      = "budget"
	resultCanceled    = "canceled"
	resultOther       = "other"
)

// CallError is the Err of an EventError for a failed Lease API call.
type CallError struct {
	// Verb is what the call was for (CallKey lists them).
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
