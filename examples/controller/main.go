// Command controller is a minimal in-cluster program that runs several
// replicas and does its work only on the one that leads, with relect.
//
// Each replica campaigns for the Lease -lease-name in -lease-namespace (by
// default the pod's own namespace, from POD_NAMESPACE) under the identity
// POD_NAME, both given to the container by the downward API. The leader
// logs a line every -work-every with its term number and its fencing token,
// the fence a real controller would hand to the storage it writes, so that
// a deposed leader's late writes are refused (docs/fencing.md). Every replica serves /healthz (liveness:
// relect's health check), /readyz and /metrics on -health-addr.
//
// On SIGTERM (a rollout, a node drain, kubectl delete) the leader stops its
// work, releases the lease so that another replica takes over within about
// 2.2 × RetryPeriod instead of waiting LeaseDuration, and exits.
//
// Manifests: deploy/controller (ServiceAccount, Role, RoleBinding and a
// 3-replica Deployment).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/relect/relect"
	"github.com/relect/relect/metrics"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(logger); err != nil {
		logger.Error("exiting", "err", err)
		os.Exit(1)
	}
}

// flags are the command line.
type flags struct {
	namespace, name, healthAddr, kubeconfig string
	workEvery                               time.Duration
}

func parseFlags() (flags, error) {
	var f flags
	flag.StringVar(&f.namespace, "lease-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease (default: $POD_NAMESPACE)")
	flag.StringVar(&f.name, "lease-name", "relect-controller", "name of the Lease")
	flag.StringVar(&f.healthAddr, "health-addr", ":8080", "address of the /healthz, /readyz and /metrics endpoints")
	flag.DurationVar(&f.workEvery, "work-every", 5*time.Second, "how often the leader does its work")
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file to use instead of the in-cluster configuration (out-of-cluster runs and tests)")
	flag.Parse()
	if f.namespace == "" {
		return f, errors.New("no Lease namespace: set -lease-namespace or POD_NAMESPACE")
	}
	return f, nil
}

func run(logger *slog.Logger) error {
	f, err := parseFlags()
	if err != nil {
		return err
	}
	// The pod name is unique among live replicas and, unlike the default
	// (host name plus random digits), readable in `kubectl get lease`.
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		logger.Warn("POD_NAME is not set; using relect's generated identity")
	}

	cfg, err := rest.InClusterConfig()
	if f.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	}
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	e, err := relect.New(relect.Options{
		Config:    cfg, // relect builds its own Lease client from it
		Namespace: f.namespace,
		Name:      f.name,
		Identity:  identity,
		// The durations are relect's defaults (15 s, 10 s, 2 s): a crashed
		// leader is replaced in about 15–20 s, a stopped one in ≤ 4.4 s.
		OnStartedLeading: func(ctx context.Context) { lead(ctx, logger, f.workEvery) },
		OnNewLeader: func(holder string) {
			logger.Info("new leader observed", "leader", holder, "me", holder == identity)
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	shutdown, err := serve(e, f.healthAddr, cancel)
	if err != nil {
		return err
	}
	defer shutdown()

	logger.Info("campaigning", "lease", f.namespace+"/"+f.name, "identity", e.Identity())
	// Run returns when ctx is done: on SIGTERM, after the leader's work has
	// returned and the lease was released (at most RenewDeadline/2 for an
	// acquiring write in flight, then at most RenewDeadline for the release:
	// well within the pod's terminationGracePeriodSeconds).
	if err := e.Run(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil // SIGTERM or SIGINT: a normal shutdown
}

// serve serves /healthz, /readyz and /metrics on addr until shutdown is
// called; a server that fails cancels the run with its error.
//
// /healthz is the liveness probe: relect's HealthCheck fails when the
// process is cut off from the API server for longer than twice the lease
// duration, or when leader work ignores its cancelled context — both
// fixed by a restart. /readyz answers as long as the process serves
// HTTP and does not depend on leadership: a follower is a healthy
// standby, not a broken pod. Were readiness to follow leadership, only
// one pod of the Deployment would ever be Ready: the Deployment would
// report the others unavailable for good, a rolling update would wait
// forever for a new pod (which cannot lead while an old one holds the
// lease) to become Ready, and a PodDisruptionBudget would count the
// followers as disrupted and block node drains.
// /metrics serves relect's metrics from a registry of our own.
func serve(e *relect.Elector, addr string, cancel context.CancelCauseFunc) (shutdown func(), err error) {
	collector, err := metrics.NewCollector(e, metrics.Options{})
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", e.HealthHandler(relect.HealthOptions{}))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{
		Addr:              addr,
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("health server: %w", err)) // stops Run
		}
	}()
	return func() {
		ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		srv.Shutdown(ctx)
		<-served
	}, nil
}

// lead is the leader-only work of one term. It returns when ctx is done: the
// term ended (lease lost or expired) or the process is shutting down.
func lead(ctx context.Context, logger *slog.Logger, every time.Duration) {
	term, _ := relect.TermFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	logger.Info("started leading", "term", term, "fence", fence)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopped leading", "term", term, "cause", context.Cause(ctx))
			return
		case <-tick.C:
		}
		// A real controller would do its work here and pass fence along
		// with every write, so that storage can refuse a writer whose
		// fence is lower than the highest it has accepted (package
		// fencing's Guard). The term number is for people and logs: two
		// terms of one replica in a row can share it.
		logger.Info("leader work", "term", term, "fence", fence)
	}
}
