package registry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Register keeps this candidate's registration until ctx is done, then
// deletes it (within RenewDeadline) once the returned function is called,
// and that function waits for the deletion. The core calls it last, after
// its campaign and every shard Elector released: a leader that saw the
// registration go before a holder's shard Leases were released would plan
// them anew, for candidates other than the takers that follow them (a
// table write and a wait more). The writes: a Create, or an Update of what
// a previous process of the same identity left, then an Update every
// Renewal (±10 %). Failures are retried after BackoffMax, doubling up to
// the renewal period. A 403 turns the registry off for this Elector
// (Reports.Forbidden; unless Needed, then it is retried as any error);
// so does one on the leader's list or watch (Watch), and then the
// registration, which nobody reads, is deleted at once. A write of its
// registration by another Elector (wire.AnnotationInstance) since its own
// is reported as a duplicate identity.
//
// It holds no goroutine between its writes: each runs on the goroutine of
// a timer (time.AfterFunc) and sets the next timer, and the deletion runs
// on the one context.AfterFunc starts when ctx is done — so that an idle
// follower pays no goroutine for its registration (issue 28).
func Register(ctx context.Context, cfg Config, calls Calls, up Reports) (_ *Registration, wait func()) {
	rctx, cancel := context.WithCancel(ctx)
	r := &Registration{
		ctx: rctx, cfg: cfg, calls: calls, up: up, done: make(chan struct{}), mu: make(chan struct{}, 1),
		// Retries are not urgent either: from BackoffMax, doubling to
		// the renewal period, so that a failing API sees few of them.
		retry: cfg.NewBackoff(cfg.BackoffMax, max(cfg.BackoffMax, cfg.Renewal)),
	}
	unhook := context.AfterFunc(up.Off(), cancel)
	// Not urgent, and not with the first campaign's calls: a candidate
	// that is not registered yet still follows, and takes its turn after
	// the successors named.
	r.lock()
	r.setLocked(pace.Jitter(cfg.RetryPeriod, 0.5))
	r.unlock()
	ended := make(chan struct{}) // closed by the returned function
	context.AfterFunc(rctx, func() {
		defer close(r.done)
		unhook()
		if ctx.Err() != nil {
			<-ended // Run ends: deleted last (no writes meanwhile: rctx is done)
		}
		r.deregister(ctx)
	})
	return r, func() {
		close(ended)
		cancel()
		<-r.done
		r.timers.Wait()
	}
}

// Registration is one Run's registration of this candidate (Register).
// Its methods are safe for concurrent use.
type Registration struct {
	ctx   context.Context // done when the registration ends
	cfg   Config
	calls Calls
	up    Reports
	retry Backoff
	done  chan struct{} // closed once deregistered

	// mu is held by a write for its whole call, so that deregister waits
	// for the write in progress (ctx, done first, cuts it short). A
	// channel of one, not a sync.Mutex: a wait on a channel is durable
	// for testing/synctest, whose simulated time would stop while a
	// goroutine waited for a Mutex held across a call.
	mu    chan struct{}
	own   *coordinationv1.Lease // the registration last written, or nil
	timer *time.Timer           // the next write's
	// timers counts the timers set whose function has not returned yet
	// (or that were stopped before it ran).
	timers sync.WaitGroup
}

func (r *Registration) lock()   { r.mu <- struct{}{} }
func (r *Registration) unlock() { <-r.mu }

// setLocked sets the next write d from now. Requires mu.
func (r *Registration) setLocked(d time.Duration) {
	r.timers.Add(1)
	r.timer = time.AfterFunc(d, func() {
		defer r.timers.Done()
		r.write()
	})
}

// RenewNow makes the registration's next write happen at once, unless one
// is in progress or it has ended. It does not wait for the write.
func (r *Registration) RenewNow() {
	r.lock()
	defer r.unlock()
	if r.ctx.Err() != nil || r.timer == nil || !r.timer.Stop() {
		return
	}
	r.timers.Done() // its function will not run
	r.setLocked(0)
}

// write writes the registration, and sets the next write.
func (r *Registration) write() {
	r.lock()
	defer r.unlock()
	if r.ctx.Err() != nil {
		return // deregistered, or about to be: no more writes
	}
	l, other, err := writeRegistration(r.ctx, &r.cfg, r.calls, r.own)
	if other != "" && r.own != nil {
		// It was ours, and another Elector wrote it since: a process
		// that is gone writes nothing.
		// Named from the config: l is nil when the write after the read failed.
		r.up.DuplicateIdentity(fmt.Sprintf("its registration %s was written by another process (instance %s) since this one (instance %s) wrote it",
			wire.RegistrationName(r.cfg.Name, r.cfg.Identity), other, r.cfg.Instance))
	}
	switch {
	case err == nil:
		r.own = l
		r.retry.Reset()
	case forbids(&r.cfg, err):
		r.own = nil // nothing to delete that this candidate may write
		r.up.Forbidden(VerbRegister, err)
		return // no next write: the registry is off
	case apierrors.IsConflict(err):
		r.own = nil // changed by someone else: read it again
	}
	wait := pace.Jitter(r.cfg.Renewal, 0.1)
	if err != nil {
		wait = r.retry.Next()
	}
	r.setLocked(wait)
}

// deregister stops the writes, once the one in progress returned, and
// deletes the registration last written, if any, on a context of runCtx's
// values that ends after RenewDeadline. It runs once r.ctx is done, so a
// timer that fired meanwhile writes nothing.
func (r *Registration) deregister(runCtx context.Context) {
	r.lock()
	if r.timer.Stop() {
		r.timers.Done() // its function will not run
	}
	own := r.own
	r.unlock()
	if own == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), r.cfg.RenewDeadline)
	defer cancel()
	err := r.calls.Do(dctx, VerbDeregister, true, func(ctx context.Context) error {
		return r.cfg.Leases.Delete(ctx, own.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &own.ResourceVersion}})
	})
	if apierrors.IsForbidden(err) {
		r.up.CannotDelete(VerbDeregister, err)
	}
}

// forbids reports whether err, from a registry call (the registration's
// write, the leader's list or watch), turns the registry off for good: a
// 403 unless Needed. With shards a 403 is retried as any error, after the
// backoff: the assignment needs the registry, a candidate that is not
// registered is given no shard, and RBAC applied late (or an authorizer's
// hiccup) must not leave it out, or stop the assignment, for the rest of
// the Run (relect's TestBreakRegistration403IsRetried).
func forbids(cfg *Config, err error) bool {
	return apierrors.IsForbidden(err) && !cfg.Needed
}

// writeRegistration writes the registration: an Update of own, the one
// last written — or, without it, or when it is gone (deleted by hand, or
// by a leader that judged it lapsed while this candidate was cut off), a
// Create; and when one exists already (left by a previous process of the
// same identity, or own was stale), a read and an Update of what is there.
// other is the instance that wrote what it read, if not this Elector.
func writeRegistration(ctx context.Context, cfg *Config, calls Calls, own *coordinationv1.Lease) (_ *coordinationv1.Lease, other string, _ error) {
	write := func(create bool, from *coordinationv1.Lease) (out *coordinationv1.Lease, err error) {
		err = calls.DoSpare(ctx, VerbRegister, true, func(ctx context.Context) error {
			var err error
			if create {
				out, err = cfg.Leases.Create(ctx, cfg.Registration(nil, time.Now()), metav1.CreateOptions{})
			} else {
				out, err = cfg.Leases.Update(ctx, cfg.Registration(from, time.Now()), metav1.UpdateOptions{})
			}
			return err
		})
		return out, err
	}
	if own != nil {
		out, err := write(false, own)
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return out, "", err
		}
	}
	out, err := write(true, nil)
	if !apierrors.IsAlreadyExists(err) {
		return out, "", err
	}
	var there *coordinationv1.Lease
	err = calls.DoSpare(ctx, VerbRegister, true, func(ctx context.Context) error {
		var err error
		there, err = cfg.Leases.Get(ctx, wire.RegistrationName(cfg.Name, cfg.Identity), metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	if i := there.Annotations[wire.AnnotationInstance]; i != cfg.Instance {
		other = i
	}
	out, err = write(false, there)
	return out, other, err
}
