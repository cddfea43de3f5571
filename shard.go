package relect

import (
	"context"
	"log/slog"

	"github.com/relect/relect/internal/logq"
	"github.com/relect/relect/internal/shards"
)

// Shards: the leader-only work split over the fleet (docs/design.md,
// "Shards"). Each shard is an election of its own — a Lease beside the
// election's, held by one candidate at a time with the same rules, the
// same bound on its context and the same fencing token as the leader's —
// and the leader only says who campaigns for which: it writes the shard
// table, and every candidate that takes part follows that one Lease and
// runs one shard Elector (an Elector of this package, registry off) for
// each shard the table gives it. The table decides who tries, never who
// holds: two candidates that both believe a shard theirs meet at its
// Lease's conditional write, as two followers of the election do.
//
// This file is the child Elector of a shard (its options are options.go's
// ShardOptions); the member
// and the assigner are the component internal/shards (its port is
// shardport.go), the pure rule internal/shardplan.

// ShardFromContext returns the shard that the context of ShardOptions.Run,
// Warm or Work.Check is for; ok is false for any other context
// (OnStartedLeading's and Options.Work.Check's included).
func ShardFromContext(ctx context.Context) (shard string, ok bool) {
	return shards.FromContext(ctx)
}

// Shards returns the shards this candidate holds now, in the order of the
// configuration: those whose term is serving, exactly as IsLeader answers
// for the election (a shard's IsLeader). It never blocks on the API and is
// safe for concurrent use; nil while Run is not active or without shards.
func (e *Elector) Shards() []string {
	if e.cfg == nil || e.shards == nil {
		return nil
	}
	return e.shards.Held()
}

// newShardElector is the Elector of shard sh of the election cfg is for:
// the same identity, durations, pacing, client and logger; the shard's
// Lease; no registry; Shards.Run as its work, once guard lets it start
// (shards.Guard; nil: at once), and Shards.Work as its work liveness.
func newShardElector(cfg *config, sh string, guard *shards.Guard) (*Elector, error) {
	o := cfg.Options
	name, labels := shards.LeaseOf(cfg.Name, cfg.Shards.Ranges, cfg.Shards.Count, sh)
	o.Name = name
	o.Identity = cfg.identity
	o.DisableRegistry, o.Priority, o.Standby, o.KeepLeaseOnCancel = true, 0, false, false
	run, termCtx := cfg.Shards.Run, shards.TermContext(cfg.Shards.Ranges, cfg.Shards.Count, sh)
	o.OnStartedLeading = guard.Before(Beat, func(ctx context.Context) { run(termCtx(ctx)) })
	if _, plain := o.Logger.Handler().(logq.DefaultWarnings); !plain {
		o.Logger = slog.New(shards.Logs(o.Logger.Handler(), sh, shardInfo))
	}
	o.OnStoppedLeading, o.OnNewLeader, o.EventRecorder = nil, nil, nil
	o.Work = cfg.Shards.Work
	if check := o.Work.Check; check != nil {
		o.Work.Check = func(ctx context.Context) error { return check(termCtx(ctx)) }
	}
	o.Shards = ShardOptions{}
	o.RegistrationRenewal = 0
	var p problems
	resolveSource(&o, &p)
	if len(p) > 0 {
		return nil, p[0]
	}
	c, err := build(o, cfg.leases)
	if err != nil {
		return nil, err
	}
	c.shard = sh
	c.leaseLabels = labels
	return newElector(c), nil
}

// shardInfo are the messages a shard's log keeps at Info (shards.Logs).
var shardInfo = map[string]bool{
	"relect: " + EventStartedLeading.String(): true,
	"relect: " + EventStoppedLeading.String(): true,
	"relect: " + EventReleased.String():       true,
}
