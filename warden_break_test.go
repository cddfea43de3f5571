package relect_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A break-it pass on the warden (docs/design.md, "Only the line watches",
// "The warden"). Tests named TestBreak... either hold (they assert what
// the docs promise and pass) or show a finding: those skip unless
// RELECT_BREAK=1, and print the figure that breaks the promise.

// finding skips the rest of a test that shows a finding unless
// RELECT_BREAK is set.
func finding(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("RELECT_BREAK") == "" {
		t.Skip(what + " (RELECT_BREAK=1 runs it)")
	}
}

// wardenFleet starts a fleet of n whose candidates keep their lease when
// cancelled (a crash is a partition), settles it, and returns it with its
// line: the leader, successors and keeper (line), and the warden.
func wardenFleet(t *testing.T, api *relecttest.LeaseAPI, n int, mod func(int, *relect.Options)) (cs, line []*candidate, warden *candidate) {
	t.Helper()
	return wardenFleetKeep(t, api, n, true, mod)
}

// wardenFleetKeep is wardenFleet whose candidates keep their lease when
// cancelled only if keep (else a stop releases it).
func wardenFleetKeep(t *testing.T, api *relecttest.LeaseAPI, n int, keep bool, mod func(int, *relect.Options)) (cs, line []*candidate, warden *candidate) {
	t.Helper()
	cs = fleet(t, api, n, func(i int, o *relect.Options) {
		o.KeepLeaseOnCancel = keep
		if mod != nil {
			mod(i, o)
		}
	})
	settle()
	sc := lineOf(t, api)
	require.True(t, sc.Posted)
	require.Len(t, sc.Keepers, 1)
	require.NotEmpty(t, sc.Warden)
	line = append([]*candidate{cs[0], named(cs, sc.Keepers[0])}, successorsOf(cs, sc)...)
	return cs, line, named(cs, sc.Warden)
}

// crash cuts every candidate of cs off: calls hang until their context
// ends, as after a crash or a zone outage.
func crash(cs ...*candidate) {
	for _, c := range cs {
		c.client.Partition()
	}
}

// healAndStop heals and stops every candidate of cs, and waits for writes
// delayed by SetApplyDelay to land.
func healAndStop(cs ...*candidate) {
	for _, c := range cs {
		c.client.Heal()
	}
	stopAll(cs...)
	time.Sleep(time.Minute)
}

// newLeaderAfter waits up to limit for exactly one leader among alive and
// returns how long after start it came (limit+ if none).
func newLeaderAfter(t *testing.T, alive []*candidate, start time.Time, limit time.Duration) (time.Duration, string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for len(leaders(alive...)) != 1 {
		if time.Now().After(deadline) {
			return time.Since(start), ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start), leaders(alive...)[0]
}

// electionCalls counts the calls each client makes naming the election's
// Lease, by verb, while it is open.
type electionCalls struct {
	mu     sync.Mutex
	n      map[string]map[string]int // client → verb → calls
	all    int                       // every call, any Lease, any client
	client map[string]int            // client → calls on any Lease
	stop   func()
}

func countElectionCalls(api *relecttest.LeaseAPI) *electionCalls {
	c := &electionCalls{n: map[string]map[string]int{}, client: map[string]int{}}
	c.stop = api.Observe(func(call relecttest.Call) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.all++
		c.client[call.Client]++
		if call.Name != lease {
			return
		}
		if c.n[call.Client] == nil {
			c.n[call.Client] = map[string]int{}
		}
		c.n[call.Client][call.Verb]++
	})
	return c
}

func (c *electionCalls) of(client, verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[client][verb]
}

func (c *electionCalls) by(client string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client[client]
}

func (c *electionCalls) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all
}

// watchSampler samples the watches on the election's Lease every 100 ms:
// the most at once, and for how long there were more than five.
type watchSampler struct {
	mu       sync.Mutex
	max      int
	over5    time.Duration
	quit     chan struct{}
	finished chan struct{}
}

func sampleWatches(api *relecttest.LeaseAPI) *watchSampler {
	s := &watchSampler{quit: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
			n := api.Watchers(ns, lease)
			s.mu.Lock()
			s.max = max(s.max, n)
			if n > 5 {
				s.over5 += 100 * time.Millisecond
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *watchSampler) stop() (most int, over5 time.Duration) {
	close(s.quit)
	<-s.finished
	return s.max, s.over5
}

// SAFETY. The warden's observation counts from its first read of the
// record it later found unchanged. With the rest of the line cut off, so
// that the warden is the one who acts, a leader that is alive but slow —
// every call 5 s late (more than two retry periods: the warden comes back
// again and again), or its writes applied 3 s after they are sent — must
// go on leading alone: the warden's takeover write is conditional, and its
// expiry counts from a read of a record written before it.
func TestBreakWardenSlowLeaderStaysAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow func(c *relecttest.Client)
	}{
		{"latency 5s", func(c *relecttest.Client) { c.SetLatency(5 * time.Second) }},
		{"latency 3s", func(c *relecttest.Client) { c.SetLatency(3 * time.Second) }},
		{"apply delay 3s", func(c *relecttest.Client) { c.SetApplyDelay(3 * time.Second) }},
		{"apply delay 9s", func(c *relecttest.Client) { c.SetApplyDelay(9 * time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleet(t, api, 12, nil)
				crash(line[1:]...) // the successors and the keeper: only the warden acts
				stop := monitor(t, 50*time.Millisecond, cs...)
				calls := countElectionCalls(api)
				tc.slow(cs[0].client)
				time.Sleep(5 * time.Minute)
				stop()
				calls.stop()
				t.Logf("%s: leader %v, warden %s leads %v; the warden's calls on the election's Lease in 5 min: %d gets, %d watches, %d updates; terms started by the warden %d",
					tc.name, cs[0].e.IsLeader(), warden.name, warden.e.IsLeader(),
					calls.of(warden.name, relecttest.VerbGet), calls.of(warden.name, relecttest.VerbWatch),
					calls.of(warden.name, relecttest.VerbUpdate), warden.count(relect.EventStartedLeading))
				healAndStop(cs...)
			})
		})
	}
}

// SAFETY. A leader paused (SIGSTOP) for longer than a lease duration,
// with the rest of its line cut off: the warden takes over once the
// leader's record expired; the leader, resumed, must not lead with it.
func TestBreakWardenPausedLeader(t *testing.T) {
	for _, pause := range []time.Duration{rd, ld, ld + 4*rp, 40 * time.Second} {
		t.Run(pause.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleet(t, api, 12, nil)
				crash(line[1:]...)
				stop := monitor(t, 50*time.Millisecond, cs...)
				time.Sleep(rp / 3) // off the renewals' phase
				cs[0].client.Pause()
				time.Sleep(pause)
				cs[0].client.Resume()
				time.Sleep(time.Minute)
				stop()
				t.Logf("paused %v: leader now %v; the warden %s started %d terms", pause, leaders(cs...), warden.name, warden.count(relect.EventStartedLeading))
				assert.Len(t, leaders(cs...), 1)
				healAndStop(cs...)
			})
		})
	}
}

// SAFETY. A foreign holder (a plain client-go candidate, or an operator)
// takes the lease right after the whole line released it, and renews it
// every retry period by hand: the warden comes back at its read (the
// release, or the foreign record), but must not take it while it is
// renewed; once the renewals stop it takes it within LD + 10 s.
func TestBreakWardenReleaseThenForeignHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		alive := others(cs, line)
		// Every write the foreign holder makes must come before anyone in
		// alive may act: put it at the instant of the release.
		stopAllAtOnce(line...)
		renew := func() {
			require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
				h, s := "foreign", int32(ld/time.Second)
				l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &h, &s
				now := metav1.NewMicroTime(time.Now())
				l.Spec.RenewTime = &now
			}))
		}
		renew()
		for range 60 { // two minutes
			time.Sleep(rp)
			require.Empty(t, leaders(alive...), "a relect candidate leads while the foreign holder renews")
			renew()
		}
		last := time.Now()
		took, who := newLeaderAfter(t, alive, last, 2*ld+10*time.Second)
		t.Logf("the foreign holder's last renewal: %s (the warden %s) leads %v later", who, warden.name, took)
		assert.LessOrEqual(t, took, ld+10*time.Second)
		stopAll(alive...)
	})
}

// LIVENESS (finding 1 of the break-it pass, fixed): a warden that crashed
// stayed named until its registration lapsed (up to 45 minutes), and a
// crash of the whole line meanwhile waited for the line Lease to go stale
// (8 minutes measured). A warden now renews its registration every beat
// (warden.Beat, LD), and the leader names another when it has not seen
// it renew for three beats (45 s by default). The warden crashes; two
// minutes later the line names another, and a crash of the whole line is
// noticed within LD + 10 s.
func TestBreakWardenCrashedEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		crash(warden)
		time.Sleep(2 * time.Minute)
		require.NotEqual(t, warden.name, lineOf(t, api).Warden, "two minutes later the line names another warden")
		start := api.Lease(ns, lease).Spec.RenewTime.Time
		crash(line...)
		alive := others(others(cs, line), []*candidate{warden})
		took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
		t.Logf("warden %s crashed 2 min before the line: a new leader (%s) %v after the line's last renewal", warden.name, who, took)
		assert.LessOrEqual(t, took, ld+10*time.Second, "the whole line crashed: LD + 10 s promised")
		healAndStop(cs...)
	})
}

// How long a crashed warden stays named: until the leader has not seen its
// registration renewed for three beats (3 × LD = 45 s), from the beat it
// sent last (up to a beat and a read period before the crash), at the
// next renewal of the leader's. Prints the figure.
func TestBreakCrashedWardenStaysNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, _, warden := wardenFleet(t, api, 12, nil)
		crash(warden)
		start := time.Now()
		for lineOf(t, api).Warden == warden.name && time.Since(start) < time.Hour {
			time.Sleep(time.Second)
		}
		took := time.Since(start)
		t.Logf("the crashed warden %s stayed named %v (now %q)", warden.name, took, lineOf(t, api).Warden)
		assert.LessOrEqual(t, took, 3*ld+rp, "replaced three beats after its last")
		healAndStop(cs...)
	})
}

// LIVENESS (the simulation's seed 11587, fixed): the warden crashes, and
// 20 s later the leader alone crashes. A new leader's view sees every
// registration anew at its start; it counted the warden's silence from
// there, so the dead warden stayed named for three more beats (a crash of
// the whole line meanwhile waited for the line Lease to go stale). It now
// also reads the registration's renewTime of a warden it takes over: the
// line names another within three beats of the crashed warden's last
// (3 × LD + RP after the crash).
func TestBreakWardenCrashedBeforeAChangeOfLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		crash(warden)
		crashed := time.Now()
		time.Sleep(20 * time.Second)
		crash(line[0])
		alive := others(cs, []*candidate{warden, line[0]})
		took, who := newLeaderAfter(t, alive, time.Now(), 2*time.Minute)
		require.NotEmpty(t, who, "a successor leads after the leader's crash")
		t.Logf("the leader crashed 20 s after warden %s: %s leads %v later", warden.name, who, took)
		for lineOf(t, api).Warden == warden.name && time.Since(crashed) < time.Hour {
			time.Sleep(time.Second)
		}
		named := time.Since(crashed)
		t.Logf("the crashed warden %s stayed named %v after its crash (now %q)", warden.name, named, lineOf(t, api).Warden)
		assert.LessOrEqual(t, named, 3*ld+rp, "replaced three beats after its last, across the change of leader")
		healAndStop(cs...)
	})
}

// LIVENESS (the simulation's seed 27495, fixed): a crashed candidate's
// registration stays in view for registrationLives renewal periods, and a
// leader may name it warden, to find it silent three beats later. Two
// wardens crash one after the other: the leader must not name the first
// again when it replaces the second (it did: both were the lowest by
// hash, named in turn for as long as they stayed in view, and the line
// had no live warden). For five minutes after, it names neither.
func TestBreakDeadWardensAreNotNamedInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, _, w1 := wardenFleet(t, api, 12, nil)
		crash(w1)
		replaced := func(dead ...*candidate) *candidate {
			t.Helper()
			var now string
			waitFor(t, 3*ld+rp, "another warden named", func() bool {
				now = lineOf(t, api).Warden
				return now != "" && !slices.ContainsFunc(dead, func(c *candidate) bool { return c.name == now })
			})
			return named(cs, now)
		}
		w2 := replaced(w1)
		crash(w2)
		w3 := replaced(w1, w2)
		seen := map[string]bool{}
		for range 300 {
			seen[lineOf(t, api).Warden] = true
			time.Sleep(time.Second)
		}
		t.Logf("wardens %s and %s crashed in turn; %s named next; the line named %v in the five minutes after", w1.name, w2.name, w3.name, slices.Sorted(maps.Keys(seen)))
		assert.False(t, seen[w1.name] || seen[w2.name], "a dead warden named again")
		healAndStop(cs...)
	})
}

// LIVENESS (finding 2 of the break-it pass, fixed): the warden cannot read
// the election's Lease — the apiserver sheds its reads (429), fails them
// (500), refuses them (403: RBAC with resourceNames), or they hang past
// the call timeout. It then does not beat (a beat follows a successful
// read), and the leader names another warden within three beats: a crash
// of the whole line two minutes later is noticed within LD + 10 s. (A
// follower from before the warden does not register as one that wards,
// and is never named.)
func TestBreakWardenThatCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		deaf func(c *relecttest.Client)
	}{
		{"429", func(c *relecttest.Client) { c.FailLease(lease, relecttest.Error(429)) }},
		{"500", func(c *relecttest.Client) { c.FailLease(lease, relecttest.Error(500)) }},
		{"403", func(c *relecttest.Client) { c.FailLease(lease, relecttest.Error(403)) }},
		{"hang", func(c *relecttest.Client) { c.SetLatency(6 * time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleet(t, api, 12, nil)
				tc.deaf(warden.client)
				time.Sleep(2 * time.Minute)
				require.NotEqual(t, warden.name, lineOf(t, api).Warden, "two minutes later the line names another warden")
				start := api.Lease(ns, lease).Spec.RenewTime.Time
				crash(line...)
				alive := others(cs, line)
				took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
				t.Logf("warden %s reads %s: a new leader (%s) %v after the line's last renewal", warden.name, tc.name, who, took)
				assert.LessOrEqual(t, took, ld+10*time.Second, "the whole line crashed: LD + 10 s promised")
				healAndStop(cs...)
			})
		})
	}
}

// LIVENESS. The line Lease's warden edited by hand (or a leader from
// before the warden, which names none: both Leases lose the field), then
// the whole line crashes.
func TestBreakWardenEditedAway(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ward  func(cs, line []*candidate, warden *candidate) string
		found bool
	}{
		{"another outsider", func(cs, line []*candidate, warden *candidate) string {
			return others(cs, append([]*candidate{warden}, line...))[0].name
		}, false},
		{"none (a leader from before the warden)", func(_, _ []*candidate, _ *candidate) string { return "" }, true},
		{"nobody registered", func(_, _ []*candidate, _ *candidate) string { return "nobody" }, true},
		{"the leader", func(_, line []*candidate, _ *candidate) string { return line[0].name }, true},
		{"a successor", func(_, line []*candidate, _ *candidate) string { return line[2].name }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.found {
				finding(t, "finding 3: a warden edited away (or never named) leaves a line crash 8-10 min without a leader")
			}
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleet(t, api, 12, nil)
				start := api.Lease(ns, lease).Spec.RenewTime.Time
				crash(line...)
				to := tc.ward(cs, line, warden)
				edit := func(l *coordinationv1.Lease) {
					s := wire.SuccessionOf(l)
					s.Warden = to
					l.Annotations[wire.AnnotationSuccession] = s.Encode()
				}
				require.NoError(t, api.Edit(ns, lease, edit))
				require.NoError(t, api.Edit(ns, wire.LineName(lease), edit))
				alive := others(cs, line)
				took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
				t.Logf("ward edited from %s to %q, then the line crashed: a new leader (%s) %v after the line's last renewal", warden.name, to, who, took)
				assert.LessOrEqual(t, took, ld+10*time.Second, "the whole line crashed: LD + 10 s promised")
				healAndStop(cs...)
			})
		})
	}
}

// LIVENESS. The warden stops gracefully (or restarts) some time before
// the whole line stops: "a warden that stops gracefully is replaced by
// the leader at once"; the line then stopping at once is promised a
// leader within 10 s. At the same instant is the documented limit.
func TestBreakWardenStopsBeforeTheLine(t *testing.T) {
	for _, tc := range []struct {
		gap     time.Duration
		restart bool
	}{{0, false}, {rp, false}, {5 * rp, false}, {30 * time.Second, false}, {rp, true}, {5 * rp, true}, {30 * time.Second, true}} {
		t.Run(fmt.Sprintf("gap %v restart %v", tc.gap, tc.restart), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleetKeep(t, api, 12, false, nil)
				warden.stop()
				alive := others(cs, append([]*candidate{warden}, line...))
				if tc.restart {
					again := newCandidate(t, api, warden.name, nil)
					again.start()
					alive = append(alive, again)
				}
				time.Sleep(tc.gap)
				now := lineOf(t, api).Warden
				start := time.Now()
				stopAllAtOnce(line...)
				took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
				t.Logf("warden %s stopped (restart %v), the line %v later (naming warden %q then): a new leader (%s) %v after", warden.name, tc.restart, tc.gap, now, who, took)
				if tc.gap > 0 {
					assert.LessOrEqual(t, took, 10*time.Second, "the whole line stopped: 10 s promised")
				}
				stopAll(alive...)
			})
		})
	}
}

// LIVENESS. The whole line leaves while a handover to its first successor
// is in progress: the handover record's short duration, then the warden.
func TestBreakWardenDuringAHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		crash(line[1:]...)
		start := time.Now()
		require.NoError(t, cs[0].e.HandOver(t.Context(), line[2].name, nil))
		crash(cs[0])
		alive := others(cs, line)
		took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
		t.Logf("handover to a dead successor, the whole line gone: a new leader (%s; warden %s) %v after the handover", who, warden.name, took)
		assert.LessOrEqual(t, took, ld+10*time.Second)
		healAndStop(cs...)
	})
}

// COST. The warden's reads find the same resourceVersion twice when the
// leader's renewals come more than two retry periods apart: slow calls
// (latency on every call, or on the leader's alone), writes applied late,
// renewals that fail now and then (500). Each time it comes back it
// watches the election's Lease (a sixth watch) until the next renewal,
// then reads and watches the line Lease again. Ten settled minutes in a
// fleet of 12; the docs: 0.25 calls/s for the warden, five watches.
func TestBreakWardenCostWhenSlow(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow func(cs []*candidate)
	}{
		{"healthy", func([]*candidate) {}},
		{"every call 1.5s", func(cs []*candidate) {
			for _, c := range cs {
				c.client.SetLatency(1500 * time.Millisecond)
			}
		}},
		{"the leader's calls 1.5s", func(cs []*candidate) { cs[0].client.SetLatency(1500 * time.Millisecond) }},
		{"the leader's calls 2.5s", func(cs []*candidate) { cs[0].client.SetLatency(2500 * time.Millisecond) }},
		{"the leader's calls 3.5s", func(cs []*candidate) { cs[0].client.SetLatency(3500 * time.Millisecond) }},
		{"the leader's writes applied 1.5s late", func(cs []*candidate) { cs[0].client.SetApplyDelay(1500 * time.Millisecond) }},
		{"a 500 every 10s", func(cs []*candidate) {
			go func() {
				for range 60 {
					time.Sleep(10 * time.Second)
					cs[0].client.FailNext(1, relecttest.Error(500))
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, _, warden := wardenFleet(t, api, 12, nil)
				calls := countElectionCalls(api)
				watches := sampleWatches(api)
				tc.slow(cs)
				time.Sleep(10 * time.Minute)
				most, over5 := watches.stop()
				calls.stop()
				backs := calls.of(warden.name, relecttest.VerbWatch)
				t.Logf("%s: the warden %.1f calls/min (%d reads of the election's Lease, %d returns to watch it); the fleet %.1f calls/min; watches on the election's Lease: at most %d, more than 5 for %v of 10 min; leader %v",
					tc.name, float64(calls.by(warden.name))/10, calls.of(warden.name, relecttest.VerbGet), backs,
					float64(calls.total())/10, most, over5, leaders(cs...))
				assert.Equal(t, []string{cs[0].name}, leaders(cs...), "the leader leads on")
				assert.LessOrEqual(t, most, 6, "five watches, a sixth while the warden is back")
				healAndStop(cs...)
			})
		})
	}
}

// LIVENESS (finding 4 of the break-it pass, fixed): the warden told a
// missed renewal by the resourceVersion, so a write that changes the
// Lease but not the record (a label, an annotation another tool keeps)
// more often than every two retry periods kept it from coming back at all
// (a new leader 51 s and 2 min 19 s after the line's last renewal). It
// compares records now, as the watchers do. The line crashes; from a
// second later a label is edited every 3 s, for 30 s or 2 minutes.
func TestBreakWardenFooledByOtherWrites(t *testing.T) {
	for _, span := range []time.Duration{30 * time.Second, 2 * time.Minute} {
		t.Run(fmt.Sprintf("for %v", span), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs, line, warden := wardenFleet(t, api, 12, nil)
				start := api.Lease(ns, lease).Spec.RenewTime.Time
				crash(line...)
				alive := others(cs, line)
				done := make(chan struct{})
				go func() {
					defer close(done)
					time.Sleep(time.Second)
					for i := 0; time.Since(start) < span; i++ {
						_ = api.Edit(ns, lease, func(l *coordinationv1.Lease) {
							if l.Labels == nil {
								l.Labels = map[string]string{}
							}
							l.Labels["example.com/touched"] = fmt.Sprint(i)
						})
						time.Sleep(3 * time.Second)
					}
				}()
				took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
				<-done
				t.Logf("a label edited every 3 s for %v after the crash: a new leader (%s; warden %s) %v after the line's last renewal", span, who, warden.name, took)
				assert.LessOrEqual(t, took, ld+10*time.Second, "the whole line crashed: LD + 10 s promised")
				healAndStop(cs...)
			})
		})
	}
}

// The warden is chosen among the candidates that may lead: never a
// standby, even when every other outsider is one.
func TestBreakWardenIsNeverAStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, func(i int, o *relect.Options) { o.Standby = i >= 6 })
		t.Logf("line %v, warden %s", func() (ids []string) {
			for _, c := range line {
				ids = append(ids, c.name)
			}
			return ids
		}(), warden.name)
		assert.Less(t, warden.name, "c06", "the one outsider that may lead")
		healAndStop(cs...)
	})
}

// LIVENESS. The warden's work check fails (Options.Work.Check): a
// successor whose check fails stands back in line, but the check runs only
// on the leader and its successors, so the warden never learns its own is
// failing: it takes the lease when the whole line stops, and the term is
// judged stuck only CheckFailures × CheckInterval later. Prints when the
// warden led, and when the lease moved on.
func TestBreakWardenWithAFailingCheck(t *testing.T) {
	finding(t, "finding 5: a warden whose work check fails takes the lease (its check never ran) and holds it 26 s")
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		var wardenName atomicString
		cs, line, warden := wardenFleetKeep(t, api, 12, false, func(i int, o *relect.Options) {
			name := fmt.Sprintf("c%02d", i)
			o.Work.Check = func(context.Context) error {
				if wardenName.load() == name {
					return errors.New("cannot do the work")
				}
				return nil
			}
		})
		wardenName.store(warden.name)
		time.Sleep(time.Minute)
		start := time.Now()
		stopAllAtOnce(line...)
		alive := others(cs, line)
		took, who := newLeaderAfter(t, alive, start, 15*time.Minute)
		waitFor(t, 5*time.Minute, "the lease moves on from the warden", func() bool {
			l := leaders(alive...)
			return len(l) == 1 && l[0] != warden.name
		})
		t.Logf("the warden %s, its check failing: %s leads %v after the line stopped; %s leads %v after", warden.name, who, took, leaders(alive...)[0], time.Since(start))
		assert.NotEqual(t, warden.name, who, "a candidate whose check fails stands back")
		stopAll(alive...)
	})
}

// LIVENESS. The line Lease's warden edited by hand while the leader lives:
// how long until the leader writes it again (the refresh, 5 minutes)?
func TestBreakWardenEditRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, _, warden := wardenFleet(t, api, 12, nil)
		require.NoError(t, api.Edit(ns, wire.LineName(lease), func(l *coordinationv1.Lease) {
			s := wire.SuccessionOf(l)
			s.Warden = "nobody"
			l.Annotations[wire.AnnotationSuccession] = s.Encode()
		}))
		start := time.Now()
		var ward string
		for time.Since(start) < 15*time.Minute {
			time.Sleep(time.Second)
			if ward = wire.LineOf(api.Lease(ns, wire.LineName(lease))).Succession.Warden; ward != "nobody" {
				break
			}
		}
		t.Logf("the line Lease's ward edited from %s to nobody: %q again %v later", warden.name, ward, time.Since(start))
		healAndStop(cs...)
	})
}

// LIVENESS. The line Lease deleted by hand, then the whole line crashes
// half a minute later: the outsiders watch the election's Lease meanwhile.
func TestBreakWardenLineLeaseDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, _ := wardenFleet(t, api, 30, nil)
		require.NoError(t, api.Delete(ns, wire.LineName(lease)))
		time.Sleep(30 * time.Second)
		watching := api.Watchers(ns, lease)
		start := api.Lease(ns, lease).Spec.RenewTime.Time
		crash(line...)
		took, who := newLeaderAfter(t, others(cs, line), start, 15*time.Minute)
		t.Logf("line Lease deleted, 30 s later %d watch the election's Lease; the line crashes: a new leader (%s) %v after its last renewal", watching, who, took)
		assert.LessOrEqual(t, took, ld+10*time.Second)
		healAndStop(cs...)
	})
}

// atomicString is a string safe for concurrent use.
type atomicString struct {
	mu sync.Mutex
	s  string
}

func (a *atomicString) load() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s
}

func (a *atomicString) store(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.s = s
}

// LIVENESS. The whole line crashes and the election's Lease is deleted by
// hand at that instant: the warden's read finds it missing, it watches it
// missing for a lease duration (createWait) and creates it.
func TestBreakWardenElectionLeaseDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		crash(line...)
		start := time.Now()
		require.NoError(t, api.Delete(ns, lease))
		took, who := newLeaderAfter(t, others(cs, line), start, 15*time.Minute)
		t.Logf("the line crashed and the election's Lease deleted: a new leader (%s; warden %s) %v after", who, warden.name, took)
		assert.LessOrEqual(t, took, ld+10*time.Second)
		healAndStop(cs...)
	})
}

// SAFETY. The successors and the keeper crashed; the leader is cut off
// again and again, for a few seconds up to more than a lease duration,
// and comes back each time: the warden comes back at each gap and takes
// over after the long ones; whoever leads, never two at once.
func TestBreakWardenFlappingLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		crash(line[1:]...)
		stop := monitor(t, 50*time.Millisecond, cs...)
		calls := countElectionCalls(api)
		changes := 0
		last := leaders(cs...)
		for i, gap := range []time.Duration{3, 7, 11, 14, 15, 16, 19, 23, 5, 9, 13, 17, 21, 25, 30} {
			// cut off whoever leads now, at a phase that moves each round
			time.Sleep(time.Duration(i) * 300 * time.Millisecond)
			var who []*candidate
			for _, c := range others(cs, line[1:]) {
				if c.e.IsLeader() {
					who = append(who, c)
				}
			}
			crash(who...)
			time.Sleep(gap * time.Second)
			for _, c := range who {
				c.client.Heal()
			}
			time.Sleep(time.Minute)
			if now := leaders(cs...); fmt.Sprint(now) != fmt.Sprint(last) {
				changes++
				last = now
			}
		}
		stop()
		calls.stop()
		t.Logf("15 cuts of 3 s to 30 s: %d changes of leader; the warden %s read %d times, came back %d times, wrote %d times", changes,
			warden.name, calls.of(warden.name, relecttest.VerbGet), calls.of(warden.name, relecttest.VerbWatch), calls.of(warden.name, relecttest.VerbUpdate))
		assert.Len(t, leaders(cs...), 1)
		healAndStop(cs...)
	})
}

// LIVENESS/COST. An outsider makes no call in steady state, so an
// apiserver that sheds or refuses its calls leaves it healthy; the warden
// reads every two retry periods, and its failed reads, with nothing heard
// in between (the line Lease is written every 5 minutes), fail its health
// check with ErrCutOff after CutOffAfter (30 s): a liveness probe on it
// restarts the warden's pod, and only its.
func TestBreakWardenHealthWhenReadsFail(t *testing.T) {
	finding(t, "finding 6: the warden's failed reads fail its health check (ErrCutOff) 30 s in; other outsiders stay healthy")
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 12, nil)
		outsider := others(cs, append([]*candidate{warden}, line...))[0]
		check := func(c *candidate) error { return c.e.HealthCheck(relect.HealthOptions{})(nil) }
		for _, c := range []*candidate{warden, outsider} {
			c.client.FailLease(lease, relecttest.Error(429))
		}
		start := time.Now()
		var failedAt time.Duration
		for time.Since(start) < 2*time.Minute {
			time.Sleep(time.Second)
			if err := check(warden); err != nil && failedAt == 0 {
				failedAt = time.Since(start)
				t.Logf("the warden %s: %v", warden.name, err)
			}
		}
		t.Logf("every read of the election's Lease shed (429): the warden's health check fails %v in (degraded %v); an outsider's: %v", failedAt, warden.e.Stats().Degraded, check(outsider))
		assert.Zero(t, failedAt, "an apiserver that sheds the warden's reads fails its health check")
		healAndStop(cs...)
	})
}

// LIVENESS (finding 7 of the break-it pass, fixed): the warden takes over
// after the whole line crashed: the successors that missed their turn are
// passed over in its line, and so is now the keeper that missed its own
// (it was not, and "a keeper stays one while it qualifies" for as long as
// its registration lives, up to 45 minutes: the new line named the dead
// keeper again, which watches nothing).
func TestBreakWardenKeepsTheDeadKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs, line, warden := wardenFleet(t, api, 30, nil)
		keeper := line[1]
		crash(line...)
		alive := others(cs, line)
		_, who := newLeaderAfter(t, alive, time.Now(), 15*time.Minute)
		require.Equal(t, warden.name, who)
		settle()
		sc := lineOf(t, api)
		var dead []string
		for _, c := range line {
			if sc.Names(c.name) {
				dead = append(dead, c.name)
			}
		}
		t.Logf("the warden %s leads; its line: next %v, keepers %v, warden %s, passed %v; the crashed it names: %v", who, sc.Next, sc.Keepers, sc.Warden, sc.Passed, dead)
		assert.NotContains(t, sc.Keepers, keeper.name, "the keeper that missed its turn is passed over")
		healAndStop(cs...)
	})
}
