package shardplan

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func names(s int) []string {
	out := make([]string, s)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func fleet(n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Identity: fmt.Sprintf("c%03d", i), Weight: 1}
	}
	return out
}

func counts(a map[string]string) map[string]int {
	n := map[string]int{}
	for _, h := range a {
		n[h]++
	}
	return n
}

func moves(a, b map[string]string) int {
	m := 0
	for sh, h := range b {
		if a[sh] != h {
			m++
		}
	}
	return m
}

// balanced checks that every candidate holds ⌊S/N⌋ or ⌈S/N⌉ shards, and
// every shard has a holder among cands.
func balanced(t *testing.T, shards []string, a map[string]string, cands []Candidate) {
	t.Helper()
	s, n := len(shards), len(cands)
	require.Len(t, a, s)
	c := counts(a)
	ids := map[string]bool{}
	for _, cd := range cands {
		ids[cd.Identity] = true
		require.GreaterOrEqual(t, c[cd.Identity], s/n, "%s holds too few", cd.Identity)
		require.LessOrEqual(t, c[cd.Identity], (s+n-1)/n, "%s holds too many", cd.Identity)
	}
	for sh, h := range a {
		require.True(t, ids[h], "shard %s held by %q, not a candidate", sh, h)
	}
}

func TestAssignBalancedAndStable(t *testing.T) {
	for _, tc := range []struct{ s, n int }{{1, 1}, {1, 3}, {10, 10}, {32, 10}, {100, 7}, {7, 100}, {100, 1000}} {
		shards, cands := names(tc.s), fleet(tc.n)
		a := Assign(shards, nil, cands, nil, nil)
		balanced(t, shards, a, cands)
		// Settled: the same view (a new leader's) moves nothing.
		require.Equal(t, 0, moves(a, Assign(shards, a, cands, nil, nil)), "S=%d N=%d", tc.s, tc.n)
	}
}

// TestJoinLeaveMoves: from any settled assignment, one candidate joining
// or leaving moves at most ⌈S/N⌉ shards (N the larger fleet), and the
// result is balanced again.
func TestJoinLeaveMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		s, n := 1+r.IntN(120), 1+r.IntN(40)
		shards, cands := names(s), fleet(n+1)
		a := Assign(shards, nil, cands[:n], nil, nil)
		// Join.
		b := Assign(shards, a, cands, nil, nil)
		balanced(t, shards, b, cands)
		require.LessOrEqual(t, moves(a, b), (s+n)/(n+1), "join: S=%d N=%d→%d", s, n, n+1)
		// Leave: any one of them.
		gone := r.IntN(n + 1)
		rest := append(append([]Candidate{}, cands[:gone]...), cands[gone+1:]...)
		if len(rest) == 0 {
			continue
		}
		c := Assign(shards, b, rest, nil, nil)
		balanced(t, shards, c, rest)
		require.LessOrEqual(t, moves(b, c), (s+n)/(n+1), "leave: S=%d N=%d→%d", s, n+1, n)
	}
}

func TestAvoid(t *testing.T) {
	cands := fleet(2)
	cur := map[string]string{"0": "c000", "1": "c001"}
	// c000 gave shard 0 up: it goes to c001, over its quota, rather than
	// back to c000.
	a := Assign(names(2), map[string]string{"1": "c001"}, cands, map[string][]string{"0": {"c000"}}, nil)
	require.Equal(t, "c001", a["0"])
	// Avoided by everyone: assigned all the same.
	a = Assign(names(2), map[string]string{"1": "c001"}, cands, map[string][]string{"0": {"c000", "c001"}}, nil)
	require.Equal(t, "c000", a["0"])
	require.Equal(t, cur["1"], a["1"])
	// While c000 avoids shard 0, a new plan moves nothing.
	a = Assign(names(2), map[string]string{"0": "c001", "1": "c001"}, cands, map[string][]string{"0": {"c000"}}, nil)
	require.Equal(t, map[string]string{"0": "c001", "1": "c001"}, a, "over quota, c001 keeps its healthy shard, and the one c000 gave up has nowhere else to go")
	// Three candidates: the shard c000 gave up stays with c001, outside
	// the quotas, and no healthy shard moves for it.
	a = Assign(names(4), map[string]string{"0": "c001", "1": "c001", "2": "c001", "3": "c000"}, fleet(3), map[string][]string{"0": {"c000"}}, nil)
	require.Equal(t, map[string]string{"0": "c001", "1": "c001", "2": "c001", "3": "c000"}, a, "a shard moved for a failing one")
	// Its holder passed over too: it goes to the one furthest below its
	// quota that is not (c002), and the healthy ones stay.
	a = Assign(names(4), map[string]string{"1": "c001", "2": "c001", "3": "c000"}, fleet(3), map[string][]string{"0": {"c000", "c001"}}, nil)
	require.Equal(t, map[string]string{"0": "c002", "1": "c001", "2": "c001", "3": "c000"}, a)
}

// TestResting: a candidate leaving gives its shards up one by one; the
// others take them, and nothing else moves.
func TestResting(t *testing.T) {
	cands := fleet(3)
	a := Assign(names(6), nil, cands, nil, nil)
	cur := map[string]string{}
	var gone []string
	for sh, h := range a {
		if h != "c002" {
			cur[sh] = h
		} else {
			gone = append(gone, sh)
		}
	}
	avoid := map[string][]string{gone[0]: {"c002"}}
	cur[gone[1]] = "c002" // not released yet
	b := Assign(names(6), cur, cands, avoid, map[string]bool{"c002": true})
	require.Equal(t, "c002", b[gone[1]], "it keeps what it holds")
	require.NotEqual(t, "c002", b[gone[0]])
	require.Equal(t, 1, moves(a, b), "only the shard given up moved")
	delete(cur, gone[1])
	avoid[gone[1]] = []string{"c002"}
	c := Assign(names(6), cur, cands, avoid, map[string]bool{"c002": true})
	require.Equal(t, 2, moves(a, c))
	require.Zero(t, counts(c)["c002"])
	require.Zero(t, moves(c, Assign(names(6), c, cands[:2], nil, nil)), "once it deregistered, nothing moves")
}

func TestWeights(t *testing.T) {
	cands := []Candidate{{"big", 3}, {"small", 1}}
	a := Assign(names(8), nil, cands, nil, nil)
	require.Equal(t, map[string]int{"big": 6, "small": 2}, counts(a))
	cands = append(cands, Candidate{"mid", 2})
	q := Quotas(10, cands, nil)
	require.Equal(t, 10, q["big"]+q["small"]+q["mid"])
	require.Equal(t, 5, q["big"])
	require.Contains(t, []int{3, 4}, q["mid"])
}

func TestTaker(t *testing.T) {
	cands := fleet(3)
	a := map[string]string{"0": "c000", "1": "c000", "2": "c001"}
	require.Equal(t, "c002", Taker(a, "c000", cands))
	require.Equal(t, "c002", Taker(a, "c001", cands))
	require.Equal(t, "", Taker(a, "c000", cands[:1]))
}

// TestHashingBaseline measures the alternative the design rejects: each
// shard placed on a candidate by rendezvous hashing (the highest hash of
// shard and identity), as a client-go election per shard would settle
// with hashed preferences. It logs the busiest candidate's load over the
// mean, median over random fleets, beside Assign's, and checks that Assign
// is within the bound the design promises.
func TestHashingBaseline(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ s, n int }{{10, 10}, {32, 10}, {100, 10}} {
		var hashed []float64
		for range 501 {
			cands := make([]Candidate, tc.n)
			for i := range cands {
				cands[i] = Candidate{Identity: fmt.Sprintf("pod-%x", r.Uint64()), Weight: 1}
			}
			load := map[string]int{}
			for _, sh := range names(tc.s) {
				best, bh := "", uint64(0)
				for _, c := range cands {
					h := fnv.New64a()
					h.Write([]byte(sh + "/" + c.Identity))
					if v := h.Sum64(); best == "" || v > bh {
						best, bh = c.Identity, v
					}
				}
				load[best]++
			}
			most := 0
			for _, k := range load {
				most = max(most, k)
			}
			hashed = append(hashed, float64(most)*float64(tc.n)/float64(tc.s))
			a := counts(Assign(names(tc.s), nil, cands, nil, nil))
			amax := 0
			for _, k := range a {
				amax = max(amax, k)
			}
			require.LessOrEqual(t, amax, (tc.s+tc.n-1)/tc.n)
		}
		slices.Sort(hashed)
		ceil := (tc.s + tc.n - 1) / tc.n
		t.Logf("S=%d N=%d: busiest ÷ mean, median of %d fleets: hashing %.2f, Assign %.2f",
			tc.s, tc.n, len(hashed), hashed[len(hashed)/2], float64(ceil)*float64(tc.n)/float64(tc.s))
	}
}

// TestAssignRuns: a candidate whose shard set differs (c002 runs 0-3 of
// 8) is given only shards it runs, its share of them: the others shed to
// it shards it runs, and keep those only they run.
func TestAssignRuns(t *testing.T) {
	cur := map[string]string{"0": "c000", "1": "c000", "4": "c000", "5": "c000", "2": "c001", "3": "c001", "6": "c001", "7": "c001"}
	runs := func(id, sh string) bool { return id != "c002" || sh < "4" }
	a := AssignPaced(names(8), cur, fleet(3), nil, nil, nil, runs)
	n := map[string]int{}
	for sh, id := range a {
		n[id]++
		require.True(t, runs(id, sh), "shard %s to %s, which does not run it", sh, id)
	}
	require.Equal(t, map[string]int{"c000": 3, "c001": 3, "c002": 2}, n, "%v", a)
	require.Equal(t, 2, moves(cur, a))
	// Nobody runs a shard: it is not assigned.
	a = AssignPaced(names(2), nil, fleet(1), nil, nil, nil, func(_, sh string) bool { return sh == "0" })
	require.Equal(t, map[string]string{"0": "c000"}, a)
}
