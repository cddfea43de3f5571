package sim

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// clientGoProcess is the hand-written fix of elastic-agent PR #4542: a
// plain client-go LeaderElector with ReleaseOnCancel, re-created and Run in
// a loop until the context is done. Its IsLeader is the current elector's;
// its term is the context client-go gives OnStartedLeading. A Kill runs it
// with ReleaseOnCancel false (a crash releases nothing).
type clientGoProcess struct {
	r        *runner
	sl       *slot
	runID    int
	identity string
	keep     bool
	le       atomic.Pointer[leaderelection.LeaderElector]
}

func newClientGoProcess(r *runner, sl *slot, runID int, a *Action) process {
	return &clientGoProcess{r: r, sl: sl, runID: runID, identity: sl.identity, keep: a.KeepLease}
}

func (p *clientGoProcess) isLeader() bool {
	le := p.le.Load()
	return le != nil && le.IsLeader()
}

func (p *clientGoProcess) run(ctx context.Context) {
	// client-go logs through klog's contextual logger: discard, as relect
	// does by default.
	ctx = klog.NewContext(ctx, logr.Discard())
	lock := &termLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
		Client:     p.sl.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.identity},
	}}
	t := p.r.t
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   t.LeaseDuration,
		RenewDeadline:   t.RenewDeadline,
		RetryPeriod:     t.RetryPeriod,
		ReleaseOnCancel: !p.keep,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				n := lock.term()
				p.r.event(p.sl, p.runID, Started, n, "")
				cancelled := p.r.termStarted(p.sl, p.runID, n)
				<-ctx.Done()
				cancelled()
			},
			OnStoppedLeading: func() { p.r.event(p.sl, p.runID, Stopped, -1, "") },
		},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			panic("sim: leaderelection.NewLeaderElector: " + err.Error())
		}
		p.le.Store(le)
		p.r.poke()
		le.Run(ctx)
	}
	p.le.Store(nil) // the process is gone
}

// termLock records the leaseTransitions of the last record this candidate
// wrote naming itself: the term number client-go does not report.
type termLock struct {
	resourcelock.Interface
	mu   sync.Mutex
	last int64
}

func (l *termLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.wrote(err, ler)
	return err
}

func (l *termLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.wrote(err, ler)
	return err
}

func (l *termLock) wrote(err error, ler resourcelock.LeaderElectionRecord) {
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.mu.Lock()
		l.last = int64(ler.LeaderTransitions)
		l.mu.Unlock()
	}
}

func (l *termLock) term() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
