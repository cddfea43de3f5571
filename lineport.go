package relect

import (
	"context"
	"log/slog"
	"time"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/linelease"
	"github.com/relect/relect/internal/wire"
)

// The core's side of the line Lease component (internal/linelease; see
// docs/design.md, "Only the line watches"): the component's Config, built
// from the election's, and its ports — Calls (gatewayCalls, calls.go), the leader's
// (linePoster: the state's Want and the line Lease's version) and the
// outsider's (lineOutsider, follow.go, beside the follower's decisions of
// when to follow the line Lease and when to withdraw it). The state keeps
// the leader's want (state.line, a linelease.Want) under its mutex.

// lineConfigOf is the line Lease component's Config of cfg's election.
func lineConfigOf(cfg *config) linelease.Config {
	return linelease.Config{
		Name: cfg.Name, Namespace: cfg.Namespace, Identity: cfg.identity,
		LeaseDuration: cfg.LeaseDuration, RetryPeriod: cfg.RetryPeriod,
		Refresh: lineRefresh(cfg), Leases: cfg.leases,
	}
}

// lineRefresh is how often a leader writes its line Lease when nothing
// changed (linelease.Refresh): 5 minutes by default.
func lineRefresh(cfg *config) time.Duration {
	return linelease.Refresh(cfg.RegistrationRenewal, cfg.LeaseDuration)
}

// postLine keeps the line Lease as st wants it while ctx (the term's)
// lasts (linelease.Post).
func postLine(ctx context.Context, cfg *config, gw *gateway, st *state) {
	linelease.Post(ctx, lineConfigOf(cfg), linePoster{gatewayCalls{gw}, cfg, st})
}

// postHandOverLine posts the line of a handover just written, if it needs
// one (linelease.Want.HandOver), within ctx: a failure leaves the named
// candidate to take the lease by its turn, as after a release.
func postHandOverLine(ctx context.Context, cfg *config, gw *gateway, st *state) {
	p := linePoster{gatewayCalls{gw}, cfg, st}
	st.mu.Lock()
	line, ok := st.line.HandOver()
	st.mu.Unlock()
	if ok {
		linelease.PostHandOver(ctx, lineConfigOf(cfg), p, line, p.Version())
	}
}

// linePoster is the leader's port (linelease.Leader): a term's gateway,
// and the state's want.
type linePoster struct {
	gatewayCalls
	cfg *config
	st  *state
}

var _ linelease.Leader = linePoster{}

func (p linePoster) NewRetry() linelease.Backoff { return newRetryBackoff(p.cfg) }

func (p linePoster) Wanted() (line wire.Line, ok, withView bool, changed <-chan struct{}) {
	s := p.st
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.written
	ours := w != nil && w.HolderIdentity == s.cfg.identity
	var term int32
	if ours {
		term = leaserecord.ClampTransitions(w.LeaderTransitions)
	}
	return s.line.Current(ours, term)
}

func (p linePoster) Version() string {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.succession.LineVersion()
}

// Posted records the line Lease's resourceVersion for the records the
// leader writes next: they say Posted once the line Lease posts their line
// (wantLineLocked), and carry rv (succession.Book.LineVersion).
func (p linePoster) Posted(line wire.Line, rv string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.succession.LinePosted(rv)
	p.st.line.Wrote(line)
}

// Forbidden turns posting off for this Elector: the lines it publishes
// from now on do not say Posted, so every candidate keeps watching the
// election's Lease, as without the line Lease. Reported once.
func (p linePoster) Forbidden(err error) {
	s := p.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.succession.LineOff() {
		return
	}
	s.succession.TurnLineOff()
	s.logs.Log(slog.LevelWarn, "relect: this candidate may not write its line Lease; every candidate keeps watching the election's Lease",
		"lease", s.cfg.describe, "line", wire.LineName(s.cfg.Name), "err", err)
}

// wantLineLocked sets the line this leader wants posted, with a record of
// its own of term term carrying sc (nil: none; linelease.Want.Set). It
// reports whether the line Lease posts sc's line already: until it does,
// the record says Posted false (annotate). Requires mu.
func (s *state) wantLineLocked(term int32, sc *wire.Succession) (posted bool) {
	line := wire.Line{Holder: s.cfg.identity, Term: term}
	if sc != nil && sc.Posted {
		line.Succession = sc
	}
	return s.line.Set(line, s.succession.HasView())
}

// wantHandOverLineLocked prepares, for a handover record of term term to
// to carrying sc (nil: none), the line that tells to of it when to
// follows the line Lease (linelease.Want.SetHandOver); the leader posts it
// once the handover is written (postHandOverLine). Requires mu.
func (s *state) wantHandOverLineLocked(to string, term int32, sc *wire.Succession) {
	line := wire.Succession{Term: term, From: s.cfg.identity, Priority: s.cfg.Priority}
	if sc != nil {
		line = *sc
	}
	s.line.SetHandOver(to, term, line)
}

// observedLine records a line read from the line Lease by a follower that
// follows it: its holder leads (or holds, if withdrawn), and its
// succession is the line observed.
func (s *state) observedLine(line wire.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.term != nil {
		return
	}
	if line.Succession != nil {
		s.succession.ObserveLine(line.Succession, time.Now())
	}
	s.maxTransitions = max(s.maxTransitions, int(line.Term))
	s.setLeaderLocked(line.Holder, int(line.Term))
}
