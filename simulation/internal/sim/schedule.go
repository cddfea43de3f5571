package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/relect/relect/internal/defaults"
)

// Timing is the configuration shared by every candidate of one schedule.
// Zero BackoffInitial, BackoffMax, RateLimit and RateBurst select relect's
// defaults (RetryPeriod, LeaseDuration, 2 calls per RetryPeriod, 4).
type Timing struct {
	LeaseDuration time.Duration // whole seconds, ≥ 1 s
	RenewDeadline time.Duration // 1.2·RetryPeriod < RenewDeadline < LeaseDuration
	RetryPeriod   time.Duration

	BackoffInitial time.Duration // relect only
	BackoffMax     time.Duration // relect only
	RateLimit      float64       // relect only: calls per second
	RateBurst      int           // relect only: calls
	// RegistrationRenewal is how often a relect candidate renews its
	// registration (relect only); zero selects relect's default (15 min,
	// so a run sees no renewal).
	RegistrationRenewal time.Duration
}

// Defaults applied to zero Timing fields, as relect.New applies them.
func (t Timing) withDefaults() Timing {
	if t.BackoffInitial == 0 {
		t.BackoffInitial = t.RetryPeriod
	}
	if t.BackoffMax == 0 {
		t.BackoffMax = max(t.LeaseDuration, t.BackoffInitial)
	}
	if t.RateLimit == 0 {
		t.RateLimit = DefaultRate(t.RetryPeriod)
	}
	if t.RateBurst == 0 {
		t.RateBurst = DefaultBurst
	}
	return t
}

// DefaultBurst is the token-bucket size of a schedule that draws none, and
// the client-go loop's budget: relect's least (Options.RateBurst must be at
// least 4), not its default (defaults.RateBurst, 10). With 4 relect's
// candidate registry never gets a spare token (see docs/reliability.md), so
// half of those schedules use relect's default instead (Generate).
const DefaultBurst = 4

// DefaultRate is relect's default sustained budget for a retry period rp: 2
// calls per rp, in calls per second.
func DefaultRate(rp time.Duration) float64 { return 2 / rp.Seconds() }

// Kind is what an Action does.
type Kind int

// The kinds of Action. Faults on one candidate's API handle (FailNext, Fail,
// Latency, Partition, Pause) are undone by Heal (errors, latency, partition)
// and Resume (pause); Kill and Stop are undone by Start; lease edits act on
// the Lease itself, as an operator with kubectl would; work faults (HangWork,
// FailCheck, FailDownstream) act on the leaders' work (work.go) and are
// undone by their own kinds.
const (
	// FailNext: the candidate's next Count calls fail with HTTP Code.
	FailNext Kind = iota + 1
	// Fail: all the candidate's calls fail with HTTP Code until Heal.
	Fail
	// FailVerb: the candidate's calls of Verb fail with HTTP Code until
	// Heal (RBAC that lacks one verb, say).
	FailVerb
	// Latency: every call of the candidate is delayed by Latency until Heal.
	Latency
	// Partition: the candidate's calls hang until their context ends, until
	// Heal.
	Partition
	// Heal clears the candidate's errors, latency and partition.
	Heal
	// Pause stalls the candidate's calls, even past their context's end,
	// until Resume: a process stopped between sending and reading.
	Pause
	// Resume ends a Pause.
	Resume
	// Kill cancels the candidate's Run context without releasing the lease
	// (relect: KeepLeaseOnCancel; client-go: ReleaseOnCancel false): the
	// closest in-process model of a crash. See the package doc.
	Kill
	// Stop cancels the candidate's Run context gracefully: the lease is
	// released.
	Stop
	// Start starts the candidate (at time zero, and after Kill or Stop).
	Start
	// Yield: the candidate leading when it is applied, if any, steps down
	// and releases the lease, staying a candidate (relect: Elector.Yield;
	// the client-go loop: its current LeaderElector is cancelled, which
	// releases with ReleaseOnCancel, and the loop runs a new one, as a
	// client-go user would).
	Yield
	// HandOver: the candidate leading when it is applied, if any, hands
	// the lease over to candidate Holder, or to an identity no candidate
	// has if Holder is -1 (relect: Elector.HandOver; the client-go loop
	// cannot: skipped).
	HandOver
	// SetHolder edits the Lease by hand to name candidate Holder.
	SetHolder
	// SetStranger edits the Lease by hand to name an identity no
	// candidate has.
	SetStranger
	// DeleteLease deletes the Lease by hand.
	DeleteLease
	// EmptyHolder edits the Lease's holder to "".
	EmptyHolder
	// NilDuration removes leaseDurationSeconds.
	NilDuration
	// ZeroDuration sets leaseDurationSeconds to 0.
	ZeroDuration
	// NegativeDuration sets leaseDurationSeconds to −5.
	NegativeDuration
	// HugeDuration sets leaseDurationSeconds to MaxInt32 (68 years).
	HugeDuration
	// RepairDuration is the operator undoing HugeDuration: if the Lease
	// still has an absurd duration, it is set back to LeaseDuration.
	RepairDuration
	// FutureRenew sets renewTime an hour into the future.
	FutureRenew
	// DeleteRegistration deletes candidate Target's registration by hand
	// (relect only: the client-go loop has no registry), as an operator
	// would, or a leader that judged it lapsed while Target was cut off.
	DeleteRegistration
	// StaleRegistration edits candidate Target's registration by hand to
	// a renew time a day in the past, as a candidate whose clock lags
	// would stamp it (relect only).
	StaleRegistration
	// HangWork: candidate Target's work hangs: it stops beating (it still
	// returns when its term's context ends), until UnhangWork.
	HangWork
	// UnhangWork ends a HangWork: the work beats again.
	UnhangWork
	// FailCheck: candidate Target's work check fails — at once, or, if
	// Hang, by not returning before its context ends — until HealCheck.
	FailCheck
	// HealCheck ends a FailCheck.
	HealCheck
	// FailDownstream: the work's downstream fails for everyone: every
	// candidate's work hangs and its check fails (Hang as FailCheck's),
	// until HealDownstream.
	FailDownstream
	// HealDownstream ends a FailDownstream.
	HealDownstream
)

var kindNames = map[Kind]string{
	FailNext: "fail-next", Fail: "fail", FailVerb: "fail-verb", Latency: "latency", Partition: "partition",
	Heal: "heal", Pause: "pause", Resume: "resume", Kill: "kill", Stop: "stop", Start: "start",
	Yield: "yield", HandOver: "handover",
	SetHolder: "edit-set-holder", SetStranger: "edit-stranger-holder", DeleteLease: "edit-delete",
	EmptyHolder: "edit-empty-holder", NilDuration: "edit-nil-duration", ZeroDuration: "edit-zero-duration",
	NegativeDuration: "edit-negative-duration", HugeDuration: "edit-huge-duration",
	RepairDuration: "edit-repair-duration", FutureRenew: "edit-future-renew",
	DeleteRegistration: "registry-delete", StaleRegistration: "registry-stale",
	HangWork: "work-hang", UnhangWork: "work-unhang", FailCheck: "check-fail", HealCheck: "check-heal",
	FailDownstream: "downstream-fail", HealDownstream: "downstream-heal",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// IsEdit reports whether k edits the Lease by hand (not a registration).
func (k Kind) IsEdit() bool { return k >= SetHolder && k <= FutureRenew }

// Codes are the HTTP statuses injected by FailNext, Fail and FailVerb.
var Codes = []int{500, 503, 429, 403, 409, 504}

// Verbs are the Lease verbs FailVerb fails (relecttest.VerbGet, ...).
var Verbs = []string{"get", "create", "update", "watch"}

// Action is one step of a schedule.
type Action struct {
	At     time.Duration // since the simulation began
	Kind   Kind
	Target int           // candidate index; -1 for lease edits
	Code   int           // FailNext, Fail, FailVerb
	Verb   string        // FailVerb: relecttest's verb ("get", "watch", ...)
	Count  int           // FailNext
	Delay  time.Duration // Latency
	// Holder is the candidate index SetHolder names, or the one HandOver
	// hands over to (-1: an identity no candidate has).
	Holder int
	// Start: the candidate's first start (not a restart).
	Initial bool
	// Start (initial): the candidate joins late, after the others have
	// settled, rather than within the first LeaseDuration.
	Late bool
	// Kill, Stop: the candidate leaves for good; no Start follows.
	ForGood bool
	// Start: the candidate comes back with a new identity (a process
	// that generates one at start) rather than its stable one (a pod
	// name).
	NewIdentity bool
	// Start: how this incarnation will end, known in advance because the
	// lease-keeping behaviour is fixed when the elector is built: true if
	// by Kill (keep the lease), false if by Stop or the end of the run
	// (release it).
	KeepLease bool
	// Yield, HandOver: the step-down's write fails (the leader's next call
	// answers 500), as a release can fail when the API does.
	FailWrite bool
	// FailCheck, FailDownstream: the failing check hangs until its
	// context ends (relect counts it a failure at its CheckTimeout)
	// rather than returning an error at once.
	Hang bool
	// The shard edits (shards.go): the index of the shard whose Lease,
	// or whose entry in the shard table, is edited.
	Shard int
	// LineLeaves (linegone.go): how the line leaves: Stop, Kill or
	// Partition.
	Leave Kind
}

// CoverageKey names the fault the action injects, for coverage counts
// (error codes included), or "" for actions that undo a fault.
func (a Action) CoverageKey() string {
	switch a.Kind {
	case FailNext, Fail:
		return fmt.Sprintf("%s-%d", a.Kind, a.Code)
	case FailVerb:
		return fmt.Sprintf("%s-%s", a.Kind, a.Verb)
	case Heal, Resume, RepairDuration, UnhangWork, HealCheck, HealDownstream:
		return ""
	case FailCheck, FailDownstream:
		if a.Hang {
			return a.Kind.String() + "-hangs"
		}
	case Start:
		switch {
		case a.Initial && a.Late:
			return "join"
		case a.Initial:
			return ""
		case a.NewIdentity:
			return "restart-new-identity"
		}
		return "restart-same-identity"
	case Kill, Stop:
		if a.ForGood {
			return "leave-by-" + a.Kind.String()
		}
	case LineLeaves:
		return "line-leaves-by-" + a.Leave.String()
	case Yield, HandOver:
		if a.FailWrite {
			return a.Kind.String() + "-write-fails"
		}
	}
	return a.Kind.String()
}

// The states a HandOver finds its target in, when applied (Applied.To).
const (
	TargetLive    = "live"    // running, and not standing by
	TargetDead    = "dead"    // not running (killed, stopped, left, or not started)
	TargetStandby = "standby" // running, standing by
	TargetUnknown = "unknown" // an identity no candidate has
	TargetSelf    = "self"    // the leader itself
)

// handOverTargets are the target states coverage counts separately.
var handOverTargets = []string{TargetLive, TargetDead, TargetStandby, TargetUnknown, TargetSelf}

// AllCoverageKeys lists every fault a schedule can inject: the coverage a
// run of many schedules must reach.
func AllCoverageKeys() []string {
	var keys []string
	for _, k := range []Kind{FailNext, Fail} {
		for _, c := range Codes {
			keys = append(keys, fmt.Sprintf("%s-%d", k, c))
		}
	}
	for _, v := range Verbs {
		keys = append(keys, fmt.Sprintf("%s-%s", FailVerb, v))
	}
	keys = append(keys, "latency", "partition", "pause", "kill", "stop",
		"restart-same-identity", "restart-new-identity")
	for k := SetHolder; k <= FutureRenew; k++ {
		if k != RepairDuration {
			keys = append(keys, k.String())
		}
	}
	keys = append(keys, "join", "leave-by-stop", "leave-by-kill", "yield")
	for _, to := range handOverTargets {
		keys = append(keys, "handover-to-"+to)
	}
	keys = append(keys, "yield-write-fails", "handover-write-fails", DeleteRegistration.String(), StaleRegistration.String())
	keys = append(keys, HangWork.String(), FailCheck.String(), FailCheck.String()+"-hangs",
		FailDownstream.String(), FailDownstream.String()+"-hangs")
	return keys
}

func (a Action) String() string { return fmt.Sprintf("%9s %s", fmtDur(a.At), a.describe()) }

// describe is String without the instant.
func (a Action) describe() string {
	s := a.Kind.String()
	if a.Target >= 0 {
		s += " " + CandidateName(a.Target)
	}
	switch a.Kind {
	case FailNext:
		s += fmt.Sprintf(" code=%d n=%d", a.Code, a.Count)
	case Fail:
		s += fmt.Sprintf(" code=%d", a.Code)
	case FailVerb:
		s += fmt.Sprintf(" verb=%s code=%d", a.Verb, a.Code)
	case Latency:
		s += " delay=" + fmtDur(a.Delay)
	case SetHolder:
		s += " holder=" + CandidateName(a.Holder)
	case HandOver:
		s += " to=" + handOverName(a.Holder)
	case Start:
		if a.Late {
			s += " (joins late)"
		}
		if a.NewIdentity {
			s += " new-identity"
		}
		if a.KeepLease {
			s += " (ends by kill)"
		}
	case Kill, Stop:
		if a.ForGood {
			s += " (leaves for good)"
		}
	case LineLeaves:
		s += " by " + a.Leave.String()
	}
	if a.Kind.IsShardEdit() {
		s += a.describeShardEdit()
	}
	if a.FailWrite {
		s += " (its write fails)"
	}
	if a.Hang {
		s += " (hangs)"
	}
	return s
}

// unknownIdentity is the identity a HandOver to no candidate names.
const unknownIdentity = "nobody"

// handOverName is the name of HandOver's target candidate c (-1: unknown).
func handOverName(c int) string {
	if c < 0 {
		return unknownIdentity
	}
	return CandidateName(c)
}

// CandidateName is the name of candidate i: its API handle's name and its
// stable identity.
func CandidateName(i int) string { return fmt.Sprintf("c%d", i) }

// Schedule is one simulated run: who campaigns, with what timing, and
// every fault, hand edit, kill and restart, at simulated instants. It is a
// pure function of its seed (Generate).
type Schedule struct {
	Seed       uint64
	Candidates int // 2–7 (Generate); more with Widen
	Timing     Timing
	// Priority and Standby are each candidate's relect Options.Priority
	// and Options.Standby (the client-go loop has neither: its standbys
	// only read the Lease).
	Priority []int32
	Standby  []bool
	// Work is the work liveness relect's candidates run with, and the
	// work every leader of both implementations does (zero: none beyond
	// waiting for its term to end).
	Work Work
	// Shards are the shards every relect candidate takes part in
	// (shards.go; zero: none, and the schedule is TestSimulation's).
	Shards Shards
	// Quiet is when the last fault is undone: no action is at or after
	// it. Liveness is judged from here.
	Quiet time.Duration
	// Span is when every candidate is stopped gracefully and the run ends.
	Span    time.Duration
	Actions []Action // sorted by At
}

// LivenessBound is how long after the last fault heals a leader must be
// established: LeaseDuration + 2.2·RetryPeriod + the backoff cap (zero for
// an implementation without backoff).
func LivenessBound(t Timing, backoffCap time.Duration) time.Duration {
	return t.LeaseDuration + time.Duration(2.2*float64(t.RetryPeriod)) + backoffCap
}

// SuccessionAllowance is how much later than a live first successor's
// relect's design lets a change of leader come: five succession steps of
// half a RetryPeriod each, when the successors in line ahead are dead or
// cut off (docs/design.md, "Succession": the three in line, then the
// others spread over two more steps). It is added to relect's liveness
// bound; the client-go loop has no line.
func SuccessionAllowance(t Timing) time.Duration { return 5 * t.RetryPeriod / 2 }

func (s *Schedule) String() string {
	var b strings.Builder
	t := s.Timing.withDefaults()
	fmt.Fprintf(&b, "seed=%d candidates=%d LD=%v RD=%v RP=%v backoff=%v..%v rate=%.3g/s burst=%d registration=%v quiet=%s span=%s\n",
		s.Seed, s.Candidates, t.LeaseDuration, t.RenewDeadline, t.RetryPeriod, t.BackoffInitial, t.BackoffMax,
		t.RateLimit, t.RateBurst, t.RegistrationRenewal, fmtDur(s.Quiet), fmtDur(s.Span))
	if s.Work.On() {
		fmt.Fprintf(&b, "  work: %v\n", s.Work)
	}
	if s.Shards.On() {
		fmt.Fprintf(&b, "  shards: %v\n", s.Shards)
	}
	for i := range s.Candidates {
		fmt.Fprintf(&b, "  %s priority=%d", CandidateName(i), s.Priority[i])
		if s.Standby[i] {
			b.WriteString(" standby")
		}
		b.WriteByte('\n')
	}
	for _, a := range s.Actions {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Generate returns the schedule of seed: math/rand/v2 with a PCG seeded by
// seed draws everything, so a seed always yields the same schedule.
func Generate(seed uint64) *Schedule {
	r := rand.New(rand.NewPCG(seed, 0x72656c656374)) // "relect"
	s := &Schedule{Seed: seed, Candidates: 2 + r.IntN(6)}
	s.Timing = genTiming(r)
	t := s.Timing.withDefaults()
	ld := t.LeaseDuration

	// Faults happen in [0, faultEnd); all are undone by faultEnd.
	faultEnd := scale(ld, 3+5*r.Float64())
	n := s.Candidates

	var acts []Action
	// Everyone starts within the first LeaseDuration.
	startAt := make([]time.Duration, n)
	for i := range n {
		startAt[i] = roundMs(scale(ld, r.Float64()))
		acts = append(acts, Action{At: startAt[i], Kind: Start, Target: i, Initial: true})
	}

	// Down windows (kill or stop, then start), at most one at a time per
	// candidate.
	type window struct{ from, to time.Duration }
	down := make([][]window, n)
	overlaps := func(ws []window, w window) bool {
		for _, x := range ws {
			if w.from <= x.to && x.from <= w.to {
				return true
			}
		}
		return false
	}

	episodes := 2 + r.IntN(3*n+2)
	for range episodes {
		at := roundMs(scale(faultEnd, r.Float64()))
		until := roundMs(min(at+scale(ld, 0.05+2.5*r.Float64()), faultEnd))
		c := r.IntN(n)
		switch p := r.IntN(100); {
		case p < 12:
			acts = append(acts,
				Action{At: at, Kind: FailNext, Target: c, Code: Codes[r.IntN(len(Codes))], Count: 1 + r.IntN(10)},
				Action{At: until, Kind: Heal, Target: c})
		case p < 21:
			acts = append(acts,
				Action{At: at, Kind: Fail, Target: c, Code: Codes[r.IntN(len(Codes))]},
				Action{At: until, Kind: Heal, Target: c})
		case p < 24:
			acts = append(acts,
				Action{At: at, Kind: FailVerb, Target: c, Verb: Verbs[r.IntN(len(Verbs))], Code: Codes[r.IntN(len(Codes))]},
				Action{At: until, Kind: Heal, Target: c})
		case p < 33:
			d := roundMs(scale(t.RetryPeriod, 0.05) + scale(2*t.RenewDeadline, r.Float64()))
			acts = append(acts,
				Action{At: at, Kind: Latency, Target: c, Delay: d},
				Action{At: until, Kind: Heal, Target: c})
		case p < 42:
			acts = append(acts,
				Action{At: at, Kind: Partition, Target: c},
				Action{At: until, Kind: Heal, Target: c})
		case p < 51:
			acts = append(acts,
				Action{At: at, Kind: Pause, Target: c},
				Action{At: until, Kind: Resume, Target: c})
		case p < 65:
			w := window{at, until}
			if at <= startAt[c] || overlaps(down[c], w) {
				continue
			}
			down[c] = append(down[c], w)
			kind := Stop
			if r.IntN(2) == 0 {
				kind = Kill
			}
			acts = append(acts,
				Action{At: at, Kind: kind, Target: c},
				Action{At: until, Kind: Start, Target: c, NewIdentity: kind == Kill && r.IntN(3) == 0})
		default:
			kinds := []Kind{SetHolder, SetStranger, DeleteLease, EmptyHolder, NilDuration,
				ZeroDuration, NegativeDuration, HugeDuration, FutureRenew}
			k := kinds[r.IntN(len(kinds))]
			a := Action{At: at, Kind: k, Target: -1}
			if k == SetHolder {
				a.Holder = r.IntN(n)
			}
			acts = append(acts, a)
			if k == HugeDuration {
				acts = append(acts, Action{At: until, Kind: RepairDuration, Target: -1})
			}
		}
	}
	// Succession draws from a stream of its own, so that the actions
	// above are those of the seed before succession was simulated.
	acts = addSuccession(rand.New(rand.NewPCG(seed, 0x73756363657373)), s, acts, faultEnd) // "success"
	// The faults that found the registry's and the step-down's bugs
	// (issue 18) draw from a third stream, so that the actions above stay
	// those of the schedules before them.
	acts = addRegistryFaults(rand.New(rand.NewPCG(seed, 0x7265676973747279)), s, acts, faultEnd) // "registry"
	// Work liveness and its faults (issue 20) draw from a fourth stream:
	// the schedules without it are those of before.
	acts = addWork(rand.New(rand.NewPCG(seed, 0x776f726b)), s, acts, faultEnd) // "work"
	slices.SortStableFunc(acts, func(a, b Action) int { return cmp.Compare(a.At, b.At) })

	// Each start knows how its incarnation ends.
	for i := range acts {
		if acts[i].Kind != Start {
			continue
		}
		for _, b := range acts[i+1:] {
			if b.Target == acts[i].Target && (b.Kind == Kill || b.Kind == Stop) {
				acts[i].KeepLease = b.Kind == Kill
				break
			}
		}
	}

	s.Actions = acts
	for _, a := range acts {
		s.Quiet = max(s.Quiet, a.At)
	}
	// Long enough to judge liveness (the bound) and to see the leadership
	// it established hold for a LeaseDuration.
	s.Span = s.Quiet + LivenessBound(t, t.BackoffMax) + SuccessionAllowance(t) + ld
	return s
}

// addSuccession draws what the succession API adds to a schedule whose
// other actions are acts: each candidate's priority (−1…3) and whether it
// stands by (one in five); a registration renewal period (half of the
// schedules: LD to 6 LD, so that a dead candidate's registration lapses
// within the run); relect's default token bucket (10) for half of the
// schedules that draw none; candidates that join late (one in four: at a
// random instant of the fault phase, dropping their kills and stops before
// it) or leave for good (one in four: stopped or killed after their last
// restart); and 0 to N+1 Yields and HandOvers at random instants of the
// fault phase, a HandOver to a random candidate or to an unknown
// identity. One candidate, the anchor, neither stands by, joins late nor
// leaves: someone can always lead at the end.
func addSuccession(r *rand.Rand, s *Schedule, acts []Action, faultEnd time.Duration) []Action {
	n := s.Candidates
	ld := s.Timing.LeaseDuration
	anchor := r.IntN(n)
	s.Priority, s.Standby = make([]int32, n), make([]bool, n)
	for i := range n {
		s.Priority[i] = int32(r.IntN(5) - 1)
		s.Standby[i] = i != anchor && r.IntN(5) == 0
	}
	if r.IntN(2) == 0 {
		s.Timing.RegistrationRenewal = roundMs(scale(ld, 1+5*r.Float64()))
	}
	if s.Timing.RateBurst == 0 && r.IntN(2) == 0 {
		s.Timing.RateBurst = defaults.RateBurst
	}
	for i := range n {
		if i == anchor {
			continue
		}
		if r.IntN(4) == 0 && faultEnd > ld {
			acts = joinLate(acts, i, roundMs(ld+scale(faultEnd-ld, r.Float64())))
		}
		if r.IntN(4) == 0 {
			acts = leave(r, acts, i, faultEnd)
		}
	}
	for range r.IntN(n + 2) {
		a := Action{At: roundMs(scale(faultEnd, r.Float64())), Kind: Yield, Target: -1}
		if r.IntN(5) >= 2 {
			a.Kind, a.Holder = HandOver, r.IntN(n+1)
			if a.Holder == n {
				a.Holder = -1
			}
		}
		acts = append(acts, a)
	}
	return acts
}

// addRegistryFaults draws, from its own stream: for one schedule in three,
// one or two hand edits of a candidate's registration during the fault
// phase (deleted, or stamped with a lagging clock's renew time); and for
// one Yield or HandOver in three, a write that fails.
func addRegistryFaults(r *rand.Rand, s *Schedule, acts []Action, faultEnd time.Duration) []Action {
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(2) {
			k := DeleteRegistration
			if r.IntN(2) == 0 {
				k = StaleRegistration
			}
			acts = append(acts, Action{At: roundMs(scale(faultEnd, r.Float64())), Kind: k, Target: r.IntN(s.Candidates)})
		}
	}
	for i := range acts {
		if (acts[i].Kind == Yield || acts[i].Kind == HandOver) && r.IntN(3) == 0 {
			acts[i].FailWrite = true
		}
	}
	return acts
}

// joinLate moves candidate c's first start to at, and drops the kills and
// stops of c (with their restarts) that came before it.
func joinLate(acts []Action, c int, at time.Duration) []Action {
	var kept []Action
	for _, a := range acts {
		switch {
		case a.Target != c:
		case a.Kind == Start && a.Initial:
			a.At, a.Late = at, true
		case (a.Kind == Kill || a.Kind == Stop || a.Kind == Start) && a.At <= at:
			continue // a down window before the join; windows are disjoint
		}
		kept = append(kept, a)
	}
	// A window that began before the join and ended after it: its kill
	// or stop was dropped, so drop its restart too.
	up := false
	out := kept[:0]
	for _, a := range sortedByAt(kept) {
		if a.Target == c {
			switch a.Kind {
			case Start:
				if up {
					continue
				}
				up = true
			case Kill, Stop:
				up = false
			}
		}
		out = append(out, a)
	}
	return out
}

// leave makes candidate c leave for good, by a stop or a kill, at a random
// instant between its last start and faultEnd, if there is room.
func leave(r *rand.Rand, acts []Action, c int, faultEnd time.Duration) []Action {
	lastUp := time.Duration(-1)
	for _, a := range acts {
		if a.Target == c && a.Kind == Start {
			lastUp = max(lastUp, a.At)
		}
	}
	kind := Stop
	if r.IntN(2) == 0 {
		kind = Kill
	}
	at := roundMs(lastUp + scale(faultEnd-lastUp, r.Float64()))
	if lastUp < 0 || at <= lastUp || at >= faultEnd {
		return acts
	}
	return append(acts, Action{At: at, Kind: kind, Target: c, ForGood: true})
}

func sortedByAt(acts []Action) []Action {
	out := slices.Clone(acts)
	slices.SortStableFunc(out, func(a, b Action) int { return cmp.Compare(a.At, b.At) })
	return out
}

// genTiming draws durations that relect.New accepts: LeaseDuration whole
// seconds ≥ 1 s, RetryPeriod a fraction of it, RenewDeadline strictly
// between 1.2·RetryPeriod and LeaseDuration, all in whole milliseconds,
// redrawn until relect.New accepts them (it may add rules of its own). One
// schedule in 16 uses Kubernetes' defaults (15 s, 10 s, 2 s). Backoff and
// budget are relect's defaults half of the time, else drawn.
func genTiming(r *rand.Rand) Timing {
	for range 1000 {
		if t := drawTiming(r); ValidTiming(t) == nil {
			return t
		}
	}
	panic("sim: no timing relect.New accepts in 1000 draws")
}

func drawTiming(r *rand.Rand) Timing {
	var t Timing
	if r.IntN(16) == 0 {
		t.LeaseDuration, t.RenewDeadline, t.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	} else {
		t.LeaseDuration = time.Duration(1+r.IntN(8)) * time.Second
		ldMs := t.LeaseDuration.Milliseconds()
		// RetryPeriod in [0.12, 0.8]·LD, so that 1.2·RP < LD with room
		// for RD.
		rpMs := int64(math.Round(float64(ldMs) * (0.12 + 0.68*r.Float64())))
		rdLo := rpMs*12/10 + 1 // > 1.2·RP
		rdHi := ldMs - 1       // < LD
		rdMs := rdLo + r.Int64N(rdHi-rdLo+1)
		t.RetryPeriod = time.Duration(rpMs) * time.Millisecond
		t.RenewDeadline = time.Duration(rdMs) * time.Millisecond
	}
	if r.IntN(2) == 0 {
		t.BackoffInitial = roundMs(scale(t.RetryPeriod, 0.25+1.75*r.Float64()))
		t.BackoffMax = roundMs(t.BackoffInitial + scale(2*t.LeaseDuration, r.Float64()))
	}
	if r.IntN(4) == 0 {
		t.RateLimit = DefaultRate(t.RetryPeriod) * (1 + 2*r.Float64())
		t.RateBurst = 3 + r.IntN(6)
	}
	return t
}

func scale(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

func roundMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// fmtDur formats an offset with millisecond precision, as "12.345s".
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// Revoking reports whether k is a hand edit that, by the Lease API's own
// rules, frees a held lease at once: a deleted Lease, an empty holder, or a
// lease duration that is missing, zero or negative. Any candidate that
// reads the Lease next may take it, while the holder learns of the edit
// only at its next renewal.
func (k Kind) Revoking() bool {
	switch k {
	case DeleteLease, EmptyHolder, NilDuration, ZeroDuration, NegativeDuration:
		return true
	}
	return false
}

// Filter returns a copy of s with only the actions keep accepts; a Kill or
// Stop and the Start that ends it are kept or dropped together, and so are
// a HugeDuration and its repair, and a work fault and what undoes it. Quiet
// is recomputed; Span is kept.
func (s *Schedule) Filter(keep func(Action) bool) *Schedule {
	out := *s
	out.Actions = nil
	drop := make([]bool, len(s.Actions))
	for i, a := range s.Actions {
		if keep(a) {
			continue
		}
		drop[i] = true
		if j := s.partner(i); j >= 0 {
			drop[j] = true
		}
	}
	out.Quiet = 0
	for i, a := range s.Actions {
		if drop[i] {
			continue
		}
		out.Actions = append(out.Actions, a)
		out.Quiet = max(out.Quiet, a.At)
	}
	return &out
}

// partner returns the index of the action that undoes or is undone by
// action i when one cannot run without the other (a Kill or Stop and the
// following Start; a HugeDuration and the following repair; a work fault
// and what undoes it), or −1.
func (s *Schedule) partner(i int) int {
	a := s.Actions[i]
	find := func(from, step int, match func(Action) bool) int {
		for j := from; j >= 0 && j < len(s.Actions); j += step {
			if match(s.Actions[j]) {
				return j
			}
		}
		return -1
	}
	switch {
	case a.Kind == Kill || a.Kind == Stop:
		return find(i+1, 1, func(b Action) bool { return b.Target == a.Target && b.Kind == Start })
	case a.Kind == Start && !a.Initial:
		return find(i-1, -1, func(b Action) bool { return b.Target == a.Target && (b.Kind == Kill || b.Kind == Stop) })
	case a.Kind == HugeDuration:
		return find(i+1, 1, func(b Action) bool { return b.Kind == RepairDuration })
	case a.Kind == RepairDuration:
		return find(i-1, -1, func(b Action) bool { return b.Kind == HugeDuration })
	}
	if undo, ok := workUndo[a.Kind]; ok {
		return find(i+1, 1, func(b Action) bool { return b.Target == a.Target && b.Kind == undo })
	}
	for fault, undo := range workUndo {
		if a.Kind == undo {
			return find(i-1, -1, func(b Action) bool { return b.Target == a.Target && b.Kind == fault })
		}
	}
	return -1
}

// Widen returns a copy of s with extra more candidates, numbered after s's,
// that start within the first LeaseDuration with priority 0 and that no
// action targets: a fleet large enough for relect to post its line
// (docs/design.md, "Only the line watches") around the faults that s plays
// on its own candidates.
func Widen(s *Schedule, extra int) *Schedule {
	w := *s
	w.Priority = append(slices.Clone(s.Priority), make([]int32, extra)...)
	w.Standby = append(slices.Clone(s.Standby), make([]bool, extra)...)
	w.Actions = slices.Clone(s.Actions)
	ld := s.Timing.withDefaults().LeaseDuration
	for i := range extra {
		w.Actions = append(w.Actions, Action{At: roundMs(scale(ld, float64(i)/float64(extra))), Kind: Start,
			Target: s.Candidates + i, Initial: true})
	}
	w.Candidates += extra
	slices.SortStableFunc(w.Actions, func(a, b Action) int { return cmp.Compare(a.At, b.At) })
	return &w
}
