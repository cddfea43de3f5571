package shards

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/shardpace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The leader's side of shards, the assigner (member.go is the member's): during its term the leader
// watches every shard Lease of the election with one watch (a label
// selector), reads the core's view of the registry (Leader.Registrations), and writes the
// shard table whenever the assignment it computes (internal/shardplan)
// differs from the table's. It writes nothing else: a shard changes hands
// only on its own Lease.
//
// What it reads from each shard Lease, on its own clock: who holds it, and
// since when it has not changed. Each shard held gets a taker: a
// candidate that follows its Lease, so that it takes it the moment its
// holder releases it, or the moment the lease expires — within
// LeaseDuration + RetryPeriod of the holder's last renewal — without
// waiting for the leader. A holder whose Lease expired while the table
// gave it the shard, and a candidate given a free shard that did not take
// it within LeaseDuration + 2 × RetryPeriod, is left out (Table.Out) until
// its registration changes.

// assigner is one term's assignment of shards.
type assigner struct {
	cfg  *Config
	port Leader
	// tableSeen is the table version the member last saw (Seen).
	tableSeen *Seen
	term      int32

	// mu guards seen, pace and failed, which the observer writes; changed is
	// signalled after each change of them.
	mu         sync.Mutex
	changed    chan struct{}
	seen       map[string]*shardSeen // by shard
	listedOnce bool                  // seen reflects a list
	// watching: seen is kept by an open watch; while its list or watch
	// fails the view is stale, and nothing is judged from it.
	watching bool
	byLease  map[string]string     // shard Lease name → shard
	own      *coordinationv1.Lease // the table as last read or written; nil if missing
	table    wire.Table            // what own says
	// firstSeen is when this term first saw each registered identity:
	// JoinDelay counts from it. assignedAt is when the table (as this
	// term knows it) gave each shard to its holder.
	firstSeen  map[string]time.Time
	assignedAt map[string]time.Time
	// pace paces the shards whose work keeps failing (a holder released
	// one the table still gave it: its work stuck, or returned), by the
	// rule of internal/shardpace; failed are its failures not logged yet.
	pace   *shardpace.Pace
	failed []shardpace.Failure
	// lost are the holders whose shard Lease their taker took without a
	// release (observeLease): left out at the next plan.
	lost map[string]bool
	// writing is the table of the write in flight (nil if none): a
	// release it asked for may be observed before the write returns.
	writing *wire.Table
	stale   bool // own may be stale: read it before the next write
	// refused: the last write of the table was refused as invalid (and
	// logged, once until a write succeeds again); the next is not tried
	// before notBefore, from RetryPeriod doubling to BackoffMax (retry),
	// since each carries the whole table again.
	refused   bool
	trimmed   bool // the last plan was over tableLimit (warned once until it is not)
	retry     Backoff
	notBefore time.Time
	// warnedSet is the shard set each candidate whose set differs from
	// this leader's was last warned of (reportDiffer).
	warnedSet map[string]int
	// instances are the registrations' instances as the last plan saw
	// them: a release is a failure only if its holder's instance is the
	// same RetryPeriod later (shardpace.Settle).
	instances map[string]string
	// known are the table versions this term read or wrote (the last
	// few): a version the member saw that is not among them was written
	// by someone else (by hand), and own is stale.
	known []string
}

// newAssigner is the assigner of one term, term, of cfg's election.
func newAssigner(cfg *Config, port Leader, tableSeen *Seen, term int32) *assigner {
	a := &assigner{cfg: cfg, port: port, tableSeen: tableSeen, term: term, seen: map[string]*shardSeen{}, byLease: map[string]string{},
		firstSeen: map[string]time.Time{}, assignedAt: map[string]time.Time{}, pace: shardpace.New(cfg.Cooldown, cfg.MaxCooldown),
		lost: map[string]bool{}, stale: true, changed: make(chan struct{}, 1), retry: port.NewRetry()}
	for _, sh := range cfg.Shards {
		name, _ := cfg.leaseOf(sh)
		a.byLease[name] = sh
	}
	return a
}

// Assign assigns the shards while ctx (a term of the election's) lasts:
// it writes the shard table, as the term number term, through port — whose
// calls take a token bucket of the term's own, so that they never delay a
// renewal, nor wait for one. It returns once ctx is done and every
// goroutine it started returned.
func (s *Shards[C]) Assign(ctx context.Context, term int32, port Leader) {
	cfg := &s.cfg
	a := newAssigner(cfg, port, &s.seen, term)
	// Half a retry period in, as the registry's list: not with the
	// acquisition's calls.
	if pace.Sleep(ctx, cfg.RetryPeriod/2) != nil {
		return
	}
	// The view of the shard Leases is kept by a goroutine of its own, so
	// that it stays as fresh as the watch while a table write waits for
	// the bucket; this one decides and writes.
	// Missing shard Leases are created by another, on spare tokens, so
	// that a first deployment's S creates never hold a decision back.
	var observer sync.WaitGroup
	observer.Go(func() { a.observe(ctx) })
	observer.Go(func() { a.creator(ctx) })
	defer observer.Wait()
	defer port.SetFailing(0)
	defer port.SetSetsDiffer(0)
	tick := time.NewTicker(cfg.RetryPeriod / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-a.changed:
		}
		a.assign(ctx, time.Now())
	}
}

// assign computes the table at now and writes it if it changed.
func (a *assigner) assign(ctx context.Context, now time.Time) {
	if now.Before(a.notBefore) {
		return // the last write was refused as invalid: backing off
	}
	a.mu.Lock()
	listed := a.listedOnce && a.watching
	a.mu.Unlock()
	// Plan only once a write could go out: with the bucket spent (a
	// first deployment's acquisitions each change the table), the next
	// write carries every change seen meanwhile, at once, instead of a
	// queue of stale tables one token apart — the last of which named the
	// last takers seconds late.
	if a.port.Ready(ctx) != nil {
		return
	}
	now = time.Now()
	if rv := a.tableSeen.Version(); rv != "" && !slices.Contains(a.known, rv) {
		a.stale = true // edited by someone else: plan from what the members follow
	}
	if !listed || (a.stale && !a.readTable(ctx)) {
		return // no view of the shard Leases yet, or of the table
	}
	regs, loaded := a.port.Registrations(now)
	if !loaded {
		return
	}
	a.mu.Lock()
	next := a.plan(regs, now)
	failed := a.failed
	a.failed = nil
	a.mu.Unlock()
	a.reportFailed(failed)
	a.port.SetFailing(len(next.Failing))
	// Within what the apiserver accepts (New checked the holders and
	// takers; candidates left out add to it): else fewer takers.
	if takers, outs := next.Fit(tableLimit); takers+outs > 0 {
		if !a.trimmed {
			a.port.Log(slog.LevelWarn, "relect: the shard table is at the apiserver's limit on a Lease's annotations: it names fewer takers (their shards move by the leader's writes, a watch hop later) or leaves out fewer failed candidates",
				"lease", a.cfg.Describe, "takersDropped", takers, "outDropped", outs, "limitBytes", tableLimit)
		}
		a.trimmed = true
	} else {
		a.trimmed = false
	}
	a.reportDiffer(next.Differ)
	if maps.Equal(next.Assigned, a.table.Assigned) && maps.Equal(next.Takers, a.table.Takers) && maps.Equal(next.Out, a.table.Out) &&
		maps.Equal(next.Failing, a.table.Failing) && maps.Equal(next.Differ, a.table.Differ) &&
		maps.Equal(next.Unseen, a.table.Unseen) && next.Split == a.table.Split {
		return
	}
	a.write(ctx, next, now)
}

// readTable reads the table Lease; it reports whether the view is usable.
func (a *assigner) readTable(ctx context.Context) bool {
	seen := a.tableSeen.Version() // a read after it is at least as new
	var l *coordinationv1.Lease
	err := a.port.Do(ctx, VerbGetTable, true, func(ctx context.Context) error {
		var err error
		l, err = a.cfg.Leases.Get(ctx, wire.ShardTableName(a.cfg.Name), metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		a.mu.Lock()
		a.own, a.table = nil, wire.Table{}
		a.mu.Unlock()
	case err != nil:
		return false
	default:
		t := wire.TableOf(l)
		if t == nil {
			t = &wire.Table{}
		}
		a.mu.Lock()
		a.own, a.table = l, *t
		a.mu.Unlock()
		a.remember(l.ResourceVersion)
	}
	a.remember(seen)
	a.stale = false
	return true
}

// remember adds table version rv to known, which keeps the last eight.
func (a *assigner) remember(rv string) {
	if rv == "" || slices.Contains(a.known, rv) {
		return
	}
	a.known = append(a.known, rv)
	if len(a.known) > 8 {
		a.known = slices.Delete(a.known, 0, len(a.known)-8)
	}
}

// write writes table t, conditionally on the version last read or
// written; after a failure the table is read again before the next try.
func (a *assigner) write(ctx context.Context, t wire.Table, now time.Time) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.Namespace, Name: wire.ShardTableName(a.cfg.Name)}}
	if a.own != nil {
		l = a.own.DeepCopy()
	}
	wire.SetTable(l, a.cfg.Name, a.cfg.Identity, a.term, &t, now)
	var out *coordinationv1.Lease
	a.mu.Lock()
	a.writing = &t
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.writing = nil
		a.mu.Unlock()
	}()
	err := a.port.Do(ctx, VerbPostTable, true, func(ctx context.Context) error {
		var err error
		if a.own == nil {
			out, err = a.cfg.Leases.Create(ctx, l, metav1.CreateOptions{})
		} else {
			out, err = a.cfg.Leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		a.stale = true
		if apierrors.IsInvalid(err) {
			// Not a passing failure: every write of this table will be
			// refused (over the 256 KiB of annotations, say), and no
			// shard moves while it is. Said once until a write succeeds
			// again; the calls are counted in Stats.Calls.
			if !a.refused {
				a.port.Log(slog.LevelError, "relect: the apiserver refuses the shard table; no shard is assigned or moved while it does",
					"lease", a.cfg.Describe, "table", l.Name, "tableBytes", len(l.Annotations[wire.AnnotationShardTable]), "err", err)
			}
			a.refused = true
			a.notBefore = now.Add(a.retry.Next())
		}
		return
	}
	if a.refused {
		a.refused, a.notBefore = false, time.Time{}
		a.retry.Reset()
	}
	a.mu.Lock()
	moved := 0
	for sh, h := range t.Assigned {
		if a.table.Assigned[sh] != h {
			moved++
		}
	}
	a.own, a.table = out, t
	a.mu.Unlock()
	a.remember(out.ResourceVersion)
	a.port.Moved(moved)
}

// reportFailed says each failure of a shard: a warning with its failures
// in a row and until when its holder is passed over for it, and Stats.
func (a *assigner) reportFailed(failed []shardpace.Failure) {
	for _, f := range failed {
		a.port.Log(slog.LevelWarn, "relect: a shard's work keeps failing: its holder gave it up; passed over for it, the shard goes to another candidate",
			"lease", a.cfg.Describe, "shard", f.Shard, "holder", f.Holder, "failuresInARow", f.Streak, "passedOverUntil", f.Until.Format(time.RFC3339))
		a.port.Failed()
	}
}
