package relect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/identity"
	"github.com/relect/relect/internal/leaseclient"
	"github.com/relect/relect/internal/logq"
	"github.com/relect/relect/internal/problem"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/shards"
	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/internal/work"
	"github.com/relect/relect/shardrange"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Limits and derived constants of Options; the defaults New applies to
// zero-valued fields are in internal/defaults, and each field's
// documentation states its own.
const (
	// maxEventBuffer bounds Options.EventBuffer: the channel is allocated
	// up front.
	maxEventBuffer = 1 << 20

	// warnFailuresAfter is how many Lease API calls must fail in a row
	// before the log warns (then at each doubling: 2, 4, 8, ...).
	warnFailuresAfter = 2

	// minRateBurst is the smallest burst that lets an acquisition and a
	// renewal run without waiting on the bucket: when client-go polls, its
	// Get, its acquiring Update and its renew loop's immediate first
	// Update, all within milliseconds, and one to spare (a follower's
	// acquisition is its conditional Update alone: the gateway answers the
	// rest). (One renewal try on
	// client-go's slow path — Update, Get, Update — needs 3.) A write
	// delayed by the bucket carries a renew time stamped before the wait,
	// which followers may not see as new, so a healthy leader must never
	// wait.
	minRateBurst = 4

	// callsPerRetryPeriod is the sustained rate a leader needs: at most two
	// calls per retry period in the worst steady case (a Get and an Update),
	// one in the healthy case.
	callsPerRetryPeriod = 2
)

// Options configure an Elector. The zero value of every field other than the
// Lease location (Client or Config or Lock, Namespace, Name) and
// OnStartedLeading (which may be nil only with Shards) is valid and selects the default given in the field's
// comment. New validates every field and their relations and never changes
// the caller's Options; an Options value may be reused for several Electors.
type Options struct {
	// 1. What every program sets: where the Lease lives (exactly one of
	// Config, Client and Lock), who this candidate is, and its work.

	// Config is the REST configuration relect builds its own Lease client
	// from. This is the recommended way: the Lease client then has no
	// client-side rate limiter of its own (relect's token bucket paces it)
	// and shares none with the caller's other API traffic, speaks protobuf
	// (ContentType and AcceptContentTypes of Config are overridden), and
	// identifies itself with the user agent suffix "relect". Config.Timeout
	// is ignored for it: it would also cut the followers' long-lived watch;
	// relect gives every other call its own timeout of half the renew
	// deadline instead. Config is copied; the caller's value is not
	// modified.
	Config *rest.Config

	// Client is a clientset relect uses for the Lease API. Its client-side
	// rate limiter (QPS and Burst of the rest.Config it was built from) is
	// shared with all other traffic of that clientset, so a busy caller can
	// delay renewals; prefer Config.
	Client kubernetes.Interface

	// Lock is for advanced callers: a client-go resource lock used instead
	// of Config or Client. Namespace, Name and Identity must then be empty:
	// the lock carries them. relect releases the lease with Lock.Update and
	// relies on it being conditional on the object last read or written, as
	// resourcelock.LeaseLock's is.
	Lock resourcelock.Interface

	// Namespace of the Lease. Required with Config or Client; must be a
	// valid namespace name (an RFC 1123 label).
	Namespace string

	// Name of the Lease. Required with Config or Client; must be a valid
	// object name (an RFC 1123 subdomain).
	Name string

	// Identity is the holder identity this candidate writes into the Lease.
	// It must differ between all candidates of one Lease. Empty selects the
	// host name followed by "_" and 16 random hex digits, which is unique per
	// process even for host-network pods that share the node's host name but
	// changes at every restart. For an identity that operators can read
	// (kubectl get lease) use the pod name, given to the container through
	// the downward API (fieldRef metadata.name). Either way a restarted
	// process does not resume a lease its previous incarnation held: relect
	// treats a record it did not write as a stranger's and takes it over
	// only once it expires (see docs/design.md). At most 253 bytes, valid
	// UTF-8.
	Identity string

	// OnStartedLeading runs the leader's work for one term. Required,
	// unless Shards is set: nil then means the leader has no work of its
	// own but the assignment of shards, and its term lasts until it ends
	// for another reason. It is
	// called in a goroutine relect owns, with a context that is cancelled
	// when the term ends: when the lease may have passed to another
	// candidate (at the latest RenewDeadline after the last successful
	// renewal was sent), when Run's context is done, or when the lease is
	// seen held by someone else. It should return soon after that context
	// is done: the lease is released and the next campaign begins only
	// after it has returned. If it returns while the term is still valid,
	// the term ends and the lease is released. A panic is recovered,
	// reported as an EventError and ends the term like a return does.
	// The context carries the term number (TermFromContext).
	OnStartedLeading func(ctx context.Context)

	// 2. What many programs set: callbacks and logs, work liveness,
	// succession (docs/design.md, "Succession"), the release on shutdown,
	// Kubernetes Events.

	// OnStoppedLeading, if not nil, is called once after each term, after
	// OnStartedLeading has returned and the lease was released (if it was).
	// Unlike client-go's callback of the same name, it is never called when
	// this candidate did not lead. It runs on Run's goroutine: Run does not
	// campaign again until it returns.
	OnStoppedLeading func()

	// OnNewLeader, if not nil, is called with the holder identity each time
	// relect observes a different, non-empty holder, including itself.
	// Calls are made in order, one at a time, from a goroutine relect owns;
	// a slow callback delays later calls but never the election. A holder
	// is a state, not an event: while a call runs, at most 16 holders wait
	// for theirs, and beyond that the oldest waiting is dropped (and a
	// warning logged), so the newest holder is always announced last. Run
	// returns once the waiting calls were made.
	OnNewLeader func(identity string)

	// Logger receives relect's logs and those of the wrapped client-go
	// elector (through klog's contextual logging). Nil sends relect's own
	// warnings and errors (Warn and above: a stuck leader, calls failing in
	// a row, a registry off for lack of RBAC) to slog.Default(), as it is
	// when each record is handled, and nothing else — not client-go's
	// lines, an error per failed retry; a Logger without a handler (a zero
	// slog.Logger) is refused by New.
	// Levels: Info for each event (Debug for EventError, which can be
	// many) and the wait for a missing Lease, with when it ends; Warn when
	// calls fail in a row (at 2, then each time the run doubles), when
	// degraded, when the candidate registry is off for lack of RBAC, and
	// when another process seems to share this Identity.
	// Records reach its handler in order from a goroutine of relect's,
	// never from one that runs the election, so a slow handler delays only
	// the log: when more than 1,024 records wait, the oldest are dropped
	// and a warning says how many, of which levels, their most frequent
	// messages, and when the oldest and newest were written. Run returns once every record queued
	// during it was handled. Only the handler's Enabled is called on the
	// election's goroutines (slog asks that it be quick).
	Logger *slog.Logger

	// Work makes the leader's work part of its leadership: a leader whose
	// work is stuck — no Beat within Work.BeatWindow, or Work.Check failing
	// Work.CheckFailures times in a row — ends its term (ErrWorkStuck) and
	// releases the lease to the next in line, stays a candidate, and is
	// passed over for a cooldown; the fleet does not flap when the work
	// fails everywhere (see WorkOptions and docs/design.md, "Stuck work").
	// The zero value turns it off, at no cost.
	Work WorkOptions

	// Shards splits work over the fleet: S shards, each held by one
	// candidate at a time, which runs Shards.Run for it (see ShardOptions
	// and docs/design.md, "Shards"). The zero value turns shards off, at no
	// cost; any field set without Count or Names fails in New.
	Shards ShardOptions

	// Priority ranks this candidate in succession: when a leader names its
	// successors, it names the live candidates with the highest Priority
	// first (ties in the order of their identities). Succession decides who
	// tries first when the lease is released or expires, never whether a
	// leader is ousted: a candidate of higher priority that joins later
	// waits for the next change. Zero is the default; negative values rank
	// below it. Needs the registry: with DisableRegistry or a Lock, New
	// reports a nonzero Priority.
	Priority int32

	// Standby, when true, makes this Elector a candidate that never
	// campaigns: it follows the Lease and reports its leader (Leader,
	// OnNewLeader, Events, Candidates, WaitForLeader) but never writes the
	// Lease, so it never leads and OnStartedLeading is never called (it
	// must still be set). It registers as standing by, so that a leader
	// refuses to hand over to it. With DisableRegistry it does not
	// register: it still never writes the Lease, but leaders do not know
	// it, and a HandOver naming it is refused as unknown (ErrUnknownCandidate) unless forced. Needs Config or
	// Client: with a Lock, New reports Options.Standby.
	Standby bool

	// KeepLeaseOnCancel, when true, leaves the Lease held when Run's context
	// is done, so that followers take over only after LeaseDuration. The
	// default (false) releases it, after OnStartedLeading has returned, so
	// that followers can take over at once.
	KeepLeaseOnCancel bool

	// EventRecorder, if not nil, receives Kubernetes Events (type Normal,
	// reason "LeaderElection", as client-go's) on the Lease when this
	// candidate became leader, stopped leading and released the lease, once
	// per term. A k8s.io/client-go/tools/record.EventRecorder fits. relect
	// never calls a Lock's RecordEvent: client-go's LeaseLock reads state
	// there that its renew loop writes concurrently. With Lock, the Lease
	// is named after Lock.Describe() ("namespace/name").
	EventRecorder resourcelock.EventRecorder

	// 3. Tuning: the durations (client-go's), the pacing of Lease API calls,
	// the candidate registry, the degraded signal, the Events buffer. Every
	// zero value is a working default.

	// LeaseDuration is how long, after they last saw the Lease change,
	// followers wait before they may take it over. It is written into the
	// Lease in whole seconds, so it must be a whole number of seconds.
	// Zero means 15 s. Must be greater than
	// RenewDeadline.
	LeaseDuration time.Duration

	// RenewDeadline is how long after sending its last successful renewal a
	// leader still considers itself leader: IsLeader turns false and the
	// term context is cancelled at that instant at the latest. Zero means
	// 10 s. Must be greater than 1.2 × RetryPeriod
	// and less than LeaseDuration (client-go's rules); LeaseDuration −
	// RenewDeadline is the margin for clock-rate drift. It must also be
	// greater than RetryPeriod + 1 s: validity counts from the first renewal
	// that client-go followers can tell from the one before, and they
	// compare the record's JSON, whose renew time has whole seconds, so
	// renewals extend a term about once a second at most; with a shorter
	// RenewDeadline a healthy leader's term would lapse between them.
	RenewDeadline time.Duration

	// RetryPeriod is the pause between renewals of a leader, and between
	// acquisition tries of a follower (which client-go jitters up to 2.2 ×
	// RetryPeriod). Zero means 2 s.
	RetryPeriod time.Duration

	// BackoffInitial is the first wait before campaigning again after a
	// term that was not stable (see BackoffMax). Zero means RetryPeriod.
	BackoffInitial time.Duration

	// BackoffMax caps the wait before campaigning again. Waits follow
	// cenkalti/backoff's exponential schedule (multiplier 2, ±50 % jitter)
	// from BackoffInitial and never exceed BackoffMax. The schedule starts
	// over after a stable term: one held for at least LeaseDuration and not
	// ended by a panic. Zero means LeaseDuration. Must be at least
	// BackoffInitial.
	BackoffMax time.Duration

	// RateLimit is the sustained budget of Lease API calls (Get, Create,
	// Update, Watch) per second for this candidate, enforced by a token
	// bucket in front of every call. Zero means 2 calls per RetryPeriod
	// (1 call/s with the default RetryPeriod), which a healthy leader (one
	// Update per RetryPeriod) never waits on. Must be at least that, so that
	// a leader can always renew; rate.Inf (or any +Inf) disables the
	// bucket.
	RateLimit rate.Limit

	// RateBurst is the token bucket's size in calls. Zero means
	// 10. Must be at least 4, the calls of an acquisition
	// and the first renewal. Ignored when RateLimit is rate.Inf.
	RateBurst int

	// DisableRegistry, when true, turns the candidate registry off: this
	// candidate publishes no registration, and as leader names no
	// successors (followers then race for a released lease, as plain
	// client-go's do). Use it when the candidate may not create or delete
	// Leases beside the election's. With Lock the registry is always off.
	DisableRegistry bool

	// RegistrationRenewal is how often a registered candidate renews its
	// registration, a Lease object named after the election's and its
	// identity (see Elector.Candidates). A registration lapses, for the
	// leader, 3 renewal periods after it last saw it change, on the
	// leader's clock; the leader deletes those it has seen unchanged for
	// twice as long (a candidate whose registration is gone creates it
	// again at its next renewal; with Shards, at once when the shard table
	// stops giving it shards). Zero means 15
	// minutes. Must be at least LeaseDuration.
	RegistrationRenewal time.Duration

	// DegradedAfter is how many Lease API calls must fail in a row before
	// the Elector reports itself degraded (EventDegraded, Stats.Degraded)
	// until it next hears from the API: a call succeeds, or a watch
	// delivers an event. Zero means 5.
	DegradedAfter int

	// EventBuffer is the capacity of the Events channel. Zero means
	// 64; at most 1,048,576 (it is allocated up front). When the buffer is full the oldest event is
	// dropped (see Elector.Events).
	EventBuffer int
}

// config is Options after defaults, validated, with the values derived from
// them: what an Elector runs on. It is computed once, in New, and never
// changes.
type config struct {
	Options
	lock   resourcelock.Interface              // Options.Lock; nil with Config or Client
	leases coordinationv1client.LeaseInterface // the Lease client; nil with Lock

	// identity is the holder identity this candidate writes (Identity, the
	// generated default, or the Lock's); describe is the Lease as
	// "namespace/name" (the Lock's Describe). Asked of a Lock once, here,
	// so that no Lock method runs while relect holds its own lock.
	identity, describe string
	// callTimeout bounds each Lease API call but a watch: half the renew
	// deadline, so a hung request cannot stall a campaign.
	callTimeout time.Duration
	// leaseSeconds is LeaseDuration in the Lease's whole seconds.
	leaseSeconds int
	// createWait is how long a missing Lease must be seen missing, without
	// a gap, before this candidate creates it: LeaseDuration (see
	// docs/design.md, "revoked by hand").
	createWait time.Duration
	// successionStep is how long each place in a line of succession waits
	// after the one before it: half the retry period.
	successionStep time.Duration
	// handOverSeconds is the lease duration of a handover record: how long
	// the named successor has to take the lease before normal succession
	// resumes. Twice the retry period, in whole seconds, at least 1.
	handOverSeconds int
	// registry: this candidate registers, and names successors as leader.
	registry bool
	// instance names this Elector in its registration (16 random hex
	// digits), to tell another process with the same identity.
	instance string
	// shards are the shard names (Options.Shards, resolved); nil without
	// shards. shard is, on a shard's own Elector (shard.go), the shard it
	// campaigns for, and leaseLabels the labels its every write sets.
	shards      []string
	shard       string
	leaseLabels map[string]string
	// succession is the succession component's Config (successionConfig).
	succession succession.Config
}

// problems collects the field errors of one resolve.
type problems []error

// bad reports field (of Options) invalid: format and args say why, and
// the args of type fieldRef name the other fields involved.
func (p *problems) bad(field, format string, args ...any) {
	*p = append(*p, newFieldError("Options", field, format, args...))
}

// resolve applies the defaults in one place and validates everything, in
// six steps: where the Lease is (source), the durations, the pacing, the
// registry, work liveness, and the delivery of events and logs. Errors name the field at fault and wrap
// ErrInvalidOptions; all of them are returned, joined. Only then does it
// build the Lease client and derive the config's other values.
func resolve(o Options) (*config, error) {
	var p problems
	resolveSource(&o, &p)
	durationsOK := resolveDurations(&o, &p)
	resolvePacing(&o, durationsOK, &p)
	registry.CheckOptions(registry.Settings{Renewal: &o.RegistrationRenewal, LeaseDuration: o.LeaseDuration, DurationsOK: durationsOK,
		Priority: o.Priority, DisableRegistry: o.DisableRegistry, Lock: o.Lock != nil}, p.bad)
	work.Resolve((*work.Options)(&o.Work), "Work", o.Standby, p.bad)
	resolveShards(&o, durationsOK, &p)
	resolveDelivery(&o, &p)
	if len(p) > 0 {
		return nil, errors.Join(p...)
	}
	return build(o, nil)
}

// resolveSource checks where the Lease lives: exactly one of Config, Client
// and Lock, and a valid namespace, name and identity.
func resolveSource(o *Options, p *problems) {
	sources := 0
	for _, set := range []bool{o.Config != nil, o.Client != nil, o.Lock != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources == 0:
		p.bad("Config", "and %s and %s are all nil: set exactly one of them", fieldRef("Client"), fieldRef("Lock"))
	case sources > 1:
		p.bad("Config", "and %s and %s: set exactly one of them, not %d", fieldRef("Client"), fieldRef("Lock"), sources)
	case problem.NilInside(o.Client):
		p.bad("Client", "is a nil %T", o.Client)
	case problem.NilInside(o.Lock):
		p.bad("Lock", "is a nil %T", o.Lock)
	case o.Lock != nil:
		if o.Namespace != "" || o.Name != "" || o.Identity != "" {
			p.bad("Lock", "is set: leave %s, %s and %s empty, the lock carries them", fieldRef("Namespace"), fieldRef("Name"), fieldRef("Identity"))
		}
		if o.Lock.Identity() == "" {
			p.bad("Lock", "has an empty Identity()")
		} else {
			identity.Check("Lock", o.Lock.Identity(), p.bad)
		}
		if o.Standby {
			p.bad("Standby", "needs %s or %s: a standby follows the Lease with a watch, which a %s cannot give", fieldRef("Config"), fieldRef("Client"), fieldRef("Lock"))
		}
	}
	if o.Lock == nil {
		checkLease(o, p)
	}
	if o.OnStartedLeading == nil && !o.Shards.enabled() {
		p.bad("OnStartedLeading", "is nil (it may be nil only with %s)", fieldRef("Shards"))
	}
}

// checkLease checks the Lease's namespace and name and the identity given
// with Config or Client; every bad one is reported, whatever else is.
func checkLease(o *Options, p *problems) {
	if o.Namespace == "" {
		p.bad("Namespace", "is empty")
	} else if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		p.bad("Namespace", "%q is not a valid namespace: %s", o.Namespace, strings.Join(msgs, "; "))
	}
	if o.Name == "" {
		p.bad("Name", "is empty")
	} else if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
		p.bad("Name", "%q is not a valid Lease name: %s", o.Name, strings.Join(msgs, "; "))
	}
	if len(o.Identity) > 253 {
		p.bad("Identity", "is %d bytes long, more than 253", len(o.Identity))
	}
	identity.Check("Identity", o.Identity, p.bad)
}

// resolveDurations defaults LeaseDuration, RenewDeadline and RetryPeriod
// and checks each and their relations (client-go's, and relect's own). It
// reports whether they are valid, which the later steps need.
func resolveDurations(o *Options, p *problems) (ok bool) {
	ok = true
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"LeaseDuration", &o.LeaseDuration, defaults.LeaseDuration},
		{"RenewDeadline", &o.RenewDeadline, defaults.RenewDeadline},
		{"RetryPeriod", &o.RetryPeriod, defaults.RetryPeriod},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			p.bad(d.field, "is negative (%v)", *d.v)
			ok = false
		}
	}
	switch {
	case o.LeaseDuration <= 0:
	case o.LeaseDuration%time.Second != 0:
		p.bad("LeaseDuration", "%v is not a whole number of seconds (the Lease stores whole seconds)", o.LeaseDuration)
		ok = false
	case o.LeaseDuration/time.Second > math.MaxInt32:
		p.bad("LeaseDuration", "%v does not fit the Lease's 32-bit leaseDurationSeconds", o.LeaseDuration)
		ok = false
	}
	if !ok {
		return false
	}
	if o.RenewDeadline >= o.LeaseDuration {
		p.bad("RenewDeadline", "%v must be less than %s %v", o.RenewDeadline, fieldRef("LeaseDuration"), o.LeaseDuration)
		ok = false
	}
	if float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) {
		p.bad("RenewDeadline", "%v must be greater than 1.2 × %s (%v)", o.RenewDeadline, fieldRef("RetryPeriod"), o.RetryPeriod)
		ok = false
	} else if o.RenewDeadline <= o.RetryPeriod+time.Second {
		p.bad("RenewDeadline", "%v must be greater than %s + 1s (%v): a renewal extends the term only when followers can see it, and the Lease's renew time has whole seconds", o.RenewDeadline, fieldRef("RetryPeriod"), o.RetryPeriod+time.Second)
		ok = false
	}
	return ok
}

// resolvePacing defaults and checks the backoff and the token bucket, whose
// defaults and bounds derive from the durations.
func resolvePacing(o *Options, durationsOK bool, p *problems) {
	backoffOK := true
	if o.BackoffInitial < 0 {
		p.bad("BackoffInitial", "is negative (%v)", o.BackoffInitial)
		backoffOK = false
	}
	if o.BackoffMax < 0 {
		p.bad("BackoffMax", "is negative (%v)", o.BackoffMax)
		backoffOK = false
	}
	if backoffOK && durationsOK {
		if o.BackoffInitial == 0 {
			o.BackoffInitial = o.RetryPeriod
		}
		if o.BackoffMax == 0 {
			o.BackoffMax = max(o.LeaseDuration, o.BackoffInitial)
		}
		if o.BackoffMax < o.BackoffInitial {
			p.bad("BackoffMax", "%v is less than %s %v", o.BackoffMax, fieldRef("BackoffInitial"), o.BackoffInitial)
		}
	}

	limit := float64(o.RateLimit)
	limitOK := !math.IsNaN(limit) && limit >= 0
	if !limitOK {
		p.bad("RateLimit", "%v is not a non-negative number of calls per second", limit)
	}
	if math.IsInf(limit, 1) {
		o.RateLimit = rate.Inf // the limiter's own infinity: no bucket
	}
	switch {
	case o.RateBurst < 0:
		p.bad("RateBurst", "is negative (%d)", o.RateBurst)
	case o.RateBurst > 0 && o.RateBurst < minRateBurst && o.RateLimit != rate.Inf:
		p.bad("RateBurst", "%d is below %d, the calls of an acquisition and its first renewal", o.RateBurst, minRateBurst)
	case o.RateBurst == 0:
		o.RateBurst = defaults.RateBurst
	}
	if !limitOK || o.RateLimit == rate.Inf || !durationsOK {
		return // no bucket (RateBurst is ignored), or nothing to check against
	}
	need := rate.Limit(callsPerRetryPeriod / o.RetryPeriod.Seconds())
	if o.RateLimit == 0 {
		o.RateLimit = need
	}
	// A relative tolerance keeps "exactly 2 per RetryPeriod", computed by
	// the caller in another order, from failing on rounding.
	if float64(o.RateLimit) < float64(need)*(1-1e-9) {
		p.bad("RateLimit", "%.4g calls/s is below the %.4g calls/s (2 per %s %v) a leader needs to renew", float64(o.RateLimit), float64(need), fieldRef("RetryPeriod"), o.RetryPeriod)
	}
}

// resolveDelivery defaults and checks what delivers events and logs.
func resolveDelivery(o *Options, p *problems) {
	switch {
	case o.DegradedAfter < 0:
		p.bad("DegradedAfter", "is negative (%d)", o.DegradedAfter)
	case o.DegradedAfter == 0:
		o.DegradedAfter = defaults.DegradedAfter
	}
	switch {
	case o.EventBuffer < 0:
		p.bad("EventBuffer", "is negative (%d)", o.EventBuffer)
	case o.EventBuffer > maxEventBuffer:
		p.bad("EventBuffer", "%d is more than %d events", o.EventBuffer, maxEventBuffer)
	case o.EventBuffer == 0:
		o.EventBuffer = defaults.EventBuffer
	}
	switch {
	case o.Logger == nil:
		o.Logger = slog.New(logq.DefaultWarnings{})
	case o.Logger.Handler() == nil:
		p.bad("Logger", "has no handler (a zero slog.Logger): use slog.New, or leave Logger nil")
	}
}

// build makes the config of valid Options: the default identity, the Lease
// client and lock, and the derived values.
func build(o Options, leases coordinationv1client.LeaseInterface) (*config, error) {
	c := &config{
		Options:         o,
		callTimeout:     o.RenewDeadline / 2,
		leaseSeconds:    int(o.LeaseDuration / time.Second),
		createWait:      o.LeaseDuration,
		successionStep:  o.RetryPeriod / 2,
		handOverSeconds: max(1, int((2*o.RetryPeriod+time.Second-1)/time.Second)),
	}
	if o.Lock != nil {
		c.lock, c.identity, c.describe = o.Lock, o.Lock.Identity(), o.Lock.Describe()
		c.succession = successionConfig(c)
		return c, nil
	}
	if o.Identity == "" {
		id, err := identity.Default()
		if err != nil {
			return nil, err
		}
		c.Identity = id
	}
	instance, err := identity.RandomHex()
	if err != nil {
		return nil, fmt.Errorf("relect: generating an instance name: %w", err)
	}
	c.instance = instance
	client := o.Client
	if leases != nil {
		client = nil
	} else if o.Config != nil {
		cs, err := kubernetes.NewForConfig(leaseclient.RESTConfig(o.Config))
		if err != nil {
			return nil, fmt.Errorf("relect: Options.Config: building the Lease client: %w", err)
		}
		client = cs
	}
	c.leases = leases
	if client != nil {
		c.leases = client.CoordinationV1().Leases(c.Namespace)
	}
	c.identity, c.describe = c.Identity, c.Namespace+"/"+c.Name
	c.registry = !o.DisableRegistry
	c.shards = shards.Names(o.Shards.Count, o.Shards.Names)
	c.succession = successionConfig(c)
	return c, nil
}

// successionConfig is the succession component's Config: what of c it
// reads, derived once.
func successionConfig(c *config) succession.Config {
	sc := succession.Config{
		Identity:            c.identity,
		Priority:            c.Priority,
		LeaseDuration:       c.LeaseDuration,
		Registry:            c.registry,
		Posts:               c.leases != nil,
		Cooldown:            c.Work.cooldown, // work.Options.CooldownOf
		Namespace:           c.Namespace,
		Lease:               c.Name,
		Standby:             c.Standby,
		Instance:            c.instance,
		RegistrationSeconds: int32(c.RegistrationRenewal / time.Second * registry.Lives),
	}
	if c.shards != nil {
		sc.ShardWeight, sc.ShardSet = c.Shards.Weight, wire.EncodeShardSet(c.shards, string(c.Shards.Ranges))
	}
	return sc
}

// lease returns the Lease's namespace and name: Options.Namespace and Name,
// or those in the Lock's description ("namespace/name"; name is empty if it
// has no slash).
func (c *config) lease() (namespace, name string) {
	if c.Lock == nil {
		return c.Namespace, c.Name
	}
	namespace, name, _ = strings.Cut(c.describe, "/")
	return namespace, name
}

// ShardOptions split work over the fleet (Options.Shards): S shards, fixed
// by configuration (the same on every candidate), each held by one
// candidate at a time, which runs Run for it. The election's leader assigns
// them to the live registered candidates that take part — balanced by
// Weight, and sticky: a shard moves only when its holder leaves, fails, or
// holds more than its share. The zero value turns shards off, at no cost:
// no call, no goroutine, no change to the election. ExampleOptions_shards
// is a runnable start.
//
// Shards need the candidate registry (Config or Client, and not
// DisableRegistry); a Standby candidate takes no part. Each shard's Lease
// is named after the election's and the shard (operator.ListShards gives
// each one's name), and the table is a Lease beside them: the RBAC of the
// election's Lease (leases in its namespace) covers them.
type ShardOptions struct {
	// Count numbers the shards "0" to "Count-1". Set Count or Names, not
	// both; at most 1,000. The shard table names each shard's holder and
	// taker in one annotation of 240 KiB at most: New refuses shards that,
	// with identities as long as this candidate's (as JSON writes them:
	// "<", ">", "&" take six bytes), would not fit (1,000 numbered shards
	// fit identities of up to about 110 bytes).
	Count int
	// Names names the shards: each a DNS label (RFC 1123, at most 63
	// bytes, which the shard's Lease name carries), all different; at most
	// 1,000.
	Names []string
	// Ranges, when set, makes the Count shards a split of the data: shard
	// i is the objects whose field's 64-bit FNV-1a hash is in the i-th of
	// Count equal ranges of the hash space (shardrange.Of), and the context
	// of Run and Work.Check carries it (shardrange.FromContext), for lists
	// and watches (shardrange.NewListerWatcher). shardrange.UID or
	// shardrange.Namespace; "" (the default) means plain shards. Needs
	// Count: with Names, or another value, New reports Shards.Ranges.
	// The leader gives a candidate of another Count or Ranges none of its
	// range shards, and warns of it (Stats.ShardSetsDiffer). Change them
	// by a rolling update: a range's term starts Run only once no Lease of
	// another split whose range overlaps is held — released, or unchanged
	// for its lease duration — and Shards leaves it out meanwhile
	// (docs/design.md, "Range shards").
	Ranges shardrange.Field

	// Run does the work of one shard for one term of holding it. Required.
	// It is called in a goroutine relect owns, once per term, with a
	// context that carries the shard (ShardFromContext), the term's number
	// (TermFromContext) and its fencing token (FenceFromContext) — the
	// shard's own, which only grows, as the election's does — and that is
	// cancelled when the shard may have passed to another candidate: at
	// the latest RenewDeadline after the last successful renewal of the
	// shard's Lease was sent, when the table gives the shard to someone
	// else, or when Run's context is done. The shard's Lease is released
	// (and its next holder starts) only after Run returned. A panic is
	// recovered and ends that term, as for OnStartedLeading. Calls for
	// different shards run at once. A Run that has not returned
	// HealthOptions.WorkStopTimeout after its term ended fails the
	// Elector's HealthCheck (ErrWorkOverrun, naming the shard): once the
	// shard's Lease expires another candidate takes it, released or not.
	Run func(ctx context.Context)

	// Warm, if set, readies this candidate for a shard before it holds
	// it. It is called in a goroutine relect owns, started when this
	// candidate begins to campaign for a shard — as the holder the table
	// names, or as its taker, which follows the shard's Lease to take it
	// once its holder stops — with a context that carries the shard
	// (ShardFromContext) and, for range shards, its range
	// (shardrange.FromContext), cancelled when this candidate stops
	// campaigning for the shard, and only after the shard's Run returned.
	// relect waits for Warm to return before it campaigns for that shard
	// again and before the Elector's Run returns (a Warm still running a
	// LeaseDuration after its cancel is a Warn, and fails HealthCheck past
	// WorkStopTimeout, ErrWorkOverrun); a panic is recovered and
	// logged. Calls for different shards run at once. Use it to list and
	// watch a shard's data before holding it, so that a moved shard's Run
	// starts warm: Warm builds what Run reads, by shard, and Run may start
	// before Warm built it (ExampleOptions_shards). It costs a second copy
	// of each shard's data, and a list at every change of taker: on a busy
	// control plane it can slow moves instead (docs/performance.md, "Warm
	// takers"). Nil: no call.
	Warm func(ctx context.Context)

	// Weight is this candidate's share: a candidate of weight 2 holds
	// twice the shards of one of weight 1 (to within one). Zero means 1;
	// negative is refused.
	Weight int32

	// JoinDelay is how long the leader must have seen a candidate
	// registered before it gives it shards, so that a rolling restart does
	// not move each shard onto every new pod in turn. Zero means
	// LeaseDuration. Candidates that hold shards, and every candidate
	// while no shard Lease is held at all (a first deployment, whose shard
	// Leases are still missing), are given shards at once.
	JoinDelay time.Duration

	// Work is work liveness for each shard, with Options.Work's rules and
	// defaults: a holder whose shard work is stuck releases that shard,
	// which the leader gives to another candidate. Its Check is called
	// for each shard held, with a context that ShardFromContext reads.
	// A shard whose work keeps failing — stuck, or its Run returning or
	// panicking — is paced by one rule: the k-th failure in a row passes
	// its holder over for that shard for Cooldown × 2^(k−1), at most
	// MaxCooldown (without Work: LeaseDuration × 2^(k−1), at most an
	// hour), the cooldown its release record publishes; each failure is a
	// Warn log, and Stats.ShardsFailing counts them on the leader.
	Work WorkOptions
}

// enabled reports whether o asks for shards at all: any field set, so that
// a Weight, JoinDelay or Work without Count or Names fails in New instead
// of turning shards off silently.
func (o *ShardOptions) enabled() bool {
	return o.Count != 0 || len(o.Names) > 0 || o.Ranges != "" || o.Run != nil || o.Warm != nil || o.Weight != 0 || o.JoinDelay != 0 || o.Work.enabled()
}

// resolveShards defaults and checks Options.Shards, if it is on:
// shards.CheckOptions.
func resolveShards(o *Options, durationsOK bool, p *problems) {
	s := &o.Shards
	if !s.enabled() {
		return
	}
	shards.CheckOptions(shards.Settings{
		Count: s.Count, Names: s.Names, Ranges: s.Ranges, HasRun: s.Run != nil,
		Weight: &s.Weight, JoinDelay: &s.JoinDelay, Work: (*work.Options)(&s.Work),
		LeaseDuration: o.LeaseDuration, DurationsOK: durationsOK,
		Lock: o.Lock != nil, DisableRegistry: o.DisableRegistry,
		Identity: o.Identity, DefaultIdentityLen: func() int { return identity.DefaultLen(shards.JSONLen) },
	}, p.bad)
}
