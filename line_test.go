package relect_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/clientgoloop"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// Only the line watches (docs/design.md): in a fleet, the leader, its
// successors and its keeper watch the election's Lease; everyone else
// follows the line Lease, and still knows the leader.

// settle waits for the followers to find the line posted: one that read
// the line Lease before the leader wrote it tries again a retry period
// later, then two.
func settle() { time.Sleep(6 * rp) }

// lineOf returns the line of succession the election's Lease carries.
func lineOf(t *testing.T, api *relecttest.LeaseAPI) *wire.Succession {
	t.Helper()
	sc := wire.SuccessionOf(api.Lease(ns, lease))
	require.NotNil(t, sc, "the Lease carries a line")
	return sc
}

// successorsOf returns the candidates of cs that sc names as successors.
func successorsOf(cs []*candidate, sc *wire.Succession) []*candidate {
	var out []*candidate
	for _, s := range sc.Next {
		out = append(out, named(cs, s.Identity))
	}
	return out
}

// others returns the candidates of cs that are not in but.
func others(cs, but []*candidate) []*candidate {
	var out []*candidate
	for _, c := range cs {
		if named(but, c.name) == nil {
			out = append(out, c)
		}
	}
	return out
}

// allKnow reports whether every candidate of cs names leader as Leader.
func allKnow(cs []*candidate, leader string) func() bool {
	return func() bool {
		for _, c := range cs {
			if c.e.Leader() != leader {
				return false
			}
		}
		return true
	}
}

// A fleet of 30: five watch the election's Lease, 25 follow the line
// Lease; every one of them knows the leader and the line. After a
// graceful change of leader, every candidate knows the new leader within a
// retry period (the new leader posts its line with its first renewal, once
// it has listed the registry), and the watches settle on the new line.
func TestOnlyTheLineWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		formation := logCalls(api)
		cs := fleet(t, api, 30, nil)
		settle()
		formation.stop()
		reads := map[string]int{}
		formation.mu.Lock()
		for _, c := range formation.calls {
			if c.Verb == relecttest.VerbGet && c.Name == wire.LineName(lease) {
				reads[c.Client]++
			}
		}
		formation.mu.Unlock()
		assert.Equal(t, 1, reads[cs[0].name], "the leader reads it once, and creates it")
		delete(reads, cs[0].name)
		for name, n := range reads {
			// The Lease says the line is posted only once the line Lease
			// posts it: nobody finds it stale and tries again.
			assert.Equal(t, 1, n, "%s read the line Lease %d times as the fleet formed", name, n)
		}
		assert.Len(t, reads, 25, "each candidate outside the line read it once")
		leader := cs[0]
		sc := lineOf(t, api)
		require.True(t, sc.Posted)
		require.Len(t, sc.Next, 3)
		require.Len(t, sc.Keepers, 1)
		assert.Equal(t, 5, api.Watchers(ns, lease), "the leader, three successors and a keeper watch the election's Lease")
		assert.Equal(t, 25, api.Watchers(ns, wire.LineName(lease)), "the others follow the line Lease")
		for _, c := range cs {
			assert.Equal(t, leader.name, c.e.Leader(), "%s knows the leader", c.name)
		}
		outsider := cs[29]
		if sc.Names(outsider.name) {
			outsider = cs[28]
		}
		inLine := 0
		for _, c := range outsider.e.Candidates() {
			if c.Successor > 0 {
				inLine++
			}
		}
		assert.Equal(t, 3, inLine, "a candidate outside the line knows the line from the line Lease")

		first := named(cs, sc.Next[0].Identity)
		start := time.Now()
		leader.stop()
		synctest.Wait()
		require.True(t, first.e.IsLeader(), "the first in line leads at once")
		waitFor(t, 2*rp, "every candidate knows the new leader", allKnow(cs[1:], first.name))
		t.Logf("every candidate knew the new leader %v after the release", time.Since(start))
		// The new leader posts its line with its first renewal, once it has
		// listed the registry half a retry period in: one post per change.
		assert.LessOrEqual(t, time.Since(start), rp+100*time.Millisecond)
		settle()
		assert.Equal(t, 5, api.Watchers(ns, lease), "the new leader, its line and its keeper")
		assert.Equal(t, 24, api.Watchers(ns, wire.LineName(lease)))
		assert.Equal(t, sc.Keepers, lineOf(t, api).Keepers, "the keeper stays one across a change of leader")
		stopAll(cs[1:]...)
	})
}

// The leader and its three successors crash together (a zone outage): the
// keeper, which watches the election's Lease, takes the lease at its turn
// after the successors' — LeaseDuration + 3 succession steps after the
// last renewal — and every candidate then knows it.
func TestLeaderAndLineCrashTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 30, func(_ int, o *relect.Options) { o.KeepLeaseOnCancel = true })
		settle()
		sc := lineOf(t, api)
		require.Len(t, sc.Keepers, 1)
		keeper := named(cs, sc.Keepers[0])
		dead := append([]*candidate{cs[0]}, successorsOf(cs, sc)...)
		lastRenewal := api.Lease(ns, lease).Spec.RenewTime.Time
		for _, c := range dead {
			c.client.Partition()
		}
		calls := logCalls(api)
		waitFor(t, ld+3*rp, "the keeper leads", keeper.e.IsLeader)
		synctest.Wait()
		on := keeper.eventsOf(relect.EventStartedLeading)[0].Time
		assert.Equal(t, lastRenewal.Add(ld+3*rp/2), on, "the keeper, at its turn after the three successors")
		alive := others(cs, dead)
		waitFor(t, 2*rp, "every live candidate knows the keeper leads", allKnow(alive, keeper.name))
		calls.stop() // the keeper's first renewal, a retry period into its term, is in
		n := 0
		for name, verbs := range calls.by() {
			if named(dead, name) == nil {
				n += len(verbs)
			}
		}
		t.Logf("calls by the live candidates from the crash to the keeper's first renewal: %d: %v", n, calls.by())
		assert.LessOrEqual(t, n, 12+2*4, "the takeover's, and the new line's four joining (a read and a watch each)")
		for _, c := range dead {
			c.client.Heal()
		}
		stopAll(cs...)
	})
}

// The whole line gone (docs/design.md, "Liveness, and what a user sees"):
// the leader, its three successors and its keeper leave at one instant —
// a rollout with a large maxUnavailable, a drain, a zone outage — while
// everyone else stays. Nobody left watches the election's Lease, but the
// line's warden reads it every two retry periods: a new leader within 10 s
// of a graceful stop of them all (the release is seen at the warden's next
// read, and the warden's turn comes after the keeper's: 2·RP + 4 steps),
// and within LeaseDuration + 10 s of a crash of them all (the warden's
// observation of the last record counts from its first read of it: 2·RP +
// LD + 4 steps), at every fleet size. Before the warden, the outsiders
// waited for the line Lease to go stale: 8 to 10 minutes.
func TestWholeLineGone(t *testing.T) {
	for _, n := range wholeLineSizes() {
		for _, crash := range []bool{false, true} {
			name := fmt.Sprintf("%d/graceful", n)
			bound := 10 * time.Second
			if crash {
				name, bound = fmt.Sprintf("%d/crash", n), ld+10*time.Second
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { wholeLineGone(t, n, crash, bound) })
			})
		}
	}
}

// wholeLineGone starts a fleet of n, stops (or crashes) its leader, its
// successors and its keeper at once, and asserts that another candidate
// leads within bound, that it is the warden, and that everyone knows it.
func wholeLineGone(t *testing.T, n int, crash bool, bound time.Duration) {
	api := newAPI()
	cs := fleet(t, api, n, func(_ int, o *relect.Options) { o.KeepLeaseOnCancel = crash })
	settle()
	sc := lineOf(t, api)
	require.True(t, sc.Posted, "a fleet of %d posts its line", n)
	require.Len(t, sc.Keepers, 1)
	require.NotEmpty(t, sc.Warden, "the line names a warden")
	require.False(t, sc.Names(sc.Warden), "the warden is outside the line")
	assert.Equal(t, sc.Warden, wire.LineOf(api.Lease(ns, wire.LineName(lease))).Succession.Warden, "the line Lease names it")
	assert.Equal(t, 5, api.Watchers(ns, lease), "the warden reads the election's Lease; it does not watch it")
	dead := append([]*candidate{cs[0], named(cs, sc.Keepers[0])}, successorsOf(cs, sc)...)
	alive := others(cs, dead)
	start := time.Now()
	if crash {
		start = api.Lease(ns, lease).Spec.RenewTime.Time // the last renewal: the crash is after it
		for _, c := range dead {
			c.client.Partition()
		}
	} else {
		stopAllAtOnce(dead...)
	}
	waitFor(t, bound+ld, "a new leader", func() bool { return len(leaders(alive...)) == 1 })
	took := time.Since(start)
	t.Logf("fleet of %d, crash %v: a new leader (%s; the warden: %s) %v after the line left", n, crash, leaders(alive...)[0], sc.Warden, took)
	assert.LessOrEqual(t, took, bound)
	assert.Equal(t, []string{sc.Warden}, leaders(alive...), "the warden, the only one left that knew")
	waitFor(t, 2*rp, "every live candidate knows it", allKnow(alive, leaders(alive...)[0]))
	settle()
	if crash {
		// The crashed stay registered until their registrations lapse: the
		// new line may name some of them, which watch nothing.
		assert.LessOrEqual(t, api.Watchers(ns, lease), 5, "the new line watches; the others follow the line Lease again")
	} else {
		watchers := len(alive) // a line that would leave fewer than four out is not posted
		if len(alive)-5 >= 4 {
			watchers = 5
		}
		assert.Equal(t, watchers, api.Watchers(ns, lease), "the new line watches; the others follow the line Lease again")
	}
	for _, c := range dead {
		c.client.Heal()
	}
	if crash {
		stopAll(dead...)
	}
	stopAll(alive...)
}

// A plain client-go candidate takes the lease: it posts no line, so the
// line's watchers withdraw the line (two lease durations after they saw
// it), the candidates that followed it watch the election's Lease again
// and know the client-go leader; when it stops, a relect candidate takes
// over and posts its line, and they follow it again.
func TestLineWithdrawnForAPlainClientGoLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 20, nil)
		settle()
		plain, err := clientgoloop.New(clientgoloop.Config{
			Client: api.Client("plain").Clientset(), Namespace: ns, Name: lease, Identity: "plain",
			LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp,
			OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			plain.Run(ctx)
		}()
		// An operator hands the lease to plain by hand; plain's client-go
		// elector sees itself named and renews it.
		require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
			h := "plain"
			l.Spec.HolderIdentity = &h
		}))
		waitFor(t, 2*rp, "plain leads", plain.IsLeader)
		waitFor(t, 2*ld+2*rp, "the line withdrawn", func() bool {
			return wire.LineOf(api.Lease(ns, wire.LineName(lease))).Withdrawn()
		})
		waitFor(t, 2*rp, "every candidate watches the election's Lease", func() bool {
			return api.Watchers(ns, lease) == 20 && api.Watchers(ns, wire.LineName(lease)) == 0 // plain polls
		})
		waitFor(t, ld+2*rp, "every candidate knows plain leads", allKnow(cs, "plain"))
		cancel()
		<-stopped
		waitFor(t, ld+2*rp, "a relect leader again", func() bool { return len(leaders(cs...)) == 1 })
		settle()
		assert.Equal(t, 5, api.Watchers(ns, lease), "the line watches again")
		assert.Equal(t, 15, api.Watchers(ns, wire.LineName(lease)))
		stopAll(cs...)
	})
}

// With the registry off there is no line: every candidate watches the
// election's Lease, as before.
func TestNoLineWithoutTheRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 20, func(_ int, o *relect.Options) { o.DisableRegistry, o.Priority = true, 0 })
		settle()
		assert.Equal(t, 20, api.Watchers(ns, lease))
		assert.Nil(t, api.Lease(ns, wire.LineName(lease)), "no line Lease")
		stopAll(cs...)
	})
}

// An apiserver that sheds the line Lease's reads (429), as API Priority
// and Fairness sheds a fleet that forms at once: the followers try again
// each when its own backoff ends, not together on the leader's next
// renewal, which reaches them all at one instant and would bring the
// shed ones back as one burst, to be shed again. Once the line Lease
// answers, every follower follows it within the longest backoff, the
// line Lease's refresh period.
func TestShedLineReadsAreSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		shed := relecttest.Error(429)
		for i := 1; i < 30; i++ {
			api.Client(fmt.Sprintf("c%02d", i)).FailLease(wire.LineName(lease), shed)
		}
		reads := logCalls(api)
		cs := fleet(t, api, 30, nil)
		time.Sleep(time.Minute)
		reads.stop()
		sc := lineOf(t, api)
		require.True(t, sc.Posted)
		assert.Equal(t, 30, api.Watchers(ns, lease), "nobody follows a line it cannot read")

		tries := map[time.Time]int{} // the retries of the line's read, by instant
		first := map[string]bool{}
		reads.mu.Lock()
		for _, c := range reads.calls {
			if c.Verb != relecttest.VerbGet || c.Name != wire.LineName(lease) || c.Client == cs[0].name {
				continue
			}
			if first[c.Client] {
				tries[c.Start]++
			}
			first[c.Client] = true
		}
		reads.mu.Unlock()
		assert.Len(t, first, 25, "each candidate outside the line tried to read it")
		most := 0
		for _, n := range tries {
			most = max(most, n)
		}
		t.Logf("%d retries of the line's read in a minute; the most at one instant: %d", len(tries), most)
		assert.Greater(t, len(tries), 25, "the shed followers tried again")
		// Each shed follower tries again on a timer of its own (wakeAt), not
		// on the next renewal, which reaches them all at once. Those whose
		// backoff ended while the record had not yet said the line was
		// posted (a new line, written a renewal before it is announced)
		// read it together on the renewal that says so: a few at one
		// instant, never the fleet. Measured (300 runs of this test): the
		// most at one instant was 1 in 265 runs, 2 in 28, 3 in 7; the
		// bound is a fifth of the 25, a herd five times the largest seen.
		assert.LessOrEqual(t, most, 5, "shed followers tried again together")

		for _, c := range cs {
			c.client.Heal()
		}
		refresh := 5 * time.Minute // RegistrationRenewal / 3: the longest backoff
		waitFor(t, refresh+rp, "every follower follows the line", func() bool {
			return api.Watchers(ns, wire.LineName(lease)) == 25
		})
		assert.Equal(t, 5, api.Watchers(ns, lease), "the leader, three successors and a keeper watch the election's Lease")
		stopAll(cs...)
	})
}

// wholeLineSizes are TestWholeLineGone's fleet sizes: 9 (the smallest
// fleet that posts a line), 12, 30 and 100; RELECT_LINE_SIZES (a comma
// list, e.g. 1000,5000) chooses others.
func wholeLineSizes() []int {
	sizes := []int{9, 12, 30, 100}
	if v := os.Getenv("RELECT_LINE_SIZES"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 9 {
				sizes = append(sizes, n)
			}
		}
	}
	return sizes
}
