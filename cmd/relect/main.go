// Command relect is leader election on a Kubernetes Lease for any program,
// and an operator's view of an election, built on the relect library.
//
//	relect run [flags] NAMESPACE/NAME -- CMD [ARGS...]
//	relect status [flags] NAMESPACE/NAME
//	relect sidecar [flags] NAMESPACE/NAME
//	relect yield [flags] NAMESPACE/NAME
//	relect handover [flags] NAMESPACE/NAME IDENTITY
//
// run campaigns for the Lease and runs CMD while it leads — once by default,
// then it releases the Lease and exits with CMD's status, as a job wants;
// again whenever it exits with --restart=always, as a service wants: CMD
// is signalled, then its process group killed, before the term's safety
// margin runs out, and the lease is released only after CMD has exited. status shows the
// holder, term, renew age and validity of a Lease, once or as it changes.
// sidecar campaigns and tells other programs the result over HTTP and in a
// file. With --shards, run and sidecar take part in shards of the work
// (run runs CMD once per shard held) and status shows who holds which. yield and handover ask the current leader, from any machine with
// RBAC on the Lease, to step down or to hand over, and wait for the
// outcome. Run "relect help COMMAND" for a command's flags, examples and exit
// codes; docs/command.md in the repository has the reasoning.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// Exit codes shared by every command; each command's help lists its own.
const (
	exitOK      = 0
	exitFailure = 1 // relect failed while running (API, HTTP server)
	exitUsage   = 2 // the command line or the kubeconfig is wrong
	// exitNotFound: status found no such Lease.
	exitNotFound = 3
	// exitCannotRun and exitNoCommand follow env(1), timeout(1) and
	// docker run: CMD exists but cannot be run, or does not exist.
	exitCannotRun = 126
	exitNoCommand = 127
)

const topUsage = `relect: leader election on a Kubernetes Lease for any program.

Usage:
  relect run [flags] NAMESPACE/NAME -- CMD [ARGS...]  run CMD while this process leads
  relect status [flags] NAMESPACE/NAME                show who holds a Lease, once or as it changes
  relect sidecar [flags] NAMESPACE/NAME               campaign, and serve the result over HTTP and in a file
  relect yield [flags] NAMESPACE/NAME                 ask the current leader to step down
  relect handover [flags] NAMESPACE/NAME IDENTITY     ask the current leader to hand over to IDENTITY
  relect version                                      print relect's version (also relect --version)
  relect help [COMMAND]                               show a command's flags, examples and exit codes

The cluster is found as kubectl finds it: --kubeconfig, else $KUBECONFIG,
else ~/.kube/config, else the pod's service account (in-cluster);
--context picks a kubeconfig context.

Examples:
  relect run default/nightly-backup -- /usr/local/bin/backup --all
  relect status kube-system/kube-scheduler
  relect status -o json --watch default/nightly-backup
  relect yield kube-system/my-controller

Exit codes: 0 success; 1 relect failed while running; 2 bad command line or
kubeconfig; each command's help lists its own.
`

// command is one subcommand: it parses args (without its own name) and
// returns the process's exit code.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

var commands = map[string]command{
	"run":      runCommand,
	"status":   statusCommand,
	"sidecar":  sidecarCommand,
	"yield":    yieldCommand,
	"handover": handoverCommand,
	"version":  versionCommand,
}

func main() {
	ctx, stop := stopSignals()
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopSignals returns a context that is cancelled at the first SIGTERM or
// SIGINT (its cause names the signal), and whose hurry channel (see
// hurryOf) is closed at the second: run then kills CMD at once instead of
// waiting out its grace period, and still releases the Lease. Later
// signals are ignored: relect is ending anyway, within --renew-deadline
// (the release) and 5 s (the HTTP server's shutdown). Before this, the
// second signal killed relect (exit 143), and the Lease stayed held until
// it expired. stop ends the goroutine that watches the signals and
// returns once it has.
func stopSignals() (ctx context.Context, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithCancelCause(context.Background())
	hurry := make(chan struct{})
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case <-quit:
				return
			}
			switch n {
			case 0:
				cancel(fmt.Errorf("%w: %v", errSignal, sig))
			case 1:
				close(hurry)
			}
		}
	}()
	return withHurry(ctx, hurry), func() {
		signal.Stop(sigs)
		close(quit)
		<-done
		cancel(nil)
	}
}

// errSignal is the cause of a context that a stop signal ended.
var errSignal = errors.New("stop signal")

type hurryKey struct{}

// withHurry returns ctx carrying hurry, closed when the user asks a stop
// already under way to hurry (a second SIGTERM or SIGINT).
func withHurry(ctx context.Context, hurry <-chan struct{}) context.Context {
	return context.WithValue(ctx, hurryKey{}, hurry)
}

// hurryOf returns ctx's hurry channel, or nil (never ready) if it has none.
func hurryOf(ctx context.Context) <-chan struct{} {
	h, _ := ctx.Value(hurryKey{}).(<-chan struct{})
	return h
}

// cli runs the command line args and returns the exit code.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "--version", "-version":
		name = "version"
	case "help", "-h", "--help", "-help":
		if len(rest) == 0 {
			fmt.Fprint(stdout, topUsage)
			return exitOK
		}
		if cmd, ok := commands[rest[0]]; ok {
			return cmd(ctx, []string{"--help"}, stdout, stderr)
		}
		fmt.Fprintf(stderr, "relect help: unknown command %q\n\n%s", rest[0], topUsage)
		return exitUsage
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "relect: unknown command %q\n\n%s", name, topUsage)
		return exitUsage
	}
	return cmd(ctx, rest, stdout, stderr)
}

const versionUsage = `Usage: relect version (or relect --version)

Prints relect's module version: the one go install or go build stamped in
the binary (v0.1.0, say), or (devel) when it was built from a checkout,
then the commit it was built from, if known ("+dirty": with changes not
committed), and the Go version.
`

func versionCommand(_ context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && (args[0] == "--help" || args[0] == "-h"):
		fmt.Fprint(stdout, versionUsage)
		return exitOK
	case len(args) > 0:
		fmt.Fprintf(stderr, "relect version: takes no arguments, got %q\n", args)
		return exitUsage
	}
	fmt.Fprintln(stdout, version(debug.ReadBuildInfo()))
	return exitOK
}

// version describes the binary of info (ok false: no build information):
// "relect v0.1.0 go1.26.8", or "relect (devel) 0123456789ab+dirty
// go1.26.8" when built from a checkout.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "relect (devel)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)" // a test binary, or a build without module information
	}
	parts := []string{"relect", v}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), 12)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev != "" && !strings.Contains(v, rev) { // a pseudo-version names it already
		parts = append(parts, rev+dirty)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	return strings.Join(parts, " ")
}

// usageError is a bad command line: relect prints it, a hint, and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// joinUsage is one usage error that says each of errs, a line each, in
// order: every bad flag reported at once.
func joinUsage(errs []error) error {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return usagef("%s", strings.Join(msgs, "\n"))
}

// report prints err for the command named cmd and returns the exit code it
// calls for: 2 for a usage error (with a pointer to the help), 1 otherwise.
func report(stderr io.Writer, cmd string, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "relect %s: %v\nRun 'relect %s --help' for usage.\n", cmd, err, cmd)
		return exitUsage
	}
	fmt.Fprintf(stderr, "relect %s: %v\n", cmd, err)
	return exitFailure
}
