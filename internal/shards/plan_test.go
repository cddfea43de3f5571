package shards

import (
	"maps"
	"testing"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/stretchr/testify/assert"
)

// planAt sets up an assigner of shards 0 to 3 for candidate "a" whose view
// is given by seen (by shard) and table, and plans once at now over regs.
func planAt(t *testing.T, now time.Time, seen map[string]*shardSeen, table wire.Table, regs []Registration, setup func(a *assigner)) (wire.Table, *fakeLeader) {
	t.Helper()
	cfg := testConfig("a", "0", "1", "2", "3")
	port := &fakeLeader{regs: regs}
	a := newAssigner(&cfg, port, &Seen{}, 1)
	a.seen, a.table = seen, table
	if setup != nil {
		setup(a)
	}
	return a.plan(regs, now), port
}

// count returns how many shards each identity is given in m.
func count(m map[string]string) map[string]int {
	n := map[string]int{}
	for _, id := range m {
		n[id]++
	}
	return n
}

func allShards(f func(sh string) string) map[string]string {
	m := map[string]string{}
	for _, sh := range []string{"0", "1", "2", "3"} {
		if v := f(sh); v != "" {
			m[sh] = v
		}
	}
	return m
}

var twoCandidates = []Registration{{Identity: "a", Weight: 1, RV: "10"}, {Identity: "b", Weight: 1, RV: "20"}}

// A first deployment: every shard Lease missing, nobody holds one, and
// both candidates share the shards at once (no JoinDelay); nobody holds a
// Lease yet, so nobody is named taker.
func TestPlanFirstDeploymentSharesAtOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	seen := map[string]*shardSeen{}
	for _, sh := range []string{"0", "1", "2", "3"} {
		seen[sh] = &shardSeen{missing: true, at: now, listed: true}
	}
	next, _ := planAt(t, now, seen, wire.Table{}, twoCandidates, nil)
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, count(next.Assigned))
	assert.Empty(t, next.Takers)
	assert.Empty(t, next.Out)
}

// Shards held by a: a candidate registered for less than JoinDelay gets
// none (nor is named taker); one registered for longer gets its share,
// and the shards a keeps get it as their taker.
func TestPlanJoinDelayThenShareAndTakers(t *testing.T) {
	now := time.Unix(1000, 0)
	heldByA := func() map[string]*shardSeen {
		seen := map[string]*shardSeen{}
		for _, sh := range []string{"0", "1", "2", "3"} {
			seen[sh] = &shardSeen{holder: "a", rv: "1", at: now.Add(-time.Second)}
		}
		return seen
	}
	table := wire.Table{Assigned: allShards(func(string) string { return "a" })}

	next, _ := planAt(t, now, heldByA(), table, twoCandidates, nil)
	assert.Equal(t, map[string]int{"a": 4}, count(next.Assigned), "b registered just now: within JoinDelay")
	assert.Empty(t, next.Takers, "b is no candidate yet: no taker")

	next, _ = planAt(t, now, heldByA(), table, twoCandidates, func(a *assigner) {
		a.firstSeen["b"] = now.Add(-2 * ld)
	})
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, count(next.Assigned), "b registered for 2 × JoinDelay")
	for sh, h := range next.Assigned {
		if h == "a" {
			assert.Equal(t, "b", next.Takers[sh], "shard %s, kept by a, is taken by b", sh)
		} else {
			assert.Empty(t, next.Takers[sh], "shard %s, moved to b, has no taker: b takes it", sh)
		}
	}
}

// A holder whose Leases expired while the table gave it the shards is
// left out (with its registration's version), and the taker the table
// named holds them.
func TestPlanExpiredHolderIsLeftOutAndItsTakerHolds(t *testing.T) {
	now := time.Unix(1000, 0)
	renewed := now.Add(-ld - time.Second)
	seen := map[string]*shardSeen{}
	for _, sh := range []string{"0", "1", "2", "3"} {
		seen[sh] = &shardSeen{holder: "a", rv: "1", at: renewed}
	}
	table := wire.Table{Assigned: allShards(func(string) string { return "a" }), Takers: allShards(func(string) string { return "b" })}
	next, _ := planAt(t, now, seen, table, twoCandidates, func(a *assigner) {
		for _, sh := range a.cfg.Shards {
			a.assignedAt[sh] = renewed.Add(-time.Minute)
		}
		a.firstSeen["b"] = now.Add(-2 * ld)
	})
	assert.Equal(t, map[string]string{"a": "10"}, next.Out)
	assert.Equal(t, map[string]int{"b": 4}, count(next.Assigned))
	assert.Empty(t, next.Takers, "b's shards have no live holder yet: no taker")
}

// A shard released by the holder the table names, its taker registered,
// goes to that taker at once; a taker that does not take it within
// LeaseDuration + 2 × RetryPeriod of its release is left out.
func TestPlanReleasedShardGoesToItsTakerUnlessLate(t *testing.T) {
	now := time.Unix(1000, 0)
	seen := map[string]*shardSeen{}
	for _, sh := range []string{"0", "1", "2", "3"} {
		seen[sh] = &shardSeen{holder: "a", rv: "1", at: now.Add(-time.Second)}
	}
	seen["0"] = &shardSeen{holder: "a", rv: "2", released: true, at: now.Add(-time.Second)}
	table := wire.Table{Assigned: allShards(func(string) string { return "a" }), Takers: map[string]string{"0": "b"}}
	setup := func(a *assigner) {
		a.firstSeen["b"] = now.Add(-2 * ld)
		for _, sh := range a.cfg.Shards {
			a.assignedAt[sh] = now.Add(-time.Minute)
		}
	}
	next, _ := planAt(t, now, maps.Clone(seen), table, twoCandidates, setup)
	assert.Equal(t, "b", next.Assigned["0"], "released: its taker holds it")
	assert.Empty(t, next.Out)

	late := now.Add(ld + 2*rp)
	for sh, s := range seen {
		if sh != "0" {
			s.at = late.Add(-time.Second) // renewed since
		}
	}
	next, _ = planAt(t, late, seen, table, twoCandidates, setup)
	// b did not take the shard in time: left out. The table, unchanged
	// here, still gives it to a, which released it: with b out, a is the
	// one given the free shard, late too.
	assert.Equal(t, map[string]string{"a": "10", "b": "20"}, next.Out)
	assert.Empty(t, next.Assigned, "everyone registered is left out: nobody is given a shard")
}
