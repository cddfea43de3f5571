// Command ctrlrt-replica is one replica of a controller-runtime controller
// for relect's e2e tests (e2e/ctrlrt_test.go): it runs a real reconciler —
// it stamps the ConfigMaps labelled ctrlrt-e2e=<-group> with the leader's
// identity, term and fence, writing only over an older fence — as
// leader-only work, and writes a JSON-lines history (package
// e2e/internal/history) that the tests check and measure.
//
// With -mode=ctrlrt it runs one long-lived ctrlrt.Manager (cache, metrics
// server on -metrics-addr, webhook server on -webhook-port with the
// certificate in -cert-dir) for the life of the process, and builds the
// controller afresh in each term. With -mode=rebuild it runs a relect
// Elector whose OnStartedLeading builds a new controller-runtime manager
// (its own cache, client and controller), starts it with the term's context
// and returns when it has stopped: a manager rebuilt per term, the
// comparison. With -mode=native it runs no relect at all, but
// controller-runtime's own manager with its own leader election
// (LeaderElection, LeaderElectionReleaseOnCancel, the -lease-* timings) and
// warm replicas (config.Controller.EnableWarmup): the set-up relect is
// compared with (native.go). That election gives the reconciler no term and
// no fence: the stamp is the leader's identity alone.
//
// The history holds: relect's IsLeader sampled every -sample (view
// "relect"; in native mode, view "lease" instead: the Lease held, by the
// replica's own lock), each Reconcile as an interval (view "reconcile", on
// at its start, off at its return), relect's Events, and events of its
// own: "term-start" (Setup called, OnStartedLeading in rebuild mode, the
// Lease acquired in native mode), "first-reconcile" (the first Reconcile
// of the term began; Delay is the time since the term's start), "term-end"
// (OnStoppedLeading: the term's controllers returned and the lease was
// released; in native mode, the release begins), "mem" after each relect
// term (Heap after a GC, Goroutines), and "outside-term" for any reconcile
// or predicate call outside a term (there must be none; in native mode
// predicates are not checked, since warm replicas run them as followers
// by design).
//
// On SIGTERM or SIGINT it stops the manager (or the Elector), which ends
// the term and releases the lease, writes an "exit" record and exits 0. It
// exits 1 if it stopped otherwise (in native mode, when the lease is lost)
// and 2 on bad flags.
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
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/e2e/internal/history"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

type flags struct {
	kubeconfig, namespace, lease, identity, mode, history, group string
	leaseDuration, renewDeadline, retryPeriod                    time.Duration
	sample, requeue                                              time.Duration
	metricsAddr, certDir                                         string
	webhookPort                                                  int
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (required)")
	flag.StringVar(&f.namespace, "namespace", "", "namespace of the Lease and the ConfigMaps (required)")
	flag.StringVar(&f.lease, "lease", "", "name of the Lease (required)")
	flag.StringVar(&f.identity, "identity", "", "holder identity (required)")
	flag.StringVar(&f.mode, "mode", "ctrlrt", "ctrlrt (one long-lived manager), rebuild (a manager per term) or native (controller-runtime's own election, warm replicas)")
	flag.StringVar(&f.history, "history", "", "file the JSON-lines history is appended to (required)")
	flag.StringVar(&f.group, "group", "", "value of the ctrlrt-e2e label of the ConfigMaps to stamp (required)")
	flag.DurationVar(&f.leaseDuration, "lease-duration", 3*time.Second, "LeaseDuration")
	flag.DurationVar(&f.renewDeadline, "renew-deadline", 2*time.Second, "RenewDeadline")
	flag.DurationVar(&f.retryPeriod, "retry-period", 500*time.Millisecond, "RetryPeriod")
	flag.DurationVar(&f.sample, "sample", 2*time.Millisecond, "how often IsLeader is sampled")
	flag.DurationVar(&f.requeue, "requeue", time.Second, "RequeueAfter of every Reconcile, so that the leader reconciles throughout its term")
	flag.StringVar(&f.metricsAddr, "metrics-addr", "0", "metrics server address (ctrlrt mode; 0: off)")
	flag.IntVar(&f.webhookPort, "webhook-port", -1, "webhook server port on 127.0.0.1 (ctrlrt mode; -1: off)")
	flag.StringVar(&f.certDir, "cert-dir", "", "directory holding tls.crt and tls.key for the webhook server")
	flag.Parse()
	if f.kubeconfig == "" || f.namespace == "" || f.lease == "" || f.identity == "" || f.history == "" || f.group == "" ||
		(f.mode != "ctrlrt" && f.mode != "rebuild" && f.mode != "native") {
		fmt.Fprintln(os.Stderr, "ctrlrt-replica: -kubeconfig, -namespace, -lease, -identity, -history and -group are required; -mode is ctrlrt, rebuild or native")
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(f))
}

func run(f flags) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctrlrt-replica:", err)
		return 2
	}
	file, err := os.OpenFile(f.history, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctrlrt-replica:", err)
		return 2
	}
	defer file.Close()
	w := history.NewWriter(file)
	must(w.Write(history.Record{Kind: history.KindStart, Identity: f.identity, Mode: f.mode, PID: os.Getpid()}))

	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	log := logr.FromSlogHandler(handler)
	ctrllog.SetLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	rec := &recorder{w: w}
	var runErr error
	switch f.mode {
	case "ctrlrt":
		runErr = runCtrlrt(ctx, f, cfg, log, rec)
	case "rebuild":
		runErr = runRebuild(ctx, f, cfg, log, rec)
	case "native":
		runErr = runNative(ctx, f, cfg, log, rec)
	}
	rec.wait()
	exit := history.Record{Kind: history.KindExit}
	if runErr != nil {
		exit.Err = runErr.Error()
	}
	must(w.Write(exit))
	if ctx.Err() == nil || runErr != nil {
		fmt.Fprintln(os.Stderr, "ctrlrt-replica: stopped without being asked to:", runErr)
		return 1
	}
	return 0
}

// must stops the process if the history cannot be written: a test must not
// read a history with holes.
func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctrlrt-replica: writing the history:", err)
		os.Exit(3)
	}
}

func electorOptions(f flags) relect.Options {
	return relect.Options{
		Namespace:     f.namespace,
		Name:          f.lease,
		Identity:      f.identity,
		LeaseDuration: f.leaseDuration,
		RenewDeadline: f.renewDeadline,
		RetryPeriod:   f.retryPeriod,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

// cacheOptions is the cache both modes build: the test namespace's
// ConfigMaps, all of them (the label selects in the predicate).
func cacheOptions(f flags) cache.Options {
	return cache.Options{DefaultNamespaces: map[string]cache.Config{f.namespace: {}}}
}

// runCtrlrt runs one long-lived ctrlrt.Manager until ctx is done.
func runCtrlrt(ctx context.Context, f flags, cfg *rest.Config, log logr.Logger, rec *recorder) error {
	eo := electorOptions(f)
	eo.OnStoppedLeading = rec.termEnded
	var st *stamper
	mgr, err := ctrlrt.NewManager(cfg, manager.Options{
		Scheme:                 clientgoscheme.Scheme,
		Logger:                 log,
		Cache:                  cacheOptions(f),
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: f.webhookPort, CertDir: f.certDir}),
	}, ctrlrt.Options{
		Elector: eo,
		Setup: func(ctx context.Context, mgr manager.Manager) error {
			rec.termStarted(ctx)
			return st.setup(mgr)
		},
		Informers: []client.Object{&corev1.ConfigMap{}},
	})
	if err != nil {
		return err
	}
	st = &stamper{c: mgr.GetClient(), identity: f.identity, group: f.group, requeue: f.requeue, rec: rec}
	if f.webhookPort >= 0 {
		// Registered once, on the long-lived manager, before it starts.
		mgr.GetWebhookServer().Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "pong")
		}))
	}
	stopped := make(chan struct{})
	defer rec.follow(mgr.Elector(), f.sample, stopped)()
	defer close(stopped)
	return mgr.Start(ctx)
}

// runRebuild runs a relect Elector whose every term builds, starts and
// stops a manager of its own, until ctx is done.
func runRebuild(ctx context.Context, f flags, cfg *rest.Config, log logr.Logger, rec *recorder) error {
	eo := electorOptions(f)
	eo.Config = cfg
	eo.OnStoppedLeading = rec.termEnded
	eo.OnStartedLeading = func(ctx context.Context) {
		rec.termStarted(ctx)
		mgr, err := manager.New(cfg, manager.Options{
			Scheme:                 clientgoscheme.Scheme,
			Logger:                 log,
			Cache:                  cacheOptions(f),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// Every term's controller has the name of the last term's.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
			// A manager starts its runnables with BaseContext's context,
			// not Start's: without this, the reconciler's context would
			// carry no term and no fence.
			BaseContext: func() context.Context { return ctx },
		})
		if err == nil {
			st := &stamper{c: mgr.GetClient(), identity: f.identity, group: f.group, requeue: f.requeue, rec: rec}
			err = st.setup(mgr)
		}
		if err == nil {
			err = mgr.Start(ctx)
		}
		if err != nil {
			log.Error(err, "the term's manager")
		}
	}
	e, err := relect.New(eo)
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	defer rec.follow(e, f.sample, stopped)()
	defer close(stopped)
	if err := e.Run(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// recorder writes the history.
type recorder struct {
	w *history.Writer

	mu         sync.Mutex
	inTerm     bool
	term       int64
	termStart  time.Time
	reconciled bool // the term's first Reconcile began

	memWG sync.WaitGroup
}

// termStarted records the start of a relect term (ctx is the term's).
func (r *recorder) termStarted(ctx context.Context) {
	n, _ := relect.TermFromContext(ctx)
	r.started(n, time.Now())
}

// started records the start of term n (0 in -mode=native) at now.
func (r *recorder) started(n int64, now time.Time) {
	r.mu.Lock()
	r.inTerm, r.term, r.termStart, r.reconciled = true, n, now, false
	r.mu.Unlock()
	must(r.w.Write(history.Record{T: now.UnixNano(), Kind: history.KindEvent, Event: "term-start", Term: n}))
}

// ended records the end of the term, and returns its number.
func (r *recorder) ended() int64 {
	r.mu.Lock()
	r.inTerm = false
	n := r.term
	r.mu.Unlock()
	must(r.w.Write(history.Record{Kind: history.KindEvent, Event: "term-end", Term: n}))
	return n
}

// termEnded is relect's OnStoppedLeading: the term's controllers have
// returned and the lease was released. A GC'd heap sample follows, off the
// Elector's goroutine.
func (r *recorder) termEnded() {
	n := r.ended()
	r.memWG.Go(func() {
		time.Sleep(300 * time.Millisecond) // let the term's last goroutines exit
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		must(r.w.Write(history.Record{Kind: history.KindEvent, Event: "mem", Term: n, Heap: ms.HeapAlloc, Goroutines: runtime.NumGoroutine()}))
	})
}

// wait waits for the pending memory samples.
func (r *recorder) wait() { r.memWG.Wait() }

// check records a call of user code (a reconcile, a predicate) made
// outside a term.
func (r *recorder) check(what string) {
	r.mu.Lock()
	in := r.inTerm
	r.mu.Unlock()
	if !in {
		must(r.w.Write(history.Record{Kind: history.KindEvent, Event: "outside-term", Err: what}))
	}
}

// reconcileStarted records the start of a Reconcile with ctx; the returned
// function records its end.
func (r *recorder) reconcileStarted(ctx context.Context) (done func()) {
	r.check("reconcile")
	n, _ := relect.TermFromContext(ctx)
	now := time.Now()
	r.mu.Lock()
	first := !r.reconciled && r.inTerm && r.term == n
	r.reconciled = r.reconciled || first
	start := r.termStart
	r.mu.Unlock()
	if first {
		must(r.w.Write(history.Record{T: now.UnixNano(), Kind: history.KindEvent, Event: "first-reconcile", Term: n, Delay: int64(now.Sub(start))}))
	}
	must(r.w.Write(history.Record{T: now.UnixNano(), Kind: history.KindOn, View: viewReconcile, Term: n}))
	return func() {
		end := time.Now().UnixNano()
		must(r.w.Write(history.Record{T: end, Kind: history.KindOff, View: viewReconcile, Term: n, LastTrue: end, LastTrueFrom: end}))
	}
}

// viewReconcile is the view of the history that holds reconciles.
const viewReconcile = "reconcile"

// follow records relect's Events and samples IsLeader every sample until
// stopped is closed (once the Elector's Run has returned), and samples it
// once more then; the returned function waits for both to end.
func (r *recorder) follow(e *relect.Elector, sample time.Duration, stopped <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	events := e.Events()
	wg.Go(func() {
		for ev := range events {
			rec := history.Record{T: ev.Time.UnixNano(), Kind: history.KindEvent, Event: ev.Kind.String(), Term: ev.Term, Leader: ev.Leader, Delay: int64(ev.Delay)}
			if ev.Err != nil {
				rec.Err = ev.Err.Error()
			}
			must(r.w.Write(rec))
		}
	})
	wg.Go(func() {
		s := &sampler{w: r.w, view: history.ViewRelect}
		tick := time.NewTicker(sample)
		defer tick.Stop()
		for {
			t0 := time.Now()
			term, leading := e.Term()
			s.sample(t0, time.Now(), leading, term)
			select {
			case <-stopped:
				t0 := time.Now()
				term, leading := e.Term()
				s.sample(t0, time.Now(), leading, term)
				return
			case <-tick.C:
			}
		}
	})
	return wg.Wait
}

// sampler turns samples of a boolean view into on/off/gap records, as
// e2e/cmd/candidate's does.
type sampler struct {
	w            *history.Writer
	view         string
	last         bool
	lastT        int64
	lastTrue     int64
	lastTrueFrom int64
	term         int64
}

func (s *sampler) sample(t0, t1 time.Time, leading bool, term int64) {
	a, b := t0.UnixNano(), t1.UnixNano()
	if s.lastT != 0 && time.Duration(a-s.lastT) > history.MaxSampleGap {
		must(s.w.Write(history.Record{T: a, Kind: history.KindGap, View: s.view, From: s.lastT, Before: s.last, After: leading}))
	}
	switch {
	case leading && !s.last:
		must(s.w.Write(history.Record{T: a, Kind: history.KindOn, View: s.view, Term: term, Until: b}))
	case !leading && s.last:
		must(s.w.Write(history.Record{T: a, Kind: history.KindOff, View: s.view, Term: s.term, LastTrue: s.lastTrue, LastTrueFrom: s.lastTrueFrom}))
	}
	if leading {
		s.lastTrue, s.lastTrueFrom, s.term = b, a, term
	}
	s.last, s.lastT = leading, b
}
