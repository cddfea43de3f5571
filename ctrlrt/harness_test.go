package ctrlrt_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/relecttest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	namespace = "default"
	leaseName = "ctrlrt-test"
)

// Short lease timings (relect wants RetryPeriod + 1 s < RenewDeadline <
// LeaseDuration, in whole seconds): these tests change leaders with Yield,
// which needs no expiry, and never assert a duration.
var electorTimings = relect.Options{LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// configMaps returns n ConfigMaps named cm-0, cm-1, ... in namespace.
func configMaps(n int) []runtime.Object {
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("cm-%d", i)}})
	}
	return objs
}

// call is one Reconcile, as the reconciler saw it.
type call struct {
	req        reconcile.Request
	term       int64
	fence      relect.Fence
	termOK     bool
	leading    bool // the Elector's IsLeader when it began
	start, end time.Time
}

// replica is one process of the tests: a Manager on its own fake cluster
// (a client-go fake clientset, with a shared-informer cache over it), campaigning
// on a shared relecttest Lease API. Its Setup builds one controller of
// ConfigMaps with the builder, whose reconciler records every call; the
// replica counts the reconciler's and predicate's calls made outside a
// term (between the end of one term's OnStoppedLeading-ordered teardown
// and the next Setup), which must be none.
type replica struct {
	t     *testing.T
	id    string
	m     *ctrlrt.Manager
	cache *testCache
	cs    *fake.Clientset

	// shardCaches are the shard caches NewCache made (cache.Options with
	// NewInformer), in order.
	shardMu     sync.Mutex
	shardCaches []*testCache

	inTerm  atomic.Bool  // from Setup to OnStoppedLeading
	outside atomic.Int64 // reconciler or predicate calls while !inTerm
	setups  atomic.Int64

	// blocked, if not nil, is called by every Reconcile before it
	// returns (set it before start).
	blocked func(ctx context.Context)

	mu    sync.Mutex
	calls []call

	cancel context.CancelFunc
	done   chan error
}

// replicaOpts change what newReplica builds.
type replicaOpts struct {
	objects []runtime.Object
	// setup, if not nil, runs in Setup before the controller is built; an
	// error it returns is Setup's.
	setup func(ctx context.Context, mgr manager.Manager) error
	// manager and options, if not nil, change the options before NewManager.
	manager func(*manager.Options)
	options func(*ctrlrt.Options)
	noStart bool
}

func testLogger(t *testing.T) logr.Logger {
	if os.Getenv("CTRLRT_TEST_LOG") == "1" {
		return testr.New(t)
	}
	return logr.Discard()
}

func newReplica(t *testing.T, api *relecttest.LeaseAPI, id string, o replicaOpts) *replica {
	t.Helper()
	r := &replica{t: t, id: id, cs: fake.NewClientset(o.objects...), done: make(chan error, 1)}
	r.cache = newTestCache(r.cs, scheme)
	mo := manager.Options{
		Scheme:                 scheme,
		Logger:                 testLogger(t).WithValues("replica", id),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               r.newCache,
	}
	if o.manager != nil {
		o.manager(&mo)
	}
	eo := electorTimings
	eo.Client, eo.Namespace, eo.Name, eo.Identity = api.Client(id).Clientset(), namespace, leaseName, id
	eo.OnStoppedLeading = func() { r.inTerm.Store(false) }
	opts := ctrlrt.Options{
		Elector:   eo,
		Informers: []client.Object{&corev1.ConfigMap{}},
		Setup: func(ctx context.Context, mgr manager.Manager) error {
			r.setups.Add(1)
			r.inTerm.Store(true)
			if o.setup != nil {
				if err := o.setup(ctx, mgr); err != nil {
					return err
				}
			}
			return builder.ControllerManagedBy(mgr).
				For(&corev1.ConfigMap{}).
				WithEventFilter(predicate.Funcs{
					CreateFunc:  func(event.CreateEvent) bool { r.check(); return true },
					UpdateFunc:  func(event.UpdateEvent) bool { r.check(); return true },
					DeleteFunc:  func(event.DeleteEvent) bool { r.check(); return true },
					GenericFunc: func(event.GenericEvent) bool { r.check(); return true },
				}).
				Complete(reconcile.Func(r.reconcile))
		},
	}
	if o.options != nil {
		o.options(&opts)
	}
	m, err := ctrlrt.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, mo, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	if !o.noStart {
		r.start()
	}
	return r
}

// newCache is the manager's NewCache: r.cache for the manager, and a new
// testCache for each shard's (whose options have NewInformer set).
func (r *replica) newCache(_ *rest.Config, co cache.Options) (cache.Cache, error) {
	if co.NewInformer == nil {
		return r.cache, nil
	}
	c := newTestCache(r.cs, scheme)
	c.newInformer = co.NewInformer
	r.shardMu.Lock()
	r.shardCaches = append(r.shardCaches, c)
	r.shardMu.Unlock()
	return c, nil
}

// start starts the manager; the test's cleanup stops it and checks that
// Start returned nil.
func (r *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.m.Start(ctx) }()
	r.t.Cleanup(r.stop)
}

// stop stops the manager and waits for Start to return (once).
func (r *replica) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("%s: Manager.Start returned %v", r.id, err)
		}
	case <-time.After(30 * time.Second):
		r.t.Errorf("%s: Manager.Start did not return within 30s of its context's end", r.id)
	}
}

func (r *replica) check() {
	if !r.inTerm.Load() {
		r.outside.Add(1)
	}
}

func (r *replica) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.check()
	c := call{req: req, start: time.Now(), leading: r.m.Elector().IsLeader()}
	c.term, c.termOK = relect.TermFromContext(ctx)
	c.fence, _ = relect.FenceFromContext(ctx)
	if r.blocked != nil {
		r.blocked(ctx)
	}
	c.end = time.Now()
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return reconcile.Result{}, nil
}

// callsInTerm returns the reconciles made with term's context.
func (r *replica) callsInTerm(term int64) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if c.term == term {
			out = append(out, c)
		}
	}
	return out
}

// yield makes r's leader step down (Yield), failing the test if it cannot
// within 30 s.
func (r *replica) yield() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.m.Elector().Yield(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// awaitTerm waits until r leads, and returns the term's number and fence.
func (r *replica) awaitTerm() (int64, relect.Fence) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := r.m.Elector().WaitForTerm(ctx)
	if err != nil {
		r.t.Fatalf("%s never led: %v", r.id, err)
	}
	return n, r.m.Elector().Stats().Fence
}

// awaitReconciled waits until r has reconciled n distinct objects in term.
func (r *replica) awaitReconciled(term int64, n int) []call {
	r.t.Helper()
	var calls []call
	eventually(r.t, "reconciles by "+r.id, func() bool {
		calls = r.callsInTerm(term)
		seen := map[reconcile.Request]bool{}
		for _, c := range calls {
			seen[c.req] = true
		}
		return len(seen) >= n
	})
	return calls
}

// eventually polls cond until it holds, failing the test after 30 s: a
// liveness bound for a busy machine, not a measurement.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
