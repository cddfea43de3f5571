package sim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/relect/relect/shardrange"
)

// Shards (relect.Options.Shards, docs/design.md "Shards") in the
// simulation: what a schedule with shards is (Shards, GenerateShards), the
// hand edits of a shard's Lease and of the shard table, and the rolling
// restart. How the runner plays them is shardrun.go; what the checkers
// make of them, checkshards.go. TestSimulationShards plays these
// schedules against relect only: the client-go loop has no shards.

// Shards is the shard configuration every relect candidate of a schedule
// runs with (the zero value: none). Every candidate but standbys takes
// part, with weight 1.
type Shards struct {
	// Count is S, the number of shards (1–12, GenerateShards).
	Count int
	// Named: the shards are named (ShardOptions.Names: "alpha", ...)
	// rather than numbered (ShardOptions.Count).
	Named bool
	// JoinDelay is ShardOptions.JoinDelay; zero selects relect's default,
	// LeaseDuration.
	JoinDelay time.Duration
	// Rolling: the schedule ends its fault phase with a rolling restart
	// (every running candidate stopped and started again in turn).
	Rolling bool
	// Ranges is ShardOptions.Ranges: the Count numbered shards are equal
	// ranges of that field's hash space (shardrange.Of), and every term's
	// context carries its range (GenerateShardRanges; "": plain shards).
	Ranges shardrange.Field
}

// On reports whether the schedule has shards.
func (s Shards) On() bool { return s.Count > 0 }

// shardWords name the shards of a schedule whose shards are Named.
var shardWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
	"juliett", "kilo", "lima"}

// Names returns the shard names, in configuration order: "0" … "S−1", or
// the first S of shardWords.
func (s Shards) Names() []string {
	out := make([]string, s.Count)
	for i := range out {
		if s.Named {
			out[i] = shardWords[i%len(shardWords)]
			if i >= len(shardWords) {
				out[i] += strconv.Itoa(i / len(shardWords))
			}
		} else {
			out[i] = strconv.Itoa(i)
		}
	}
	return out
}

// joinDelay is the JoinDelay relect applies for timing t.
func (s Shards) joinDelay(t Timing) time.Duration {
	if s.JoinDelay == 0 {
		return t.LeaseDuration
	}
	return s.JoinDelay
}

func (s Shards) String() string {
	if !s.On() {
		return "off"
	}
	how := "numbered"
	switch {
	case s.Named:
		how = "named"
	case s.Ranges != "":
		how = string(s.Ranges) + " ranges"
	}
	jd := "LD (default)"
	if s.JoinDelay != 0 {
		jd = s.JoinDelay.String()
	}
	out := fmt.Sprintf("S=%d (%s) join-delay=%s", s.Count, how, jd)
	if s.Rolling {
		out += " rolling-restart"
	}
	return out
}

// The shard edits: hand edits of one shard's Lease (Action.Shard), or of
// the shard table, as an operator with kubectl would make them.
const (
	// ShardSetHolder names candidate Holder as the shard Lease's holder,
	// renewed now.
	ShardSetHolder Kind = HealDownstream + 1 + iota
	// ShardStranger names an identity no candidate has, renewed now.
	ShardStranger
	// ShardDelete deletes the shard's Lease.
	ShardDelete
	// ShardEmptyHolder empties the shard Lease's holder.
	ShardEmptyHolder
	// ShardZeroDuration sets the shard Lease's leaseDurationSeconds to 0.
	ShardZeroDuration
	// TableDelete deletes the shard table.
	TableDelete
	// TableGarbage overwrites the table's annotation with text that is
	// not a table.
	TableGarbage
	// TableGive edits the table to give the shard to candidate Holder (a
	// stale or mistaken table: who campaigns is wrong, not who holds).
	TableGive
	// TableClear edits the table to name no holder and no taker: every
	// member stops campaigning for every shard until the leader writes
	// it again.
	TableClear
)

func init() {
	for k, name := range map[Kind]string{
		ShardSetHolder: "shard-edit-set-holder", ShardStranger: "shard-edit-stranger-holder",
		ShardDelete: "shard-edit-delete", ShardEmptyHolder: "shard-edit-empty-holder",
		ShardZeroDuration: "shard-edit-zero-duration", TableDelete: "table-edit-delete",
		TableGarbage: "table-edit-garbage", TableGive: "table-edit-give", TableClear: "table-edit-clear",
	} {
		kindNames[k] = name
	}
}

// IsShardEdit reports whether k is a hand edit of a shard Lease or of the
// shard table.
func (k Kind) IsShardEdit() bool { return k >= ShardSetHolder && k <= TableClear }

// namesHolder reports whether an action of kind k names candidate Holder.
func (k Kind) namesHolder() bool {
	return k == SetHolder || k == HandOver || k == ShardSetHolder || k == TableGive
}

// describeShardEdit is what describe adds for a shard edit.
func (a Action) describeShardEdit() string {
	s := ""
	if a.Kind != TableDelete && a.Kind != TableGarbage && a.Kind != TableClear {
		s = " shard=" + strconv.Itoa(a.Shard)
	}
	if a.Kind == ShardSetHolder || a.Kind == TableGive {
		s += " holder=" + CandidateName(a.Holder)
	}
	return s
}

// ShardCoverageKeys lists the shard faults a run of many shard schedules
// must have applied, beyond TestSimulation's (AllCoverageKeys).
func ShardCoverageKeys() []string {
	var keys []string
	for k := ShardSetHolder; k <= TableClear; k++ {
		keys = append(keys, k.String())
	}
	return append(keys, RollingRestartKey)
}

// RollingRestartKey counts the schedules with a rolling restart.
const RollingRestartKey = "rolling-restart"

// GenerateShards returns the shard schedule of seed: TestSimulation's
// schedule of the same seed (Generate: its candidates, timing, faults,
// kills, partitions, pauses, hand edits of the election's Lease, joins,
// leaves, step-downs, registry and work faults), with shards drawn from a
// stream of its own: S in 1–12, numbered or (one in four) named, relect's
// default JoinDelay or (one in two) one drawn in [0.1, 2]·LD; 0–3 hand
// edits of a shard's Lease or of the shard table in the fault phase; and,
// for one schedule in five, a rolling restart once the other faults are
// over (every running candidate stopped gracefully and started again, one
// in two with a new identity, JoinDelay + RetryPeriod apart). Span leaves
// room to judge liveness and the settled balance (ShardSettle).
func GenerateShards(seed uint64) *Schedule {
	s := Generate(seed)
	r := rand.New(rand.NewPCG(seed, 0x7368617264)) // "shard"
	t := s.Timing.withDefaults()
	ld := t.LeaseDuration
	sh := &s.Shards
	sh.Count = 1 + r.IntN(12)
	sh.Named = r.IntN(4) == 0
	if r.IntN(2) == 0 {
		sh.JoinDelay = roundMs(scale(ld, 0.1+1.9*r.Float64()))
	}
	faultEnd := s.Quiet
	acts := s.Actions
	for range r.IntN(4) {
		k := ShardSetHolder + Kind(r.IntN(int(TableClear-ShardSetHolder)+1))
		acts = append(acts, Action{At: roundMs(scale(faultEnd, r.Float64())), Kind: k, Target: -1,
			Shard: r.IntN(sh.Count), Holder: r.IntN(s.Candidates)})
	}
	if r.IntN(5) == 0 {
		acts, sh.Rolling = rollingRestart(r, s, acts, faultEnd+ld), true
	}
	slices.SortStableFunc(acts, func(a, b Action) int { return cmp.Compare(a.At, b.At) })
	s.Actions = acts
	for _, a := range acts {
		s.Quiet = max(s.Quiet, a.At)
	}
	s.Span = s.Quiet + ShardSettle(t, sh.joinDelay(t), acts) + ld
	return s
}

// GenerateShardRanges returns the range shard schedule of seed:
// GenerateShards' schedule of the same seed (its faults, shard edits and
// rolling restart), but with S numbered shards that are ranges of the uid
// hash (Shards.Ranges: shardrange.UID), S in 1–16 (powers of two or not),
// drawn from a stream of its own, which also draws again the shard each
// shard edit names.
func GenerateShardRanges(seed uint64) *Schedule {
	s := GenerateShards(seed)
	r := rand.New(rand.NewPCG(seed, 0x72616e676573)) // "ranges"
	sh := &s.Shards
	sh.Count, sh.Named, sh.Ranges = 1+r.IntN(16), false, shardrange.UID
	for i, a := range s.Actions {
		if a.Kind.IsShardEdit() {
			s.Actions[i].Shard = r.IntN(sh.Count)
		}
	}
	return s
}

// rollingRestart appends a rolling restart from `from` to acts: each
// candidate that is running once acts are played (not one that left for
// good), in a random order, is stopped gracefully (a pod's SIGTERM) and
// started again 0.1–0.5 LD later, with a new identity one time in two (a
// Deployment's new pod), the next JoinDelay + RetryPeriod after that start
// (a rollout that waits for readiness).
func rollingRestart(r *rand.Rand, s *Schedule, acts []Action, from time.Duration) []Action {
	t := s.Timing.withDefaults()
	up := make([]bool, s.Candidates)
	for _, a := range sortedByAt(acts) {
		switch a.Kind {
		case Start:
			up[a.Target] = true
		case Kill, Stop:
			up[a.Target] = false
		}
	}
	at := from
	for _, c := range r.Perm(s.Candidates) {
		if !up[c] {
			continue
		}
		back := at + roundMs(scale(t.LeaseDuration, 0.1+0.4*r.Float64()))
		acts = append(acts, Action{At: at, Kind: Stop, Target: c},
			Action{At: back, Kind: Start, Target: c, NewIdentity: r.IntN(2) == 0})
		at = back + s.Shards.joinDelay(t) + t.RetryPeriod
	}
	return acts
}
