package sim

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// clientGoProcess is the hand-written fix of elastic-agent PR #4542: a
// plain client-go LeaderElector with ReleaseOnCancel, re-created and Run in
// a loop until the context is done. Its IsLeader is the current elector's;
// its term is the context client-go gives OnStartedLeading. A Kill makes no
// call after the cancellation (a crash releases nothing); a Yield cancels
// the current elector, which releases, and the loop runs a new one, as a
// client-go user would yield. It cannot hand over. A standby, which
// client-go has no notion of, reads the Lease every RetryPeriod (client-go's
// jitter) to learn the leader, and never campaigns.
type clientGoProcess struct {
	r        *runner
	sl       *slot
	runID    int
	identity string
	keep     bool
	standby  bool

	mu  sync.Mutex // guards cur
	cur *electorRun
}

// electorRun is one LeaderElector of the loop, while it runs.
type electorRun struct {
	le       *leaderelection.LeaderElector
	cancel   context.CancelFunc // ends its Run: a yield
	returned chan struct{}      // closed when its Run has returned
}

// errNotLeading is a yield asked of a client-go process that does not lead.
var errNotLeading = errors.New("sim: not leading")

func newClientGoProcess(r *runner, sl *slot, runID int, a *Action) process {
	return &clientGoProcess{r: r, sl: sl, runID: runID, identity: sl.identity, keep: a.KeepLease,
		standby: r.h.Standby[sl.idx]}
}

func (p *clientGoProcess) current() *electorRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *clientGoProcess) isLeader() bool {
	cur := p.current()
	return cur != nil && cur.le.IsLeader()
}

func (p *clientGoProcess) stepDown(ctx context.Context, to string) error {
	if to != "" {
		return errUnsupported
	}
	cur := p.current()
	if cur == nil || !cur.le.IsLeader() {
		return errNotLeading
	}
	cur.cancel()
	select {
	case <-cur.returned:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *clientGoProcess) knowsStandby(string) bool { return false }

func (p *clientGoProcess) run(ctx context.Context) {
	// client-go logs through klog's contextual logger: discard, as relect
	// does by default.
	ctx = klog.NewContext(ctx, logr.Discard())
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: LeaseName},
		Client:     p.sl.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.identity},
	}
	if p.keep {
		lock = &crashLock{Interface: lock, ctx: ctx}
	}
	if p.standby {
		p.observe(ctx, lock)
		return
	}
	tl := &termLock{Interface: lock}
	t := p.r.t
	cfg := leaderelection.LeaderElectionConfig{
		Lock:            tl,
		LeaseDuration:   t.LeaseDuration,
		RenewDeadline:   t.RenewDeadline,
		RetryPeriod:     t.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				n := tl.term()
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
		ectx, cancel := context.WithCancel(ctx)
		cur := &electorRun{le: le, cancel: cancel, returned: make(chan struct{})}
		p.mu.Lock()
		p.cur = cur
		p.mu.Unlock()
		p.r.poke()
		le.Run(ectx)
		cancel()
		close(cur.returned)
	}
	p.mu.Lock()
	p.cur = nil // the process is gone
	p.mu.Unlock()
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
