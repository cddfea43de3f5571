package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
	"github.com/spf13/pflag"
)

const runHead = `Usage: relect run [flags] NAMESPACE/NAME -- CMD [ARGS...]

Campaigns for the Lease NAMESPACE/NAME and runs CMD while this process
leads, with these variables added to its environment:

  RELECT_FENCE     the term's fencing token: a decimal integer, larger
                   than every earlier term's (this candidate's own
                   included); storage that must refuse a deposed leader's
                   late writes keeps the highest it accepted and refuses a
                   lower one (docs/fencing.md). Unset if the apiserver
                   gives none.
  RELECT_TERM      the term number, for people and logs (the Lease's
                   leaseTransitions: two terms of one candidate in a row
                   can share it, so it is no fencing token)
  RELECT_IDENTITY  this candidate's holder identity (--identity)
  RELECT_LEASE     NAMESPACE/NAME
  RELECT_SHARD     with --shards or --shard-names only: the shard this
                   CMD runs for (TERM and FENCE are then the shard's)
  RELECT_SHARD_RANGE  with --shard-ranges only: the shard's range of the
                   data, as a Kubernetes list's ShardSelector, e.g.
                   shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')

CMD runs in a process group of its own, with stdin from /dev/null and
relect's stdout and stderr. When the term ends — the Lease could not be
renewed within --renew-deadline, it was seen held by someone else, relect
got SIGTERM or SIGINT, or the work check found the work stuck — relect sends
--signal to CMD's process group, waits up to --grace for CMD to exit, then
kills the group with SIGKILL, waits for CMD, and only then releases the
Lease (SIGTERM, SIGINT), releases it to the next in line and campaigns
again (stuck work), or campaigns again (a lost term). When CMD exits,
whatever is left of its process group is killed.

The grace period. A term ends at the latest --renew-deadline after the last
successful renewal was sent, and another candidate may lead from
--lease-duration after it: CMD must be gone within
--lease-duration − --renew-deadline (the safety margin, 5s with the
defaults) of its term's end. The default grace is half of that margin
(2.5s with the defaults); the other half is for the kill and the reap. A
--grace of the margin or more is refused; to give CMD longer, raise
--lease-duration (a crashed leader is then replaced later by as much).

If relect itself dies, CMD dies with it: on Linux and FreeBSD CMD gets
SIGKILL from the kernel when relect exits for any reason, SIGKILL included
(processes CMD started are killed by relect when a term ends, but not when
relect itself is killed: have CMD exec its work, or run relect as the
container's entrypoint, where the container's end kills them). On other
systems (macOS, other BSDs) CMD survives a relect killed with SIGKILL.

A second SIGTERM or SIGINT while relect stops hurries the stop: CMD's
process group is killed at once instead of being given the rest of
--grace; the Lease is still released once CMD is gone, and relect exits 0
as after one signal. Later signals are ignored (an acquiring write in
flight, let finish, and the release take at most 1.5 × --renew-deadline).

--restart says what happens when CMD exits by itself while relect leads:
  never       (the default, for a job) end the term, release the Lease, and
              exit with CMD's status, as consul lock does
  always      (for a service) run CMD again after --restart-delay, in the
              same term
  on-failure  run it again if its status is not 0; end as with never if 0
A term that ends while CMD runs (the Lease lost, not CMD's exit) stops CMD
as above; relect then campaigns again, and runs CMD anew when it next leads,
whatever --restart says.

The work check (--check, a shell command, or --check-url) says whether
this replica can do the work. relect runs it every --check-interval while
this replica leads, and also while it is named in the line of succession,
where CMD does not run: a successor whose check fails stands back, so that
the Lease goes to one that can do the work. So check what CMD needs (the
database, the API it calls), not CMD itself: a check of CMD would fail on
every successor, which would then stand back for nothing.
When the check fails --check-failures times in a row on the leader, its
work is stuck: the term ends, CMD is stopped as at any term's end
(--signal, --grace, SIGKILL), the Lease is released to the next in line at
once, and this replica stays a candidate, passed over for --work-cooldown.
When the work fails on every replica (the database is down), the leader
after the k-th stuck handover in a row must lead for --work-cooldown ×
2^(k−1) (at most --work-max-cooldown) before it may hand over in turn: an
outage of T costs at most floor(log2(T / --work-cooldown + 1)) + 1
handovers, not one per check.

--timeout gives up if this candidate has not begun to lead within that long
of starting: relect exits 124, as timeout(1), without running CMD. A missing
Lease is created only --lease-duration after relect first saw it missing
(see docs/command.md), so a first deployment needs a --timeout longer than
that.

Shards. With --shards=N (or --shard-names=a,b,...; the same on every
candidate) the work is split: each shard is an election of its own, held
by one candidate at a time, which the leader assigns balanced by
--shard-weight. CMD then runs once per shard this candidate holds — and
not for the election's term: the leader only assigns — with
RELECT_SHARD (the shard's name) added to its environment, and
RELECT_FENCE and RELECT_TERM the shard's own (storage keeps the highest
fence it accepted per shard). Each shard's CMD is stopped as above when
the shard's term ends (the shard renewed too late, the leader gave it to
another candidate, relect got SIGTERM), and the shard is released only
once it has exited. CMD's exit ends only its shard's term (--restart
never, or on-failure and status 0): the shard is released and the leader
gives it to another candidate if there is one; relect never exits with
CMD's status. --check and --check-url then check each shard's work: a
shard whose check fails --check-failures times in a row is released, and
its holder passed over for it for --work-cooldown. --timeout and
--work-stuck-timeout are refused with shards. GET /shards on --http-addr
lists the shards held.
`

const runTail = `Examples:
  # A job: run it once, as the one leader, then release the Lease and exit
  # with its status (--restart=never, the default):
  relect run default/nightly-backup -- /usr/local/bin/backup --all

  # ... giving up (exit 124) if this replica does not lead within 5 minutes:
  relect run --timeout=5m default/migrate -- ./migrate-db

  # A service: the leader runs it, and runs it again whenever it exits:
  relect run --restart=always --identity="$POD_NAME" default/exporter -- python3 exporter.py

  # Shorter failover (6 s after a crash), CMD gets SIGINT and 1 s to stop:
  relect run --restart=always --lease-duration=6s --renew-deadline=4s --retry-period=1s \
      --signal=INT --grace=1s default/exporter -- python3 exporter.py

  # Hand over when the database is unreachable from this replica (checked
  # every 10 s; 3 failures in a row), to a replica that can reach it:
  relect run --restart=always --check='pg_isready -q -h db' default/exporter -- python3 exporter.py

  # Serve /leader, /healthz and /metrics for probes and Prometheus:
  relect run --restart=always --http-addr=:4040 default/my-service -- my-service

  # Split the work in 16 shards over the replicas; CMD runs once per shard
  # held, told which by $RELECT_SHARD:
  relect run --shards=16 --restart=always --identity="$POD_NAME" default/indexer -- sh -c 'exec ./index --partition="$RELECT_SHARD"'

Exit codes:
  N    CMD exited by itself and ended relect (--restart=never, the default,
       or on-failure and status 0; never with shards): CMD's exit status,
       or 128 + the signal's number if a signal killed it
  0    stopped by SIGTERM or SIGINT: CMD was stopped (killed at once after
       a second signal), the Lease released
  2    bad command line or kubeconfig (the message names the flag)
  124  --timeout passed before this candidate led (CMD never ran)
  126  CMD cannot be run (not executable)
  127  CMD not found
  1    relect failed while running: its HTTP server (--http-addr in use,
       say)
`

// restartPolicy is --restart.
type restartPolicy string

const (
	restartAlways    restartPolicy = "always"
	restartOnFailure restartPolicy = "on-failure"
	restartNever     restartPolicy = "never"
)

// restarts reports whether CMD, having exited with st while leading, is run
// again.
func (p restartPolicy) restarts(st exitStatus) bool {
	switch p {
	case restartAlways:
		return true
	case restartOnFailure:
		return st.code != 0
	}
	return false
}

// runPlan is a checked run command line.
type runPlan struct {
	cluster      clusterFlags
	logs         logFlags
	s            settings
	lease        leaseRef
	argv         []string // CMD and its arguments
	signal       syscall.Signal
	grace        time.Duration // resolved: never zero
	policy       restartPolicy
	restartDelay time.Duration
	timeout      time.Duration // 0: campaign until stopped
	httpAddr     string
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if !runSupported {
		fmt.Fprintln(stderr, "relect run: needs Unix process groups and signals; on this system use relect sidecar")
		return exitFailure
	}
	plan, helped, err := parseRun(args, stdout)
	if helped {
		return exitOK
	}
	if err != nil {
		var notRunnable *cmdError
		if errors.As(err, &notRunnable) {
			fmt.Fprintf(stderr, "relect run: %v\n", err)
			return notRunnable.code
		}
		return report(stderr, "run", err)
	}
	if err := checkOptions(plan.s, plan.lease); err != nil {
		return report(stderr, "run", err)
	}
	cfg, err := plan.cluster.restConfig()
	if err != nil {
		return report(stderr, "run", err)
	}
	return runElection(ctx, plan, relect.Options{Config: cfg}, stdout, stderr)
}

// cmdError is a CMD that cannot be run: code is 126 or 127.
type cmdError struct {
	code int
	err  error
}

func (e *cmdError) Error() string { return e.err.Error() }

// parseRun parses and checks the command line, everything but the
// kubeconfig and the library's own validation (relect.New). CMD is looked
// up last, so that a bad flag is reported first.
func parseRun(args []string, stdout io.Writer) (_ *runPlan, helped bool, _ error) {
	p := &runPlan{}
	fs := newFlagSet("run")
	signal, restart := p.define(fs)
	helped, err := parseFlags(fs, args, runHead, runTail, stdout)
	if helped || err != nil {
		if err != nil && !slices.Contains(args, "--") {
			err = usagef("%v\n(CMD and its arguments go after --: relect run [flags] NAMESPACE/NAME -- CMD [ARGS...])", err)
		}
		return nil, helped, err
	}
	errs := p.parseArgs(fs)
	errs = append(errs, p.checkFlags(*signal, *restart)...)
	errs = append(errs, p.resolve(fs)...)
	if len(errs) > 0 {
		return nil, false, joinUsage(errs)
	}
	if err := lookCmd(p.argv[0]); err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// define defines run's flags on fs, into p; --signal and --restart are
// returned as given, for checkFlags.
func (p *runPlan) define(fs *pflag.FlagSet) (signal, restart *string) {
	p.cluster.define(fs)
	defineOptions(fs, &p.s, electionFlags)
	signal = fs.String("signal", "TERM", "signal sent to CMD's process group when the term ends (name or number)")
	fs.DurationVar(&p.grace, "grace", 0, "how long CMD has to exit after --signal before its process group is killed; less than --lease-duration − --renew-deadline (default: half of that)")
	restart = fs.String("restart", string(restartNever),
		"when CMD exits by itself while leading: never (release the Lease and exit with CMD's status: a job), always (run it again: a service), or on-failure (again unless its status is 0)")
	fs.DurationVar(&p.restartDelay, "restart-delay", time.Second, "pause before CMD is run again (--restart); 0 runs it again at once")
	fs.DurationVar(&p.timeout, "timeout", 0, "give up, exiting 124, if this candidate has not begun to lead this long after starting; 0 never gives up (default: campaign until stopped)")
	fs.StringVar(&p.httpAddr, "http-addr", "", "address to serve GET /leader, /shards, /healthz and /metrics on, e.g. :4040 (every interface, for the kubelet's probes); all read-only: run serves nothing that changes the election (default: none)")
	defineOptions(fs, &p.s, workFlags, healthFlags, shardFlags)
	p.logs.define(fs)
	return signal, restart
}

// parseArgs sets p's Lease and CMD from the arguments fs parsed:
// NAMESPACE/NAME -- CMD [ARGS...].
func (p *runPlan) parseArgs(fs *pflag.FlagSet) (errs []error) {
	positional, dash := fs.Args(), fs.ArgsLenAtDash()
	switch {
	case dash < 0:
		errs = append(errs, usagef("missing -- before CMD: relect run [flags] NAMESPACE/NAME -- CMD [ARGS...]"))
	case dash == 0:
		errs = append(errs, usagef("missing LEASE (NAMESPACE/NAME) before --"))
	case dash > 1:
		errs = append(errs, usagef("want one LEASE before --, got %d arguments: %q", dash, positional[:dash]))
	case dash == len(positional):
		errs = append(errs, usagef("missing CMD after --"))
	}
	if dash >= 1 {
		lease, err := parseLease(positional[0])
		if err != nil {
			errs = append(errs, err)
		}
		p.lease = lease
		p.argv = positional[dash:]
	}
	return errs
}

// checkFlags sets and checks run's own flags, each on its own.
func (p *runPlan) checkFlags(signal, restart string) (errs []error) {
	var err error
	if p.signal, err = parseSignal(signal); err != nil {
		errs = append(errs, err)
	}
	switch p.policy = restartPolicy(restart); p.policy {
	case restartAlways, restartOnFailure, restartNever:
	default:
		errs = append(errs, usagef("--restart %q: want always, on-failure or never", restart))
	}
	if p.restartDelay < 0 {
		errs = append(errs, usagef("--restart-delay %v is negative", p.restartDelay))
	}
	if p.timeout < 0 {
		errs = append(errs, usagef("--timeout %v is negative", p.timeout))
	}
	if p.httpAddr != "" {
		if err := checkHTTPAddr(p.httpAddr); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// resolve applies the defaults that depend on other flags and checks the
// flags against each other: the zeros refused, --grace, work liveness,
// shards, and the loggers.
func (p *runPlan) resolve(fs *pflag.FlagSet) (errs []error) {
	errs = append(errs, p.s.refuseZeros(fs, electionFlags, workFlags, healthFlags, shardFlags)...)
	if fs.Changed("grace") && p.grace == 0 {
		errs = append(errs, zeroFlagError(fs, "grace", "half of --lease-duration − --renew-deadline"))
	} else if err := p.resolveGrace(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.s.resolveWork(fs)...)
	errs = append(errs, p.s.resolveShards(fs)...)
	if p.s.shardsOn() && p.timeout > 0 {
		errs = append(errs, usagef("--timeout and --shards (or --shard-names) are both given: --timeout gives up when this candidate has not led, but with shards the leader runs no CMD, and a candidate may rightly hold no shard"))
	}
	if err := p.s.defaultWorkStopTimeout(p.grace, "grace"); err != nil { // CMD may take the grace period to stop
		errs = append(errs, err)
	}
	if _, _, err := p.logs.loggers(io.Discard); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// resolveGrace checks --grace against the safety margin and applies its
// default. Durations relect.New will refuse are left to it to report.
func (p *runPlan) resolveGrace() error {
	ld := orDefault(p.s.opts.LeaseDuration, defaults.LeaseDuration)
	rd := orDefault(p.s.opts.RenewDeadline, defaults.RenewDeadline)
	margin := ld - rd
	switch {
	case p.grace < 0:
		return usagef("--grace %v is negative", p.grace)
	case rd <= 0 || margin <= 0:
		return nil // relect.New reports these durations
	case p.grace == 0:
		p.grace = margin / 2
	case p.grace >= margin:
		return usagef("--grace %v is not less than --lease-duration − --renew-deadline (%v − %v = %v): "+
			"CMD could still run when another candidate may lead; to give CMD longer, raise --lease-duration", p.grace, ld, rd, margin)
	}
	return nil
}

// lookCmd checks that CMD can be run, as the shell would before running it.
func lookCmd(name string) error {
	_, err := exec.LookPath(name)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrPermission):
		return &cmdError{code: exitCannotRun, err: fmt.Errorf("CMD %q: %w", name, err)}
	default:
		return &cmdError{code: exitNoCommand, err: fmt.Errorf("CMD %q: %w", name, err)}
	}
}

// errCmdEnded is the cause with which the runner stops Run when CMD ended
// the term by exiting (--restart); errTimedOut when --timeout passed before
// this candidate led.
var (
	errCmdEnded = errors.New("CMD exited")
	errTimedOut = errors.New("--timeout passed before this candidate led")
)

// exitTimedOut is run's exit code when --timeout passed, as timeout(1)'s.
const exitTimedOut = 124

// runElection campaigns through conn (its Config or Client) and runs CMD as
// plan says, until ctx is done or CMD ends it; it returns the exit code.
func runElection(ctx context.Context, plan *runPlan, conn relect.Options, stdout, stderr io.Writer) int {
	log, libLog, err := plan.logs.loggers(stderr)
	if err != nil {
		return report(stderr, "run", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &runner{
		plan: plan, env: os.Environ(), stdout: stdout, stderr: stderr,
		log: log, stopRun: stop, led: make(chan struct{}), hurry: hurryOf(ctx),
	}
	check := newChecker(plan.s.check)
	e, err := newElector(r.options(conn, libLog, check), plan.s.health)
	if err != nil {
		return report(stderr, "run", err)
	}
	check.setEnv(e.Identity(), plan.lease) // before Run, which alone calls it
	r.identity, r.view = e.Identity(), newLeaderView(e, plan.lease, 0)
	if plan.s.shardsOn() {
		r.shards = newShardView(e, plan.lease, 0)
	}
	httpAddr := "" // the address bound, logged: the port chosen for :0
	if plan.httpAddr != "" {
		srv, err := startHTTP(plan.httpAddr, e, r.view, r.shards, plan.s.health, "", func(err error) { stop(err) })
		if err != nil {
			return report(stderr, "run", err)
		}
		defer srv.stop()
		httpAddr = srv.addr
	}
	return r.exitCode(ctx, r.campaign(ctx, e, httpAddr))
}

// options are the Elector's Options for r's plan: connected through conn
// (its Config or Client), with r's callbacks, logging to libLog, and
// check (nil: none) as the work check — of the shards, with shards.
func (r *runner) options(conn relect.Options, libLog *slog.Logger, check *checker) relect.Options {
	plan := r.plan
	opts := plan.s.opts
	opts.Config, opts.Client = conn.Config, conn.Client
	opts.Namespace, opts.Name = plan.lease.namespace, plan.lease.name
	opts.OnStartedLeading, opts.OnStoppedLeading = r.lead, r.stopped
	shards := plan.s.shardsOn()
	if shards {
		// CMD runs once per shard held; the leader runs none of its own
		// (it assigns the shards), but its term shows in /leader.
		opts.OnStartedLeading, opts.Shards.Run = r.assign, r.runShard
	}
	opts.Logger = libLog
	check.install(&opts, shards)
	return opts
}

// campaign runs e until ctx is done or the runner stops it, with its
// events logged and --timeout counting; it returns Run's error once every
// goroutine it started has returned. httpAddr is logged.
func (r *runner) campaign(ctx context.Context, e *relect.Elector, httpAddr string) error {
	plan, log := r.plan, r.log
	events := e.Events()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		pump(events, log, r.view, nil, 0)
	}()
	var timer sync.WaitGroup
	if plan.timeout > 0 {
		timer.Go(func() { r.timeOut(ctx, plan.timeout) })
	}
	log.Info("campaigning", "lease", plan.lease.String(), "identity", r.identity, "cmd", plan.argv, "http_addr", httpAddr,
		"grace", plan.grace, "restart", plan.policy, "timeout", plan.timeout, "parent_death_signal", parentDeathSignal,
		"shards", shardsAttr(plan.s))
	err := e.Run(ctx)
	r.stopRun(nil) // ends timeOut
	timer.Wait()
	<-pumped
	return err
}

// exitCode is run's exit code once Run returned err: CMD's status if it
// ended relect, 1 for a failed HTTP server, exitTimedOut if --timeout
// passed (ctx's cause), else 0.
func (r *runner) exitCode(ctx context.Context, err error) int {
	if st, ok := r.finalStatus(); ok {
		r.log.Info("exiting with CMD's status", "status", st.code)
		return st.code
	}
	if errors.Is(err, errHTTP) {
		return report(r.stderr, "run", err)
	}
	if errors.Is(context.Cause(ctx), errTimedOut) {
		r.log.Warn("gave up: this candidate did not lead within --timeout; CMD never ran", "timeout", r.plan.timeout, "exit", exitTimedOut)
		return exitTimedOut
	}
	r.log.Info("stopped")
	return exitOK
}

// runner runs CMD during each term: its lead method is the Elector's
// OnStartedLeading, stopped its OnStoppedLeading.
type runner struct {
	plan           *runPlan
	env            []string // relect's environment
	stdout, stderr io.Writer
	log            *slog.Logger
	identity       string
	view           *leaderView
	shards         *shardView // with shards only
	stopRun        context.CancelCauseFunc
	hurry          <-chan struct{} // closed: kill CMD at once (hurryOf)

	mu    sync.Mutex  // guards the fields below
	final *exitStatus // CMD's status that ended relect (--restart), or nil
	// led is closed when the first term's work begins, unless timedOut:
	// --timeout passed before, and no term's work may begin any more.
	led      chan struct{}
	timedOut bool
}

// timeOut ends Run with errTimedOut if no term's work began within d, and
// returns then, or once one began or ctx is done.
func (r *runner) timeOut(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-r.led:
		return
	case <-t.C:
	}
	r.mu.Lock()
	select {
	case <-r.led: // it began just now
		r.mu.Unlock()
		return
	default:
	}
	r.timedOut = true
	r.mu.Unlock()
	r.stopRun(errTimedOut)
}

// beginTerm reports whether a term's work may begin: not after --timeout
// has passed without one. The first one closes led.
func (r *runner) beginTerm() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timedOut {
		return false
	}
	select {
	case <-r.led:
	default:
		close(r.led)
	}
	return true
}

// lead runs CMD, again per --restart, until the term ends; then it stops
// CMD (signal, grace, kill) and returns only when CMD has exited.
func (r *runner) lead(ctx context.Context) {
	if !r.beginTerm() {
		return // --timeout passed: Run is ending
	}
	r.view.begin(ctx)
	defer r.view.end()
	term, _ := relect.TermFromContext(ctx)
	st, exited := r.work(ctx, r.termEnv(ctx, ""), "term", term)
	if !exited {
		return
	}
	r.mu.Lock()
	r.final = &st
	r.mu.Unlock()
	r.log.Info("ending the term: CMD exited", "term", term, "status", st.code, "restart", r.plan.policy)
	// the term ends, the lease is released, then stopped ends Run
}

// assign is the leader's work with shards (OnStartedLeading): no CMD —
// the library assigns the shards during the term — but the term shows in
// /leader.
func (r *runner) assign(ctx context.Context) {
	r.view.begin(ctx)
	defer r.view.end()
	<-ctx.Done()
}

// runShard runs CMD for one term of a shard (ShardOptions.Run), exactly
// as lead does for the election's term: again per --restart, until the
// shard's term ends; then it stops CMD (signal, grace, kill) and returns
// only when CMD has exited, and the library releases the shard only then.
// A CMD whose exit ends the term (--restart) ends only the shard's term:
// its Lease is released, and the leader gives the shard to another
// candidate if there is one (passing this one over for LeaseDuration, or
// --work-cooldown with a check, doubled at each failure of the shard in a
// row); relect goes on.
func (r *runner) runShard(ctx context.Context) {
	sh := r.shards.begin(ctx)
	defer r.shards.end(sh)
	term, _ := relect.TermFromContext(ctx)
	st, exited := r.work(ctx, r.termEnv(ctx, sh), "shard", sh, "term", term)
	if exited {
		r.log.Info("ending the shard's term: CMD exited; the shard is released, and the leader gives it to another candidate if there is one",
			"shard", sh, "term", term, "status", st.code, "restart", r.plan.policy)
	}
}

// termEnv is CMD's environment for the term whose context ctx is: the
// election's (shard "") or shard's.
func (r *runner) termEnv(ctx context.Context, shard string) []string {
	term, _ := relect.TermFromContext(ctx)
	env := append(slices.Clone(r.env),
		"RELECT_TERM="+strconv.FormatInt(term, 10),
		"RELECT_IDENTITY="+r.identity,
		"RELECT_LEASE="+r.plan.lease.String())
	if shard != "" {
		env = append(env, "RELECT_SHARD="+shard)
	}
	if r, ok := shardrange.FromContext(ctx); ok {
		env = append(env, "RELECT_SHARD_RANGE="+r.Selector())
	}
	if fence, ok := relect.FenceFromContext(ctx); ok {
		env = append(env, "RELECT_FENCE="+string(fence))
	}
	return env
}

// work runs CMD with env, again per --restart, until the term whose
// context ctx is ends — then it stops CMD and reports exited false — or
// CMD's exit ends it (exited, with CMD's status). attrs name the term in
// the log.
func (r *runner) work(ctx context.Context, env []string, attrs ...any) (st exitStatus, exited bool) {
	for {
		st, stopped := r.runOnce(ctx, env, attrs)
		if stopped {
			return st, false
		}
		if !r.plan.policy.restarts(st) {
			return st, true
		}
		r.log.Info("running CMD again", slices.Concat(attrs, []any{"after", r.plan.restartDelay, "restart", r.plan.policy})...)
		t := time.NewTimer(r.plan.restartDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, false
		case <-t.C:
		}
	}
}

// runOnce runs CMD once. If CMD exits by itself it returns its status;
// if the term ends first it stops CMD and reports stopped. attrs name the
// term in the log.
func (r *runner) runOnce(ctx context.Context, env []string, attrs []any) (st exitStatus, stopped bool) {
	if ctx.Err() != nil {
		return exitStatus{}, true
	}
	with := func(kv ...any) []any { return slices.Concat(attrs, kv) }
	p, err := startProc(r.plan.argv, env, r.stdout, r.stderr)
	if err != nil {
		st := startFailure(err)
		r.log.Error("CMD could not be started", with("err", err, "status", st.code)...)
		return st, false
	}
	r.log.Info("started CMD", with("pid", p.pid)...)
	select {
	case st := <-p.done:
		r.log.Info("CMD exited", with("pid", p.pid, "status", st.String())...)
		return st, false
	case <-ctx.Done():
	}

	ended := time.Now()
	r.log.Info("term ended: stopping CMD", with("pid", p.pid, "cause", context.Cause(ctx),
		"signal", signalName(r.plan.signal), "grace", r.plan.grace)...)
	p.signal(r.plan.signal)
	grace := time.NewTimer(r.plan.grace)
	defer grace.Stop()
	select {
	case st = <-p.done:
		r.log.Info("CMD exited", with("pid", p.pid, "status", st.String(), "after", time.Since(ended))...)
		return st, true
	case <-grace.C:
		p.signal(syscall.SIGKILL)
		st = <-p.done
		r.log.Warn("CMD did not exit within the grace period: killed its process group", with("pid", p.pid,
			"grace", r.plan.grace, "status", st.String(), "after", time.Since(ended))...)
	case <-r.hurry:
		p.signal(syscall.SIGKILL)
		st = <-p.done
		r.log.Warn("second stop signal: killed CMD's process group without waiting out the grace period; the lease is released next",
			with("pid", p.pid, "status", st.String(), "after", time.Since(ended))...)
	}
	return st, true
}

// stopped ends Run after a term that CMD's exit ended (--restart): the
// lease has been released by now.
func (r *runner) stopped() {
	if _, ok := r.finalStatus(); ok {
		r.stopRun(errCmdEnded)
	}
}

func (r *runner) finalStatus() (exitStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final == nil {
		return exitStatus{}, false
	}
	return *r.final, true
}
