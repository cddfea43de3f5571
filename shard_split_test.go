package relect_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/testlog"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
)

// splitBook records every range shard term's Run across a fleet whose
// candidates run different splits (Count), and fails the test when a Run
// starts while a Run of an overlapping range — of any split — runs.
type splitBook struct {
	t        *testing.T
	api      *relecttest.LeaseAPI
	mu       sync.Mutex
	running  map[string]runningRange // candidate/split/shard → its Run
	stopped  []ranRange              // the Runs that returned
	started  []ranRange              // every start, in order
	overlaps int
}

type runningRange struct {
	r     shardrange.Range
	count int
	id    string
	since time.Time
}

// ranRange is one Run of a range: who ran which shard of which split,
// from start to stop (zero while running), in a term that acquired the
// shard's Lease at acquired (its record's acquireTime).
type ranRange struct {
	id                    string
	count                 int
	shard                 string
	r                     shardrange.Range
	acquired, start, stop time.Time
}

func newSplitBook(t *testing.T, api *relecttest.LeaseAPI) *splitBook {
	return &splitBook{t: t, api: api, running: map[string]runningRange{}}
}

// run is ShardOptions.Run for candidate id running count ranges.
func (b *splitBook) run(id string, count int) func(ctx context.Context) {
	return func(ctx context.Context) {
		sh, _ := relect.ShardFromContext(ctx)
		r, ok := shardrange.FromContext(ctx)
		require.True(b.t, ok, "a range shard's context carries its range")
		key := fmt.Sprintf("%s/%d/%s", id, count, sh)
		b.mu.Lock()
		for other, o := range b.running {
			if o.r.Start() <= r.Last() && r.Start() <= o.r.Last() {
				b.overlaps++
				b.t.Errorf("%v: %s starts range %s while %s runs %s (since %v)", time.Now(), key, r.Selector(), other, o.r.Selector(), o.since)
			}
		}
		b.running[key] = runningRange{r: r, count: count, id: id, since: time.Now()}
		acquired := b.api.Lease(ns, wire.ShardLeaseName(lease, wire.RangeShard("uid", count, sh))).Spec.AcquireTime.Time
		b.started = append(b.started, ranRange{id: id, count: count, shard: sh, r: r, acquired: acquired, start: time.Now()})
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		b.stopped = append(b.stopped, ranRange{id: id, count: count, shard: sh, r: r, start: b.running[key].since, stop: time.Now()})
		delete(b.running, key)
		b.mu.Unlock()
	}
}

// runningOf returns how many ranges of count run now.
func (b *splitBook) runningOf(count int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, o := range b.running {
		if o.count == count {
			n++
		}
	}
	return n
}

// holdBook polls the Leases of a split's ranges every 100 ms and records,
// for each, when its last holder stopped holding it: when a release was
// first seen within LeaseDuration of its last renewal (a holder that
// stopped), else the renewTime of the last held record (a holder that
// died, whose Lease a guard released once it expired, or still held).
type holdBook struct {
	mu    sync.Mutex
	ended map[string]time.Time // Lease name → when its holder stopped
	held  map[string]bool
	who   map[string]string // Lease name → its last holder
	stop  chan struct{}
	done  chan struct{}
}

func pollHolds(api *relecttest.LeaseAPI, count int) *holdBook {
	h := &holdBook{ended: map[string]time.Time{}, held: map[string]bool{}, who: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			h.poll(api, count)
			select {
			case <-h.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *holdBook) poll(api *relecttest.LeaseAPI, count int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range count {
		name := wire.ShardLeaseName(lease, wire.RangeShard("uid", count, fmt.Sprint(i)))
		l := api.Lease(ns, name)
		switch {
		case l == nil:
		case wire.Holder(l) != "" && !wire.Released(l):
			h.held[name] = true
			h.ended[name], h.who[name] = l.Spec.RenewTime.Time, wire.Holder(l)
		case h.held[name]:
			h.held[name] = false
			if time.Since(h.ended[name]) < ld {
				h.ended[name] = time.Now() // released by its holder
			} else {
				h.who[name] += " (died; released by a guard)" // its end is its last renewal
			}
		}
	}
}

// endedBefore returns when the last holder of range i of count stopped
// holding its Lease, if it did before t.
func (h *holdBook) endedBefore(count, i int, t time.Time) (at time.Time, holder string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := wire.ShardLeaseName(lease, wire.RangeShard("uid", count, fmt.Sprint(i)))
	at, ok = h.ended[name]
	return at, h.who[name], ok && at.Before(t)
}

func (h *holdBook) end() {
	close(h.stop)
	<-h.done
}

// tableGate freezes one candidate's view of the shard table: while it is
// frozen, the candidate's table lists wait and its table watch delivers
// nothing (the events are kept and delivered once it thaws), as for a
// candidate whose watch of the table is stalled behind a slow proxy while
// its renewals go through.
type tableGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while thawed
}

func newTableGate() *tableGate {
	g := &tableGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *tableGate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *tableGate) thaw() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// pass waits until the gate is open or ctx is done.
func (g *tableGate) pass(ctx context.Context) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedClient is a Clientset whose Lease calls on the shard table pass
// the gate.
type gatedClient struct {
	kubernetes.Interface
	gate *tableGate
}

func (c gatedClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return gatedCoordination{c.Interface.CoordinationV1(), c.gate}
}

type gatedCoordination struct {
	coordinationv1client.CoordinationV1Interface
	gate *tableGate
}

func (c gatedCoordination) Leases(namespace string) coordinationv1client.LeaseInterface {
	return gatedLeases{c.CoordinationV1Interface.Leases(namespace), c.gate}
}

type gatedLeases struct {
	coordinationv1client.LeaseInterface
	gate *tableGate
}

var tableSelector = "metadata.name=" + wire.ShardTableName(lease)

func (l gatedLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if opts.FieldSelector == tableSelector {
		if err := l.gate.pass(ctx); err != nil {
			return nil, err
		}
	}
	return l.LeaseInterface.List(ctx, opts)
}

func (l gatedLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseInterface.Watch(ctx, opts)
	if err != nil || opts.FieldSelector != tableSelector {
		return w, err
	}
	out := make(chan watch.Event)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			if l.gate.pass(ctx) != nil {
				return
			}
			select {
			case out <- ev:
			case <-stop:
				return
			}
		}
	}()
	return &gatedWatch{w: w, out: out, stop: func() { once.Do(func() { close(stop); w.Stop() }) }}, nil
}

type gatedWatch struct {
	w    watch.Interface
	out  chan watch.Event
	stop func()
}

func (w *gatedWatch) Stop()                          { w.stop() }
func (w *gatedWatch) ResultChan() <-chan watch.Event { return w.out }

// TestShardRangeSplitChange: a rolling update that changes the split of
// range shards — 8 → 4 and 4 → 8 uid ranges over 4 candidates — with the
// leader handing over to an old-split candidate, then to a new-split one,
// while one old-split holder (c02) does not see the new table (its table
// list and watch stalled for 3 × LeaseDuration, so that it also takes, as
// a stale taker, ranges the others released) and another (c03) is killed
// (cut off, its Leases expire). At every Run's start no overlapping range
// of either split runs; every range of the new split starts, each within
// LeaseDuration + 3 × RetryPeriod of the later of its term's start and
// the end of the last hold of an old range it overlaps; a term that waits
// says so at Info, naming the Lease and holder.
func TestShardRangeSplitChange(t *testing.T) {
	for _, step := range []struct{ from, to int }{{8, 4}, {4, 8}} {
		t.Run(fmt.Sprintf("%d → %d", step.from, step.to), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { splitChange(t, step.from, step.to) })
		})
	}
}

// splitFleet is TestShardRangeSplitChange's fleet: candidates on split
// from, rolled to split to; c02's view of the table passes gate.
type splitFleet struct {
	t        *testing.T
	api      *relecttest.LeaseAPI
	b        *splitBook
	gate     *tableGate
	logs     *testlog.Handler // the new split's candidates' logs
	cs       []*candidate
	from, to int
}

// opts are candidate name's options on count ranges.
func (f *splitFleet) opts(name string, count int) func(o *relect.Options) {
	return func(o *relect.Options) {
		o.Priority = 0
		o.Shards = relect.ShardOptions{Count: count, Ranges: shardrange.UID, Run: f.b.run(name, count)}
		if count == f.to {
			o.Logger = slog.New(f.logs)
		}
		if name == "c02" {
			o.Client = gatedClient{o.Client, f.gate}
		}
	}
}

// restart restarts candidate i on the new split, and lets LD pass.
func (f *splitFleet) restart(i int) {
	f.cs[i].stop()
	f.cs[i] = newCandidate(f.t, f.api, f.cs[i].name, f.opts(f.cs[i].name, f.to))
	f.cs[i].start()
	time.Sleep(ld)
	synctest.Wait()
}

func splitChange(t *testing.T, from, to int) {
	api := newAPI()
	f := &splitFleet{t: t, api: api, b: newSplitBook(t, api), gate: newTableGate(), logs: &testlog.Handler{Level: slog.LevelInfo}, from: from, to: to}
	f.cs = fleet(t, api, 4, func(i int, o *relect.Options) { f.opts(fmt.Sprintf("c%02d", i), from)(o) })
	holds := pollHolds(api, from)
	waitFor(t, 4*ld, "the old split runs", func() bool { return f.b.runningOf(from) == from })
	time.Sleep(2 * ld)
	synctest.Wait()
	require.NotEmpty(t, f.cs[2].e.Shards(), "c02 holds old ranges")
	f.gate.freeze()
	f.handOver()
	// c02 sees the new table only 3 × LeaseDuration later.
	time.Sleep(3 * ld)
	f.gate.thaw()
	waitFor(t, 2*rp, "c02 stops its old ranges", func() bool { return len(f.cs[2].e.Shards()) == 0 })
	waitFor(t, ld+4*rp, "the new split runs", func() bool { return f.b.runningOf(to) == to })
	f.restart(1)
	f.restart(2)
	// c03 stays cut off (a call of it in flight would land at a Heal);
	// a new pod, c04, takes its place.
	f.cs[3] = newCandidate(t, api, "c04", f.opts("c04", to))
	f.cs[3].start()
	time.Sleep(2 * ld)
	synctest.Wait()
	assert.Equal(t, to, f.b.runningOf(to), "the new split runs")
	assert.Zero(t, f.b.runningOf(from), "no old range runs")
	holds.end()
	checkSplitLiveness(t, f.b, holds, from, to)
	waits := f.logs.Naming("a range shard's term waits for the holder of an overlapping range of another split", "holder=c02", fmt.Sprintf("otherRange=uid-%d-", from))
	require.NotEmpty(t, waits, "a new-split term says that it waits for c02")
	t.Logf("%d Info lines of a new-split term waiting for c02, the first: %s", len(waits), waits[0])
	assert.Zero(t, f.b.overlaps)
	stopAll(f.cs...)
	api.Client("c03").Heal()
}

// handOver rolls the leader c00 first, handing over to c01 of the old
// split; kills c03, of the old split (its Leases are not released, and
// expire); and at once has c01 hand over to c00, of the new split.
func (f *splitFleet) handOver() {
	t := f.t
	require.NoError(t, f.cs[0].e.HandOver(t.Context(), "c01", nil))
	waitFor(t, rp, "c01 leads", f.cs[1].e.IsLeader)
	f.restart(0)
	require.True(t, f.cs[1].e.IsLeader(), "c01, of the old split, leads")
	require.NotEmpty(t, f.cs[3].e.Shards(), "c03 holds old ranges")
	t.Logf("%v: c03 killed", time.Now().Format(time.TimeOnly))
	f.cs[3].client.Partition()
	f.cs[3].stop()
	require.NoError(t, f.cs[1].e.HandOver(t.Context(), "c00", nil))
	waitFor(t, rp, "c00 leads", f.cs[0].e.IsLeader)
	t.Logf("%v: c00 leads (new split)", time.Now().Format(time.TimeOnly))
}

// checkSplitLiveness checks that each range of split to first started
// within LeaseDuration + 3 × RetryPeriod of the later of its term's start
// (its Lease's acquireTime) and the end of the last hold of a range of
// split from that it overlaps — the release of a holder that stopped, or
// the last renewal of one that died — and prints each, with the guard's
// wait: from the term's start to Run's.
func checkSplitLiveness(t *testing.T, b *splitBook, holds *holdBook, from, to int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	bound := ld + 3*rp
	for i := range to {
		r, _ := shardrange.Of(shardrange.UID, i, to)
		first := slices.IndexFunc(b.started, func(s ranRange) bool { return s.count == to && s.r == r })
		if !assert.GreaterOrEqual(t, first, 0, "range %d of %d never started", i, to) {
			continue
		}
		start := b.started[first]
		after, what := start.acquired, "no overlapping old range was held"
		var last time.Time
		for j := range from {
			o, _ := shardrange.Of(shardrange.UID, j, from)
			if o.Start() > r.Last() || r.Start() > o.Last() {
				continue
			}
			if at, holder, ok := holds.endedBefore(from, j, start.start); ok && at.After(last) {
				last, what = at, fmt.Sprintf("the last hold of range %d of %d (by %s) ended at %v", j, from, holder, at.Format(time.TimeOnly))
			}
		}
		after = later(after, last)
		took := start.start.Sub(after)
		t.Logf("range %d of %d: term began on %s at %v, %s; Run started %v after both (bound %v), the guard waited %v",
			i, to, start.id, start.acquired.Format(time.TimeOnly), what, took, bound, start.start.Sub(start.acquired))
		assert.LessOrEqual(t, took, bound, "range %d of %d", i, to)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
