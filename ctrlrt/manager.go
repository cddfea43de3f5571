package ctrlrt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/relect/relect"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Manager is a controller-runtime manager whose leader-only work runs in
// relect's terms. It embeds the long-lived manager.Manager, which runs with
// its own election off on every replica — caches, webhooks, metrics,
// probes, and the runnables that need no election — and adds relect's
// Elector to it. Use it wherever a manager.Manager is expected, and Start
// it as any manager: Start blocks until its context is done, then stops the
// Elector first (which ends the current term, waits for its controllers
// and releases the lease), then the caches and servers, and returns.
//
// Its methods are safe for concurrent use. The zero value is not usable:
// create Managers with NewManager.
type Manager struct {
	manager.Manager // the long-lived manager

	elector   *relect.Elector
	setup     SetupFunc
	informers []client.Object
	log       logr.Logger
	indexes   indexSet // fields indexed by some term, for good
	warm      atomic.Bool

	mu      sync.Mutex         // guards perTerm and current
	perTerm []manager.Runnable // added with Add, started in every term
	current *group             // the running term's runnables; nil between terms

	// Shards (shards.go): Options.ShardSetup and ShardInformers, the
	// caches of the shards campaigned for, and what makes a range
	// shard's cache: the manager's rest.Config, NewCache and Cache.
	shardSetup     SetupFunc
	shardInformers []client.Object
	shards         shardCaches
	config         *rest.Config
	newCache       cache.NewCacheFunc
	cacheOptions   cache.Options
}

// NewManager returns a Manager built with manager.New(config, mo), with
// relect's Elector configured by o as a runnable that needs no election,
// its health check added as HealthzCheckName and the readiness check
// ReadyzCheckName (see both). It makes no API call and starts nothing.
//
// mo.LeaderElection must be false and mo.LeaderElectionResourceLockInterface
// nil (ErrManagerElection): relect elects. Keep
// mo.GracefulShutdownTimeout (30 s by default) above the time the
// leader-only controllers take to stop plus relect's RenewDeadline, so that
// the manager does not stop its caches under a term that is still ending.
//
// It returns an error that wraps ErrInvalidOptions for every invalid
// field of o (those of o.Elector as relect.New reports them, which match
// relect.ErrInvalidOptions too), ErrManagerElection, or manager.New's
// error.
func NewManager(config *rest.Config, mo manager.Options, o Options) (*Manager, error) {
	m := &Manager{setup: o.Setup, informers: o.Informers, shardSetup: o.ShardSetup, shardInformers: o.ShardInformers,
		config: config, newCache: newCacheFunc(mo.NewCache), cacheOptions: mo.Cache}
	// Every problem at once: ctrlrt's own, then the Elector's as relect.New
	// reports them (New makes no API call), before the manager is built.
	errs := []error{o.check(config, &mo)}
	logger := mo.Logger
	if logger.GetSink() == nil {
		logger = ctrllog.Log // manager.New's default
	}
	eo := o.electorOptions(config, logger, m.lead)
	if o.ShardSetup != nil {
		eo.Shards = m.shardOptions(eo.Shards)
	}
	e, err := relect.New(eo)
	if err != nil && (config != nil || eo.Client != nil || eo.Lock != nil) { // a nil config is reported once, above
		errs = append(errs, fmt.Errorf("%w: Options.Elector: %w", ErrInvalidOptions, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	mgr, err := manager.New(config, mo)
	if err != nil {
		return nil, err
	}
	m.Manager = mgr
	m.log = mgr.GetLogger().WithName("ctrlrt")
	m.elector = e
	if err := mgr.Add(electorRunnable{m}); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck(HealthzCheckName, e.HealthCheck(o.Health)); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck(ReadyzCheckName, m.readyz); err != nil {
		return nil, err
	}
	return m, nil
}

// Elector returns the relect Elector that elects this Manager's terms: for
// IsLeader, Term, Yield, HandOver, Events, Stats, and relect's metrics
// (package metrics of the relect module). Do not call its Run: the
// Manager runs it (a second Run returns relect.ErrAlreadyRunning).
func (m *Manager) Elector() *relect.Elector { return m.elector }

// Add adds r to the manager. A runnable that needs no election (its
// NeedLeaderElection returns false), a cache, a webhook server or an HTTP
// server of the manager is added to the long-lived manager and runs on
// every replica, started once. A runnable that needs election (its
// NeedLeaderElection returns true, or it has no such method, which
// controller-runtime takes for true) runs in every term instead: its Start
// is called at the start of each term with the term's context, and must
// return when that context is done; so it must be startable again after it
// returned (a manager.RunnableFunc is). Added during a term, it starts in
// that term too.
//
// A controller that needs election cannot be started twice; Add returns
// an error that wraps ErrControllerOnManager for one (a controller built
// with the builder or controller.New on this Manager): build it in
// Options.Setup, on the term's manager. A nil r (a nil interface, or a nil
// manager.RunnableFunc or pointer in one) is refused with an error. Add
// never blocks.
func (m *Manager) Add(r manager.Runnable) error {
	if r == nil || isNil(r) { // a nil manager.RunnableFunc too: every term would panic starting it
		return errors.New("ctrlrt: Manager.Add: nil runnable")
	}
	if !needsElection(r) {
		return m.Manager.Add(r)
	}
	if isController(r) {
		return fmt.Errorf("%w (%T): build it in Options.Setup, on the term's manager", ErrControllerOnManager, r)
	}
	m.mu.Lock()
	m.perTerm = append(m.perTerm, r)
	g := m.current
	m.mu.Unlock()
	if g != nil {
		// ErrTermEnded: the term is ending, and the next one starts r.
		_ = g.add(r)
	}
	return nil
}

// needsElection applies controller-runtime's rule (its runnables.Add): the
// manager's caches, webhook servers and HTTP servers never need election;
// another runnable needs it unless its NeedLeaderElection returns false.
func needsElection(r manager.Runnable) bool {
	switch r.(type) {
	case interface{ GetCache() cache.Cache }, webhook.Server:
		return false
	}
	if le, ok := r.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

// controllerPackage is where controller-runtime's controllers are
// implemented, whatever their request type (controller.TypedController is
// generic, so no interface assertion catches them all).
const controllerPackage = "sigs.k8s.io/controller-runtime/pkg/internal/controller"

// isController reports whether r is one of controller-runtime's
// controllers.
func isController(r manager.Runnable) bool {
	t := reflect.TypeOf(r)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == controllerPackage
}

// electorRunnable runs the Elector in the long-lived manager, on every
// replica.
type electorRunnable struct{ m *Manager }

func (electorRunnable) NeedLeaderElection() bool { return false }

// Start warms the informers, then campaigns until ctx is done. The
// manager starts it once its caches are synced.
func (r electorRunnable) Start(ctx context.Context) error {
	m := r.m
	for _, obj := range m.informers {
		if _, err := m.Manager.GetCache().GetInformer(ctx, obj); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ctrlrt: starting the informer of Options.Informers for %T: %w", obj, err)
		}
	}
	m.warm.Store(true)
	m.log.Info("informers synced: campaigning", "informers", len(m.informers), "identity", m.elector.Identity())
	err := m.elector.Run(ctx)
	if ctx.Err() != nil {
		return nil // the manager is stopping: a normal end
	}
	return err
}

func (m *Manager) readyz(*http.Request) error {
	if !m.warm.Load() {
		return ErrNotWarm
	}
	return nil
}

// isNil reports whether v holds a nil pointer.
func isNil(v any) bool {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}
