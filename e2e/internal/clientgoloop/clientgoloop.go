// Package clientgoloop is the plain client-go leader election that the e2e
// tests and the side-by-side benchmark compare relect with: the hand-written
// loop of elastic-agent PR #4542. One client-go LeaderElector, with
// ReleaseOnCancel, whose Run is called again each time it returns, until the
// context is done. It adds nothing to client-go: followers poll the Lease
// every RetryPeriod to 2.2 × RetryPeriod, and every failure is client-go's
// own pacing.
package clientgoloop

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config configures a Loop. Every field but the optional callbacks is
// required; the durations go to client-go unchanged (it applies no defaults).
type Config struct {
	// Client is the clientset of the Lease calls. Its rest.Config's QPS and
	// Burst (client-go's defaults: 5 and 10) pace them, as in a program
	// that shares its clientset with the election.
	Client kubernetes.Interface
	// Namespace, Name and Identity locate the Lease and name the holder.
	Namespace, Name, Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// OnStartedLeading runs a term's work in the goroutine client-go starts
	// for it; it must return once its context is done.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading, if not nil, is client-go's callback: called each
	// time Run returns, whether or not this candidate led.
	OnStoppedLeading func()
	// OnNewLeader, if not nil, is client-go's callback (each call in a
	// goroutine of its own).
	OnNewLeader func(identity string)
	// OnRunReturned, if not nil, is called each time client-go's Run
	// returns, before it is called again.
	OnRunReturned func()
}

// Loop is one candidate. IsLeader is safe for concurrent use; Run may be
// called once.
type Loop struct {
	le            *leaderelection.LeaderElector
	onRunReturned func()

	// client-go starts OnStartedLeading in a goroutine it does not join;
	// working counts those still running, so that Run can wait for them.
	// mu orders working.Add against working.Wait.
	mu      sync.Mutex
	working sync.WaitGroup
}

// New builds the candidate's LeaderElector; it returns client-go's
// validation error, if any.
func New(c Config) (*Loop, error) {
	l := &Loop{}
	onStopped := c.OnStoppedLeading
	if onStopped == nil {
		onStopped = func() {}
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
			Client:     c.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
		},
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.Identity,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				l.mu.Lock()
				l.working.Add(1)
				l.mu.Unlock()
				defer l.working.Done()
				c.OnStartedLeading(ctx)
			},
			OnStoppedLeading: onStopped,
			OnNewLeader:      c.OnNewLeader,
		},
	})
	if err != nil {
		return nil, err
	}
	l.le = le
	l.onRunReturned = c.OnRunReturned
	return l, nil
}

// IsLeader is client-go's IsLeader: whether the last record this candidate
// observed names it.
func (l *Loop) IsLeader() bool { return l.le.IsLeader() }

// Run calls client-go's Run until ctx is done, then waits for the
// OnStartedLeading calls it started to return. client-go's logs go to the
// logger in ctx (klog.NewContext), or klog's global one.
func (l *Loop) Run(ctx context.Context) {
	for ctx.Err() == nil {
		l.le.Run(ctx)
		if l.onRunReturned != nil {
			l.onRunReturned()
		}
	}
	// An OnStartedLeading goroutine of the last Run may not have started
	// yet; give it a moment, then wait for all of them.
	time.Sleep(50 * time.Millisecond)
	l.mu.Lock()
	l.working.Wait()
	l.mu.Unlock()
}
