package relect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/leaderelection"
)

// campaign is one campaign for the lease, from following it to the end of
// the term it won (or to ctx's end before it won one):
//
//  1. follow (follow.go): watch the Lease and acquire it with a conditional
//     write — unless relect may not watch, or has no Lease client (a Lock):
//     then client-go polls;
//  2. elect: run client-go's LeaderElector, which resumes our write (or
//     acquires by polling) and serves one term: serve runs OnStartedLeading
//     under a watchdog, while the leader's watch (watchTerm) reports what
//     the Lease shows;
//  3. stepDown: release the lease if due, and call OnStoppedLeading.
//
// A campaign has what it needs of its Elector: the config, the state it
// reports to, and the gateway.
type campaign struct {
	cfg    *config
	st     *state
	gw     *gateway
	assign func(context.Context)   // the shards' assignment, run during each term; nil without shards
	runCtx context.Context         // Run's context
	ctx    context.Context         // the campaign's: done when it ends
	cancel context.CancelCauseFunc // ends it, with a cause
}

// runCampaign runs one campaign and reports whether its term was stable:
// held for at least LeaseDuration and not ended by a panic.
func runCampaign(ctx context.Context, cfg *config, st *state, gw *gateway, assign func(context.Context)) (stable bool) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := &campaign{cfg: cfg, st: st, gw: gw, assign: assign, runCtx: ctx, ctx: cctx, cancel: cancel}
	followed := false
	var (
		w  watch.Interface
		rv string
	)
	gw.forgetAcquired()
	defer gw.forgetAcquired()
	if st.startCampaign() || cfg.Standby {
		var wrote bool
		var err error
		w, rv, wrote, err = follow(cctx, cfg, gw, st)
		switch {
		case errors.Is(err, errWatchForbidden):
			st.watchForbidden(err)
		case err != nil: // ctx done
			if wrote && !cfg.KeepLeaseOnCancel {
				c.release(nil, "") // the write may have been applied
			}
			return false
		default:
			followed = true
		}
	}
	if cfg.Standby {
		return false // a standby follows until ctx is done, and never elects
	}
	t := c.elect(followed, w, rv)
	if t == nil || t.phase == termAborted {
		if followed && ctx.Err() != nil && !cfg.KeepLeaseOnCancel {
			// Stopped between our acquiring write and the term's start:
			// the write may have been applied even if the client gave up
			// on it, and followers would wait out a lease nobody serves.
			c.release(nil, "")
		}
		return false
	}
	return c.stepDown(t)
}

// elect runs client-go's LeaderElector until its term ends (or the campaign
// ends before it wins one), with the leader's watch beside it if the
// campaign followed. It returns the campaign's term, once serve returned,
// or nil.
func (c *campaign) elect(followed bool, w watch.Interface, rv string) *term {
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          c.gw,
		LeaseDuration: c.cfg.LeaseDuration,
		RenewDeadline: c.cfg.RenewDeadline,
		RetryPeriod:   c.cfg.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: c.serve,
			// client-go calls this on every exit, led or not; relect
			// calls the user's own after the term (stepDown).
			OnStoppedLeading: func() {},
		},
		// relect releases itself, after OnStartedLeading has returned;
		// client-go would release before the work was even told to stop.
		ReleaseOnCancel: false,
		Name:            c.cfg.describe,
	})
	if err != nil {
		// New validated the same rules, so this is a bug; report it and
		// let the backoff pace the retries.
		c.st.emit(Event{Kind: EventError, Err: fmt.Errorf("relect: client-go rejected the configuration: %w", err)})
		if w != nil {
			w.Stop()
		}
		return nil
	}
	c.st.electing(c.cancel, followed)
	if followed {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			watchTerm(c.ctx, c.gw, c.st, w, rv)
		}()
		defer func() { c.cancel(nil); <-watched }()
	}
	le.Run(c.ctx)
	if t := c.st.liveTerm(); t != nil {
		<-t.served // see term.served
	}
	return c.st.electionOver()
}

// stepDown ends a campaign whose term was served: it hands the lease over
// if a HandOver (or the Lease's preferred holder) asked for it, releases it
// if a Yield asked for it, if the term ended because the work returned or
// panicked, or because Run's context is done (unless KeepLeaseOnCancel) —
// not after a loss or an expiry, when the lease is not, or not known to be,
// ours — then calls OnStoppedLeading. It reports whether the term was
// stable.
func (c *campaign) stepDown(t *term) (stable bool) {
	var panicked *PanicError
	isPanic := errors.As(t.cause, &panicked)
	release := isPanic || errors.Is(t.cause, ErrWorkReturned) || t.stepDown != nil ||
		(c.runCtx.Err() != nil && !c.cfg.KeepLeaseOnCancel && !errors.Is(t.cause, ErrLeaseExpired) && !errors.Is(t.cause, ErrLeaseLost))
	if errors.Is(t.cause, ErrWorkStuck) {
		c.recordEventOf(corev1.EventTypeWarning, "stopped leading: its work was stuck ("+t.cause.Error()+"); handing the lease to the line of succession")
	} else {
		c.recordEvent("stopped leading")
	}
	switch {
	case t.stepDown != nil:
		t.stepDown.done <- c.release(t, t.stepDown.to)
	case release:
		c.release(t, "")
	}
	if f := c.cfg.OnStoppedLeading; f != nil {
		if p := callSafely("OnStoppedLeading", f); p != nil {
			c.st.emit(Event{Kind: EventError, Err: p})
		}
	}
	return !isPanic && t.endedAt.Sub(t.acquired) >= c.cfg.LeaseDuration
}

// serve is client-go's OnStartedLeading (see term.served for how the
// campaign joins it). It runs the user's OnStartedLeading for the term the
// acquiring write made, guarded by a watchdog that ends the term when its
// validity passes.
func (c *campaign) serve(cgCtx context.Context) {
	t := c.st.liveTerm()
	defer close(t.served)
	ctx, cancel := context.WithCancelCause(context.WithValue(cgCtx, termKey{}, t.value))
	defer cancel(nil)
	if !c.st.startServing(t, ctx, cancel) {
		return
	}
	c.recordEvent("became leader")

	var helpers sync.WaitGroup
	helpers.Go(func() { c.watchdog(t) })
	if c.cfg.registry && c.cfg.leases != nil {
		helpers.Go(func() { watchCandidates(ctx, c.cfg, c.gw, c.st) })
		helpers.Go(func() { postLine(ctx, c.cfg, c.gw, c.st) })
		if c.assign != nil {
			helpers.Go(func() { c.assign(ctx) })
		}
	}
	var cause error = ErrWorkReturned
	work := c.cfg.OnStartedLeading
	if work == nil { // allowed with Shards: the term lasts until it ends
		work = func(ctx context.Context) { <-ctx.Done() }
	}
	p := callSafely("OnStartedLeading", func() { work(ctx) })
	switch {
	case p != nil:
		cause = p
	case ctx.Err() != nil:
		cause = c.cancelCause(ctx)
	}
	c.st.workReturned(t, p, cause)
	helpers.Wait()
}

// watchdog ends term t when its validity passes without a renewal, or when
// its context is cancelled from above (Run's context, or client-go's renew
// loop giving up); with Options.Work it also looks at the term's work when
// a beat is due or a hold ends (workPort.due), which may end the term as
// stuck.
func (c *campaign) watchdog(t *term) {
	st := c.st
	wake := func() (time.Duration, bool) {
		until, expired := st.expireIfPast(t)
		if expired {
			return 0, false
		}
		if w := (workPort{st}).due(t); !w.IsZero() && w.Before(until) {
			until = w
		}
		return time.Until(until), true
	}
	d, ok := wake()
	if !ok {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			st.endTerm(t, c.cancelCause(t.ctx))
			return
		case <-t.renewed:
		case <-t.value.beats.Woken(): // a beat of stuck work
		case <-timer.C:
		}
		if d, ok = wake(); !ok {
			return
		}
		timer.Reset(d)
	}
}

// cancelCause says why the term context ctx was cancelled: Run's context's
// cause, the cause we gave it, or, if client-go cancelled it without a cause
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

// release gives the lease back — or hands it over to to, if not empty —
// within RenewDeadline, even when Run's context is done: the lease term t
// holds, or with t nil, the Lease if it names us when read now (the
// campaign ended while its acquiring write was in flight, and it may have
// been applied). It reports an error if it did not release (or hand over).
func (c *campaign) release(t *term, to string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.runCtx), c.cfg.RenewDeadline)
	defer cancel()
	var (
		ok          bool
		err         error
		transitions int
	)
	if t == nil {
		ok, transitions, err = c.gw.release(ctx, 0, to, true)
	} else {
		ok, transitions, err = c.gw.release(ctx, t.held, to, false)
	}
	number := int64(transitions) // without a term: the record released
	var fence Fence
	if t != nil {
		number, fence = t.number, t.fence
	}
	switch {
	case err != nil:
		// The Lease may still hold our last renewal. We meant to give it
		// up: it must expire as after a crash, taken by whoever is next in
		// line, and not be resumed by this Elector's next campaign.
		c.st.gaveUp()
		err = fmt.Errorf("relect: releasing the lease: %w", err)
		c.st.emit(Event{Kind: EventError, Err: err})
		return err
	case !ok:
		return ErrLeaseLost
	case to != "":
		postHandOverLine(ctx, c.cfg, c.gw, c.st) // tells to, if it follows the line Lease
		c.st.emit(Event{Kind: EventHandedOver, Leader: to, Term: number, Fence: fence})
		c.recordEvent("handed the lease over to " + to)
	default:
		c.st.emit(Event{Kind: EventReleased, Leader: c.cfg.identity, Term: number, Fence: fence})
		c.recordEvent("released the lease")
	}
	return nil
}

// recordEvent sends a Kubernetes Event about the Lease to
// Options.EventRecorder, if set. It does not go through the inner lock's
// RecordEvent: LeaseLock's reads the Lease object its renew loop writes
// concurrently.
func (c *campaign) recordEvent(msg string) { c.recordEventOf(corev1.EventTypeNormal, msg) }

// recordEventOf is recordEvent with the Event's type (Normal, Warning).
func (c *campaign) recordEventOf(eventType, msg string) {
	cfg := c.cfg
	r := cfg.EventRecorder
	if r == nil {
		return
	}
	ns, name, _ := strings.Cut(cfg.describe, "/")
	subject := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	subject.Kind = "Lease"
	subject.APIVersion = coordinationv1.SchemeGroupVersion.String()
	if p := callSafely("EventRecorder", func() {
		r.Eventf(subject, eventType, "LeaderElection", "%s %s", cfg.identity, msg)
	}); p != nil {
		c.st.emit(Event{Kind: EventError, Err: p})
	}
}
