package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect/shardrange"
)

// What the checkers make of range shards (Shards.Ranges): a range shard is
// a split of the data, so beyond the shard checkers (checkshards.go), which
// judge shards by name, CheckShardRanges judges the hashes the terms hold:
//
//   - at every instant a term's context begins or ends — the only instants
//     at which the set of running ranges changes — the ranges of the terms
//     alive then are pairwise disjoint as hash intervals
//     (shard-range-overlap), whatever their shards' names, and never of
//     two fields (a uid range and a namespace range share objects);
//   - at each such instant at which every shard of a split is held, their
//     union is the whole hash space [0, 2^64) (shard-range-gap);
//   - every term's context carries exactly shardrange.Of(field, i, S) for
//     its shard i of its candidate's split (ShardTerm.Split: field, S)
//     (shard-range-context).
//
// CheckHashSpans, which does the first two, knows nothing of shards: it
// takes intervals of time and of hashes and a rule for when they must
// cover the space. Each term is judged by its own candidate's split, so
// that a schedule whose split changes (Count or Ranges in a rolling
// update) is judged with the terms of both splits as they are.

// HashSpan is one holder's range of hashes over a time: alive in [From, To)
// (To math.MaxInt64 if it never ended), holding the objects whose Field
// hashes to Start…Last, both inclusive (shardrange.Range's bounds).
type HashSpan struct {
	Term        int // the caller's index (ShardHistory.Terms)
	From, To    time.Duration
	Field       shardrange.Field
	Start, Last uint64
}

// RangeOverlap is two spans, A and B (indexes into the spans checked),
// alive together at At (the first instant checked at which they were)
// whose ranges share the hashes Start…Last — or, of two different fields,
// share objects (every object has both hashes): then Start…Last is A's.
type RangeOverlap struct {
	A, B        int
	At          time.Duration
	Start, Last uint64
}

// RangeGap is the first hashes, Start…Last, that no span alive at At held,
// at an instant at which the spans had to cover the space.
type RangeGap struct {
	At          time.Duration
	Start, Last uint64
}

// RangeCoverage is what CheckHashSpans found.
type RangeCoverage struct {
	// Instants counts the instants checked (every distinct From and To);
	// Whole, those of them at which the alive spans had to cover the space.
	Instants, Whole int
	Overlaps        []RangeOverlap // each pair once, at its first instant
	Gaps            []RangeGap     // at most one per instant
}

// CheckHashSpans checks spans at every instant one begins or ends: the
// ranges of the spans alive then are pairwise disjoint (two of different
// fields never are), and, when
// whole(alive) says they must cover the space (alive: indexes into spans,
// sorted by Start), their union is [0, 2^64). A nil whole never asks for
// the whole space.
func CheckHashSpans(spans []HashSpan, whole func(alive []int) bool) RangeCoverage {
	var instants []time.Duration
	for _, s := range spans {
		instants = append(instants, s.From)
		if s.To != math.MaxInt64 {
			instants = append(instants, s.To)
		}
	}
	slices.Sort(instants)
	instants = slices.Compact(instants)
	var (
		cov   RangeCoverage
		seen  = map[[2]int]bool{}
		alive []int
	)
	for _, at := range instants {
		alive = alive[:0]
		for i, s := range spans {
			if s.From <= at && at < s.To {
				alive = append(alive, i)
			}
		}
		slices.SortFunc(alive, func(a, b int) int { return cmpSpan(spans[a], spans[b]) })
		cov.Instants++
		for x, a := range alive {
			for _, b := range alive[x+1:] {
				lo, hi := max(spans[a].Start, spans[b].Start), min(spans[a].Last, spans[b].Last)
				if spans[a].Field != spans[b].Field {
					lo, hi = spans[a].Start, spans[a].Last
				}
				if lo <= hi && !seen[[2]int{a, b}] {
					seen[[2]int{a, b}] = true
					cov.Overlaps = append(cov.Overlaps, RangeOverlap{A: a, B: b, At: at, Start: lo, Last: hi})
				}
			}
		}
		if whole == nil || !whole(alive) {
			continue
		}
		cov.Whole++
		if lo, hi, ok := firstGap(spans, alive); ok {
			cov.Gaps = append(cov.Gaps, RangeGap{At: at, Start: lo, Last: hi})
		}
	}
	return cov
}

func cmpSpan(a, b HashSpan) int {
	return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Last, b.Last))
}

// firstGap returns the first hashes lo…hi that none of the spans alive
// (sorted by Start) holds, if any.
func firstGap(spans []HashSpan, alive []int) (lo, hi uint64, ok bool) {
	var next uint64 // the smallest hash not yet covered
	for _, i := range alive {
		s := spans[i]
		if s.Start > next {
			return next, s.Start - 1, true
		}
		if s.Last == math.MaxUint64 {
			return 0, 0, false
		}
		next = max(next, s.Last+1)
	}
	return next, math.MaxUint64, true
}

// fmtHashes writes the hashes lo…hi as the inclusive interval they are.
func fmtHashes(lo, hi uint64) string { return fmt.Sprintf("[%#016x, %#016x]", lo, hi) }

// CheckShardRanges: shard-range-overlap, shard-range-gap and
// shard-range-context (see the file's comment), and the coverage
// CheckHashSpans found; nothing for a history without range shards.
func CheckShardRanges(h *History) ([]Violation, RangeCoverage) {
	sh := h.Shards
	if sh == nil || sh.Ranges == "" {
		return nil, RangeCoverage{}
	}
	var (
		out   []Violation
		spans []HashSpan
	)
	for i, t := range sh.Terms {
		idx, err := strconv.Atoi(t.Shard)
		want, errOf := shardrange.Of(t.Split.Field, idx, t.Split.Count)
		switch {
		case !t.Ranged:
			out = append(out, rangeViolation(t, "its context carries no range"))
		case err != nil || errOf != nil:
			out = append(out, rangeViolation(t, fmt.Sprintf("not a shard of %d %s ranges", t.Split.Count, t.Split.Field)))
		case t.Range != want:
			out = append(out, rangeViolation(t, fmt.Sprintf("its context carries %s %s, want shardrange.Of(%s, %d, %d) = %s %s",
				t.Range.Field(), fmtHashes(t.Range.Start(), t.Range.Last()), t.Split.Field, idx, t.Split.Count,
				want.Field(), fmtHashes(want.Start(), want.Last()))))
		}
		if t.Ranged {
			spans = append(spans, HashSpan{Term: i, From: t.Start, To: termEnd(h, t), Field: t.Range.Field(),
				Start: t.Range.Start(), Last: t.Range.Last()})
		}
	}
	cov := CheckHashSpans(spans, func(alive []int) bool { return everyShard(sh, spans, alive) })
	for _, o := range cov.Overlaps {
		a, b := sh.Terms[spans[o.A].Term], sh.Terms[spans[o.B].Term]
		what := "both run the hashes " + fmtHashes(o.Start, o.Last)
		if a.Range.Field() != b.Range.Field() {
			what = fmt.Sprintf("run at once, a %s range and a %s range: they share objects", a.Range.Field(), b.Range.Field())
		}
		out = append(out, Violation{Class: Safety, Rule: "shard-range-overlap", At: o.At, Candidates: []int{a.Candidate, b.Candidate},
			Detail: fmt.Sprintf("%s's shard %s of %d (fence %s) and %s's shard %s of %d (fence %s) %s",
				CandidateName(a.Candidate), a.Shard, a.Split.Count, a.Fence, CandidateName(b.Candidate), b.Shard, b.Split.Count, b.Fence, what)})
	}
	for _, g := range cov.Gaps {
		out = append(out, Violation{Class: Safety, Rule: "shard-range-gap", At: g.At,
			Detail: fmt.Sprintf("every shard of a split held, but no held range has the hashes %s", fmtHashes(g.Start, g.Last))})
	}
	return out, cov
}

func rangeViolation(t ShardTerm, why string) Violation {
	return Violation{Class: Safety, Rule: "shard-range-context", At: t.Start, Candidates: []int{t.Candidate},
		Detail: fmt.Sprintf("shard %s: %s's term %d (fence %s): %s", t.Shard, CandidateName(t.Candidate), t.Number, t.Fence, why)}
}

// everyShard reports whether the alive spans hold every shard of some
// split (Split: of the terms' candidates): then the space must be whole.
func everyShard(sh *ShardHistory, spans []HashSpan, alive []int) bool {
	held := map[Split]map[string]bool{}
	for _, i := range alive {
		t := sh.Terms[spans[i].Term]
		if held[t.Split] == nil {
			held[t.Split] = map[string]bool{}
		}
		held[t.Split][t.Shard] = true
		if len(held[t.Split]) == t.Split.Count {
			return true
		}
	}
	return false
}
