// Command daemonset-reporter is the leader-election pattern of Elastic
// Agent's Kubernetes integration: an agent runs on every node (a DaemonSet)
// and reports that node's metrics, while cluster-wide metrics (here, the
// number of nodes and how many are Ready) must be reported once for the
// cluster, not once per node, so only the agent that leads reports them.
//
// Identity is NODE_NAME/POD_NAME, both from the downward API: unique among
// live agents, and `kubectl get lease` shows on which node the reporter
// runs. (relect's default identity, the host name plus random digits, would
// also be unique, even for hostNetwork pods that share the node's host name,
// but unreadable.)
//
// Manifests: deploy/daemonset-reporter (ServiceAccount, Role for the Lease,
// ClusterRole to list nodes, bindings, DaemonSet).
//
// # Stuck work
//
// Holding the lease is not doing the work: a leader whose report loop is
// stuck (a list that never returns, a bug) keeps the lease while no cluster
// metrics are reported, the outage of elastic/integrations#15431. So the
// report loop calls relect.Beat after each report that succeeded, and
// Options.Work expects a beat every three report intervals (BeatWindow, 90 s
// with -report-every=30s): a leader that has not reported for that long
// ends its term and hands the lease to the next agent in line at once. When
// the reports fail on every agent (their ClusterRole lost "list nodes"), the
// next leaders hold the lease for a doubling cooldown instead of passing it
// round the fleet (the library's default, from 1 minute; docs/operations.md,
// "Stuck work"). The example has no
// downstream to check, since it logs its report; an agent that ships to a
// sink or reads kube-state-metrics would also set Work.Check
// (docs/migration.md, "Elastic Agent style").
//
// # Shards: the cluster-wide work over the fleet
//
// In a large cluster one agent cannot report every cluster-wide metricset
// (Elastic's documentation tells such users to turn leader election off
// and run a separate Deployment). With -shards=nodes,pods,namespaces each
// metricset is a shard (Options.Shards): the leader assigns the shards to
// the live agents, balanced and sticky, and each agent reports the
// metricsets it holds, each with its own term, fence and beat
// (Shards.Work: a shard whose reports stop moves to another agent). The
// leader itself reports nothing then but assigns; an agent stopping hands
// its shards over at once, one that crashes loses them within the lease
// duration. See docs/design.md, "Shards". To watch it outside a cluster,
// start the local control plane (README, "On a local control plane") and run
// a few agents, each with its own POD_NAME:
//
//	NODE_NAME=n1 POD_NAME=a1 go run ./examples/daemonset-reporter \
//	  -kubeconfig /tmp/relect.kubeconfig -lease-namespace default \
//	  -lease-duration 3s -renew-deadline 2s -retry-period 500ms \
//	  -report-every 2s -health-addr :8081 -shards nodes,pods,namespaces
//
// (NODE_NAME=n2 POD_NAME=a2 … -health-addr :8082 beside it), and
// `relect status default/relect-reporter` shows who holds which shard.
//
// # Choosing RetryPeriod for N candidates
//
// The leader renews the Lease (a PUT) every RetryPeriod, and every other
// agent keeps up with it in one of two ways:
//
//   - Polling (client-go's way, and relect's when it may not watch Leases):
//     a GET every RetryPeriod to 2.2 × RetryPeriod, 1.6 × RetryPeriod on
//     average, each a quorum read from etcd. N agents send about
//     N / (1.6 × RetryPeriod) requests per second, all on one object.
//   - Watching (relect's way when the Role grants watch, as it does here):
//     each agent holds a watch on the Lease, served from the apiserver's
//     watch cache, and every renewal is sent to all N watchers: N / RetryPeriod
//     events per second, plus each agent re-opening its watch from time to
//     time.
//
// Either way the cost grows as N / RetryPeriod. With the usual RetryPeriod of
// 2 s (client-go's examples, relect's default, Elastic Agent's), 5000 nodes
// make about 1600 to 2500 requests or events per second, just so that one
// agent can report a handful of numbers. Start from the budget B the whole
// fleet may spend on this Lease, per second:
//
//	RetryPeriod ≥ N / (1.6 × B)         e.g. N = 1000, B = 40/s → 15.6 s
//
// then RenewDeadline > 1.2 × RetryPeriod (client-go's rule), and
// LeaseDuration at least 1 s above RenewDeadline, in whole seconds (followers
// date renewals to the second; the rest of the margin absorbs clock-rate
// drift). The defaults here (RetryPeriod 15 s, RenewDeadline 30 s,
// LeaseDuration 45 s) cost about 40 requests per second for 1000 polling
// nodes.
//
// The price is failover time: a leader that dies is replaced after about
// LeaseDuration (+ up to 2.2 × RetryPeriod when followers poll), here 45 s
// to 78 s; one that stops gracefully (a rolling update, a drain) releases
// the lease and is replaced at once by a watching follower, within
// 2.2 × RetryPeriod by a polling one. For metrics reported every 30–60 s a
// gap of a minute is usually acceptable. If it is not, shrink N rather than
// RetryPeriod: run the cluster-wide reporter as a small Deployment, or let
// only the agents of labelled nodes campaign.
//
// relect's token bucket (Options.RateLimit, by default 2 calls per
// RetryPeriod) limits each agent, not the fleet: it keeps a flapping agent
// from hammering the API, but the fleet's total is set by N and RetryPeriod.
// The leader logs the estimate (polling) for the current node count when it
// starts and when the count changes, and warns when it exceeds -lease-budget.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/relect/relect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

type settings struct {
	namespace, name string
	reportEvery     time.Duration
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	budget          float64
	healthAddr      string
	shards          []string // the metricsets reported as shards; none: the leader reports them all
}

// metricsets are the cluster-wide metricsets, by name: each lists one kind
// and logs what it counts.
var metricsets = map[string]func(ctx context.Context, client kubernetes.Interface) (map[string]int, error){
	"nodes": func(ctx context.Context, client kubernetes.Interface) (map[string]int, error) {
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		ready := 0
		for _, n := range l.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return map[string]int{"nodes": len(l.Items), "ready": ready}, nil
	},
	"pods": func(ctx context.Context, client kubernetes.Interface) (map[string]int, error) {
		l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		out := map[string]int{"pods": len(l.Items)}
		for _, p := range l.Items {
			out[strings.ToLower(string(p.Status.Phase))]++
		}
		return out, nil
	},
	"namespaces": func(ctx context.Context, client kubernetes.Interface) (map[string]int, error) {
		l, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		return map[string]int{"namespaces": len(l.Items)}, nil
	},
}

func run(logger *slog.Logger) error {
	var s settings
	flag.StringVar(&s.namespace, "lease-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease (default: $POD_NAMESPACE)")
	flag.StringVar(&s.name, "lease-name", "relect-reporter", "name of the Lease")
	flag.DurationVar(&s.reportEvery, "report-every", 30*time.Second, "how often metrics are reported")
	flag.DurationVar(&s.leaseDuration, "lease-duration", 45*time.Second, "Options.LeaseDuration (see the package doc)")
	flag.DurationVar(&s.renewDeadline, "renew-deadline", 30*time.Second, "Options.RenewDeadline")
	flag.DurationVar(&s.retryPeriod, "retry-period", 15*time.Second, "Options.RetryPeriod: sets the fleet's Lease API load, about nodes / (1.6 × RetryPeriod) requests per second")
	flag.Float64Var(&s.budget, "lease-budget", 40, "Lease API requests per second the whole fleet may spend; the leader warns above it")
	flag.StringVar(&s.healthAddr, "health-addr", ":8080", "address of the /healthz endpoint")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file, to run outside a pod (e.g. against the local control plane of docs/testing.md); empty: the pod's service account")
	shards := flag.String("shards", "", "comma-separated metricsets (nodes, pods, namespaces) reported as shards spread over the fleet; empty: the leader reports the nodes metricset")
	flag.Parse()
	if *shards != "" {
		s.shards = strings.Split(*shards, ",")
		for _, sh := range s.shards {
			if metricsets[sh] == nil {
				return fmt.Errorf("-shards: unknown metricset %q (known: nodes, pods, namespaces)", sh)
			}
		}
	}
	if s.namespace == "" {
		return errors.New("no Lease namespace: set -lease-namespace or POD_NAMESPACE")
	}
	node, pod := os.Getenv("NODE_NAME"), os.Getenv("POD_NAME")
	if node == "" || pod == "" {
		return errors.New("NODE_NAME and POD_NAME must be set (downward API: spec.nodeName, metadata.name)")
	}

	cfg, err := rest.InClusterConfig()
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	}
	if err != nil {
		return err
	}
	// For the agent's own calls (listing nodes). relect builds a separate
	// Lease client from cfg, so that these calls never delay a renewal.
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	opts := relect.Options{
		Config:        cfg,
		Namespace:     s.namespace,
		Name:          s.name,
		Identity:      node + "/" + pod,
		LeaseDuration: s.leaseDuration,
		RenewDeadline: s.renewDeadline,
		RetryPeriod:   s.retryPeriod,
		Logger:        logger,
	}
	setWork(&opts, logger, client, s)
	e, err := relect.New(opts)
	if err != nil {
		return err // names the invalid flag's Options field
	}

	// Liveness and readiness: the process is up. Not leadership: every
	// agent is needed for its node's metrics, and a DaemonSet rolling update
	// waits for each new pod to become Ready, which a follower never would.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: s.healthAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("health server: %w", err))
		}
	})
	wg.Go(func() { reportNode(ctx, logger, node, s.reportEvery) })

	logger.Info("campaigning", "lease", s.namespace+"/"+s.name, "identity", e.Identity(),
		"lease_duration", s.leaseDuration.String(), "renew_deadline", s.renewDeadline.String(), "retry_period", s.retryPeriod.String())
	runErr := e.Run(ctx) // until SIGTERM; releases the lease if it leads
	cancel(runErr)       // stops reportNode if Run ended for another reason

	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	srv.Shutdown(shutdownCtx)
	wg.Wait()

	if errors.Is(runErr, context.Canceled) {
		return nil // SIGTERM or SIGINT: a normal shutdown
	}
	return runErr
}

// setWork sets the agent's cluster-wide work in opts: without shards, the
// leader reports the nodes metricset; with shards, each shard's holder
// reports its metricset, and the leader only assigns them.
func setWork(opts *relect.Options, logger *slog.Logger, client kubernetes.Interface, s settings) {
	if len(s.shards) == 0 {
		opts.OnStartedLeading = func(ctx context.Context) { reportCluster(ctx, logger, client, s) }
		opts.Work = workOptions(s.reportEvery)
		return
	}
	opts.Shards = relect.ShardOptions{
		Names: slices.Clone(s.shards),
		Run:   func(ctx context.Context) { reportShard(ctx, logger, client, s) },
		Work:  workOptions(s.reportEvery),
	}
}

// reportShard is the work of one shard for one term: its metricset, every
// reportEvery until ctx is done, with a beat after each report that
// succeeded (Shards.Work). The fence would tag each report, so that a
// sink drops a deposed holder's late one.
func reportShard(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, s settings) {
	shard, _ := relect.ShardFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	logger.Info("started reporting a shard", "metricset", shard, "fence", string(fence))
	tick := time.NewTicker(s.reportEvery)
	defer tick.Stop()
	for {
		counts, err := metricsets[shard](ctx, client)
		switch {
		case err == nil:
			attrs := []any{"metricset", shard, "fence", string(fence)}
			for _, k := range slices.Sorted(maps.Keys(counts)) {
				attrs = append(attrs, k, counts[k])
			}
			logger.Info("cluster metrics", attrs...)
			relect.Beat(ctx)
		case ctx.Err() == nil:
			logger.Error("listing", "metricset", shard, "err", err)
		}
		select {
		case <-ctx.Done():
			logger.Info("stopped reporting a shard", "metricset", shard, "cause", context.Cause(ctx))
			return
		case <-tick.C:
		}
	}
}

// workOptions is the work liveness of a leader that reports every
// reportEvery (see the package doc): it is stuck once it has missed three
// reports; the cooldown after a stuck handover is the library's (1
// minute, doubling with each stuck handover in a row).
func workOptions(reportEvery time.Duration) relect.WorkOptions {
	return relect.WorkOptions{BeatWindow: 3 * reportEvery}
}

// reportNode stands for the per-node work every agent does, leader or not.
func reportNode(ctx context.Context, logger *slog.Logger, node string, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			logger.Debug("node metrics", "node", node)
		}
	}
}

// reportCluster is the leader's work for one term: it reports cluster-wide
// metrics every reportEvery until ctx is done, and beats after each report
// that succeeded (Options.Work).
func reportCluster(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, s settings) {
	term, _ := relect.TermFromContext(ctx)
	logger.Info("started leading: this agent reports cluster metrics", "term", term)
	tick := time.NewTicker(s.reportEvery)
	defer tick.Stop()
	lastNodes := -1
	for {
		n, err := report(ctx, logger, client, s, term, lastNodes)
		switch {
		case err == nil:
			lastNodes = n
			relect.Beat(ctx) // the work made progress
		case ctx.Err() == nil:
			logger.Error("listing nodes", "err", err)
		}
		select {
		case <-ctx.Done():
			logger.Info("stopped leading", "term", term, "cause", context.Cause(ctx))
			return
		case <-tick.C:
		}
	}
}

// report logs the cluster metrics and returns the node count, or the
// error of listing the nodes. When the count differs from lastNodes, it
// also logs the fleet's estimated Lease API load.
func report(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, s settings, term int64, lastNodes int) (int, error) {
	// ResourceVersion "0" lets the apiserver answer from its watch cache
	// instead of etcd. A real agent would keep an informer instead of
	// listing.
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	// The report is only valid from the leader of term: a real reporter
	// would tag it with term, so that a sink can drop a deposed leader's
	// late report.
	logger.Info("cluster metrics", "term", term, "nodes", len(nodes.Items), "ready", ready)

	n := len(nodes.Items)
	if n == lastNodes {
		return n, nil
	}
	// One candidate per node: the leader's PUTs plus the others' GETs.
	load := float64(max(n-1, 0))/(1.6*s.retryPeriod.Seconds()) + 1/s.retryPeriod.Seconds()
	attrs := []any{"requests_per_second", fmt.Sprintf("%.1f", load), "budget", s.budget, "nodes", n, "retry_period", s.retryPeriod.String()}
	if load > s.budget {
		suggest := time.Duration(float64(n) / (1.6 * s.budget) * float64(time.Second)).Round(time.Second)
		logger.Warn("the Lease costs the fleet more than its budget: raise -retry-period, and -renew-deadline and -lease-duration with it",
			append(attrs, "suggested_retry_period", suggest.String())...)
	} else {
		logger.Info("Lease API load of the fleet", attrs...)
	}
	return n, nil
}
