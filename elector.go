package relect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Elector campaigns for one Lease again and again: it wraps client-go's
// LeaderElector, which serves a single term, in a supervised loop that
// campaigns again after every lost term, paced by a backoff and a token
// bucket.
//
// An Elector is safe for concurrent use: IsLeader, Leader, Term, Events and
// DroppedEvents may be called from any goroutine at any time. Run may be
// active at most once at a time; after it has returned it may be called
// again.
type Elector struct {
	cfg     *config
	lock    *lock
	events  *eventQueue
	klogger logr.Logger
	running atomic.Bool
	// pollOnly is set when the Lease may not be watched: followers then
	// poll through client-go's acquire loop.
	pollOnly atomic.Bool

	mu      sync.Mutex
	leader  string                             // last observed holder identity
	written *resourcelock.LeaderElectionRecord // our last successful write
	// absentSince is the local time the Lease was first found missing in
	// this campaign since it was last seen to exist (zero while it exists
	// or before any observation): no Create through the lock before
	// LeaseDuration after it (see lock.Create).
	absentSince time.Time
	// maxTransitions is the highest leaseTransitions read, watched or
	// written; -1 before any.
	maxTransitions int
	// published is the JSON of our last write as client-go followers see
	// it, and publishedAt when the first write with that JSON was sent.
	published   []byte
	publishedAt time.Time
	current     *campaign // the campaign in progress, or nil
	notifier    *notifier // delivers OnNewLeader during Run, or nil
	stats       Stats     // counters; Stats() fills in the state
}

// campaign is one run of client-go's LeaderElector: acquire, then one term.
type campaign struct {
	e      *Elector
	runCtx context.Context // Run's context
	cancel context.CancelCauseFunc
	// started counts the OnStartedLeading goroutine client-go starts after
	// acquiring; lock.write adds to it before client-go's go statement runs,
	// so that campaign() can join a goroutine it did not start.
	started sync.WaitGroup
	term    *term // set at acquisition; guarded by Elector.mu
	// followed: this campaign acquired the lease by following (watch),
	// and client-go only resumes it; if client-go then sees another
	// holder, the campaign ends instead of polling.
	followed bool
}

// term is one tenure of this candidate as leader. Fields are guarded by
// Elector.mu.
type term struct {
	number     int64
	acquired   time.Time // t_send of the acquiring write
	validUntil time.Time // t_send of the last successful write + RenewDeadline
	renewed    chan struct{}
	ctx        context.Context
	cancel     context.CancelCauseFunc
	started    bool  // OnStartedLeading was called
	workDone   bool  // and has returned
	ended      bool  // IsLeader is false for good
	cause      error // why it ended
	endedAt    time.Time
	held       int // leaseTransitions of the last record we wrote
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
	e := &Elector{
		cfg:            cfg,
		events:         newEventQueue(cfg.EventBuffer),
		klogger:        logr.FromSlogHandler(cfg.Logger.Handler()),
		maxTransitions: -1,
	}
	e.lock = &lock{
		e:            e,
		inner:        cfg.lock,
		limiter:      newLimiter(cfg),
		callTimeout:  cfg.RenewDeadline / 2,
		leaseSeconds: int(cfg.LeaseDuration / time.Second),
	}
	return e, nil
}

// Identity returns the holder identity this Elector writes into the Lease:
// Options.Identity, the generated default, or the Lock's.
func (e *Elector) Identity() string { return e.lock.Identity() }

// Lease returns the namespace and name of the Lease: Options.Namespace and
// Name, or those of Options.Lock as its Describe method gives them
// ("namespace/name"; name is empty if it has no slash).
func (e *Elector) Lease() (namespace, name string) {
	if e.cfg.Lock == nil {
		return e.cfg.Namespace, e.cfg.Name
	}
	namespace, name, _ = strings.Cut(e.lock.Describe(), "/")
	return namespace, name
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
// leaseTransitions when this candidate acquired it: every change of holder
// increments it, so it can serve as a fencing token that storage compares
// against the highest it has seen. Two consecutive terms of one Elector share
// a number when nobody else held the lease in between. When the Lease was
// deleted by hand, a relect candidate that creates it again continues the
// count from the highest it saw (plain client-go, or relect polling because
// it may not watch, starts over at 0).
func (e *Elector) Term() (number int64, leading bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.current == nil || e.current.term == nil {
		return 0, false
	}
	t := e.current.term
	if !t.started || t.ended || !time.Now().Before(t.validUntil) {
		return 0, false
	}
	return t.number, true
}

// Leader returns the holder identity last observed in the Lease, this
// candidate's own included, or "" if the Lease was released, deleted or not
// observed yet. Followers observe the Lease while campaigning, so during a
// backoff wait it can be stale by up to that wait.
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Events returns the channel on which the current Run, or the next one if
// none is active, delivers Events, in the order they happened. Delivery
// never blocks the election: when the channel's buffer (Options.EventBuffer)
// is full, the oldest buffered event is dropped and counted in
// DroppedEvents. The channel is closed when that Run returns; call Events
// again to follow a later Run.
func (e *Elector) Events() <-chan Event { return e.events.channel() }

// DroppedEvents returns how many events were dropped since New because the
// Events buffer was full.
func (e *Elector) DroppedEvents() uint64 { return e.events.droppedCount() }

// TermFromContext returns the term number carried by the context given to
// OnStartedLeading (or one derived from it).
func TermFromContext(ctx context.Context) (number int64, ok bool) {
	n, ok := ctx.Value(termKey{}).(int64)
	return n, ok
}

type termKey struct{}

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
// OnStartedLeading to return, releases the lease (unless KeepLeaseOnCancel;
// the release takes at most RenewDeadline), calls OnStoppedLeading, closes
// the Events channel and returns context.Cause(ctx) — ctx.Err() unless a
// cause was given. It returns ErrAlreadyRunning at once, without touching
// the running one, if another Run of this Elector is active. No goroutine
// that Run started outlives it.
func (e *Elector) Run(ctx context.Context) error {
	if ctx == nil {
		return errors.New("relect: Run: nil context")
	}
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer e.running.Store(false)
	defer e.events.close()

	n := newNotifier(e)
	e.mu.Lock()
	e.notifier = n
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.notifier = nil
		e.mu.Unlock()
		n.stop()
	}()

	ctx = klog.NewContext(ctx, e.klogger)
	bo := newCampaignBackoff(e.cfg)
	for {
		e.emit(Event{Kind: EventCampaigning})
		stable := e.campaign(ctx)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if stable {
			bo.reset()
		}
		d := bo.next()
		e.mu.Lock()
		e.stats.Backoffs++
		e.stats.BackoffTime += d
		e.emitLocked(Event{Kind: EventBackoff, Delay: d})
		e.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// campaign runs client-go's LeaderElector until its term ends (or ctx is
// done before it wins one), then releases the lease if due and calls
// OnStoppedLeading. It reports whether the term was stable.
func (e *Elector) campaign(ctx context.Context) (stable bool) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &campaign{e: e, runCtx: ctx, cancel: cancel}
	e.mu.Lock()
	e.absentSince = time.Time{} // what was seen before this campaign is stale
	e.mu.Unlock()
	var (
		termWatch watch.Interface
		termRV    string
	)
	if e.cfg.leases != nil && !e.pollOnly.Load() {
		w, rv, wrote, err := e.follow(cctx)
		switch {
		case errors.Is(err, errWatchForbidden):
			e.pollOnly.Store(true)
			e.emit(Event{Kind: EventError, Err: err})
		case err != nil: // ctx done
			if wrote && !e.cfg.KeepLeaseOnCancel {
				e.releaseIfHeld(ctx) // the write may have been applied
			}
			return false
		default:
			c.followed = true
			termWatch, termRV = w, rv
		}
	}
	e.mu.Lock()
	e.current = c
	e.mu.Unlock()
	if c.followed {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			e.watchTerm(cctx, termWatch, termRV)
		}()
		defer func() { <-watched }()
		defer cancel(nil) // runs first: ends the watch when the campaign ends
	}

	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.lock,
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.cfg.RenewDeadline,
		RetryPeriod:   e.cfg.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: c.serve,
			// client-go calls this on every exit, led or not; relect
			// calls the user's own after the term, below.
			OnStoppedLeading: func() {},
		},
		// relect releases itself, after OnStartedLeading has returned;
		// client-go would release before the work was even told to stop.
		ReleaseOnCancel: false,
		Name:            e.lock.Describe(),
	})
	if err != nil {
		// New validated the same rules, so this is a bug; report it and
		// let the backoff pace the retries.
		e.emit(Event{Kind: EventError, Err: fmt.Errorf("relect: client-go rejected the configuration: %w", err)})
		return false
	}
	le.Run(cctx)
	c.started.Wait()

	e.mu.Lock()
	t := c.term
	e.current = nil
	e.mu.Unlock()
	if t == nil || !t.started {
		if c.followed && ctx.Err() != nil && !e.cfg.KeepLeaseOnCancel {
			// Stopped between our acquiring write and the term's start:
			// the write may have been applied even if the client gave up
			// on it, and followers would wait out a lease nobody serves.
			e.releaseIfHeld(ctx)
		}
		return false
	}

	var panicked *PanicError
	isPanic := errors.As(t.cause, &panicked)
	release := isPanic || errors.Is(t.cause, ErrWorkReturned) ||
		(ctx.Err() != nil && !e.cfg.KeepLeaseOnCancel && !errors.Is(t.cause, ErrLeaseExpired) && !errors.Is(t.cause, ErrLeaseLost))
	e.lock.record("stopped leading")
	if release {
		e.release(ctx, t)
	}
	if f := e.cfg.OnStoppedLeading; f != nil {
		if p := callSafely("OnStoppedLeading", f); p != nil {
			e.emit(Event{Kind: EventError, Err: p})
		}
	}
	return !isPanic && t.endedAt.Sub(t.acquired) >= e.cfg.LeaseDuration
}

// releaseIfHeld releases the lease if it names us, within RenewDeadline,
// even when ctx is done.
func (e *Elector) releaseIfHeld(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	ok, err := e.lock.releaseIfHeld(rctx)
	switch {
	case err != nil:
		e.emit(Event{Kind: EventError, Err: fmt.Errorf("relect: releasing the lease: %w", err)})
	case ok:
		e.emit(Event{Kind: EventReleased, Leader: e.Identity()})
		e.lock.record("released the lease")
	}
}

// release gives the lease back, within RenewDeadline, even when ctx is done.
func (e *Elector) release(ctx context.Context, t *term) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	e.mu.Lock()
	transitions := t.held
	e.mu.Unlock()
	ok, err := e.lock.release(rctx, transitions)
	switch {
	case err != nil:
		e.emit(Event{Kind: EventError, Err: fmt.Errorf("relect: releasing the lease: %w", err)})
	case ok:
		e.emit(Event{Kind: EventReleased, Leader: e.Identity(), Term: t.number})
		e.lock.record("released the lease")
	}
}

// serve is client-go's OnStartedLeading: it runs in a goroutine client-go
// starts and does not join (campaign joins it through c.started). It runs
// the user's OnStartedLeading for the term that lock.write recorded, guarded
// by a watchdog that ends the term when its validity passes.
func (c *campaign) serve(cgCtx context.Context) {
	defer c.started.Done()
	e := c.e

	e.mu.Lock()
	t := c.term
	ctx, cancel := context.WithCancelCause(context.WithValue(cgCtx, termKey{}, t.number))
	defer cancel(nil)
	t.ctx, t.cancel = ctx, cancel
	if t.ended || !time.Now().Before(t.validUntil) {
		// Lost or expired before the work could start (a paused
		// process, or a Get that already saw another holder).
		e.endTermLocked(c, t, ErrLeaseExpired)
		e.mu.Unlock()
		return
	}
	t.started = true
	e.stats.TermsStarted++
	e.emitLocked(Event{Kind: EventStartedLeading, Leader: e.Identity(), Term: t.number})
	e.mu.Unlock()

	e.lock.record("became leader")

	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		e.watch(c, t)
	}()

	var cause error = ErrWorkReturned
	p := callSafely("OnStartedLeading", func() { e.cfg.OnStartedLeading(ctx) })
	e.mu.Lock()
	t.workDone = true
	e.mu.Unlock()
	if p != nil {
		e.emit(Event{Kind: EventError, Err: p})
		cause = p
	} else if ctx.Err() != nil {
		cause = c.cancelCause(ctx)
	}
	e.endTerm(c, t, cause) // no-op if the term had already ended
	<-watchdogDone
}

// cancelCause says why the term context ctx was cancelled: the cause we gave
// it, Run's context's cause, or, if client-go cancelled it without a cause
// (its renew loop gave up, which it does only after RenewDeadline of failed
// renewals), ErrLeaseExpired.
func (c *campaign) cancelCause(ctx context.Context) error {
	if c.runCtx.Err() != nil {
		return context.Cause(c.runCtx)
	}
	if cause := context.Cause(ctx); cause != context.Canceled {
		return cause
	}
	return ErrLeaseExpired
}

// watch ends term t when its validity passes without a renewal, or when its
// context is cancelled from above (Run's context, or client-go's renew loop
// giving up).
func (e *Elector) watch(c *campaign, t *term) {
	e.mu.Lock()
	until := t.validUntil
	e.mu.Unlock()
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			e.endTerm(c, t, c.cancelCause(t.ctx))
			return
		case <-t.renewed:
		case <-timer.C:
		}
		e.mu.Lock()
		until = t.validUntil
		if !time.Now().Before(until) {
			e.endTermLocked(c, t, ErrLeaseExpired)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		timer.Reset(time.Until(until))
	}
}

func (e *Elector) endTerm(c *campaign, t *term, cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endTermLocked(c, t, cause)
}

// endTermLocked ends term t once: IsLeader is false from here on, the term
// context is cancelled, and so is the campaign, which stops client-go's
// renew loop. Called with e.mu held.
func (e *Elector) endTermLocked(c *campaign, t *term, cause error) {
	if t.ended {
		return
	}
	t.ended, t.cause, t.endedAt = true, cause, time.Now()
	if t.started {
		e.emitLocked(Event{Kind: EventStoppedLeading, Leader: e.Identity(), Term: t.number, Err: cause})
	}
	if t.cancel != nil {
		t.cancel(cause)
	}
	c.cancel(cause)
}

// observed is called by the lock with every record read from the API. It
// ends the current term if the record names another holder. It reports
// whether, outside a term, the record names us although this Elector did not
// write it (see lock.disguise).
func (e *Elector) observed(rec *resourcelock.LeaderElectionRecord) (stranger bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.absentSince = time.Time{}
	e.maxTransitions = max(e.maxTransitions, rec.LeaderTransitions)
	e.setLeaderLocked(rec.HolderIdentity, rec.LeaderTransitions)
	c := e.current
	inTerm := c != nil && c.term != nil
	mine := rec.HolderIdentity == e.Identity()
	if inTerm && !mine {
		e.endTermLocked(c, c.term, ErrLeaseLost)
	}
	if c != nil && c.followed && !inTerm && !mine {
		c.cancel(ErrLeaseLost) // the lease we acquired moved on before client-go resumed it
	}
	return !inTerm && mine && !sameRecord(rec, e.written)
}

// recreatedTransitions is the leaseTransitions for a Lease this Elector
// creates: one more than the highest it ever saw, so that term numbers keep
// growing across a deletion by hand, or 0 if it saw none.
func (e *Elector) recreatedTransitions() int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return clampTransitions(e.maxTransitions + 1)
}

// createAllowedAt is when this Elector may create a Lease it found missing,
// through client-go's Create: LeaseDuration after it first found it missing
// in this campaign (zero if it did not). Whoever held a Lease deleted by
// hand may lead on, unaware, until its next renewal fails — at most
// RenewDeadline after its last successful one, which was before the
// deletion, so before that first observation. A candidate that polls sees
// the Lease only at each poll, so a Lease created and deleted again between
// two polls goes unseen, as it does for client-go.
func (e *Elector) createAllowedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.absentSince.IsZero() {
		return time.Time{}
	}
	return e.absentSince.Add(e.cfg.LeaseDuration)
}

// sameRecord reports whether a record read back is the one written, at the
// Lease's microsecond time precision.
func sameRecord(read, written *resourcelock.LeaderElectionRecord) bool {
	if written == nil {
		return false
	}
	sameTime := func(a, b time.Time) bool {
		return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
	}
	return read.HolderIdentity == written.HolderIdentity &&
		read.LeaderTransitions == written.LeaderTransitions &&
		read.LeaseDurationSeconds == written.LeaseDurationSeconds &&
		sameTime(read.RenewTime.Time, written.RenewTime.Time) &&
		sameTime(read.AcquireTime.Time, written.AcquireTime.Time)
}

// observedMissing is called when a read or a watch finds that the Lease does
// not exist.
func (e *Elector) observedMissing() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.absentSince.IsZero() {
		e.absentSince = time.Now()
		e.cfg.Logger.Info("relect: the Lease does not exist; it is created only once it has been seen missing for "+
			"LeaseDuration, in case it was deleted while someone held it", "lease", e.lock.Describe(), "leaseDuration", e.cfg.LeaseDuration)
	}
	e.setLeaderLocked("", 0)
	c := e.current
	switch {
	case c != nil && c.term != nil:
		e.endTermLocked(c, c.term, ErrLeaseLost)
	case c != nil && c.followed:
		c.cancel(ErrLeaseLost) // deleted before client-go resumed what we acquired
	}
}

// wrote is called by the lock after a successful Create or Update that was
// sent at the instant sent. The first write naming us in a campaign is the
// acquisition (client-go's acquire loop stops at its first success and then
// starts OnStartedLeading); later ones are renewals.
func (e *Elector) wrote(sent time.Time, rec *resourcelock.LeaderElectionRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noteWriteLocked(sent, rec)
	c := e.current
	if rec.HolderIdentity != e.Identity() || c == nil {
		return
	}
	// Validity counts from the first write that client-go followers could
	// tell from the one before (see noteWriteLocked), not from this one.
	valid := e.publishedAt.Add(e.cfg.RenewDeadline)
	e.stats.LastRenewal = sent
	t := c.term
	if t == nil {
		c.term = &term{
			number:     int64(rec.LeaderTransitions),
			acquired:   sent,
			validUntil: valid,
			renewed:    make(chan struct{}, 1),
			held:       rec.LeaderTransitions,
		}
		c.started.Add(1)
		return
	}
	if t.ended {
		return // a late success cannot revive a term that ended
	}
	t.held = rec.LeaderTransitions
	if valid.After(t.validUntil) {
		t.validUntil = valid
	}
	select {
	case t.renewed <- struct{}{}:
	default:
	}
}

// noteWriteLocked records a successful write of ours, sent at sent. A
// client-go follower restarts its expiry clock only when the record's JSON
// changes, and that JSON has the renew time in whole seconds: a renewal in
// the same second as the one before is invisible to it. So the instant that
// bounds every follower's takeover is when the first write with the current
// JSON was sent (publishedAt); a leader's validity counts from there.
func (e *Elector) noteWriteLocked(sent time.Time, rec *resourcelock.LeaderElectionRecord) {
	w := *rec
	e.written = &w
	e.absentSince = time.Time{} // the Lease exists: we just wrote it
	e.maxTransitions = max(e.maxTransitions, rec.LeaderTransitions)
	published, _ := json.Marshal(rec)
	if !bytes.Equal(published, e.published) {
		e.published, e.publishedAt = published, sent
	}
	e.setLeaderLocked(rec.HolderIdentity, rec.LeaderTransitions)
}

func (e *Elector) setLeaderLocked(holder string, transitions int) {
	if holder == e.leader {
		return
	}
	e.leader = holder
	if holder == "" {
		return
	}
	e.emitLocked(Event{Kind: EventNewLeader, Leader: holder, Term: int64(transitions)})
	if e.notifier != nil {
		e.notifier.push(holder)
	}
}

func (e *Elector) emit(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emitLocked(ev)
}

// emitLocked stamps and enqueues ev. Holding e.mu orders events with the
// state changes they report.
func (e *Elector) emitLocked(ev Event) {
	ev.Time = time.Now()
	attrs := []any{"lease", e.lock.Describe()}
	if ev.Leader != "" {
		attrs = append(attrs, "leader", ev.Leader)
	}
	switch ev.Kind {
	case EventNewLeader, EventStartedLeading, EventStoppedLeading, EventReleased:
		attrs = append(attrs, "term", ev.Term)
	case EventBackoff:
		attrs = append(attrs, "delay", ev.Delay)
	}
	if ev.Err != nil {
		attrs = append(attrs, "err", ev.Err)
	}
	level := slog.LevelInfo
	if ev.Kind == EventError {
		level = slog.LevelDebug // API errors can be many; they are Events too
	}
	e.cfg.Logger.Log(context.Background(), level, "relect: "+ev.Kind.String(), attrs...)
	e.events.send(ev)
}

// callSafely calls f and returns a *PanicError if it panicked.
func callSafely(name string, f func()) (p *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			p = &PanicError{Callback: name, Value: v, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// notifier calls OnNewLeader in order, one call at a time, from one
// goroutine, so that a slow callback never blocks the election (client-go
// starts a goroutine per call, so its calls can arrive out of order).
type notifier struct {
	e     *Elector
	mu    sync.Mutex
	queue []string
	wake  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

func newNotifier(e *Elector) *notifier {
	n := &notifier{e: e, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	if e.cfg.OnNewLeader == nil {
		close(n.done)
		return n
	}
	go n.run()
	return n
}

func (n *notifier) push(identity string) {
	if n.e.cfg.OnNewLeader == nil {
		return
	}
	n.mu.Lock()
	n.queue = append(n.queue, identity)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		batch := n.queue
		n.queue = nil
		n.mu.Unlock()
		for _, id := range batch {
			if p := callSafely("OnNewLeader", func() { n.e.cfg.OnNewLeader(id) }); p != nil {
				n.e.emit(Event{Kind: EventError, Err: p})
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-n.wake:
		case <-n.quit:
			n.mu.Lock()
			pending := len(n.queue) > 0
			n.mu.Unlock()
			if !pending {
				return
			}
		}
	}
}

// stop waits until every queued call was made, then ends the goroutine.
func (n *notifier) stop() {
	select {
	case <-n.done:
		return
	default:
	}
	close(n.quit)
	<-n.done
}
