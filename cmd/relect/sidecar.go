package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/spf13/pflag"
)

const sidecarHead = `Usage: relect sidecar [flags] NAMESPACE/NAME

Campaigns for the Lease NAMESPACE/NAME, for a program that would rather ask
whether it leads than be started by relect run, and serves on --http-addr
(default :4040, every interface: the kubelet's probes come to the pod IP)
what only reads:

  GET /leader   {"lease":"default/my-app","identity":"my-app-7d9f-x2x",
                 "leader":"my-app-7d9f-x2x","leading":true,"term":4,
                 "fence":"84213","valid_until":"2026-01-02T15:04:05.123Z"}
  GET /shards   with --shards or --shard-names: the shards this candidate
                holds, {"lease":"default/my-app","identity":"my-app-7d9f-x2x",
                "shards":[{"shard":"3","term":2,"fence":"84250",
                "valid_until":"2026-01-02T15:04:03.623Z"}]} (404 without);
                a shard whose work keeps failing also has "failures":k,
                as relect status shows it (failing(k)); with
                --shard-ranges each has "range", its ShardSelector
  GET /healthz  relect's health check (liveness): 200 "ok", or 503 and why
  GET /metrics  relect's Prometheus metrics

and, with --beat-window only, on --control-addr (default 127.0.0.1:4041,
loopback: the pod's own containers share it, nothing outside the pod
reaches it) what changes the election's course:

  POST /beat    the program's work made progress: 200 and the /leader
                JSON while this candidate leads, 409 Conflict and the same
                JSON when it does not (no beat recorded)

A beat is not authenticated: whoever can send one can keep a leader whose
work is stuck leading. So POST /beat is never served on --http-addr (404
there), and --control-addr must be loopback unless --expose-control says
otherwise (then deny everyone but the program with a NetworkPolicy).

With --file PATH it also keeps that JSON in a file, replaced atomically
(written beside it, then renamed) on every change, including every renewal.

leading is true while this candidate leads; term is its term number then,
otherwise the term observed with the current leader (for people and logs:
two terms of one candidate in a row can share it); fence, present while
leading, is the term's fencing token, a decimal integer larger than every
earlier term's: storage that keeps the highest fence it accepted refuses a
deposed leader's late writes (docs/fencing.md);
valid_until, present while leading, is when the term ends unless renewed,
or sooner: at most --valid-for after the answer. A program that acts as
leader must stop by the time the endpoint says otherwise: act only while
leading is true AND the clock is before the valid_until you read, and
finish each action before it. Then no two programs act at once: another
candidate can lead only after --lease-duration − --renew-deadline past
valid_until, and on SIGTERM the sidecar keeps the lease until the latest
valid_until it handed out (over HTTP or in the file) has passed. So a
graceful handover leaves no leader for up to --valid-for: by default
--renew-deadline, 8 to 10 s with the default durations (the lease is
renewed every --retry-period). A shorter --valid-for shortens that gap, and
stays safe: a program must then ask again within it to go on acting. A
second SIGTERM or SIGINT does not shorten the wait. A program that only
polls "leading" must poll at least every (--lease-duration −
--renew-deadline) minus its longest action.

Work liveness. With --beat-window the leader's program must POST /beat
at least that often — counted from the term's start, then from each beat —
and with --check or --check-url relect checks whether this replica can do
the work: every --check-interval while it leads, and also while it is named
in the line of succession, so that a successor whose check fails stands
back and the Lease goes to one that can do the work. A leader whose work
is stuck (no beat within the window, or --check-failures failed checks in
a row) ends its term: /leader says leading false, the Lease is released to
the next in line at once (after the validity handed out has passed, as on
SIGTERM), and this replica stays a candidate, passed over for
--work-cooldown. While a stuck leader still leads — it must hold, as stuck
handovers came in a row (the work fails everywhere), or nobody else can
take over — /leader and the file say "work_stuck":true and since when;
"work_streak" is the stuck handovers in a row it took over and
"work_hold_until" when its hold ends (it hands over for stuck work no
sooner); "work_check_failures" counts the failed checks in a row;
"work_cooling" lists the candidates cooling after a stuck handover, with
when each cooldown ends.

Shards. With --shards=N (or --shard-names=a,b,...; the same on every
candidate) the work is split: each shard is an election of its own, held
by one candidate at a time, which the leader assigns balanced by
--shard-weight. GET /shards lists the shards this candidate holds, each
with its term, its fence (a decimal integer that only grows per shard)
and a valid_until: act on a shard only while it is listed AND the clock is
before the valid_until you read, as for leading. A shard's valid_until is
at most --valid-for after the answer, and at most half of
--lease-duration − --renew-deadline (2.5 s with the defaults): relect does
not know when a shard was last renewed, so the margin bounds it; ask at
least that often to go on acting. When a shard's term ends (it moves to
another candidate, or relect stops) the sidecar keeps the shard until the
latest valid_until it handed out for it has passed. With --file the
file carries them too: "shards", the list GET /shards serves ([] when
none is held), rewritten as shards come and go and four times per shard
validity (at most every 10 ms), each valid_until written counting as
handed out.
/leader still says whether this candidate leads the election (the leader
assigns the shards). --check and --check-url then check each shard's work: a shard
whose check fails --check-failures times in a row is released. Refused
with shards: --standby, --beat-window and --work-stuck-timeout.

Do not point a readiness probe at leadership: a Deployment would see its
standbys as unavailable and a rolling update would stall. To reach the
leader, ask any pod's /leader for its identity (the pod name with
--identity=$(POD_NAME)).
`

const sidecarTail = `Examples:
  relect sidecar --identity="$POD_NAME" default/my-app
  relect sidecar --http-addr=127.0.0.1:4040 --file=/run/relect/leader.json default/my-app

  # A program that asks every second: validities of 3 s, so that a graceful
  # handover leaves no leader for 3 s at most instead of up to 10 s:
  relect sidecar --valid-for=3s default/my-app

  # In the program's container, a shell check:
  curl -fsS localhost:4040/leader | jq -e '.leading' >/dev/null && echo "I lead"

  # The program beats after each unit of work; a leader that goes 30 s
  # without a beat hands over, and so does one that cannot reach the API
  # it works on:
  relect sidecar --beat-window=30s --check-url=https://api.internal/healthz default/my-app
  curl -fsS -X POST 127.0.0.1:4041/beat >/dev/null   # in the program's loop

  # 8 shards over the replicas; the program asks which it holds:
  relect sidecar --shards=8 --identity="$POD_NAME" default/my-app
  curl -fsS localhost:4040/shards | jq -r '.shards[].shard'

Exit codes:
  0  stopped by SIGTERM or SIGINT (the lease released)
  1  relect failed: its HTTP server (--http-addr or --control-addr in use,
     say), or --file could not be written at start
  2  bad command line or kubeconfig (the message names the flag)
`

// sidecarPlan is a checked sidecar command line.
type sidecarPlan struct {
	cluster  clusterFlags
	logs     logFlags
	s        settings
	lease    leaseRef
	httpAddr string
	// controlAddr serves POST /beat when beats are expected (--beat-window);
	// loopback unless exposeControl.
	controlAddr   string
	exposeControl bool
	file          string
	validFor      time.Duration // resolved: never zero
	// shardValidFor caps each shard's valid_until (GET /shards), with
	// shards: --valid-for, at most half of --lease-duration −
	// --renew-deadline (see resolveShardValidFor).
	shardValidFor time.Duration
}

// defaultControlAddr is --control-addr's default: loopback, which the
// pod's containers share and nothing outside the pod reaches, on the port
// after --http-addr's default.
const defaultControlAddr = "127.0.0.1:4041"

func sidecarCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	plan, helped, err := parseSidecar(args, stdout)
	if helped {
		return exitOK
	}
	if err != nil {
		return report(stderr, "sidecar", err)
	}
	if err := checkOptions(plan.s, plan.lease); err != nil {
		return report(stderr, "sidecar", err)
	}
	cfg, err := plan.cluster.restConfig()
	if err != nil {
		return report(stderr, "sidecar", err)
	}
	return sidecarElection(ctx, plan, relect.Options{Config: cfg}, stderr)
}

// parseSidecar parses and checks the command line, everything but the
// kubeconfig and the library's own validation (relect.New).
func parseSidecar(args []string, stdout io.Writer) (_ *sidecarPlan, helped bool, _ error) {
	p := &sidecarPlan{}
	fs := newFlagSet("sidecar")
	p.define(fs)
	helped, err := parseFlags(fs, args, sidecarHead, sidecarTail, stdout)
	if helped || err != nil {
		return nil, helped, err
	}
	errs := p.parseArgs(fs)
	errs = append(errs, p.resolve(fs)...)
	if len(errs) > 0 {
		return nil, false, joinUsage(errs)
	}
	return p, false, nil
}

// define defines sidecar's flags on fs, into p.
func (p *sidecarPlan) define(fs *pflag.FlagSet) {
	p.cluster.define(fs)
	defineOptions(fs, &p.s, electionFlags, standbyFlags)
	fs.StringVar(&p.httpAddr, "http-addr", ":4040", "address to serve the read-only endpoints on, GET /leader, /shards, /healthz and /metrics: every interface by default, for the kubelet's probes and Prometheus on the pod IP")
	fs.StringVar(&p.controlAddr, "control-addr", defaultControlAddr, "address to serve POST /beat on, with --beat-window: loopback, so that only the pod's own containers (or this machine's processes) can beat; must be a loopback address unless --expose-control")
	fs.BoolVar(&p.exposeControl, "expose-control", false, "WARNING: allow a --control-addr that is not loopback. A beat is not authenticated: whoever reaches --control-addr can keep a leader whose work is stuck leading. Only behind a NetworkPolicy that admits the program alone")
	fs.StringVar(&p.file, "file", "", "also keep the /leader JSON in this file, replaced atomically on every change; with --shards, and the /shards list as \"shards\" (default: none)")
	fs.DurationVar(&p.validFor, "valid-for", 0, "longest validity handed out: each valid_until is at most this long after the answer, and a graceful stop keeps the lease until the latest one has passed, so a handover leaves no leader for up to this long; programs must ask again within it to go on acting; at most --renew-deadline (default: --renew-deadline)")
	defineOptions(fs, &p.s, beatFlags, workFlags, healthFlags, shardFlags)
	p.logs.define(fs)
}

// parseArgs sets p's Lease from the one argument fs parsed.
func (p *sidecarPlan) parseArgs(fs *pflag.FlagSet) (errs []error) {
	if fs.NArg() != 1 {
		errs = append(errs, usagef("want one LEASE (NAMESPACE/NAME), got %d arguments: %q", fs.NArg(), fs.Args()))
	}
	if fs.NArg() >= 1 {
		lease, err := parseLease(fs.Arg(0))
		if err != nil {
			errs = append(errs, err)
		}
		p.lease = lease
	}
	return errs
}

// resolve checks the flags, on their own and against each other, and
// applies the defaults that depend on other flags: the zeros refused,
// --valid-for, the addresses, work liveness, shards, and the loggers.
func (p *sidecarPlan) resolve(fs *pflag.FlagSet) (errs []error) {
	errs = append(errs, p.s.refuseZeros(fs, electionFlags, beatFlags, workFlags, healthFlags, shardFlags)...)
	if fs.Changed("valid-for") && p.validFor == 0 {
		errs = append(errs, zeroFlagError(fs, "valid-for", "--renew-deadline"))
	} else if err := p.resolveValidFor(); err != nil {
		errs = append(errs, err)
	}
	// The work waits up to --valid-for after its term (holdTerm).
	if err := p.s.defaultWorkStopTimeout(p.validFor, "valid-for"); err != nil {
		errs = append(errs, err)
	}
	if p.httpAddr == "" {
		errs = append(errs, errors.New("--http-addr is empty: the sidecar serves /leader, /healthz and /metrics"))
	} else if err := checkHTTPAddr(p.httpAddr); err != nil {
		errs = append(errs, err)
	}
	if err := p.checkControl(fs); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.s.resolveWork(fs)...)
	errs = append(errs, p.s.resolveShards(fs)...)
	p.resolveShardValidFor()
	if _, _, err := p.logs.loggers(io.Discard); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// resolveShardValidFor sets the validity of a shard's answer: --valid-for,
// at most half of --lease-duration − --renew-deadline (the margin). The
// library does not say when a shard's term was last renewed, so a shard's
// valid_until cannot be capped at its term's validity as the leader's is;
// half the margin keeps it safe all the same: a shard's term ends no
// later than RenewDeadline after its last renewal was sent, a valid_until
// is handed out only before that, and another candidate may take the
// shard over only LeaseDuration after that renewal (or once this sidecar
// released it, after the last valid_until handed out): half the margin
// is left for clock-rate drift. Durations relect.New will refuse are left
// to it.
func (p *sidecarPlan) resolveShardValidFor() {
	ld := orDefault(p.s.opts.LeaseDuration, defaults.LeaseDuration)
	rd := orDefault(p.s.opts.RenewDeadline, defaults.RenewDeadline)
	p.shardValidFor = p.validFor
	if margin := ld - rd; margin > 0 {
		p.shardValidFor = min(p.validFor, margin/2)
	}
}

// checkControl checks --control-addr and --expose-control: a control
// address only with beats to serve, of the form of checkAddr, loopback
// unless exposed, and --expose-control only for an address that is not.
func (p *sidecarPlan) checkControl(fs *pflag.FlagSet) error {
	if p.s.opts.Work.BeatWindow <= 0 {
		switch {
		case fs.Changed("control-addr"):
			return usagef("--control-addr is set, but there is nothing to serve on it: POST /beat is served with --beat-window only")
		case p.exposeControl:
			return usagef("--expose-control is set, but there is nothing to serve on --control-addr: POST /beat is served with --beat-window only")
		}
		return nil
	}
	if p.controlAddr == "" {
		return usagef("--control-addr is empty: with --beat-window the sidecar serves POST /beat there (default %s)", defaultControlAddr)
	}
	if err := checkAddr("control-addr", p.controlAddr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(p.controlAddr)
	switch loopback := isLoopbackHost(host); {
	case !loopback && !p.exposeControl:
		return usagef("--control-addr %q is not a loopback address: a beat is not authenticated, and whoever reaches it can keep a leader whose work is stuck leading; "+
			"use 127.0.0.1:PORT (the pod's containers share it), or pass --expose-control to serve it there anyway", p.controlAddr)
	case loopback && p.exposeControl:
		return usagef("--expose-control is set, but --control-addr %s is a loopback address: there is nothing to expose", p.controlAddr)
	}
	return nil
}

// resolveValidFor checks --valid-for against --renew-deadline and applies
// its default, --renew-deadline: the term's own validity, the safe and
// longest wait. A --renew-deadline relect.New will refuse is left to it.
func (p *sidecarPlan) resolveValidFor() error {
	rd := orDefault(p.s.opts.RenewDeadline, defaults.RenewDeadline)
	switch {
	case p.validFor < 0:
		return usagef("--valid-for %v is negative", p.validFor)
	case p.validFor == 0 || rd <= 0:
		p.validFor = rd
	case p.validFor > rd:
		return usagef("--valid-for %v is longer than --renew-deadline %v: no term is valid that long after a renewal", p.validFor, rd)
	}
	return nil
}

// sidecarElection campaigns through conn (its Config or Client) and serves the
// result until ctx is done; it returns the exit code.
func sidecarElection(ctx context.Context, plan *sidecarPlan, conn relect.Options, stderr io.Writer) int {
	log, libLog, err := plan.logs.loggers(stderr)
	if err != nil {
		return report(stderr, "sidecar", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	sc := &sidecar{plan: plan, log: log, hurry: hurryOf(ctx)}
	check := newChecker(plan.s.check)
	e, err := newElector(sc.options(conn, libLog, check), plan.s.health)
	if err != nil {
		return report(stderr, "sidecar", err)
	}
	check.setEnv(e.Identity(), plan.lease) // before Run, which alone calls it
	if err := sc.views(e); err != nil {
		return report(stderr, "sidecar", err)
	}
	controlAddr := "" // the address bound: the port chosen for :0
	if plan.s.opts.Work.BeatWindow > 0 {
		ctl, err := sc.startControl(func(err error) { stop(err) })
		if err != nil {
			return report(stderr, "sidecar", err)
		}
		defer ctl.stop()
		controlAddr = ctl.addr
	}
	srv, err := startHTTP(plan.httpAddr, e, sc.view, sc.shards, plan.s.health, controlAddr, func(err error) { stop(err) })
	if err != nil {
		return report(stderr, "sidecar", err)
	}
	defer srv.stop()
	if err := sc.campaign(ctx, e, srv.addr, controlAddr); errors.Is(err, errHTTP) {
		return report(stderr, "sidecar", err)
	}
	log.Info("stopped")
	return exitOK
}

// sidecar is one sidecar's election: what its terms and shards hold, and
// what it serves from. view, shards and file are set before Run (views),
// and only read after.
type sidecar struct {
	plan   *sidecarPlan
	log    *slog.Logger
	hurry  <-chan struct{} // closed: stop holding at once (hurryOf)
	view   *leaderView
	shards *shardView // with shards only
	file   *stateFile // with --file only
}

// options are the Elector's Options for sc's plan: connected through conn
// (its Config or Client), each term and shard held (holdTerm, holdShard),
// logging to libLog, and check (nil: none) as the work check.
func (sc *sidecar) options(conn relect.Options, libLog *slog.Logger, check *checker) relect.Options {
	plan := sc.plan
	opts := plan.s.opts
	opts.Config, opts.Client = conn.Config, conn.Client
	opts.Namespace, opts.Name = plan.lease.namespace, plan.lease.name
	opts.OnStartedLeading = func(ctx context.Context) { holdTerm(ctx, sc.view, sc.log, sc.hurry) }
	if plan.s.shardsOn() {
		opts.Shards.Run = func(ctx context.Context) { holdShard(ctx, sc.shards, sc.log, sc.hurry) }
	}
	opts.Logger = libLog
	check.install(&opts, plan.s.shardsOn())
	return opts
}

// views sets sc's views of e — the leader's, the shards' with shards —
// and its --file, written once now.
func (sc *sidecar) views(e *relect.Elector) error {
	plan := sc.plan
	sc.view = newLeaderView(e, plan.lease, plan.validFor)
	if plan.s.shardsOn() {
		sc.shards = newShardView(e, plan.lease, plan.shardValidFor)
		sc.shards.changed = sc.view.signal
	}
	if plan.file != "" {
		sc.file = &stateFile{path: plan.file, shards: sc.shards}
		if err := sc.file.write(sc.view.state()); err != nil {
			return err
		}
	}
	return nil
}

// startControl serves POST /beat on --control-addr; fail is told if the
// server fails.
func (sc *sidecar) startControl(fail func(error)) (*httpServer, error) {
	ctl, err := startControl(sc.plan.controlAddr, sc.view, sc.plan.exposeControl, fail)
	if err != nil {
		return nil, err
	}
	if sc.plan.exposeControl {
		sc.log.Warn("POST /beat is served on an address that is not loopback (--expose-control): whoever reaches it can keep a leader whose work is stuck leading",
			"control_addr", ctl.addr)
	}
	return ctl, nil
}

// campaign runs e until ctx is done, its events and validities kept in
// sc's views and file; it returns Run's error once its goroutine has
// returned. httpAddr and controlAddr are logged.
func (sc *sidecar) campaign(ctx context.Context, e *relect.Elector, httpAddr, controlAddr string) error {
	plan := sc.plan
	events := e.Events()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		// Renewals come every RetryPeriod without an event, and a
		// validity handed out lasts --valid-for (a shard's, shardValidFor:
		// no longer): look four times as often as the shorter.
		tick := min(orDefault(plan.s.opts.RetryPeriod, defaults.RetryPeriod), plan.validFor) / 4
		if sc.shards != nil {
			tick = min(tick, plan.shardValidFor/4)
		}
		pump(events, sc.log, sc.view, sc.file, max(tick, 10*time.Millisecond))
	}()
	sc.log.Info("campaigning", "lease", plan.lease.String(), "identity", e.Identity(), "http_addr", httpAddr, "control_addr", controlAddr, "file", plan.file,
		"shards", shardsAttr(plan.s))
	err := e.Run(ctx)
	<-pumped
	return err
}

// holdTerm is the sidecar's leader work: nothing, until the term ends. Then
// it keeps the term's lease until the latest validity handed out to a
// program has passed — relect releases the lease only after it returns —
// so that a program acting before the valid_until it read never overlaps
// the next leader, also in a graceful handover. The wait is at most
// --valid-for (RenewDeadline by default). A second stop signal (hurry)
// does not shorten it: a program may still act until then.
func holdTerm(ctx context.Context, view *leaderView, log *slog.Logger, hurry <-chan struct{}) {
	view.begin(ctx)
	<-ctx.Done()
	waitOut(view.end(), log, hurry, "term ended: keeping the lease until the validity handed out has passed")
}

// waitOut returns once until has passed, having logged msg (with attrs)
// if it has not yet. A second stop signal (hurry) is logged, and does
// not shorten the wait: a program may act until then.
func waitOut(until time.Time, log *slog.Logger, hurry <-chan struct{}, msg string, attrs ...any) {
	d := time.Until(until)
	if d <= 0 {
		return
	}
	log.Info(msg, append(attrs, "wait", d)...)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-hurry:
			log.Warn("second stop signal: the lease is still kept until the validity handed out has passed, "+
				"for a program may act until then", append(attrs, "left", time.Until(until))...)
			hurry = nil
		}
	}
}
