package shards

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/shardrange"
)

// The guard of a range shard's term (docs/design.md, "Range shards"):
// after the shard's Lease is acquired and before its Run starts, the
// holder reads the election's range shard Leases and waits while one of
// another split (another Count or field) whose range overlaps its own is
// held and not expired. Two holders of overlapping ranges each acquire
// their Lease, then read with a quorum list: the later read sees the
// earlier write, so at most one of them starts Run; the other waits until
// the first releases (the table of one split stops the other's holders)
// or its Lease has been seen unchanged for its lease duration — judged by
// the local clock, when this guard observed each version, as client-go
// judges expiry, never by the record's renewTime. A Lease so waited out
// is released by the guard (a conditional write on the version it waited
// out), so that no range term waits for it again: the Leases of a split
// whose holder was killed do not stay held.
//
// A leader-side wait (the leader assigns a new split's ranges only once
// the old split's are released) was rejected: a taker of the old split
// that read an older table could still acquire after the leader looked.

// GuardPort is what a range shard's guard needs from the core.
type GuardPort interface {
	// ListRangeLeases lists the election's range shard Leases
	// (wire.LabelShardRange set) with a quorum read (resourceVersion ""):
	// every write completed before sending is in the answer. It calls
	// sending just before the request is sent (after any wait for the
	// token bucket).
	ListRangeLeases(ctx context.Context, sending func()) ([]coordinationv1.Lease, error)
	// Release writes l, as listed, released (no holder, a lease duration
	// of 1 s), conditional on its resourceVersion: a conflict means that
	// someone wrote it since.
	Release(ctx context.Context, l *coordinationv1.Lease) error
	// Log logs; it never blocks.
	Log(level slog.Level, msg string, args ...any)
}

// Guard is the guard of one range shard: Wait is what each of its terms
// does before Run. Safe for concurrent use.
type Guard struct {
	port      GuardPort
	own       shardrange.Range
	key       string // own wire.LabelShardRange
	count     int    // of own split
	lease     string // the election's Lease's name
	namespace string // the Leases'

	ld, rp          time.Duration
	describe, shard string
	waiting         func(on bool) // told while Wait waits

	obs *observations
}

// observations are the Lease versions a candidate's guards observed, each
// with when one of them first saw it: shared by the guards of one Elector
// (Shards), so that a Lease of another split left held by a dead holder is
// waited out once, not again at each range term that overlaps it; and
// their lists, so that S guards waiting at once take one list per
// RetryPeriod, not S. The zero value is ready; safe for concurrent use.
type observations struct {
	mu      sync.Mutex
	seen    map[string]observed // by Lease name; guarded by mu
	next    *flight             // a list not sent yet, which a guard may join; guarded by mu
	refused refusal             // of the lists, for the guards' warning
}

// flight is one list of the range shard Leases, shared by the guards that
// asked for a list before it was sent: its answer reflects every write
// that completed before each of them asked.
type flight struct {
	sent  bool // the request is on its way; guarded by observations.mu
	done  chan struct{}
	items []coordinationv1.Lease
	err   error
}

// list returns the range shard Leases as a list sent after list was
// called answers them: it joins the list not sent yet, if there is one,
// else it sends one through port (with ctx: if ctx ends first, those who
// joined get its error too, and list again).
func (o *observations) list(ctx context.Context, port GuardPort) ([]coordinationv1.Lease, error) {
	o.mu.Lock()
	if f := o.next; f != nil && !f.sent {
		o.mu.Unlock()
		select {
		case <-f.done:
			return f.items, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	o.next = f
	o.mu.Unlock()
	f.items, f.err = port.ListRangeLeases(ctx, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		f.sent = true
	})
	o.mu.Lock()
	if o.next == f {
		o.next = nil // failed unsent, its error is no answer for later callers
	}
	o.mu.Unlock()
	close(f.done)
	return f.items, f.err
}

// NewGuard returns the guard of shard shard of cfg's range shards, which
// lists and logs through port and tells waiting (nil: no one) when it
// starts and stops waiting; nil if the shards split no data or shard is
// not one of them.
func NewGuard(cfg *Config, shard string, port GuardPort, waiting func(on bool)) *Guard {
	i, err := strconv.Atoi(shard)
	own, errOf := shardrange.Of(shardrange.Field(cfg.Ranges), i, len(cfg.Shards))
	if cfg.Ranges == "" || err != nil || errOf != nil {
		return nil
	}
	if waiting == nil {
		waiting = func(bool) {}
	}
	return &Guard{port: port, own: own, key: wire.RangeShard(cfg.Ranges, len(cfg.Shards), shard), count: len(cfg.Shards),
		lease: cfg.Name, namespace: cfg.Namespace,
		ld: cfg.LeaseDuration, rp: cfg.RetryPeriod, describe: cfg.Describe, shard: shard, waiting: waiting, obs: &observations{}}
}

// observed is a Lease version as a Wait first observed it.
type observed struct {
	rv string
	at time.Time // local time of the first observation of rv
}

// Wait blocks until no Lease of another split whose range overlaps g's is
// held and unexpired (true: Run may start), or until ctx is done (false:
// the term ended, Run must not start). It lists the range shard Leases
// once, and again every RetryPeriod while it waits (after a failed list
// too), calling beat (if not nil) with ctx after each list it waits on,
// so that work liveness's BeatWindow counts from Run's start, not the
// term's; it logs at Info once per Lease and holder it waits for. A nil
// Guard returns true at once.
func (g *Guard) Wait(ctx context.Context, beat func(context.Context) bool) bool {
	if g == nil {
		return true
	}
	said := map[string]bool{}
	waiting := false
	defer func() {
		if waiting {
			g.waiting(false)
		}
	}()
	for ctx.Err() == nil {
		items, err := g.obs.list(ctx, g.port)
		g.forbidden(err)
		if err == nil {
			block := g.check(ctx, items)
			if len(block) == 0 {
				return ctx.Err() == nil
			}
			for _, l := range block {
				if h := wire.Holder(l); !said[l.Name+"\x00"+h] {
					said[l.Name+"\x00"+h] = true
					g.port.Log(slog.LevelInfo, "relect: a range shard's term waits for the holder of an overlapping range of another split to stop",
						"lease", g.describe, "shard", g.shard, "range", g.key, "otherLease", l.Name, "otherRange", l.Labels[wire.LabelShardRange], "holder", h)
				}
			}
		}
		if !waiting {
			waiting = true
			g.waiting(true)
		}
		if beat != nil {
			beat(ctx)
		}
		if pace.Sleep(ctx, g.rp) != nil {
			break
		}
	}
	return false
}

// forbidden warns, once per candidate while its lists stay refused, when
// err, a list's outcome, is a refusal (refusal): without leases list a
// range term waits for good, and nothing else would say why.
func (g *Guard) forbidden(err error) {
	if g.obs.refused.begins(err) {
		g.port.Log(slog.LevelWarn, "relect: a range shard's term waits: this candidate may not list the Leases of its namespace, "+
			"which the split-change guard reads before Run; grant its Role leases list (deploy/)",
			"lease", g.describe, "shard", g.shard, "range", g.key, "namespace", g.namespace, "err", err)
	}
}

// Before returns a term's work that calls run once Wait (with beat) lets
// it start, and never if the term ends first (a nil Guard calls run at
// once).
func (g *Guard) Before(beat func(context.Context) bool, run func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		if g.Wait(ctx, beat) {
			run(ctx)
		}
	}
}

// Observe lists the range shard Leases once and records the versions it
// sees, so that a Lease of another split whose holder died before this
// shard's term began is waited out from then, not from the term's start.
// The member calls it as the shard's child starts to campaign. It blocks
// for one list; a failed list, or ctx done, records nothing.
func (g *Guard) Observe(ctx context.Context) {
	if items, err := g.obs.list(ctx, g.port); err == nil {
		g.check(ctx, items)
	}
}

// check returns the Leases among items, one list's, that hold Run back
// now (blocking), and releases those it found waited out.
func (g *Guard) check(ctx context.Context, items []coordinationv1.Lease) []*coordinationv1.Lease {
	block, expired := g.blocking(items, time.Now())
	for _, l := range expired {
		if g.port.Release(ctx, l) == nil {
			g.port.Log(slog.LevelInfo, "relect: released a Lease of another split of range shards whose holder stopped renewing it",
				"lease", g.describe, "shard", g.shard, "otherLease", l.Name, "otherRange", l.Labels[wire.LabelShardRange], "holder", wire.Holder(l))
		}
	}
	return block
}

// blocking returns the Leases among items, one list's, that hold Run back
// at now: of another split, overlapping g's range (or whose label does not
// name the range its name does: edited by hand), held, and unchanged
// for less than their lease duration since a guard of this candidate
// first observed their version (g.obs). A version is stamped when its list is
// read, after the apiserver answered: later than its write, so that a
// holder's term, bounded by RenewDeadline after its last renewal, has
// ended once the stamp is LeaseDuration old; those held and so waited
// out are expired.
func (g *Guard) blocking(items []coordinationv1.Lease, now time.Time) (out, expired []*coordinationv1.Lease) {
	g.obs.mu.Lock()
	defer g.obs.mu.Unlock()
	if g.obs.seen == nil {
		g.obs.seen = map[string]observed{}
	}
	seen := g.obs.seen
	for i := range items {
		l := &items[i]
		key, ok := l.Labels[wire.LabelShardRange]
		if !ok || !g.overlaps(key) && l.Name == wire.ShardLeaseName(g.lease, key) {
			continue // a label edited by hand, which its name belies, says no range: wait as for one that overlaps
		}
		if o, ok := seen[l.Name]; !ok || o.rv != l.ResourceVersion {
			seen[l.Name] = observed{rv: l.ResourceVersion, at: now}
		}
		switch {
		case wire.Holder(l) == "" || wire.Released(l):
		case !now.Before(seen[l.Name].at.Add(g.leaseDuration(l))):
			expired = append(expired, l)
		default:
			out = append(out, l)
		}
	}
	return out, expired
}

// overlaps reports whether the range that LabelShardRange value key names
// is of another split than g's and overlaps g's range. A range of another
// field overlaps every range (the same object is in one of each); a
// malformed key names no range.
func (g *Guard) overlaps(key string) bool {
	field, count, index, ok := wire.ParseRangeShard(key)
	switch {
	case !ok:
		return false
	case field != string(g.own.Field()):
		return true
	case count == g.count:
		return false // the same split: its ranges are disjoint
	}
	r, err := shardrange.Of(g.own.Field(), index, count)
	return err == nil && r.Start() <= g.own.Last() && g.own.Start() <= r.Last()
}

// leaseDuration is how long a version of l holds after it was observed:
// its record's lease duration, and at least the election's.
func (g *Guard) leaseDuration(l *coordinationv1.Lease) time.Duration {
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		return max(g.ld, time.Duration(*s)*time.Second)
	}
	return g.ld
}

// waits are the shards whose term's guard waits (Held leaves them out).
// The zero value is ready; safe for concurrent use.
type waits struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func (w *waits) set(sh string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	if on {
		w.n[sh]++
	} else if w.n[sh]--; w.n[sh] <= 0 {
		delete(w.n, sh)
	}
}

func (w *waits) has(sh string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[sh] > 0
}

// corePort is the GuardPort over the core's calls.
type corePort struct {
	Core
	cfg *Config
}

func (p corePort) ListRangeLeases(ctx context.Context, sending func()) ([]coordinationv1.Lease, error) {
	var list *coordinationv1.LeaseList
	sel := wire.ShardSelector(p.cfg.Name) + "," + wire.LabelShardRange
	err := p.DoSpare(ctx, VerbListRangeLeases, true, func(ctx context.Context) error {
		sending()
		var err error
		list, err = p.cfg.Leases.List(ctx, metav1.ListOptions{LabelSelector: sel}) // resourceVersion "": a quorum read
		return err
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (p corePort) Release(ctx context.Context, l *coordinationv1.Lease) error {
	out := l.DeepCopy()
	none, one := "", int32(1)
	out.Spec.HolderIdentity, out.Spec.LeaseDurationSeconds = &none, &one
	return p.DoSpare(ctx, VerbReleaseShardLease, true, func(ctx context.Context) error {
		_, err := p.cfg.Leases.Update(ctx, out, metav1.UpdateOptions{}) // conditional: out carries l's resourceVersion
		return err
	})
}
