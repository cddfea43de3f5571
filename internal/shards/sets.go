package shards

import (
	"log/slog"

	"github.com/relect/relect/internal/wire"
)

// Shard sets that differ (docs/design.md, "Changing the shard set"): each
// registration carries its candidate's shard set (wire.AnnotationShardSet),
// and the leader gives a candidate only shards it runs — during a rolling
// update that changes ShardOptions.Count, Names or Ranges, the candidates
// of the old set and of the new run side by side; with range shards, only
// a candidate of the leader's very set runs its shards — and says so: a warning for
// each candidate whose set differs, Stats.ShardSetsDiffer, and the table's
// Differ, which relect status shows.

// shardSets returns, for the registrations regs, whether each candidate
// runs a shard (one whose set is this leader's, or that has none — written
// before sets were — runs every shard of it), and the candidates whose set
// differs, with its size.
func (a *assigner) shardSets(regs []Registration) (runs func(identity, shard string) bool, differ map[string]int) {
	own := wire.EncodeShardSet(a.cfg.Shards, a.cfg.Ranges)
	sets := map[string]*wire.ShardSet{}
	for _, r := range regs {
		if r.Set == "" || r.Set == own {
			continue
		}
		s, ok := wire.ParseShardSet(r.Set)
		if !ok {
			s = wire.ShardSet{} // malformed: runs nothing the leader can tell
		}
		sets[r.Identity] = &s
		if differ == nil {
			differ = map[string]int{}
		}
		differ[r.Identity] = s.Size
	}
	// A leader's range shard "i" is a range of its Count and field: a
	// candidate of another set runs none of them, whatever it calls "i".
	ranges := a.cfg.Ranges != ""
	return func(id, sh string) bool {
		s := sets[id]
		return s == nil || !ranges && s.Runs(sh)
	}, differ
}

// runnable returns t less the holders and takers that do not run their
// shard.
func runnable(t wire.Table, runs func(identity, shard string) bool) wire.Table {
	out := t
	out.Assigned, out.Takers = map[string]string{}, map[string]string{}
	for sh, h := range t.Assigned {
		if runs(h, sh) {
			out.Assigned[sh] = h
		}
	}
	for sh, id := range t.Takers {
		if runs(id, sh) {
			out.Takers[sh] = id
		}
	}
	return out
}

// reportDiffer warns, once per candidate and set size, of each candidate
// whose shard set differs from this leader's, and keeps
// Stats.ShardSetsDiffer.
func (a *assigner) reportDiffer(differ map[string]int) {
	if a.warnedSet == nil {
		a.warnedSet = map[string]int{}
	}
	for id, n := range differ {
		if w, ok := a.warnedSet[id]; ok && w == n {
			continue
		}
		a.warnedSet[id] = n
		a.port.Log(slog.LevelWarn, "relect: a candidate runs another shard set than the leader (ShardOptions.Count, Names or Ranges differ): it is given only shards of the leader's set that it runs; finish the rolling update so that every candidate runs one set",
			"lease", a.cfg.Describe, "candidate", id, "candidateShards", n, "leaderShards", len(a.cfg.Shards))
	}
	for id := range a.warnedSet {
		if _, ok := differ[id]; !ok {
			delete(a.warnedSet, id)
		}
	}
	a.port.SetSetsDiffer(len(differ))
}
