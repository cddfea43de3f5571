package ctrlrt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/relect/relect"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// errTermOver is the cause with which a term's context is cancelled when
// relect's term context ended before (relect's own cause is on the
// parent).
var errTermOver = errors.New("ctrlrt: the term is over")

// lead is the Elector's OnStartedLeading: one term. It calls Setup with
// the term's manager, starts what Setup added (and the Manager's per-term
// runnables) with the term's context, and when that context is done — the
// term ended, or a runnable failed — stops them, waits for every one to
// return, removes the event handlers the term registered, waits for any
// call of them in progress, and returns, so that relect releases the lease
// only after all of that.
//
//	term context ──▶ Setup(ctx, term's manager) ──▶ group.run: every runnable
//	                                                  started with ctx
//	ctx done (term ended, or a runnable's error) ──▶ group.stop: joined
//	                                             ──▶ cache.close: handlers removed
//	                                             ──▶ return: relect releases
func (m *Manager) lead(ctx context.Context) {
	number, _ := relect.TermFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	log := m.log.WithValues("term", number, "fence", string(fence))
	log.Info("term started: starting the leader-only controllers")
	err := m.runTerm(ctx, termSpec{setup: m.setup, field: "Options.Setup", leader: true,
		cache: m.Manager.GetCache(), indexer: m.Manager.GetFieldIndexer(), indexes: &m.indexes})
	if err != nil {
		log.Error(err, "term ended: the leader-only controllers have returned")
		return
	}
	log.Info("term ended: the leader-only controllers have returned", "cause", context.Cause(ctx).Error())
}

// termSpec is what one term runs: the election's, or a shard's.
type termSpec struct {
	setup   SetupFunc // nil: none
	field   string    // setup's name in Options, for errors
	leader  bool      // the election's term: the Manager's per-term runnables run in it too
	cache   cache.Cache
	indexer client.FieldIndexer
	indexes *indexSet
	client  client.Client // the term's manager's client; nil: the manager's
}

// runTerm runs one term (see lead) and returns what ended it early: the
// setup's error or panic, or a runnable's error; nil if the term's context
// ended it.
func (m *Manager) runTerm(parent context.Context, t termSpec) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(errTermOver)
	g := newGroup(ctx, cancel)
	c := newTermCache(t.cache, t.indexer, m.GetScheme(), t.indexes)
	defer c.close() // after the group was joined (deferred calls run in reverse)
	tm := &termManager{Manager: m.Manager, group: g, cache: c, client: t.client}

	if err := callSetup(ctx, t.field, t.setup, tm); err != nil {
		_ = g.stop(err)
		return err
	}
	if t.leader {
		m.mu.Lock()
		for _, r := range m.perTerm {
			_ = g.add(r) // queued: run starts them
		}
		m.current = g
		m.mu.Unlock()
	}
	if ctx.Err() == nil { // the term may have ended during Setup
		g.run()
	}

	<-ctx.Done()
	if t.leader {
		m.mu.Lock()
		m.current = nil
		m.mu.Unlock()
	}
	return g.stop(errTermOver)
}

// callSetup calls setup, if not nil, and turns a panic into an error;
// field names it in Options.
func callSetup(ctx context.Context, field string, setup SetupFunc, mgr manager.Manager) (err error) {
	if setup == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("ctrlrt: %s panicked: %v\n%s", field, v, debug.Stack())
		}
	}()
	if err := setup(ctx, mgr); err != nil {
		return fmt.Errorf("ctrlrt: %s: %w", field, err)
	}
	return nil
}

// termManager is the long-lived manager as one term sees it (the mgr of
// Options.Setup); see Options.Setup for what each method does.
type termManager struct {
	manager.Manager // the long-lived manager, not the Manager wrapping it
	group           *group
	cache           *termCache
	client          client.Client // nil: the manager's
}

// GetClient returns the term's client: a shard's (see Options.ShardSetup),
// else the manager's.
func (tm *termManager) GetClient() client.Client {
	if tm.client != nil {
		return tm.client
	}
	return tm.Manager.GetClient()
}

// Add starts r within the term, once Setup has returned.
func (tm *termManager) Add(r manager.Runnable) error { return tm.group.add(r) }

func (tm *termManager) GetCache() cache.Cache { return tm.cache }

func (tm *termManager) GetFieldIndexer() client.FieldIndexer { return tm.cache }

// GetControllerOptions skips the name check of controllers: a term's
// controllers have the names of the previous term's, which
// controller-runtime's check (a process-wide set of names) would refuse.
func (tm *termManager) GetControllerOptions() config.Controller {
	c := tm.Manager.GetControllerOptions()
	c.SkipNameValidation = ptr.To(true)
	return c
}

// elected is what Elected returns within a term: closed.
var elected = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (tm *termManager) Elected() <-chan struct{} { return elected }

func (tm *termManager) Start(context.Context) error {
	return fmt.Errorf("%w: Start: the Manager starts the manager", ErrNotPerTerm)
}

func (tm *termManager) AddHealthzCheck(name string, _ healthz.Checker) error {
	return fmt.Errorf("%w: AddHealthzCheck(%q): add checks to the Manager before it starts", ErrNotPerTerm, name)
}

func (tm *termManager) AddReadyzCheck(name string, _ healthz.Checker) error {
	return fmt.Errorf("%w: AddReadyzCheck(%q): add checks to the Manager before it starts", ErrNotPerTerm, name)
}

func (tm *termManager) AddMetricsServerExtraHandler(path string, _ http.Handler) error {
	return fmt.Errorf("%w: AddMetricsServerExtraHandler(%q): add handlers to the Manager before it starts", ErrNotPerTerm, path)
}
