package relect

import (
	"encoding/json"
	"time"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The state's side of the line of succession that the Lease's writes and
// Elector.Candidates read (succession.Book), under mu.

// annotate sets relect's annotations on a Lease object about to be written
// with rec (leaserecord.Lock, and the follower's acquiring write): the line of
// succession, and for a record that names another holder — a handover —
// the handover mark. Annotations of relect's that the write does not carry
// are removed, an operator's Request among them.
func (s *state) annotate(l *coordinationv1.Lease, rec *record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(l.Annotations, wire.AnnotationSuccession)
	delete(l.Annotations, wire.AnnotationHandOver)
	// A Request is for one term: honoured (this write is its release or
	// handover), refused, or stale. The write is conditional on the
	// version read, so it never removes one it did not see.
	delete(l.Annotations, wire.AnnotationRequest)
	delete(l.Annotations, wire.AnnotationFence)
	term := leaserecord.ClampTransitions(rec.LeaderTransitions)
	set := func(k, v string) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[k] = v
	}
	for k, v := range s.cfg.leaseLabels { // a shard Lease's, for the leader's watch
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		l.Labels[k] = v
	}
	if s.cfg.shard != "" {
		set(wire.AnnotationShard, s.cfg.shard)
	}
	to := ""
	if h := rec.HolderIdentity; h != "" && h != s.cfg.identity {
		to = h
		set(wire.AnnotationHandOver, (&handOver{Term: term, From: s.cfg.identity, To: to}).Encode())
	}
	sc := s.succession.Next(term, time.Now(), to)
	switch {
	case !s.cfg.registry || s.cfg.leases == nil:
	case rec.HolderIdentity == s.cfg.identity:
		if !s.wantLineLocked(term, sc) && sc != nil && sc.Posted {
			said := *sc // not posted yet: the next write says it
			said.Posted = false
			sc = &said
		}
	case to != "":
		s.wantHandOverLineLocked(to, term, sc)
	}
	if sc != nil {
		set(wire.AnnotationSuccession, sc.Encode())
	}
	if t := s.term; t != nil && t.fence != "" && rec.HolderIdentity == s.cfg.identity {
		// Bound to the record's term number, which a hand edit of leaseTransitions
		// may have changed under the term: operator.Fence matches the Lease as it is.
		raw, _ := json.Marshal(wire.FenceMark{Holder: s.cfg.identity, Term: term, Fence: string(t.fence)})
		set(wire.AnnotationFence, string(raw)) // the term's renewals publish its fence, for tools
	}
}

// knownCandidates returns the candidates as this Elector knows them (see
// Elector.Candidates).
func (s *state) knownCandidates() []Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	self := Candidate{Identity: s.cfg.identity, Priority: s.cfg.Priority, Standby: s.cfg.Standby}
	return candidates(s.succession.Known(succession.Candidate(self), s.leader, time.Now()))
}
