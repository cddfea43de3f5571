package sim

import "slices"

// Minimize shrinks s while fails(s) holds, greedily: it drops whole
// candidates (with every action on them), then single actions (with the
// action they cannot go without: a kill or stop and its restart, a huge
// duration and its repair), keeping each removal after which fails still
// holds, until no removal does. Interleavings vary between replays of one
// schedule (see the package doc), so fails should replay each candidate
// schedule several times and report whether any replay failed.
func Minimize(s *Schedule, fails func(*Schedule) bool) *Schedule {
	for changed := true; changed; {
		changed = false
		for c := s.Candidates - 1; c >= 0 && s.Candidates > 2; c-- {
			if next := s.WithoutCandidate(c); fails(next) {
				s, changed = next, true
			}
		}
		for i := len(s.Actions) - 1; i >= 0; i-- {
			if i >= len(s.Actions) || (s.Actions[i].Kind == Start && s.Actions[i].Initial) {
				continue
			}
			if next := s.withoutAction(i); fails(next) {
				s, changed = next, true
			}
		}
	}
	return s
}

// WithoutCandidate returns a copy of s without candidate c and every action
// on it (or naming it as holder — of the Lease, a shard's Lease or a shard
// in the table — or as the target of a handover); later candidates are
// renumbered.
func (s *Schedule) WithoutCandidate(c int) *Schedule {
	names := func(a Action) bool { return a.Kind.namesHolder() && a.Holder == c }
	out := s.Filter(func(a Action) bool { return a.Target != c && !names(a) })
	out.Candidates--
	out.Priority = slices.Delete(slices.Clone(s.Priority), c, c+1)
	out.Standby = slices.Delete(slices.Clone(s.Standby), c, c+1)
	for i := range out.Actions {
		a := &out.Actions[i]
		if a.Target > c {
			a.Target--
		}
		if a.Kind.namesHolder() && a.Holder > c {
			a.Holder--
		}
	}
	return out
}

// withoutAction returns a copy of s without action i and its partner.
func (s *Schedule) withoutAction(i int) *Schedule {
	drop := map[int]bool{i: true}
	if j := s.partner(i); j >= 0 {
		drop[j] = true
	}
	n := -1
	return s.Filter(func(Action) bool { n++; return !drop[n] })
}
