package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect/internal/clientgoloop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// clientGoProcess is one process running the client-go loop
// (internal/clientgoloop: the hand-written fix of elastic-agent PR #4542, a
// plain LeaderElector with ReleaseOnCancel, re-created and Run again until
// the context is done). Its IsLeader is the loop's; its term is the context
// client-go gives OnStartedLeading, numbered by termLock. A Kill makes no
// call after the cancellation (crashLock: a crash releases nothing); a
// Yield is the loop's (the current elector is cancelled, which releases,
// and the loop runs a new one). It cannot hand over. A standby, which
// client-go has no notion of, runs no loop: it reads the Lease every
// RetryPeriod (client-go's jitter) to learn the leader, and never
// campaigns.
type clientGoProcess struct {
	r        *runner
	sl       *slot
	runID    int
	identity string
	keep     bool
	standby  bool

	loop atomic.Pointer[clientgoloop.Loop] // set by run before it campaigns
}

func newClientGoProcess(r *runner, sl *slot, runID int, a *Action) process {
	return &clientGoProcess{r: r, sl: sl, runID: runID, identity: sl.identity, keep: a.KeepLease,
		standby: r.h.Standby[sl.idx]}
}

func (p *clientGoProcess) isLeader() bool {
	l := p.loop.Load()
	return l != nil && l.IsLeader()
}

func (p *clientGoProcess) stepDown(ctx context.Context, to string) error {
	if to != "" {
		return errUnsupported
	}
	l := p.loop.Load()
	if l == nil {
		return clientgoloop.ErrNotLeading
	}
	return l.Yield(ctx)
}

func (p *clientGoProcess) knowsStandby(string) bool { return false }

func (p *clientGoProcess) run(ctx context.Context) {
	// client-go logs through klog's contextual logger: discard, as relect
	// does by default.
	ctx = klog.NewContext(ctx, logr.Discard())
	if p.standby {
		p.observe(ctx, p.crashable(ctx, &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
			Client:     p.sl.cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: p.identity},
		}))
		return
	}
	if st := p.r.shards; st != nil {
		var shards sync.WaitGroup
		for _, name := range st.names {
			shards.Go(func() { st.runClientGo(ctx, p, name) })
		}
		defer shards.Wait()
	}
	cfg := p.loopConfig(ctx, p.sl.cs, LeaseName, func(ctx context.Context, n int64) {
		p.r.event(p.sl, p.runID, Started, n, "")
		term, cancelled := p.r.termStarted(p.sl, p.runID, n)
		p.sl.startWrites(ctx, term, []termToken{{StorePlain, ""}})
		p.sl.work(ctx, func(context.Context) bool { return false }) // it has no beat to give
		cancelled()
	})
	cfg.OnStoppedLeading = func() { p.r.event(p.sl, p.runID, Stopped, -1, "") }
	loop, err := clientgoloop.New(cfg)
	if err != nil {
		panic("sim: clientgoloop.New: " + err.Error())
	}
	p.loop.Store(loop)
	loop.Run(ctx)
}

// loopConfig is the client-go loop of this process on the Lease name,
// through cs, with the run's timing; started is its OnStartedLeading,
// given the term begun. Its lock is crashable, and its IsLeader, which
// reads a new elector when Run returns, is sampled then (OnRunReturned).
func (p *clientGoProcess) loopConfig(ctx context.Context, cs kubernetes.Interface, name string, started func(ctx context.Context, term int64)) clientgoloop.Config {
	var tl *termLock
	t := p.r.t
	return clientgoloop.Config{
		Client:        cs,
		Namespace:     Namespace,
		Name:          name,
		Identity:      p.identity,
		LeaseDuration: t.LeaseDuration,
		RenewDeadline: t.RenewDeadline,
		RetryPeriod:   t.RetryPeriod,
		WrapLock: func(l resourcelock.Interface) resourcelock.Interface {
			tl = &termLock{Interface: p.crashable(ctx, l)}
			return tl
		},
		OnStartedLeading: func(ctx context.Context) { started(ctx, tl.term()) },
		OnRunReturned:    p.r.poke,
	}
}

// crashable returns lock, made a crashLock if this process ends by a Kill.
func (p *clientGoProcess) crashable(ctx context.Context, lock resourcelock.Interface) resourcelock.Interface {
	if p.keep {
		return &crashLock{Interface: lock, ctx: ctx}
	}
	return lock
}

// observe is a standby's loop: a read of the Lease every RetryPeriod, with
// client-go's jitter, until ctx is done.
func (p *clientGoProcess) observe(ctx context.Context, lock resourcelock.Interface) {
	for {
		_, _, _ = lock.Get(ctx)
		t := time.NewTimer(wait.Jitter(p.r.t.RetryPeriod, 1.2))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// crashLock is the lock of an incarnation that ends by a Kill: once its
// context is done it makes no more calls, as a crashed process would not,
// so client-go's release on cancellation never reaches the API.
type crashLock struct {
	resourcelock.Interface
	ctx context.Context
}

var errCrashed = errors.New("sim: the process was killed")

func (l *crashLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.ctx.Err() != nil {
		return nil, nil, errCrashed
	}
	return l.Interface.Get(ctx)
}

func (l *crashLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.ctx.Err() != nil {
		return errCrashed
	}
	return l.Interface.Create(ctx, ler)
}

func (l *crashLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.ctx.Err() != nil {
		return errCrashed
	}
	return l.Interface.Update(ctx, ler)
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
