package relect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errWatchForbidden ends following when the candidate may not watch the
// Lease; the Elector then polls as client-go does.
var errWatchForbidden = errors.New("relect: not allowed to watch the Lease; polling instead")

// follower is the state of one follow phase: what this candidate knows of the
// Lease and since when.
type follower struct {
	e          *Elector
	wrote      bool                  // an acquiring write was sent
	lease      *coordinationv1.Lease // last observed; nil if missing or unknown
	known      bool                  // lease reflects a read or a watch event
	raw        []byte                // its record, to tell a change
	observedAt time.Time             // local time the record last changed
	rv         string                // where a new watch resumes
	// createAt: the Lease is missing; it is not created before then
	// (zero: not before a watch is open; see observe).
	createAt time.Time
	w        watch.Interface
}

// follow is a follower's campaign when relect has the Lease client (Config or
// Client): instead of client-go's poll every RetryPeriod, it watches the one
// Lease, and tries to acquire it the moment it is released or deleted, or
// when (its observation of the last change + the lease duration) passes —
// client-go's expiry rule on the local clock, with relect's floor of its own
// LeaseDuration and its rule for records naming it that it did not write.
// The acquisition is a write conditional on the resourceVersion observed, so
// a renewal missed by the watch makes it fail with a conflict, never
// succeed. follow returns once this candidate holds the lease, with its
// watch still open (or nil if it had none) and the resourceVersion of its
// acquiring write: client-go then resumes the lease (its acquire loop sees
// our record) and renews it, and the leader keeps reading the watch
// (watchTerm). It returns ctx's error when ctx is done,
// and errWatchForbidden on a 403 to the watch; wrote reports whether it sent
// an acquiring write, which may have been applied even if it failed here.
// All calls go through the lock's bucket and counters.
func (e *Elector) follow(ctx context.Context) (w watch.Interface, rv string, wrote bool, err error) {
	f := &follower{e: e}
	defer func() { wrote = f.wrote }()
	acquired := false
	defer func() {
		if !acquired {
			f.stopWatch()
		}
	}()
	needRead := true
	retry := newRetryBackoff(e.cfg) // after failed calls; reset once watching
	for {
		if err := ctx.Err(); err != nil {
			return nil, "", false, err
		}
		if needRead {
			if err := f.read(ctx); err != nil {
				if err := e.sleep(ctx, retry.next()); err != nil {
					return nil, "", false, err
				}
				continue
			}
			needRead = false
		}
		if f.due() {
			err := f.acquire(ctx)
			if err == nil {
				acquired = true
				return f.w, f.rv, true, nil // the leader keeps watching; w may be nil
			}
			// Someone else won, the Lease moved on, or the API failed:
			// read again, and after a failure also start a fresh watch
			// (its connection may be dead).
			needRead = true
			if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
				f.stopWatch()
				if err := e.sleep(ctx, retry.next()); err != nil {
					return nil, "", false, err
				}
			}
			continue
		}
		if f.w == nil {
			if err := f.watch(ctx); err != nil {
				if apierrors.IsForbidden(err) {
					return nil, "", false, errWatchForbidden
				}
				needRead = true
				if err := e.sleep(ctx, retry.next()); err != nil {
					return nil, "", false, err
				}
				continue
			}
			retry.reset() // watching: the follower's steady state
		}
		expiry := time.NewTimer(time.Until(f.expiry()))
		select {
		case <-ctx.Done():
			expiry.Stop()
			return nil, "", false, ctx.Err()
		case <-expiry.C:
			// due() now holds: the loop tries to acquire.
		case ev, ok := <-f.w.ResultChan():
			expiry.Stop()
			switch {
			case !ok:
				f.w = nil // closed by the server: resume from f.rv
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					f.observe(l, true)
				}
			case ev.Type == watch.Deleted:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					f.rv = l.ResourceVersion // a resumed watch goes on from here
				}
				f.observe(nil, true)
			case ev.Type == watch.Bookmark:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					f.rv = l.ResourceVersion
				}
			default: // watch.Error, e.g. 410 Gone: start over with a read
				f.stopWatch()
				needRead = true
			}
		}
	}
}

// pause waits one RetryPeriod.
func (e *Elector) pause(ctx context.Context) error { return e.sleep(ctx, e.cfg.RetryPeriod) }

// sleep waits d, or until ctx is done.
func (e *Elector) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (f *follower) stopWatch() {
	if f.w != nil {
		f.w.Stop()
		f.w = nil
	}
}

// read gets the Lease. NotFound is an observation (no Lease), not an error.
func (f *follower) read(ctx context.Context) error {
	var l *coordinationv1.Lease
	err := f.e.lock.call(ctx, "get", true, func(ctx context.Context) error {
		var err error
		l, err = f.e.cfg.leases.Get(ctx, f.e.cfg.Name, metav1.GetOptions{})
		return err
	})
	switch {
	case err == nil:
		f.observe(l, false)
	case apierrors.IsNotFound(err):
		f.observe(nil, false)
		f.rv = ""
	default:
		return err
	}
	return nil
}

// watch opens a watch on the one Lease, resuming after f.rv. A watch that
// cannot resume (no resourceVersion known: the last read found no Lease)
// starts a missing Lease's creation wait over from the moment it is open:
// what happened before is unseen.
func (f *follower) watch(ctx context.Context) error {
	err := f.e.lock.call(ctx, "watch", false, func(ctx context.Context) error {
		w, err := f.e.cfg.leases.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", f.e.cfg.Name).String(),
			ResourceVersion: f.rv,
		})
		f.w = w
		return err
	})
	if err == nil && f.known && f.lease == nil && (f.rv == "" || f.createAt.IsZero()) {
		f.createAt = time.Now().Add(f.leaseDuration())
	}
	return err
}

// leaseDuration is our own LeaseDuration, in the Lease's whole seconds.
func (f *follower) leaseDuration() time.Duration {
	return time.Duration(f.e.lock.leaseSeconds) * time.Second
}

// observe records a Lease read, or shown by the watch if fromWatch (nil: it
// does not exist). The observation time moves only when the record changes,
// as in client-go.
func (f *follower) observe(l *coordinationv1.Lease, fromWatch bool) {
	if l == nil {
		// A missing Lease may have been deleted by hand while held, and
		// its holder lead on, unaware, until its next renewal fails:
		// RenewDeadline at most after its last successful one, which was
		// before the deletion. So it is created only once this follower
		// has watched it missing, without a gap, for our own
		// LeaseDuration (not the deleted record's: that may be absurd) —
		// also when this process never saw it: it cannot tell a Lease
		// that never existed from one deleted a moment ago, nor see a
		// Lease created and deleted again while it was not watching. A
		// deletion the watch shows, or a read while a watch is open,
		// starts that time at once; any other read starts it when a
		// watch opens (createAt stays zero until then; see watch).
		f.createAt = time.Time{}
		if fromWatch || f.w != nil {
			f.createAt = time.Now().Add(f.leaseDuration())
		}
		f.known = true
		f.lease, f.raw, f.observedAt = nil, nil, time.Now()
		f.e.observedMissing()
		return
	}
	f.known = true
	f.createAt = time.Time{}
	f.lease = l
	f.rv = l.ResourceVersion
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec)
	raw := recordKey(rec)
	if !bytes.Equal(raw, f.raw) {
		f.raw, f.observedAt = raw, time.Now()
	}
	f.e.observed(rec)
}

// recordKey identifies a record to tell whether it changed: its JSON plus the
// renew and acquire times at full precision, because the JSON has whole
// seconds and two renewals within one second would look the same.
func recordKey(rec *resourcelock.LeaderElectionRecord) []byte {
	raw, _ := json.Marshal(rec)
	raw = append(raw, rec.RenewTime.UTC().Format(time.RFC3339Nano)...)
	return append(raw, rec.AcquireTime.UTC().Format(time.RFC3339Nano)...)
}

// record returns the observed record, or nil.
func (f *follower) record() *resourcelock.LeaderElectionRecord {
	if f.lease == nil {
		return nil
	}
	return resourcelock.LeaseSpecToLeaderElectionRecord(&f.lease.Spec)
}

// ours reports whether the record is the one this Elector last wrote: then it
// may be resumed at once.
func (f *follower) ours(rec *resourcelock.LeaderElectionRecord) bool {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	return rec.HolderIdentity == f.e.Identity() && sameRecord(rec, f.e.written)
}

// expiry is when the observed lease may be taken over: if there is none,
// when it may be created (see observe); at once if it was released or is
// ours; else the observation time plus the longer of the record's lease
// duration and ours.
func (f *follower) expiry() time.Time {
	rec := f.record()
	switch {
	case !f.known:
		return time.Time{}
	case rec == nil:
		if f.createAt.IsZero() {
			return time.Now().Add(never) // not watched missing yet
		}
		return f.createAt
	case released(rec) || f.ours(rec):
		return time.Time{}
	case rec.HolderIdentity == "":
		// Emptied by hand: our own lease duration, whatever the record
		// says (it may be absurd, and no holder is left to repair it).
		return f.observedAt.Add(time.Duration(f.e.lock.leaseSeconds) * time.Second)
	}
	secs := max(rec.LeaseDurationSeconds, f.e.lock.leaseSeconds)
	return f.observedAt.Add(time.Duration(secs) * time.Second)
}

// released reports whether a record is a release: no holder, and the lease
// duration of 1 s that relect and client-go write when they release. A
// holder emptied any other way (by hand) may still be acted on by whoever
// held it, until its next renewal: it is waited out like a held lease.
func released(rec *resourcelock.LeaderElectionRecord) bool {
	return rec.HolderIdentity == "" && rec.LeaseDurationSeconds == 1
}

// never is a wait longer than any follower waits for: a year.
const never = 365 * 24 * time.Hour

func (f *follower) due() bool { return f.known && !time.Now().Before(f.expiry()) }

// acquire writes a record naming this candidate: a Create if there is no
// Lease (leaseTransitions: Elector.recreatedTransitions), else an Update
// conditional on the observed resourceVersion, with leaseTransitions + 1
// unless it resumes its own record. The write is not
// the start of a term: client-go's elector, run next, resumes it with a
// write of its own, and the term begins there.
func (f *follower) acquire(ctx context.Context) error {
	e := f.e
	var transitions int32
	if rec := f.record(); rec != nil {
		transitions = clampTransitions(rec.LeaderTransitions)
		if !f.ours(rec) && transitions < math.MaxInt32 {
			transitions++
		}
	} else {
		transitions = e.recreatedTransitions()
	}
	// spec is stamped when the request is sent, after the bucket wait.
	spec := func(sent time.Time) coordinationv1.LeaseSpec {
		now := metav1.NewMicroTime(sent)
		seconds := int32(e.lock.leaseSeconds)
		id := e.Identity()
		return coordinationv1.LeaseSpec{
			HolderIdentity:       &id,
			LeaseDurationSeconds: &seconds,
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     &transitions,
		}
	}

	if f.lease == nil {
		return e.lock.call(ctx, "create", true, func(ctx context.Context) error {
			sent := time.Now()
			f.wrote = true
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name}, Spec: spec(sent)}
			created, err := e.cfg.leases.Create(ctx, l, metav1.CreateOptions{})
			if err == nil {
				f.rv = created.ResourceVersion
				e.acquiredByFollower(sent, created)
			}
			return err
		})
	}
	return e.lock.call(ctx, "update", true, func(ctx context.Context) error {
		sent := time.Now()
		f.wrote = true
		l := f.lease.DeepCopy()
		l.Spec = spec(sent)
		updated, err := e.cfg.leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			f.rv = updated.ResourceVersion
			e.acquiredByFollower(sent, updated)
		}
		return err
	})
}

// clampTransitions keeps a leaseTransitions the apiserver accepts: 0 to
// MaxInt32. Counting past MaxInt32 (a hand edit, or 2^31 changes of holder)
// would wrap to a negative value the apiserver rejects with 422, wedging the
// election; it saturates instead, so term numbers stop growing there.
func clampTransitions(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// acquiredByFollower records a follower's successful acquisition, sent at
// sent, so that client-go's resume sees the record as ours and the term's
// validity counts from this write if the resume's JSON is the same.
func (e *Elector) acquiredByFollower(sent time.Time, l *coordinationv1.Lease) {
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noteWriteLocked(sent, rec)
}

// watchTerm reads the watch the follower had open for as long as the
// campaign lasts: a record naming another holder, an emptied holder or a
// deletion — an operator's hand edit, say — ends the term the moment it is
// seen, instead of at the next renewal (up to RetryPeriod later). Our own
// renewals come back as events naming us and change nothing. If the watch
// ends, renewals alone detect a loss, as with client-go. It costs no call,
// unless the follower had no watch open.
func (e *Elector) watchTerm(ctx context.Context, w watch.Interface, rv string) {
	if w == nil {
		// The follower acquired before it watched (it found the lease
		// free at its first read): open one — at once if the bucket has
		// a token to spare beyond the next renewal's, else after a
		// RetryPeriod, so as not to delay a renewal — from our acquiring
		// write, so that an edit made before it opens is still shown. A
		// failure leaves the renewals to detect a loss.
		if e.lock.limiter.Tokens() < 2 && e.pause(ctx) != nil {
			return
		}
		err := e.lock.call(ctx, "watch", false, func(ctx context.Context) error {
			var err error
			w, err = e.cfg.leases.Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String(),
				ResourceVersion: rv,
			})
			return err
		})
		if err != nil {
			return
		}
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					e.observed(resourcelock.LeaseSpecToLeaderElectionRecord(&l.Spec))
				}
			case watch.Deleted:
				e.observedMissing()
			case watch.Error:
				return
			}
		}
	}
}
