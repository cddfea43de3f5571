package relect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lock wraps the resource lock client-go's LeaderElector drives. Every call
// goes through it, so it is where relect
//
//   - paces: each Get, Create and Update first takes a token from the
//     Elector's bucket, so no loop, client-go's or ours, exceeds the budget;
//   - bounds: each call gets its own timeout (half the renew deadline), so a
//     hung request cannot stall a campaign;
//   - observes: the instant a write is sent (t_send, taken after the bucket
//     and before the request) and its outcome, and every record read, which
//     drive IsLeader, the term watchdog, new-leader events and loss detection.
type lock struct {
	e            *Elector
	inner        resourcelock.Interface
	limiter      *rate.Limiter
	callTimeout  time.Duration
	leaseSeconds int // LeaseDuration in the Lease's whole seconds
}

var _ resourcelock.Interface = (*lock)(nil)

// errBudget wraps a token-bucket wait that could not finish in time.
var errBudget = errors.New("relect: Lease API budget exhausted")

// wait takes one token, blocking until one is available or ctx ends. It
// returns how long it waited.
func (l *lock) wait(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := l.limiter.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return time.Since(start), ctx.Err()
		}
		// The wait would outlast ctx's deadline.
		return time.Since(start), fmt.Errorf("%w: %v", errBudget, err)
	}
	return time.Since(start), nil
}

// call makes one Lease API call fn outside client-go's lock interface (the
// follower's reads, watches and acquisitions): it waits on the bucket, gives
// fn a context with the per-call timeout if timeout is set (not for a
// watch, which lives until stopped), and records the outcome.
func (l *lock) call(ctx context.Context, verb string, timeout bool, fn func(context.Context) error) error {
	waited, err := l.wait(ctx)
	if err != nil {
		l.e.called(ctx, verb, err, waited)
		return err
	}
	cctx := ctx
	if timeout {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, l.callTimeout)
		defer cancel()
	}
	err = fn(cctx)
	l.e.called(ctx, verb, err, waited)
	return err
}

func (l *lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	waited, err := l.wait(ctx)
	if err != nil {
		l.e.called(ctx, "get", err, waited)
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	rec, raw, err := l.inner.Get(cctx)
	l.e.called(ctx, "get", err, waited)
	switch {
	case err == nil:
		stranger := l.e.observed(rec)
		short := rec.HolderIdentity != "" && rec.LeaseDurationSeconds < l.leaseSeconds
		if stranger || short || (rec.HolderIdentity == "" && !released(rec)) {
			return l.adjust(rec, stranger)
		}
		// client-go tells a new record by these bytes; make renewals
		// within one second differ too (the JSON has whole seconds).
		return rec, recordKey(rec), nil
	case apierrors.IsNotFound(err):
		l.e.observedMissing()
	}
	return rec, raw, err
}

// Create is client-go's acquisition of a missing Lease (when followers poll,
// or its slow path finds the Lease gone). It is refused, without an API
// call, until LeaseDuration after this Elector first found the Lease missing
// (Elector.createAllowedAt): a Lease deleted by hand may still be acted on
// by its holder. client-go retries after RetryPeriod.
func (l *lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if at := l.e.createAllowedAt(); time.Now().Before(at) {
		return fmt.Errorf("%w: not before %s", errCreateTooSoon, at.Format(time.RFC3339Nano))
	}
	return l.write(ctx, "create", ler, l.inner.Create)
}

// errCreateTooSoon is client-go's Create refused by lock.Create.
var errCreateTooSoon = errors.New("relect: the Lease was found missing less than LeaseDuration ago; not creating it yet")

func (l *lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, "update", ler, l.inner.Update)
}

func (l *lock) write(ctx context.Context, verb string, ler resourcelock.LeaderElectionRecord,
	call func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	waited, err := l.wait(ctx)
	if err != nil {
		l.e.called(ctx, verb, err, waited)
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, l.callTimeout)
	defer cancel()
	sent := time.Now()
	ler.LeaderTransitions = int(clampTransitions(ler.LeaderTransitions)) // client-go counts past MaxInt32
	if ler.HolderIdentity == l.Identity() {
		// client-go stamped the renew time before the bucket wait (and
		// before a slow-path Get); stamp it again now, so that a delayed
		// renewal still looks new to followers that compare whole
		// seconds. It is informational: no one compares it across
		// machines.
		ler.RenewTime = metav1.NewTime(sent)
	}
	err = call(cctx, ler)
	l.e.called(ctx, verb, err, waited)
	if err != nil {
		return err
	}
	l.e.wrote(sent, &ler)
	return nil
}

// strangerSuffix marks, for client-go only, a holder that names us but whose
// record this Elector did not write.
const strangerSuffix = " (not written by this elector)"

// emptiedHolder stands, for client-go only, for a holder emptied otherwise
// than by a release (see released).
const emptiedHolder = "(holder emptied without a release)"

// adjust changes what client-go sees of a record read from the API, never
// what is stored, in two cases where client-go's rules would let this
// candidate take over while the holder may still act as leader:
//
//   - stranger: the record names us, but this Elector did not write it (an
//     operator's hand edit, or a previous process with the same identity).
//     client-go would resume it at once, while the candidate that really
//     held it may still act as leader until its next renewal. Shown as held
//     by a stranger, it is taken over only once it expires, as a new term.
//
//   - a held lease whose duration is shorter than ours (zero, negative, or
//     just short: a hand edit or a client with other settings). client-go
//     would take it over that soon after observing it, possibly before the
//     holder's next renewal reveals the edit. It is shown with our own lease
//     duration, so a takeover waits at least that long.
//
//   - a holder emptied otherwise than by a release (a release writes a lease
//     duration of 1 s): whoever held it may still act as leader until its
//     next renewal, so it is shown as held, by a placeholder.
//
// Leader() and events still report the record as stored.
func (l *lock) adjust(rec *resourcelock.LeaderElectionRecord, stranger bool) (*resourcelock.LeaderElectionRecord, []byte, error) {
	shown := *rec
	if stranger {
		shown.HolderIdentity += strangerSuffix
	}
	if rec.HolderIdentity == "" && !released(rec) {
		// Waited out for our own lease duration, whatever the record
		// says: it may be absurd, and no holder is left to repair it.
		shown.HolderIdentity = emptiedHolder
		shown.LeaseDurationSeconds = l.leaseSeconds
	}
	if shown.HolderIdentity != "" && shown.LeaseDurationSeconds < l.leaseSeconds {
		shown.LeaseDurationSeconds = l.leaseSeconds
	}
	return &shown, recordKey(&shown), nil
}

// RecordEvent ignores client-go's calls: client-go records "became leader"
// before the work starts and "stopped leading" on every exit, led or not.
// relect records its own, through record, at the moments they happen.
func (l *lock) RecordEvent(string) {}

// record sends a Kubernetes Event about the Lease to Options.EventRecorder,
// if set. It does not go through the inner lock's RecordEvent: LeaseLock's
// reads the Lease object its renew loop writes concurrently.
func (l *lock) record(msg string) {
	r := l.e.cfg.EventRecorder
	if r == nil {
		return
	}
	ns, name, _ := strings.Cut(l.Describe(), "/")
	subject := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	subject.Kind = "Lease"
	subject.APIVersion = coordinationv1.SchemeGroupVersion.String()
	if p := callSafely("EventRecorder", func() {
		r.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%s %s", l.Identity(), msg)
	}); p != nil {
		l.e.emit(Event{Kind: EventError, Err: p})
	}
}

func (l *lock) Identity() string { return l.inner.Identity() }
func (l *lock) Describe() string { return l.inner.Describe() }

// release hands the lease back: it writes an empty holder (with a lease
// duration of 1 s, as client-go does) conditionally on the object this lock
// last read or wrote, so a Lease that has passed to another holder is never
// blanked. On a conflict it reads the Lease again and retries only while we
// are still the holder. It gives up when ctx ends. It reports whether the
// lease is now released by us.
func (l *lock) release(ctx context.Context, transitions int) (bool, error) {
	for {
		now := time.Now()
		rec := resourcelock.LeaderElectionRecord{
			LeaseDurationSeconds: 1,
			LeaderTransitions:    transitions,
		}
		rec.AcquireTime.Time, rec.RenewTime.Time = now, now
		err := l.Update(ctx, rec)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		// A conflict: perhaps a write of ours (a renewal cancelled on our
		// side after the apiserver applied it) or someone else's. Read the
		// record as stored — not as lock.Get would show it to client-go —
		// and go on only while it names us.
		cur, err := l.read(ctx)
		if err != nil || cur == nil || cur.HolderIdentity != l.Identity() {
			return false, err // passed on, deleted, or unreadable
		}
		transitions = cur.LeaderTransitions
	}
}

// releaseIfHeld releases the lease if the Lease, read now, names us. Run
// uses it when its context ends during an acquisition: the acquiring write
// may have been applied even if the client gave up on it.
func (l *lock) releaseIfHeld(ctx context.Context) (bool, error) {
	cur, err := l.read(ctx)
	if err != nil || cur == nil || cur.HolderIdentity != l.Identity() {
		return false, err
	}
	return l.release(ctx, cur.LeaderTransitions)
}

// read gets the record as stored (nil if there is no Lease), through the
// bucket and counters, and refreshes the object the inner lock's next Update
// is conditional on.
func (l *lock) read(ctx context.Context) (*resourcelock.LeaderElectionRecord, error) {
	var rec *resourcelock.LeaderElectionRecord
	err := l.call(ctx, "get", true, func(ctx context.Context) error {
		var err error
		rec, _, err = l.inner.Get(ctx)
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	l.e.observed(rec)
	return rec, nil
}
