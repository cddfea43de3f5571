package ctrlrt_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rangedConfigMaps returns n ConfigMaps with uids, and each one's by name.
func rangedConfigMaps(n int) ([]runtime.Object, map[string]*corev1.ConfigMap) {
	var objs []runtime.Object
	byName := map[string]*corev1.ConfigMap{}
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("cm-%d", i), UID: uidOf(i)}}
		objs = append(objs, cm)
		byName[cm.Name] = cm
	}
	return objs, byName
}

// uidOf returns a fixed uid of the form the apiserver gives (a UUID), for
// object i: uids that differ only at the end hash to neighbouring values.
func uidOf(i int) types.UID {
	h := sha256.Sum256([]byte(strconv.Itoa(i)))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// shardCall is one Reconcile of a shard's controller.
type shardCall struct {
	replica, shard string
	r              shardrange.Range
	name           string
}

// shardBook records the shard controllers' reconciles and the shard
// terms' starts, across replicas.
type shardBook struct {
	mu     sync.Mutex
	calls  []shardCall
	starts []shardStart
}

// shardStart is a shard term's start: which replica, which shard, and the
// shard cache it read (found by its range's selector), with its lists
// then.
type shardStart struct {
	replica, shard string
	at             time.Time
	cache          *testCache
	synced         bool // the shard's manager's cache was synced when ShardSetup was called
}

// shardSetup returns r's ShardSetup: a controller of ConfigMaps, built on
// the shard's manager, recording each Reconcile.
func (b *shardBook) shardSetup(r *replica) ctrlrt.SetupFunc {
	return func(ctx context.Context, mgr manager.Manager) error {
		sh, _ := relect.ShardFromContext(ctx)
		rg, ok := shardrange.FromContext(ctx)
		if !ok {
			return fmt.Errorf("shard %s's context carries no range", sh)
		}
		c := r.shardCacheOf(rg)
		done, cancel := context.WithCancel(ctx)
		cancel()
		st := shardStart{replica: r.id, shard: sh, at: time.Now(), cache: c, synced: mgr.GetCache().WaitForCacheSync(done)}
		b.mu.Lock()
		b.starts = append(b.starts, st)
		b.mu.Unlock()
		return builder.ControllerManagedBy(mgr).Named("shard").For(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				var cm corev1.ConfigMap
				if err := mgr.GetClient().Get(ctx, req.NamespacedName, &cm); err != nil {
					return reconcile.Result{}, err
				}
				b.mu.Lock()
				b.calls = append(b.calls, shardCall{replica: r.id, shard: sh, r: rg, name: req.Name})
				b.mu.Unlock()
				return reconcile.Result{}, nil
			}))
	}
}

// shardCacheOf returns r's live shard cache whose lists asked for rg.
func (r *replica) shardCacheOf(rg shardrange.Range) *testCache {
	r.shardMu.Lock()
	defer r.shardMu.Unlock()
	for _, c := range r.shardCaches {
		if sel, _ := c.selector.Load().(string); sel == rg.Selector() && !c.stopped.Load() {
			return c
		}
	}
	return nil
}

// liveShardCaches returns how many of r's shard caches are running, and
// how many stopped.
func (r *replica) liveShardCaches() (live, stopped int) {
	r.shardMu.Lock()
	defer r.shardMu.Unlock()
	for _, c := range r.shardCaches {
		switch {
		case c.stopped.Load():
			stopped++
		case c.live.Load():
			live++
		}
	}
	return live, stopped
}

// listedShardCaches returns how many of r's shard caches are running and
// have listed.
func (r *replica) listedShardCaches() int {
	r.shardMu.Lock()
	defer r.shardMu.Unlock()
	n := 0
	for _, c := range r.shardCaches {
		if c.live.Load() && !c.stopped.Load() && c.lists.Load() > 0 {
			n++
		}
	}
	return n
}

// reconciled returns the names each shard's controllers reconciled.
func (b *shardBook) reconciled() map[string]map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]map[string]bool{}
	for _, c := range b.calls {
		if out[c.shard] == nil {
			out[c.shard] = map[string]bool{}
		}
		out[c.shard][c.name] = true
	}
	return out
}

// shardReplica starts a replica whose only controllers are per shard: 4
// range shards of the uid hash.
func shardReplica(t *testing.T, api *relecttest.LeaseAPI, id string, objs []runtime.Object, b *shardBook) *replica {
	var r *replica
	r = newReplica(t, api, id, replicaOpts{objects: objs, noStart: true, options: func(o *ctrlrt.Options) {
		o.Setup, o.Informers = nil, nil
		o.Elector.Shards = relect.ShardOptions{Count: 4, Ranges: shardrange.UID}
		o.ShardSetup = func(ctx context.Context, mgr manager.Manager) error { return b.shardSetup(r)(ctx, mgr) }
		o.ShardInformers = []client.Object{&corev1.ConfigMap{}}
	}})
	r.start()
	return r
}

// TestShardControllersOwnTheirRanges: replicas whose controllers run per
// range shard (ShardSetup, 4 ranges of the uid hash, 40 ConfigMaps). Each
// shard's controller reconciles exactly the objects of its range, through
// a cache of its own that lists and watches only that range, and the
// manager's cache holds no ConfigMap; each replica keeps a cache for the
// shards it holds and those it would take. When b stops, a takes its
// shards over, and their terms start on caches a listed before b stopped;
// b's caches all stop. When c joins, the shards that move to it stop
// their caches on a.
func TestShardControllersOwnTheirRanges(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	objs, byName := rangedConfigMaps(40)
	b := &shardBook{}
	ra := shardReplica(t, api, "a", objs, b)
	rb := shardReplica(t, api, "b", objs, b)
	held := func(r *replica) int { return len(r.m.Elector().Shards()) }
	caches := func(r *replica, n int) func() bool {
		return func() bool { live, _ := r.liveShardCaches(); return live == n }
	}
	listed := func(r *replica, n int) func() bool {
		return func() bool { return r.listedShardCaches() == n }
	}
	eventually(t, "2 shards each", func() bool { return held(ra) == 2 && held(rb) == 2 })
	eventually(t, "a's caches listed for the 2 shards it holds and the 2 it would take", listed(ra, 4))
	eventually(t, "b's caches listed for the 2 shards it holds and the 2 it would take", listed(rb, 4))
	eventually(t, "every ConfigMap reconciled", func() bool {
		n := 0
		for _, names := range b.reconciled() {
			n += len(names)
		}
		return n >= len(objs)
	})
	for _, r := range []*replica{ra, rb} {
		if names := r.cache.objects(); names != nil {
			t.Errorf("%s: the manager's cache holds ConfigMaps: %v", r.id, names)
		}
		checkShardCaches(t, r, byName)
	}

	// b stops: a, taker of b's shards, runs them on the caches it warmed.
	taken := rb.m.Elector().Shards()
	stopped := time.Now()
	rb.stop()
	eventually(t, "a holds the 4 shards", func() bool { return held(ra) == 4 })
	if live, _ := rb.liveShardCaches(); live != 0 {
		t.Errorf("b stopped with %d shard caches running", live)
	}
	checkTakeover(t, b, "a", taken, stopped)

	// c joins: 2 shards move to it, and a stops their caches.
	_, before := ra.liveShardCaches()
	rc := shardReplica(t, api, "c", objs, b)
	eventually(t, "2 shards each on a and c", func() bool { return held(ra) == 2 && held(rc) == 2 })
	eventually(t, "a's caches for 4 shards again", caches(ra, 4))
	eventually(t, "c's caches for 4 shards", caches(rc, 4))
	eventually(t, "c's terms reconcile the objects of its shards", b.reconciledAll(rc, byName))
	_, after := ra.liveShardCaches()
	t.Logf("a's shard caches stopped while 2 shards moved to c: %d", after-before)
	if after-before < 2 {
		t.Errorf("a stopped %d shard caches as 2 shards moved away, want at least 2", after-before)
	}
	checkShardCaches(t, rc, byName)
	ra.stop()
	rc.stop()
	checkShardCalls(t, b, byName)
}

// checkShardCaches checks that each of r's live shard caches holds exactly
// the ConfigMaps of its range.
func checkShardCaches(t *testing.T, r *replica, byName map[string]*corev1.ConfigMap) {
	t.Helper()
	r.shardMu.Lock()
	cs := append([]*testCache(nil), r.shardCaches...)
	r.shardMu.Unlock()
	for _, c := range cs {
		if c.stopped.Load() {
			continue
		}
		sel, _ := c.selector.Load().(string)
		rg, err := shardrange.Parse(sel)
		if err != nil {
			t.Errorf("%s: a shard cache listed with selector %q: %v", r.id, sel, err)
			continue
		}
		want := 0
		for _, cm := range byName {
			if ok, _ := rg.Matches(cm); ok {
				want++
			}
		}
		names := c.objects()
		for _, key := range names {
			cm := byName[key[len(namespace)+1:]]
			if ok, _ := rg.Matches(cm); !ok {
				t.Errorf("%s: the cache of %s holds %s, outside its range", r.id, sel, key)
			}
		}
		if len(names) != want {
			t.Errorf("%s: the cache of %s holds %d ConfigMaps, want the %d of its range", r.id, sel, len(names), want)
		}
	}
}

// checkShardCalls checks that every shard controller's Reconcile was of an
// object of its range, and that every object was reconciled.
func checkShardCalls(t *testing.T, b *shardBook, byName map[string]*corev1.ConfigMap) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	seen, by := map[string]bool{}, map[string]int{}
	for _, c := range b.calls {
		by[c.replica+"/"+c.shard]++
		if ok, _ := c.r.Matches(byName[c.name]); !ok {
			t.Errorf("%s: shard %s (%s) reconciled %s, outside its range", c.replica, c.shard, c.r.Selector(), c.name)
		}
		seen[c.name] = true
	}
	t.Logf("%d reconciles by shard controllers (by replica/shard: %v), of %d ConfigMaps, each in its shard's range", len(b.calls), by, len(seen))
	if len(seen) != len(byName) {
		t.Errorf("%d of %d ConfigMaps reconciled", len(seen), len(byName))
	}
}

// TestPlainShardControllersUseTheManagersCache: with plain shards (no
// Ranges), each shard term's controllers run on the manager's cache — no
// shard cache is made — and their event handlers are removed when the
// terms end.
func TestPlainShardControllersUseTheManagersCache(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	objs := configMaps(3)
	var mu sync.Mutex
	reconciled := map[string]map[string]bool{} // shard → names
	r := newReplica(t, api, "a", replicaOpts{objects: objs, options: func(o *ctrlrt.Options) {
		o.Setup, o.Informers = nil, nil
		o.Elector.Shards = relect.ShardOptions{Names: []string{"left", "right"}}
		o.ShardInformers = []client.Object{&corev1.ConfigMap{}}
		o.ShardSetup = func(ctx context.Context, mgr manager.Manager) error {
			sh, _ := relect.ShardFromContext(ctx)
			return builder.ControllerManagedBy(mgr).Named("plain").For(&corev1.ConfigMap{}).
				Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
					mu.Lock()
					defer mu.Unlock()
					if reconciled[sh] == nil {
						reconciled[sh] = map[string]bool{}
					}
					reconciled[sh][req.Name] = true
					return reconcile.Result{}, nil
				}))
		}
	}})
	eventually(t, "both shards' controllers reconcile every ConfigMap", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reconciled["left"]) == len(objs) && len(reconciled["right"]) == len(objs)
	})
	if n := r.cache.handlers.Load(); n != 2 {
		t.Errorf("the manager's informer has %d event handlers, want 2 (one per shard term)", n)
	}
	r.stop()
	if n := r.cache.handlers.Load(); n != 0 {
		t.Errorf("after the terms, the manager's informer has %d event handlers", n)
	}
	r.shardMu.Lock()
	defer r.shardMu.Unlock()
	if len(r.shardCaches) != 0 {
		t.Errorf("%d shard caches made for plain shards", len(r.shardCaches))
	}
}

// checkTakeover checks that replica id's terms of the shards taken, which
// it took over when their holder stopped at stopped, started on synced
// caches it listed before then.
func checkTakeover(t *testing.T, b *shardBook, id string, taken []string, stopped time.Time) {
	t.Helper()
	eventually(t, id+"'s terms of the shards it took", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		for _, s := range b.starts {
			if s.replica == id && s.at.After(stopped) {
				n++
			}
		}
		return n == len(taken)
	})
	b.mu.Lock()
	for _, sh := range taken {
		var st *shardStart
		for i := range b.starts {
			if s := &b.starts[i]; s.replica == id && s.shard == sh {
				st = s
			}
		}
		switch {
		case st == nil || st.cache == nil:
			t.Errorf("shard %s: no term of %s's on a cache of its range", sh, id)
		case !st.synced:
			t.Errorf("shard %s: %s's term started on a cache not synced", sh, id)
		default:
			at, _ := st.cache.listedAt.Load().(time.Time)
			t.Logf("shard %s: %s's cache listed %v before its holder stopped; its term started %v after", sh, id, stopped.Sub(at), st.at.Sub(stopped))
			if !at.Before(stopped) {
				t.Errorf("shard %s: %s's cache listed at %v, after its holder stopped (%v): a cold start", sh, id, at, stopped)
			}
		}
	}
	b.mu.Unlock()
}

// reconciledAll returns whether r's terms have reconciled every object of
// the shards r holds now.
func (b *shardBook) reconciledAll(r *replica, byName map[string]*corev1.ConfigMap) func() bool {
	return func() bool {
		want := map[string]bool{}
		for _, sh := range r.m.Elector().Shards() {
			i, _ := strconv.Atoi(sh)
			rg, _ := shardrange.Of(shardrange.UID, i, 4)
			for name, cm := range byName {
				if ok, _ := rg.Matches(cm); ok {
					want[name] = true
				}
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.calls {
			if c.replica == r.id {
				delete(want, c.name)
			}
		}
		return len(want) == 0
	}
}
