// Package shardplan is the pure rule by which a relect leader assigns
// shards to candidates: balanced by weight, and sticky — a shard stays
// with its holder unless that holder holds more than its share. It makes
// no API call and reads no clock. See docs/design.md, "Shards".
package shardplan

import (
	"cmp"
	"slices"
)

// Candidate is a candidate that may be given shards now.
type Candidate struct {
	Identity string
	// Weight is its relative share; at least 1.
	Weight int32
}

// Quotas returns how many of s shards each candidate should hold: the
// whole part of its weighted share s·w/W, plus one for as many candidates
// as the remainder needs — first those that hold more than their whole
// part now (held: identity → shards held), so that a settled assignment
// keeps its shape, then by the largest fraction, then by identity. The
// quotas add up to s; with no candidate, it returns an empty map.
func Quotas(s int, cands []Candidate, held map[string]int) map[string]int {
	q := make(map[string]int, len(cands))
	if len(cands) == 0 {
		return q
	}
	var total int64
	for _, c := range cands {
		total += int64(c.Weight)
	}
	type slot struct {
		id    string
		frac  int64 // s·w mod W: the fraction, in units of 1/W
		above bool
	}
	rest := s
	slots := make([]slot, 0, len(cands))
	for _, c := range cands {
		share := int64(s) * int64(c.Weight)
		whole := int(share / total)
		q[c.Identity] = whole
		rest -= whole
		slots = append(slots, slot{c.Identity, share % total, held[c.Identity] > whole})
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if a.above != b.above {
			if a.above {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.frac, a.frac); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	for i := 0; i < rest; i++ {
		q[slots[i%len(slots)].id]++
	}
	return q
}

// Assign returns the assignment of shards (shard → identity) to cands,
// given the current holders (shard → identity; missing or "" for none).
//
// A shard that avoid names anyone for (avoid: shard → the identities that
// gave it up: its work keeps failing) is placed apart, after the others
// and outside the quotas: it stays with its current holder unless avoid
// names that one, else goes to the candidate furthest below its quota
// that avoid does not name and that is not resting, else to one avoid
// does not name, else to any. So it never takes a healthy shard's place,
// nor moves because of one.
//
// Every other shard stays with a current holder among cands while that
// holder holds no more than its quota (the first shards in the order of
// shards), and the rest go, in that order, to the candidate furthest
// below its quota (ties by identity) that is not resting, else to any. A
// resting candidate (its release of a shard is not judged yet) keeps what
// it holds and gets no more: its quota is what it holds, and the others
// share the rest. With no candidate, no shard is assigned.
func Assign(shards []string, current map[string]string, cands []Candidate, avoid map[string][]string, resting map[string]bool) map[string]string {
	return AssignPaced(shards, current, cands, avoid, resting, nil, nil)
}

// AssignPaced is Assign with failing: shards placed apart, as those avoid
// names anyone for, though avoid may name nobody for them now (their work
// keeps failing, and every cooldown of theirs has ended); and runs (nil:
// everyone runs every shard): a shard goes, and stays, only with a
// candidate that runs it (its shard set may differ from the leader's), and
// a shard that no candidate runs is not assigned.
func AssignPaced(shards []string, current map[string]string, cands []Candidate, avoid map[string][]string, resting, failing map[string]bool,
	runs func(identity, shard string) bool) map[string]string {
	if runs == nil {
		runs = func(string, string) bool { return true }
	}
	a := newAssignment(len(shards), current, cands, avoid, resting, runs)
	if len(cands) == 0 {
		return a.out
	}
	healthy, apart, held := a.split(shards, failing)
	a.q = quotas(len(shards), cands, held, resting)
	for _, sh := range a.keep(a.fewestRunnersFirst(healthy)) {
		a.give(sh, func(id string) bool { return !resting[id] }, func(string) bool { return true })
	}
	for _, sh := range apart {
		a.placeApart(sh)
	}
	return a.out
}

// assignment is one call of AssignPaced: what it was given, the quotas,
// and the shards given so far.
type assignment struct {
	current map[string]string
	cands   []Candidate
	avoid   map[string][]string
	resting map[string]bool
	runs    func(identity, shard string) bool
	known   map[string]bool // the identities of cands
	ids     []string        // the same, sorted
	q       map[string]int  // each candidate's quota
	got     map[string]int  // the healthy shards given to each so far
	out     map[string]string
}

func newAssignment(n int, current map[string]string, cands []Candidate, avoid map[string][]string, resting map[string]bool,
	runs func(identity, shard string) bool) *assignment {
	a := &assignment{current: current, cands: cands, avoid: avoid, resting: resting, runs: runs,
		known: make(map[string]bool, len(cands)), got: map[string]int{}, out: make(map[string]string, n)}
	for _, c := range cands {
		a.known[c.Identity] = true
		a.ids = append(a.ids, c.Identity)
	}
	slices.Sort(a.ids)
	return a
}

// holder returns sh's current holder if it may keep sh: one of the
// candidates, and one that runs sh.
func (a *assignment) holder(sh string) (string, bool) {
	h := a.current[sh]
	return h, a.known[h] && a.runs(h, sh)
}

// split parts shards into the healthy and those placed apart (avoid names
// someone for them, or they are failing), and counts the healthy shards
// each candidate holds and may keep.
func (a *assignment) split(shards []string, failing map[string]bool) (healthy, apart []string, held map[string]int) {
	held = map[string]int{}
	for _, sh := range shards {
		if len(a.avoid[sh]) > 0 || failing[sh] {
			apart = append(apart, sh)
			continue
		}
		healthy = append(healthy, sh)
		if h, ok := a.holder(sh); ok {
			held[h]++
		}
	}
	return healthy, apart, held
}

// fewestRunnersFirst orders healthy (in place, stably) by how many
// candidates run each: a holder over its quota keeps first the shards
// the fewest candidates run (their sets may differ), so that what it
// sheds can go to one below its quota; with one set, the order of shards.
func (a *assignment) fewestRunnersFirst(healthy []string) []string {
	runners := map[string]int{}
	for _, sh := range healthy {
		for _, c := range a.cands {
			if a.runs(c.Identity, sh) {
				runners[sh]++
			}
		}
	}
	slices.SortStableFunc(healthy, func(x, y string) int { return cmp.Compare(runners[x], runners[y]) })
	return healthy
}

// keep leaves each of healthy with its holder while that holder is within
// its quota, and returns the others, in order: the pool to give.
func (a *assignment) keep(healthy []string) (pool []string) {
	for _, sh := range healthy {
		if h, ok := a.holder(sh); ok && a.got[h] < a.q[h] {
			a.out[sh] = h
			a.got[h]++
			continue
		}
		pool = append(pool, sh)
	}
	return pool
}

// pick returns the candidate furthest below its quota (ties by identity)
// among those ok accepts, or "".
func (a *assignment) pick(ok func(id string) bool) string {
	best, deficit := "", 0
	for _, id := range a.ids {
		if d := a.q[id] - a.got[id]; ok(id) && (best == "" || d > deficit) {
			best, deficit = id, d
		}
	}
	return best
}

// give gives sh to the candidate pick chooses among those that run sh
// and the first of rules accepts that accepts any; to none if none does.
func (a *assignment) give(sh string, rules ...func(id string) bool) {
	for _, ok := range rules {
		if best := a.pick(func(id string) bool { return a.runs(id, sh) && ok(id) }); best != "" {
			a.out[sh] = best
			a.got[best]++
			return
		}
	}
}

// placeApart gives a shard placed apart, outside the quotas: it stays with
// its holder unless avoid names that one, else goes to one avoid does not
// name and that is not resting, else to one avoid does not name, else to
// any.
func (a *assignment) placeApart(sh string) {
	avoided := func(id string) bool { return slices.Contains(a.avoid[sh], id) }
	if h, ok := a.holder(sh); ok && !avoided(h) {
		a.out[sh] = h
		return
	}
	a.give(sh, func(id string) bool { return !a.resting[id] && !avoided(id) },
		func(id string) bool { return !avoided(id) }, func(string) bool { return true })
}

// quotas is Quotas of s shards for cands, a resting candidate's being what
// it holds (held), the others sharing the rest.
func quotas(s int, cands []Candidate, held map[string]int, resting map[string]bool) map[string]int {
	var active []Candidate
	kept := 0
	for _, c := range cands {
		if resting[c.Identity] {
			kept += held[c.Identity]
		} else {
			active = append(active, c)
		}
	}
	q := Quotas(s-kept, active, held)
	for _, c := range cands {
		if resting[c.Identity] {
			q[c.Identity] = held[c.Identity]
		}
	}
	return q
}

// Taker returns who should stand ready to take a shard whose holder
// stopped renewing: of cands other than holder, the one holding the fewest
// shards in assign for its weight (ties by identity); "" if there is
// nobody else.
func Taker(assign map[string]string, holder string, cands []Candidate) string {
	n := map[string]int{}
	for _, h := range assign {
		n[h]++
	}
	best := ""
	var bc Candidate
	for _, c := range cands {
		if c.Identity == holder {
			continue
		}
		// n/w smaller first: compare n_c·w_b with n_b·w_c.
		if best == "" || int64(n[c.Identity])*int64(bc.Weight) < int64(n[best])*int64(c.Weight) ||
			(int64(n[c.Identity])*int64(bc.Weight) == int64(n[best])*int64(c.Weight) && c.Identity < best) {
			best, bc = c.Identity, c
		}
	}
	return best
}
