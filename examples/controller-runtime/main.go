// Command controller-runtime is a controller built on controller-runtime
// whose leader-only controller stops and starts with each of relect's
// terms, in a process that never restarts (package ctrlrt).
//
// Each replica runs one long-lived manager with its own election off: its
// cache of ConfigMaps, its metrics server (-metrics-addr) and its health
// probes (-health-addr: /healthz is relect's check, for liveness; /readyz
// passes once the cache is synced, for readiness) serve on every replica,
// leader or not, from start to exit. relect campaigns for the Lease
// -lease-name in the pod's namespace (POD_NAMESPACE) as POD_NAME, both
// from the downward API. Each term builds the ConfigMap controller afresh
// on the manager's warm cache: it stamps every ConfigMap labelled
// relect-example=controller-runtime in the namespace with the leader's
// identity, term and fence, writing only over a stamp of an older fence, so
// that a deposed leader's late write never lands over a newer leader's
// (docs/fencing.md). When the term ends — the lease lost or expired, a
// Yield, SIGTERM — the controller stops, and the lease is released only
// after it has returned; the process goes on as a follower, with its cache
// warm for its next term.
//
// What never restarts across terms: the process, the manager, its client
// and cache (the ConfigMap informer lists once, at start), the metrics and
// probe servers. What every term starts afresh: the controller, its work
// queue, its event handler on the informer (removed when the term ends)
// and its workers.
//
// Manifests: deploy/controller-runtime (ServiceAccount, Role for Leases
// and ConfigMaps, RoleBinding, a 3-replica Deployment, the Dockerfile).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/metrics"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	handler := slog.NewJSONHandler(os.Stderr, nil)
	if err := run(slog.New(handler), logr.FromSlogHandler(handler)); err != nil {
		slog.New(handler).Error("exiting", "err", err)
		os.Exit(1)
	}
}

// flags are the command line. -kubeconfig is controller-runtime's (package
// client/config), for runs outside a cluster.
type flags struct {
	namespace, leaseName, metricsAddr, healthAddr string
}

func parseFlags() (flags, error) {
	var f flags
	flag.StringVar(&f.namespace, "lease-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease and of the ConfigMaps (default: $POD_NAMESPACE)")
	flag.StringVar(&f.leaseName, "lease-name", "relect-controller-runtime", "name of the Lease")
	flag.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of the metrics server (controller-runtime's and relect's metrics)")
	flag.StringVar(&f.healthAddr, "health-addr", ":8081", "address of the health probes: /healthz and /readyz")
	flag.Parse()
	if f.namespace == "" {
		return f, errors.New("no namespace: set -lease-namespace or POD_NAMESPACE")
	}
	return f, nil
}

func run(logger *slog.Logger, log logr.Logger) error {
	f, err := parseFlags()
	if err != nil {
		return err
	}
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		logger.Warn("POD_NAME is not set; using relect's generated identity")
	}
	ctrllog.SetLogger(log) // controller-runtime's own loggers
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}

	// The reconciler needs the manager's client and the Elector's
	// identity: it is completed below, before Start, and Setup runs only
	// in a term, after Start.
	stamper := &reconciler{}
	mgr, err := ctrlrt.NewManager(cfg, manager.Options{
		Scheme: clientgoscheme.Scheme,
		Logger: log,
		// The cache holds the namespace's ConfigMaps only, as the Role
		// grants; it is the manager's, listed once, warm for every term.
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{f.namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.healthAddr,
	}, ctrlrt.Options{
		Elector: relect.Options{
			Namespace: f.namespace,
			Name:      f.leaseName,
			Identity:  identity,
			// relect's default durations (15 s, 10 s, 2 s): a crashed
			// leader is replaced in about 15–20 s, a stopped one at once.
		},
		// Every term builds the controller afresh, as SetupWithManager
		// would on any manager.
		Setup: func(_ context.Context, mgr manager.Manager) error {
			return stamper.SetupWithManager(mgr)
		},
		// Listed and synced before this replica campaigns: a promotion
		// lists nothing.
		Informers: []client.Object{&corev1.ConfigMap{}},
	})
	if err != nil {
		return err
	}
	stamper.client, stamper.identity = mgr.GetClient(), mgr.Elector().Identity()

	if err := registerMetrics(mgr.Elector()); err != nil {
		return err
	}

	logger.Info("starting", "lease", f.namespace+"/"+f.leaseName, "identity", mgr.Elector().Identity())
	// Start returns on SIGTERM (a rollout, a drain, kubectl delete): it
	// ends the term (the controller returns, the lease is released so that
	// another replica takes over at once), then stops the manager.
	return mgr.Start(signals.SetupSignalHandler())
}

// registerMetrics serves relect's metrics beside controller-runtime's, on
// the manager's metrics server.
func registerMetrics(e *relect.Elector) error {
	collector, err := metrics.NewCollector(e, metrics.Options{})
	if err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(collector); err != nil {
		return fmt.Errorf("registering relect's metrics: %w", err)
	}
	return nil
}
