package ctrlrt_test

import (
	"context"
	"fmt"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/relecttest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A leader-only controller that stops and starts with each term, in one
// manager: the term ends with a Yield, and the same process leads again,
// its controller built afresh. Without a cluster, the example gives the
// manager a cache over a fake clientset and relect an in-memory Lease API;
// a program leaves NewCache unset and relect.Options.Client nil (ctrlrt
// uses the manager's rest.Config).
func ExampleNewManager() {
	api := relecttest.NewLeaseAPI()
	api.PutReleased("default", "example") // taken at once
	cluster := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}})

	reconciled := make(chan string, 16)
	mgr, err := ctrlrt.NewManager(&rest.Config{Host: "https://cluster.example"}, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewCache:               func(*rest.Config, cache.Options) (cache.Cache, error) { return newTestCache(cluster, scheme), nil },
	}, ctrlrt.Options{
		Elector: relect.Options{
			Client: api.Client("a").Clientset(), Namespace: "default", Name: "example", Identity: "replica-a",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		},
		Setup: func(ctx context.Context, mgr manager.Manager) error {
			return builder.ControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(
				reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					term, _ := relect.TermFromContext(ctx) // the reconcile context is the term's
					reconciled <- fmt.Sprintf("term %d reconciled %s", term, req)
					return reconcile.Result{}, nil
				}))
		},
		Informers: []client.Object{&corev1.ConfigMap{}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	fmt.Println(<-reconciled)
	// Yield returns once the term's controller has returned and the lease
	// is released; the lone replica then campaigns and leads again.
	if err := mgr.Elector().Yield(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(<-reconciled)
	stop()
	fmt.Println("Start returned", <-done)
	// Output:
	// term 1 reconciled default/settings
	// term 2 reconciled default/settings
	// Start returned <nil>
}
