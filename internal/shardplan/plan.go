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
	out := make(map[string]string, len(shards))
	if len(cands) == 0 {
		return out
	}
	known := make(map[string]bool, len(cands))
	for _, c := range cands {
		known[c.Identity] = true
	}
	var healthy, apart []string
	held := map[string]int{}
	for _, sh := range shards {
		if len(avoid[sh]) > 0 || failing[sh] {
			apart = append(apart, sh)
			continue
		}
		healthy = append(healthy, sh)
		if h := current[sh]; known[h] && runs(h, sh) {
			held[h]++
		}
	}
	q := quotas(len(shards), cands, held, resting)
	// A holder over its quota keeps first the shards the fewest
	// candidates run (their sets may differ), so that what it sheds can
	// go to one below its quota; with one set, the order of shards.
	runners := map[string]int{}
	for _, sh := range healthy {
		for _, c := range cands {
			if runs(c.Identity, sh) {
				runners[sh]++
			}
		}
	}
	slices.SortStableFunc(healthy, func(a, b string) int { return cmp.Compare(runners[a], runners[b]) })
	got := map[string]int{}
	var pool []string
	for _, sh := range healthy {
		if h := current[sh]; known[h] && runs(h, sh) && got[h] < q[h] {
			out[sh] = h
			got[h]++
			continue
		}
		pool = append(pool, sh)
	}
	ids := make([]string, 0, len(cands))
	for _, c := range cands {
		ids = append(ids, c.Identity)
	}
	slices.Sort(ids)
	pick := func(ok func(id string) bool) string {
		best, deficit := "", 0
		for _, id := range ids {
			if d := q[id] - got[id]; ok(id) && (best == "" || d > deficit) {
				best, deficit = id, d
			}
		}
		return best
	}
	give := func(sh string, rules ...func(id string) bool) {
		for _, ok := range rules {
			if best := pick(func(id string) bool { return runs(id, sh) && ok(id) }); best != "" {
				out[sh] = best
				got[best]++
				return
			}
		}
	}
	for _, sh := range pool {
		give(sh, func(id string) bool { return !resting[id] }, func(string) bool { return true })
	}
	for _, sh := range apart {
		if h := current[sh]; known[h] && runs(h, sh) && !slices.Contains(avoid[sh], h) {
			out[sh] = h
			continue
		}
		give(sh, func(id string) bool { return !resting[id] && !slices.Contains(avoid[sh], id) },
			func(id string) bool { return !slices.Contains(avoid[sh], id) }, func(string) bool { return true })
	}
	return out
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
