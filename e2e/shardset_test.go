package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/history"
)

// TestShardSetRollingRestart: three candidate processes on 4 shards
// (ShardOptions.Count), restarted one at a time with 8, then one at a
// time with 4 again — a rolling update that changes the shard set, each
// way. While the sets differ the leader gives a candidate only shards it
// runs (docs/operations.md, "Changing the shard set"). After the last
// restart of each update, every shard of the new set runs on exactly one
// process and none outside it, within 2 minutes (the bound; the
// figure is printed); over the whole test no shard runs on two processes
// at one instant.
func TestShardSetRollingRestart(t *testing.T) {
	c := requireCluster(t)
	lease := leaseName(t)
	candidateBinary(t)
	ids := []string{"a", "b", "c"}
	live := map[string]*candidate{}
	var all []*candidate
	start := func(id string, shards int) {
		cand := c.startCandidate(t, id, candOpts{lease: lease, args: []string{"-shards", strconv.Itoa(shards)}})
		live[id] = cand
		all = append(all, cand)
	}
	for _, id := range ids {
		start(id, 4)
	}
	held := func(want int) func() bool {
		return func() bool {
			by := runningShards(live)
			if len(by) != want {
				return false
			}
			for i := range want {
				if len(by[strconv.Itoa(i)]) != 1 {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 2*leaseDuration+10*retryPeriod+slack, "4 shards held, one process each", held(4))
	for _, to := range []int{8, 4} {
		for _, id := range ids {
			live[id].terminate()
			start(id, to)
		}
		last := time.Now()
		at := waitFor(t, 2*time.Minute, fmt.Sprintf("the %d shards of the new set held, one process each, none outside it", to), held(to))
		t.Logf("rolling update to %d shards: every shard of the new set held %s after the last restart (%s)",
			to, ms(at.Sub(last)), describeRunning(runningShards(live)))
	}
	for _, id := range ids {
		live[id].terminate()
	}
	checkNoShardOverlap(t, all)
}

// runningShards returns, by shard, the identities of the processes in
// live whose work runs it now (an open term).
func runningShards(live map[string]*candidate) map[string][]string {
	by := map[string][]string{}
	for id, cand := range live {
		if cand.exited() {
			continue
		}
		for sh, ivs := range history.ShardIntervals(id, cand.records(), time.Time{}) {
			if n := len(ivs); n > 0 && ivs[n-1].Open {
				by[sh] = append(by[sh], id)
			}
		}
	}
	return by
}

// describeRunning is runningShards for people: "0:a 1:b ...".
func describeRunning(by map[string][]string) string {
	var shs []string
	for sh := range by {
		shs = append(shs, sh)
	}
	sortShards(shs)
	var out []string
	for _, sh := range shs {
		out = append(out, sh+":"+strings.Join(by[sh], ","))
	}
	return strings.Join(out, " ")
}

// checkNoShardOverlap fails the test if two of the processes (each
// incarnation apart) ran one shard at one instant.
func checkNoShardOverlap(t *testing.T, cands []*candidate) {
	t.Helper()
	by := map[string][]history.Interval{}
	for i, cand := range cands {
		label := fmt.Sprintf("%s#%d", cand.id, i)
		for sh, ivs := range history.ShardIntervals(label, cand.records(), cand.dead()) {
			by[sh] = append(by[sh], ivs...)
		}
	}
	terms := 0
	for sh, ivs := range by {
		slices.SortFunc(ivs, func(a, b history.Interval) int { return a.Start.Compare(b.Start) })
		terms += len(ivs)
		for _, o := range history.Overlaps(ivs) {
			t.Errorf("SAFETY VIOLATION: shard %s: %v", sh, o)
		}
		for _, v := range history.FenceRegressions(ivs) {
			t.Errorf("FENCING: shard %s: %s", sh, v)
		}
	}
	t.Logf("%d shard terms checked: none on two processes at once, fences growing", terms)
}
