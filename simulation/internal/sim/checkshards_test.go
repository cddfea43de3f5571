package sim

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	leasewire "github.com/relect/relect/internal/wire"
)

// shardHistory is history() with shards "0" and "1", candidates 0 and 1
// running throughout and registered (live for an hour) from the start,
// and a join delay of 15 s.
func shardHistory() *History {
	h := history()
	h.Standby = []bool{false, false}
	h.Runs = []Run{{Candidate: 0, ID: 0, Identity: "c0", Cancelled: h.End, Returned: h.End},
		{Candidate: 1, ID: 1, Identity: "c1", Cancelled: h.End, Returned: h.End}}
	h.Shards = &ShardHistory{Names: []string{"0", "1"}, JoinDelay: 15 * s,
		Registrations: []RegistrationChange{{At: 0, Identity: "c0", Present: true, Lives: time.Hour},
			{At: 0, Identity: "c1", Present: true, Lives: time.Hour}}}
	h.End = h.Quiet + shardSettle(h) + 15*s
	for i := range h.Runs {
		h.Runs[i].Cancelled, h.Runs[i].Returned = h.End, h.End
	}
	return h
}

func TestCheckShardSafety(t *testing.T) {
	for _, tc := range []struct {
		name  string
		terms []ShardTerm
		held  []ShardSpan
		want  []string
	}{
		{"handover at one instant", []ShardTerm{
			{Candidate: 0, Run: 0, Shard: "0", Fence: "5", Start: 0, End: 10 * s},
			{Candidate: 1, Run: 1, Shard: "0", Fence: "9", Start: 10 * s, End: 20 * s}}, nil, nil},
		{"two shards at once is fine", []ShardTerm{
			{Candidate: 0, Run: 0, Shard: "0", Fence: "5", Start: 0, End: 10 * s},
			{Candidate: 1, Run: 1, Shard: "1", Fence: "6", Start: 0, End: 10 * s}}, nil, nil},
		{"two holders", []ShardTerm{
			{Candidate: 0, Run: 0, Shard: "0", Fence: "5", Start: 0, End: 10 * s},
			{Candidate: 1, Run: 1, Shard: "0", Fence: "9", Start: 10*s - 1, End: 20 * s}}, nil,
			[]string{"safety/shard-two-holders"}},
		{"a term never ended", []ShardTerm{
			{Candidate: 0, Run: 0, Shard: "1", Fence: "5", Start: 0, End: -1},
			{Candidate: 1, Run: 1, Shard: "1", Fence: "9", Start: 150 * s, End: 160 * s}}, nil,
			[]string{"safety/shard-two-holders"}},
		{"fence goes back", []ShardTerm{
			{Candidate: 0, Run: 0, Shard: "0", Fence: "10", Start: 0, End: 10 * s},
			{Candidate: 1, Run: 1, Shard: "0", Fence: "9", Start: 10 * s, End: 20 * s}}, nil,
			[]string{"safety/shard-fence-not-growing"}},
		{"no fence", []ShardTerm{{Candidate: 0, Run: 0, Shard: "0", Start: 0, End: 10 * s}}, nil,
			[]string{"safety/shard-fence-not-growing"}},
		{"listed twice", nil, []ShardSpan{{Candidate: 0, Run: 0, Shard: "1", From: 0, To: 5 * s},
			{Candidate: 1, Run: 1, Shard: "1", From: 4 * s, To: 6 * s}}, []string{"safety/shard-two-listed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := shardHistory()
			h.Shards.Terms, h.Shards.Held = tc.terms, tc.held
			if got := rules(CheckShardSafety(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A deposed holder's write that reaches the shard's store after the new
// holder's is a late write if the store accepted it.
func TestCheckShardLateWrite(t *testing.T) {
	h := shardHistory()
	h.Shards.Terms = []ShardTerm{{Candidate: 0, Run: 0, Shard: "0", Fence: "5", Start: 0, End: 10 * s},
		{Candidate: 1, Run: 1, Shard: "0", Fence: "9", Start: 10 * s, End: -1}}
	h.Writes = []Write{
		{Store: ShardStore("0"), Candidate: 1, Term: 1, Token: "9", Sent: 11 * s, Applied: 11 * s, Order: 0, Accepted: true, Answered: 11 * s},
		{Store: ShardStore("0"), Candidate: 0, Term: 0, Token: "5", Sent: 9 * s, Applied: 12 * s, Order: 1, Accepted: true, Answered: -1},
		{Store: ShardStore("1"), Candidate: 0, Term: 0, Token: "5", Sent: 9 * s, Applied: 12 * s, Order: 0, Accepted: true, Answered: -1},
	}
	if got := rules(CheckShardSafety(h)); !slices.Equal(got, []string{"safety/shard-fence-late-write"}) {
		t.Errorf("got %v", got)
	}
	h.Writes[1].Accepted = false
	if got := rules(CheckShardSafety(h)); got != nil {
		t.Errorf("refused: got %v", got)
	}
	h.FinalAt, h.Final = 20*s, map[Store]string{ShardStore("0"): "9", ShardStore("1"): "5"}
	for _, r := range CheckShardStores(h, time.Second) {
		if r.Lin.Result != Linearizable {
			t.Errorf("shard %s: %s", r.Shard, r.Lin.Result)
		}
	}
}

func TestCheckShardLiveness(t *testing.T) {
	held := func(h *History, c int, shard string, from time.Duration) ShardTerm {
		return ShardTerm{Candidate: c, Run: c, Shard: shard, Fence: "1", Start: from, End: h.End}
	}
	for _, tc := range []struct {
		name string
		mod  func(h *History)
		want []string
	}{
		{"settled", func(h *History) {
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 1, "1", 0)}
		}, nil},
		{"unbalanced", func(h *History) {
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 0, "1", 0)}
		}, []string{"liveness/shard-unbalanced"}},
		{"unheld for too long", func(h *History) {
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 1, "1", h.Quiet+shardLivenessBound(h)+1)}
		}, []string{"liveness/shard-unheld"}},
		{"unheld within the bound", func(h *History) {
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 1, "1", h.Quiet+shardLivenessBound(h))}
		}, nil},
		{"a standby holds none", func(h *History) {
			h.Standby[1] = true
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 0, "1", 0)}
		}, nil},
		{"held by a candidate whose registration was deleted", func(h *History) {
			h.Shards.Registrations = append(h.Shards.Registrations, RegistrationChange{At: 10 * s, Identity: "c1"})
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 1, "1", 0)}
		}, []string{"liveness/shard-held-by-ineligible", "liveness/shard-unbalanced"}},
		{"nobody registered: nothing is judged", func(h *History) {
			h.Shards.Registrations = append(h.Shards.Registrations, RegistrationChange{At: 10 * s, Identity: "c0"},
				RegistrationChange{At: 10 * s, Identity: "c1"})
		}, nil},
		{"registered again late: either count", func(h *History) {
			h.Shards.Registrations = append(h.Shards.Registrations, RegistrationChange{At: 10 * s, Identity: "c1"},
				RegistrationChange{At: h.End - 2*s, Identity: "c1", Present: true, Lives: time.Hour})
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 0, "1", 0)}
		}, nil},
		{"a registration that lapsed", func(h *History) {
			h.Shards.Registrations[1].Lives = 20 * s
			h.Shards.Terms = []ShardTerm{held(h, 0, "0", 0), held(h, 0, "1", 0)}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := shardHistory()
			tc.mod(h)
			if got := rules(CheckShardLiveness(h)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// quietShardSchedule is 3 candidates over 7 shards, started 100 ms apart,
// without faults, with room to settle.
func quietShardSchedule() *Schedule {
	sch := &Schedule{Candidates: 3, Priority: make([]int32, 3), Standby: make([]bool, 3),
		Timing: Timing{LeaseDuration: 4 * s, RenewDeadline: 3 * s, RetryPeriod: time.Second}, Shards: Shards{Count: 7}}
	for i := range 3 {
		sch.Actions = append(sch.Actions, Action{At: time.Duration(i) * 100 * time.Millisecond, Kind: Start, Target: i, Initial: true})
	}
	sch.Quiet = 200 * time.Millisecond
	sch.Span = sch.Quiet + ShardSettle(sch.Timing, sch.Shards.joinDelay(sch.Timing), sch.Actions) + 4*s
	return sch
}

// A shard schedule plays to the end: shards are held, written to with
// their fences, and the checkers find nothing wrong in a schedule without
// faults.
func TestPlayShards(t *testing.T) {
	sch := quietShardSchedule()
	var h *History
	synctest.Test(t, func(t *testing.T) { h = Play(sch, Relect) })
	if len(h.Shards.Terms) < 7 || len(h.Shards.Calls) == 0 || len(h.Shards.Changes) == 0 || len(h.Shards.Tables) == 0 {
		t.Fatalf("empty shard history: %d terms, %d calls, %d changes, %d tables",
			len(h.Shards.Terms), len(h.Shards.Calls), len(h.Shards.Changes), len(h.Shards.Tables))
	}
	shardLeases := map[string]bool{leasewire.ShardTableName(LeaseName): true}
	for _, n := range sch.Shards.Names() {
		shardLeases[leasewire.ShardLeaseName(LeaseName, n)] = true
	}
	for _, c := range h.Calls {
		if shardLeases[c.Name] {
			t.Errorf("a shard call among the election's and the registry's: %+v", c)
		}
	}
	for _, c := range h.Shards.Calls {
		if c.Name != "" && !shardLeases[c.Name] {
			t.Errorf("a call on %s among the shard calls", c.Name)
		}
	}
	if vs := append(CheckShards(h), CheckWithShards(h)...); len(vs) > 0 {
		t.Errorf("violations: %v\n%s", vs, ShardTimeline(h))
	}
	b := SettledBalance(h)
	if b.Excused != "" || len(b.Eligible) != 3 || len(b.Unheld) != 0 {
		t.Errorf("settled: %+v", b)
	}
	for _, r := range CheckShardStores(h, 5*time.Second) {
		if r.Lin.Result != Linearizable || r.Ops < 2 {
			t.Errorf("shard %s: %d ops, %s", r.Shard, r.Ops, r.Lin.Result)
		}
	}
}

// GenerateShards keeps TestSimulation's schedule of the seed, adds shards,
// and leaves room to settle.
func TestGenerateShards(t *testing.T) {
	edits, rolling := 0, 0
	for seed := range uint64(200) {
		base, sh := Generate(seed), GenerateShards(seed)
		if sh.Shards.Count < 1 || sh.Shards.Count > 12 || base.Timing != sh.Timing || base.Candidates != sh.Candidates {
			t.Fatalf("seed %d: %v", seed, sh.Shards)
		}
		for _, a := range sh.Actions {
			if a.Kind.IsShardEdit() {
				edits++
			}
		}
		if sh.Shards.Rolling {
			rolling++
		}
		if sh.Span-sh.Quiet < ShardSettle(sh.Timing, sh.Shards.joinDelay(sh.Timing.withDefaults()), sh.Actions) {
			t.Errorf("seed %d: span %v, quiet %v: no room to settle", seed, sh.Span, sh.Quiet)
		}
		if !slices.IsSortedFunc(sh.Actions, func(a, b Action) int { return int(a.At - b.At) }) {
			t.Errorf("seed %d: actions not sorted", seed)
		}
	}
	if edits == 0 || rolling == 0 {
		t.Errorf("%d shard edits, %d rolling restarts in 200 schedules", edits, rolling)
	}
}
