package shards

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// The member's side of shards (every candidate with Shards): it follows
// the shard table and runs a child Elector for each shard the table wants
// this candidate to campaign for (as holder, or as taker of a shard whose
// holder stopped renewing). The table decides who tries, never who holds:
// two candidates that both believe a shard theirs meet at its Lease's
// conditional write.

// Child is the Elector of one shard: the root package's *Elector, which
// the member starts through the function Join is given.
type Child interface {
	// Run campaigns for the shard's Lease until ctx is done, and returns
	// once its work returned and it released.
	Run(ctx context.Context) error
	// IsLeader reports whether the child's term is serving now.
	IsLeader() bool
}

// ErrMoved ends a child's Run, and its term, when the table gives the
// shard to another candidate: its log and its EventStoppedLeading say so,
// not "context canceled".
var ErrMoved = errors.New("relect: the leader gave the shard to another candidate")

// member is one Run's part in shards.
type member[C Child] struct {
	ctx   context.Context
	cfg   *Config
	port  Member
	seen  *Seen
	waits *waits
	obs   *observations
	start func(shard string, guard *Guard) (C, error)

	wg sync.WaitGroup
	mu sync.Mutex
	// runs are the children running, by shard; one stays in it until its
	// Run and its Warm returned, so that a shard wanted again meanwhile
	// starts only once the previous child released. Guarded by mu.
	runs map[string]*run[C]
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

// unseenNone is member.unseenFor while the table does not name it Unseen:
// no registration version is.
const unseenNone = "\x00"

type run[C Child] struct {
	child  C
	cancel context.CancelCauseFunc
	wanted bool
	// cooling is when its Warm's context was cancelled (zero before);
	// guarded by member.mu.
	cooling time.Time
}

// Join starts this candidate's part in shards for one Run of its Elector:
// it follows the table through port, and starts the child of a shard with
// start (an error is logged, and the shard not campaigned for, until the
// table changes), giving it the shard's Guard (nil for shards that split
// no data), whose Wait each of the child's terms must pass before Run. It returns the function that ends it, which returns once
// every child's Run returned (and released). One Join at a time.
func (s *Shards[C]) Join(ctx context.Context, port Member, start func(shard string, guard *Guard) (C, error)) (wait func()) {
	mctx, cancel := context.WithCancel(ctx)
	m := &member[C]{ctx: mctx, cfg: &s.cfg, port: port, seen: &s.seen, waits: &s.waits, obs: &s.obs, start: start, runs: map[string]*run[C]{}, unseenFor: unseenNone}
	s.mu.Lock()
	s.member = m
	s.mu.Unlock()
	m.wg.Go(m.follow)
	return func() {
		cancel()
		m.wg.Wait()
		s.mu.Lock()
		s.member = nil
		s.mu.Unlock()
	}
}

func (s *Shards[C]) current() *member[C] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.member
}

// Held returns the shards whose child leads now, in the order of the
// configuration, but those whose term's Guard waits; nil while no Join is
// in progress.
func (s *Shards[C]) Held() []string {
	m := s.current()
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, sh := range m.cfg.Shards {
		if r := m.runs[sh]; r != nil && r.child.IsLeader() && !m.waits.has(sh) {
			out = append(out, sh)
		}
	}
	return out
}

// Running is one child whose Run has not returned.
type Running[C Child] struct {
	Shard string
	Child C
	// WarmCancelled is when the shard's Config.Warm was cancelled, if it
	// has not returned since; zero otherwise.
	WarmCancelled time.Time
}

// Running returns the children whose Run has not returned, in the shards'
// order; nil while no Join is in progress.
func (s *Shards[C]) Running() []Running[C] {
	m := s.current()
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Running[C]
	for _, sh := range m.cfg.Shards {
		if r := m.runs[sh]; r != nil {
			out = append(out, Running[C]{Shard: sh, Child: r.child, WarmCancelled: r.cooling})
		}
	}
	return out
}

// follow keeps the table's view until ctx is done: a list of the one Lease
// (for a version to watch from, even while it is missing), then a watch.
// A table missing, deleted or malformed changes nothing: the shards held
// stay held, each on its own Lease. A list refused (RBAC) is a warning,
// once until a list is answered.
func (m *member[C]) follow() {
	defer m.want(nil)
	name := wire.ShardTableName(m.cfg.Name)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	retry := m.port.NewRetry()
	var refused refusal
	for m.ctx.Err() == nil {
		var list *coordinationv1.LeaseList
		err := m.port.DoSpare(m.ctx, VerbGetTable, true, func(ctx context.Context) error {
			var err error
			list, err = m.cfg.Leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
			return err
		})
		if refused.begins(err) {
			m.port.Log(slog.LevelWarn, "relect: this candidate takes part in no shard: it may not list the shard table's Lease",
				"lease", m.cfg.Describe, "table", name, "namespace", m.cfg.Namespace, "err", err,
				"fix", "grant its Role leases list and watch (deploy/)")
		}
		if err != nil {
			if pace.Sleep(m.ctx, retry.Next()) != nil {
				return
			}
			continue
		}
		for i := range list.Items {
			m.apply(&list.Items[i])
		}
		if m.watch(sel, list.ResourceVersion, retry) {
			return
		}
		if pace.Sleep(m.ctx, retry.Next()) != nil {
			return
		}
	}
}

// watch watches the table from version rv, again after each watch the
// server closed, until one breaks or cannot be opened (false) or ctx is
// done (true).
func (m *member[C]) watch(sel, rv string, retry Backoff) (done bool) {
	r := leasewatch.Reader{Decode: m.port.Decode, Handle: m.event, Resuming: retry.Reset}
	err := r.Follow(m.ctx, rv, func(ctx context.Context, rv string) (w watch.Interface, err error) {
		err = m.port.Do(ctx, VerbWatchTable, false, func(ctx context.Context) error {
			w, err = m.cfg.Leases.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
			return err
		})
		return w, err
	})
	return err == nil
}

// event applies one event of the table's watch.
func (m *member[C]) event(e leasewatch.Event) {
	switch e.Kind {
	case leasewatch.Changed:
		m.apply(e.Lease)
	case leasewatch.Deleted:
		if e.Lease != nil {
			m.seen.Saw(e.Lease.ResourceVersion, nil) // deleted by hand: the leader writes it again
		}
	}
}

// apply makes the children running those the table l wants.
func (m *member[C]) apply(l *coordinationv1.Lease) {
	t := wire.TableOf(l)
	m.seen.Saw(l.ResourceVersion, t)
	if t == nil {
		return
	}
	want := map[string]bool{}
	for _, sh := range m.cfg.Shards {
		if t.Wants(sh, m.cfg.Identity) {
			want[sh] = true
		}
	}
	m.want(want)
	m.renew(t, len(want) > 0)
}

// renew renews the registration where table t shows that the leader may
// not see it, and records what t said of this member (given: t wants it
// for a shard).
func (m *member[C]) renew(t *wire.Table, given bool) {
	v, out := t.Out[m.cfg.Identity]
	uv, unseen := t.Unseen[m.cfg.Identity]
	switch {
	case out && v != m.renewedFor:
		// Left out as failed: a renewal of the registration, which the
		// leader sees as a sign of life, brings it back.
		m.renewedFor = v
		m.port.RenewRegistration()
	case unseen && uv != m.unseenFor:
		// The leader does not see its registration (deleted by hand, or
		// its weight edited) though it holds shards: a renewal brings it
		// back.
		m.port.RenewRegistration()
	case !out && m.given && !given:
		// Given shards before and none now, not left out: the leader may
		// no longer see its registration (deleted by hand, or its weight
		// edited). A renewal now, not at the next RegistrationRenewal,
		// brings it back within a retry period or two; where the leader
		// only moved its last shard away (more candidates than shards),
		// it is one spare write.
		m.port.RenewRegistration()
	}
	m.given = given
	m.unseenFor = unseenNone
	if unseen {
		m.unseenFor = uv
	}
}

// want starts a child for each shard in set not running, and cancels
// those running that are not in it.
func (m *member[C]) want(set map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for sh, r := range m.runs {
		if r.wanted = set[sh]; !r.wanted {
			r.cancel(ErrMoved)
		}
	}
	for _, sh := range m.cfg.Shards {
		if set[sh] && m.runs[sh] == nil {
			m.startLocked(sh)
		}
	}
}

// startLocked starts the child of shard sh. Requires mu.
func (m *member[C]) startLocked(sh string) {
	if m.ctx.Err() != nil {
		return
	}
	guard := NewGuard(m.cfg, sh, corePort{Core: m.port, cfg: m.cfg}, func(on bool) { m.waits.set(sh, on) })
	if guard != nil {
		guard.obs = m.obs
	}
	child, err := m.start(sh, guard)
	if err != nil {
		m.port.Log(slog.LevelError, "relect: cannot campaign for a shard", "lease", m.cfg.Describe, "shard", sh, "err", err)
		return
	}
	ctx, cancel := context.WithCancelCause(m.ctx)
	r := &run[C]{child: child, cancel: cancel, wanted: true}
	m.runs[sh] = r
	if guard != nil {
		m.wg.Go(func() { guard.Observe(ctx) }) // from the campaign's start
	}
	m.wg.Go(func() {
		cool := m.warm(sh)
		_ = child.Run(ctx)
		cancel(nil)
		if m.cfg.Warm != nil {
			m.mu.Lock()
			r.cooling = time.Now()
			m.mu.Unlock()
		}
		cool()
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.runs, sh)
		if r.wanted {
			m.startLocked(sh) // wanted again while it stepped down
		}
	})
}
