package relect

import (
	"time"

	"github.com/relect/relect/internal/succession"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Succession: who tries to take the lease first when it is released or
// expires. Its rules, and what one candidate knows of the line of
// succession and, as leader, of the registry (succession.Book, which the
// state holds under its mutex), are the component internal/succession.
// This file keeps the core's side of it: the wire format under the names
// the core uses, and the public Candidate. The component's Config is
// built with the config (options.go, successionConfig).

// The wire format: internal/wire's, under the names this package uses.

type handOver = wire.HandOver

func successionOf(l *coordinationv1.Lease) *wire.Succession { return wire.SuccessionOf(l) }
func handOverOf(l *coordinationv1.Lease) *handOver          { return wire.HandOverOf(l) }
func registrationName(lease, identity string) string        { return wire.RegistrationName(lease, identity) }

// Candidate is a candidate for the lease as an Elector knows it
// (Elector.Candidates). Its fields are internal/succession.Candidate's,
// in the same order: keep them so.
type Candidate struct {
	// Identity is the candidate's holder identity.
	Identity string
	// Priority is its Options.Priority: higher goes first in succession.
	// A follower knows the leader's and the successors' from the line of
	// succession the leader publishes; where no line says it (a plain
	// client-go leader, a leader with the registry off or nobody to name),
	// the leader's is 0.
	Priority int32
	// Standby reports that it never campaigns (Options.Standby).
	Standby bool
	// Leader reports that it holds the lease, as last observed.
	Leader bool
	// Successor is its place in the leader's line of succession: 1 for the
	// next in line, 0 if it is not in it.
	Successor int
	// RenewedAt is when its registration was last renewed, by its own
	// clock (operator.ListCandidates); zero where unknown (Elector.Candidates).
	RenewedAt time.Time
}

// Compare orders candidates for people (Elector.Candidates, relect
// status): the leader first, then the line of succession in order, then
// the others by priority, highest first, and identity. It returns -1, 0 or
// +1, for slices.SortFunc(cs, Candidate.Compare).
func (c Candidate) Compare(d Candidate) int {
	return succession.Candidate(c).Compare(succession.Candidate(d))
}

// candidates converts the component's candidates to the public type.
func candidates(cs []succession.Candidate) []Candidate {
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = Candidate(c)
	}
	return out
}
