package fleetbench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// process is one incarnation of a candidate: a process that campaigns
// until its context is done.
type process interface {
	// run campaigns until ctx is done and everything it started has
	// returned.
	run(ctx context.Context)
}

// newProcess returns a new incarnation of identity for impl, with every
// option at its default: the durations, relect's bucket and registry;
// relect releases when cancelled, the client-go loop too
// (ReleaseOnCancel). onStarted is called with the identity when a term's
// work starts (OnStartedLeading).
func newProcess(impl Impl, identity string, cs kubernetes.Interface, onStarted func(identity string)) process {
	if impl == Relect {
		return newRelectProcess(identity, cs, onStarted)
	}
	return &clientGoLoop{identity: identity, cs: cs, onStarted: onStarted}
}

// relectProcess is one relect.Elector, Run once.
type relectProcess struct{ e *relect.Elector }

func newRelectProcess(identity string, cs kubernetes.Interface, onStarted func(string)) *relectProcess {
	e, err := relect.New(relect.Options{
		Client:    cs,
		Namespace: namespace,
		Name:      leaseName,
		Identity:  identity,
		OnStartedLeading: func(ctx context.Context) {
			onStarted(identity)
			<-ctx.Done()
		},
	})
	if err != nil {
		panic("fleetbench: relect.New: " + err.Error())
	}
	return &relectProcess{e: e}
}

func (p *relectProcess) run(ctx context.Context) { _ = p.e.Run(ctx) }

// clientGoLoop is the plain client-go loop relect is compared with: the
// hand-written loop of elastic-agent PR #4542 (e2e/internal/clientgoloop,
// which lives in another module): one client-go LeaderElector with
// ReleaseOnCancel, whose Run is called again each time it returns, until
// the context is done. Its followers poll the Lease every RetryPeriod to
// 2.2 × RetryPeriod.
type clientGoLoop struct {
	identity  string
	cs        kubernetes.Interface
	onStarted func(string)
	le        atomic.Pointer[leaderelection.LeaderElector]

	// client-go starts OnStartedLeading in a goroutine it never joins;
	// working counts those still running, so that run can wait for them.
	// mu orders working.Add against working.Wait.
	mu      sync.Mutex
	working sync.WaitGroup
}

func (p *clientGoLoop) run(ctx context.Context) {
	// client-go logs through klog's contextual logger: discard, as relect
	// does by default.
	ctx = klog.NewContext(ctx, logr.Discard())
	cfg := leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: leaseName},
			Client:     p.cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: p.identity},
		},
		LeaseDuration:   relect.DefaultLeaseDuration,
		RenewDeadline:   relect.DefaultRenewDeadline,
		RetryPeriod:     relect.DefaultRetryPeriod,
		ReleaseOnCancel: true,
		Name:            p.identity,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				p.mu.Lock()
				p.working.Add(1)
				p.mu.Unlock()
				defer p.working.Done()
				p.onStarted(p.identity)
				<-ctx.Done()
			},
			OnStoppedLeading: func() {},
		},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			panic("fleetbench: leaderelection.NewLeaderElector: " + err.Error())
		}
		p.le.Store(le)
		le.Run(ctx)
	}
	// The OnStartedLeading goroutine of the last Run may not have started
	// yet: in a synctest bubble, time moves on only once it has.
	time.Sleep(time.Nanosecond)
	p.mu.Lock()
	p.working.Wait()
	p.mu.Unlock()
}
