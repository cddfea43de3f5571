package clientgoloop

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config configures a Loop. Client, Namespace, Name, Identity, the three
// durations and OnStartedLeading are required; the durations go to
// client-go unchanged (it applies no defaults and validates them, see New).
type Config struct {
	// Client is the clientset of the Lease calls. Its rest.Config's QPS and
	// Burst (client-go's defaults: 5 and 10) pace them, as in a program
	// that shares its clientset with the election.
	Client kubernetes.Interface
	// Namespace, Name and Identity locate the Lease and name the holder.
	Namespace, Name, Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// WrapLock, if not nil, wraps the Lease lock that every elector of the
	// loop uses; New calls it once. A harness observes or alters the
	// loop's Lease calls there (the simulation's kills that make no
	// further call, say); the wrapper must pass every method on, as
	// resourcelock.Interface says, or the loop is no longer client-go's.
	WrapLock func(resourcelock.Interface) resourcelock.Interface

	// OnStartedLeading runs a term's work in the goroutine client-go starts
	// for it; it must return once its context is done. Run waits for it.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading, if not nil, is client-go's callback: called in
	// Run's goroutine each time an elector's Run returns, whether or not
	// it led.
	OnStoppedLeading func()
	// OnNewLeader, if not nil, is client-go's callback, each call in a
	// goroutine of its own that nothing joins. Each elector reports the
	// leader it first observes, so it is called again after every
	// re-creation.
	OnNewLeader func(identity string)
	// OnRunReturned, if not nil, is called in Run's goroutine each time an
	// elector's Run has returned (after OnStoppedLeading), before the next
	// elector is created and before a Yield waiting for that Run returns.
	OnRunReturned func()
}

// ErrNotLeading is what Yield returns when the loop does not lead.
var ErrNotLeading = errors.New("clientgoloop: not leading")

// Loop is one candidate. IsLeader and Yield are safe for concurrent use
// with Run; Run may be called once at a time.
type Loop struct {
	cfg           leaderelection.LeaderElectionConfig // every elector's
	onRunReturned func()

	// terms counts the OnStartedLeading calls that client-go is about to
	// start or has started, and that have not returned: Add in
	// joinLock.RecordEvent (Run's goroutine), Done when the call returns,
	// Wait at the end of Run.
	terms sync.WaitGroup

	mu  sync.Mutex // guards cur
	cur *elector   // the elector whose Run is in progress, or nil
}

// elector is one LeaderElector of the loop, while it runs.
type elector struct {
	le       *leaderelection.LeaderElector
	ctx      context.Context    // its Run's
	cancel   context.CancelFunc // ends its Run (Yield)
	returned chan struct{}      // closed when its Run has returned
}

// New returns the loop of c. It returns client-go's validation error, if
// any (leaderelection.NewLeaderElector: LeaseDuration > RenewDeadline >
// 1.2 × RetryPeriod > 0, a callback, an identity), before anything runs.
func New(c Config) (*Loop, error) {
	l := &Loop{onRunReturned: c.OnRunReturned}
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Client:     c.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	if c.WrapLock != nil {
		lock = c.WrapLock(lock)
	}
	onStopped := c.OnStoppedLeading
	if onStopped == nil {
		onStopped = func() {}
	}
	var onStarted func(context.Context) // nil: client-go's error says so
	if c.OnStartedLeading != nil {
		onStarted = func(ctx context.Context) {
			defer l.terms.Done()
			c.OnStartedLeading(ctx)
		}
	}
	l.cfg = leaderelection.LeaderElectionConfig{
		Lock:            joinLock{Interface: lock, terms: &l.terms},
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.Identity,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: onStarted,
			OnStoppedLeading: onStopped,
			OnNewLeader:      c.OnNewLeader,
		},
	}
	if _, err := leaderelection.NewLeaderElector(l.cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Run campaigns until ctx is done: it creates a LeaderElector and calls its
// Run, and does so again each time that Run returns — after a lost term,
// after Yield — at once, without pause. It returns once ctx is done, the
// last elector's Run has returned (releasing the Lease if it held it:
// ReleaseOnCancel) and every OnStartedLeading call has returned. client-go
// logs to the logger in ctx (klog.NewContext), or klog's global one.
func (l *Loop) Run(ctx context.Context) {
	for ctx.Err() == nil {
		e := l.start(ctx)
		e.le.Run(e.ctx)
		e.cancel()
		// The callback first: Yield returns once returned is closed, and
		// its caller may count on the callback having run.
		if l.onRunReturned != nil {
			l.onRunReturned()
		}
		close(e.returned)
	}
	l.mu.Lock()
	l.cur = nil
	l.mu.Unlock()
	l.terms.Wait()
}

// start creates the next elector and makes it the current one.
func (l *Loop) start(ctx context.Context) *elector {
	le, err := leaderelection.NewLeaderElector(l.cfg)
	if err != nil {
		panic("clientgoloop: a configuration New accepted was refused: " + err.Error())
	}
	e := &elector{le: le, returned: make(chan struct{})}
	e.ctx, e.cancel = context.WithCancel(ctx)
	l.mu.Lock()
	l.cur = e
	l.mu.Unlock()
	return e
}

func (l *Loop) current() *elector {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// IsLeader is client-go's IsLeader of the current elector: whether the last
// record it observed names this candidate. It is false while Run is not
// running, and for a new elector until it observes a record.
func (l *Loop) IsLeader() bool {
	e := l.current()
	return e != nil && e.le.IsLeader()
}

// Yield steps down as a user of the hand-written loop would (client-go has
// no such call): it cancels the current elector's Run, which releases the
// Lease, and Run campaigns again with a new elector, at once. It returns
// ErrNotLeading if the current elector's IsLeader is false (or Run is not
// running), nil once the cancelled Run has returned, or ctx.Err() if ctx is
// done first (the step-down goes on).
func (l *Loop) Yield(ctx context.Context) error {
	e := l.current()
	if e == nil || !e.le.IsLeader() {
		return ErrNotLeading
	}
	e.cancel()
	select {
	case <-e.returned:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// becameLeader is the event client-go records on its lock once it acquired
// the Lease, in Run's goroutine, just before it starts OnStartedLeading in
// a goroutine of its own (leaderelection.go: acquire, then Run).
const becameLeader = "became leader"

// joinLock is the lock every elector uses: it counts each OnStartedLeading
// call client-go is about to start, in Loop.terms, so that Run can wait for
// them all. Counting in the callback's own goroutine would race with that
// wait: the goroutine of a term that ends at once may not have begun when
// the last Run returns (the e2e copy this package replaced slept 50 ms for
// it; the fleet benchmark's relied on synctest). If client-go ever stopped
// recording the event, the callback's Done would take the count below zero
// and panic (TestRunWaitsForTheTermItStarted), not pass unnoticed.
type joinLock struct {
	resourcelock.Interface
	terms *sync.WaitGroup
}

var _ resourcelock.Interface = joinLock{}

func (l joinLock) RecordEvent(s string) {
	if s == becameLeader {
		l.terms.Add(1)
	}
	l.Interface.RecordEvent(s)
}
