package shards

import (
	"context"
	"time"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The assigner's view of the shard Leases: one list, then one watch (a
// label selector), kept by a goroutine of its own (observe), and the
// creation of the shard Leases watched missing (creator). Times are the
// local clock's, when each change was observed.

// shardSeen is one shard Lease as the leader last observed it.
type shardSeen struct {
	holder   string
	rv       string
	released bool // released by its holder (wire.Released)
	missing  bool
	at       time.Time // local time of the last change observed (or of the first observation)
	// listed: first seen in this term's list, missing or free since
	// before the term (a gap this leader did not see begin).
	listed bool
}

// observe keeps the view of the shard Leases until ctx is done: a list,
// then a watch from its version; a list again after an error.
func (a *assigner) observe(ctx context.Context) {
	retry := a.port.NewRetry()
	selector := wire.ShardSelector(a.cfg.Name)
	for ctx.Err() == nil {
		var list *coordinationv1.LeaseList
		err := a.port.Do(ctx, VerbListShardLeases, true, func(ctx context.Context) error {
			var err error
			list, err = a.cfg.Leases.List(ctx, metav1.ListOptions{LabelSelector: selector})
			return err
		})
		if err != nil {
			if pace.Sleep(ctx, retry.Next()) != nil {
				return
			}
			continue
		}
		a.mu.Lock()
		a.listed(list.Items, time.Now())
		a.mu.Unlock()
		a.signal()
		r := leasewatch.Reader{Decode: a.port.Decode, Handle: a.event, Watching: a.setWatching, Resuming: retry.Reset}
		_ = r.Follow(ctx, list.ResourceVersion, func(ctx context.Context, rv string) (w watch.Interface, err error) {
			err = a.port.Do(ctx, VerbWatchShardLeases, false, func(ctx context.Context) error {
				w, err = a.cfg.Leases.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv})
				return err
			})
			return w, err
		})
		if pace.Sleep(ctx, retry.Next()) != nil {
			return
		}
	}
}

// setWatching records whether a watch keeps the view.
func (a *assigner) setWatching(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watching = on
}

// signal wakes the decision after a change of the view.
func (a *assigner) signal() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// event reads one watch event into the view and wakes the decision.
func (a *assigner) event(e leasewatch.Event) {
	a.mu.Lock()
	switch e.Kind {
	case leasewatch.Changed:
		a.observeLease(e.Lease, time.Now())
	case leasewatch.Deleted:
		if e.Lease != nil {
			if sh, ok := a.byLease[e.Lease.Name]; ok {
				a.seen[sh] = &shardSeen{missing: true, at: time.Now()}
			}
		}
	}
	a.mu.Unlock()
	a.signal()
}

// listed replaces the view of the shard Leases with a list seen at now: a
// Lease whose version is the one seen before keeps its time of change.
func (a *assigner) listed(items []coordinationv1.Lease, now time.Time) {
	a.listedOnce = true
	was := a.seen
	a.seen = map[string]*shardSeen{}
	for i := range items {
		if sh, ok := a.byLease[items[i].Name]; ok {
			a.seen[sh] = was[sh]
			a.observeLease(&items[i], now)
			if was[sh] == nil {
				a.seen[sh].listed = true
			}
		}
	}
	for _, sh := range a.cfg.Shards {
		if a.seen[sh] == nil {
			// Missing since the list at the earliest: a gap in the watch
			// may have hidden a holder.
			a.seen[sh] = &shardSeen{missing: true, at: now, listed: was[sh] == nil}
		}
	}
}

// observeLease records shard Lease l, seen at now. Requires mu.
func (a *assigner) observeLease(l *coordinationv1.Lease, now time.Time) {
	sh, ok := a.byLease[l.Name]
	if !ok {
		return
	}
	s := a.seen[sh]
	if s != nil && !s.missing && s.rv == l.ResourceVersion {
		return
	}
	next := &shardSeen{holder: wire.Holder(l), rv: l.ResourceVersion, released: wire.Released(l), at: now}
	if s != nil && next.holder != "" && !next.released {
		if free := a.freeAt(sh, now); !free.IsZero() && !s.listed {
			a.port.Gap(now.Sub(free))
		}
	}
	if s != nil && s.holder != "" && !s.released && !s.missing && next.holder != "" && !next.released &&
		s.holder == a.table.Assigned[sh] && next.holder == a.table.Takers[sh] && next.holder != s.holder {
		// Taken by its taker without a release: the holder stopped
		// renewing and its lease expired, though this view may not have
		// seen it expire. It is left out as if it had (current).
		a.lost[s.holder] = true
	}
	if s != nil && s.holder != "" && next.released && a.table.Assigned[sh] == s.holder &&
		(a.writing == nil || a.writing.Assigned[sh] == s.holder) {
		// Released by the holder the table names: it gave the shard up
		// (its work was stuck, or returned, or it is leaving: Released
		// tells them apart). Not if the table being written moves it: its
		// holder may have seen that table before the write's answer came
		// back, and stepped down.
		if f := a.pace.Released(sh, s.holder, a.instances[s.holder], recordStreak(l), now); f != nil {
			a.failed = append(a.failed, *f)
		}
	}
	a.seen[sh] = next
}

// recordStreak is the streak of stuck handovers a shard Lease's record
// carries (its holder's work was stuck); 0 if none.
func recordStreak(l *coordinationv1.Lease) int {
	if s := wire.SuccessionOf(l); s != nil {
		return int(s.Streak)
	}
	return 0
}

// liveHolder returns who holds shard sh by its Lease at now: the holder
// named, while the Lease has changed within LeaseDuration; "" if it is
// free, missing, or expired.
func (a *assigner) liveHolder(sh string, now time.Time) string {
	s := a.seen[sh]
	if s == nil || s.missing || s.released || s.holder == "" || !now.Before(s.at.Add(a.cfg.LeaseDuration)) {
		return ""
	}
	return s.holder
}

// freeAt returns since when shard sh's Lease may be taken by anyone (its
// release, deletion or expiry, as observed); zero if it is held.
func (a *assigner) freeAt(sh string, now time.Time) time.Time {
	s := a.seen[sh]
	switch {
	case s == nil:
		return time.Time{}
	case s.missing || s.released:
		return s.at
	case s.holder == "" && !now.Before(s.at.Add(a.cfg.LeaseDuration)):
		return s.at.Add(a.cfg.LeaseDuration) // emptied by hand, waited out
	case !now.Before(s.at.Add(a.cfg.LeaseDuration)):
		return s.at.Add(a.cfg.LeaseDuration)
	}
	return time.Time{}
}

// late reports whether the candidate the table gave shard sh to, free at
// now, has had LeaseDuration + 2 × RetryPeriod since the later of the
// shard's freeing and the assignment to take it. Requires mu.
func (a *assigner) late(sh string, now time.Time) bool {
	free := a.freeAt(sh, now)
	if free.IsZero() {
		return false
	}
	if free.Before(a.assignedAt[sh]) {
		free = a.assignedAt[sh]
	}
	return !now.Before(free.Add(a.cfg.LeaseDuration + 2*a.cfg.RetryPeriod))
}

// creator creates the missing shard Leases (createMissing) every half
// retry period while ctx lasts, once the view is kept by a watch.
func (a *assigner) creator(ctx context.Context) {
	tick := time.NewTicker(a.cfg.RetryPeriod / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for ctx.Err() == nil && a.createMissing(ctx, time.Now()) {
		}
	}
}

// createMissing creates, released, one shard Lease this term has watched
// missing for LeaseDuration without a gap — the rule a follower creates a
// missing Lease by (docs/design.md, "revoked by hand") — so that its
// holder takes it at once; it reports whether it created one. It takes a
// spare token (gateway.doSpare): never one a table write needs. A Lease
// someone else created meanwhile is left alone (409 AlreadyExists), and
// the watch will show it.
func (a *assigner) createMissing(ctx context.Context, now time.Time) (created bool) {
	a.mu.Lock()
	var due []string
	if a.watching {
		for _, sh := range a.cfg.Shards {
			if s := a.seen[sh]; s != nil && s.missing && !now.Before(s.at.Add(a.cfg.LeaseDuration)) {
				due = append(due, sh)
				break
			}
		}
	}
	a.mu.Unlock()
	for _, sh := range due {
		holder, one, zero := "", int32(1), int32(0)
		t := metav1.NewMicroTime(now)
		name, labels := a.cfg.leaseOf(sh)
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.Namespace, Name: name, Labels: labels,
				Annotations: map[string]string{wire.AnnotationShard: sh, wire.AnnotationLease: a.cfg.Name}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &one, LeaseTransitions: &zero,
				AcquireTime: &t, RenewTime: &t},
		}
		a.mu.Lock()
		before := a.seen[sh]
		a.mu.Unlock()
		var out *coordinationv1.Lease
		err := a.port.DoSpare(ctx, VerbCreateShardLease, true, func(ctx context.Context) error {
			var err error
			out, err = a.cfg.Leases.Create(ctx, l, metav1.CreateOptions{})
			return err
		})
		a.mu.Lock()
		switch {
		case err == nil:
			if a.seen[sh] == before {
				// Unless the watch showed the Lease meanwhile (its holder
				// may have taken it already): the answer is older.
				a.observeLease(out, time.Now())
			}
		case apierrors.IsAlreadyExists(err):
			if s := a.seen[sh]; s != nil && s.missing {
				s.at = time.Now() // the watch will show it; no new try for LD
			}
		}
		a.mu.Unlock()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false // try again at the next tick
		}
	}
	return len(due) > 0
}
