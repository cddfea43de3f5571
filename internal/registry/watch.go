package registry

import (
	"context"
	"errors"
	"time"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Watch keeps the leader's view of the registrations while ctx (the
// term's) lasts: it lists them, then watches them, resuming after the
// last resourceVersion when the server ends the watch and listing again
// after an error; when ctx ends, the view is dropped (Reports.Unknown). It
// starts half a retry period into the term, so that its calls do not add
// to the acquisition's. It also deletes registrations that lapsed long
// ago (deleteLapsed), after each listing and every Renewal. A 403 to its
// list or watch turns the registry off (Reports.Forbidden; unless
// Needed). It blocks until ctx is done or the registry is off.
func Watch(ctx context.Context, cfg Config, calls Calls, up Reports) {
	defer up.Unknown()
	if pace.Sleep(ctx, cfg.RetryPeriod/2) != nil {
		return
	}
	w := &watcher{cfg: &cfg, calls: calls, up: up, selector: wire.RegistrationSelector(cfg.Name)}
	retry := cfg.NewBackoff(cfg.RetryPeriod, max(cfg.RetryPeriod, cfg.BackoffMax))
	sweep := time.NewTicker(cfg.Renewal)
	defer sweep.Stop()
	for ctx.Err() == nil {
		verb := VerbListCandidates
		rv, err := w.list(ctx)
		if err == nil {
			verb = VerbWatchCandidates
			err = w.follow(ctx, rv, sweep.C)
		}
		switch {
		case err == nil:
			retry.Reset()
		case forbids(&cfg, err):
			up.Forbidden(verb, err)
			return
		case pace.Sleep(ctx, retry.Next()) != nil:
			return
		}
	}
}

// watcher is the leader's view's calls, for one term (Watch).
type watcher struct {
	cfg      *Config
	calls    Calls
	up       Reports
	selector string // the registrations' label selector
}

// list lists the registrations into the view, deletes those lapsed, and
// returns the list's resourceVersion.
func (w *watcher) list(ctx context.Context) (rv string, _ error) {
	var list *coordinationv1.LeaseList
	err := w.calls.DoSpare(ctx, VerbListCandidates, true, func(ctx context.Context) error {
		var err error
		list, err = w.cfg.Leases.List(ctx, metav1.ListOptions{LabelSelector: w.selector})
		return err
	})
	if err != nil {
		return "", err
	}
	var rs []wire.Registration
	for i := range list.Items {
		if r, ok := wire.RegistrationOf(&list.Items[i]); ok {
			rs = append(rs, r)
		}
	}
	w.up.Listed(rs)
	w.deleteLapsed(ctx)
	return list.ResourceVersion, nil
}

// follow watches the registrations from resourceVersion rv until ctx is
// done (nil), or the watch fails (its error; a broken watch: a list starts
// over); at each tick of sweep it deletes lapsed registrations.
func (w *watcher) follow(ctx context.Context, rv string, sweep <-chan time.Time) error {
	r := leasewatch.Reader{Decode: w.calls.Decode, Handle: w.event, Tick: sweep, OnTick: func() { w.deleteLapsed(ctx) }}
	err := r.Follow(ctx, rv, func(ctx context.Context, rv string) (wi watch.Interface, err error) {
		err = w.calls.DoSpare(ctx, VerbWatchCandidates, false, func(ctx context.Context) error {
			wi, err = w.cfg.Leases.Watch(ctx, metav1.ListOptions{LabelSelector: w.selector, ResourceVersion: rv})
			return err
		})
		return wi, err
	})
	if errors.Is(err, leasewatch.ErrBroken) {
		return apierrors.NewResourceExpired("candidate watch broken")
	}
	return err
}

// event reads one event of the watch into the view.
func (w *watcher) event(e leasewatch.Event) {
	switch e.Kind {
	case leasewatch.Changed:
		if r, ok := wire.RegistrationOf(e.Lease); ok {
			w.up.Changed(r)
		} else {
			w.up.Gone(e.Lease.Name)
		}
	case leasewatch.Deleted:
		if e.Lease != nil {
			w.up.Gone(e.Lease.Name)
		}
	}
}

// deleteLapsed deletes, as the leader, up to a few registrations that it
// has seen unchanged for twice their lease duration, on its own clock
// (Reports.Lapsed) — left by candidates that died without deregistering.
// The renew time in a registration is its candidate's own clock, which
// may lag or lead this one: it is never compared. A deletion is
// conditional on the version seen, so a registration renewed meanwhile
// stays. A 403 (no delete permission) leaves them. It runs on the watch's
// reader, so it never waits for the rate limiter's spare tokens
// (Calls.TrySpare): without them now, the deletions wait for the next
// sweep, and the watch is read meanwhile.
func (w *watcher) deleteLapsed(ctx context.Context) {
	lapsed := w.up.Lapsed()
	for _, v := range lapsed[:min(len(lapsed), maxDeletions)] {
		tried, err := w.calls.TrySpare(ctx, VerbDeleteCandidate, true, func(ctx context.Context) error {
			return w.cfg.Leases.Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &v.RV}})
		})
		if !tried {
			return // no spare tokens now: at the next sweep
		}
		if apierrors.IsForbidden(err) {
			w.up.CannotDelete(VerbDeleteCandidate, err)
			return
		}
	}
}

// maxDeletions is how many lapsed registrations the leader deletes at
// most per sweep (and after each listing).
const maxDeletions = 3
