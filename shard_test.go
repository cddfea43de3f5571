package relect_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardBook records every term of every shard's work across a fleet, and
// fails the test if a shard ever has two holders at one instant or a
// shard's fence does not grow from term to term.
type shardBook struct {
	t        *testing.T
	mu       sync.Mutex
	holder   map[string]string    // shard → who runs its work now
	freeAt   map[string]time.Time // shard → when its work last stopped
	fence    map[string]relect.Fence
	starts   int
	gaps     []time.Duration // from a shard's stop to its next start
	overlaps int
}

func newShardBook(t *testing.T) *shardBook {
	return &shardBook{t: t, holder: map[string]string{}, freeAt: map[string]time.Time{}, fence: map[string]relect.Fence{}}
}

// run is ShardOptions.Run for candidate id.
func (b *shardBook) run(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		sh, ok := relect.ShardFromContext(ctx)
		require.True(b.t, ok, "the shard's context carries the shard")
		f, ok := relect.FenceFromContext(ctx)
		require.True(b.t, ok, "the shard's context carries a fence")
		_, ok = relect.TermFromContext(ctx)
		require.True(b.t, ok, "the shard's context carries a term")
		b.mu.Lock()
		if h := b.holder[sh]; h != "" {
			b.overlaps++
			b.t.Errorf("%v: shard %s: %s starts while %s still runs it", time.Now(), sh, id, h)
		}
		if last, ok := b.fence[sh]; ok && f.Compare(last) <= 0 {
			b.t.Errorf("shard %s: fence %s of %s does not exceed the last one, %s", sh, f, id, last)
		}
		b.holder[sh], b.fence[sh] = id, f
		b.starts++
		if at, ok := b.freeAt[sh]; ok {
			b.gaps = append(b.gaps, time.Since(at))
		}
		b.mu.Unlock()
		<-ctx.Done()
		b.mu.Lock()
		delete(b.holder, sh)
		b.freeAt[sh] = time.Now()
		b.mu.Unlock()
	}
}

// held returns how many shards each candidate's work runs now.
func (b *shardBook) held() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := map[string]int{}
	for _, h := range b.holder {
		n[h]++
	}
	return n
}

func (b *shardBook) running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.holder)
}

func (b *shardBook) startCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts
}

// lastGap returns the time from a shard's last stop to its next start.
func (b *shardBook) lastGap() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.gaps) == 0 {
		return -1
	}
	return b.gaps[len(b.gaps)-1]
}

// shardFleet starts n candidates c00, c01, ... taking part in s shards,
// the first alone so that it leads.
func shardFleet(t *testing.T, api *relecttest.LeaseAPI, b *shardBook, n, s int, mod func(i int, o *relect.Options)) []*candidate {
	return fleet(t, api, n, func(i int, o *relect.Options) {
		o.Priority = 0
		o.Shards = relect.ShardOptions{Count: s, Run: b.run(fmt.Sprintf("c%02d", i))}
		if mod != nil {
			mod(i, o)
		}
	})
}

func heldBy(cs []*candidate) map[string]int {
	n := map[string]int{}
	for _, c := range cs {
		if h := len(c.e.Shards()); h > 0 {
			n[c.name] = h
		}
	}
	return n
}

// TestShards: the shards settle balanced, one holder each, and each
// candidate's Shards says what it holds; a holder that stops hands its
// shards over at once; a change of leader moves none; a holder cut off
// loses its shards, which run elsewhere within LeaseDuration + 2 ×
// RetryPeriod of its last renewal, and never two at once; once it is back
// it is given shards again.
func TestShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := shardFleet(t, api, b, 3, 6, nil)
		// A first deployment: shard Leases missing are created LD after
		// they were found missing, as the election's.
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == 6 })
		time.Sleep(ld)
		synctest.Wait()
		assert.Equal(t, map[string]int{"c00": 2, "c01": 2, "c02": 2}, b.held(), "balanced: 6 shards over 3")
		assert.Equal(t, b.held(), heldBy(cs), "Elector.Shards says what each holds")
		for _, c := range cs {
			assert.Equal(t, 2, c.e.Stats().ShardsHeld, "%s: Stats.ShardsHeld", c.name)
		}
		assert.GreaterOrEqual(t, cs[0].e.Stats().ShardMoves, uint64(6), "the leader assigned every shard")
		assert.Equal(t, 3, api.Watchers(ns, wire.ShardTableName(lease)), "every member follows the table")
		// Settled, the table is not written, and each shard Lease is
		// watched three times: by the leader's one watch of them all, by
		// its holder's watch of the Lease it holds (as the election's
		// leader watches the election's), and by its taker's, which takes
		// it when it is released or expires.
		posts := func() uint64 {
			return cs[0].e.Stats().Calls[relect.CallKey{Verb: "post-shard-table", Result: "ok"}]
		}
		before := posts()
		time.Sleep(3 * ld)
		synctest.Wait()
		assert.Equal(t, before, posts(), "the settled table was written again")
		for i := range 6 {
			assert.Equal(t, 3, api.Watchers(ns, wire.ShardLeaseName(lease, fmt.Sprint(i))), "shard %d's Lease's watches", i)
		}

		// A graceful stop: its two shards run elsewhere at once.
		settled := b.startCount()
		cs[2].stop()
		synctest.Wait()
		waitFor(t, rp, "the stopped holder's shards run elsewhere", func() bool { return b.running() == 6 })
		t.Logf("graceful: a shard ran again %v after it stopped", b.lastGap())
		assert.Less(t, b.lastGap(), 100*time.Millisecond, "a graceful move is a release, a table write and an acquisition")
		assert.Equal(t, settled+2, b.startCount(), "only the stopped holder's shards moved")
		assert.Equal(t, map[string]int{"c00": 3, "c01": 3}, b.held())
		gaps := cs[0].e.Stats()
		assert.GreaterOrEqual(t, gaps.ShardGaps, uint64(2), "the leader saw the two released shards taken")

		// A change of leader moves no shard.
		settled = b.startCount()
		require.NoError(t, cs[0].e.Yield(t.Context()))
		waitFor(t, rp, "c01 leads", cs[1].e.IsLeader)
		time.Sleep(2 * ld)
		synctest.Wait()
		assert.Equal(t, settled, b.startCount(), "a change of leader moved a shard")
		assert.Equal(t, map[string]int{"c00": 3, "c01": 3}, b.held())

		// c00 is cut off: its shards stop within RD, and run on c01 within
		// LD + 2 RP of its last renewal.
		cut := time.Now()
		cs[0].client.Partition()
		waitFor(t, ld+3*rp, "c00's shards run on c01", func() bool { return b.held()["c01"] == 6 })
		t.Logf("cut off: the shards ran again %v after the partition, %v after they stopped", time.Since(cut), b.lastGap())
		assert.LessOrEqual(t, time.Since(cut), ld+2*rp, "the shards of a holder cut off run again within LD + 2 RP")
		// Healed, it is given shards again once it has shown it lives.
		cs[0].client.Heal()
		waitFor(t, 3*ld, "c00 holds shards again", func() bool { return b.held()["c00"] == 3 })
		time.Sleep(ld)
		synctest.Wait()
		assert.Equal(t, map[string]int{"c00": 3, "c01": 3}, b.held())
		assert.Zero(t, b.overlaps)
		stopAll(cs[:2]...)
		assert.Zero(t, b.running(), "every shard's work returned before Run did")
	})
}

// TestShardsFirstDeployment: on a first deployment the leader may plan
// before the rest of the fleet has registered. The shard Leases are still
// missing then (they are created LeaseDuration after they were found
// missing), so candidates that register meanwhile share the shards at
// once, not after JoinDelay: every shard starts on its settled holder, and
// none moves.
func TestShardsFirstDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		var cs []*candidate
		start := func(name string) {
			c := newCandidate(t, api, name, func(o *relect.Options) {
				o.Shards = relect.ShardOptions{Count: 6, Run: b.run(name)}
			})
			c.start()
			cs = append(cs, c)
		}
		start("c00")
		// It leads, and plans (half a retry period into its term) with
		// nobody else registered.
		time.Sleep(2 * rp)
		synctest.Wait()
		require.True(t, cs[0].e.IsLeader())
		require.Zero(t, b.running(), "the shard Leases are not created yet")
		start("c01")
		start("c02")
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == 6 })
		synctest.Wait()
		assert.Equal(t, map[string]int{"c00": 2, "c01": 2, "c02": 2}, b.held(), "balanced when the shards first run")
		time.Sleep(2 * ld)
		synctest.Wait()
		assert.Equal(t, 6, b.startCount(), "no shard moved after it first ran")
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestShardWeights: a candidate of weight 3 holds three times the shards
// of one of weight 1; a standby and a candidate without Shards hold none.
func TestShardWeights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		cs := shardFleet(t, api, b, 4, 8, func(i int, o *relect.Options) {
			switch i {
			case 1:
				o.Shards.Weight = 3
			case 2:
				o.Standby = true
			case 3:
				o.Shards = relect.ShardOptions{}
			}
		})
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == 8 })
		time.Sleep(ld)
		synctest.Wait()
		if !assert.Equal(t, map[string]int{"c00": 2, "c01": 6}, b.held()) {
			for _, l := range api.Leases(ns) {
				t.Logf("%s holder %s rv %s ann %v", l.Name, wire.Holder(l), l.ResourceVersion, l.Annotations)
			}
		}
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

func TestShardOptionsInvalid(t *testing.T) {
	api := newAPI()
	base := func(mod func(*relect.Options)) error {
		o := relect.Options{Client: api.Client("x").Clientset(), Namespace: ns, Name: lease,
			Shards: relect.ShardOptions{Count: 2, Run: func(context.Context) {}}}
		mod(&o)
		_, err := relect.New(o)
		return err
	}
	require.NoError(t, base(func(*relect.Options) {}), "OnStartedLeading may be nil with Shards")
	for field, mod := range map[string]func(*relect.Options){
		"Shards.Count":         func(o *relect.Options) { o.Shards.Count = -1 },
		"Shards.Names":         func(o *relect.Options) { o.Shards.Count = 0; o.Shards.Names = make([]string, 1001) },
		"Shards.Names[1]":      func(o *relect.Options) { o.Shards.Count = 0; o.Shards.Names = []string{"a", "a"} },
		"Shards.Names[0]":      func(o *relect.Options) { o.Shards.Count = 0; o.Shards.Names = []string{"Not_A_Label"} },
		"Shards.Run":           func(o *relect.Options) { o.Shards.Run = nil },
		"Shards.Weight":        func(o *relect.Options) { o.Shards.Weight = -1 },
		"Shards.JoinDelay":     func(o *relect.Options) { o.Shards.JoinDelay = -time.Second },
		"Shards.Work.Cooldown": func(o *relect.Options) { o.Shards.Work.BeatWindow = time.Second; o.Shards.Work.Cooldown = -1 },
		"Shards":               func(o *relect.Options) { o.DisableRegistry = true },
		"Shards.Count ":        func(o *relect.Options) { o.Shards.Names = []string{"a"} },
		// A field set without Count or Names fails, not turns shards off.
		"Shards.Count  ":  func(o *relect.Options) { o.Shards = relect.ShardOptions{Weight: 3} },
		"Shards.Count   ": func(o *relect.Options) { o.Shards = relect.ShardOptions{JoinDelay: time.Second} },
		"Shards.Count    ": func(o *relect.Options) {
			o.Shards = relect.ShardOptions{Work: relect.WorkOptions{BeatWindow: time.Second}}
		},
	} {
		err := base(mod)
		require.ErrorIs(t, err, relect.ErrInvalidOptions, field)
		assert.Contains(t, err.Error(), "Options."+strings.TrimSpace(field), field)
	}
	_, err := relect.New(relect.Options{Client: api.Client("x").Clientset(), Namespace: ns, Name: lease})
	require.ErrorContains(t, err, "Options.OnStartedLeading", "still required without Shards")

	// The table names each shard's holder and taker: it must fit in the
	// Lease's 256 KiB of annotations, judged with this identity's length.
	long, name63 := strings.Repeat("n", 253), strings.Repeat("s", 60)
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("%s%03d", name63, i)
	}
	require.NoError(t, base(func(o *relect.Options) { o.Shards.Count = 1000; o.Identity = strings.Repeat("n", 63) }))
	// As ShardOptions.Count says: 1,000 numbered shards fit identities of
	// up to about 110 bytes.
	require.NoError(t, base(func(o *relect.Options) { o.Shards.Count = 1000; o.Identity = strings.Repeat("n", 110) }))
	require.Error(t, base(func(o *relect.Options) { o.Shards.Count = 1000; o.Identity = strings.Repeat("n", 115) }))
	err = base(func(o *relect.Options) { o.Shards.Count = 1000; o.Identity = long })
	require.ErrorIs(t, err, relect.ErrInvalidOptions)
	assert.ErrorContains(t, err, "Options.Shards.Count makes a shard table of about")
	// Judged as JSON writes it: "<" is six bytes there.
	err = base(func(o *relect.Options) { o.Shards.Count = 1000; o.Identity = strings.Repeat("<", 60) })
	require.ErrorIs(t, err, relect.ErrInvalidOptions)
	assert.ErrorContains(t, err, "identities of 360 bytes as JSON")
	err = base(func(o *relect.Options) {
		o.Shards.Count = 0
		o.Shards.Names = many
		o.Identity = strings.Repeat("n", 63)
	})
	require.ErrorIs(t, err, relect.ErrInvalidOptions)
	assert.ErrorContains(t, err, "Options.Shards.Names makes a shard table of about")
}

// TestShardsRollingRestart restarts every candidate in turn, the leader
// last, each a JoinDelay after the one before (a rollout that waits for
// readiness): no shard ever has two holders, the fleet settles balanced,
// and each shard moves a bounded number of times (logged).
func TestShardsRollingRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, s = 5, 10
		api := newAPI()
		b := newShardBook(t)
		mod := func(i int) func(o *relect.Options) {
			return func(o *relect.Options) {
				o.Shards = relect.ShardOptions{Count: s, Run: b.run(fmt.Sprintf("c%02d", i))}
			}
		}
		cs := shardFleet(t, api, b, n, s, nil)
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == s })
		time.Sleep(2 * ld)
		synctest.Wait()
		settled := b.startCount()
		for _, i := range []int{1, 2, 3, 4, 0} {
			before := b.startCount()
			cs[i].stop()
			synctest.Wait()
			t.Logf("stop of c%02d: %d moves, held %v", i, b.startCount()-before, b.held())
			cs[i] = newCandidate(t, api, fmt.Sprintf("c%02d", i), mod(i))
			before = b.startCount()
			cs[i].start()
			time.Sleep(2 * ld)
			synctest.Wait()
			t.Logf("restart of c%02d: %d moves after its start, held %v", i, b.startCount()-before, b.held())
		}
		time.Sleep(2 * ld)
		synctest.Wait()
		moves := b.startCount() - settled
		t.Logf("a rolling restart of %d candidates holding %d shards moved shards %d times (%.1f per shard)", n, s, moves, float64(moves)/s)
		held := b.held()
		assert.Len(t, held, n, "every candidate holds shards again: %v", held)
		for id, k := range held {
			assert.Equal(t, s/n, k, "%s holds %d", id, k)
		}
		// Each restart moves the restarted holder's shards away and back
		// (2 × S/N); the leader's can move S/N twice more (the new leader
		// may plan before the restarted candidate registered again).
		assert.LessOrEqual(t, moves, 2*s+2*(s/n), "more moves than the bound")
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestShardWorkStuck: a shard whose work stops beating is released by its
// holder and runs on another candidate, and the holder is passed over for
// that shard for Shards.Work.Cooldown.
func TestShardWorkStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		var mu sync.Mutex
		stuck := map[string]bool{} // "identity/shard" whose work stops beating
		cs := shardFleet(t, api, b, 2, 2, func(i int, o *relect.Options) {
			id := fmt.Sprintf("c%02d", i)
			run := b.run(id)
			o.Shards.Work = relect.WorkOptions{BeatWindow: 2 * rp}
			o.Shards.Run = func(ctx context.Context) {
				sh, _ := relect.ShardFromContext(ctx)
				go func() {
					tick := time.NewTicker(rp)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
						mu.Lock()
						st := stuck[id+"/"+sh]
						mu.Unlock()
						if !st {
							relect.Beat(ctx)
						}
					}
				}()
				run(ctx)
			}
		})
		waitFor(t, 3*ld, "both shards run", func() bool { return b.running() == 2 })
		time.Sleep(ld)
		synctest.Wait()
		held := b.held()
		require.Equal(t, map[string]int{"c00": 1, "c01": 1}, held)
		var sh string
		for _, c := range cs {
			if got := c.e.Shards(); c.name == "c01" {
				sh = got[0]
			}
		}
		mu.Lock()
		stuck["c01/"+sh] = true
		mu.Unlock()
		waitFor(t, 4*rp, "c00 runs both shards", func() bool { return b.held()["c00"] == 2 })
		time.Sleep(ld / 2)
		synctest.Wait()
		assert.Equal(t, map[string]int{"c00": 2}, b.held(), "within the cooldown, the shard stays with c00")
		assert.Zero(t, b.overlaps)
		stopAll(cs...)
	})
}

// TestShardHolderDeregistersLast: a holder that stops releases its shard
// Leases — once its work returned — before it deletes its registration.
// The leader reads both; had it seen the registration go first, it would
// have planned the holder's shards anew while they were still held
// (a table write), for candidates other than the takers that follow them.
// So the table is not written between the stop and the releases, and the
// takers named before the stop take the shards.
func TestShardHolderDeregistersLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		b := newShardBook(t)
		linger := rp / 2 // c02's work returns that long after its context ends: the leader plans every RP/4
		cs := shardFleet(t, api, b, 3, 6, func(i int, o *relect.Options) {
			if run := o.Shards.Run; i == 2 {
				o.Shards.Run = func(ctx context.Context) {
					run(ctx)
					time.Sleep(linger)
				}
			}
		})
		waitFor(t, 3*ld, "every shard runs", func() bool { return b.running() == 6 })
		time.Sleep(2 * ld)
		synctest.Wait()
		table := wire.TableOf(api.Lease(ns, wire.ShardTableName(lease)))
		require.NotNil(t, table)
		takers, leases := map[string]string{}, map[string]bool{}
		for sh, h := range table.Assigned {
			if h == "c02" {
				takers[sh] = table.Takers[sh]
				leases[wire.ShardLeaseName(lease, sh)] = true
			}
		}
		require.Len(t, takers, 2, "c02's shards in %v", table.Assigned)

		var mu sync.Mutex
		var released []time.Time // when each release of c02's shard Leases returned
		var deregistered time.Time
		var tableWrites []time.Time
		defer api.Observe(func(c relecttest.Call) {
			if c.Err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case c.Client == "c02" && c.Verb == relecttest.VerbUpdate && leases[c.Name]:
				released = append(released, c.End)
			case c.Client == "c02" && c.Verb == relecttest.VerbDelete:
				deregistered = c.Start
			case c.Verb == relecttest.VerbUpdate && c.Name == wire.ShardTableName(lease):
				tableWrites = append(tableWrites, c.Start)
			}
		})()
		stopped := time.Now()
		cs[2].stop()
		waitFor(t, rp, "the stopped holder's shards run elsewhere", func() bool { return b.running() == 6 })
		mu.Lock()
		require.Len(t, released, 2, "c02 released its two shard Leases")
		require.False(t, deregistered.IsZero(), "c02 deleted its registration")
		for _, at := range released {
			assert.False(t, deregistered.Before(at), "the registration's deletion (%v) started before a shard Lease's release returned (%v)", deregistered, at)
			assert.False(t, at.Before(stopped.Add(linger)), "released before the work returned")
		}
		for _, at := range tableWrites {
			assert.False(t, at.Before(slices.MinFunc(released, time.Time.Compare)), "the table was written at %v, between the stop (%v) and the releases (%v)", at, stopped, released)
		}
		mu.Unlock()
		b.mu.Lock()
		for sh, taker := range takers {
			assert.Equal(t, taker, b.holder[sh], "shard %s runs on the taker the table named before the stop", sh)
		}
		b.mu.Unlock()
		assert.Zero(t, b.overlaps)
		stopAll(cs[:2]...)
	})
}
