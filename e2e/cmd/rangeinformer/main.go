// Command rangeinformer holds range shards for relect's e2e measurement
// TestShardRangeMeasure: for each range it holds, an informer over
// shardrange.NewListerWatcher lists and watches the ConfigMaps of one
// namespace that carry a label, and counts what it receives. It writes a
// JSON-lines history (package e2e/internal/history) that the test reads.
//
// By default it is a relect candidate taking part in -shards range shards
// of the uid (ShardOptions{Count, Ranges: shardrange.UID}): each shard
// term runs one informer for the term's range. With -static i/N it runs
// no election: it holds range i of N from its start until it is stopped,
// the way kube-state-metrics' --shard=i --total-shards=N does, with no
// coordination. With -warm (relect mode), ShardOptions.Warm runs each
// range's informer while the candidate campaigns for the shard, as its
// holder or as its taker, and the shard's Run reads that informer's cache:
// a moved range starts warm (events "warm-synced" and "warm-off" record
// the Warm informers, with their counts).
//
// Each range held is recorded in view "shard": an "on" (Shard, Term,
// Fence, Range: the ShardSelector) when the work starts, before its
// informer; the event "first" when the informer's handler sees its first
// object; the event "synced" when it has synced, with the counts so far
// (Objects: the objects the apiserver sent for the range, list items and
// watch events; Kept: those in the range, which the handler saw; Bytes:
// the response bytes of the range's own client, without gzip); and an
// "off" with the counts once the informer has stopped — so that the
// interval covers every instant the range's objects may have been
// handled, and, in relect mode, is written before the shard's Run returns
// (and its Lease is released). Static mode's shard is "static-i".
//
// On SIGTERM or SIGINT it stops (a relect candidate releases its Leases),
// writes an "exit" record and exits 0; 1 if the election ended otherwise,
// 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/e2e/internal/history"
	"github.com/relect/relect/shardrange"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

type flags struct {
	kubeconfig, namespace, name, identity, history string
	label, static                                  string
	leaseDuration, renewDeadline, retryPeriod      time.Duration
	joinDelay                                      time.Duration
	shards                                         int
	warm                                           bool
}

func main() {
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (required)")
	flag.StringVar(&f.namespace, "namespace", "default", "namespace of the Leases and of the ConfigMaps")
	flag.StringVar(&f.name, "name", "", "name of the election's Lease (required without -static)")
	flag.StringVar(&f.identity, "identity", "", "holder identity (required)")
	flag.StringVar(&f.history, "history", "", "file the JSON-lines history is appended to (required)")
	flag.StringVar(&f.label, "label", "", "label selector of the ConfigMaps (required)")
	flag.StringVar(&f.static, "static", "", "i/N: hold range i of N of the uid hash, with no election")
	flag.DurationVar(&f.leaseDuration, "lease-duration", 3*time.Second, "LeaseDuration")
	flag.DurationVar(&f.renewDeadline, "renew-deadline", 2*time.Second, "RenewDeadline")
	flag.DurationVar(&f.retryPeriod, "retry-period", 500*time.Millisecond, "RetryPeriod")
	flag.DurationVar(&f.joinDelay, "join-delay", 0, "relect Shards.JoinDelay (0: relect's default, LeaseDuration)")
	flag.IntVar(&f.shards, "shards", 32, "relect Shards.Count: the range shards")
	flag.BoolVar(&f.warm, "warm", false, "relect Shards.Warm: keep each range's informer while campaigning for it (holder or taker); Run reads it")
	flag.Parse()
	if f.kubeconfig == "" || f.identity == "" || f.history == "" || f.label == "" || (f.static == "" && f.name == "") {
		fmt.Fprintln(os.Stderr, "rangeinformer: -kubeconfig, -identity, -history, -label and (without -static) -name are required")
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(f))
}

func run(f flags) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rangeinformer:", err)
		return 2
	}
	file, err := os.OpenFile(f.history, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rangeinformer:", err)
		return 2
	}
	defer file.Close()
	w := history.NewWriter(file)
	mode := "relect"
	if f.static != "" {
		mode = "static"
	}
	must(w.Write(history.Record{Kind: history.KindStart, Identity: f.identity, Mode: mode, PID: os.Getpid()}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	h := holder{cfg: cfg, namespace: f.namespace, label: f.label, w: w}
	var runErr error
	if f.static != "" {
		runErr = runStatic(ctx, f.static, h)
	} else {
		runErr = runRelect(ctx, f, h)
	}
	exit := history.Record{Kind: history.KindExit}
	if runErr != nil {
		exit.Err = runErr.Error()
	}
	must(w.Write(exit))
	if ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "rangeinformer: stopped without being asked to:", runErr)
		return 1
	}
	return 0
}

// runStatic holds range i of N (spec "i/N") until ctx is done.
func runStatic(ctx context.Context, spec string, h holder) error {
	var i, n int
	if _, err := fmt.Sscanf(spec, "%d/%d", &i, &n); err != nil {
		return fmt.Errorf("-static %q: want i/N: %w", spec, err)
	}
	r, err := shardrange.Of(shardrange.UID, i, n)
	if err != nil {
		return err
	}
	h.hold(ctx, history.Record{Shard: fmt.Sprintf("static-%d", i)}, r)
	return nil
}

// runRelect runs a relect Elector with range shards until ctx is done.
func runRelect(ctx context.Context, f flags, h holder) error {
	hold, warm := h.hold, (func(context.Context))(nil)
	if f.warm {
		w := &warmth{h: h, by: map[string]*warmEntry{}}
		hold, warm = w.hold, w.warm
	}
	e, err := relect.New(relect.Options{
		Config:        h.cfg,
		Namespace:     f.namespace,
		Name:          f.name,
		Identity:      f.identity,
		LeaseDuration: f.leaseDuration,
		RenewDeadline: f.renewDeadline,
		RetryPeriod:   f.retryPeriod,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Shards: relect.ShardOptions{Count: f.shards, Ranges: shardrange.UID, JoinDelay: f.joinDelay, Warm: warm,
			Run: func(ctx context.Context) {
				sh, _ := relect.ShardFromContext(ctx)
				term, _ := relect.TermFromContext(ctx)
				fence, _ := relect.FenceFromContext(ctx)
				r, ok := shardrange.FromContext(ctx)
				if !ok {
					fmt.Fprintln(os.Stderr, "rangeinformer: shard", sh, "has no range")
					os.Exit(3)
				}
				hold(ctx, history.Record{Shard: sh, Term: term, Fence: string(fence)}, r)
			}},
	})
	if err != nil {
		return err
	}
	return e.Run(ctx)
}

// must stops the process if the history cannot be written: a test must not
// read a history with holes.
func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "rangeinformer: writing the history:", err)
		os.Exit(3)
	}
}

// protobuf is what the informers' clients ask for, as kube-state-metrics'
// do.
const protobuf = "application/vnd.kubernetes.protobuf"

// dataConfig is a copy of cfg for one range's informer: protobuf, and
// every response body counted into bytes. It asks for no gzip, so that
// the bytes counted are those on the wire; that also gives it an HTTP
// connection of its own (client-go shares a transport between configs
// that differ only in WrapTransport), so that a large list does not
// delay the Lease renewals on relect's.
func dataConfig(cfg *rest.Config, c *counts) *rest.Config {
	d := rest.CopyConfig(cfg)
	d.ContentType = protobuf
	d.AcceptContentTypes = protobuf + ",application/json"
	d.DisableCompression = true
	d.Wrap(c.countBytes)
	return d
}
