package relect

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect/internal/shards"
	"github.com/relect/relect/internal/wire"

	"k8s.io/apimachinery/pkg/util/validation"
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
// This file is the options and the child Elector of a shard; the member
// and the assigner are the component internal/shards (its port is
// shardport.go), the pure rule internal/shardplan.

// ShardOptions split work over the fleet (Options.Shards): S shards, fixed
// by configuration (the same on every candidate), each held by one
// candidate at a time, which runs Run for it. The election's leader assigns
// them to the live registered candidates that take part — balanced by
// Weight, and sticky: a shard moves only when its holder leaves, fails, or
// holds more than its share. The zero value turns shards off, at no cost:
// no call, no goroutine, no change to the election.
//
// Shards need the candidate registry (Config or Client, and not
// DisableRegistry); a Standby candidate takes no part. Each shard's Lease
// is named after the election's and the shard (operator.ListShards gives
// each one's name), and the table is a Lease beside them: the RBAC of the
// election's Lease (leases in its namespace) covers them.
type ShardOptions struct {
	// Count numbers the shards "0" to "Count-1". Set Count or Names, not
	// both; at most 1,000. The shard table names each shard's holder and
	// taker in one annotation of 240 KiB at most: New refuses shards that,
	// with identities as long as this candidate's (as JSON writes them:
	// "<", ">", "&" take six bytes), would not fit (1,000 numbered shards
	// fit identities of up to about 110 bytes).
	Count int
	// Names names the shards: each a DNS label (RFC 1123, at most 63
	// bytes, which the shard's Lease name carries), all different; at most
	// 1,000.
	Names []string

	// Run does the work of one shard for one term of holding it. Required.
	// It is called in a goroutine relect owns, once per term, with a
	// context that carries the shard (ShardFromContext), the term's number
	// (TermFromContext) and its fencing token (FenceFromContext) — the
	// shard's own, which only grows, as the election's does — and that is
	// cancelled when the shard may have passed to another candidate: at
	// the latest RenewDeadline after the last successful renewal of the
	// shard's Lease was sent, when the table gives the shard to someone
	// else, or when Run's context is done. The shard's Lease is released
	// (and its next holder starts) only after Run returned. A panic is
	// recovered and ends that term, as for OnStartedLeading. Calls for
	// different shards run at once. A Run that has not returned
	// HealthOptions.WorkStopTimeout after its term ended fails the
	// Elector's HealthCheck (ErrWorkOverrun, naming the shard): once the
	// shard's Lease expires another candidate takes it, released or not.
	Run func(ctx context.Context)

	// Weight is this candidate's share: a candidate of weight 2 holds
	// twice the shards of one of weight 1 (to within one). Zero means 1;
	// negative is refused.
	Weight int32

	// JoinDelay is how long the leader must have seen a candidate
	// registered before it gives it shards, so that a rolling restart does
	// not move each shard onto every new pod in turn. Zero means
	// LeaseDuration. Candidates that hold shards, and every candidate
	// while no shard Lease is held at all (a first deployment, whose shard
	// Leases are still missing), are given shards at once.
	JoinDelay time.Duration

	// Work is work liveness for each shard, with Options.Work's rules and
	// defaults: a holder whose shard work is stuck releases that shard,
	// which the leader gives to another candidate. Its Check is called
	// for each shard held, with a context that ShardFromContext reads.
	// A shard whose work keeps failing — stuck, or its Run returning or
	// panicking — is paced by one rule: the k-th failure in a row passes
	// its holder over for that shard for Cooldown × 2^(k−1), at most
	// MaxCooldown (without Work: LeaseDuration × 2^(k−1), at most an
	// hour), the cooldown its release record publishes; each failure is a
	// Warn log, and Stats.ShardsFailing counts them on the leader.
	Work WorkOptions
}

// enabled reports whether o asks for shards at all: any field set, so that
// a Weight, JoinDelay or Work without Count or Names fails in New instead
// of turning shards off silently.
func (o *ShardOptions) enabled() bool {
	return o.Count != 0 || len(o.Names) > 0 || o.Run != nil || o.Weight != 0 || o.JoinDelay != 0 || o.Work.enabled()
}

// names returns the shard names o configures; nil without shards.
func (o *ShardOptions) names() []string {
	if len(o.Names) > 0 {
		return slices.Clone(o.Names)
	}
	if o.Count <= 0 {
		return nil
	}
	out := make([]string, o.Count)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// resolveShards defaults and checks Options.Shards, if it is on.
func resolveShards(o *Options, durationsOK bool, p *problems) {
	s := &o.Shards
	if !s.enabled() {
		return
	}
	resolveShardNames(s, p)
	if s.Run == nil {
		p.bad("Shards.Run", "is nil")
	}
	switch {
	case s.Weight < 0:
		p.bad("Shards.Weight", "is negative (%d)", s.Weight)
	case s.Weight == 0:
		s.Weight = 1
	}
	switch {
	case s.JoinDelay < 0:
		p.bad("Shards.JoinDelay", "is negative (%v)", s.JoinDelay)
	case s.JoinDelay == 0 && durationsOK:
		s.JoinDelay = o.LeaseDuration
	}
	switch {
	case o.Lock != nil:
		p.bad("Shards", "is set, but %s is too: shards need the candidate registry, which a %s has not", fieldRef("Lock"), fieldRef("Lock"))
	case o.DisableRegistry:
		p.bad("Shards", "is set, but %s is too: the leader assigns shards to the registered candidates", fieldRef("DisableRegistry"))
	}
	resolveWork(&s.Work, "Shards.Work", false, p)
	resolveShardTable(o, p)
}

// resolveShardNames checks Shards.Count and Names.
func resolveShardNames(s *ShardOptions, p *problems) {
	switch {
	case s.Count < 0:
		p.bad("Shards.Count", "is negative (%d)", s.Count)
	case s.Count > 0 && len(s.Names) > 0:
		p.bad("Shards.Count", "is %d and %s has %d names: set one of them", s.Count, fieldRef("Shards.Names"), len(s.Names))
	case s.Count == 0 && len(s.Names) == 0:
		p.bad("Shards.Count", "is 0 and %s is empty: set one of them to take part in shards", fieldRef("Shards.Names"))
	case s.Count > shards.MaxShards:
		p.bad("Shards.Count", "%d is more than %d shards", s.Count, shards.MaxShards)
	case len(s.Names) > shards.MaxShards:
		p.bad("Shards.Names", "has %d names, more than %d", len(s.Names), shards.MaxShards)
	}
	seen := map[string]bool{}
	for i, n := range s.Names {
		field := fmt.Sprintf("Shards.Names[%d]", i)
		switch msgs := validation.IsDNS1123Label(n); {
		case len(msgs) > 0:
			p.bad(field, "%q is not a DNS label: %s", n, msgs[0])
		case seen[n]:
			p.bad(field, "%q is named twice", n)
		}
		seen[n] = true
	}
}

// resolveShardTable checks that the shard table fits the Lease's
// annotations. The table names every shard's holder and taker: judged with
// identities as long as this candidate's, it must fit, or the apiserver
// refuses every table the leader writes and no shard is ever assigned.
func resolveShardTable(o *Options, p *problems) {
	s := &o.Shards
	idLen, whose := shards.JSONLen(o.Identity), fieldRef("Identity")
	if o.Identity == "" {
		idLen, whose = defaultIdentityLen(), fieldRef("Identity")+" left empty: the host name and 16 hex digits"
	}
	if names := s.names(); len(names) > 0 && len(names) <= shards.MaxShards {
		if size := shards.TableSize(names, idLen); size > shards.TableBudget {
			field := "Shards.Count"
			if len(s.Names) > 0 {
				field = "Shards.Names"
			}
			p.bad(field, "makes a shard table of about %d KiB with identities of %d bytes as JSON (%s), more than the %d KiB of the Lease's annotations it may use (the apiserver allows %d KiB): fewer shards, shorter shard names or a shorter identity",
				(size+1023)>>10, idLen, whose, shards.TableBudget>>10, shards.AnnotationLimit>>10)
		}
	}
}

type shardKey struct{}

// ShardFromContext returns the shard that the context of ShardOptions.Run,
// or of ShardOptions.Work.Check, is for; ok is false for any other context
// (OnStartedLeading's and Options.Work.Check's included).
func ShardFromContext(ctx context.Context) (shard string, ok bool) {
	shard, ok = ctx.Value(shardKey{}).(string)
	return shard, ok
}

// Shards returns the shards this candidate holds now, in the order of the
// configuration: those whose term is serving, exactly as IsLeader answers
// for the election (a shard's IsLeader). It never blocks on the API and is
// safe for concurrent use; nil while Run is not active or without shards.
func (e *Elector) Shards() []string {
	if e.cfg == nil {
		return nil
	}
	if e.shards == nil {
		return nil
	}
	return e.shards.Held()
}

// newShardElector is the Elector of shard sh of the election cfg is for:
// the same identity, durations, pacing, client and logger; the shard's
// Lease; no registry; Shards.Run as its work, and Shards.Work as its work
// liveness.
func newShardElector(cfg *config, sh string) (*Elector, error) {
	o := cfg.Options
	o.Name = wire.ShardLeaseName(cfg.Name, sh)
	o.Identity = cfg.identity
	o.DisableRegistry, o.Priority, o.Standby, o.KeepLeaseOnCancel = true, 0, false, false
	run := cfg.Shards.Run
	o.OnStartedLeading = func(ctx context.Context) { run(context.WithValue(ctx, shardKey{}, sh)) }
	if _, plain := o.Logger.Handler().(defaultWarnings); !plain {
		o.Logger = slog.New(shardLogs{h: o.Logger.Handler(), shard: sh})
	}
	o.OnStoppedLeading, o.OnNewLeader, o.EventRecorder = nil, nil, nil
	o.Work = cfg.Shards.Work
	if check := o.Work.Check; check != nil {
		o.Work.Check = func(ctx context.Context) error { return check(context.WithValue(ctx, shardKey{}, sh)) }
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
	c.leaseLabels = map[string]string{wire.LabelShardOf: wire.CandidateOf(cfg.Name)}
	return newElector(c), nil
}

// shardLogs is a shard Elector's log handler: each record carries the
// shard, and at Info only the shard's terms are said (started-leading,
// stopped-leading, released); the rest of a shard's Info — client-go's
// acquire lines, new-leader — goes to Debug, so that S shards do not
// multiply the election's Info lines by S.
type shardLogs struct {
	h     slog.Handler
	shard string
}

// shardInfo are the messages a shard keeps at Info.
var shardInfo = map[string]bool{
	"relect: " + EventStartedLeading.String(): true,
	"relect: " + EventStoppedLeading.String(): true,
	"relect: " + EventReleased.String():       true,
}

func (s shardLogs) Enabled(ctx context.Context, level slog.Level) bool {
	return s.h.Enabled(ctx, level)
}

func (s shardLogs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone() // r may share its attributes with the caller's
	if r.Level == slog.LevelInfo && !shardInfo[r.Message] {
		if !s.h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	r.AddAttrs(slog.String("shard", s.shard))
	return s.h.Handle(ctx, r)
}

func (s shardLogs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return shardLogs{h: s.h.WithAttrs(attrs), shard: s.shard}
}

func (s shardLogs) WithGroup(name string) slog.Handler {
	return shardLogs{h: s.h.WithGroup(name), shard: s.shard}
}
