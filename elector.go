package relect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/relect/relect/internal/logq"
	"github.com/relect/relect/internal/notify"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/work"
)

// Elector campaigns for one Lease again and again: it wraps client-go's
// LeaderElector, which serves a single term, in a supervised loop that
// campaigns again after every lost term, paced by a backoff and a token
// bucket.
//
// An Elector is safe for concurrent use: every method may be called from
// any goroutine at any time. Run, Yield, HandOver, WaitForTerm and
// WaitForLeader block (each says until when); the others return at once. Run
// may be active at most once at a time; after it has returned it may be
// called again.
//
// The zero value is not usable: create Electors with New. On a zero
// Elector, Run returns errNotInitialized at once and the other methods
// report nothing (no leader, no term, zero Stats).
type Elector struct {
	cfg     *config
	st      *state   // what it knows and counts, under the one mutex
	gw      *gateway // every Lease API call
	events  *eventQueue
	logs    *logq.Queue
	klogger logr.Logger // client-go's logs, through logs

	running atomic.Bool
	shards  *shardsPart // its part in shards; nil without
}

// New validates opts and returns an Elector ready to Run. It makes no API
// call and starts no goroutine. Every invalid field or relation between
// fields is reported, each naming the field, joined in one error that wraps
// ErrInvalidOptions. New never panics.
func New(opts Options) (*Elector, error) {
	cfg, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	return newElector(cfg), nil
}

// newElector is the Elector of a valid config.
func newElector(cfg *config) *Elector {
	events := newEventQueue(cfg.EventBuffer)
	logs := logq.New(cfg.Logger.Handler())
	st := newState(cfg, events, logs)
	klog := cfg.Logger.Handler()
	if _, ok := klog.(logq.DefaultWarnings); ok {
		// No Logger: relect's own warnings go to slog.Default(), not
		// client-go's errors, one per failed retry (relect warns of runs
		// of failures, at 2, then each time the run doubles).
		klog = slog.DiscardHandler
	}
	return &Elector{
		cfg:     cfg,
		st:      st,
		gw:      newGateway(cfg, st),
		events:  events,
		logs:    logs,
		klogger: logr.FromSlogHandler(logs.Handler(klog)),
		shards:  newShardsOf(cfg),
	}
}

// Identity returns the holder identity this Elector writes into the Lease:
// Options.Identity, the generated default, or the Lock's.
func (e *Elector) Identity() string {
	if e.cfg == nil {
		return ""
	}
	return e.cfg.identity
}

// Lease returns the namespace and name of the Lease: Options.Namespace and
// Name, or those of Options.Lock as its Describe method gives them
// ("namespace/name"; name is empty if it has no slash).
func (e *Elector) Lease() (namespace, name string) {
	if e.cfg == nil {
		return "", ""
	}
	return e.cfg.lease()
}

// IsLeader reports whether this candidate leads now: a term has started and
// has not ended, and less than RenewDeadline has passed, on the local
// monotonic clock, since the last successful renewal was sent. It turns false
// the instant that deadline passes, even if the renewal request is still
// hung or the process was paused, and as soon as the Lease is seen held by
// someone else. (client-go's IsLeader stays true until another holder is
// observed.) It never blocks on the API.
func (e *Elector) IsLeader() bool {
	_, ok := e.Term()
	return ok
}

// Term returns the number of the current term and whether this candidate
// leads now (exactly when IsLeader is true). The number is the Lease's
// leaseTransitions when this candidate acquired it, for people: every change
// of holder increments it, but two consecutive terms of one Elector share a
// number when nobody else held the lease in between, and a Lease deleted by
// hand and created again by plain client-go (or by relect polling because
// it may not watch) starts over at 0 — a relect candidate that watched it
// continues the count from the highest it saw. Storage that must refuse a
// deposed leader's writes compares the term's Fence instead.
func (e *Elector) Term() (number int64, leading bool) {
	if e.st == nil {
		return 0, false
	}
	return e.st.leading()
}

// Leader returns the holder identity last observed in the Lease, this
// candidate's own included, or "" if the Lease was released, deleted or not
// observed yet. Followers observe the Lease while campaigning, so during a
// backoff wait it can be stale by up to that wait.
func (e *Elector) Leader() string {
	if e.st == nil {
		return ""
	}
	return e.st.currentLeader()
}

// Events returns the channel on which the current Run, or the next one if
// none is active, delivers Events, in the order they happened. Delivery
// never blocks the election: when the channel's buffer (Options.EventBuffer)
// is full, the oldest buffered event is dropped and counted in
// Stats.DroppedEvents. The channel is closed when that Run returns; call Events
// again to follow a later Run. On a zero Elector it returns a closed
// channel.
func (e *Elector) Events() <-chan Event {
	if e.events == nil {
		ch := make(chan Event)
		close(ch)
		return ch
	}
	return e.events.Channel()
}

// Stats returns a snapshot of the Elector's state and counters, all read at
// one instant. It never blocks on the API and is safe for concurrent use.
func (e *Elector) Stats() Stats {
	if e.st == nil {
		return Stats{}
	}
	s := e.st.snapshot(time.Now()).Stats
	if e.shards != nil {
		s.ShardsHeld = len(e.shards.Held())
		s.ShardFailing = e.shards.Failing()
	}
	return s
}

// Run campaigns for the lease until ctx is done, and serves a term each time
// it wins: it calls OnStartedLeading, renews every RetryPeriod, and ends the
// term when a renewal has not succeeded within RenewDeadline of sending the
// last successful one, when the Lease is seen held by another identity, or
// when OnStartedLeading returns or panics. After a term it waits for
// OnStartedLeading to return, releases the lease if the term ended because
// the work returned or panicked, calls OnStoppedLeading, then campaigns
// again after a backoff wait (reset by a stable term, see
// Options.BackoffMax).
//
// Run blocks. When ctx is done, it cancels the term's context, waits for
// OnStartedLeading to return — and for a follower's acquiring write in
// flight, which it does not cancel (RenewDeadline/2 at most), so that it
// releases what that write acquired — releases the lease (unless
// KeepLeaseOnCancel; the release takes at most RenewDeadline), calls
// OnStoppedLeading, waits
// for the queued OnNewLeader calls and log records to be handled, closes the
// Events channel and returns context.Cause(ctx) — ctx.Err() unless a cause
// was given. It returns ErrAlreadyRunning at once, without touching the
// running one, if another Run of this Elector is active, and
// errNotInitialized on a zero Elector. No goroutine that Run started
// outlives it.
func (e *Elector) Run(ctx context.Context) error {
	if ctx == nil {
		return errors.New("relect: Run: nil context")
	}
	if e.st == nil {
		return errNotInitialized
	}
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer e.running.Store(false)
	// Deferred calls run in reverse: the notifier stops first (its calls
	// may still report a panic as an event), then the Events channel is
	// closed, and the log queue is drained last.
	defer e.logs.Start()()
	defer e.events.Close()
	var reg *registry.Registration
	if e.cfg.registry && e.cfg.leases != nil {
		// The registration lives as long as Run: waited for after the
		// loop ended (ctx is done then), once it deregistered.
		var wait func()
		reg, wait = startRegistration(ctx, e.cfg, e.gw, e.st)
		defer wait()
		e.st.setRegistration(reg)
		defer e.st.setRegistration(nil)
	}
	if e.cfg.shards != nil && !e.cfg.Standby && e.cfg.leases != nil {
		// Shards end before the registration: every shard Elector has
		// released when the candidate deregisters.
		defer joinShards(klog.NewContext(ctx, e.klogger), e.shards, shardCore{gatewayCalls: gatewayCalls{e.gw}, cfg: e.cfg, logs: e.logs}, reg)()
	}
	if e.cfg.Work.Check != nil {
		// The work check runs as long as Run: joined after the loop
		// ended (ctx is done then), once its last call returned.
		var checking sync.WaitGroup
		cctx := ctx
		checking.Go(func() { work.RunChecks(cctx, e.cfg.Work.resolved(), workPort{e.st}) })
		defer checking.Wait()
	}
	defer e.startNotifier()()
	return e.campaignUntilDone(klog.NewContext(ctx, e.klogger))
}

// startNotifier starts delivering new leaders to OnNewLeader, and returns
// the function that stops it once the calls in progress returned.
func (e *Elector) startNotifier() (stop func()) {
	var call func(string) // OnNewLeader, a panic in it reported as an event
	if f := e.cfg.OnNewLeader; f != nil {
		call = func(id string) {
			if p := callSafely("OnNewLeader", func() { f(id) }); p != nil {
				e.st.emit(Event{Kind: EventError, Err: p})
			}
		}
	}
	n := notify.New(call,
		func(id string) {
			e.logs.Log(slog.LevelWarn, "relect: OnNewLeader is too slow: a holder was dropped unannounced, newer ones wait",
				"lease", e.cfg.describe, "dropped", id, "waiting", notify.MaxQueued)
		})
	e.st.setNotifier(n)
	return func() {
		e.st.setNotifier(nil)
		n.Stop()
	}
}

// campaignUntilDone campaigns, again after each campaign's end and its
// backoff wait, until ctx is done, and returns its cause.
func (e *Elector) campaignUntilDone(ctx context.Context) error {
	bo := newCampaignBackoff(e.cfg)
	for {
		e.st.emit(Event{Kind: EventCampaigning})
		stable := runCampaign(ctx, e.cfg, e.st, e.gw, assignShards(e.shards, e.cfg, e.st, e.logs))
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if stable {
			bo.Reset()
		}
		d := bo.Next()
		e.st.backedOff(d)
		if pace.Sleep(ctx, d) != nil {
			return context.Cause(ctx)
		}
	}
}

// Yield ends this candidate's term and releases the lease so that the next
// candidate in the line of succession takes it over at once, while this one
// stays a candidate: its Run goes on, and after its backoff wait it follows
// the Lease again, behind the others (it is not in the line it published).
// The term's context is cancelled; Yield blocks until OnStartedLeading has
// returned and the release was written, or until ctx is done (the yield
// goes on regardless). It returns nil once the lease is released,
// ErrNotLeader if this candidate does not lead at the call, ctx's error, or
// the release's error: the term has ended all the same, and the lease then
// expires as after a crash — this candidate gives that record up, so the
// candidates in line take it over once it expires (it does not resume it).
// Safe for concurrent use; OnStartedLeading must not wait for it (it waits
// for OnStartedLeading).
func (e *Elector) Yield(ctx context.Context) error {
	return e.stepDown(ctx, "", false)
}

// HandOverOptions change what HandOver checks. The zero value (or nil)
// checks that the named candidate is one this leader knows may take the
// lease.
type HandOverOptions struct {
	// Unregistered lets HandOver name a candidate this leader does not
	// know from the registry: a plain client-go candidate, a relect
	// candidate with the registry off, or when this leader's registry is
	// off. A candidate known to stand by is still refused. If nobody of
	// that identity takes the lease, it is free again after the handover
	// record's duration (twice RetryPeriod, rounded up to seconds).
	Unregistered bool
}

// HandOver ends this candidate's term and hands the lease over to the
// candidate named identity: it writes the Lease naming that candidate as
// holder, for twice RetryPeriod rounded up to whole seconds (4 s by
// default), and marks the record as a handover. The named candidate, if it
// is a relect candidate following the Lease (not in a backoff wait), takes
// it at once with a term of its own; nobody else may take the handover
// record before that time has passed — plain client-go candidates
// included, since the Lease names a holder — after which normal succession
// resumes. This candidate stays a candidate, as with Yield.
//
// identity must be a live registered candidate that may lead, as this
// leader knows them (Candidates) or as one read of its registration shows
// it (it may have registered since the leader's list): otherwise HandOver
// returns an error that wraps ErrUnknownCandidate, says which case it is
// (not registered, yet or at all; gone; standing by), and leaves the term
// alone — unless opts.Unregistered is set (for a candidate outside the
// registry). A
// leader lists the registry half a RetryPeriod into its term; a HandOver
// called before then waits for the list, one RetryPeriod at most (the
// list can be later if the registry's calls fail or wait for the token
// bucket): then it returns ErrUnknownCandidate too, saying so, and the
// term goes on. The read of the registration waits for the token bucket's
// spare tokens, as every registry call does, one RetryPeriod at most too:
// if the bucket spares none by then, HandOver returns ErrUnknownCandidate,
// saying so, and the term goes on. It returns ErrNotLeader if the term
// ends meanwhile.
//
// HandOver blocks until OnStartedLeading has returned and the handover
// record was written, or until ctx is done. It returns nil once the record
// is written (not once the successor leads: wait for that with the
// successor's WaitForTerm, or watch Leader); ErrNotLeader if this
// candidate does not lead at the call, or the term it led at the call
// ended while HandOver waited for the registry's list or read the
// candidate's registration (a later term of this candidate is never
// handed over by it); an error if identity is empty or this
// candidate's own; ErrUnknownCandidate as above; ctx's error; or the
// write's error (the term has ended all the same, and the lease expires
// as after a crash, as with Yield). Safe for concurrent use;
// OnStartedLeading must not wait for it.
func (e *Elector) HandOver(ctx context.Context, identity string, opts *HandOverOptions) error {
	var o HandOverOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case e.cfg == nil:
		return errNotInitialized
	case identity == "":
		return errors.New("relect: HandOver: empty identity")
	case identity == e.cfg.identity:
		return errors.New("relect: HandOver: the identity is this candidate's own")
	}
	return e.stepDown(ctx, identity, o.Unregistered)
}

func (e *Elector) stepDown(ctx context.Context, to string, unregistered bool) error {
	if e.st == nil {
		return errNotInitialized
	}
	// A HandOver early in a term waits for the registry's list, which is
	// due half a retry period into the term: a retry period at most.
	// Each ask after the first is of the term the first found leading: if
	// that term ends meanwhile, the answer is ErrNotLeader even if this
	// candidate leads again by then.
	var unlisted <-chan time.Time
	var of *term
	confirmed, readErr := false, error(nil)
	for {
		t, done, wait, err := e.st.stepDown(of, to, unregistered, confirmed, readErr)
		of = t
		if err == errConfirm {
			confirmed, readErr = true, e.confirm(ctx, to)
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			continue
		}
		if err != nil {
			return err
		}
		if wait != nil {
			if unlisted == nil {
				t := time.NewTimer(e.cfg.RetryPeriod)
				defer t.Stop()
				unlisted = t.C
			}
			select {
			case <-wait:
			case <-unlisted:
				return fmt.Errorf("%w: %q: this leader has not listed the registry yet (its calls wait for the token bucket, or fail); "+
					"try again, or set HandOverOptions.Unregistered", ErrUnknownCandidate, to)
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			continue
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// confirm reads the registration of to, unknown to the leader's view (it
// may have registered since the leader's list), records what it found
// (state.candidateRead) and returns the read's error, NotFound aside. It
// waits for spare tokens one RetryPeriod at most: HandOver answers for the
// fleet of its call (TestHandOverReadWaitsARetryPeriodAtMost).
func (e *Elector) confirm(ctx context.Context, to string) error {
	var l *coordinationv1.Lease
	err := e.gw.doSpare(ctx, registry.VerbListCandidates, true, e.cfg.RetryPeriod, func(ctx context.Context) error {
		var err error
		l, err = e.cfg.leases.Get(ctx, registrationName(e.cfg.Name, to), metav1.GetOptions{})
		return err
	})
	if ctx.Err() != nil {
		return err
	}
	return e.st.candidateRead(to, l, err)
}

// Candidates returns the candidates for the lease as this Elector knows
// them, the leader first, then the line of succession in order, then the
// others by priority and identity. A leader knows every live registered
// candidate (it watches the registry, from half a RetryPeriod into its
// term); a follower knows itself, the leader, and the successors the
// leader published in the Lease. Plain client-go candidates, and relect
// candidates with the registry off, are known only as leader. It never
// blocks on the API and is safe for concurrent use.
func (e *Elector) Candidates() []Candidate {
	if e.st == nil {
		return nil
	}
	return e.st.knownCandidates()
}

// WaitForTerm blocks until this candidate leads, and returns the term's
// number (see Term); or until ctx is done, and returns its cause. It
// returns at once if this candidate leads at the call. Leading may end at
// any moment after it returns: act under the term's context, or check
// IsLeader. Safe for concurrent use.
func (e *Elector) WaitForTerm(ctx context.Context) (term int64, err error) {
	if e.st == nil {
		return 0, errNotInitialized
	}
	for {
		n, leading, _, changed := e.st.await()
		if leading {
			return n, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
}

// WaitForLeader blocks until a holder of the lease is observed, and returns
// its identity (see Leader; this candidate's own included); or until ctx is
// done, and returns its cause. It returns at once if a holder is known at
// the call. Safe for concurrent use.
func (e *Elector) WaitForLeader(ctx context.Context) (identity string, err error) {
	if e.st == nil {
		return "", errNotInitialized
	}
	for {
		_, _, leader, changed := e.st.await()
		if leader != "" {
			return leader, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}
