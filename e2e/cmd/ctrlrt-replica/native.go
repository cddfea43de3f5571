package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect/e2e/internal/history"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// viewLease is the history view of -mode=native: on when the replica's
// lock acquired the Lease, off when it began to release it.
const viewLease = "lease"

// runNative runs controller-runtime's own manager with its own leader
// election, the set-up a user of controller-runtime would pick instead of
// relect, with warm replicas: LeaderElection with
// LeaderElectionReleaseOnCancel on a Lease, with the flags' lease timings,
// and config.Controller.EnableWarmup (controller-runtime PR #3192), so that
// a follower starts its controller's sources and syncs them before it
// competes for the Lease, and a promotion only starts the workers, on a
// queue already filled. It runs until ctx is done, or until the lease is
// lost (controller-runtime's manager then ends with an error: a replica
// leads at most once in its life).
//
// The manager runs client-go's LeaderElector as it always does; the one
// part not its own is the lock, observedLock: a client-go LeaseLock built
// as controller-runtime's leaderelection.NewResourceLock builds it, with
// -identity as its holder, that writes the term's start and end to the
// history. controller-runtime tells no one the instant it acquired:
// Elected() closes only once the leader runnables have started, after the
// first Reconcile may have begun.
//
// The reconciler gets no term and no fence from this election: the stamper
// writes only who leads (stamper.native).
func runNative(ctx context.Context, f flags, cfg *rest.Config, log logr.Logger, rec *recorder) error {
	lock, err := newObservedLock(f, cfg, rec)
	if err != nil {
		return err
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                        clientgoscheme.Scheme,
		Logger:                        log,
		Cache:                         cacheOptions(f),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionID:              f.lease,
		LeaderElectionNamespace:       f.namespace,
		// The doc of LeaderElectionResourceLockInterface says that the
		// ID, the namespace and the lease timings are then ignored; v0.25.2's
		// manager.New hands the timings (and the ID, as the elector's
		// name) to its LeaderElector all the same, and the test's SIGKILL
		// rows, a LeaseDuration long, show it.
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       ptr.To(f.leaseDuration),
		RenewDeadline:                       ptr.To(f.renewDeadline),
		RetryPeriod:                         ptr.To(f.retryPeriod),
		Controller:                          config.Controller{EnableWarmup: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	st := &stamper{c: mgr.GetClient(), identity: f.identity, group: f.group, requeue: f.requeue, rec: rec, native: true}
	if err := st.setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newObservedLock builds the Lease lock of -mode=native: a client of its
// own with controller-runtime's user agent and request timeout
// (max(RenewDeadline/2, 1 s)), as leaderelection.NewResourceLock builds
// it, but with -identity as the holder instead of hostname_uuid, and no
// event recorder.
func newObservedLock(f flags, cfg *rest.Config, rec *recorder) (*observedLock, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(f.renewDeadline/2, time.Second)
	client, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &observedLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: f.namespace, Name: f.lease},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: f.identity},
		},
		rec: rec,
	}, nil
}

// observedLock records in the history when the replica acquired the Lease
// (the first Create or Update naming it the holder that succeeded:
// "term-start", and "on" in view "lease") and when it began to release it
// (an Update naming no holder, which ReleaseOnCancel makes once the
// manager has stopped the leader's runnables: "off", then "term-end",
// written before the Update, since the replica leads no more from there
// whether or not the Update succeeds). client-go's LeaderElector calls its
// lock from the goroutine of Run only; observedLock is not safe for
// concurrent use.
type observedLock struct {
	resourcelock.Interface
	rec  *recorder
	held bool
}

var _ resourcelock.Interface = (*observedLock)(nil)

func (l *observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.wrote(ler, err)
	return err
}

func (l *observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.held && ler.HolderIdentity == "" {
		l.held = false
		l.rec.leaseReleasing()
	}
	err := l.Interface.Update(ctx, ler)
	l.wrote(ler, err)
	return err
}

// wrote notes a write of ler that returned err: the acquisition, if it
// succeeded and names this replica while it did not hold the lease.
func (l *observedLock) wrote(ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && !l.held && ler.HolderIdentity == l.Identity() {
		l.held = true
		l.rec.leaseAcquired()
	}
}

// leaseAcquired records the start of a term of -mode=native.
func (r *recorder) leaseAcquired() {
	now := time.Now()
	r.started(0, now)
	must(r.w.Write(history.Record{T: now.UnixNano(), Kind: history.KindOn, View: viewLease}))
}

// leaseReleasing records the end of a term of -mode=native: the manager
// has stopped the term's controllers, and the lock is about to release
// the Lease.
func (r *recorder) leaseReleasing() {
	now := time.Now().UnixNano()
	must(r.w.Write(history.Record{T: now, Kind: history.KindOff, View: viewLease, LastTrue: now, LastTrueFrom: now}))
	r.ended()
}
