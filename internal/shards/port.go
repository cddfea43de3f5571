// Package shards is relect's shards component (docs/design.md, "Shards",
// and the architecture's "The shards component"): the member, which
// follows the shard table and runs a child Elector for each shard the
// table gives its candidate, and the assigner, which writes that table
// during each term of the election's leader. The assignment rule itself is
// internal/shardplan, the pacing of failing shards internal/shardpace.
//
// The component knows the election core only through its port: a Config
// of the election's names and timings, and the Core, Member and Leader
// interfaces, which the root package implements. It never imports the
// root package; the root package imports it.
package shards

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/relect/relect/internal/leasewatch"
)

// Config is what the component reads of the election's configuration; it
// does not change while the election runs.
type Config struct {
	// Name and Namespace are the election's Lease's; Identity is this
	// candidate's; Describe names the election in logs ("ns/name").
	Name, Namespace, Identity, Describe string
	// Shards are the shard names this candidate runs, in the order of its
	// configuration.
	Shards []string
	// Ranges is ShardOptions.Ranges: the field whose hash the shards
	// split, "" when they split no data.
	Ranges string
	// LeaseDuration and RetryPeriod are the election's (positive).
	LeaseDuration, RetryPeriod time.Duration
	// JoinDelay is ShardOptions.JoinDelay, resolved.
	JoinDelay time.Duration
	// Cooldown and MaxCooldown pace a shard whose work keeps failing
	// (shardpace.New): the first cooldown, doubling up to the second.
	Cooldown, MaxCooldown time.Duration
	// Leases is the client of the election's namespace's Leases. Every
	// call on it is made through a Calls' Do or DoSpare.
	Leases coordinationv1client.LeaseInterface
	// Warm is ShardOptions.Warm: the member calls it for each shard it
	// campaigns for, from before the child starts until after it
	// returned (warm.go); nil: no call.
	Warm func(ctx context.Context)
}

// The verbs the component's calls are counted as (Stats.Calls).
const (
	VerbGetTable         = "get-shard-table"
	VerbWatchTable       = "watch-shard-table"
	VerbPostTable        = "post-shard-table"
	VerbListShardLeases  = "list-shard-leases"
	VerbWatchShardLeases = "watch-shard-leases"
	VerbCreateShardLease = "create-shard-lease"
	// VerbListRangeLeases and VerbReleaseShardLease are a range shard's
	// guard's (Guard): its list of the range shard Leases at each
	// campaign's and term's start, and its release of a Lease of another
	// split that it waited out.
	VerbListRangeLeases   = "list-range-leases"
	VerbReleaseShardLease = "release-shard-lease"
)

// Calls is the core's paced and counted way to the Lease API (its
// gateway): every call of the component goes through it.
type Calls interface {
	// Do makes one call fn, counted as verb: it waits for a token of the
	// bucket, and gives fn a context with the call timeout if bounded
	// (every call but a watch). It returns fn's error, or the wait's.
	Do(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error
	// DoSpare is Do for calls that should not delay the election's own:
	// it takes only a token the election's next calls do not need.
	DoSpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error
	// Ready waits until the bucket holds a token, without taking it, or
	// ctx is done (its error).
	Ready(ctx context.Context) error
	// Decode decodes what a watch opened through Do delivered (open is
	// false once its channel is closed), and counts an event that carries
	// an object as contact with the API.
	Decode(ev watch.Event, open bool) leasewatch.Event
}

// Backoff paces retries after failed calls (the core's retry backoff:
// RetryPeriod doubling to BackoffMax, with jitter).
type Backoff interface {
	Next() time.Duration
	Reset()
}

// Core is what both sides of the component need from the election core.
type Core interface {
	Calls
	// NewRetry returns a fresh retry backoff.
	NewRetry() Backoff
	// Log logs through the Elector's log queue (it never blocks).
	Log(level slog.Level, msg string, args ...any)
}

// Member is the member's port (Join): the Elector's calls, and its
// registration.
type Member interface {
	Core
	// RenewRegistration makes the candidate's registration's next write
	// happen at once (unless one is in progress, or the registry is off).
	RenewRegistration()
}

// Leader is the assigner's port (Assign): calls paced by a token bucket of
// the term's own, the leader's view of the registry, and the counters of
// Stats.
type Leader interface {
	Core
	// Registrations returns the live registered candidates that take part
	// in shards (not standing by, a weight); loaded is false while the
	// leader has not listed the registry.
	Registrations(now time.Time) (regs []Registration, loaded bool)
	// RegistrationVersions returns the resourceVersion of each of ids'
	// registrations in the view of the registry ("" for one missing); nil
	// for no ids.
	RegistrationVersions(ids []string) map[string]string
	Counters
}

// Counters are the Stats the assigner keeps.
type Counters interface {
	// Gap counts a shard seen taken after it was free for d (ShardGaps,
	// ShardGapTime).
	Gap(d time.Duration)
	// Moved counts n shards whose holder a table write changed
	// (ShardMoves).
	Moved(n int)
	// Failed counts one failure of a shard's work (ShardFailures).
	Failed()
	// SetFailing and SetSetsDiffer record ShardsFailing and
	// ShardSetsDiffer as the last plan found them (0 once the term ends).
	SetFailing(n int)
	SetSetsDiffer(n int)
}

// Registration is a live registered candidate that takes part in shards,
// as the leader's view of the registry has it.
type Registration struct {
	Identity string
	Weight   int32
	RV       string // its registration's resourceVersion
	Set      string // its wire.AnnotationShardSet; "" if none
	Instance string // its wire.AnnotationInstance: another after a restart
}
