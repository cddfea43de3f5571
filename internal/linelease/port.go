// Package linelease is relect's line Lease component (docs/design.md,
// "Only the line watches", and the architecture's "The line Lease
// component"): the second Lease beside the election's, on which the
// leader posts its line of succession, so that only the leader, its line
// and its keeper watch the election's Lease and every other candidate — an
// outsider — watches this small Lease instead.
//
// It holds the leader's side (Want, what the leader wants posted; Post,
// which keeps the line Lease so; PostHandOver) and the outsider's (Read,
// then Follow: the watch of the line Lease until the follower must watch
// the election's Lease again, with the line's warden, internal/warden;
// Withdraw, for a holder that posts no line), and the rules both use
// (Same, PostedFor, Refresh). When an outsider goes back to the election's
// Lease, and what it does there, stays the election core's.
//
// The component knows the election core only through its port: a Config
// of the election's names and timings, Calls (the core's paced and
// counted way to the Lease API), and the Leader and Outsider interfaces,
// which the root package implements. It never imports the root package;
// the root package imports it.
//
// Safety does not depend on it: a candidate acquires only from what it
// observed of the election's Lease itself, with a conditional write.
package linelease

import (
	"context"
	"time"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Config is what the component reads of the election's configuration; it
// does not change while the election runs.
type Config struct {
	// Name and Namespace are the election's Lease's (the line Lease is
	// wire.LineName(Name), beside it); Identity is this candidate's.
	Name, Namespace, Identity string
	// LeaseDuration and RetryPeriod are the election's (positive): the
	// warden reads every warden.Period(RetryPeriod) and beats every
	// warden.Beat(LeaseDuration), and the leader's first post of a term
	// waits two retry periods at most for a line chosen from its view of
	// the registry.
	LeaseDuration, RetryPeriod time.Duration
	// Refresh is how often the leader writes its line Lease unchanged
	// (positive; the core gives Refresh's value): a line not written for
	// twice that is stale.
	Refresh time.Duration
	// Leases is the client of the election's namespace's Leases. Every
	// call on it is made through a Calls' Do or DoSpare.
	Leases coordinationv1client.LeaseInterface
}

// Refresh is the line Lease's refresh period: a third of the registration
// renewal (5 minutes by default), at least the lease duration. A line not
// written for twice that is stale.
func Refresh(registrationRenewal, leaseDuration time.Duration) time.Duration {
	return max(registrationRenewal/3, leaseDuration)
}

// The verbs the component's calls are counted as (Stats.Calls).
const (
	// VerbPost is the leader's read or write of the line Lease, or a
	// follower's withdrawal of a line.
	VerbPost = "post-line"
	// VerbGet is an outsider's read (a get, or a list of it alone).
	VerbGet = "get-line"
	// VerbWatch is an outsider's watch of it.
	VerbWatch = "watch-line"
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

// Leader is Post's port: the Elector's calls during a term, its retry
// backoff, and what posting tells the Elector's state and asks of it.
type Leader interface {
	Calls
	// NewRetry returns a fresh retry backoff.
	NewRetry() Backoff
	LeaderReports
}

// LeaderReports is what posting the line tells the Elector's state, and
// asks of it. The methods do not block (they take the state's lock).
type LeaderReports interface {
	// Wanted returns the line the leader wants posted (Want.Current),
	// whether it was chosen from its view of the registry, and a channel
	// signalled when that changes; ok is false while it wants none.
	Wanted() (line wire.Line, ok, withView bool, changed <-chan struct{})
	// Version returns the line Lease's resourceVersion as the line
	// observed (or this leader's last post) says; "" if unknown.
	Version() string
	// Posted records line, and the line Lease's resourceVersion rv, after
	// a write of it (the zero Line and "" when Post returns).
	Posted(line wire.Line, rv string)
	// Forbidden turns posting off for this Elector: the line Lease's write
	// was refused with err (403). Post returns after it.
	Forbidden(err error)
}

// Outsider is Follow's port: the follower's calls, its read of the
// election's Lease (the warden's), its rule for a new record, and what
// following tells the Elector's state.
type Outsider interface {
	Calls
	// ReadLease reads the election's Lease (one Get, paced and counted by
	// the core); NotFound for a missing Lease.
	ReadLease(ctx context.Context) (*coordinationv1.Lease, error)
	// RecordKey identifies l's leader-election record (warden.Key): two
	// reads with the same key found the same record.
	RecordKey(l *coordinationv1.Lease) string
	OutsiderReports
}

// OutsiderReports is what following the line Lease tells the Elector's
// state. The methods do not block.
type OutsiderReports interface {
	// Observed reports a line read from the line Lease: its holder leads
	// (or holds, if withdrawn), and its succession is the line observed.
	Observed(line wire.Line)
	// WardenBeat renews this candidate's registration now, as the line's
	// warden (warden.Beat): the leader sees its warden alive by it.
	WardenBeat()
}
