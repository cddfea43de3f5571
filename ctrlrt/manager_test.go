package ctrlrt_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/fencing"
	"github.com/relect/relect/internal/bubble"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// TestControllersFollowTheTerms is the adapter's promise: two replicas,
// each one long-lived Manager, hand the lease back and forth with Yield;
// each term builds its controller afresh and reconciles every object with
// the term's context (its number and fence), the controller of a term that
// ended never reconciles again, its event handler is removed from the
// informer, and no reconciler or predicate runs outside a term — while the
// processes, their managers and caches run throughout.
func TestControllersFollowTheTerms(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	objs := configMaps(3)
	a := newReplica(t, api, "a", replicaOpts{objects: objs})
	b := newReplica(t, api, "b", replicaOpts{objects: objs})

	var lastFence relect.Fence
	for round := range 6 {
		// Exactly one leads; wait for it.
		var leader, follower *replica
		eventually(t, "a leader", func() bool {
			switch {
			case a.m.Elector().IsLeader():
				leader, follower = a, b
			case b.m.Elector().IsLeader():
				leader, follower = b, a
			}
			return leader != nil
		})
		term, fence := leader.awaitTerm()
		if fence.Compare(lastFence) <= 0 {
			t.Errorf("round %d: term %d's fence %q is not above the last term's %q", round, term, fence, lastFence)
		}
		lastFence = fence
		for _, c := range leader.awaitReconciled(term, len(objs)) {
			if !c.termOK || c.fence != fence {
				t.Errorf("round %d: %s reconciled %v with term %d (ok %v) fence %q; want term %d fence %q",
					round, leader.id, c.req, c.term, c.termOK, c.fence, term, fence)
			}
		}
		if n := leader.cache.handlers.Load(); n != 1 {
			t.Errorf("round %d: the leader's informer has %d event handlers, want 1 (its term's controller)", round, n)
		}
		if n := follower.cache.handlers.Load(); n != 0 {
			t.Errorf("round %d: the follower's informer has %d event handlers, want 0", round, n)
		}

		// Changes between terms reach nobody's predicates: the follower's
		// handler of its last term is gone.
		before := len(leader.callsInTerm(term))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := leader.m.Elector().Yield(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %s: Yield: %v", round, leader.id, err)
		}
		// Yield returned: the term's controller has returned and the lease
		// is released. Its reconciles are all in.
		after := len(leader.callsInTerm(term))
		if n := leader.cache.handlers.Load(); n != 0 {
			t.Errorf("round %d: after its term, %s's informer still has %d event handlers", round, leader.id, n)
		}
		if after < before {
			t.Fatalf("round %d: calls went backwards", round)
		}
		touch(t, leader, "cm-0")
	}
	a.stop()
	b.stop()
	for _, r := range []*replica{a, b} {
		if n := r.outside.Load(); n != 0 {
			t.Errorf("%s: %d reconciler or predicate calls outside a term", r.id, n)
		}
		t.Logf("%s: %d terms (Setup calls), %d reconciles", r.id, r.setups.Load(), len(r.calls))
	}
}

// touch updates a ConfigMap on r's fake cluster, so that its informer
// delivers an update to any handler still registered.
func touch(t *testing.T, r *replica, name string) {
	t.Helper()
	cms := r.cs.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["touched"] = time.Now().Format(time.RFC3339Nano)
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseWaitsForReconcilers: a Reconcile in progress when the term
// ends sees its context cancelled with the term's cause, and the lease is
// still this replica's until it has returned: relect releases only after
// the term's controllers returned, and Yield returns after the release.
// In simulated time: the Reconcile's 100 ms sleep ends only once every
// other goroutine is blocked, so a release that did not wait for it would
// have been sent by then, however slow the machine (in real time, a slow
// machine passed the test whatever the code did).
func TestReleaseWaitsForReconcilers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, leaseName)
		entered := make(chan struct{}, 1)
		type seen struct {
			holder string
			cause  error
		}
		saw := make(chan seen, 1)
		r := newReplica(t, api, "a", replicaOpts{objects: configMaps(1), noStart: true})
		r.blocked = func(ctx context.Context) {
			select {
			case entered <- struct{}{}:
			default:
				return // only the first Reconcile waits
			}
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // a slow return: the lease must wait for it
			saw <- seen{api.Holder(namespace, leaseName), context.Cause(ctx)}
		}
		r.start()
		r.awaitTerm()
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.m.Elector().Yield(ctx); err != nil {
			t.Fatal(err)
		}
		s := <-saw
		if s.holder != "a" {
			t.Errorf("while the Reconcile was returning, the Lease was held by %q: released before the controller returned", s.holder)
		}
		if !errors.Is(s.cause, relect.ErrYielded) {
			t.Errorf("the Reconcile's context ended with %v, want the term's cause, relect.ErrYielded", s.cause)
		}
		// The next term's controller at work before the test ends (see
		// TestNoCampaignBeforeWarmInformers): its Reconcile has begun.
		<-entered
	})
}

// TestAddRoutesRunnables: on the long-lived Manager, a runnable that needs
// no election starts once and runs throughout; one that needs election
// starts in every term with the term's context and stops with it; a
// controller that needs election is refused.
func TestAddRoutesRunnables(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	r := newReplica(t, api, "a", replicaOpts{noStart: true})

	var always, perTerm atomic.Int64
	var termsSeen = make(chan int64, 16)
	if err := r.m.Add(noElection(func(ctx context.Context) error {
		always.Add(1)
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Add(manager.RunnableFunc(func(ctx context.Context) error {
		perTerm.Add(1)
		n, ok := relect.TermFromContext(ctx)
		if !ok {
			t.Error("a per-term runnable's context carries no term")
		}
		termsSeen <- n
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Add(manager.RunnableFunc(nil)); err == nil {
		t.Error("Add(manager.RunnableFunc(nil)): nil error; every term would panic starting it")
	}
	// A name of its own in each run: controller-runtime keeps every name
	// it validated in a process-wide set, and with -count=3 the second run
	// got "controller with name ... already exists" instead.
	err := builder.ControllerManagedBy(r.m).For(&corev1.ConfigMap{}).Named(fmt.Sprintf("on-the-long-lived-manager-%d", runs.Add(1))).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if !errors.Is(err, ctrlrt.ErrControllerOnManager) {
		t.Errorf("a leader-only controller built on the Manager: %v, want ErrControllerOnManager", err)
	}
	r.start()

	for i := range 3 {
		term, _ := r.awaitTerm()
		select {
		case n := <-termsSeen:
			if n != term {
				t.Errorf("term %d: the per-term runnable ran with term %d", term, n)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("term %d: the per-term runnable did not start", term)
		}
		if i < 2 {
			r.yield()
		}
	}
	r.stop()
	if n := always.Load(); n != 1 {
		t.Errorf("the runnable that needs no election started %d times, want 1", n)
	}
	if n := perTerm.Load(); n != 3 {
		t.Errorf("the runnable that needs election started %d times in 3 terms, want 3", n)
	}
}

// runs counts TestAddRoutesRunnables' runs, for its controller's name.
var runs atomic.Int64

type noElection manager.RunnableFunc

func (f noElection) Start(ctx context.Context) error { return f(ctx) }
func (noElection) NeedLeaderElection() bool          { return false }

// TestFailedTermsEndAndCampaignAgain: a Setup that fails or panics, or a
// term's runnable that fails, ends only that term: the lease is released,
// the replica campaigns again, and its next term works.
func TestFailedTermsEndAndCampaignAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(n int64, mgr manager.Manager) error
	}{
		{"setup error", func(n int64, _ manager.Manager) error {
			if n == 1 {
				return errors.New("first Setup fails")
			}
			return nil
		}},
		{"setup panic", func(n int64, _ manager.Manager) error {
			if n == 1 {
				panic("first Setup panics")
			}
			return nil
		}},
		{"runnable error", func(n int64, mgr manager.Manager) error {
			if n == 1 {
				return mgr.Add(manager.RunnableFunc(func(context.Context) error { return errors.New("the first term's runnable fails") }))
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			api.PutReleased(namespace, leaseName)
			var r *replica
			var setups atomic.Int64
			r = newReplica(t, api, "a", replicaOpts{objects: configMaps(1), setup: func(_ context.Context, mgr manager.Manager) error {
				return tc.setup(setups.Add(1), mgr)
			}})
			eventually(t, "a second term", func() bool { return r.setups.Load() >= 2 && r.m.Elector().IsLeader() })
			term, _ := r.awaitTerm()
			r.awaitReconciled(term, 1)
			if st := r.m.Elector().Stats(); st.TermsStarted < 2 {
				t.Errorf("TermsStarted %d, want 2 or more", st.TermsStarted)
			}
		})
	}
}

// TestTermManagerRefusesWhatOutlivesTerms: within a term, what must be done
// once for the process is refused with ErrNotPerTerm, and IndexField
// indexes a field once however many terms ask (as kubebuilder's
// SetupWithManager does every time).
func TestTermManagerRefusesWhatOutlivesTerms(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	errs := make(chan error, 64)
	r := newReplica(t, api, "a", replicaOpts{objects: configMaps(1), setup: func(ctx context.Context, mgr manager.Manager) error {
		for _, err := range []error{
			mgr.AddHealthzCheck("x", healthz.Ping),
			mgr.AddReadyzCheck("x", healthz.Ping),
			mgr.AddMetricsServerExtraHandler("/x", nil),
			mgr.Start(ctx),
			mgr.GetCache().RemoveInformer(ctx, &corev1.ConfigMap{}),
		} {
			errs <- err
		}
		select {
		case <-mgr.Elected():
		default:
			errs <- errors.New("Elected is not closed within a term")
		}
		return mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "data.key", func(o client.Object) []string {
			return []string{o.(*corev1.ConfigMap).Data["key"]}
		})
	}})
	for i := range 3 {
		term, _ := r.awaitTerm()
		r.awaitReconciled(term, 1)
		if i < 2 {
			r.yield()
		}
	}
	r.stop()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ctrlrt.ErrNotPerTerm) {
			t.Errorf("within a term: %v, want ErrNotPerTerm", err)
		}
	}
	if n := r.cache.indexed.Load(); n != 1 {
		t.Errorf("the field was indexed %d times in 3 terms, want once", n)
	}
}

// TestNewManagerRefusesBadOptions: every problem is reported, matching the
// sentinel errors callers test.
func TestNewManagerRefusesBadOptions(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	good := func() ctrlrt.Options {
		eo := electorTimings
		eo.Client, eo.Namespace, eo.Name = api.Client("x").Clientset(), namespace, leaseName
		return ctrlrt.Options{Elector: eo, Setup: func(context.Context, manager.Manager) error { return nil }}
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	mo := manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	for _, tc := range []struct {
		name   string
		config *rest.Config
		mo     func(*manager.Options)
		o      func(*ctrlrt.Options)
		want   []error
	}{
		{"nil config", nil, nil, nil, []error{ctrlrt.ErrInvalidOptions}},
		{"manager election", cfg, func(m *manager.Options) { m.LeaderElection = true }, nil, []error{ctrlrt.ErrManagerElection}},
		{"no Setup", cfg, nil, func(o *ctrlrt.Options) { o.Setup = nil }, []error{ctrlrt.ErrInvalidOptions}},
		{"OnStartedLeading", cfg, nil, func(o *ctrlrt.Options) { o.Elector.OnStartedLeading = func(context.Context) {} }, []error{ctrlrt.ErrInvalidOptions}},
		{"nil informer", cfg, nil, func(o *ctrlrt.Options) { o.Informers = []client.Object{(*corev1.ConfigMap)(nil)} }, []error{ctrlrt.ErrInvalidOptions}},
		{"bad elector", cfg, nil, func(o *ctrlrt.Options) { o.Elector.Namespace = "" }, []error{ctrlrt.ErrInvalidOptions, relect.ErrInvalidOptions}},
		{"shard informers without ShardSetup", cfg, nil, func(o *ctrlrt.Options) { o.ShardInformers = []client.Object{&corev1.ConfigMap{}} }, []error{ctrlrt.ErrInvalidOptions}},
		{"Shards.Run with ShardSetup", cfg, nil, func(o *ctrlrt.Options) {
			o.ShardSetup = o.Setup
			o.Elector.Shards = relect.ShardOptions{Count: 2, Run: func(context.Context) {}}
		}, []error{ctrlrt.ErrInvalidOptions}},
		{"ShardSetup without shards", cfg, nil, func(o *ctrlrt.Options) { o.ShardSetup = o.Setup }, []error{ctrlrt.ErrInvalidOptions, relect.ErrInvalidOptions}},
		// A negative health duration would serve a liveness check that
		// always fails: a restart loop, not an error at start.
		{"negative health", cfg, nil, func(o *ctrlrt.Options) { o.Health.WorkStopTimeout = -time.Second }, []error{ctrlrt.ErrInvalidOptions, relect.ErrInvalidOptions}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, m := good(), mo
			if tc.mo != nil {
				tc.mo(&m)
			}
			if tc.o != nil {
				tc.o(&o)
			}
			_, err := ctrlrt.NewManager(tc.config, m, o)
			t.Log(err)
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("NewManager: %v, want it to match %v", err, want)
				}
			}
		})
	}
}

// TestNewManagerNamesShardFields: the shard options a user gets wrong are
// each reported by the field to set: Elector.Shards without ShardSetup
// (nor Shards.Run) names ShardSetup, not only relect's Shards.Run; with
// ShardSetup, Shards.Run and Shards.Warm are both named, not the first
// one only.
func TestNewManagerNamesShardFields(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	setup := func(context.Context, manager.Manager) error { return nil }
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	mo := manager.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"}
	for _, tc := range []struct {
		name   string
		shards relect.ShardOptions
		setup  bool
		want   []string
	}{
		{"Count without ShardSetup", relect.ShardOptions{Count: 2}, false, []string{"Options.ShardSetup is nil", "Options.Shards.Run is nil"}},
		{"Ranges without ShardSetup", relect.ShardOptions{Count: 2, Ranges: shardrange.UID}, false, []string{"Options.ShardSetup is nil"}},
		{"Run and Warm with ShardSetup", relect.ShardOptions{Count: 2, Ranges: shardrange.UID, Run: func(context.Context) {}, Warm: func(context.Context) {}},
			true, []string{"Options.Elector.Shards.Run is set", "Options.Elector.Shards.Warm is set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eo := electorTimings
			eo.Client, eo.Namespace, eo.Name = api.Client("x").Clientset(), namespace, leaseName
			eo.Shards = tc.shards
			o := ctrlrt.Options{Elector: eo, Setup: setup}
			if tc.setup {
				o.ShardSetup = setup
			}
			_, err := ctrlrt.NewManager(cfg, mo, o)
			require.ErrorIs(t, err, ctrlrt.ErrInvalidOptions)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestNewManagerReportsEveryProblemAtOnce: ctrlrt's fields and the
// Elector's, in one error, before anything is built.
func TestNewManagerReportsEveryProblemAtOnce(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	o := ctrlrt.Options{Elector: electorTimings}
	o.Elector.Client = api.Client("x").Clientset() // Namespace and Name left empty
	o.Health.CutOffAfter = -time.Second
	_, err := ctrlrt.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{}, o)
	for _, field := range []string{"Options.Setup", "Namespace", "Name", "CutOffAfter"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("NewManager: %v, want it to name %s", err, field)
		}
	}
}

// TestGoroutinesDoNotGrowWithTerms: a long-lived process that leads term
// after term keeps the same number of goroutines in each: every goroutine
// of a term's controller, and of the informer's listener of its event
// handler, ends with the term. (controller-runtime never removes a Kind
// source's event handler; without ctrlrt's removal each term would leave
// its listener's two goroutines behind.) In simulated time, once every
// goroutine has settled (synctest.Wait), the bubble's own goroutines are
// counted: none of another test's, and none still ending (it counted the
// process's before, with a slack for goroutines still ending).
func TestGoroutinesDoNotGrowWithTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, leaseName)
		r := newReplica(t, api, "a", replicaOpts{objects: configMaps(3), options: func(o *ctrlrt.Options) {
			o.Elector.BackoffMax = o.Elector.RetryPeriod // a lone candidate campaigns again at once
		}})
		var counts []int
		for i := range 12 {
			term, _ := r.awaitTerm()
			r.awaitReconciled(term, 3)
			synctest.Wait()
			counts = append(counts, bubble.Goroutines())
			if i < 11 { // the test ends in a term whose controller is at work (see TestNoCampaignBeforeWarmInformers)
				r.yield()
			}
		}
		t.Logf("goroutines while leading, term after term: %v", counts)
		// relect's election runs a goroutine or two only at times (a
		// timer's wait, a term's watch: 32 to 34 measured); a term that left
		// one goroutine behind would add 11 by the 12th term.
		if first, last := counts[0], counts[len(counts)-1]; last > first+2 {
			t.Errorf("goroutines grew from %d (1st term) to %d (12th term)", first, last)
		}
	})
}

// TestReadinessWaitsForWarmInformers: a replica whose informers of
// Options.Informers have not synced does not campaign, and its readiness
// check fails with ErrNotWarm while its liveness check passes; once they
// have synced it is Ready and takes the lease.
func TestReadinessWaitsForWarmInformers(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	addr := freeAddr(t)
	r := newReplica(t, api, "a", replicaOpts{objects: configMaps(1), noStart: true, manager: func(mo *manager.Options) {
		mo.HealthProbeBindAddress = addr
	}})
	r.cache.hold = make(chan struct{})
	r.start()
	probe := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, "the probes served", func() bool { code, _ := probe("/healthz"); return code == http.StatusOK })
	code, body := probe("/readyz/" + ctrlrt.ReadyzCheckName)
	if code != http.StatusInternalServerError || !strings.Contains(body, "not synced") {
		t.Errorf("readiness with the informers not synced: %d %q, want a failure", code, body)
	}
	if code, body := probe("/healthz/" + ctrlrt.HealthzCheckName); code != http.StatusOK {
		t.Errorf("liveness with the informers not synced: %d %q, want ok", code, body)
	}
	// That it does not campaign meanwhile is TestNoCampaignBeforeWarmInformers's,
	// in simulated time: a wait here would prove nothing on a busy machine.
	if h := api.Holder(namespace, leaseName); h != "" {
		t.Fatalf("%s took the lease before its informers synced", h)
	}
	close(r.cache.hold)
	r.awaitTerm()
	if code, body := probe("/readyz"); code != http.StatusOK {
		t.Errorf("readiness once warm: %d %q", code, body)
	}
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUnmanagedControllersWork: Setup may build its controller without the
// builder, with controller.NewTypedUnmanaged on the term's cache (name
// validation skipped, as a term's controller has the last term's name) and
// add it to the term's manager.
func TestUnmanagedControllersWork(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	var r *replica
	r = newReplica(t, api, "a", replicaOpts{objects: configMaps(2), noStart: true, options: func(o *ctrlrt.Options) {
		o.Setup = func(ctx context.Context, mgr manager.Manager) error {
			r.setups.Add(1)
			r.inTerm.Store(true)
			c, err := controller.NewTypedUnmanaged("unmanaged", controller.TypedOptions[reconcile.Request]{
				Reconciler:         reconcile.Func(r.reconcile),
				SkipNameValidation: ptr.To(true),
			})
			if err != nil {
				return err
			}
			src := source.Kind(mgr.GetCache(), &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})
			if err := c.Watch(src); err != nil {
				return err
			}
			return mgr.Add(c)
		}
	}})
	r.start()
	for i := range 3 {
		term, _ := r.awaitTerm()
		r.awaitReconciled(term, 2)
		if i < 2 {
			r.yield()
		}
	}
	r.stop()
	if n := r.cache.handlers.Load(); n != 0 {
		t.Errorf("%d event handlers left on the informer after the last term", n)
	}
}

// TestStuckReconcileHoldsUpTheReleaseNotTheNextLeader: a Reconcile that
// ignores its context when its term ends (here by Yield) keeps the Lease
// from being released, not from passing on: the term no longer renews, the
// Lease expires and another replica leads while that Reconcile still runs.
// The stuck replica's liveness check says so (ErrWorkOverrun), its Yield
// returns ErrLeaseLost once the Reconcile has returned, and its late write
// with the old term's fence is refused once the new leader has written
// (docs/controller-runtime.md, "What never outside a term means").
func TestStuckReconcileHoldsUpTheReleaseNotTheNextLeader(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	api.PutReleased(namespace, leaseName)
	var guard fencing.Guard
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	lateWrite := make(chan error, 1)
	a := newReplica(t, api, "a", replicaOpts{objects: configMaps(1), noStart: true})
	a.blocked = func(ctx context.Context) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(entered)
		<-release // ignores ctx
		f, _ := relect.FenceFromContext(ctx)
		lateWrite <- guard.Admit(f)
	}
	a.start()
	a.awaitTerm()
	<-entered

	b := newReplica(t, api, "b", replicaOpts{objects: configMaps(1), noStart: true})
	bWrote := make(chan relect.Fence, 1)
	b.blocked = func(ctx context.Context) {
		if f, ok := relect.FenceFromContext(ctx); ok && guard.Admit(f) == nil {
			select {
			case bWrote <- f:
			default:
			}
		}
	}
	b.start()
	yielded := make(chan error, 1)
	go func() { yielded <- a.m.Elector().Yield(context.Background()) }()

	_, bFence := b.awaitTerm() // a's Reconcile is still blocked
	select {
	case f := <-bWrote:
		if f != bFence {
			t.Errorf("b wrote with fence %s, its term's is %s", f, bFence)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("b leads but never wrote")
	}
	health := a.m.Elector().HealthCheck(relect.HealthOptions{})
	deadline := time.Now().Add(30 * time.Second)
	for err := health(nil); !errors.Is(err, relect.ErrWorkOverrun); err = health(nil) {
		if time.Now().After(deadline) {
			t.Fatalf("a's liveness check with its Reconcile stuck: %v, want ErrWorkOverrun", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-yielded:
		t.Fatalf("a's Yield returned (%v) while its Reconcile still runs", err)
	default:
	}

	close(release)
	if err := <-lateWrite; !errors.Is(err, fencing.ErrStale) {
		t.Errorf("a's late write with its old term's fence, after b's: %v, want fencing.ErrStale", err)
	}
	if err := <-yielded; !errors.Is(err, relect.ErrLeaseLost) {
		t.Errorf("a's Yield: %v, want ErrLeaseLost (the Lease expired to b)", err)
	}
}

// TestNoCampaignBeforeWarmInformers, in simulated time: a replica whose
// informers have not synced sends no Lease request at all — not within 5
// retry periods, not within 10 lease durations — and takes the released
// lease within one retry period of their sync.
func TestNoCampaignBeforeWarmInformers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, leaseName)
		r := newReplica(t, api, "a", replicaOpts{objects: configMaps(1), noStart: true})
		r.cache.hold = make(chan struct{})
		r.start()
		time.Sleep(10 * electorTimings.LeaseDuration)
		synctest.Wait()
		if n := api.Client("a").TotalCalls(); n != 0 {
			t.Errorf("%d Lease calls before the informers synced, want none", n)
		}
		if h := api.Holder(namespace, leaseName); h != "" {
			t.Fatalf("%s took the lease before its informers synced", h)
		}
		synced := time.Now()
		close(r.cache.hold)
		term, _ := r.awaitTerm()
		took := time.Since(synced)
		t.Logf("took the lease %v after the informers synced", took)
		if took > electorTimings.RetryPeriod {
			t.Errorf("took the lease %v after the sync, want within one retry period (%v)", took, electorTimings.RetryPeriod)
		}
		// The term's controller at work before the test ends: a stop while
		// its source still waits for its handler's sync would leave that
		// wait (controller-runtime's goroutine, up to 100 ms) behind the
		// manager's Start, and simulated time stops when the test returns.
		r.awaitReconciled(term, 1)
	})
}
