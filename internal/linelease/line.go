package linelease

import (
	"slices"

	"github.com/relect/relect/internal/wire"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// PostedFor returns the line l's record posts (nil: none): held by the
// leader that published its succession, not a handover, with Posted set.
// Its line is then in the line Lease, or soon will be. A nil l posts none.
func PostedFor(l *coordinationv1.Lease) *wire.Succession {
	if l == nil {
		return nil
	}
	sc := wire.SuccessionOf(l)
	if sc == nil || !sc.Posted || sc.From == "" || sc.From != wire.Holder(l) || wire.HandOverOf(l) != nil {
		return nil
	}
	return sc
}

// RecordLine is the line l's record posts (PostedFor), as the line Lease
// would post it: what an outsider looks for in the line Lease before it
// follows it (Same).
func RecordLine(l *coordinationv1.Lease) wire.Line {
	return wire.Line{Holder: wire.Holder(l), Term: wire.Transitions(l), Succession: PostedFor(l)}
}

// Same reports whether a and b post the same line for the same term: what
// a follower of the line Lease would do differently (the seconds of
// cooldowns left aside, which change with every write).
func Same(a, b wire.Line) bool {
	if a.Holder != b.Holder || a.Term != b.Term || a.Withdrawn() != b.Withdrawn() {
		return false
	}
	if a.Withdrawn() {
		return true
	}
	x, y := a.Succession, b.Succession
	coolingIDs := func(s *wire.Succession) []string {
		var ids []string
		for _, c := range s.Cooling {
			ids = append(ids, c.Identity)
		}
		return ids
	}
	return x.From == y.From && x.Priority == y.Priority && x.Streak == y.Streak && x.Warden == y.Warden &&
		slices.Equal(x.Next, y.Next) && slices.Equal(x.Keepers, y.Keepers) &&
		slices.Equal(x.Passed, y.Passed) && slices.Equal(coolingIDs(x), coolingIDs(y))
}
