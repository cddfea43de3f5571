// Command demo shows relect's changes of leader in real time, with no
// cluster needed: several candidates in one process campaign for one Lease
// on relecttest's in-memory Lease API, and a script crashes the leader,
// stops the next one gracefully, makes the next yield and hand the lease
// over, and hand-edits the Lease, measuring how long each takes to produce
// a new leader and how many Lease API calls it costs.
//
//	go run ./examples/demo
//	go run ./examples/demo -candidates 1000
//	go run ./examples/demo -candidates 5 -lease-duration 3s -renew-deadline 2s -retry-period 0.5s
//
// The script, printed as a live timeline with every candidate's events and a
// status block (leader, term, each candidate's state, its place in the line
// of succession, and its Lease API calls so far, over all its incarnations):
//
//  1. c1 starts alone and takes the lease — LeaseDuration after it found
//     the Lease missing, if there is none yet (relect cannot tell a Lease
//     never created from one deleted while someone held it); the others
//     join as followers, and c1 names its successors in the Lease.
//  2. Crash: c1's Run is cancelled with KeepLeaseOnCancel, so it does not
//     release: the Lease looks exactly as after kill -9. The first in line
//     takes over once the lease has expired, about LeaseDuration later. c1
//     is restarted (a new Elector with the same identity, as a pod
//     restart).
//  3. Graceful stop: the new leader's Run is cancelled without
//     KeepLeaseOnCancel, so it releases; the first in line takes over as
//     soon as its watch reports the release. The stopped candidate is
//     restarted.
//  4. Yield: the leader calls Elector.Yield: its term ends, it releases to
//     the first in line, which takes over at once, and it stays a
//     candidate.
//  5. Handover: the leader calls Elector.HandOver naming the last
//     candidate that does not lead (with more than two, not the first in
//     line), which takes over at once.
//  6. Hand edit: the Lease's holder is set, as with kubectl edit, to a
//     follower. The leader sees it at once and steps down; the named
//     follower does not trust a record it did not write and, like everyone
//     else, waits for it to expire, about LeaseDuration.
//
// After each change the demo prints what it cost: every candidate's Lease
// API calls from the change to the new leader's first renewal a
// RetryPeriod into its term, that renewal included, and which candidates
// made them. With more than 10 candidates (-candidates 1000, say) the
// timeline shows only terms and errors, and the status block the
// candidates that lead, are in line or are down, and sums up the others.
//
// The demo fails only on what it proves. It exits 1 if two candidates ever
// lead at once (IsLeader is sampled every couple of milliseconds), if a
// leader's work is ever fenced off by a newer term, or if a change of
// leader never completes (no new leader within twice the longest expected
// failover). Each measured time is printed next to its expected range, and
// a time outside it is marked, not failed: in real time it depends on the
// machine (a thousand candidates in one process on two busy cores handle
// every watch event late). So is a handover that another candidate than
// the one named completes — the named one did not write within its
// exclusive window — which is noted. It exits 2 on bad flags or setup
// errors, 0 otherwise.
//
// With -kubeconfig PATH, or -in-cluster inside a pod, the same script runs
// against a real cluster (Options.Config), on the Lease -lease in -namespace;
// the hand edit is then a client-go Get and Update of the Lease. The API
// calls shown are then counted by a wrapper around each candidate's HTTP
// transport (rest.Config.Wrap), by HTTP method.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"k8s.io/client-go/rest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// settings are the demo's flags.
type settings struct {
	candidates    int
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	statusEvery   time.Duration
	sampleEvery   time.Duration
	verbose       bool

	kubeconfig  string
	kubecontext string
	inCluster   bool
	namespace   string
	lease       string
}

func run(args []string, stdout, stderr io.Writer) int {
	s, err := parseSettings(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "demo: %v\n", err)
		}
		return 2
	}
	b, err := newBackend(s)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}

	logger := slog.New(slog.DiscardHandler)
	if s.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	// Ctrl-C stops the script; the candidates still stop gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	d := newDemo(s, b, newTimeline(stdout), logger)
	err = d.script(ctx)
	switch {
	case errors.Is(err, errSetup):
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "demo: FAIL: %v\n", err)
		return 1
	}
	return 0
}

// errUsage is a command line the flag package refused: it printed why.
var errUsage = errors.New("usage")

// parseSettings reads the command line; flag errors are printed on stderr
// (errUsage, or flag.ErrHelp for -h).
func parseSettings(args []string, stderr io.Writer) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&s.candidates, "candidates", 3, "number of candidates in this process (at least 2; with more than 10 the output shows the leader, the line of succession and sums)")
	fs.DurationVar(&s.leaseDuration, "lease-duration", 2*time.Second, "Options.LeaseDuration (whole seconds)")
	fs.DurationVar(&s.renewDeadline, "renew-deadline", 1500*time.Millisecond, "Options.RenewDeadline (below the lease duration, above retry period + 1s)")
	fs.DurationVar(&s.retryPeriod, "retry-period", 400*time.Millisecond, "Options.RetryPeriod")
	fs.DurationVar(&s.statusEvery, "status-every", 2*time.Second, "how often to print the status block (0: only at each step)")
	fs.DurationVar(&s.sampleEvery, "sample-every", 2*time.Millisecond, "how often to sample every candidate's IsLeader for overlaps")
	fs.BoolVar(&s.verbose, "v", false, "also print relect's own logs (slog) on stderr")
	fs.StringVar(&s.kubeconfig, "kubeconfig", "", "run against the cluster of this kubeconfig file instead of the in-memory Lease API")
	fs.StringVar(&s.kubecontext, "context", "", "kubeconfig context to use (default: its current-context)")
	fs.BoolVar(&s.inCluster, "in-cluster", false, "run against the cluster this pod runs in (needs KUBERNETES_SERVICE_HOST)")
	fs.StringVar(&s.namespace, "namespace", "default", "namespace of the Lease (cluster mode)")
	fs.StringVar(&s.lease, "lease", "relect-demo", "name of the Lease (cluster mode)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, err
		}
		return s, errUsage
	}
	switch {
	case fs.NArg() > 0:
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	case s.candidates < 2:
		return s, errors.New("-candidates must be at least 2: someone has to take over")
	case s.sampleEvery <= 0:
		return s, errors.New("-sample-every must be positive")
	case s.inCluster && s.kubeconfig != "":
		return s, errors.New("give -kubeconfig or -in-cluster, not both")
	case s.inCluster && os.Getenv("KUBERNETES_SERVICE_HOST") == "":
		return s, errors.New("-in-cluster needs KUBERNETES_SERVICE_HOST (run it in a pod)")
	}
	return s, nil
}

// newBackend returns the Lease API s asks for: the cluster the pod runs
// in, the one of a kubeconfig file, or else the in-memory one.
func newBackend(s settings) (backend, error) {
	switch {
	case s.inCluster:
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, err
		}
		return newClusterBackend(cfg, s.namespace, s.lease, "in-cluster")
	case s.kubeconfig != "":
		cfg, err := loadKubeconfig(s.kubeconfig, s.kubecontext)
		if err != nil {
			return nil, err
		}
		return newClusterBackend(cfg, s.namespace, s.lease, s.kubeconfig)
	}
	return newMemBackend(), nil
}
