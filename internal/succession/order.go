package succession

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"

	"github.com/relect/relect/internal/warden"
	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// The ordering: who goes first.

// chooseSuccessors returns the line of succession a leader publishes: the
// candidates that may lead (not standing by, not the leader itself), the
// highest priority first, then by identity; at most wire.MaxSuccessors.
func chooseSuccessors(cs []Candidate, leader string) []wire.Successor {
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
	out := make([]wire.Successor, 0, min(len(next), wire.MaxSuccessors))
	for _, c := range next[:min(len(next), wire.MaxSuccessors)] {
		out = append(out, wire.Successor{Identity: c.Identity, Priority: c.Priority})
	}
	return out
}

// Turn returns how long after l's lease becomes free — released, or
// expired — identity waits before it tries to take it: nothing if l
// carries no line of succession (a client-go leader, or the registry off:
// everyone tries at once, as before succession); its place in line times
// step if it is in it, the keepers after the successors, and the warden
// after the keepers; else, after everyone in line, a delay spread over
// two steps by a hash of its identity and the term, so that the others do
// not all try at once either. A candidate that stands back (back: its own
// work check fails, or the line has it cooling after a stuck handover)
// waits two more steps than the others outside the line: it still takes
// the lease when nobody else does. step is the succession step (the core
// uses half the retry period).
func Turn(l *coordinationv1.Lease, identity string, step time.Duration, back bool) time.Duration {
	s := wire.SuccessionOf(l)
	if s == nil {
		return 0
	}
	if r := s.Rank(identity); r >= 0 && !back {
		return time.Duration(r) * step
	}
	if k := s.KeeperRank(identity); k >= 0 && !back {
		return time.Duration(len(s.Next)+k) * step
	}
	if s.Warden == identity && !back {
		return time.Duration(len(s.Next)+len(s.Keepers)) * step
	}
	spread := time.Duration(keeperHash(identity, s.Term) % uint64(2*step+1))
	if back {
		spread += 2 * step
	}
	return time.Duration(len(s.Next)+len(s.Keepers))*step + spread
}

// keeperHash orders the candidates for keeper in a term.
func keeperHash(identity string, term int32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(identity))
	h.Write([]byte{byte(term), byte(term >> 8), byte(term >> 16), byte(term >> 24)})
	return h.Sum64()
}

// wardenLapse is how long a warden may go without a renewal of its
// registration the leader sees before the leader names another: three
// beats (warden.Beat) of a lease of leaseDuration.
func wardenLapse(leaseDuration time.Duration) time.Duration {
	return 3 * warden.Beat(leaseDuration)
}

// minOutsiders is how many candidates a line must leave out for it to be
// posted: as many as a line names (successors and keepers). In a smaller
// fleet the watches it would save cost less than the line Lease's writes
// and the joins and leaves around a change of leader, so a fleet of up to
// 2 × (MaxSuccessors + MaxKeepers) candidates posts no line, and every
// candidate watches the election's Lease.
const minOutsiders = wire.MaxSuccessors + wire.MaxKeepers
