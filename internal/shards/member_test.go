package shards

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type leaseT = coordinationv1.Lease

// fakeChild is a shard's child Elector: it leads from its Run's start to
// its end, and records why its context ended.
type fakeChild struct {
	shard   string
	linger  time.Duration // how long it leads on once its context ended
	mu      sync.Mutex
	leading bool
	cause   error
}

func (c *fakeChild) Run(ctx context.Context) error {
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	<-ctx.Done()
	time.Sleep(c.linger)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading, c.cause = false, context.Cause(ctx)
	return c.cause
}

func (c *fakeChild) IsLeader() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// starter is the function Join starts children with: it records them.
type starter struct {
	linger   time.Duration // fakeChild.linger
	mu       sync.Mutex
	children []*fakeChild
}

func (s *starter) start(sh string, _ *Guard) (*fakeChild, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &fakeChild{shard: sh, linger: s.linger}
	s.children = append(s.children, c)
	return c, nil
}

func (s *starter) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.children {
		out = append(out, c.shard)
	}
	return out
}

// putTable writes table t as the leader would.
func putTable(api *relecttest.LeaseAPI, t *wire.Table) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: wire.ShardTableName(testLease)}}
	if old := api.Lease(testNS, l.Name); old != nil {
		l = old
	}
	wire.SetTable(l, testLease, "leader", 1, t, time.Now())
	api.Put(l)
}

// The member starts a child for each shard the table wants it for (holder
// or taker), ends one the table moves away with ErrMoved, tells the
// assigner the table version it saw, keeps the shards the table names
// failing, renews the registration once when left out, and waits for
// every child when it ends.
func TestMemberStartsAndStopsChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0", "1", "2")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		port := &fakeMember{}
		var st starter
		s := New[*fakeChild](cfg)
		wait := s.Join(t.Context(), port, st.start)
		synctest.Wait()
		assert.Empty(t, st.started(), "no table: no child")

		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "b", "2": "b"}, Takers: map[string]string{"1": "a"}})
		synctest.Wait()
		assert.Equal(t, []string{"0", "1"}, st.started(), "holder of 0, taker of 1")
		assert.Equal(t, []string{"0", "1"}, s.Held())
		assert.Len(t, s.Running(), 2)
		assert.Equal(t, api.Lease(testNS, wire.ShardTableName(testLease)).ResourceVersion, s.seen.Version(), "the version seen, for the assigner")

		assert.Nil(t, s.Failing(), "no shard failing")

		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "b", "2": "b"}, Failing: map[string]int{"2": 3}})
		synctest.Wait()
		assert.Equal(t, []string{"0"}, s.Held())
		assert.Equal(t, map[string]int{"2": 3}, s.Failing(), "the table's failing shards, on every member")
		c1 := st.children[1]
		c1.mu.Lock()
		assert.ErrorIs(t, c1.cause, ErrMoved, "ended because the table moved it")
		c1.mu.Unlock()
		assert.Zero(t, port.renewed())

		out := &wire.Table{Assigned: map[string]string{"0": "b", "1": "b", "2": "b"}, Out: map[string]string{"a": "10"}}
		putTable(api, out)
		synctest.Wait()
		assert.Equal(t, 1, port.renewed(), "left out: renews its registration")
		putTable(api, out)
		synctest.Wait()
		assert.Equal(t, 1, port.renewed(), "left out for the same registration: not again")
		assert.Nil(t, s.Failing(), "the last table names none failing")
		assert.Empty(t, s.Held())

		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "a", "2": "a"}})
		synctest.Wait()
		require.Equal(t, []string{"0", "1", "2"}, s.Held())
		wait()
		assert.Nil(t, s.Held(), "no Join in progress")
		assert.Nil(t, s.Running())
		for _, c := range st.children {
			assert.False(t, c.IsLeader(), "shard %s: its Run returned before Join's wait", c.shard)
		}
	})
}

// A child that fails to start is logged, and the shard not campaigned for.
func TestMemberLogsAChildItCannotStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		port := &fakeMember{}
		s := New[*fakeChild](cfg)
		wait := s.Join(t.Context(), port, func(string, *Guard) (*fakeChild, error) { return nil, assert.AnError })
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a"}})
		synctest.Wait()
		assert.Empty(t, s.Held())
		port.mu.Lock()
		assert.Contains(t, port.logs, "relect: cannot campaign for a shard")
		port.mu.Unlock()
		wait()
	})
}

// A member that may not list the shard table's Lease (RBAC without
// leases list) takes part in no shard: it says so at Warn, once while its
// lists stay refused, and follows the table once they are granted.
func TestMemberWarnsTableForbidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		c := api.Client("a")
		c.FailVerb(relecttest.VerbList, relecttest.Error(403))
		cfg := testConfig("a", "0")
		cfg.Leases = c.Clientset().CoordinationV1().Leases(testNS)
		port := &fakeMember{}
		st := &starter{}
		s := New[*fakeChild](cfg)
		wait := s.Join(t.Context(), port, st.start)
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a"}})
		time.Sleep(10 * rp)
		synctest.Wait()
		assert.Empty(t, st.started())
		port.mu.Lock()
		assert.Equal(t, 1, countOf(port.logs, "relect: this candidate takes part in no shard: it may not list the shard table's Lease"), "%q", port.logs)
		port.mu.Unlock()
		c.Heal()
		time.Sleep(2 * rp)
		synctest.Wait()
		assert.Equal(t, []string{"0"}, st.started())
		wait()
	})
}

func countOf(logs []string, msg string) (n int) {
	for _, l := range logs {
		if l == msg {
			n++
		}
	}
	return n
}

// warmBook is Config.Warm for the member's tests: it records each call's
// shard and range, and, when its context ends, whether the shard's child
// was still leading.
type warmBook struct {
	st      *starter
	mu      sync.Mutex
	active  map[string]int // shard → Warm calls not returned
	calls   []string       // the shard of each call, in order
	ranged  int            // calls whose context carried a range
	overlap int            // calls started while another for the shard ran
	early   int            // calls cancelled while the shard's child led
}

func (b *warmBook) warm(ctx context.Context) {
	sh, ok := FromContext(ctx)
	if !ok {
		panic("Warm's context carries no shard")
	}
	b.mu.Lock()
	if b.active[sh] > 0 {
		b.overlap++
	}
	b.active[sh]++
	b.calls = append(b.calls, sh)
	if _, ok := shardrange.FromContext(ctx); ok {
		b.ranged++
	}
	b.mu.Unlock()
	<-ctx.Done()
	for _, c := range b.st.childrenOf(sh) {
		if c.IsLeader() {
			b.mu.Lock()
			b.early++
			b.mu.Unlock()
		}
	}
	time.Sleep(time.Second) // a slow Warm: the member waits for it
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active[sh]--
}

func (b *warmBook) running() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for sh, n := range b.active {
		if n > 0 {
			out[sh] = n
		}
	}
	return out
}

func (s *starter) childrenOf(sh string) []*fakeChild {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*fakeChild
	for _, c := range s.children {
		if c.shard == sh {
			out = append(out, c)
		}
	}
	return out
}

// The member calls Warm for each shard it campaigns for, holder or taker,
// with a context that carries the shard and its range, from before the
// child starts until after its Run returned; a shard wanted again is
// warmed again only once the last Warm returned; Join's wait returns after
// every Warm; a Warm that panics is logged, and its child runs on.
func TestMemberWarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0", "1", "2")
		cfg.Ranges = string(shardrange.UID)
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		st := starter{linger: time.Second} // a child steps down slowly
		b := &warmBook{st: &st, active: map[string]int{}}
		cfg.Warm = b.warm
		s := New[*fakeChild](cfg)
		port := &fakeMember{}
		wait := s.Join(t.Context(), port, st.start)

		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "b", "2": "b"}, Takers: map[string]string{"1": "a"}})
		synctest.Wait()
		assert.Equal(t, map[string]int{"0": 1, "1": 1}, b.running(), "holder of 0, taker of 1: both warm")

		// 1 moves away, then comes back before its Warm returned.
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "b", "2": "b"}})
		synctest.Wait()
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a", "1": "a", "2": "b"}})
		synctest.Wait()
		time.Sleep(time.Second + time.Second/2)
		synctest.Wait()
		assert.Equal(t, []string{"0", "1"}, st.started(), "1 is not campaigned for again while its Warm runs")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"0", "1", "1"}, st.started(), "1 campaigned for again once its Warm returned")
		assert.Equal(t, map[string]int{"0": 1, "1": 1}, b.running())

		wait()
		assert.Empty(t, b.running(), "Join's wait returns after every Warm returned")
		b.mu.Lock()
		assert.ElementsMatch(t, []string{"0", "1", "1"}, b.calls)
		assert.Equal(t, 3, b.ranged, "every Warm's context carries its range")
		assert.Zero(t, b.overlap, "two Warms of one shard at once")
		assert.Zero(t, b.early, "a Warm cancelled while its shard's child led")
		b.mu.Unlock()
	})
}

// A Warm that does not return once its context is cancelled keeps its
// shard from being campaigned for again on this candidate (and Join's
// wait from returning): a LeaseDuration after the cancel it is a Warn
// naming the shard, once, and an Info when it returns at last.
func TestMemberWarmOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		release := make(chan struct{})
		cfg.Warm = func(context.Context) { <-release } // ignores its context
		var st starter
		s := New[*fakeChild](cfg)
		port := &fakeMember{}
		wait := s.Join(t.Context(), port, st.start)
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a"}})
		synctest.Wait()
		require.Len(t, s.Running(), 1)
		assert.Zero(t, s.Running()[0].WarmCancelled, "Warm not cancelled while its shard is wanted")
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "b"}})
		synctest.Wait()
		cancelled := time.Now()
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a"}})
		time.Sleep(ld - time.Second)
		synctest.Wait()
		port.mu.Lock()
		assert.Zero(t, countOf(port.logs, "relect: Shards.Warm has not returned since its context was cancelled"), "before LeaseDuration")
		port.mu.Unlock()
		time.Sleep(10 * ld)
		synctest.Wait()
		assert.Equal(t, []string{"0"}, st.started(), "not campaigned for again while its Warm runs")
		if r := s.Running(); assert.Len(t, r, 1, "listed while its Warm runs") {
			assert.Equal(t, cancelled, r[0].WarmCancelled, "for HealthCheck: when its Warm was cancelled")
		}
		port.mu.Lock()
		assert.Equal(t, 1, countOf(port.logs, "relect: Shards.Warm has not returned since its context was cancelled"), "%q", port.logs)
		port.mu.Unlock()
		close(release)
		synctest.Wait()
		assert.Equal(t, []string{"0", "0"}, st.started(), "campaigned for again once it returned")
		port.mu.Lock()
		assert.Equal(t, 1, countOf(port.logs, "relect: Shards.Warm returned late"))
		port.mu.Unlock()
		wait()
	})
}

// A Warm that panics is recovered and logged; the shard's child runs on.
func TestMemberWarmPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		cfg := testConfig("a", "0")
		cfg.Leases = api.Client("a").Clientset().CoordinationV1().Leases(testNS)
		cfg.Warm = func(context.Context) { panic("cold") }
		var st starter
		s := New[*fakeChild](cfg)
		port := &fakeMember{}
		wait := s.Join(t.Context(), port, st.start)
		putTable(api, &wire.Table{Assigned: map[string]string{"0": "a"}})
		synctest.Wait()
		assert.Equal(t, []string{"0"}, s.Held(), "the child runs on")
		port.mu.Lock()
		assert.Contains(t, port.logs, "relect: Shards.Warm panicked")
		port.mu.Unlock()
		wait()
	})
}
