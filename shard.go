package relect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
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
// This file is the member's side (every candidate with Shards); the
// leader's side, the assignment, is shardassign.go, and its pure rule
// internal/shardplan.

// maxShards bounds ShardOptions.Count and the number of Names: the table is
// one annotation of a Lease, whose annotations the apiserver limits to
// 256 KiB (tableBudget).
const maxShards = 1000

// annotationLimit is the apiserver's limit on a Lease's annotations, in
// bytes (apimachinery's TotalAnnotationSizeLimitB).
const annotationLimit = 256 << 10

// tableBudget is what New lets the shard table's holders and takers take
// (tableSize): annotationLimit less 16 KiB for the table Lease's other
// annotations and the table's Out entries.
const tableBudget = annotationLimit - 16<<10

// tableLimit is the size the leader lets the whole table take when it
// writes it (wire.Table.Fit): annotationLimit less 8 KiB for the table
// Lease's other annotations. Out can add to what New checked, in a fleet
// of long identities many of which fail at once.
const tableLimit = annotationLimit - 8<<10

// tableSize estimates the shard table's size, in bytes of JSON, for shards
// whose holder and taker each have an identity of idLen bytes as JSON
// (jsonLen): every shard is named twice, with an identity each time.
func tableSize(shards []string, idLen int) int {
	n := len(`{"holders":{},"takers":{}}`)
	for _, sh := range shards {
		n += 2 * (jsonLen(sh) + idLen + len(`"":"",`))
	}
	return n
}

// jsonLen is the length of s as a JSON string, without its quotes:
// encoding/json writes <, >, &, control characters and U+2028/U+2029 as
// six bytes each.
func jsonLen(s string) int {
	b, err := json.Marshal(s)
	if err != nil {
		return len(s)
	}
	return len(b) - 2
}

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
	switch {
	case s.Count < 0:
		p.bad("Shards.Count", "is negative (%d)", s.Count)
	case s.Count > 0 && len(s.Names) > 0:
		p.bad("Shards.Count", "is %d and %s has %d names: set one of them", s.Count, fieldRef("Shards.Names"), len(s.Names))
	case s.Count == 0 && len(s.Names) == 0:
		p.bad("Shards.Count", "is 0 and %s is empty: set one of them to take part in shards", fieldRef("Shards.Names"))
	case s.Count > maxShards:
		p.bad("Shards.Count", "%d is more than %d shards", s.Count, maxShards)
	case len(s.Names) > maxShards:
		p.bad("Shards.Names", "has %d names, more than %d", len(s.Names), maxShards)
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
	// The table names every shard's holder and taker: judged with
	// identities as long as this candidate's, it must fit in the Lease's
	// annotations, or the apiserver refuses every table the leader writes
	// and no shard is ever assigned.
	idLen, whose := jsonLen(o.Identity), fieldRef("Identity")
	if o.Identity == "" {
		idLen, whose = defaultIdentityLen(), fieldRef("Identity")+" left empty: the host name and 16 hex digits"
	}
	if names := s.names(); len(names) > 0 && len(names) <= maxShards {
		if size := tableSize(names, idLen); size > tableBudget {
			field := "Shards.Count"
			if len(s.Names) > 0 {
				field = "Shards.Names"
			}
			p.bad(field, "makes a shard table of about %d KiB with identities of %d bytes as JSON (%s), more than the %d KiB of the Lease's annotations it may use (the apiserver allows %d KiB): fewer shards, shorter shard names or a shorter identity",
				(size+1023)>>10, idLen, whose, tableBudget>>10, annotationLimit>>10)
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
	m := e.shards.Load()
	if m == nil {
		return nil
	}
	return m.held()
}

// shardMember is one Run's part in shards: it follows the shard table and
// runs a shard Elector for each shard the table wants this candidate to
// campaign for (as holder, or as taker of a shard whose holder stopped
// renewing).
type shardMember struct {
	ctx context.Context
	cfg *config
	gw  *gateway
	st  *state
	reg *registrar // nil if the registry is off: nothing to renew
	log func(level slog.Level, msg string, args ...any)

	wg sync.WaitGroup
	mu sync.Mutex
	// runs are the shard Electors running, by shard; one stays in it until
	// its Run returned, so that a shard wanted again meanwhile starts
	// only once the previous Elector released.
	runs map[string]*shardRun
	// renewedFor is the registration version last reported out in the
	// table, for which this member renewed its registration already.
	renewedFor string
	// given is whether the table last applied wanted this member for a
	// shard (as holder or taker).
	given bool
	// unseenFor is the registration version the table last named this
	// member Unseen with, for which it renewed its registration already
	// (unseenNone if it is not named).
	unseenFor string
}

// unseenNone is shardMember.unseenFor while the table does not name it
// Unseen: no registration version is.
const unseenNone = "\x00"

type shardRun struct {
	e      *Elector
	cancel context.CancelCauseFunc
	wanted bool
}

// errShardMoved ends a shard Elector's Run, and its term, when the table
// gives the shard to another candidate: its log and its
// EventStoppedLeading say so, not "context canceled".
var errShardMoved = errors.New("relect: the leader gave the shard to another candidate")

// startShards starts this candidate's part in shards, and returns the
// function that ends it, once every shard Elector returned (and released).
func startShards(ctx context.Context, e *Elector, reg *registrar) (wait func()) {
	mctx, cancel := context.WithCancel(ctx)
	m := &shardMember{ctx: mctx, cfg: e.cfg, gw: e.gw, st: e.st, reg: reg, log: e.logs.log, runs: map[string]*shardRun{}, unseenFor: unseenNone}
	e.shards.Store(m)
	m.wg.Go(m.follow)
	return func() {
		cancel()
		m.wg.Wait()
		e.shards.Store(nil)
	}
}

// held returns the shards whose Elector leads now.
func (m *shardMember) held() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, sh := range m.cfg.shards {
		if r := m.runs[sh]; r != nil && r.e.IsLeader() {
			out = append(out, sh)
		}
	}
	return out
}

// shardElector is one shard Elector running (shardMember.running).
type shardElector struct {
	shard string
	e     *Elector
}

// running returns the shard Electors whose Run has not returned, in the
// shards' order. It is safe for concurrent use.
func (m *shardMember) running() []shardElector {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []shardElector
	for _, sh := range m.cfg.shards {
		if r := m.runs[sh]; r != nil {
			out = append(out, shardElector{shard: sh, e: r.e})
		}
	}
	return out
}

// follow keeps the table's view until ctx is done: a list of the one Lease
// (for a version to watch from, even while it is missing), then a watch.
// A table missing, deleted or malformed changes nothing: the shards held
// stay held, each on its own Lease.
func (m *shardMember) follow() {
	defer m.want(nil)
	name := wire.ShardTableName(m.cfg.Name)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	retry := newRetryBackoff(m.cfg)
	for m.ctx.Err() == nil {
		var list *coordinationv1.LeaseList
		err := m.gw.doSpare(m.ctx, verbGetShardTable, true, func(ctx context.Context) error {
			var err error
			list, err = m.cfg.leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
			return err
		})
		if err != nil {
			if sleep(m.ctx, retry.next()) != nil {
				return
			}
			continue
		}
		for i := range list.Items {
			m.apply(&list.Items[i])
		}
		rv := list.ResourceVersion
		for m.ctx.Err() == nil {
			w, err := m.gw.watchNamed(m.ctx, name, rv, verbWatchShardTable)
			if err != nil {
				break
			}
			broken := m.read(w, &rv)
			w.Stop()
			if broken {
				break
			}
			retry.reset()
		}
		if sleep(m.ctx, retry.next()) != nil {
			return
		}
	}
}

// read applies w's events until it ends: closed (false), broken (true), or
// ctx done.
func (m *shardMember) read(w watch.Interface, rv *string) (broken bool) {
	for {
		select {
		case <-m.ctx.Done():
			return false
		case ev, open := <-w.ResultChan():
			e := m.gw.event(ev, open)
			switch e.kind {
			case watchClosed:
				return false
			case watchBroken:
				return true
			case leaseChanged:
				*rv = e.lease.ResourceVersion
				m.apply(e.lease)
			case leaseDeleted:
				if e.lease != nil {
					*rv = e.lease.ResourceVersion
					m.st.sawShardTable(e.lease.ResourceVersion, nil) // deleted by hand: the leader writes it again
				}
			case leaseProgress:
				if e.lease != nil {
					*rv = e.lease.ResourceVersion
				}
			}
		}
	}
}

// apply makes the shard Electors running those the table l wants.
func (m *shardMember) apply(l *coordinationv1.Lease) {
	t := wire.TableOf(l)
	m.st.sawShardTable(l.ResourceVersion, t)
	if t == nil {
		return
	}
	want := map[string]bool{}
	for _, sh := range m.cfg.shards {
		if t.Wants(sh, m.cfg.identity) {
			want[sh] = true
		}
	}
	m.want(want)
	v, out := t.Out[m.cfg.identity]
	uv, unseen := t.Unseen[m.cfg.identity]
	switch {
	case m.reg == nil:
	case out && v != m.renewedFor:
		// Left out as failed: a renewal of the registration, which the
		// leader sees as a sign of life, brings it back.
		m.renewedFor = v
		m.reg.renewNow()
	case unseen && uv != m.unseenFor:
		// The leader does not see its registration (deleted by hand, or
		// its weight edited) though it holds shards: a renewal brings it
		// back.
		m.reg.renewNow()
	case !out && m.given && len(want) == 0:
		// Given shards before and none now, not left out: the leader may
		// no longer see its registration (deleted by hand, or its weight
		// edited). A renewal now, not at the next RegistrationRenewal,
		// brings it back within a retry period or two; where the leader
		// only moved its last shard away (more candidates than shards),
		// it is one spare write.
		m.reg.renewNow()
	}
	m.given = len(want) > 0
	m.unseenFor = unseenNone
	if unseen {
		m.unseenFor = uv
	}
}

// want starts a shard Elector for each shard in set not running, and
// cancels those running that are not in it.
func (m *shardMember) want(set map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for sh, r := range m.runs {
		if r.wanted = set[sh]; !r.wanted {
			r.cancel(errShardMoved)
		}
	}
	for _, sh := range m.cfg.shards {
		if set[sh] && m.runs[sh] == nil {
			m.startLocked(sh)
		}
	}
}

// startLocked starts the Elector of shard. Requires mu.
func (m *shardMember) startLocked(sh string) {
	if m.ctx.Err() != nil {
		return
	}
	e, err := newShardElector(m.cfg, sh)
	if err != nil {
		m.log(slog.LevelError, "relect: cannot campaign for a shard", "lease", m.cfg.describe, "shard", sh, "err", err)
		return
	}
	ctx, cancel := context.WithCancelCause(m.ctx)
	r := &shardRun{e: e, cancel: cancel, wanted: true}
	m.runs[sh] = r
	m.wg.Go(func() {
		_ = e.Run(ctx)
		cancel(nil)
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.runs, sh)
		if r.wanted {
			m.startLocked(sh) // wanted again while it stepped down
		}
	})
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

// renewNow makes the registration's next write happen at once, unless one
// is in progress or it has ended.
func (r *registrar) renewNow() {
	r.lock()
	defer r.unlock()
	if r.ctx.Err() != nil || r.timer == nil || !r.timer.Stop() {
		return
	}
	r.timers.Done() // its function will not run
	r.setLocked(0)
}

// sawShardTable records the version of the shard table this candidate's
// member last saw, for its assigner while it leads (shardTableSeen), and
// the shards the table t names failing (Stats.ShardFailing); t nil (a
// table missing or malformed) changes nothing of those.
func (s *state) sawShardTable(rv string, t *wire.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shardTableRV = rv
	if t != nil {
		s.shardFailing = maps.Clone(t.Failing)
	}
}

// shardTableSeen returns the version of the shard table the member last
// saw: one the leader's assigner did not read or write itself is an edit
// by someone else, and it reads the table again before it plans.
func (s *state) shardTableSeen() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shardTableRV
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
