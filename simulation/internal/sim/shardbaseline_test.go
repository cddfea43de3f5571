package sim

import (
	"testing"
	"testing/synctest"
)

// CompareShards counts what the baseline does wrong, by the same rules for
// both histories: an overlap and its time, a late write, moves, and the
// balance at the end over relect's eligible candidates.
func TestCompareShards(t *testing.T) {
	rel := shardHistory()
	rel.Shards.Terms = []ShardTerm{
		{Candidate: 0, Run: 0, Shard: "0", Fence: "5", Start: 0, End: -1},
		{Candidate: 1, Run: 1, Shard: "1", Fence: "6", Start: 0, End: -1}}
	base := shardHistory()
	base.Shards.Registrations = nil // the baseline has no registry
	base.Shards.Terms = []ShardTerm{
		{Candidate: 0, Run: 0, Shard: "0", Start: 0, End: 10 * s},
		{Candidate: 1, Run: 1, Shard: "0", Start: 8 * s, End: -1},
		{Candidate: 1, Run: 1, Shard: "1", Start: 0, End: -1}}
	base.Writes = []Write{
		{Store: ShardStore("0"), Candidate: 1, Term: 1, Sent: 9 * s, Applied: 9 * s, Order: 0, Accepted: true, Answered: 9 * s},
		{Store: ShardStore("0"), Candidate: 0, Term: 0, Sent: 9 * s, Applied: 9*s + 1, Order: 1, Accepted: true, Answered: 9*s + 1},
	}
	r, b := CompareShards(rel, base)
	if r.Overlaps != 0 || r.LateWrites != 0 || r.Moves != 0 || !r.Judged || !r.Within || r.Busiest != 1 || r.Gap != 0 {
		t.Errorf("relect: %+v", r)
	}
	if b.Overlaps != 1 || b.Overlapped != 2*s || b.LateWrites != 1 || b.Moves != 1 || !b.Judged || b.Within || b.Busiest != 2 || b.Unheld != 0 {
		t.Errorf("baseline: %+v", b)
	}
	// A candidate relect's leader could not count on (its registration
	// gone) leaves the balance unjudged for both.
	rel.Shards.Registrations = rel.Shards.Registrations[:1]
	if r, b := CompareShards(rel, base); r.Judged || b.Judged {
		t.Errorf("judged without a clean end: %+v, %+v", r, b)
	}
}

// The baseline plays a shard schedule: every shard is led through its own
// client-go loop, and written to without a token.
func TestPlayShardsBaseline(t *testing.T) {
	sch := quietShardSchedule()
	var h *History
	synctest.Test(t, func(t *testing.T) { h = Play(sch, ClientGoLoop) })
	held := map[string]bool{}
	for _, tm := range h.Shards.Terms {
		held[tm.Shard] = true
		if tm.Fence != "" {
			t.Errorf("a baseline term with a fence: %+v", tm)
		}
	}
	if len(held) != 7 || len(h.Shards.Calls) == 0 {
		t.Fatalf("shards led: %v, %d shard calls", held, len(h.Shards.Calls))
	}
	writes := 0
	for _, w := range h.Writes {
		if w.Store == ShardStore(h.Shards.Names[0]) && w.Accepted {
			writes++
		}
	}
	if writes == 0 {
		t.Errorf("no write reached shard %s's store", h.Shards.Names[0])
	}
	if f := shardFiguresOf(h, false, nil, 0, false); f.Overlaps != 0 || f.LateWrites != 0 {
		t.Errorf("the baseline without faults: %+v", f)
	}
}
