package relect_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/testlog"
	"github.com/relect/relect/relecttest"
	"github.com/relect/relect/shardrange"
	"github.com/stretchr/testify/assert"
)

// gapWatch polls a shardBook every 100 ms and records, for each shard of
// a set, the periods it runs nowhere.
type gapWatch struct {
	mu    sync.Mutex
	gaps  map[string][]time.Duration // closed gaps, by shard
	since map[string]time.Time       // open gaps
	stop  chan struct{}
	done  chan struct{}
}

func watchGaps(b *shardBook, shards []string) *gapWatch {
	g := &gapWatch{gaps: map[string][]time.Duration{}, since: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			b.mu.Lock()
			g.mu.Lock()
			for _, sh := range shards {
				_, held := b.holder[sh]
				at, open := g.since[sh]
				switch {
				case !held && !open:
					g.since[sh] = time.Now()
				case held && open:
					g.gaps[sh] = append(g.gaps[sh], time.Since(at))
					delete(g.since, sh)
				}
			}
			g.mu.Unlock()
			b.mu.Unlock()
		}
	}()
	return g
}

// end stops the watch and returns each shard's gaps, an open one counted
// up to now.
func (g *gapWatch) end() map[string][]time.Duration {
	close(g.stop)
	<-g.done
	for sh, at := range g.since {
		g.gaps[sh] = append(g.gaps[sh], time.Since(at))
	}
	return g.gaps
}

func numbered(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// TestShardSetsDiffer: a candidate on 4 shards beside a leader and another
// candidate on 8 (a rolling update that changes Count, midway). It is
// warned of, counted in Stats.ShardSetsDiffer and named in the table's
// Differ; it is given only shards it runs, so every shard of the leader's
// set stays held — once settled, no gap at all over 10 minutes (before:
// a shard unheld 19 s of every 34 s) — and no shard has two holders.
func TestShardSetsDiffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		logs := &testlog.Handler{Level: slog.LevelWarn}
		cs := shardFleet(t, api, b, 3, 8, func(i int, o *relect.Options) {
			o.Logger = slog.New(logs)
			if i == 2 {
				o.Shards.Count = 4
			}
		})
		waitFor(t, 4*ld, "the leader's 8 shards run", func() bool { return b.running() == 8 })
		time.Sleep(2 * ld)
		synctest.Wait()
		gw := watchGaps(b, numbered(8))
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		gaps := gw.end()
		held := b.held()
		t.Logf("a candidate on 4 shards beside 2 on 8, 10 min: held %v, gaps %v, %d warnings naming it, table differ %v",
			held, gaps, len(logs.Naming("another shard set", "candidate=c02", "candidateShards=4", "leaderShards=8")), tableOf(api).Differ)
		assert.Empty(t, gaps, "a shard of the leader's set went unheld")
		assert.NotZero(t, held["c02"], "c02 runs shards of the leader's set it runs")
		for _, sh := range shardsOf(b, "c02") {
			n, _ := strconv.Atoi(sh)
			assert.Less(t, n, 4, "c02 was given shard %s, which it does not run", sh)
		}
		assert.Len(t, logs.Naming("another shard set", "candidate=c02", "candidateShards=4", "leaderShards=8"), 1, "warned once")
		assert.Equal(t, 1, cs[0].e.Stats().ShardSetsDiffer)
		assert.Equal(t, map[string]int{"c02": 4}, tableOf(api).Differ)
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// rollTo restarts each candidate of cs in turn, JoinDelay apart, with mod
// applied to its options, and returns the new candidates.
func rollTo(t *testing.T, api *relecttest.LeaseAPI, b *shardBook, cs []*candidate, mod func(o *relect.Options)) []*candidate {
	t.Helper()
	out := slices.Clone(cs)
	for i, c := range cs {
		c.stop()
		out[i] = newCandidate(t, api, c.name, func(o *relect.Options) {
			o.Priority = 0
			o.Shards = relect.ShardOptions{Run: b.run(c.name)}
			mod(o)
		})
		out[i].start()
		time.Sleep(ld)
		synctest.Wait()
	}
	return out
}

// TestShardSetRollingUpdate: a rolling update from one shard set to
// another, one candidate at a time, JoinDelay apart — 8 → 4, 4 → 8, and
// a name added and one removed: within 2 minutes of the last restart
// every shard of the new set runs, and none outside it; never two
// holders of a shard.
func TestShardSetRollingUpdate(t *testing.T) {
	steps := []struct {
		name     string
		from, to func(o *relect.Options)
		set      []string
		both     []string // in both sets
	}{
		{"8 → 4", func(o *relect.Options) { o.Shards.Count = 8 }, func(o *relect.Options) { o.Shards.Count = 4 }, numbered(4), numbered(4)},
		{"4 → 8", func(o *relect.Options) { o.Shards.Count = 4 }, func(o *relect.Options) { o.Shards.Count = 8 }, numbered(8), numbered(4)},
		{"names: c added, a removed", func(o *relect.Options) { o.Shards.Names = []string{"a", "b"} },
			func(o *relect.Options) { o.Shards.Names = []string{"b", "c"} }, []string{"b", "c"}, []string{"b"}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				b := newShardBook(t)
				cs := fleet(t, api, 3, func(i int, o *relect.Options) {
					o.Priority = 0
					o.Shards = relect.ShardOptions{Run: b.run(fmt.Sprintf("c%02d", i))}
					step.from(o)
				})
				waitFor(t, 4*ld, "the old set runs", func() bool { return b.running() > 0 })
				time.Sleep(2 * ld)
				synctest.Wait()
				gw := watchGaps(b, step.both)
				cs = rollTo(t, api, b, cs, step.to)
				last := time.Now()
				took := until(t, 2*time.Minute, "every shard of the new set runs, none outside it", func() bool {
					b.mu.Lock()
					defer b.mu.Unlock()
					if len(b.holder) != len(step.set) {
						return false
					}
					for _, sh := range step.set {
						if _, ok := b.holder[sh]; !ok {
							return false
						}
					}
					return true
				})
				t.Logf("%s: every shard of the new set ran, none outside it, %v after the last restart; held %v", step.name, took, b.held())
				balanced := until(t, 3*time.Minute, "balanced", func() bool { return isBalanced(b, len(step.set), min(3, len(step.set))) })
				t.Logf("%s: balanced %v after the last restart; held %v, table %+v", step.name, time.Since(last), b.held(), tableOf(api))
				_ = balanced
				gaps := gw.end()
				t.Logf("%s: the shards of both sets went unheld (100 ms polls) %v during the update", step.name, gaps)
				for sh, g := range gaps {
					assert.LessOrEqual(t, len(g), 1, "shard %s unheld again and again", sh)
					for _, d := range g {
						assert.LessOrEqual(t, d, ld+2*rp, "shard %s", sh)
					}
				}
				assert.LessOrEqual(t, time.Since(last), 2*time.Minute)
				assert.Zero(t, b.overlaps)
				stopAll(cs...)
			})
		})
	}
}

// TestShardLogsSpeakShards: a shard's log lines carry the shard; at Info a
// shard says only its terms (client-go's acquire lines and new-leader go
// to Debug); a move by the table says that the leader gave the shard to
// another candidate, not "context canceled".
func TestShardLogsSpeakShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		logs := &testlog.Handler{Level: testlog.All}
		cs := shardFleet(t, api, b, 2, 4, func(i int, o *relect.Options) {
			o.Logger = slog.New(logs)
		})
		waitFor(t, 4*ld, "balanced", func() bool { return isBalanced(b, 4, 2) })
		// A third candidate joins: the table moves a shard to it.
		c := newCandidate(t, api, "c02", func(o *relect.Options) {
			o.Priority = 0
			o.Shards = relect.ShardOptions{Count: 4, Run: b.run("c02")}
		})
		c.start()
		waitFor(t, 3*ld, "c02 holds a shard", func() bool { return b.held()["c02"] > 0 })
		var moved, infoOther []string
		for _, r := range logs.Lines() {
			if !strings.Contains(r, " shard=") {
				continue
			}
			if strings.Contains(r, "stopped-leading") && strings.Contains(r, "gave the shard to another candidate") {
				moved = append(moved, r)
			}
			if strings.HasPrefix(r, "INFO ") && !strings.Contains(r, "started-leading") && !strings.Contains(r, "stopped-leading") && !strings.Contains(r, "relect: released") {
				infoOther = append(infoOther, r)
			}
		}
		t.Logf("a move by the table: %q", moved)
		assert.NotEmpty(t, moved, "the move says the leader gave the shard to another candidate")
		assert.Empty(t, infoOther, "a shard's other lines are at Debug")
		stopAll(append(cs, c)...)
	})
}

// TestShardsFirstDeploymentWait: how long a first deployment waits for
// its shards, from the first candidate's start: the shard Leases are
// created LeaseDuration after the leader first listed them missing (a
// missing Lease may have just been deleted), so LD + RP/2 and a hop when
// the election's Lease exists, and the creates' waits for spare tokens;
// when it is missing too (a real first deployment) the election waits LD
// for it first: 2 × LD + RP/2. It prints the figure.
func TestShardsFirstDeploymentWait(t *testing.T) {
	for _, missing := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			if !missing {
				api.PutReleased(ns, lease)
			}
			b := newShardBook(t)
			start := time.Now()
			var cs []*candidate
			for i := range 3 {
				c := newCandidate(t, api, fmt.Sprintf("c%02d", i), func(o *relect.Options) {
					o.Shards = relect.ShardOptions{Count: 6, Run: b.run(fmt.Sprintf("c%02d", i))}
				})
				c.start()
				cs = append(cs, c)
			}
			waitFor(t, 4*ld, "every shard runs", func() bool { return b.running() == 6 })
			took := time.Since(start)
			// LD + RP/2 (the leader's first list), a hop (RP/2), and the
			// creates' waits for spare tokens: one each at most, RP/2 at
			// the default rate, when the leader's burst is spent by the
			// table writes of the same instant (1 run in 20: 18.5 s).
			want := ld + rp/2 + rp/2 + 6*rp/2
			if missing {
				want += ld
			}
			t.Logf("first deployment, the election's Lease missing %v: every shard ran %v after the start (LD %v)", missing, took, ld)
			assert.LessOrEqual(t, took, want)
			assert.Greater(t, took, ld*time.Duration(map[bool]int{false: 1, true: 2}[missing])-time.Second)
			stopAll(cs...)
		})
	}
}

// TestShardRangeSetsDiffer: range shards split the data, so a candidate
// whose shards are another split — the same Count of no ranges, or of
// another Count — runs none of the leader's, whatever it calls its shard
// "1": beside a leader and a candidate on 8 uid ranges, one candidate
// without Ranges and one on 4 uid ranges are each warned of, counted in
// Stats.ShardSetsDiffer and named in the table's Differ, and given no
// shard, while the leader's 8 ranges stay held by the two of its set.
func TestShardRangeSetsDiffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		logs := &testlog.Handler{Level: slog.LevelWarn}
		cs := shardFleet(t, api, b, 4, 8, func(i int, o *relect.Options) {
			o.Logger = slog.New(logs)
			switch i {
			case 0, 1:
				o.Shards.Ranges = shardrange.UID
			case 3:
				o.Shards.Count, o.Shards.Ranges = 4, shardrange.UID
			}
		})
		waitFor(t, 4*ld, "the leader's 8 ranges run", func() bool { return b.running() == 8 })
		time.Sleep(3 * ld)
		synctest.Wait()
		held := b.held()
		t.Logf("2 candidates on 8 uid ranges beside one on 8 shards and one on 4 ranges: held %v, table differ %v", held, tableOf(api).Differ)
		assert.Zero(t, held["c02"], "c02 (no ranges) was given a range")
		assert.Zero(t, held["c03"], "c03 (4 ranges) was given one of 8")
		assert.Equal(t, 8, held["c00"]+held["c01"])
		assert.Len(t, logs.Naming("another shard set", "candidate=c02", "candidateShards=8", "leaderShards=8"), 1, "c02 warned of once")
		assert.Len(t, logs.Naming("another shard set", "candidate=c03", "candidateShards=4", "leaderShards=8"), 1, "c03 warned of once")
		assert.Equal(t, 2, cs[0].e.Stats().ShardSetsDiffer)
		assert.Equal(t, map[string]int{"c02": 8, "c03": 4}, tableOf(api).Differ)
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}
