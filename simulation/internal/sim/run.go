package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/relect/relect/internal/bench"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	leasewire "github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The Lease every candidate campaigns for.
const (
	Namespace = "default"
	LeaseName = "sim"
)

// strangerIdentity is the holder SetStranger writes: no candidate's.
const strangerIdentity = "intruder"

// RoundTrip is the least time every Lease call takes (a LAN round trip).
// Without it, a client that retries without pausing would spin forever in
// zero simulated time: client-go's release does, recursively, on a
// persistent 409 Conflict, until the process runs out of stack.
const RoundTrip = time.Millisecond

// Impl is an implementation a schedule is played against: Relect or
// ClientGoLoop, defined once for the simulation and the benchmark.
type Impl = bench.Impl

// The implementations, and Impls in report order (internal/bench).
const (
	Relect       = bench.Relect
	ClientGoLoop = bench.ClientGoLoop
)

var Impls = bench.Impls

// process is one running incarnation of a candidate.
type process interface {
	// run campaigns until ctx is done and everything it started that can
	// touch the API has returned.
	run(ctx context.Context)
	// isLeader is what the implementation's user would consult.
	isLeader() bool
	// stepDown ends the current term: a yield (to empty) or a handover
	// to identity to, as the implementation's user would ask for it. It
	// returns errUnsupported if the implementation cannot.
	stepDown(ctx context.Context, to string) error
	// knowsStandby reports whether this process, leading, knows identity
	// as a candidate that stands by.
	knowsStandby(identity string) bool
}

// errUnsupported is a step-down an implementation cannot make.
var errUnsupported = errors.New("sim: not supported by this implementation")

// Play plays s against impl and returns what happened. It must be called
// inside a testing/synctest bubble, so that time is
// simulated: a schedule spanning minutes runs in milliseconds. It returns
// once every goroutine it started has returned.
//
// IsLeader is sampled, for every candidate, at the end of every simulated
// instant at which anything observable happened: a Lease call returned, an
// event or callback fired, an action was applied. After each such instant a
// sampler sleeps one simulated nanosecond, which under synctest returns
// only once every goroutine of the bubble is blocked, that is once that
// instant has settled. A candidate's IsLeader can become true only as the
// result of one of those happenings, so no overlap of positive length is
// missed; one that begins and ends within one instant is.
func Play(s *Schedule, impl Impl) *History {
	r := newRunner(s, impl)
	return r.play()
}

type runner struct {
	s    *Schedule
	t    Timing
	impl Impl
	api  *relecttest.LeaseAPI
	t0   time.Time
	kick chan struct{}

	watches sync.WaitGroup // goroutines waiting for watches to close
	// steps are the Yield and HandOver calls in flight; stepCtx ends them
	// at the end of the run.
	steps     sync.WaitGroup
	stepCtx   context.Context
	stopSteps context.CancelFunc
	mu        sync.Mutex // guards h, changeRVs, handRVs and the slots' run fields
	h         *History
	changeRVs []string        // the resourceVersion of each of h.Changes
	handRVs   map[string]bool // resourceVersions written by hand
	electors  int
	slots     []*slot
	// downstream: the work faults that hit everyone (FailDownstream).
	downstream workFaults
	// stores are the stores the leaders write to (store.go); writers
	// are the terms' goroutines that write to them, deliveries the
	// writes on their way (wire.go).
	stores     map[Store]*register
	writers    sync.WaitGroup
	deliveries sync.WaitGroup
	// shards are the schedule's shards (shardrun.go); nil without.
	shards *shardState
	// lineCut are the candidates the last LineLeaves partitioned, until
	// LineHeal (linegone.go); used by the goroutine that applies actions.
	lineCut []int
	// logs are what the candidates' relect logged (logs.go).
	logs runLogs
}

type slot struct {
	r      *runner
	idx    int
	client *relecttest.Client
	cs     kubernetes.Interface
	cmds   chan command
	done   chan struct{} // closed when the supervisor returns
	proc   atomic.Pointer[processBox]
	faults workFaults // its own work faults (HangWork, FailCheck)
	wire   *wire      // its network to the stores

	// Guarded by runner.mu.
	identity string
	gen      int // identities issued
	runID    int // current or last run, -1 before the first
	elector  int // its budget scope
	reuse    any // implementation state kept across a graceful stop
}

type processBox struct{ p process }

type command struct {
	start *Action // start an incarnation (wait for the previous to return)
	stop  bool    // cancel the current incarnation
	quit  bool    // wait for the current incarnation, then return
}

func newRunner(s *Schedule, impl Impl) *runner {
	t := s.Timing.withDefaults()
	h := &History{Impl: impl.String(), Candidates: s.Candidates, Timing: t, Quiet: s.Quiet, Standby: standbys(s),
		Work: s.Work.withDefaults()}
	h.Budget.Rate, h.Budget.Burst = t.RateLimit, t.RateBurst
	if impl == Relect {
		h.BackoffCap = t.BackoffMax
	} else {
		// The hand-written loop re-creates the elector at once; its
		// budget is relect's default for the same RetryPeriod.
		h.Budget.Rate, h.Budget.Burst = DefaultRate(t.RetryPeriod), DefaultBurst
	}
	r := &runner{s: s, t: t, impl: impl, api: relecttest.NewLeaseAPI(), t0: time.Now(),
		kick: make(chan struct{}, 1), h: h, handRVs: map[string]bool{}, stores: map[Store]*register{}}
	r.stepCtx, r.stopSteps = context.WithCancel(context.Background())
	for _, st := range storesOf(impl) {
		r.stores[st] = &register{store: st}
	}
	for i := range s.Candidates {
		c := r.api.Client(CandidateName(i))
		c.SetLatency(RoundTrip)
		r.slots = append(r.slots, &slot{r: r, idx: i, client: c, cs: c.Clientset(), wire: newWire(r, i),
			cmds: make(chan command, 64), done: make(chan struct{}), identity: CandidateName(i), runID: -1})
	}
	if s.Shards.On() {
		r.shards = newShardState(r) // the client-go loop plays them as the baseline (shardbaseline.go)
	}
	return r
}

// now is the simulated time since the run began.
func (r *runner) now() time.Duration { return time.Since(r.t0) }

// poke asks the sampler to sample at the end of this instant.
func (r *runner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *runner) play() *History {
	stopObs := r.api.Observe(r.observeCall)
	stopLease := r.watchLease()
	stopShards := r.shards.watch()
	for _, sl := range r.slots {
		go sl.supervise()
	}
	sampled := make(chan struct{})
	quit := make(chan struct{})
	go r.sample(quit, sampled)

	for _, a := range r.s.Actions {
		time.Sleep(a.At - r.now())
		r.apply(a)
		r.poke()
	}
	time.Sleep(r.s.Span - r.now())

	r.mu.Lock()
	r.h.End = r.now()
	r.mu.Unlock()
	r.stopSteps()
	// Let stalled calls finish, then stop everyone gracefully.
	for _, sl := range r.slots {
		sl.client.Resume()
		sl.client.Heal()
		sl.client.SetLatency(RoundTrip)
		sl.wire.resume()
		sl.wire.heal()
		sl.cmds <- command{stop: true}
		sl.cmds <- command{quit: true}
	}
	r.shards.healAll()
	for _, sl := range r.slots {
		<-sl.done
	}
	r.steps.Wait()
	// The last writes: answered or timed out, then delivered or lost.
	r.writers.Wait()
	r.deliveries.Wait()
	r.readStores()
	close(quit)
	<-sampled
	stopLease()
	stopShards()
	stopObs()
	r.watches.Wait()

	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.h.Runs {
		if r.h.Runs[i].Cancelled < 0 {
			r.h.Runs[i].Cancelled = r.h.End
		}
	}
	for i, rv := range r.changeRVs {
		r.h.Changes[i].ByHand = r.handRVs[rv] || r.h.Changes[i].Deleted // no candidate deletes the Lease
	}
	r.shards.finish()
	r.h.Logs = r.logs.take()
	return r.h
}

// standbys is which candidates of s stand by.
func standbys(s *Schedule) []bool {
	if s.Standby == nil {
		return make([]bool, s.Candidates)
	}
	return slices.Clone(s.Standby)
}

// sample records IsLeader transitions; see Run.
func (r *runner) sample(quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	type state struct {
		on   bool
		run  int
		from time.Duration
	}
	st := make([]state, len(r.slots))
	take := func() {
		now := r.now()
		for i, sl := range r.slots {
			on := false
			if b := sl.proc.Load(); b != nil {
				on = b.p.isLeader()
			}
			if on == st[i].on {
				continue
			}
			r.mu.Lock()
			if on {
				st[i] = state{true, sl.runID, now}
			} else {
				r.h.Leading = append(r.h.Leading, Span{Candidate: i, Run: st[i].run, From: st[i].from, To: now})
				st[i].on = false
			}
			r.mu.Unlock()
		}
		r.shards.sample(now, false)
	}
	for {
		select {
		case <-r.kick:
			time.Sleep(time.Nanosecond) // until this instant has settled
			take()
		case <-quit:
			take()
			now := r.now()
			r.shards.sample(now, true)
			r.mu.Lock()
			for i := range st {
				if st[i].on {
					r.h.Leading = append(r.h.Leading, Span{Candidate: i, Run: st[i].run, From: st[i].from, To: now})
				}
			}
			r.mu.Unlock()
			return
		}
	}
}

// observerHandle is the API handle of the runner's own watch.
const observerHandle = "lease-observer"

// watchLease records every change of the Lease until the returned function
// is called.
func (r *runner) watchLease() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := r.api.Client(observerHandle).Clientset().CoordinationV1().Leases(Namespace).Watch(ctx,
		metav1.ListOptions{FieldSelector: "metadata.name=" + LeaseName})
	if err != nil {
		panic("sim: watching the Lease: " + err.Error())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			c := Change{At: r.now(), Deleted: ev.Type == watch.Deleted, Duration: "nil"}
			if l.Spec.HolderIdentity != nil {
				c.Holder = *l.Spec.HolderIdentity
			}
			if l.Spec.LeaseTransitions != nil {
				c.Transitions = *l.Spec.LeaseTransitions
			}
			if d := l.Spec.LeaseDurationSeconds; d != nil {
				c.Duration = strconv.Itoa(int(*d))
			}
			raw, _ := json.Marshal(resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec))
			c.Visible = string(raw)
			successionOf(l, &c)
			r.mu.Lock()
			r.h.Changes = append(r.h.Changes, c)
			r.changeRVs = append(r.changeRVs, l.ResourceVersion)
			r.mu.Unlock()
		}
	}()
	return func() {
		w.Stop()
		cancel()
		<-done
	}
}

// observeCall records a Lease call (relecttest's observer hook).
func (r *runner) observeCall(c relecttest.Call) {
	if c.Client == observerHandle || r.shards.observe(c) {
		return
	}
	idx, err := strconv.Atoi(c.Client[1:])
	if err != nil || idx < 0 || idx >= len(r.slots) {
		panic("sim: call from unknown handle " + c.Client)
	}
	call := Call{Candidate: idx, Run: -1, Elector: -1, Verb: c.Verb, Name: c.Name,
		Start: c.Start.Sub(r.t0), End: c.End.Sub(r.t0), Line: c.Name == leasewire.LineName(LeaseName)}
	call.Registry = c.Name != LeaseName && !call.Line
	if c.Err != nil {
		call.Err = errString(c.Err)
	}
	r.mu.Lock()
	if sl := r.slots[idx]; sl.runID >= 0 {
		call.Run, call.Elector = sl.runID, sl.elector
	}
	i := len(r.h.Calls)
	r.h.Calls = append(r.h.Calls, call)
	r.mu.Unlock()
	if c.Closed != nil {
		// A watch is in flight until it closes.
		r.watches.Go(func() {
			<-c.Closed
			r.mu.Lock()
			r.h.Calls[i].End = r.now()
			r.mu.Unlock()
		})
	}
	r.poke()
}

// errString shortens an API error to its reason.
func errString(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func (r *runner) event(sl *slot, runID int, kind EventKind, term int64, detail string) {
	r.mu.Lock()
	r.h.Events = append(r.h.Events, Event{Candidate: sl.idx, Run: runID, At: r.now(), Kind: kind, Term: term, Detail: detail})
	r.mu.Unlock()
	r.poke()
}

// termStarted records a term context that became alive, and returns its
// index in History.Terms and the function that records its cancellation.
func (r *runner) termStarted(sl *slot, runID int, number int64) (term int, cancelled func()) {
	r.mu.Lock()
	i := len(r.h.Terms)
	r.h.Terms = append(r.h.Terms, Term{Candidate: sl.idx, Run: runID, Number: number, Start: r.now(), Cancelled: -1})
	r.mu.Unlock()
	r.poke()
	return i, func() {
		r.mu.Lock()
		r.h.Terms[i].Cancelled = r.now()
		r.mu.Unlock()
		r.poke()
	}
}

// apply applies one action of the schedule.
func (r *runner) apply(a Action) {
	applied := Applied{Action: a, At: r.now(), Run: -1}
	var step func(i int) // a step-down to start once applied is recorded as r.h.Actions[i]
	defer func() {
		r.mu.Lock()
		i := len(r.h.Actions)
		r.h.Actions = append(r.h.Actions, applied)
		r.mu.Unlock()
		if step != nil {
			step(i)
		}
	}()
	var sl *slot
	if a.Target >= 0 {
		sl = r.slots[a.Target]
	}
	r.shards.mirror(a) // before a Kill cancels the process
	// edit edits the Lease by hand, and remembers the resourceVersion it
	// wrote so that the change it makes is known as a hand edit.
	edit := func(f func(*coordinationv1.Lease)) {
		var edited *coordinationv1.Lease
		if err := r.api.Edit(Namespace, LeaseName, func(l *coordinationv1.Lease) { f(l); edited = l }); err != nil {
			applied.Skipped = "no Lease"
			return
		}
		r.mu.Lock()
		r.handRVs[edited.ResourceVersion] = true // the API stamped it on the object it stored
		r.mu.Unlock()
	}
	switch a.Kind {
	case FailNext:
		sl.client.FailNext(a.Count, relecttest.Error(a.Code))
	case Fail:
		sl.client.Fail(relecttest.Error(a.Code))
	case FailVerb:
		sl.client.FailVerb(a.Verb, relecttest.Error(a.Code))
	case Latency:
		sl.client.SetLatency(max(a.Delay, RoundTrip))
		sl.wire.setLatency(a.Delay)
	case Partition:
		sl.client.Partition()
		sl.wire.partition()
	case Heal:
		sl.client.Heal()
		sl.client.SetLatency(RoundTrip)
		sl.wire.heal()
	case Pause:
		sl.client.Pause()
		sl.wire.pause()
	case Resume:
		sl.client.Resume()
		sl.wire.resume()
	case Kill, Stop:
		sl.cmds <- command{stop: true}
	case Start:
		sl.cmds <- command{start: &a}
	case Yield, HandOver:
		step = r.stepDown(&applied)
	case SetHolder, SetStranger:
		holder := strangerIdentity
		if a.Kind == SetHolder {
			r.mu.Lock()
			holder = r.slots[a.Holder].identity
			r.mu.Unlock()
		}
		edit(func(l *coordinationv1.Lease) { // as relecttest.LeaseAPI.SetHolder
			l.Spec.HolderIdentity = &holder
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		})
	case DeleteLease:
		if err := r.api.Delete(Namespace, LeaseName); err != nil {
			applied.Skipped = "no Lease"
		} else {
			r.mu.Lock()
			r.h.Resets = append(r.h.Resets, r.now())
			r.mu.Unlock()
		}
	case EmptyHolder:
		edit(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
	case NilDuration:
		edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = nil })
	case ZeroDuration:
		edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(0)) })
	case NegativeDuration:
		edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(-5)) })
	case HugeDuration:
		edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(math.MaxInt32)) })
	case RepairDuration:
		l := r.api.Lease(Namespace, LeaseName)
		if l == nil || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds < math.MaxInt32 {
			applied.Skipped = "nothing to repair"
			return
		}
		secs := int32(r.t.LeaseDuration / time.Second)
		edit(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = &secs })
	case FutureRenew:
		edit(func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Hour)}
		})
	case DeleteRegistration, StaleRegistration:
		applied.Registration, applied.Skipped = r.editRegistration(a)
	case HangWork, UnhangWork, FailCheck, HealCheck, FailDownstream, HealDownstream:
		r.applyWork(a)
	case LineLeaves:
		r.lineLeaves(&applied)
	case LineHeal:
		r.lineHeal(&applied)
	case ShardSetHolder, ShardStranger, ShardDelete, ShardEmptyHolder, ShardZeroDuration,
		TableDelete, TableGarbage, TableGive, TableClear:
		applied.Skipped = r.shards.edit(a)
	default:
		panic(fmt.Sprintf("sim: unknown action %v", a.Kind))
	}
}

// editRegistration deletes candidate a.Target's registration, or stamps it
// with a renew time a day in the past (a.Kind), and returns its name, or
// why it was skipped: the client-go loop has none, or the candidate has not
// registered (yet).
func (r *runner) editRegistration(a Action) (name, skipped string) {
	if r.impl != Relect {
		return "", "no registry"
	}
	r.mu.Lock()
	identity := r.slots[a.Target].identity
	r.mu.Unlock()
	for _, l := range r.api.Leases(Namespace) {
		if l.Name != LeaseName && l.Name != leasewire.LineName(LeaseName) && (r.shards == nil || !r.shards.isShard(l.Name)) &&
			l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
			name = l.Name
		}
	}
	if name == "" {
		return "", "not registered"
	}
	var err error
	if a.Kind == DeleteRegistration {
		err = r.api.Delete(Namespace, name)
	} else {
		err = r.api.Edit(Namespace, name, func(l *coordinationv1.Lease) {
			past := metav1.NewMicroTime(time.Now().Add(-24 * time.Hour))
			l.Spec.RenewTime, l.Spec.AcquireTime = &past, &past
		})
	}
	if err != nil {
		return name, "gone meanwhile"
	}
	return name, ""
}

// stepDown prepares a Yield or HandOver (a): it finds the leader and the
// target, fills them in, and returns the function that asks the leader to
// step down once a is recorded, or nil if it is skipped. The call runs in
// a goroutine of the runner's (it blocks until the release is written) and
// records its result when it returns.
func (r *runner) stepDown(a *Applied) func(i int) {
	leader := -1
	for i, sl := range r.slots {
		if b := sl.proc.Load(); b != nil && b.p.isLeader() {
			leader = i
			break
		}
	}
	if leader < 0 {
		a.Skipped = "no leader"
		return nil
	}
	if a.Kind == HandOver && r.impl == ClientGoLoop {
		a.Skipped = "client-go cannot hand over"
		return nil
	}
	p := r.slots[leader].proc.Load().p
	r.mu.Lock()
	a.Run = r.slots[leader].runID
	if a.Kind == HandOver {
		a.To, a.ToState = r.targetLocked(a.Holder, leader)
	}
	r.mu.Unlock()
	to := a.To
	if to != "" {
		a.StandbyKnown = p.knowsStandby(to)
	}
	client := r.slots[leader].client
	return func(i int) {
		r.steps.Go(func() {
			if a.FailWrite {
				client.FailNext(1, relecttest.Error(500)) // the release or handover record
			}
			res := "ok"
			if err := p.stepDown(r.stepCtx, to); err != nil {
				res = errString(err)
			}
			r.mu.Lock()
			r.h.Actions[i].Result = res
			r.mu.Unlock()
			r.poke()
		})
	}
}

// targetLocked returns the identity a HandOver to candidate c (-1: none)
// names, and the state the target is in. Requires mu.
func (r *runner) targetLocked(c, leader int) (identity, state string) {
	switch {
	case c < 0:
		return unknownIdentity, TargetUnknown
	case c == leader:
		return r.slots[c].identity, TargetSelf
	}
	sl := r.slots[c]
	running := sl.runID >= 0 && r.h.Runs[sl.runID].Cancelled < 0
	switch {
	case !running:
		return sl.identity, TargetDead
	case r.h.Standby[c]:
		return sl.identity, TargetStandby
	}
	return sl.identity, TargetLive
}

// supervise runs the slot's incarnations one after the other, as commands
// say: a start waits for the previous incarnation to have returned (a
// paused one returns only once resumed).
func (sl *slot) supervise() {
	defer close(sl.done)
	r := sl.r
	var cancel context.CancelFunc
	var running chan struct{}
	wait := func() {
		if running != nil {
			<-running
			running = nil
		}
	}
	for cmd := range sl.cmds {
		switch {
		case cmd.start != nil:
			wait()
			a := cmd.start
			r.mu.Lock()
			if a.NewIdentity {
				sl.gen++
				sl.identity = fmt.Sprintf("%s-%d", CandidateName(sl.idx), sl.gen)
			}
			var prev *Run
			if sl.runID >= 0 {
				prev = &r.h.Runs[sl.runID]
			}
			runID := len(r.h.Runs)
			p, elector := r.newProcess(sl, runID, prev, a)
			r.h.Runs = append(r.h.Runs, Run{Candidate: sl.idx, ID: runID, Elector: elector, Identity: sl.identity,
				Start: r.now(), Cancelled: -1, Returned: -1, KeepLease: a.KeepLease})
			sl.runID, sl.elector = runID, elector
			r.mu.Unlock()

			ctx, stop := context.WithCancel(context.Background())
			cancel = stop
			running = make(chan struct{})
			sl.proc.Store(&processBox{p})
			go func(done chan struct{}) {
				defer close(done)
				p.run(ctx)
				r.mu.Lock()
				r.h.Runs[runID].Returned = r.now()
				r.mu.Unlock()
				r.poke()
			}(running)
			r.poke()
		case cmd.stop:
			if cancel != nil {
				r.mu.Lock()
				if sl.runID >= 0 && r.h.Runs[sl.runID].Cancelled < 0 {
					r.h.Runs[sl.runID].Cancelled = r.now()
				}
				r.mu.Unlock()
				cancel()
				cancel = nil
				r.poke()
			}
		case cmd.quit:
			wait()
			return
		}
	}
}

// newProcess builds run runID of slot sl, started by a after prev (nil for
// the first). Called with r.mu held. It returns the process and the budget
// scope (elector) the run belongs to.
func (r *runner) newProcess(sl *slot, runID int, prev *Run, a *Action) (process, int) {
	switch r.impl {
	case Relect:
		return newRelectProcess(r, sl, runID, prev, a)
	case ClientGoLoop:
		r.electors++
		return newClientGoProcess(r, sl, runID, a), r.electors
	}
	panic("sim: unknown implementation")
}

// readStores records what each store holds once every write is delivered
// or lost (History.Final), a nanosecond after the last delivery.
func (r *runner) readStores() {
	time.Sleep(time.Nanosecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.FinalAt, r.h.Final = r.now(), map[Store]string{}
	for st, g := range r.stores {
		r.h.Final[st] = g.read()
	}
}
