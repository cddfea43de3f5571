package relect

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The candidate registry: each candidate publishes itself as a small Lease
// object beside the election's Lease — a registration, renewed every
// RegistrationRenewal — and the leader watches them (watchCandidates) to
// name its successors (see docs/design.md, "Succession"). Followers do not
// watch the registry: they learn the line of succession from the election's
// Lease, which they watch anyway, or, outside the line, from the line Lease
// (line.go).

// startRegistration keeps this candidate's registration until ctx is done,
// then deletes it (within RenewDeadline) once the returned function is
// called, and that function waits for the deletion. Run calls it last,
// after its campaign and every shard Elector released: a leader that saw
// the registration go before a holder's shard Leases were released would
// plan them anew, for candidates other than the takers that follow them
// (a table write and a wait more). The writes: a Create, or an Update of
// what a previous process of the same identity left, then an Update every
// RegistrationRenewal (±10 %). Failures are retried after BackoffMax,
// doubling up to the renewal period. A 403 turns the registry off for
// this Elector (registryForbidden); so does one on the leader's list or
// watch (but with shards, whose assignment needs the registry, a 403 to
// any of these is retried as any error), and then the registration, which
// nobody reads, is deleted at once. A write of its registration by another
// Elector (wire.AnnotationInstance) since its own is reported as a
// duplicate identity.
//
// It holds no goroutine between its writes: each runs on the goroutine of
// a timer (time.AfterFunc) and sets the next timer, and the deletion runs
// on the one context.AfterFunc starts when ctx is done — so that an idle
// follower pays no goroutine for its registration (issue 28).
func startRegistration(ctx context.Context, cfg *config, gw *gateway, up registryReports) (_ *registrar, wait func()) {
	rctx, cancel := context.WithCancel(ctx)
	r := &registrar{
		ctx: rctx, cfg: cfg, gw: gw, up: up, done: make(chan struct{}), mu: make(chan struct{}, 1),
		// Retries are not urgent either: from BackoffMax, doubling to
		// the renewal period, so that a failing API sees few of them.
		retry: pace.NewBackoff(cfg.BackoffMax, max(cfg.BackoffMax, cfg.RegistrationRenewal)),
	}
	unhook := context.AfterFunc(up.registryOff(), cancel)
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

// registrar is one Run's registration (startRegistration).
type registrar struct {
	ctx   context.Context // done when the registration ends
	cfg   *config
	gw    *gateway
	up    registryReports
	retry *pace.Backoff
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

func (r *registrar) lock()   { r.mu <- struct{}{} }
func (r *registrar) unlock() { <-r.mu }

// setLocked sets the next write d from now. Requires mu.
func (r *registrar) setLocked(d time.Duration) {
	r.timers.Add(1)
	r.timer = time.AfterFunc(d, func() {
		defer r.timers.Done()
		r.write()
	})
}

// write writes the registration, and sets the next write.
func (r *registrar) write() {
	r.lock()
	defer r.unlock()
	if r.ctx.Err() != nil {
		return // deregistered, or about to be: no more writes
	}
	l, other, err := writeRegistration(r.ctx, r.cfg, r.gw, r.own)
	if other != "" && r.own != nil {
		// It was ours, and another Elector wrote it since: a process
		// that is gone writes nothing.
		r.up.duplicateIdentity(fmt.Sprintf("its registration %s was written by another process (instance %s) since this one (instance %s) wrote it",
			l.Name, other, r.cfg.instance))
	}
	switch {
	case err == nil:
		r.own = l
		r.retry.Reset()
	case forbidsRegistry(r.cfg, err):
		r.own = nil // nothing to delete that this candidate may write
		r.up.registryForbidden(verbRegister, err)
		return // no next write: the registry is off
	case apierrors.IsConflict(err):
		r.own = nil // changed by someone else: read it again
	}
	wait := pace.Jitter(r.cfg.RegistrationRenewal, 0.1)
	if err != nil {
		wait = r.retry.Next()
	}
	r.setLocked(wait)
}

// deregister stops the writes, once the one in progress returned, and
// deletes the registration last written, if any, on a context of runCtx's
// values that ends after RenewDeadline. It runs once r.ctx is done, so a
// timer that fired meanwhile writes nothing.
func (r *registrar) deregister(runCtx context.Context) {
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
	err := r.gw.do(dctx, verbDeregister, true, func(ctx context.Context) error {
		return r.cfg.leases.Delete(ctx, own.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &own.ResourceVersion}})
	})
	if apierrors.IsForbidden(err) {
		r.up.registryCannotDelete(verbDeregister, err)
	}
}

// forbidsRegistry reports whether err, from a registry call (the
// registration's write, the leader's list or watch), turns the registry
// off for good: a 403 without shards. With shards a 403 is retried as any
// error, after the backoff: the assignment needs the registry, a candidate
// that is not registered is given no shard, and RBAC applied late (or an
// authorizer's hiccup) must not leave it out, or stop the assignment, for
// the rest of the Run (TestBreakRegistration403IsRetried).
func forbidsRegistry(cfg *config, err error) bool {
	return apierrors.IsForbidden(err) && len(cfg.shards) == 0
}

// writeRegistration writes the registration: an Update of own, the one
// last written — or, without it, or when it is gone (deleted by hand, or
// by a leader that judged it lapsed while this candidate was cut off), a
// Create; and when one exists already (left by a previous process of the
// same identity, or own was stale), a read and an Update of what is there.
// other is the instance that wrote what it read, if not this Elector.
func writeRegistration(ctx context.Context, cfg *config, gw *gateway, own *coordinationv1.Lease) (_ *coordinationv1.Lease, other string, _ error) {
	write := func(create bool, from *coordinationv1.Lease) (out *coordinationv1.Lease, err error) {
		err = gw.doSpare(ctx, verbRegister, true, func(ctx context.Context) error {
			var err error
			if create {
				out, err = cfg.leases.Create(ctx, registration(cfg, nil, time.Now()), metav1.CreateOptions{})
			} else {
				out, err = cfg.leases.Update(ctx, registration(cfg, from, time.Now()), metav1.UpdateOptions{})
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
	err = gw.doSpare(ctx, verbRegister, true, func(ctx context.Context) error {
		var err error
		there, err = cfg.leases.Get(ctx, registrationName(cfg.Name, cfg.identity), metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	if i := there.Annotations[wire.AnnotationInstance]; i != cfg.instance {
		other = i
	}
	out, err = write(false, there)
	return out, other, err
}

// registryReports is what the registry tells the Elector's state.
type registryReports interface {
	registryForbidden(verb string, err error)
	registryOff() context.Context
	registryCannotDelete(verb string, err error)
	duplicateIdentity(how string)
	candidatesListed(cs []candidate)
	candidateChanged(c candidate)
	candidateGone(name string)
	candidatesLapsed() []candidate
	candidatesUnknown()
}

// watchCandidates keeps the leader's view of the registrations while ctx
// (the term's) lasts: it lists them, then watches them, resuming after the
// last resourceVersion when the server ends the watch and listing again
// after an error; when ctx ends, the view is dropped. It starts half a
// retry period into the term, so that its calls do not add to the
// acquisition's. It also deletes registrations that lapsed long ago
// (deleteLapsed), after each listing and every RegistrationRenewal.
func watchCandidates(ctx context.Context, cfg *config, gw *gateway, up registryReports) {
	defer up.candidatesUnknown()
	if pace.Sleep(ctx, cfg.RetryPeriod/2) != nil {
		return
	}
	retry := newRetryBackoff(cfg)
	selector := wire.RegistrationSelector(cfg.Name)
	sweep := time.NewTicker(cfg.RegistrationRenewal)
	defer sweep.Stop()
	for ctx.Err() == nil {
		var list *coordinationv1.LeaseList
		err := gw.doSpare(ctx, verbListCandidates, true, func(ctx context.Context) error {
			var err error
			list, err = cfg.leases.List(ctx, metav1.ListOptions{LabelSelector: selector})
			return err
		})
		if forbidsRegistry(cfg, err) {
			up.registryForbidden(verbListCandidates, err)
			return
		}
		if err != nil {
			if pace.Sleep(ctx, retry.Next()) != nil {
				return
			}
			continue
		}
		var cs []candidate
		for i := range list.Items {
			if c, ok := candidateFrom(&list.Items[i]); ok {
				cs = append(cs, c)
			}
		}
		up.candidatesListed(cs)
		deleteLapsed(ctx, gw, up)
		if err := followCandidates(ctx, gw, up, selector, list.ResourceVersion, sweep.C); err != nil {
			if forbidsRegistry(cfg, err) {
				up.registryForbidden(verbWatchCandidates, err)
				return
			}
			if pace.Sleep(ctx, retry.Next()) != nil {
				return
			}
			continue
		}
		retry.Reset()
	}
}

// followCandidates watches the registrations from resourceVersion rv until
// ctx is done (nil), or the watch fails (its error; a broken watch: a list
// starts over); at each tick of sweep it deletes lapsed registrations.
func followCandidates(ctx context.Context, gw *gateway, up registryReports, selector, rv string, sweep <-chan time.Time) error {
	for {
		var w watch.Interface
		err := gw.doSpare(ctx, verbWatchCandidates, false, func(ctx context.Context) error {
			var err error
			w, err = gw.cfg.leases.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv})
			return err
		})
		if err != nil {
			return err
		}
		broken := readCandidates(ctx, gw, w, up, &rv, sweep)
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case broken:
			return apierrors.NewResourceExpired("candidate watch broken")
		}
		// Closed by the server: resume from rv.
	}
}

// readCandidates reads w's events into the view until ctx is done or the
// watch ends: closed by the server, or broken by an error event. At each
// tick of sweep it deletes lapsed registrations.
func readCandidates(ctx context.Context, gw *gateway, w watch.Interface, up registryReports, rv *string, sweep <-chan time.Time) (broken bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-sweep:
			deleteLapsed(ctx, gw, up)
		case ev, open := <-w.ResultChan():
			e := gw.event(ev, open)
			if e.Lease != nil {
				*rv = e.Lease.ResourceVersion
			}
			switch e.Kind {
			case leasewatch.Closed:
				return false
			case leasewatch.Broken:
				return true
			case leasewatch.Changed:
				if c, ok := candidateFrom(e.Lease); ok {
					up.candidateChanged(c)
				} else {
					up.candidateGone(e.Lease.Name)
				}
			case leasewatch.Deleted:
				if e.Lease != nil {
					up.candidateGone(e.Lease.Name)
				}
			}
		}
	}
}

// deleteLapsed deletes, as the leader, up to a few registrations that it
// has seen unchanged for twice their lease duration, on its own clock
// (state.candidatesLapsed) — left by candidates that died without
// deregistering. The renew time in a registration is its candidate's own
// clock, which may lag or lead this one: it is never compared. A
// deletion is conditional on the version seen, so a registration renewed
// meanwhile stays. A 403 (no delete permission) leaves them. It runs on
// the registry watch's reader, so it never waits for the rate limiter's
// spare tokens (trySpare): without them now, the deletions wait for the
// next sweep, and the watch is read meanwhile.
func deleteLapsed(ctx context.Context, gw *gateway, up registryReports) {
	lapsed := up.candidatesLapsed()
	for _, c := range lapsed[:min(len(lapsed), 3)] {
		rv := c.rv
		tried, err := gw.trySpare(ctx, verbDeleteCandidate, true, func(ctx context.Context) error {
			return gw.cfg.leases.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		})
		if !tried {
			return // no spare tokens now: at the next sweep
		}
		if apierrors.IsForbidden(err) {
			up.registryCannotDelete(verbDeleteCandidate, err)
			return
		}
	}
}

// The registry's reports (registryReports), and the lines of succession
// (lineage, succession.go), under mu.

// registryForbidden records that a registry call of verb got 403: the
// registry is off for this Elector from now on (ending registryOff), and
// a warning says which RBAC rule is missing and how to go without.
// Reported once.
func (s *state) registryForbidden(verb string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.succession.off {
		return
	}
	s.succession.off = true
	s.offRegistry()
	e := fmt.Errorf("%w: this candidate may not %s the Leases of namespace %s: %w; "+
		"grant its Role leases get, watch, create, update, list and delete (deploy/), "+
		"or set Options.DisableRegistry (relect run and sidecar: --disable-registry) to go without a line of succession",
		ErrRegistryOff, rbacVerb(verb), s.cfg.Namespace, err)
	s.logs.Log(slog.LevelWarn, "relect: the candidate registry is off", "lease", s.cfg.describe, "err", e)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// registryOff returns a context done once the registry is off for this
// Elector (registryForbidden): a context, not a channel, so that the
// registration waits for it without a goroutine (context.AfterFunc).
func (s *state) registryOff() context.Context { return s.registryOffCtx }

// registryCannotDelete warns, once, that registrations cannot be deleted
// (403 to verb): this candidate's stays after Run returns, and a leader's
// lapsed ones stay, until someone deletes them; they lapse for the leader
// all the same.
func (s *state) registryCannotDelete(verb string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warnedDelete {
		return
	}
	s.warnedDelete = true
	e := fmt.Errorf("relect: this candidate may not delete the Leases of namespace %s (%s: %w): "+
		"registrations of candidates that stopped stay until deleted by hand (they lapse for the leader meanwhile); "+
		"grant leases delete, or set Options.DisableRegistry (--disable-registry)", s.cfg.Namespace, verb, err)
	s.logs.Log(slog.LevelWarn, "relect: registrations cannot be deleted", "lease", s.cfg.describe, "err", e)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// rbacVerb is the RBAC verb a registry call needs.
func rbacVerb(v string) string {
	switch v {
	case verbListCandidates:
		return "list"
	case verbWatchCandidates:
		return "watch"
	case verbDeregister, verbDeleteCandidate:
		return "delete"
	}
	return "get, create or update"
}

// duplicateIdentity reports that another process seems to run with this
// Elector's identity (how says what showed it): an EventError wrapping
// ErrDuplicateIdentity and a warning, at most once per RegistrationRenewal
// for each way it shows.
func (s *state) duplicateIdentity(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.duplicateLocked(how)
}

// duplicateLocked is duplicateIdentity. Requires mu.
func (s *state) duplicateLocked(how string) {
	now := time.Now()
	if at, ok := s.duplicateAt[how]; ok && now.Sub(at) < s.cfg.RegistrationRenewal {
		return
	}
	if s.duplicateAt == nil {
		s.duplicateAt = map[string]time.Time{}
	}
	s.duplicateAt[how] = now
	e := fmt.Errorf("%w %q: %s; give every candidate its own Identity (in a pod, its name)", ErrDuplicateIdentity, s.cfg.identity, how)
	s.logs.Log(slog.LevelWarn, "relect: "+e.Error(), "lease", s.cfg.describe)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// candidatesListed replaces the leader's view with a fresh list.
func (s *state) candidatesListed(cs []candidate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.listed(cs, time.Now())
	s.changedLocked() // a HandOver may wait for the view (stepDown)
}

// candidateChanged records a registration added or renewed.
func (s *state) candidateChanged(c candidate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.changed(c, time.Now())
}

// candidateGone records a registration deleted, or departed.
func (s *state) candidateGone(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.gone(name)
}

// candidatesLapsed returns the registrations of the leader's view that it
// has seen unchanged for twice their lease duration, on its own clock.
func (s *state) candidatesLapsed() []candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.succession.lapsedLongAgo(time.Now())
}

// candidatesUnknown drops the leader's view: the term ended. When each
// registration was first seen at its version is kept (lineage.sightings).
func (s *state) candidatesUnknown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.view = nil
}

// annotate sets relect's annotations on a Lease object about to be written
// with rec (leaserecord.Lock, and the follower's acquiring write): the line of
// succession, and for a record that names another holder — a handover —
// the handover mark. Annotations of relect's that the write does not carry
// are removed, an operator's Request among them.
func (s *state) annotate(l *coordinationv1.Lease, rec *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(l.Annotations, wire.AnnotationSuccession)
	delete(l.Annotations, wire.AnnotationHandOver)
	// A Request is for one term: honoured (this write is its release or
	// handover), refused, or stale. The write is conditional on the
	// version read, so it never removes one it did not see.
	delete(l.Annotations, wire.AnnotationRequest)
	delete(l.Annotations, wire.AnnotationFence)
	term := leaserecord.ClampTransitions(rec.LeaderTransitions)
	set := func(k, v string) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[k] = v
	}
	for k, v := range s.cfg.leaseLabels { // a shard Lease's, for the leader's watch
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[k] = v
	}
	if s.cfg.shard != "" {
		set(wire.AnnotationShard, s.cfg.shard)
	}
	to := ""
	if h := rec.HolderIdentity; h != "" && h != s.cfg.identity {
		to = h
		set(wire.AnnotationHandOver, (&handOver{Term: term, From: s.cfg.identity, To: to}).Encode())
	}
	sc := s.succession.next(s.cfg, term, time.Now(), to)
	switch {
	case !s.cfg.registry || s.cfg.leases == nil:
	case rec.HolderIdentity == s.cfg.identity:
		if !s.wantLineLocked(term, sc) && sc != nil && sc.Posted {
			said := *sc // not posted yet: the next write says it
			said.Posted = false
			sc = &said
		}
	case to != "":
		s.wantHandOverLineLocked(to, term, sc)
	}
	if sc != nil {
		set(wire.AnnotationSuccession, sc.Encode())
	}
	if t := s.term; t != nil && t.fence != "" && rec.HolderIdentity == s.cfg.identity {
		// Bound to the record's term number, which a hand edit of leaseTransitions
		// may have changed under the term: operator.Fence matches the Lease as it is.
		raw, _ := json.Marshal(wire.FenceMark{Holder: s.cfg.identity, Term: term, Fence: string(t.fence)})
		set(wire.AnnotationFence, string(raw)) // the term's renewals publish its fence, for tools
	}
}

// knownCandidates returns the candidates as this Elector knows them (see
// Elector.Candidates).
func (s *state) knownCandidates() []Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	self := Candidate{Identity: s.cfg.identity, Priority: s.cfg.Priority, Standby: s.cfg.Standby}
	return s.succession.known(s.cfg, self, s.leader, time.Now())
}

// renewNow makes the registration's next write happen at once, unless one
// is in progress or it has ended.
func (r *registrar) renewNow() {
	r.lock()
	defer r.unlock()
	if r.ctx.Err() != nil || r.timer == nil || !r.timer.Stop() {
		return
	}
	r.timers.Done() // its function will not run
	r.setLocked(0)
}
