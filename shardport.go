package relect

import (
	"context"
	"log/slog"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/logq"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/shards"
)

// The core's side of the shards component (internal/shards): the
// component's Config, built once from the election's, and its ports — the
// member's (the Elector's gateway and registration) and the assigner's (a
// gateway of the term's own, the registry's view and Stats). The component
// never imports this package; its child Electors are started by the
// function joinShards gives it (newShardElector).

// shardChild is the child Elector of a shard, as the core reads it: the
// component runs it, HealthCheck reads its snapshot.
type shardChild interface {
	shards.Child
	healthSnapshot(now time.Time) (snap snapshot, running bool)
}

// shardsPart is an Elector's part in shards (the component).
type shardsPart = shards.Shards[shardChild]

// newShardsOf returns the shards component of cfg's election; nil without
// shards.
func newShardsOf(cfg *config) *shardsPart {
	if cfg.shards == nil {
		return nil
	}
	return shards.New[shardChild](shards.Config{
		Name: cfg.Name, Namespace: cfg.Namespace, Identity: cfg.identity, Describe: cfg.describe,
		Shards: cfg.shards, Ranges: string(cfg.Shards.Ranges), LeaseDuration: cfg.LeaseDuration, RetryPeriod: cfg.RetryPeriod,
		JoinDelay: cfg.Shards.JoinDelay, Cooldown: shardCooldown(cfg), MaxCooldown: shardMaxCooldown(cfg),
		Leases: cfg.leases, Warm: cfg.Shards.Warm,
	})
}

// shardCooldown and shardMaxCooldown pace cfg's failing shards
// (internal/shardpace): from Shards.Work.Cooldown doubling to its
// MaxCooldown with work liveness — the cooldowns a shard's own release
// record publishes — else from LeaseDuration doubling to an hour
// (WorkOptions' default).
func shardCooldown(cfg *config) time.Duration {
	if w := cfg.Shards.Work; w.enabled() {
		return w.Cooldown
	}
	return cfg.LeaseDuration
}

func shardMaxCooldown(cfg *config) time.Duration {
	if w := cfg.Shards.Work; w.enabled() {
		return w.MaxCooldown
	}
	return max(defaults.WorkMaxCooldown, cfg.LeaseDuration)
}

// joinShards starts this candidate's part in shards, s, for one Run
// (through core, the Elector's gateway, with reg, its registration, nil if
// none), and returns the function that ends it, once every shard Elector
// returned (and released).
func joinShards(ctx context.Context, s *shardsPart, core shardCore, reg *registry.Registration) (wait func()) {
	return s.Join(ctx, &shardMember{shardCore: core, reg: reg}, func(sh string, guard *shards.Guard) (shardChild, error) {
		e, err := newShardElector(core.cfg, sh, guard)
		if err != nil {
			return nil, err
		}
		return e, nil
	})
}

// assignShards returns what the election's leader runs during each term
// beside its work, for the campaign: the shards' assignment, while the
// term's context lasts, with a token bucket of its own (RateLimit and
// RateBurst, as the election's): the assignment's calls never delay a
// renewal, nor wait for one. Nil without shards.
func assignShards(s *shardsPart, cfg *config, st *state, logs *logq.Queue) func(context.Context) {
	if s == nil {
		return nil
	}
	return func(ctx context.Context) {
		term, _ := TermFromContext(ctx)
		s.Assign(ctx, int32(term), &shardLeader{shardCore: shardCore{gatewayCalls: gatewayCalls{newGateway(cfg, st)}, cfg: cfg, logs: logs}, st: st})
	}
}

// shardCore implements shards.Core over a gateway: its Calls (Do,
// DoSpare, Ready, Decode) are gatewayCalls, which the registry uses too.
type shardCore struct {
	gatewayCalls
	cfg  *config
	logs *logq.Queue
}

var _ shards.Core = shardCore{}

func (c shardCore) NewRetry() shards.Backoff { return newRetryBackoff(c.cfg) }

func (c shardCore) Log(level slog.Level, msg string, args ...any) { c.logs.Log(level, msg, args...) }

// shardMember is the member's port: the Elector's gateway and its
// registration.
type shardMember struct {
	shardCore
	reg *registry.Registration // nil if the registry is off: nothing to renew
}

var _ shards.Member = (*shardMember)(nil)

func (m *shardMember) RenewRegistration() {
	if m.reg != nil {
		m.reg.RenewNow()
	}
}

// shardLeader is the assigner's port: a gateway of the term's own, and the
// state's view of the registry and its Stats.
type shardLeader struct {
	shardCore
	st *state
}

var _ shards.Leader = (*shardLeader)(nil)

func (l *shardLeader) Registrations(now time.Time) (regs []shards.Registration, loaded bool) {
	s := l.st
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.succession
	if !g.HasView() {
		return nil, false
	}
	for c := range g.View() {
		if c.Live(now) && !c.Standby && c.ShardWeight > 0 {
			regs = append(regs, shards.Registration{Identity: c.Identity, Weight: c.ShardWeight, RV: c.RV, Set: c.ShardSet, Instance: c.Instance})
		}
	}
	return regs, true
}

func (l *shardLeader) RegistrationVersions(ids []string) map[string]string {
	if len(ids) == 0 {
		return nil
	}
	s := l.st
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, id := range ids {
		out[id] = ""
	}
	for c := range s.succession.View() {
		if _, ok := out[c.Identity]; ok {
			out[c.Identity] = c.RV
		}
	}
	return out
}

// stats changes the state's Stats under its mutex.
func (l *shardLeader) stats(f func(*Stats)) {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	f(&l.st.stats)
}

func (l *shardLeader) Gap(d time.Duration) {
	l.stats(func(s *Stats) { s.ShardGaps++; s.ShardGapTime += d })
}

func (l *shardLeader) Moved(n int)         { l.stats(func(s *Stats) { s.ShardMoves += uint64(n) }) }
func (l *shardLeader) Failed()             { l.stats(func(s *Stats) { s.ShardFailures++ }) }
func (l *shardLeader) SetFailing(n int)    { l.stats(func(s *Stats) { s.ShardsFailing = n }) }
func (l *shardLeader) SetSetsDiffer(n int) { l.stats(func(s *Stats) { s.ShardSetsDiffer = n }) }
