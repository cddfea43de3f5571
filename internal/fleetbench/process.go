package fleetbench

import (
	"context"
	"log/slog"

	"github.com/relect/relect/internal/bench"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"github.com/relect/relect/internal/clientgoloop"
	"k8s.io/client-go/kubernetes"
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
func newProcess(impl bench.Impl, identity string, cs kubernetes.Interface, onStarted func(identity string)) process {
	if impl == bench.Relect {
		return newRelectProcess(identity, cs, onStarted)
	}
	return newClientGoLoop(identity, cs, onStarted)
}

// relectProcess is one relect.Elector, Run once.
type relectProcess struct{ e *relect.Elector }

func newRelectProcess(identity string, cs kubernetes.Interface, onStarted func(string)) *relectProcess {
	e, err := relect.New(relect.Options{
		Client:    cs,
		Namespace: namespace,
		Name:      leaseName,
		Identity:  identity,
		Logger:    slog.New(slog.DiscardHandler), // a fleet logs nothing
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

// clientGoLoop is the plain client-go loop relect is compared with
// (internal/clientgoloop: the hand-written loop of elastic-agent PR #4542),
// with every option at relect's defaults. Its followers poll the Lease
// every RetryPeriod to 2.2 × RetryPeriod.
type clientGoLoop struct{ l *clientgoloop.Loop }

func newClientGoLoop(identity string, cs kubernetes.Interface, onStarted func(string)) *clientGoLoop {
	l, err := clientgoloop.New(clientgoloop.Config{
		Client:        cs,
		Namespace:     namespace,
		Name:          leaseName,
		Identity:      identity,
		LeaseDuration: ld,
		RenewDeadline: rd,
		RetryPeriod:   rp,
		OnStartedLeading: func(ctx context.Context) {
			onStarted(identity)
			<-ctx.Done()
		},
	})
	if err != nil {
		panic("fleetbench: clientgoloop.New: " + err.Error())
	}
	return &clientGoLoop{l: l}
}

func (p *clientGoLoop) run(ctx context.Context) {
	// client-go logs through klog's contextual logger: discard, as relect
	// does by default.
	p.l.Run(klog.NewContext(ctx, logr.Discard()))
}
