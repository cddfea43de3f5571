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
// # Durations and what the fleet costs
//
// The agents keep relect's default durations (LeaseDuration 15 s,
// RenewDeadline 10 s, RetryPeriod 2 s): they need not grow with the
// fleet, because only the line watches (docs/design.md, "Only the line
// watches"). The leader renews the Lease every RetryPeriod; it, its three
// successors and a keeper watch the Lease — five watches at any N; every
// other agent watches the line Lease, which the leader writes every 5
// minutes, and one of them, the warden, reads the Lease every two retry
// periods. Each agent renews its registration every 15 minutes.
//
// At N = 1,000 agents the fleet benchmark measures 0.87 Lease API calls a
// second in steady state, as at N = 10 (the leader's renewals 0.5, the
// warden's reads 0.25, the warden's beat one in 16 s), with 5 watches on
// the election's Lease and 995 on the line Lease; client-go's loop, its
// followers polling, makes about 312 (`RELECT_FLEET=full go test -count=1
// -run '^TestFleetChanges$' -v .` in the repository root). The
// registrations add 1,000 writes per 15 minutes, each one event to the
// leader. On a real control plane 1,000 candidates cost kube-apiserver
// 0.53 CPU seconds a minute above idle, against 33.24 for client-go's loop
// (docs/performance.md, "The latest full run"). A change of leader costs
// at most 9 calls beyond that at any N up to 1,000 (the same benchmark); a
// leader that stops (a rolling update, a drain) releases the Lease and is
// replaced at once (2 ms in the benchmark), one that crashes after about
// LeaseDuration.
//
// So choose the durations for failover, not for load: a longer
// LeaseDuration only delays the takeover after a crash, a longer
// RetryPeriod saves only the leader's renewals. This needs watch on Leases
// (deploy/daemonset-reporter/rbac.yaml grants it): agents that may not
// watch poll the Lease as client-go's do, and their cost grows with N
// again (docs/tuning.md, "Large fleets").
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
// leader's own term only assigns them (it holds shards like any agent);
// an agent stopping hands its shards over at once, one that crashes loses
// them within the lease duration. See docs/design.md, "Shards". In a
// DaemonSet the agent's arguments are then
//
//	-lease-name=relect-reporter -report-every=30s -shards=nodes,pods,namespaces
//
// with the default durations. Each shard adds its holder's renewal of the
// shard's Lease every RetryPeriod (three shards: 1.5 calls a second at
// 2 s) and three watches on it (the leader's, its holder's, its taker's);
// every agent follows the shard table, which is written only when the
// assignment changes. 1,000 candidates with 100 shards make 50.82 calls a
// second in steady state, 3,000 of them a minute the shards' renewals, with
// no table write, 3 watches per shard Lease and 1,000 on the table
// (`go test -count=1 -run 'TestBreakScale1000x100' -v .`).
//
// To watch it outside a cluster, start the local control plane
// (docs/testing.md, "On a local control plane") and run a few agents, each
// with its own POD_NAME:
//
//	NODE_NAME=n1 POD_NAME=a1 go run ./examples/daemonset-reporter \
//	  -kubeconfig /tmp/relect.kubeconfig -lease-namespace default \
//	  -lease-duration 3s -renew-deadline 2s -retry-period 500ms \
//	  -report-every 2s -health-addr :8081 -shards nodes,pods,namespaces
//
// (NODE_NAME=n2 POD_NAME=a2 … -health-addr :8082 beside it), and
// `relect status default/relect-reporter` shows who holds which shard.
//
// # Pod ranges: a per-object metricset over the fleet
//
// A metricset that reports each object (here the Pods) outgrows one agent
// in a large cluster: its memory holds every Pod, and its watch receives
// every change. With -pod-ranges=S the Pods are split into S equal ranges
// of their uid's hash (ShardOptions{Count: S, Ranges: shardrange.UID}):
// the leader spreads the ranges over the agents, balanced and sticky, and
// for each range it holds an agent runs an informer over
// shardrange.NewListerWatcher that lists and watches that range's Pods
// only, reports them every -report-every (a line per Pod, one of counts)
// and beats; it stops when the range moves. The leader still reports the
// nodes metricset. -pod-ranges cannot be combined with -shards (an agent
// has one set of shards); -pod-ranges=0, the default, is off.
//
// The apiserver filters by range with Kubernetes 1.36 or later and its
// alpha feature gate ShardedListAndWatch on; otherwise each range's
// informer receives every Pod and drops the other ranges' itself (logged
// once per range term): the Pods held are still the range's, but every
// list and watch carries all the Pods, once per range held. The agents
// need list and watch on Pods (deploy/daemonset-reporter/rbac.yaml, in a
// comment). docs/migration.md, "Large clusters: split per-object
// metricsets by range", says how to choose S.
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
	healthAddr      string
	kubeconfig      string   // empty: the pod's service account
	shards          []string // the metricsets reported as shards; none: the leader reports them all
	podRanges       int      // the uid ranges the pod metricset is split into; 0: off
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

// parseSettings reads the command line.
func parseSettings() (settings, error) {
	var s settings
	flag.StringVar(&s.namespace, "lease-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Lease (default: $POD_NAMESPACE)")
	flag.StringVar(&s.name, "lease-name", "relect-reporter", "name of the Lease")
	flag.DurationVar(&s.reportEvery, "report-every", 30*time.Second, "how often metrics are reported")
	flag.DurationVar(&s.leaseDuration, "lease-duration", 15*time.Second, "Options.LeaseDuration (relect's default): about how long a crashed leader goes unreplaced; the fleet's cost does not depend on it (see the package doc)")
	flag.DurationVar(&s.renewDeadline, "renew-deadline", 10*time.Second, "Options.RenewDeadline (relect's default)")
	flag.DurationVar(&s.retryPeriod, "retry-period", 2*time.Second, "Options.RetryPeriod (relect's default): how often the leader renews; the fleet's steady cost does not grow with the number of agents")
	flag.StringVar(&s.healthAddr, "health-addr", ":8080", "address of the /healthz endpoint")
	flag.StringVar(&s.kubeconfig, "kubeconfig", "", "kubeconfig file, to run outside a pod (e.g. against the local control plane of docs/testing.md); empty: the pod's service account")
	shards := flag.String("shards", "", "comma-separated metricsets (nodes, pods, namespaces) reported as shards spread over the fleet; empty: the leader reports the nodes metricset")
	flag.IntVar(&s.podRanges, "pod-ranges", 0, "split the pod metricset into this many uid ranges (1 to 1000), spread over the fleet: each agent watches and reports the Pods of the ranges it holds, the leader still reports the nodes metricset; 0: off. Not with -shards")
	flag.Parse()
	if err := checkPodRanges(s.podRanges, *shards); err != nil {
		return s, err
	}
	if *shards != "" {
		s.shards = strings.Split(*shards, ",")
		for _, sh := range s.shards {
			if metricsets[sh] == nil {
				return s, fmt.Errorf("-shards: unknown metricset %q (known: nodes, pods, namespaces)", sh)
			}
		}
	}
	if s.namespace == "" {
		return s, errors.New("no Lease namespace: set -lease-namespace or POD_NAMESPACE")
	}
	return s, nil
}

func run(logger *slog.Logger) error {
	s, err := parseSettings()
	if err != nil {
		return err
	}
	node, pod := os.Getenv("NODE_NAME"), os.Getenv("POD_NAME")
	if node == "" || pod == "" {
		return errors.New("NODE_NAME and POD_NAME must be set (downward API: spec.nodeName, metadata.name)")
	}

	cfg, client, err := clients(s.kubeconfig)
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

	shutdown := serveHealth(s.healthAddr, cancel)
	var reported sync.WaitGroup
	reported.Go(func() { reportNode(ctx, logger, node, s.reportEvery) })

	logger.Info("campaigning", "lease", s.namespace+"/"+s.name, "identity", e.Identity(),
		"lease_duration", s.leaseDuration.String(), "renew_deadline", s.renewDeadline.String(), "retry_period", s.retryPeriod.String())
	runErr := e.Run(ctx) // until SIGTERM; releases the lease if it leads
	cancel(runErr)       // stops reportNode if Run ended for another reason
	shutdown()
	reported.Wait()

	if errors.Is(runErr, context.Canceled) {
		return nil // SIGTERM or SIGINT: a normal shutdown
	}
	return runErr
}

// clients returns the cluster's configuration, from kubeconfig or else the
// pod's service account, and a client for the agent's own calls (listing
// nodes). relect builds a separate Lease client from the configuration, so
// that these calls never delay a renewal.
func clients(kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := rest.InClusterConfig()
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}

// serveHealth serves /healthz on addr until shutdown is called; a server
// that fails cancels the run with its error.
//
// Liveness and readiness: the process is up. Not leadership: every agent
// is needed for its node's metrics, and a DaemonSet rolling update waits
// for each new pod to become Ready, which a follower never would.
func serveHealth(addr string, cancel context.CancelCauseFunc) (shutdown func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			cancel(fmt.Errorf("health server: %w", err))
		}
	}()
	return func() {
		ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		srv.Shutdown(ctx)
		<-served
	}
}

// setWork sets the agent's cluster-wide work in opts: without shards, the
// leader reports the nodes metricset; with shards, each shard's holder
// reports its metricset, and the leader only assigns them; with pod
// ranges, the leader reports the nodes metricset and each range's holder
// the Pods of its range (podRangeShards).
func setWork(opts *relect.Options, logger *slog.Logger, client kubernetes.Interface, s settings) {
	if s.podRanges > 0 {
		opts.OnStartedLeading = func(ctx context.Context) { reportCluster(ctx, logger, client, s) }
		opts.Work = workOptions(s.reportEvery)
		opts.Shards = podRangeShards(logger, client, s)
		return
	}
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
	for {
		err := report(ctx, logger, client, term)
		switch {
		case err == nil:
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

// report logs the cluster metrics of the nodes metricset, or returns the
// error of listing the nodes.
func report(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, term int64) error {
	// The metricsets list with ResourceVersion "0", which lets the
	// apiserver answer from its watch cache instead of etcd. A real agent
	// would keep an informer instead of listing.
	counts, err := metricsets["nodes"](ctx, client)
	if err != nil {
		return err
	}
	// The report is only valid from the leader of term: a real reporter
	// would tag it with term, so that a sink can drop a deposed leader's
	// late report.
	logger.Info("cluster metrics", "term", term, "nodes", counts["nodes"], "ready", counts["ready"])
	return nil
}
