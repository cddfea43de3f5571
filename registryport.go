package relect

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/relect/relect/internal/pace"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"
)

// The core's side of the registry component (internal/registry): the
// component's Config, built from the election's, and its port — Calls
// (the gateway, through the adapter the shards component uses too) and
// Reports (registryPort: the state, which keeps the leader's view in its
// succession Book, and warns). Followers do not watch the registry: they
// learn the line of succession from the election's Lease, which they
// watch anyway, or, outside the line, from the line Lease
// (internal/linelease).

// startRegistration keeps this candidate's registration for one Run, from
// cfg's election, through gw (registry.Register): the returned function,
// called once Run's campaign and shards ended, deletes it and waits.
func startRegistration(ctx context.Context, cfg *config, gw *gateway, st *state) (*registry.Registration, func()) {
	return registry.Register(ctx, registryConfig(cfg), registryCalls(gw), registryPort{st})
}

// watchCandidates keeps the leader's view of the registry while ctx (the
// term's) lasts (registry.Watch).
func watchCandidates(ctx context.Context, cfg *config, gw *gateway, st *state) {
	registry.Watch(ctx, registryConfig(cfg), registryCalls(gw), registryPort{st})
}

// registryConfig is the registry component's Config of cfg's election.
func registryConfig(cfg *config) registry.Config {
	return registry.Config{
		Name: cfg.Name, Namespace: cfg.Namespace, Identity: cfg.identity, Instance: cfg.instance,
		RetryPeriod: cfg.RetryPeriod, RenewDeadline: cfg.RenewDeadline, BackoffMax: cfg.BackoffMax,
		Renewal: cfg.RegistrationRenewal,
		// With shards, whose assignment needs the registry, a 403 is
		// retried (TestBreakRegistration403IsRetried).
		Needed:       len(cfg.shards) > 0,
		Leases:       cfg.leases,
		Registration: cfg.succession.Registration,
		NewBackoff: func(initial, maxWait time.Duration) registry.Backoff {
			return pace.NewBackoff(initial, maxWait)
		},
	}
}

// registryCalls is the registry's Calls over gw.
func registryCalls(gw *gateway) registry.Calls { return gatewayCalls{gw} }

// registryPort is the registry component's Reports: the Elector's state.
// Each method takes the state's mutex.
type registryPort struct{ s *state }

var _ registry.Reports = registryPort{}

// Off returns a context done once the registry is off for this Elector
// (Forbidden).
func (p registryPort) Off() context.Context { return p.s.registryOffCtx }

// Forbidden records that a registry call of verb got 403: the registry is
// off for this Elector from now on (ending Off's context), and a warning
// says which RBAC rule is missing and how to go without. Reported once.
func (p registryPort) Forbidden(verb string, err error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.succession.RegistryOff() {
		return
	}
	s.succession.TurnRegistryOff()
	s.offRegistry()
	e := fmt.Errorf("%w: this candidate may not %s the Leases of namespace %s: %w; "+
		"grant its Role leases get, watch, create, update, list and delete (deploy/), "+
		"or set Options.DisableRegistry (relect run and sidecar: --disable-registry) to go without a line of succession",
		ErrRegistryOff, rbacVerb(verb), s.cfg.Namespace, err)
	s.logs.Log(slog.LevelWarn, "relect: the candidate registry is off", "lease", s.cfg.describe, "err", e)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// CannotDelete warns, once, that registrations cannot be deleted (403 to
// verb): this candidate's stays after Run returns, and a leader's lapsed
// ones stay, until someone deletes them; they lapse for the leader all the
// same.
func (p registryPort) CannotDelete(verb string, err error) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warnedDelete {
		return
	}
	s.warnedDelete = true
	e := fmt.Errorf("relect: this candidate may not delete the Leases of namespace %s (%s: %w): "+
		"registrations of candidates that stopped stay until deleted by hand (they lapse for the leader meanwhile); "+
		"grant leases delete, or set Options.DisableRegistry (--disable-registry)", s.cfg.Namespace, verb, err)
	s.logs.Log(slog.LevelWarn, "relect: registrations cannot be deleted", "lease", s.cfg.describe, "err", e)
	s.emitLocked(Event{Kind: EventError, Err: e})
}

// rbacVerb is the RBAC verb a registry call needs.
func rbacVerb(v string) string {
	switch v {
	case registry.VerbListCandidates:
		return "list"
	case registry.VerbWatchCandidates:
		return "watch"
	case registry.VerbDeregister, registry.VerbDeleteCandidate:
		return "delete"
	}
	return "get, create or update"
}

// DuplicateIdentity reports that another process seems to run with this
// Elector's identity (state.duplicateLocked).
func (p registryPort) DuplicateIdentity(how string) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.duplicateLocked(how)
}

// Listed replaces the leader's view with a fresh list.
func (p registryPort) Listed(rs []wire.Registration) {
	cs := make([]succession.Registration, len(rs))
	for i, r := range rs {
		cs[i] = succession.RegistrationFrom(r)
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.succession.Listed(cs, time.Now())
	s.changedLocked() // a HandOver may wait for the view (stepDown)
}

// Changed records a registration added or renewed.
func (p registryPort) Changed(r wire.Registration) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.succession.Changed(succession.RegistrationFrom(r), time.Now())
}

// Gone records a registration deleted, or departed.
func (p registryPort) Gone(name string) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.succession.Gone(name)
}

// Lapsed returns the registrations of the leader's view that it has seen
// unchanged for twice their lease duration, on its own clock.
func (p registryPort) Lapsed() []registry.Version {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	var out []registry.Version
	for _, c := range p.s.succession.LapsedLongAgo(time.Now()) {
		out = append(out, registry.Version{Name: c.Name, RV: c.RV})
	}
	return out
}

// Unknown drops the leader's view: the term ended. When each registration
// was first seen at its version is kept (succession.Book.DropView).
func (p registryPort) Unknown() {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.succession.DropView()
}
