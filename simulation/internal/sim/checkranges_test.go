package sim

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/relect/relect/shardrange"
)

const end = math.MaxUint64

// CheckHashSpans on spans of any bounds: overlaps as intervals of hashes
// (sharing one hash is an overlap), a handover at one instant is none, and
// a gap counts only when whole asks for the space.
func TestCheckHashSpans(t *testing.T) {
	two := func(a []int) bool { return len(a) == 2 }
	for _, tc := range []struct {
		name     string
		spans    []HashSpan
		whole    func([]int) bool
		overlaps []RangeOverlap
		gaps     []RangeGap
		instants int
	}{
		{"two halves", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: 1<<63 - 1}, {From: 0, To: 10 * s, Start: 1 << 63, Last: end}},
			two, nil, nil, 2},
		{"off by one: one hash in both", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: 1 << 63}, {From: 5 * s, To: 10 * s, Start: 1 << 63, Last: end}},
			two, []RangeOverlap{{A: 0, B: 1, At: 5 * s, Start: 1 << 63, Last: 1 << 63}}, nil, 3},
		{"off by one: one hash in none", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: 1<<63 - 2}, {From: 0, To: 10 * s, Start: 1 << 63, Last: end}},
			two, nil, []RangeGap{{At: 0, Start: 1<<63 - 1, Last: 1<<63 - 1}}, 2},
		{"a gap is not judged unless whole says", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: 5}},
			nil, nil, nil, 2},
		{"the end of the space uncovered", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: end - 1}},
			func(a []int) bool { return len(a) > 0 }, nil, []RangeGap{{At: 0, Start: end, Last: end}}, 2},
		{"handover at one instant", []HashSpan{{From: 0, To: 10 * s, Start: 0, Last: end}, {From: 10 * s, To: 20 * s, Start: 0, Last: end}},
			func(a []int) bool { return len(a) > 0 }, nil, nil, 3},
		{"a span that never ended, then a wider one", []HashSpan{{From: 0, To: math.MaxInt64, Start: 100, Last: 200},
			{From: 30 * s, To: 40 * s, Start: 0, Last: end}}, nil,
			[]RangeOverlap{{A: 1, B: 0, At: 30 * s, Start: 100, Last: 200}}, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cov := CheckHashSpans(tc.spans, tc.whole)
			if !slices.Equal(cov.Overlaps, tc.overlaps) || !slices.Equal(cov.Gaps, tc.gaps) || cov.Instants != tc.instants {
				t.Errorf("got overlaps %+v gaps %+v at %d instants, want %+v %+v at %d", cov.Overlaps, cov.Gaps, cov.Instants,
					tc.overlaps, tc.gaps, tc.instants)
			}
		})
	}
}

// rangeTerm is a term of shard i of 3 uid ranges, its context carrying
// range rg, from `from` to `to` seconds (-1: never ended).
func rangeTerm(c, i int, rg shardrange.Range, from, to int) ShardTerm {
	return splitTerm(c, i, Split{shardrange.UID, 3}, rg, from, to)
}

// splitTerm is rangeTerm of a candidate of split sp.
func splitTerm(c, i int, sp Split, rg shardrange.Range, from, to int) ShardTerm {
	return ShardTerm{Candidate: c, Run: c, Shard: strconv.Itoa(i), Fence: "5", Range: rg, Ranged: true, Split: sp,
		Start: durS(from), End: durS(to)}
}

func durS(n int) time.Duration {
	if n < 0 {
		return -1
	}
	return time.Duration(n) * s
}

type rangeCase struct {
	name  string
	terms []ShardTerm
	want  []string
	whole int
}

// splitChanges are histories whose split changes from 2 uid ranges to 4
// (or to 2 namespace ranges): each term is judged by its own split, and
// the two splits' ranges must not run at once where they share hashes
// (or, of two fields, at all).
func splitChanges(of func(i, n int) shardrange.Range) []rangeCase {
	two, four := Split{shardrange.UID, 2}, Split{shardrange.UID, 4}
	ns := Split{shardrange.Namespace, 2}
	nsOf := func(i int) shardrange.Range { r, _ := shardrange.Of(shardrange.Namespace, i, 2); return r }
	old := []ShardTerm{splitTerm(0, 0, two, of(0, 2), 0, 10), splitTerm(1, 1, two, of(1, 2), 0, 10)}
	var next, early []ShardTerm
	for i := range 4 {
		next = append(next, splitTerm(2+i%2, i, four, of(i, 4), 10, 20))
		early = append(early, splitTerm(2+i%2, i, four, of(i, 4), 10-i%2, 20))
	}
	return []rangeCase{
		{"2 → 4 uid ranges, the old split stopped first", append(slices.Clone(old), next...), nil, 2},
		{"2 → 4 uid ranges, 1 and 3 of 4 start before 0 and 1 of 2 stop", append(slices.Clone(old), early...),
			[]string{"safety/shard-range-overlap", "safety/shard-range-overlap"}, 3},
		{"uid → namespace ranges at once", []ShardTerm{splitTerm(0, 0, two, of(0, 2), 0, 10), splitTerm(1, 1, ns, nsOf(1), 5, 10)},
			[]string{"safety/shard-range-overlap"}, 0},
	}
}

// CheckShardRanges on 3 uid ranges: every term's context must carry its
// own shard's range; a wrong range shows as the context's rule and, as
// hashes, as an overlap or a gap.
func TestCheckShardRanges(t *testing.T) {
	of := func(i, n int) shardrange.Range { r, _ := shardrange.Of(shardrange.UID, i, n); return r }
	ns, _ := shardrange.Of(shardrange.Namespace, 0, 3)
	for _, tc := range []struct {
		name  string
		terms []ShardTerm
		want  []string
		whole int
	}{
		{"the three, with a handover", []ShardTerm{rangeTerm(0, 0, of(0, 3), 0, 10), rangeTerm(1, 1, of(1, 3), 0, 20),
			rangeTerm(0, 2, of(2, 3), 5, -1), rangeTerm(1, 0, of(0, 3), 10, -1)}, nil, 2},
		{"shard 1 given shard 0's range", []ShardTerm{rangeTerm(0, 0, of(0, 3), 0, 10), rangeTerm(1, 1, of(0, 3), 0, 10),
			rangeTerm(0, 2, of(2, 3), 0, 10)},
			[]string{"safety/shard-range-context", "safety/shard-range-overlap", "safety/shard-range-gap"}, 1},
		{"a range of 2 for a shard of 3", []ShardTerm{rangeTerm(0, 0, of(0, 3), 0, 10), rangeTerm(1, 1, of(1, 2), 0, 10)},
			[]string{"safety/shard-range-context"}, 0},
		{"the namespace's range", []ShardTerm{rangeTerm(0, 0, ns, 0, 10)}, []string{"safety/shard-range-context"}, 0},
		{"no range", []ShardTerm{{Candidate: 0, Shard: "0", Fence: "5", Split: Split{shardrange.UID, 3}, Start: 0, End: 10 * s}},
			[]string{"safety/shard-range-context"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := shardHistory()
			h.Shards.Names, h.Shards.Ranges, h.Shards.Terms = []string{"0", "1", "2"}, shardrange.UID, tc.terms
			vs, cov := CheckShardRanges(h)
			if got := rules(vs); !slices.Equal(got, tc.want) || cov.Whole != tc.whole {
				t.Errorf("got %v with %d instants whole, want %v with %d (%v)", got, cov.Whole, tc.want, tc.whole, vs)
			}
		})
	}
	for _, tc := range splitChanges(of) {
		t.Run(tc.name, func(t *testing.T) {
			h := shardHistory()
			h.Shards.Names, h.Shards.Ranges, h.Shards.Terms = []string{"0", "1"}, shardrange.UID, tc.terms
			vs, cov := CheckShardRanges(h)
			if got := rules(vs); !slices.Equal(got, tc.want) || cov.Whole != tc.whole {
				t.Errorf("got %v with %d instants whole, want %v with %d (%v)", got, cov.Whole, tc.want, tc.whole, vs)
			}
		})
	}
	h := shardHistory()
	h.Shards.Terms = []ShardTerm{rangeTerm(0, 0, of(0, 3), 0, 10)}
	if vs, cov := CheckShardRanges(h); vs != nil || cov.Instants != 0 {
		t.Errorf("plain shards: got %v, %+v; want nothing checked", vs, cov)
	}
}
