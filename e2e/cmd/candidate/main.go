// Command candidate is one leader-election candidate for relect's e2e tests:
// it campaigns for a Lease and writes a JSON-lines history of its
// leadership (package e2e/internal/history) that the tests check.
//
// With -mode=relect it runs a relect.Elector, samples IsLeader every -sample
// and records every on/off transition (view "relect") with the term, and
// every relect Event. With -mode=clientgo it runs a plain client-go
// LeaderElector with ReleaseOnCancel, re-created and Run again each time
// its Run returns, as elastic-agent does since its PR #4542 (package
// internal/clientgoloop of the root module, the loop every comparison
// runs); it records the OnStartedLeading context (view "ctx": on when the
// callback starts, off when its context is done), client-go's IsLeader
// sampled (view "isleader"), and the callbacks.
//
// With -mode=relect, -priority and -standby set relect's Options.Priority
// and Options.Standby; on SIGUSR1 it calls Elector.Yield, and on SIGUSR2
// Elector.HandOver to the identity given by -handover-to, and records each
// call as an event ("yield", "handover": T when it was made, Delay how long
// it took, Err what it returned). With each new-leader event it records the
// successors it knows of (Elector.Candidates). Send SIGUSR1 and SIGUSR2 to
// relect candidates only: in clientgo mode they end the process.
//
// With -mode=relect, -beat-window turns on relect's work liveness
// (Options.Work.BeatWindow, with -work-cooldown and -work-max-cooldown):
// the leader's work beats every quarter of the window, except while the
// file -stuck-file exists — then the work hangs (it skips its beats, but
// returns when its term ends). The first skipped beat of a term is
// recorded as the event "beats-stopped", stamped with the last beat (or
// the term's start); relect's own work-stuck event says when relect saw
// it. (relect run's e2e test covers the work check.)
//
// With -mode=relect, -shards N takes part in N shards (Options.Shards,
// Count N, with -shard-join-delay as JoinDelay): each shard term is
// recorded in view "shard" from the work's context (ShardOptions.Run): an
// "on" when Run is called, with the shard (Shard), its term and fence, and
// an "off" once its context is done, written before Run returns — so the
// interval covers every instant the work may have acted, and the shard's
// Lease is released only after it. Each change of Elector.Shards, sampled
// with IsLeader, is recorded as the event "shards" (Shards: what it
// returned, in order; empty for none).
//
// On SIGTERM or SIGINT it cancels the election (a graceful release unless
// -keep-lease-on-cancel), waits for Run to return, writes an "exit" record
// and exits 0. It exits 1 if Run ended otherwise and 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/e2e/internal/leaseclient"
	"github.com/relect/relect/internal/clientgoloop"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type flags struct {
	kubeconfig, namespace, name, identity, mode, history string
	leaseDuration, renewDeadline, retryPeriod            time.Duration
	backoffInitial, backoffMax                           time.Duration
	keepLeaseOnCancel                                    bool
	sample                                               time.Duration
	priority                                             int
	standby                                              bool
	handOverTo                                           string
	beatWindow, workCooldown, workMaxCooldown            time.Duration
	stuckFile                                            string
	json                                                 bool
	shards                                               int
	shardJoinDelay                                       time.Duration
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (required)")
	flag.StringVar(&f.namespace, "namespace", "default", "namespace of the Lease")
	flag.StringVar(&f.name, "name", "", "name of the Lease (required)")
	flag.StringVar(&f.identity, "identity", "", "holder identity (required)")
	flag.StringVar(&f.mode, "mode", "relect", "relect, or clientgo for a plain client-go LeaderElector in a loop")
	flag.StringVar(&f.history, "history", "", "file the JSON-lines history is appended to (required)")
	flag.DurationVar(&f.leaseDuration, "lease-duration", 3*time.Second, "LeaseDuration")
	flag.DurationVar(&f.renewDeadline, "renew-deadline", 2*time.Second, "RenewDeadline")
	flag.DurationVar(&f.retryPeriod, "retry-period", 500*time.Millisecond, "RetryPeriod")
	flag.DurationVar(&f.backoffInitial, "backoff-initial", 0, "relect BackoffInitial (0: relect's default)")
	flag.DurationVar(&f.backoffMax, "backoff-max", 0, "relect BackoffMax (0: relect's default)")
	flag.BoolVar(&f.keepLeaseOnCancel, "keep-lease-on-cancel", false, "relect KeepLeaseOnCancel: do not release the lease on SIGTERM")
	flag.DurationVar(&f.sample, "sample", 2*time.Millisecond, "how often IsLeader is sampled")
	flag.IntVar(&f.priority, "priority", 0, "relect Priority")
	flag.BoolVar(&f.standby, "standby", false, "relect Standby: follow and report, never campaign")
	flag.StringVar(&f.handOverTo, "handover-to", "", "the identity SIGUSR2 hands the lease over to (relect HandOver)")
	flag.DurationVar(&f.beatWindow, "beat-window", 0, "relect Work.BeatWindow: the work beats every quarter of it (0: no beats expected)")
	flag.DurationVar(&f.workCooldown, "work-cooldown", 0, "relect Work.Cooldown (0: relect's default)")
	flag.DurationVar(&f.workMaxCooldown, "work-max-cooldown", 0, "relect Work.MaxCooldown (0: relect's default)")
	flag.StringVar(&f.stuckFile, "stuck-file", "", "while this file exists, the work hangs")
	flag.IntVar(&f.shards, "shards", 0, "relect Shards.Count: take part in this many shards (0: no shards)")
	flag.DurationVar(&f.shardJoinDelay, "shard-join-delay", 0, "relect Shards.JoinDelay (0: relect's default, LeaseDuration)")
	flag.BoolVar(&f.json, "json", false, "relect's Lease client speaks JSON (Options.Client from leaseclient.JSONConfig) instead of protobuf")
	flag.Parse()
	if f.kubeconfig == "" || f.name == "" || f.identity == "" || f.history == "" ||
		(f.mode != "relect" && f.mode != "clientgo") || f.sample <= 0 ||
		f.shards < 0 || (f.shards > 0 && f.mode != "relect") {
		fmt.Fprintln(os.Stderr, "candidate: -kubeconfig, -name, -identity and -history are required; -mode is relect or clientgo; -shards needs -mode=relect")
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(f))
}

func run(f flags) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		return 2
	}
	file, err := os.OpenFile(f.history, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		return 2
	}
	defer file.Close()
	w := history.NewWriter(file)
	must(w.Write(history.Record{Kind: history.KindStart, Identity: f.identity, Mode: f.mode, PID: os.Getpid()}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	exit := history.Record{Kind: history.KindExit}
	var runErr error
	if f.mode == "relect" {
		runErr = runRelect(ctx, f, cfg, w, &exit)
	} else {
		runErr = runClientGo(ctx, f, cfg, w)
	}
	if runErr != nil {
		exit.Err = runErr.Error()
	}
	must(w.Write(exit))
	if ctx.Err() == nil {
		// Run returned without being asked to.
		fmt.Fprintln(os.Stderr, "candidate: Run returned:", runErr)
		return 1
	}
	return 0
}

// must stops the process if the history cannot be written: a test must not
// read a history with holes.
func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate: writing the history:", err)
		os.Exit(3)
	}
}

// sampler turns samples of a boolean view into on/off/gap records.
type sampler struct {
	w            *history.Writer
	view         string
	last         bool
	lastT        int64 // time of the last sample
	lastTrue     int64 // end of the last sample that saw true
	lastTrueFrom int64 // and its start
	term         int64
}

// sample records one observation: leading was read between t0 and t1. An
// "on" is stamped t0 and the end of a true sample is t1, so the recorded
// interval covers every instant the candidate may have believed it led;
// the "on" also records t1, and the "off" the last true sample's t0, which
// bound what the samples prove (history.Interval.DoneBy, OnlyAfter).
func (s *sampler) sample(t0, t1 time.Time, leading bool, term int64, fence func() string) {
	a, b := t0.UnixNano(), t1.UnixNano()
	if s.lastT != 0 && time.Duration(a-s.lastT) > history.MaxSampleGap {
		must(s.w.Write(history.Record{T: a, Kind: history.KindGap, View: s.view, From: s.lastT, Before: s.last, After: leading}))
	}
	switch {
	case leading && !s.last:
		must(s.w.Write(history.Record{T: a, Kind: history.KindOn, View: s.view, Term: term, Fence: fence(), Until: b}))
	case !leading && s.last:
		must(s.w.Write(history.Record{T: a, Kind: history.KindOff, View: s.view, Term: s.term,
			LastTrue: s.lastTrue, LastTrueFrom: s.lastTrueFrom}))
	}
	if leading {
		s.lastTrue, s.lastTrueFrom, s.term = b, a, term
	}
	s.last, s.lastT = leading, b
}

// runRelect runs a relect Elector until ctx is done and fills in the exit
// record's counters.
func runRelect(ctx context.Context, f flags, cfg *rest.Config, w *history.Writer, exit *history.Record) error {
	var client kubernetes.Interface
	if f.json {
		cs, err := kubernetes.NewForConfig(leaseclient.JSONConfig(cfg))
		if err != nil {
			return err
		}
		client, cfg = cs, nil
	}
	o := relect.Options{
		Config:            cfg,
		Client:            client,
		Namespace:         f.namespace,
		Name:              f.name,
		Identity:          f.identity,
		LeaseDuration:     f.leaseDuration,
		RenewDeadline:     f.renewDeadline,
		RetryPeriod:       f.retryPeriod,
		BackoffInitial:    f.backoffInitial,
		BackoffMax:        f.backoffMax,
		KeepLeaseOnCancel: f.keepLeaseOnCancel,
		Priority:          int32(f.priority),
		Standby:           f.standby,
		OnStartedLeading:  leaderWork(f, w),
		Work:              relect.WorkOptions{BeatWindow: f.beatWindow, Cooldown: f.workCooldown, MaxCooldown: f.workMaxCooldown},
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if f.shards > 0 {
		o.Shards = relect.ShardOptions{Count: f.shards, JoinDelay: f.shardJoinDelay, Run: shardWork(w)}
	}
	e, err := relect.New(o)
	if err != nil {
		return err
	}

	events := e.Events()
	eventsDone := make(chan struct{})
	go func() {
		defer close(eventsDone)
		for ev := range events {
			r := history.Record{T: ev.Time.UnixNano(), Kind: history.KindEvent, Event: ev.Kind.String(),
				Term: ev.Term, Fence: string(ev.Fence), Leader: ev.Leader, Delay: int64(ev.Delay)}
			if ev.Err != nil {
				r.Err = ev.Err.Error()
			}
			if ev.Kind == relect.EventNewLeader {
				for _, c := range e.Candidates() {
					if c.Successor > 0 {
						r.Successors = append(r.Successors, c.Identity)
					}
				}
			}
			must(w.Write(r))
		}
	}()

	runDone := make(chan error, 1)
	go func() { runDone <- e.Run(ctx) }()
	controlled := control(ctx, e, f.handOverTo, w)
	defer controlled()

	s := &sampler{w: w, view: history.ViewRelect}
	var held []string
	observe := func() {
		if f.shards > 0 {
			t := time.Now()
			if now := e.Shards(); !slices.Equal(now, held) {
				held = now
				must(w.Write(history.Record{T: t.UnixNano(), Kind: history.KindEvent, Event: "shards", Shards: append([]string{}, now...)}))
			}
		}
		t0 := time.Now()
		term, leading := e.Term()
		s.sample(t0, time.Now(), leading, term, func() string {
			// Read only when the view turns true, from one snapshot:
			// the fence of the term Term just reported, or "" if
			// another has begun since (the check skips it).
			if st := e.Stats(); st.Leading && st.Term == term {
				return string(st.Fence)
			}
			return ""
		})
	}
	tick := time.NewTicker(f.sample)
	defer tick.Stop()
	for {
		observe()
		select {
		case err := <-runDone:
			observe()
			<-eventsDone
			st := e.Stats()
			exit.Dropped, exit.BucketWait = st.DroppedEvents, int64(st.BucketWait)
			exit.Calls = map[string]uint64{}
			for k, n := range st.Calls {
				exit.Calls[k.Verb+"/"+k.Result] = n
			}
			return err
		case <-tick.C:
		}
	}
}

// shardWork is ShardOptions.Run: it records the shard term (view "shard")
// from the call to the end of its context, and returns then.
func shardWork(w *history.Writer) func(ctx context.Context) {
	return func(ctx context.Context) {
		start := time.Now().UnixNano()
		sh, _ := relect.ShardFromContext(ctx)
		term, _ := relect.TermFromContext(ctx)
		fence, _ := relect.FenceFromContext(ctx)
		must(w.Write(history.Record{T: start, Kind: history.KindOn, View: history.ViewShard, Shard: sh, Term: term, Fence: string(fence)}))
		<-ctx.Done()
		// Stamped once the end is seen and written before Run returns:
		// the shard's Lease is released (or left to expire) after this.
		end := time.Now().UnixNano()
		must(w.Write(history.Record{T: end, Kind: history.KindOff, View: history.ViewShard, Shard: sh, Term: term, LastTrue: end}))
	}
}

// stuck reports whether the work is made to hang now (-stuck-file exists).
func stuck(f flags) bool {
	if f.stuckFile == "" {
		return false
	}
	_, err := os.Stat(f.stuckFile)
	return err == nil
}

// leaderWork is a term's work: with -beat-window it beats every quarter
// of the window while it is not stuck, recording the first beat it skips;
// it returns when the term ends.
func leaderWork(f flags, w *history.Writer) func(ctx context.Context) {
	if f.beatWindow <= 0 {
		return func(ctx context.Context) { <-ctx.Done() }
	}
	return func(ctx context.Context) {
		tick := time.NewTicker(f.beatWindow / 4)
		defer tick.Stop()
		last, hung := time.Now(), false
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			switch {
			case !stuck(f):
				relect.Beat(ctx)
				last, hung = time.Now(), false
			case !hung:
				hung = true
				must(w.Write(history.Record{T: last.UnixNano(), Kind: history.KindEvent, Event: "beats-stopped"}))
			}
		}
	}
}

// control calls Yield on SIGUSR1 and HandOver(to) on SIGUSR2, one at a
// time, until ctx is done, and records each call. The returned function
// stops it and waits for it.
func control(ctx context.Context, e *relect.Elector, to string, w *history.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				r := history.Record{Kind: history.KindEvent, Event: "yield"}
				called := time.Now()
				var err error
				if sig == syscall.SIGUSR1 {
					err = e.Yield(ctx)
				} else {
					r.Event, r.Leader = "handover", to
					err = e.HandOver(ctx, to, nil)
				}
				r.T, r.Delay = called.UnixNano(), int64(time.Since(called))
				if err != nil {
					r.Err = err.Error()
				}
				must(w.Write(r))
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		cancel()
		<-done
	}
}

func runClientGo(ctx context.Context, f flags, cfg *rest.Config, w *history.Writer) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	event := func(name, leader string) {
		must(w.Write(history.Record{Kind: history.KindEvent, Event: name, Leader: leader}))
	}
	loop, err := clientgoloop.New(clientgoloop.Config{
		Client:        cs,
		Namespace:     f.namespace,
		Name:          f.name,
		Identity:      f.identity,
		LeaseDuration: f.leaseDuration,
		RenewDeadline: f.renewDeadline,
		RetryPeriod:   f.retryPeriod,
		OnStartedLeading: func(ctx context.Context) {
			must(w.Write(history.Record{Kind: history.KindOn, View: history.ViewCtx}))
			<-ctx.Done()
			now := time.Now().UnixNano()
			must(w.Write(history.Record{T: now, Kind: history.KindOff, View: history.ViewCtx, LastTrue: now}))
		},
		OnStoppedLeading: func() { event("OnStoppedLeading", "") },
		OnNewLeader:      func(id string) { event("OnNewLeader", id) },
		OnRunReturned:    func() { event("run-returned", "") },
	})
	if err != nil {
		return err
	}

	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		loop.Run(ctx)
	}()

	s := &sampler{w: w, view: history.ViewIsLeader}
	tick := time.NewTicker(f.sample)
	defer tick.Stop()
	for {
		t0 := time.Now()
		leading := loop.IsLeader()
		s.sample(t0, time.Now(), leading, 0, func() string { return "" })
		select {
		case <-loopDone:
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}
