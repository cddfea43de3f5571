// Package registry is relect's candidate registry component
// (docs/design.md, "Succession", and the architecture's "The registry
// component"): each candidate keeps a registration — a small Lease beside
// the election's, renewed every Config.Renewal — and the election's
// leader keeps a view of them all, deleting those that lapsed long ago.
// Register keeps a candidate's registration for one Run; Watch keeps the
// leader's view for one term.
//
// The component knows the election core only through its port: a Config
// of the election's names and timings, Calls (the core's paced gateway to
// the Lease API) and Reports (what it tells the core, which keeps the
// view and warns). It never imports the root package; the root package
// imports it.
package registry

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
	// Name and Namespace are the election's Lease's; Identity is this
	// candidate's holder identity, Instance this Elector's
	// (wire.AnnotationInstance).
	Name, Namespace, Identity, Instance string
	// RetryPeriod, RenewDeadline and BackoffMax are the election's
	// (positive). Renewal is RegistrationRenewal: a registration is
	// written again that often (±10 %).
	RetryPeriod, RenewDeadline, BackoffMax, Renewal time.Duration
	// Needed is set when the registry may not turn off (with shards,
	// whose assignment needs it): a 403 is then retried as any error,
	// instead of turning the registry off (Reports.Forbidden).
	Needed bool
	// Leases is the client of the election's namespace's Leases. Every
	// call on it is made through Calls.
	Leases coordinationv1client.LeaseInterface
	// Registration returns this candidate's registration as it wants it
	// written at now: a copy of from (nil for a new one) with its fields
	// set; from is not changed.
	Registration func(from *coordinationv1.Lease, now time.Time) *coordinationv1.Lease
	// NewBackoff returns the core's exponential backoff (pace.NewBackoff):
	// initial (±50 %), doubling, at most maxWait. A function, so that the
	// tests pace retries exactly.
	NewBackoff func(initial, maxWait time.Duration) Backoff
}

// The verbs the component's calls are counted as (Stats.Calls).
const (
	VerbRegister        = "register"         // a read or write of this candidate's registration
	VerbDeregister      = "deregister"       // its deletion when Run returns
	VerbListCandidates  = "list-candidates"  // the leader's list of the registrations
	VerbWatchCandidates = "watch-candidates" // the leader's watch of them
	VerbDeleteCandidate = "delete-candidate" // the leader's deletion of a lapsed one
)

// Calls is the core's paced and counted way to the Lease API (its
// gateway): every call of the component goes through it. Its shape is
// the shards component's (shards.Calls), less Ready, plus TrySpare: one
// adapter of the core serves both.
type Calls interface {
	// Do makes one call fn, counted as verb: it waits for a token of the
	// bucket, and gives fn a context with the call timeout if bounded
	// (every call but a watch). It returns fn's error, or the wait's.
	Do(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error
	// DoSpare is Do for calls that should not delay the election's own:
	// it takes only a token the election's next calls do not need.
	DoSpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error
	// TrySpare is DoSpare for calls that may wait for a later chance: it
	// makes the call only if the bucket holds the spare tokens now, and
	// reports whether it did (tried), with the call's error. It never
	// waits for the bucket.
	TrySpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) (tried bool, err error)
	// Decode decodes what a watch opened through DoSpare delivered (open
	// is false once its channel is closed), and counts an event that
	// carries an object as contact with the API (leasewatch's one
	// decoding).
	Decode(ev watch.Event, open bool) leasewatch.Event
}

// Reports is what the component tells the core. Its methods are called
// from the component's goroutines and timers, never under a lock of the
// component's but the registration's own (Registration's writes); they
// take the core's lock, and must not call back into the component.
type Reports interface {
	// Off returns a context done once the registry is off for this
	// Elector (Forbidden): a context, not a channel, so that the
	// registration waits for it without a goroutine (context.AfterFunc).
	Off() context.Context
	// Forbidden reports that a call of verb got 403 (not Needed): the
	// registry is off from now on, and Off's context ends.
	Forbidden(verb string, err error)
	// CannotDelete reports a 403 to a deletion of verb: registrations
	// stay until someone deletes them.
	CannotDelete(verb string, err error)
	// DuplicateIdentity reports that another process seems to run with
	// this candidate's identity; how says what showed it.
	DuplicateIdentity(how string)
	// Listed replaces the leader's view with a fresh list; Changed
	// records one registration added or renewed, Gone one deleted or
	// departed (its holder emptied), by object name.
	Listed(rs []wire.Registration)
	Changed(r wire.Registration)
	Gone(name string)
	// Lapsed returns, in name order, the registrations of the leader's
	// view it has seen unchanged for twice their lease duration, on its
	// own clock: to be deleted.
	Lapsed() []Version
	// Unknown drops the leader's view: the term ended.
	Unknown()
}

// Version names a registration at one resourceVersion: what a deletion
// conditional on it needs.
type Version struct {
	Name, RV string
}

// Backoff paces retries after failed calls (Config.NewBackoff).
type Backoff interface {
	Next() time.Duration
	Reset()
}
