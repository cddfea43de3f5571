package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// crtShardLabel marks the ConfigMaps of TestCtrlrtShardCachesOnTheApiserver.
const crtShardLabel = "relect-e2e-ctrlrt-shards"

// TestCtrlrtShardCachesOnTheApiserver runs ctrlrt's shard controllers
// (ShardSetup, 4 ranges of the uid hash) in one Manager against two
// kube-apiservers, with the ShardedListAndWatch gate on and off, over 60
// labelled ConfigMaps: the shard caches are controller-runtime's own
// (cache.New), each shard's controller reconciles exactly the ConfigMaps of
// its range, the Manager's own cache has no ConfigMap informer, and the
// replica says that the server did not filter only with the gate off.
func TestCtrlrtShardCachesOnTheApiserver(t *testing.T) {
	plain := requireCluster(t)
	gated, err := startCluster(filepath.Join(workDir, "controlplane-ctrlrt-shards"), "ShardedListAndWatch=true")
	if err != nil {
		t.Fatalf("starting the control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := gated.stop(); err != nil {
			t.Errorf("stopping the gated control plane: %v", err)
		}
	})
	for _, c := range []struct {
		name    string
		cl      *cluster
		filters bool
	}{{"gate on", gated, true}, {"gate off", plain, false}} {
		t.Run(strings.ReplaceAll(c.name, " ", "-"), func(t *testing.T) {
			told, calls := runShardManager(t, c.cl, 60)
			t.Logf("%s: %d reconciles, each of a ConfigMap of its shard's range; told %d times that the server did not filter", c.name, calls, told)
			if c.filters && told != 0 {
				t.Errorf("the gated apiserver filtered, yet the replica was told %d times it did not", told)
			}
			if !c.filters && told == 0 {
				t.Error("the apiserver without the gate did not filter, and the replica never said so")
			}
		})
	}
}

// runShardManager creates n labelled ConfigMaps on cl, runs a ctrlrt
// Manager whose ShardSetup reconciles them per range shard until every one
// was reconciled, checks each reconcile against its shard's range, and
// returns how many times the shard caches said the server did not filter,
// and the reconciles.
func runShardManager(t *testing.T, cl *cluster, n int) (told int64, calls int) {
	ctx := context.Background()
	createShardConfigMaps(t, cl, n)
	var toldN atomic.Int64
	log := funcr.New(func(prefix, args string) {
		if strings.Contains(args, "does not filter") {
			toldN.Add(1)
		}
	}, funcr.Options{})
	rec := &shardRecorder{t: t, seen: map[string]bool{}}
	m := newShardManager(t, cl, log, rec.setup)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Start(runCtx) }()
	for deadline := time.Now().Add(60 * time.Second); rec.count() < n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	var list corev1.ConfigMapList
	var nc *cache.ErrResourceNotCached
	if err := m.GetCache().List(ctx, &list); !errors.As(err, &nc) {
		t.Errorf("the Manager's own cache: List of ConfigMaps returned %v, want ErrResourceNotCached (no informer)", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Manager.Start: %v", err)
	}
	if got := rec.count(); got != n {
		t.Errorf("%d of %d ConfigMaps reconciled within 60 s", got, n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return toldN.Load(), rec.calls
}

// createShardConfigMaps creates n ConfigMaps labelled crtShardLabel on cl,
// deleted when the test ends.
func createShardConfigMaps(t *testing.T, cl *cluster, n int) {
	cs := cl.client(t)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crt-shard-%03d", i), Namespace: namespace, Labels: map[string]string{crtShardLabel: "1"}}}
		if _, err := cs.CoreV1().ConfigMaps(namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: crtShardLabel})
	})
}

// newShardManager returns a ctrlrt Manager on cl, logging to log, whose
// caches hold only the labelled ConfigMaps, with 4 uid-range shards whose
// terms setup builds.
func newShardManager(t *testing.T, cl *cluster, log logr.Logger, setup ctrlrt.SetupFunc) *ctrlrt.Manager {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{crtShardLabel: "1"})
	m, err := ctrlrt.NewManager(cl.adminConfig(), manager.Options{
		Scheme: scheme, Logger: log, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultLabelSelector: sel, ReaderFailOnMissingInformer: true},
	}, ctrlrt.Options{
		Elector: relect.Options{Namespace: namespace, Name: "ctrlrt-shards", Identity: "a",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			Shards: relect.ShardOptions{Count: 4, Ranges: shardrange.UID}},
		ShardInformers: []client.Object{&corev1.ConfigMap{}},
		ShardSetup:     setup,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// shardRecorder is the ShardSetup of runShardManager: a controller of
// ConfigMaps per shard term, which records what it reconciles and fails
// the test on a ConfigMap outside its shard's range.
type shardRecorder struct {
	t     *testing.T
	mu    sync.Mutex
	seen  map[string]bool
	calls int
}

func (r *shardRecorder) setup(ctx context.Context, mgr manager.Manager) error {
	sh, _ := relect.ShardFromContext(ctx)
	rg, _ := shardrange.FromContext(ctx)
	return builder.ControllerManagedBy(mgr).Named("shard").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &cm); err != nil {
				return reconcile.Result{}, err
			}
			if ok, err := rg.Matches(&cm); !ok || err != nil {
				r.t.Errorf("shard %s (%s) reconciled %s (uid %s), outside its range (%v)", sh, rg.Selector(), cm.Name, cm.UID, err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[cm.Name] = true
			r.calls++
			return reconcile.Result{}, nil
		}))
}

func (r *shardRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
