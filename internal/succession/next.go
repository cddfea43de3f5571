package succession

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/relect/relect/internal/wire"
)

// Next is the line of succession this candidate publishes with a record of
// term's leaseTransitions at now, leaving out the identities in except:
// chosen from the leader's view of the registry (without the passed over),
// or, before it has one, carried over from the line last observed; nil
// when nobody is known and there is no streak of stuck handovers or
// cooldown to carry (internal/work). With the registry off it names
// nobody, and carries the streak and the cooldowns all the same: they are
// the fleet's, not the registry's, and a leader that dropped them would
// let the next one hand over at once. It records the warden it names.
func (b *Book) Next(term int32, now time.Time, except ...string) *wire.Succession {
	registry := b.cfg.Registry && !b.off
	streak, cools := b.published(now)
	next := slices.DeleteFunc(b.candidatesForLine(registry, now), func(c wire.Successor) bool {
		_, cool := cools[c.Identity]
		return c.Identity == b.cfg.Identity || b.isPassedOver(c.Identity) || cool || slices.Contains(except, c.Identity)
	})
	next = next[:min(len(next), wire.MaxSuccessors)]
	if len(next) == 0 && streak == 0 && len(cools) == 0 {
		return nil
	}
	s := &wire.Succession{Term: term, From: b.cfg.Identity, Priority: b.cfg.Priority, Next: next, Streak: int32(streak)}
	if registry {
		s.Keepers = b.keepers(term, now, next, except)
		s.Posted = b.cfg.Posts && !b.lineOff && len(next) > 0 && b.outsiders(s, now)
		s.LineVersion = b.LineVersion()
		if s.Posted {
			// No line is posted without a warden: with nobody outside
			// the line reading the election's Lease, a line gone at once
			// would leave the fleet waiting for the line Lease to go
			// stale. Every candidate then watches, as in a small fleet.
			s.Warden = b.warden(term, now, s, except)
			s.Posted = s.Warden != ""
		}
	}
	for _, id := range slices.Sorted(maps.Keys(b.passedOver)) {
		if len(s.Passed) == wire.MaxPassed || !registry { // without the registry, nobody is named, passed over or not
			break
		}
		s.Passed = append(s.Passed, id)
	}
	for _, id := range slices.Sorted(maps.Keys(cools)) {
		if len(s.Cooling) == wire.MaxPassed {
			break
		}
		left := int32((cools[id].Sub(now) + time.Second - 1) / time.Second)
		s.Cooling = append(s.Cooling, wire.Cooling{Identity: id, Seconds: left})
	}
	return s
}

// candidatesForLine are who Next may name, before it leaves out this
// candidate, the passed over, the cooling and the excepted: chosen from
// the leader's view of the registry, or, before it has one, carried over
// from the line last observed; none with the registry off.
func (b *Book) candidatesForLine(registry bool, now time.Time) []wire.Successor {
	switch {
	case !registry:
		return nil
	case b.view != nil:
		live := slices.DeleteFunc(b.live(now), func(c Candidate) bool { return b.isPassedOver(c.Identity) })
		return chooseSuccessors(live, b.cfg.Identity)
	case b.line != nil:
		// Before its own list: the line it took over, and behind it the
		// leader that published it — alive, since it released or handed
		// over (one whose lease expired is passed over). So a chain of
		// short terms, none of which lives to list the registry, does not
		// wear the line down to nobody.
		next := slices.Clone(b.line.Next)
		if from := b.line.From; from != "" && !slices.ContainsFunc(next, func(c wire.Successor) bool { return c.Identity == from }) {
			next = append(next, wire.Successor{Identity: from, Priority: b.line.Priority})
		}
		return next[:min(len(next), wire.MaxSuccessors+1)] // cut to MaxSuccessors once this one is out
	}
	return nil
}

// keepers are the keepers that next names beside the successors next:
// from the leader's view, the live candidates that may lead and that next
// could name but does not (neither this candidate, the passed over, the
// cooling nor the excepted), the one whose identity hashed with the term
// is lowest first — chosen apart from priority, so that they are not the
// successors' likeliest peers (the same kind of node, the same zone) —
// after the keepers of the line observed that still qualify, which are
// all it names before a view.
func (b *Book) keepers(term int32, now time.Time, next []wire.Successor, except []string) []string {
	skip := func(id string) bool {
		_, cool := b.cooling[id]
		return id == b.cfg.Identity || b.isPassedOver(id) || cool || slices.Contains(except, id) ||
			slices.ContainsFunc(next, func(c wire.Successor) bool { return c.Identity == id })
	}
	var kept []string // the line observed's keepers, if they still qualify
	if b.line != nil {
		kept = slices.DeleteFunc(slices.Clone(b.line.Keepers), skip)
	}
	if b.view == nil {
		return kept[:min(len(kept), wire.MaxKeepers)]
	}
	var ids []string
	for _, c := range b.live(now) {
		if !c.Standby && !skip(c.Identity) {
			ids = append(ids, c.Identity)
		}
	}
	// A keeper stays one while it qualifies, so that a change of leader
	// or line does not move the watch to another candidate.
	rank := func(id string) int {
		if slices.Contains(kept, id) {
			return 0
		}
		return 1
	}
	slices.SortFunc(ids, func(x, y string) int {
		if c := cmp.Compare(rank(x), rank(y)); c != 0 {
			return c
		}
		return cmp.Compare(keeperHash(x, term), keeperHash(y, term))
	})
	return ids[:min(len(ids), wire.MaxKeepers)]
}

// outsiders reports whether a line s leaves enough candidates out to be
// posted (minOutsiders): live registered candidates of the view, standing
// by or not, that s names neither as successor nor as keeper; before a
// view, whether the line observed was posted.
func (b *Book) outsiders(s *wire.Succession, now time.Time) bool {
	if b.view == nil {
		return b.line != nil && b.line.Posted
	}
	n := 0
	for _, c := range b.live(now) {
		if c.Identity != b.cfg.Identity && !s.Names(c.Identity) {
			n++
		}
	}
	return n >= minOutsiders
}
