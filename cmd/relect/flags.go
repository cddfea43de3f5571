package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
)

// settings is what the flags of run and sidecar set for the library.
type settings struct {
	opts   relect.Options
	health relect.HealthOptions
	check  workCheck // --check or --check-url (check.go)
}

// optionFlag is one flag that sets one field of relect.Options or
// relect.HealthOptions.
type optionFlag struct {
	name string // the flag, without dashes
	// field is the field it sets, as relect's errors name it
	// ("Options.LeaseDuration"), so that they can be told in terms of flags.
	field  string
	define func(fs *pflag.FlagSet, s *settings)
	// zero reports whether the field holds its type's zero value, which
	// the library takes for "the default"; nil for a flag whose zero is a
	// value of its own (a bool, --priority, --beat-window: see zeroIsValue)
	// or that sets no field itself (--check). An explicit zero of such a
	// flag is refused (refuseZeros): it would silently become the default.
	zero func(s *settings) bool
	// def is the default, as the refusal of a zero names it.
	def string
}

// zeroIsValue marks f as a flag whose zero is a value of its own, not the
// default: --priority 0 is a rank, --beat-window 0 expects no beats (which
// is also its default, said so in its help).
func (f optionFlag) zeroIsValue() optionFlag {
	f.zero = nil
	return f
}

// optionValue are the field types a flag can set.
type optionValue interface {
	time.Duration | int | int32 | bool | string | rate.Limit
}

// option makes the optionFlag for the field ptr points to. def is the
// flag's default: the library's, or zero where the library derives it (say
// so in usage).
func option[T optionValue](name, field string, ptr func(*settings) *T, def T, usage string) optionFlag {
	var zero T
	f := optionFlag{name: name, field: field, def: defaultText(def, usage)}
	if _, isBool := any(zero).(bool); !isBool {
		f.zero = func(s *settings) bool { return *ptr(s) == zero }
	}
	f.define = func(fs *pflag.FlagSet, s *settings) {
		switch p := any(ptr(s)).(type) {
		case *time.Duration:
			fs.DurationVar(p, name, any(def).(time.Duration), usage)
		case *int:
			fs.IntVar(p, name, any(def).(int), usage)
		case *int32:
			fs.Int32Var(p, name, any(def).(int32), usage)
		case *bool:
			fs.BoolVar(p, name, any(def).(bool), usage)
		case *string:
			fs.StringVar(p, name, any(def).(string), usage)
		case *rate.Limit:
			fs.Float64Var((*float64)(p), name, float64(any(def).(rate.Limit)), usage)
		}
	}
	return f
}

// defaultText is how a refused zero names the default: def itself, or,
// when the library derives it (def is zero), what the usage says of it
// ("(default: --retry-period)").
func defaultText[T optionValue](def T, usage string) string {
	var zero T
	if def != zero {
		return fmt.Sprint(def)
	}
	if _, after, ok := strings.Cut(usage, "(default: "); ok {
		if i := strings.LastIndex(after, ")"); i >= 0 {
			return after[:i]
		}
	}
	return "the library's"
}

// refuseZeros returns an error for each flag of tables given on fs with a
// zero value (an empty string for --identity) that the library would take
// for its default: --work-cooldown=0s became one minute, --check-failures=0
// three, --lease-duration=0s 15 s, silently. A flag left out still means
// the default.
func (s *settings) refuseZeros(fs *pflag.FlagSet, tables ...[]optionFlag) []error {
	var errs []error
	for _, t := range tables {
		for _, f := range t {
			if f.zero != nil && fs.Changed(f.name) && f.zero(s) {
				errs = append(errs, zeroFlagError(fs, f.name, f.def))
			}
		}
	}
	return errs
}

// zeroFlagError is the refusal of an explicit zero of flag name, whose
// default def it would silently mean.
func zeroFlagError(fs *pflag.FlagSet, name, def string) error {
	v := fs.Lookup(name).Value
	if v.Type() == "string" {
		return usagef("--%s is empty, which would mean the default (%s): leave the flag out for the default, or give a non-empty value", name, def)
	}
	return usagef("--%s is %s, which would mean the default (%s): leave the flag out for the default, or give a positive value", name, v.String(), def)
}

// electionFlags are the library's Options as flags, in the order of the
// help. Adding an option to the command is adding a line here. (EventBuffer
// is left out: the command reads its events as they come.)
var electionFlags = []optionFlag{
	option("identity", "Options.Identity", func(s *settings) *string { return &s.opts.Identity }, "",
		"holder identity written into the Lease; unique per candidate (default: host name + \"_\" + 16 random hex digits; in a pod use --identity=$(POD_NAME))"),
	option("lease-duration", "Options.LeaseDuration", func(s *settings) *time.Duration { return &s.opts.LeaseDuration }, defaults.LeaseDuration,
		"how long followers wait, after they last saw the Lease change, before taking it from a silent holder: the failover time after a crash; whole seconds"),
	option("renew-deadline", "Options.RenewDeadline", func(s *settings) *time.Duration { return &s.opts.RenewDeadline }, defaults.RenewDeadline,
		"how long after sending its last successful renewal a leader still leads: its term ends then at the latest, even if the API hangs; less than --lease-duration"),
	option("retry-period", "Options.RetryPeriod", func(s *settings) *time.Duration { return &s.opts.RetryPeriod }, defaults.RetryPeriod,
		"pause between a leader's renewals and between a follower's retries"),
	option("backoff-initial", "Options.BackoffInitial", func(s *settings) *time.Duration { return &s.opts.BackoffInitial }, 0,
		"first wait before campaigning again after a term shorter than --lease-duration (default: --retry-period)"),
	option("backoff-max", "Options.BackoffMax", func(s *settings) *time.Duration { return &s.opts.BackoffMax }, 0,
		"longest such wait; waits double from --backoff-initial (default: --lease-duration)"),
	option("rate-limit", "Options.RateLimit", func(s *settings) *rate.Limit { return &s.opts.RateLimit }, 0,
		"sustained budget of Lease API calls per second, enforced by a token bucket; at least 2 per --retry-period (default: 2 per --retry-period)"),
	option("rate-burst", "Options.RateBurst", func(s *settings) *int { return &s.opts.RateBurst }, defaults.RateBurst,
		"size of the token bucket, in calls; at least 4"),
	option("degraded-after", "Options.DegradedAfter", func(s *settings) *int { return &s.opts.DegradedAfter }, defaults.DegradedAfter,
		"Lease API calls that must fail in a row before relect reports itself degraded (log, relect_degraded)"),
	option("keep-lease-on-cancel", "Options.KeepLeaseOnCancel", func(s *settings) *bool { return &s.opts.KeepLeaseOnCancel }, false,
		"on SIGTERM or SIGINT keep the lease instead of releasing it: followers then take over only after --lease-duration"),
	option("priority", "Options.Priority", func(s *settings) *int32 { return &s.opts.Priority }, int32(0),
		"rank in succession: when the lease is released or expires, the leader's successors are the live candidates of highest priority; never ousts a leader").zeroIsValue(),
	option("disable-registry", "Options.DisableRegistry", func(s *settings) *bool { return &s.opts.DisableRegistry }, false,
		"publish no registration beside the Lease (then list and delete on leases are not needed); followers race for a released lease"),
	option("registration-renewal", "Options.RegistrationRenewal", func(s *settings) *time.Duration { return &s.opts.RegistrationRenewal }, defaults.RegistrationRenewal,
		"how often this candidate renews its registration in the candidate registry; at least --lease-duration"),
}

// standbyFlags are for the commands that may observe without ever leading.
var standbyFlags = []optionFlag{
	option("standby", "Options.Standby", func(s *settings) *bool { return &s.opts.Standby }, false,
		"never campaign: only follow the Lease and report its leader (listed as standing by)"),
}

// workFlags are the library's WorkOptions as flags but BeatWindow (see
// beatFlags): the work check and the cooldowns of stuck handovers (see
// check.go). --check and --check-url set no field themselves: they make
// the check.
var workFlags = []optionFlag{
	{name: "check", field: "Options.Work.Check", define: func(fs *pflag.FlagSet, s *settings) {
		fs.StringVar(&s.check.command, "check", "", "work check: a shell command (sh -c, with RELECT_IDENTITY and RELECT_LEASE in its environment) that exits 0 when this replica can do the work; run every --check-interval while this replica leads and while it is named in the line of succession (with shards: for each shard held, with RELECT_SHARD too); --check-failures failures in a row mean the work is stuck (default: none)")
	}},
	{name: "check-url", define: func(fs *pflag.FlagSet, s *settings) {
		fs.StringVar(&s.check.url, "check-url", "", "work check over HTTP, instead of --check: GET this URL, healthy on a 2xx answer (default: none)")
	}},
	option("check-interval", "Options.Work.CheckInterval", func(s *settings) *time.Duration { return &s.opts.Work.CheckInterval }, defaults.WorkCheckInterval,
		"time between two work checks; at least 100ms: each check starts a shell or opens a connection, and stuck work is judged over --check-failures checks anyway, so a shorter interval costs CPU and log lines and judges no better"),
	option("check-timeout", "Options.Work.CheckTimeout", func(s *settings) *time.Duration { return &s.opts.Work.CheckTimeout }, 0,
		"longest a work check may take: then it is killed and counts as a failure; at most --check-interval (default: half of --check-interval)"),
	option("check-failures", "Options.Work.CheckFailures", func(s *settings) *int { return &s.opts.Work.CheckFailures }, defaults.WorkCheckFailures,
		"work checks failing in a row that mean the work is stuck"),
	option("work-cooldown", "Options.Work.Cooldown", func(s *settings) *time.Duration { return &s.opts.Work.Cooldown }, defaults.WorkCooldown,
		"after a stuck handover, how long the stuck replica is passed over in the line of succession, and how long the next leader must lead before it may hand over for stuck work in turn; doubles with each stuck handover in a row across the fleet, up to --work-max-cooldown"),
	option("work-max-cooldown", "Options.Work.MaxCooldown", func(s *settings) *time.Duration { return &s.opts.Work.MaxCooldown }, 0,
		"the longest cooldown the doubling reaches; at least --work-cooldown (default: 1h, or --work-cooldown if longer)"),
}

// beatFlags are for the commands whose leader's work can beat (sidecar:
// POST /beat).
var beatFlags = []optionFlag{
	option("beat-window", "Options.Work.BeatWindow", func(s *settings) *time.Duration { return &s.opts.Work.BeatWindow }, 0,
		"expect the program to POST /beat on --control-addr at least this often while this replica leads, counted from the term's start, then from each beat: a term that goes this long without one has stuck work; 0 expects none (default: no beats expected, and no --control-addr served)").zeroIsValue(),
}

// shardFlags are the library's ShardOptions as flags but Run and Work
// (the command's own: run's CMD per shard, the sidecar's hold; the work
// flags apply to each shard with shards on, see resolveShards).
// --shard-names sets no field through option: a list; nor --shard-ranges,
// whose "" is a value (no ranges) and whose type is shardrange.Field.
var shardFlags = []optionFlag{
	option("shards", "Options.Shards.Count", func(s *settings) *int { return &s.opts.Shards.Count }, 0,
		"take part in this many shards, numbered 0 to N-1: work split over the candidates, each shard held by one candidate at a time, which the leader assigns balanced by --shard-weight; the same on every candidate; at most 1000; set --shards or --shard-names (default: no shards)").zeroIsValue(),
	{name: "shard-names", field: "Options.Shards.Names", define: func(fs *pflag.FlagSet, s *settings) {
		fs.StringSliceVar(&s.opts.Shards.Names, "shard-names", nil, "take part in the shards of these names instead of numbered ones: a comma-separated list of DNS labels (at most 63 characters: a-z, 0-9, -), all different, the same on every candidate (default: no shards)")
	}},
	{name: "shard-ranges", field: "Options.Shards.Ranges", define: func(fs *pflag.FlagSet, s *settings) {
		fs.StringVar((*string)(&s.opts.Shards.Ranges), "shard-ranges", "", "make the --shards=N shards a split of the data: uid or namespace — shard i is the objects whose metadata.uid (or metadata.namespace) has a 64-bit FNV-1a hash in the i-th of N equal ranges, and each shard's CMD gets it as RELECT_SHARD_RANGE, the ShardSelector of Kubernetes' sharded list and watch (default: none)")
	}},
	option("shard-weight", "Options.Shards.Weight", func(s *settings) *int32 { return &s.opts.Shards.Weight }, int32(1),
		"this candidate's share of the shards: a candidate of weight 2 holds twice the shards of one of weight 1 (to within one)"),
	option("shard-join-delay", "Options.Shards.JoinDelay", func(s *settings) *time.Duration { return &s.opts.Shards.JoinDelay }, 0,
		"how long the leader must have seen a candidate registered before it gives it shards, so that a rolling restart does not move each shard onto every new pod in turn (default: --lease-duration)"),
}

// healthFlags are the library's HealthOptions as flags, for the commands
// that serve /healthz.
var healthFlags = []optionFlag{
	option("cut-off-after", "HealthOptions.CutOffAfter", func(s *settings) *time.Duration { return &s.health.CutOffAfter }, 0,
		"/healthz fails when Lease API calls have failed in a row, none succeeding, for longer than this (default: 2 × --lease-duration)"),
	option("work-stop-timeout", "HealthOptions.WorkStopTimeout", func(s *settings) *time.Duration { return &s.health.WorkStopTimeout }, 0,
		"/healthz fails when the leader's work is still running this long after its term ended (default: what the command's own stop may take, + 1s, at least --renew-deadline: run --grace + 1s, sidecar --valid-for + 1s; one not longer than that stop is refused)"),
	option("work-stuck-timeout", "HealthOptions.WorkStuckTimeout", func(s *settings) *time.Duration { return &s.health.WorkStuckTimeout }, 0,
		"/healthz fails when this replica leads and its work has been stuck this long: it must hold (stuck handovers came in a row) or has nobody to hand over to (default: --work-max-cooldown)"),
}

// defineOptions defines the flags of table on fs, setting s.
func defineOptions(fs *pflag.FlagSet, s *settings, table ...[]optionFlag) {
	for _, t := range table {
		for _, f := range t {
			f.define(fs, s)
		}
	}
}

// orDefault is v, or def when v is zero: what relect.New makes of a zero
// duration.
func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// defaultWorkStopTimeout sets HealthOptions.WorkStopTimeout, unless given,
// to stop (how long the command's own leader work may take to return after
// its term ended: the flag named flag) plus a second for scheduling, and
// at least the library's default, RenewDeadline: a longer stop must not
// fail /healthz and have the pod restarted. A --work-stop-timeout given
// that is not longer than stop is an error: /healthz would fail on every
// graceful end of a term.
func (s *settings) defaultWorkStopTimeout(stop time.Duration, flag string) error {
	if given := s.health.WorkStopTimeout; given != 0 {
		if given > 0 && given <= stop { // a negative one: HealthCheck names it
			return usagef("--work-stop-timeout %v is not longer than --%s %v, which the leader work may take to stop after its term: /healthz would fail on every graceful handover; give more than %v, or leave it out for %v",
				given, flag, stop, stop, max(orDefault(s.opts.RenewDeadline, defaults.RenewDeadline), stop+time.Second))
		}
		return nil
	}
	rd := orDefault(s.opts.RenewDeadline, defaults.RenewDeadline)
	s.health.WorkStopTimeout = max(rd, stop+time.Second)
	return nil
}

// optionsError turns an error of relect.New or of a HealthCheck, whose
// *relect.FieldErrors name Options fields, into a usage error that names
// the flags instead: one line per invalid field.
func optionsError(err error, tables ...[]optionFlag) error {
	flagOf := map[string]string{
		"Options.Namespace": "LEASE's namespace",
		"Options.Name":      "LEASE's name",
		"Options.Work":      "work liveness (--check, --check-url or --beat-window)",
		"Options.Shards":    "--shards (or --shard-names)",
	}
	for _, t := range tables {
		for _, f := range t {
			flagOf[f.field] = "--" + f.name
		}
	}
	name := func(field string) string {
		if f, ok := flagOf[field]; ok {
			return f
		}
		// With shards the work flags set each shard's work liveness
		// (resolveShards), and each of --shard-names is one name.
		if rest, ok := strings.CutPrefix(field, "Options.Shards.Work."); ok {
			if f, ok := flagOf["Options.Work."+rest]; ok {
				return f
			}
		}
		if strings.HasPrefix(field, "Options.Shards.Names[") {
			return flagOf["Options.Shards.Names"]
		}
		_, bare, _ := strings.Cut(field, ".")
		return bare
	}
	var lines []string
	for _, fe := range relect.FieldErrors(err) {
		lines = append(lines, name(fe.Field)+" "+fe.Problem(name))
	}
	if len(lines) == 0 {
		return usagef("%v", err)
	}
	return usagef("%s", strings.Join(lines, "\n"))
}

// logFlags choose the format and level of relect's own log on stderr.
type logFlags struct {
	format  string
	verbose bool
}

func (l *logFlags) define(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "log format on stderr: text or json")
	fs.BoolVarP(&l.verbose, "verbose", "v", false, "also log debug messages: client-go's detail of every renewal, and the library's of its calls")
}

// loggers returns the command's logger, and the library's (relect's and
// client-go's records): one handler on stderr for both, at Info and above —
// the library's notices (a missing Lease waited for) and warnings are
// shown by default — or Debug and above with --verbose.
func (l *logFlags) loggers(stderr io.Writer) (cmdLog, libLog *slog.Logger, err error) {
	level := slog.LevelInfo
	if l.verbose {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch l.format {
	case "text":
		h = slog.NewTextHandler(stderr, opts)
	case "json":
		h = slog.NewJSONHandler(stderr, opts)
	default:
		return nil, nil, usagef("--log-format %q: want text or json", l.format)
	}
	cmdLog = slog.New(h)
	return cmdLog, cmdLog, nil
}

// newFlagSet returns a flag set that reports errors to its caller instead
// of printing them, with flags in the order they are defined.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("relect "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// parseFlags parses args into fs. On --help it prints head, the flags and
// tail to stdout and reports helped.
func parseFlags(fs *pflag.FlagSet, args []string, head, tail string, stdout io.Writer) (helped bool, err error) {
	err = fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintf(stdout, "%s\nFlags:\n%s\n%s", head, fs.FlagUsagesWrapped(100), tail)
		return true, nil
	}
	if err != nil {
		return false, usagef("%v", err)
	}
	return false, nil
}
