package relect

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Succession: who tries to take the lease first when it is released or
// expires. The leader names its next few successors in the Lease itself
// (annotationSuccession), chosen from the registry by priority; every
// follower learns them from the watch it already has, and waits its turn:
// the first in line at once, each next one a succession step later, and
// everyone else after them, spread over a retry period. So a change of
// leader is one acquiring write, not one from every follower; a dead
// successor delays it by one step. The rules here are pure: they decide
// when to try, never whether a takeover is safe — that stays client-go's
// expiry rule and the conditional write.

// Candidate is a candidate for the lease as an Elector knows it
// (Elector.Candidates).
type Candidate struct {
	// Identity is the candidate's holder identity.
	Identity string
	// Priority is its Options.Priority: higher goes first in succession.
	Priority int32
	// Standby reports that it never campaigns (Options.Standby).
	Standby bool
	// Leader reports that it holds the lease, as last observed.
	Leader bool
	// Successor is its place in the leader's line of succession: 1 for the
	// next in line, 0 if it is not in it.
	Successor int
	// RenewedAt is when its registration was last renewed, by its own
	// clock (ListCandidates); zero where unknown (Elector.Candidates).
	RenewedAt time.Time
}

// chooseSuccessors returns the line of succession a leader publishes: the
// candidates that may lead (not standing by, not the leader itself), the
// highest priority first, then by identity; at most maxSuccessors.
func chooseSuccessors(cs []Candidate, leader string) []successor {
	var next []Candidate
	for _, c := range cs {
		if !c.Standby && c.Identity != leader {
			next = append(next, c)
		}
	}
	slices.SortFunc(next, func(a, b Candidate) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Identity, b.Identity)
	})
	out := make([]successor, 0, min(len(next), maxSuccessors))
	for _, c := range next[:min(len(next), maxSuccessors)] {
		out = append(out, successor{Identity: c.Identity, Priority: c.Priority})
	}
	return out
}

// turn returns how long after l's lease becomes free — released, or
// expired — identity waits before it tries to take it: nothing if l
// carries no line of succession (a client-go leader, or the registry off:
// everyone tries at once, as before succession); its place in line times
// step if it is in it; else, after everyone in line, a delay spread over
// two steps by a hash of its identity and the term, so that the others do
// not all try at once either.
func turn(l *coordinationv1.Lease, identity string, step time.Duration) time.Duration {
	s := successionOf(l)
	if s == nil {
		return 0
	}
	if r := s.rank(identity); r >= 0 {
		return time.Duration(r) * step
	}
	h := fnv.New64a()
	h.Write([]byte(identity))
	h.Write([]byte{byte(s.Term), byte(s.Term >> 8), byte(s.Term >> 16), byte(s.Term >> 24)})
	spread := time.Duration(h.Sum64() % uint64(2*step+1))
	return time.Duration(len(s.Next))*step + spread
}

// sortCandidates orders cs for people: the leader first, then the line of
// succession in order, then the others, highest priority first, then by
// identity.
func sortCandidates(cs []Candidate) {
	slices.SortFunc(cs, func(a, b Candidate) int {
		switch {
		case a.Leader != b.Leader:
			if a.Leader {
				return -1
			}
			return 1
		case (a.Successor == 0) != (b.Successor == 0):
			if a.Successor == 0 {
				return 1
			}
			return -1
		case a.Successor != b.Successor:
			return a.Successor - b.Successor
		case a.Priority != b.Priority:
			return cmp.Compare(b.Priority, a.Priority)
		}
		return cmp.Compare(a.Identity, b.Identity)
	})
}
