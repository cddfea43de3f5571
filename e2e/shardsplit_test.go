package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/shardrange"
)

// splitRuns records the range Runs of in-process candidates of two splits
// and reports a Run that starts while an overlapping one runs.
type splitRuns struct {
	t        *testing.T
	mu       sync.Mutex
	running  map[string]shardrange.Range // "id/count/shard" → its range
	overlaps int
	counts   map[int]int // ranges of each split running
}

func (b *splitRuns) run(id string, count int) func(ctx context.Context) {
	return func(ctx context.Context) {
		sh, _ := relect.ShardFromContext(ctx)
		r, _ := shardrange.FromContext(ctx)
		key := fmt.Sprintf("%s/%d/%s", id, count, sh)
		b.mu.Lock()
		for other, o := range b.running {
			if o.Start() <= r.Last() && r.Start() <= o.Last() {
				b.overlaps++
				b.t.Errorf("%s starts %s while %s runs %s", key, r.Selector(), other, o.Selector())
			}
		}
		b.running[key] = r
		b.counts[count]++
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		delete(b.running, key)
		b.counts[count]--
		b.mu.Unlock()
	}
}

func (b *splitRuns) of(count int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[count]
}

// stallTable stalls one candidate's view of the shard table: while it is
// closed, its table lists and the events of its table watch wait.
type stallTable struct {
	mu    sync.Mutex
	open  chan struct{}
	table string // the table's field selector
}

func (s *stallTable) set(open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.open:
		if !open {
			s.open = make(chan struct{})
		}
	default:
		if open {
			close(s.open)
		}
	}
}

func (s *stallTable) pass(ctx context.Context) error {
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type stalledClient struct {
	kubernetes.Interface
	s *stallTable
}

func (c stalledClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return stalledCoordination{c.Interface.CoordinationV1(), c.s}
}

type stalledCoordination struct {
	coordinationv1client.CoordinationV1Interface
	s *stallTable
}

func (c stalledCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return stalledLeases{c.CoordinationV1Interface.Leases(ns), c.s}
}

type stalledLeases struct {
	coordinationv1client.LeaseInterface
	s *stallTable
}

func (l stalledLeases) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if o.FieldSelector == l.s.table {
		if err := l.s.pass(ctx); err != nil {
			return nil, err
		}
	}
	return l.LeaseInterface.List(ctx, o)
}

func (l stalledLeases) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseInterface.Watch(ctx, o)
	if err != nil || o.FieldSelector != l.s.table {
		return w, err
	}
	out := make(chan watch.Event)
	go func() {
		defer close(out)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if l.s.pass(ctx) != nil {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return watch.NewProxyWatcher(out), nil
}

// TestShardRangeSplitOnTheApiserver: a change of range shards' split, 4
// → 8 uid ranges, on the real apiserver, with in-process candidates: a
// and b on 4, then c and d on 8; a (the leader) stops, so that a
// candidate of the new split leads, while b's view of the shard table is
// stalled for 3 × LeaseDuration, b holding its old ranges meanwhile. No
// range Run starts while an overlapping one runs; once b sees the table,
// all 8 new ranges run (the time is printed).
func TestShardRangeSplitOnTheApiserver(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	b := &splitRuns{t: t, running: map[string]shardrange.Range{}, counts: map[int]int{}}
	stall := &stallTable{open: make(chan struct{}), table: "metadata.name=" + wire.ShardTableName(lease)}
	close(stall.open)
	electors := map[string]*relect.Elector{}
	stops := map[string]func(){}
	start := func(id string, count int) {
		cs, err := kubernetes.NewForConfig(c.restConfig(&reqLog{}))
		if err != nil {
			t.Fatal(err)
		}
		var client kubernetes.Interface = cs
		if id == "b" {
			client = stalledClient{cs, stall}
		}
		e, err := relect.New(relect.Options{
			Client: client, Namespace: namespace, Name: lease, Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Shards: relect.ShardOptions{Count: count, Ranges: shardrange.UID, Run: b.run(id, count)},
			Logger: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		electors[id] = e
		var once sync.Once
		stops[id] = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stops[id])
	}
	start("a", 4)
	waitFor(t, leaseDuration+2*retryPeriod, "a leads", electors["a"].IsLeader)
	start("b", 4)
	waitFor(t, 3*leaseDuration, "the 4 ranges run", func() bool { return b.of(4) == 4 })
	start("c", 8)
	start("d", 8)
	time.Sleep(leaseDuration)
	stall.set(false)
	stops["a"]()
	waitFor(t, leaseDuration+4*retryPeriod, "c or d, of the new split, leads", func() bool {
		if electors["b"].IsLeader() {
			_ = electors["b"].Yield(context.Background()) // b is of the old split
		}
		return electors["c"].IsLeader() || electors["d"].IsLeader()
	})
	time.Sleep(3 * leaseDuration)
	if b.of(4) == 0 {
		t.Errorf("b stopped its old ranges though it did not see the new table")
	}
	thawed := time.Now()
	stall.set(true)
	at := waitFor(t, leaseDuration+4*retryPeriod, "the 8 new ranges run", func() bool { return b.of(8) == 8 })
	t.Logf("4 → 8 ranges: all 8 ran %v after b saw the new table (LD %v, RP %v); overlapping starts: %d",
		at.Sub(thawed).Round(time.Millisecond), leaseDuration, retryPeriod, b.overlaps)
	for _, id := range []string{"b", "c", "d"} {
		stops[id]()
	}
}
