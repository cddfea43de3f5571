package shards

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/relect/relect/internal/wire"
)

const (
	guardLD = 15 * time.Second
	guardRP = 2 * time.Second
)

// guardPort is a GuardPort over a map of Leases that the test edits: each
// edit gives the Lease a new resourceVersion, as the apiserver does.
type guardPort struct {
	mu     sync.Mutex
	leases map[string]*coordinationv1.Lease
	rv     int
	lists  int
	fail   error         // the next lists' error, if set
	delay  time.Duration // before a list is sent (the token bucket's wait)
	logs   []string
	// released are the keys of the Leases released through the port;
	// refuse makes every release a conflict.
	released []string
	refuse   bool
}

func (p *guardPort) Release(ctx context.Context, l *coordinationv1.Lease) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := l.Labels[wire.LabelShardRange]
	if cur := p.leases[key]; p.refuse || cur == nil || cur.ResourceVersion != l.ResourceVersion {
		return errors.New("conflict")
	}
	p.released = append(p.released, key)
	p.mu.Unlock()
	p.put(key, "", 0)
	p.mu.Lock()
	return nil
}

func newGuardPort() *guardPort { return &guardPort{leases: map[string]*coordinationv1.Lease{}} }

func (p *guardPort) ListRangeLeases(ctx context.Context, sending func()) ([]coordinationv1.Lease, error) {
	p.mu.Lock()
	p.lists++
	fail, delay := p.fail, p.delay
	p.mu.Unlock()
	if fail != nil {
		return nil, fail // unsent, as when the token bucket grants none
	}
	time.Sleep(delay)
	sending()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []coordinationv1.Lease
	for _, l := range p.leases {
		out = append(out, *l.DeepCopy())
	}
	return out, nil
}

func (p *guardPort) Log(level slog.Level, msg string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logs = append(p.logs, fmt.Sprint(level, " ", msg, " ", args))
}

// put writes range shard key's Lease (wire.RangeShard), held by holder
// ("" and released: a release), with lease duration seconds.
func (p *guardPort) put(key, holder string, seconds int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rv++
	stale := metav1.NewMicroTime(time.Now().Add(-time.Hour)) // a renewTime an hour off: never read
	if holder == "" {
		seconds = 1
	}
	p.leases[key] = &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: wire.ShardLeaseName("lease", key), ResourceVersion: strconv.Itoa(p.rv),
			Labels: map[string]string{wire.LabelShardOf: "lease", wire.LabelShardRange: key}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &stale},
	}
}

func (p *guardPort) counts() (lists int, logs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lists, slices.Clone(p.logs)
}

// guardOf is the guard of uid range shard sh of count, over port, and
// whether it says it waits; obs (if any) are the observations it shares.
func guardOf(t *testing.T, count int, sh string, port GuardPort, obs ...*observations) (*Guard, func() bool) {
	t.Helper()
	cfg := &Config{Name: "lease", Namespace: "ns", Describe: "ns/lease", Shards: Names(count, nil), Ranges: "uid", LeaseDuration: guardLD, RetryPeriod: guardRP}
	var mu sync.Mutex
	waiting := false
	g := NewGuard(cfg, sh, port, func(on bool) { mu.Lock(); waiting = on; mu.Unlock() })
	require.NotNil(t, g)
	if len(obs) > 0 {
		g.obs = obs[0]
	}
	return g, func() bool { mu.Lock(); defer mu.Unlock(); return waiting }
}

// wait runs g.Wait in a goroutine; the channel gets its result and how
// long it took.
func wait(ctx context.Context, g *Guard, beats *int) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		if g.Wait(ctx, func(context.Context) bool { *beats++; return true }) {
			done <- time.Since(start)
		} else {
			done <- -1
		}
	}()
	return done
}

// TestGuardOverlaps: a range of another split overlaps exactly when the
// hash ranges meet, 8 → 4 and 4 → 8; a range of another field always; the
// same split, and malformed keys, never.
func TestGuardOverlaps(t *testing.T) {
	for _, c := range []struct {
		count int
		sh    string
		key   string
		want  bool
	}{
		{8, "1", "uid-4-0", true}, // [1/8, 2/8) in [0, 1/4)
		{8, "2", "uid-4-0", false},
		{8, "2", "uid-4-1", true},
		{8, "3", "uid-4-1", true},
		{8, "7", "uid-4-3", true},
		{8, "7", "uid-4-2", false},
		{4, "1", "uid-8-2", true},
		{4, "1", "uid-8-3", true},
		{4, "1", "uid-8-1", false},
		{4, "1", "uid-8-4", false},
		{4, "0", "uid-3-0", true},
		{4, "1", "uid-3-0", true}, // [1/4, 2/4) meets [0, 1/3)
		{4, "2", "uid-3-0", false},
		{8, "1", "uid-8-0", false}, // the same split
		{8, "1", "namespace-8-5", true},
		{8, "1", "name-2-1", true}, // a field this version does not know
		{8, "1", "uid-4", false},
		{8, "1", "uid-4-4", false},
		{8, "1", "", false},
	} {
		g, _ := guardOf(t, c.count, c.sh, newGuardPort())
		assert.Equal(t, c.want, g.overlaps(c.key), "shard %s of %d against %q", c.sh, c.count, c.key)
	}
}

// TestGuardLabelEditedByHand: a held Lease whose range label an operator
// garbled, or changed to another range (of its own split, or one that
// does not overlap), no longer says which range it holds: its name does
// (wire.ShardLeaseNameIn), and a guard waits for it as for an overlapping
// range — until its holder's next write puts the label back — rather
// than start Run beside it.
func TestGuardLabelEditedByHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, label := range []string{"uid-x-y", "uid-8-3", "uid-4-3", ""} {
			p := newGuardPort()
			p.put("uid-4-1", "old", 15) // overlaps shard 3 of 8
			p.mu.Lock()
			p.leases["uid-4-1"].Labels[wire.LabelShardRange] = label
			p.mu.Unlock()
			g, _ := guardOf(t, 8, "3", p)
			ctx, cancel := context.WithTimeout(t.Context(), guardRP)
			beats := 0
			assert.Equal(t, time.Duration(-1), <-wait(ctx, g, &beats), "label %q: started beside a held overlapping range", label)
			cancel()
		}
	})
}

// TestGuardStartsAtOnce: with no held, unexpired, overlapping Lease of
// another split — held ones of its own split and of ranges it does not
// meet, an overlapping one released — Wait lists once and returns at
// once, without a log. Plain shards have no guard, which lets Run start.
func TestGuardStartsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.put("uid-8-0", "a", 15)
		p.put("uid-8-2", "b", 15)
		p.put("uid-4-1", "c", 15)
		p.put("uid-4-0", "", 0)
		g, waiting := guardOf(t, 8, "1", p)
		start := time.Now()
		assert.True(t, g.Wait(t.Context(), nil))
		assert.Zero(t, time.Since(start))
		assert.False(t, waiting())
		lists, logs := p.counts()
		assert.Equal(t, 1, lists)
		assert.Empty(t, logs)

		cfg := &Config{Name: "lease", Shards: Names(8, nil), LeaseDuration: guardLD, RetryPeriod: guardRP}
		assert.Nil(t, NewGuard(cfg, "1", p, nil), "shards that split no data have no guard")
		assert.True(t, (*Guard)(nil).Wait(t.Context(), nil))
	})
}

// TestGuardWaitsForRelease: a Lease of another split whose range overlaps
// is held and renewed: Wait waits — says so once (Info, naming the Lease
// and holder), counts as waiting, beats — until it is released, and
// returns within a RetryPeriod of the release.
func TestGuardWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.put("uid-4-1", "old", 15)
		g, waiting := guardOf(t, 8, "3", p)
		beats := 0
		done := wait(t.Context(), g, &beats)
		for range 20 { // renewed every RP for 40 s, beyond LeaseDuration
			time.Sleep(guardRP)
			p.put("uid-4-1", "old", 15)
			synctest.Wait()
			require.Empty(t, done, "started while an overlapping range is held")
			assert.True(t, waiting())
		}
		p.put("uid-4-1", "", 0)
		released := time.Now()
		took := <-done
		after := time.Since(released)
		t.Logf("waited %v; started %v after the release (RetryPeriod %v)", took, after, guardRP)
		assert.LessOrEqual(t, after, guardRP)
		assert.False(t, waiting())
		assert.Equal(t, 21, beats, "a beat after each list it waited on")
		lists, logs := p.counts()
		assert.Equal(t, 22, lists, "one list per RetryPeriod while waiting")
		require.Len(t, logs, 1)
		assert.Contains(t, logs[0], "INFO relect: a range shard's term waits")
		assert.Contains(t, logs[0], wire.ShardLeaseName("lease", "uid-4-1"))
		assert.Contains(t, logs[0], "holder old")
	})
}

// TestGuardWaitsOutExpiry: an overlapping Lease whose holder died (its
// version never changes) is waited out for its lease duration from when
// this guard first saw the version, by the local clock — whatever its
// renewTime says — and then released, so that the next guard starts at
// once; a holder that takes it again is waited for anew.
func TestGuardWaitsOutExpiry(t *testing.T) {
	for _, seconds := range []int32{15, 30} {
		t.Run(fmt.Sprint(seconds, "s"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newGuardPort()
				p.put("uid-8-2", "dead", seconds)
				g, _ := guardOf(t, 4, "1", p)
				beats := 0
				took := <-wait(t.Context(), g, &beats)
				ld := time.Duration(seconds) * time.Second
				t.Logf("lease duration %v: waited %v (RetryPeriod %v)", ld, took, guardRP)
				assert.GreaterOrEqual(t, took, ld)
				assert.LessOrEqual(t, took, ld+guardRP)

				// The Lease waited out was released, conditionally on the
				// version waited out, and said once.
				p.mu.Lock()
				assert.Equal(t, []string{"uid-8-2"}, p.released)
				assert.True(t, wire.Released(p.leases["uid-8-2"]))
				p.mu.Unlock()
				_, logs := p.counts()
				assert.Len(t, slices.DeleteFunc(logs, func(l string) bool { return !strings.Contains(l, "released a Lease of another split") }), 1)
				g2, _ := guardOf(t, 4, "1", p)
				assert.Equal(t, time.Duration(0), <-wait(t.Context(), g2, &beats), "the next guard starts at once")

				// Taken by another holder of the old split: a new version,
				// waited out anew.
				time.Sleep(time.Second)
				p.put("uid-8-2", "taker", seconds)
				took = <-wait(t.Context(), g, &beats)
				assert.GreaterOrEqual(t, took, ld)
			})
		})
	}
}

// TestGuardTermEnds: a term that ends while it waits never starts Run;
// a failed list is tried again every RetryPeriod, and never lets Run
// start.
func TestGuardTermEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.put("uid-2-0", "old", 15)
		g, waiting := guardOf(t, 4, "0", p)
		ctx, cancel := context.WithCancel(t.Context())
		ran := false
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Before(nil, func(context.Context) { ran = true })(ctx)
		}()
		time.Sleep(5 * guardRP)
		synctest.Wait()
		assert.True(t, waiting())
		cancel()
		<-done
		assert.False(t, ran, "Run started though the term ended while it waited")
		assert.False(t, waiting())

		p.mu.Lock()
		p.fail = errors.New("apiserver unavailable")
		p.leases = map[string]*coordinationv1.Lease{}
		p.mu.Unlock()
		ctx, cancel = context.WithTimeout(t.Context(), 3*guardLD)
		defer cancel()
		lists, _ := p.counts()
		beats := 0
		assert.Equal(t, time.Duration(-1), <-wait(ctx, g, &beats), "started without a list")
		after, _ := p.counts()
		assert.Equal(t, int(3*guardLD/guardRP)+1, after-lists, "a list every RetryPeriod")
	})
}

// TestGuardReleaseConflict: a Lease waited out but written meanwhile (its
// holder came back) is not released: the write is conditional on the
// version waited out, and the new version is waited for.
func TestGuardReleaseConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.put("uid-2-1", "old", 15)
		g, _ := guardOf(t, 4, "3", p)
		g.Observe(t.Context())
		time.Sleep(guardLD)
		items, err := p.ListRangeLeases(t.Context(), func() {})
		require.NoError(t, err)
		p.put("uid-2-1", "old", 15) // renewed after the list
		assert.Empty(t, g.check(t.Context(), items), "waited out as listed")
		p.mu.Lock()
		assert.Empty(t, p.released)
		p.mu.Unlock()
		beats := 0
		took := <-wait(t.Context(), g, &beats)
		assert.GreaterOrEqual(t, took, guardLD, "the new version is waited out anew")
	})
}

// TestGuardsShareLists: the guards of one candidate share their lists: 8
// range terms waiting at once, each list waiting 1 s for the token bucket,
// take one list per round, not 8 — and the Lease one of them waited out
// is not waited out again by a guard that starts later.
func TestGuardsShareLists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.delay = time.Second
		p.put("uid-1-0", "old", 15)
		obs := &observations{}
		var wg sync.WaitGroup
		beats := make([]int, 8)
		start := time.Now()
		for i := range 8 {
			g, _ := guardOf(t, 8, strconv.Itoa(i), p, obs)
			wg.Go(func() { assert.True(t, g.Wait(t.Context(), func(context.Context) bool { beats[i]++; return true })) })
		}
		wg.Wait()
		took := time.Since(start)
		lists, _ := p.counts()
		t.Logf("8 guards waited %v, with %d lists (RetryPeriod %v, 1 s to send each)", took, lists, guardRP)
		assert.LessOrEqual(t, lists, int(took/guardRP)+2, "one list per round")
		assert.Equal(t, []string{"uid-1-0"}, p.released, "released once")
	})
}

// TestGuardsShareObservations: a Lease of another split that one guard
// waited out, and could not release, is not waited out again by a guard
// of the same candidate that starts later; a guard of another candidate
// (its own observations) waits it out from its own first sight.
func TestGuardsShareObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.refuse = true
		p.put("uid-2-0", "dead", 15)
		obs := &observations{}
		g, _ := guardOf(t, 4, "0", p, obs)
		beats := 0
		assert.GreaterOrEqual(t, <-wait(t.Context(), g, &beats), guardLD)
		g2, _ := guardOf(t, 4, "1", p, obs)
		assert.Equal(t, time.Duration(0), <-wait(t.Context(), g2, &beats), "the same candidate's next guard")
		g3, _ := guardOf(t, 4, "1", p)
		assert.GreaterOrEqual(t, <-wait(t.Context(), g3, &beats), guardLD, "another candidate's guard")
	})
}

// TestGuardWarnsForbidden: a guard whose list of the range shard Leases
// is forbidden (RBAC without leases list) waits, as for any failed list,
// and says why at Warn — once for the guards of one candidate while the
// lists stay forbidden, naming the verb, the namespace and the fix — and
// again after a list succeeded and then was forbidden anew. Once the
// list is granted, Run starts within a RetryPeriod.
func TestGuardWarnsForbidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newGuardPort()
		p.fail = apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("RBAC: no list"))
		obs := &observations{}
		g0, waiting := guardOf(t, 4, "0", p, obs)
		g1, _ := guardOf(t, 4, "1", p, obs)
		beats, beats1 := 0, 0
		done0, done1 := wait(t.Context(), g0, &beats), wait(t.Context(), g1, &beats1)
		time.Sleep(10 * guardRP)
		synctest.Wait()
		require.Empty(t, done0, "started without a list")
		assert.True(t, waiting())
		_, logs := p.counts()
		require.Len(t, logs, 1, "one warning for the candidate's guards: %q", logs)
		for _, want := range []string{"WARN ", "list", "ns", "waits"} {
			assert.Contains(t, logs[0], want)
		}
		p.mu.Lock()
		p.fail = nil
		p.mu.Unlock()
		assert.LessOrEqual(t, <-done0, 11*guardRP)
		<-done1
		p.mu.Lock()
		p.fail = apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("RBAC: no list"))
		p.mu.Unlock()
		g2, _ := guardOf(t, 4, "2", p, obs)
		ctx, cancel := context.WithTimeout(t.Context(), 3*guardRP)
		defer cancel()
		assert.Equal(t, time.Duration(-1), <-wait(ctx, g2, &beats))
		_, logs = p.counts()
		assert.Len(t, logs, 2, "forbidden anew after a list succeeded: warned again")
	})
}
