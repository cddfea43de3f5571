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
// given the current holders (shard → identity; missing or "" for none): a
// shard stays with a current holder among cands while that holder holds no
// more than its quota (the first shards in the order of shards, those
// some candidate gave up last: a healthy shard never moves to make room
// for one whose work keeps failing), and the rest go, in that order, to the
// candidate furthest below its quota (ties by identity) — one that avoid
// does not name for that shard (avoid: shard → the identities that gave it
// up) and that is not resting (it gave a shard up: it keeps what it holds
// and gets no more: its quota is what it holds, and the others share the
// rest) if there is one, else one avoid does not name, else any. With no
// candidate, no shard is assigned.
func Assign(shards []string, current map[string]string, cands []Candidate, avoid map[string][]string, resting map[string]bool) map[string]string {
	out := make(map[string]string, len(shards))
	if len(cands) == 0 {
		return out
	}
	known := make(map[string]bool, len(cands))
	for _, c := range cands {
		known[c.Identity] = true
	}
	held := map[string]int{}
	for _, sh := range shards {
		if h := current[sh]; known[h] {
			held[h]++
		}
	}
	// A resting candidate's share is what it keeps; the others share the
	// rest, so that nobody evicts a shard to make room that it will not
	// take.
	var active []Candidate
	kept := 0
	for _, c := range cands {
		if resting[c.Identity] {
			kept += held[c.Identity]
		} else {
			active = append(active, c)
		}
	}
	q := Quotas(len(shards)-kept, active, held)
	for _, c := range cands {
		if resting[c.Identity] {
			q[c.Identity] = held[c.Identity]
		}
	}
	got := map[string]int{}
	var pool []string
	// A holder over its quota keeps first the healthy shards, in order,
	// and sheds first those some candidate gave up (their work keeps
	// failing): a healthy shard never moves to make room for one.
	order := slices.Clone(shards)
	slices.SortStableFunc(order, func(a, b string) int {
		return cmp.Compare(min(len(avoid[a]), 1), min(len(avoid[b]), 1))
	})
	for _, sh := range order {
		if h := current[sh]; known[h] && got[h] < q[h] {
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
	for _, sh := range pool {
		pick := func(ok func(id string) bool) string {
			best, deficit := "", 0
			for _, id := range ids {
				if d := q[id] - got[id]; ok(id) && (best == "" || d > deficit) {
					best, deficit = id, d
				}
			}
			return best
		}
		best := pick(func(id string) bool { return !resting[id] && !slices.Contains(avoid[sh], id) })
		if best == "" {
			best = pick(func(id string) bool { return !slices.Contains(avoid[sh], id) })
		}
		if best == "" {
			best = pick(func(string) bool { return true })
		}
		out[sh] = best
		got[best]++
	}
	return out
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
