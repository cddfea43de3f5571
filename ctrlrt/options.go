package ctrlrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The names under which NewManager adds its checks to the manager's
// health probes (manager.Options.HealthProbeBindAddress serves them at
// /healthz and /readyz, and each at /healthz/<name> and /readyz/<name>).
const (
	// HealthzCheckName is relect's health check (Elector.HealthCheck with
	// Options.Health), for the liveness probe: it fails when the process is
	// cut off from the API server for too long, or when a term's
	// controllers do not return after it ended — both cured by a restart.
	HealthzCheckName = "relect"

	// ReadyzCheckName is the readiness check: it fails with ErrNotWarm
	// until this replica has synced the informers of Options.Informers and
	// campaigns, and passes from then on, whether it leads or not. A
	// rolling update therefore waits for a new pod to be able to take over
	// with a warm cache before it stops the next old one; readiness never
	// follows leadership (docs/operations.md, "Liveness vs readiness").
	ReadyzCheckName = "relect-informers"
)

// SetupFunc builds the leader-only controllers and runnables of one term
// on mgr, the term's manager. See Options.Setup.
type SetupFunc func(ctx context.Context, mgr manager.Manager) error

// Options configure NewManager: relect's election, and the leader-only work
// of each term. Setup (or ShardSetup) is required; the zero value of every
// other field selects the default its comment gives.
type Options struct {
	// Elector configures relect's Elector (see relect.Options): where the
	// Lease is, the identity, the durations (15 s, 10 s, 2 s by default),
	// priority, events, work liveness. With none of Config, Client and Lock
	// set, relect builds its Lease client from the manager's rest.Config.
	// A nil Logger selects the manager's logger, named "relect".
	// OnStartedLeading must be nil: ctrlrt's own runs each term.
	// OnStoppedLeading, if set, is called after each term, once its
	// controllers have returned and the lease was released.
	Elector relect.Options

	// Setup builds one term's leader-only controllers and runnables on mgr,
	// the term's manager. Required, unless ShardSetup is set (nil: the
	// election's terms build nothing). It is called at the start of every
	// term, with the term's context (relect.TermFromContext and
	// relect.FenceFromContext work on it), from the goroutine that runs the
	// term; the controllers and runnables it adds to mgr are started once
	// it has returned, each with the term's context, and stop when the
	// term ends. If it returns an error or panics, nothing it added is
	// started and the term ends at once, which releases the lease (the
	// next campaign waits relect's backoff).
	//
	// mgr is the long-lived manager as the term sees it: its client,
	// scheme, REST mapper and event recorders are the manager's; its
	// cache is the manager's cache, whose event handlers the term removes
	// when it ends; GetControllerOptions skips the name validation of
	// controllers (a term's controllers bear the names of the last term's);
	// Add starts a runnable within the term (all of them, whatever their
	// NeedLeaderElection); Elected is closed. IndexField on its field
	// indexer indexes a field once for the process and does nothing in
	// later terms. It refuses what must be done once before the manager
	// starts (ErrNotPerTerm): Start, health and readiness checks, metrics
	// handlers, indexers added to an informer directly. Register webhooks
	// on the Manager before it starts, not here: the webhook server
	// panics on a path registered twice.
	Setup SetupFunc

	// Informers are objects of the types whose informers every replica
	// starts, and waits to be synced, before it campaigns, so that a
	// replica's first promotion lists nothing (and ReadyzCheckName passes
	// once they are). List every type the leader-only controllers watch
	// or read. A type left out is listed when a term first asks for it,
	// and kept from then on.
	Informers []client.Object

	// ShardSetup, if set, builds the controllers of one term of one of
	// relect's shards (Elector.Shards: Count or Names, Weight, JoinDelay,
	// Ranges; its Run and Warm must be nil, ctrlrt runs them). It is
	// called at the start of every shard term this replica holds, with
	// the term's context (relect.ShardFromContext, TermFromContext,
	// FenceFromContext, and for range shards shardrange.FromContext work
	// on it) and mgr, the shard term's manager: as Setup's, except that
	// for range shards its cache is the shard's own — a cache made as the
	// manager's (manager.Options.NewCache and Cache), whose informers list
	// and watch only the shard's range (shardrange.NewListerWatcher: the
	// apiserver filters when its ShardedListAndWatch gate is on, the
	// replica otherwise) — and its client reads from that cache the types
	// it holds, and every other type as the manager's client does. The
	// shard's cache is started when this replica begins to campaign for
	// the shard, as its holder or as its taker, and stopped when it stops
	// (relect.ShardOptions.Warm): a replica that takes a shard over starts
	// its controllers on a synced cache. A shard term starts its
	// controllers only once that cache has synced the informers of
	// ShardInformers; if they cannot be started, the term ends at once.
	// Calls for different shards run at once, each from the goroutine
	// that runs its term.
	// The manager's own cache holds nothing for the shards. For plain
	// shards (no Ranges), mgr's cache is the manager's. Nil (the
	// default): no per-shard controllers.
	ShardSetup SetupFunc

	// ShardInformers are objects of the types whose informers each
	// shard's cache starts, and waits to be synced, before the shard's
	// first term on this replica (for plain shards, in the manager's
	// cache). List every type the shard controllers watch or read. A type
	// left out is listed when a term first asks for it, and kept while the
	// replica campaigns for the shard. Needs ShardSetup.
	ShardInformers []client.Object

	// Health configures HealthzCheckName, the liveness check (see
	// relect.HealthOptions; the zero value selects its defaults).
	Health relect.HealthOptions
}

// check checks the options that do not depend on the manager and returns
// every problem, joined.
func (o *Options) check(config *rest.Config, mo *manager.Options) error {
	var errs []error
	bad := func(field, problem string) {
		errs = append(errs, fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, problem))
	}
	if config == nil {
		bad("config", "is nil")
	}
	if mo.LeaderElection || mo.LeaderElectionResourceLockInterface != nil {
		errs = append(errs, fmt.Errorf("%w: manager.Options.LeaderElection and LeaderElectionResourceLockInterface must be unset: "+
			"relect elects (to keep the manager's election, use NewLock instead)", ErrManagerElection))
	}
	if o.Setup == nil && o.ShardSetup == nil {
		bad("Options.Setup", "is nil (and so is Options.ShardSetup)")
	}
	if o.Elector.OnStartedLeading != nil {
		bad("Options.Elector.OnStartedLeading", "is set: ctrlrt runs each term (put the term's work in Options.Setup)")
	}
	o.checkShards(bad)
	for i, obj := range o.Informers {
		if obj == nil || isNil(obj) {
			bad(fmt.Sprintf("Options.Informers[%d]", i), "is nil")
		}
	}
	if err := o.Health.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: Options.Health: %w", ErrInvalidOptions, err))
	}
	return errors.Join(errs...)
}

// electorOptions returns the Elector's options: o.Elector with the
// manager's config and logger as defaults, and lead as OnStartedLeading.
func (o *Options) electorOptions(config *rest.Config, log logr.Logger, lead func(context.Context)) relect.Options {
	eo := o.Elector
	if eo.Config == nil && eo.Client == nil && eo.Lock == nil {
		eo.Config = config
	}
	if eo.Logger == nil {
		eo.Logger = slog.New(logr.ToSlogHandler(log.WithName("relect")))
	}
	eo.OnStartedLeading = lead
	return eo
}

// checkShards checks ShardSetup and ShardInformers.
func (o *Options) checkShards(bad func(field, problem string)) {
	s := &o.Elector.Shards
	if o.ShardSetup == nil {
		if len(o.ShardInformers) > 0 {
			bad("Options.ShardInformers", "is set, and Options.ShardSetup is nil")
		}
		if s.Run == nil && (s.Count != 0 || len(s.Names) > 0 || s.Ranges != "") {
			bad("Options.ShardSetup", "is nil, and Options.Elector.Shards asks for shards: set ShardSetup to run controllers per shard (or Shards.Run for work of your own)")
		}
		return
	}
	if s.Run != nil {
		bad("Options.Elector.Shards.Run", "is set: ctrlrt runs each shard term (put the shard's work in Options.ShardSetup)")
	}
	if s.Warm != nil {
		bad("Options.Elector.Shards.Warm", "is set: ctrlrt warms each shard's cache (list its types in Options.ShardInformers)")
	}
	for i, obj := range o.ShardInformers {
		if obj == nil || isNil(obj) {
			bad(fmt.Sprintf("Options.ShardInformers[%d]", i), "is nil")
		}
	}
}
