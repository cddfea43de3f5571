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

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fleet starts n candidates named c00, c01, ... with priority i % 7, the
// first alone so that it leads, and waits a lease duration: every candidate
// has registered, and the leader has published its line of succession.
func fleet(t *testing.T, api *relecttest.LeaseAPI, n int, mod func(i int, o *relect.Options)) []*candidate {
	t.Helper()
	var cs []*candidate
	for i := range n {
		c := newCandidate(t, api, fmt.Sprintf("c%02d", i), func(o *relect.Options) {
			o.Priority = int32(i % 7)
			if mod != nil {
				mod(i, o)
			}
		})
		c.start()
		cs = append(cs, c)
		if i == 0 {
			synctest.Wait()
			require.True(t, c.e.IsLeader())
		}
	}
	time.Sleep(ld)
	synctest.Wait()
	return cs
}

// blindLeader starts candidate "a" (mod may change its options) on an
// empty Lease and returns it leading, with a view of the registry that is
// its first list only: its registry watch and any later list fail, so it
// does not see candidates that register after it.
func blindLeader(t *testing.T, api *relecttest.LeaseAPI, mod func(*relect.Options)) *candidate {
	t.Helper()
	a := newCandidate(t, api, "a", mod)
	a.client.FailVerb(relecttest.VerbWatch, relecttest.Error(500))
	a.start()
	time.Sleep(rp)
	require.True(t, a.e.IsLeader())
	a.client.FailVerb(relecttest.VerbList, relecttest.Error(500))
	return a
}

func named(cs []*candidate, name string) *candidate {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return nil
}

func stopAll(cs ...*candidate) {
	for _, c := range cs {
		c.stop()
		c.checkEvents()
	}
}

// callLog records every call of a LeaseAPI while it is open.
type callLog struct {
	mu    sync.Mutex
	calls []relecttest.Call
	stop  func()
}

func logCalls(api *relecttest.LeaseAPI) *callLog {
	l := &callLog{}
	l.stop = api.Observe(func(c relecttest.Call) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = append(l.calls, c)
	})
	return l
}

// by returns the calls each client made, by client, as "verb" strings.
func (l *callLog) by() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for _, c := range l.calls {
		out[c.Client] = append(out[c.Client], c.Verb)
	}
	return out
}

func (l *callLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// A graceful handover in a fleet of 100 costs the same few calls as in a
// fleet of 3: the leader's release, then the first successor in line — the
// highest priority — takes the lease at once, and nobody else sends
// anything but those its line names anew, which read the Lease and watch
// it: the others learn of the new holder from the line Lease they follow,
// or the election's Lease they watch.
func TestGracefulHandoverIsAFewCallsInAFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 100, nil)
		leader := cs[0]
		line := leader.e.Candidates()
		require.Len(t, line, 100, "the leader knows every registered candidate")
		require.Equal(t, 1, line[1].Successor)
		assert.Equal(t, int32(6), line[1].Priority, "the first in line has the highest priority")

		warden := lineOf(t, api).Warden
		require.NotEmpty(t, warden)
		calls := logCalls(api)
		start := time.Now()
		leader.stop() // releases
		synctest.Wait()
		next := named(cs, line[1].Identity)
		assert.True(t, next.e.IsLeader(), "the first successor leads at once")
		assert.Equal(t, start, next.eventsOf(relect.EventStartedLeading)[0].Time)
		time.Sleep(2 * rp)
		calls.stop()
		by := calls.by()
		joined := 0
		for name, verbs := range by {
			switch {
			case name == leader.name || name == next.name:
			case slices.Equal(verbs, []string{relecttest.VerbGet, relecttest.VerbWatch}):
				joined++ // named in the new leader's line: it watches the election's Lease now
			case name == warden && !slices.ContainsFunc(verbs, func(v string) bool { return v != relecttest.VerbGet }):
				// the warden's read of the election's Lease, every two retry periods
			default:
				t.Errorf("%s sent %v during the handover", name, verbs)
			}
		}
		assert.LessOrEqual(t, joined, 4, "only those the new line names join it: three successors and a keeper")
		t.Logf("handover in a fleet of 100: %d calls: %v", calls.total(), by)
		// The release, the acquisition and client-go's resumption of it, the
		// new leader's list and watch of the registry, and its post of its
		// line (a read and a write of the line Lease), among others.
		assert.LessOrEqual(t, calls.total(), 15)
		stopAll(cs[1:]...)
	})
}

// When the leader crashes, the first successor takes over when the lease
// expires; if it is dead too, the next one a succession step (half a retry
// period) later, and the one after it is not needed. The new leader then
// leaves the dead one out of the line it publishes.
func TestCrashFailoverPassesOverADeadSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 10, func(_ int, o *relect.Options) { o.KeepLeaseOnCancel = true })
		leader := cs[0]
		line := leader.e.Candidates()
		first, second := named(cs, line[1].Identity), named(cs, line[2].Identity)
		warden := lineOf(t, api).Warden
		first.client.Partition() // dead, as far as anyone can tell
		lastRenewal := api.Lease(ns, lease).Spec.RenewTime.Time
		leader.client.Partition()
		calls := logCalls(api)
		waitFor(t, ld+2*rp, "a new leader", second.e.IsLeader)
		synctest.Wait()
		on := second.eventsOf(relect.EventStartedLeading)[0].Time
		assert.Equal(t, lastRenewal.Add(ld+rp/2), on, "the second successor, one step after the expiry")
		calls.stop()
		for name, verbs := range calls.by() {
			switch name {
			case leader.name, first.name, second.name:
			case warden:
				// It reads the election's Lease every two retry periods,
				// finds it silent, and watches it until a renewal; it may
				// renew its registration (a beat, every LD).
				assert.Subset(t, []string{relecttest.VerbGet, relecttest.VerbWatch, relecttest.VerbUpdate}, verbs, "the warden")
			default:
				t.Errorf("%s sent %v during the failover", name, verbs)
			}
		}
		time.Sleep(rp) // the new leader lists the candidates
		for _, c := range second.e.Candidates() {
			if c.Identity == first.name {
				assert.Zero(t, c.Successor, "the successor that did not take its turn is passed over")
			}
		}
		leader.client.Heal()
		first.client.Heal()
		stopAll(cs...)
	})
}

// Leaders that crash one after the other stay out of every later line of
// succession, though their registrations stay until they lapse: the leader
// that took over a lease once it expired passes over its holder, and
// publishes whom it passes over, so that the leader after it leaves them
// out too. Each failover is then the first successor's, when the lease
// expires, with no dead candidate's turn before it.
func TestCrashedLeadersArePassedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		// One priority: the line is by identity, c00's first, so every
		// crashed leader would come first in the lines after it.
		cs := fleet(t, api, 8, func(_ int, o *relect.Options) {
			o.Priority = 0
			o.KeepLeaseOnCancel = true
		})
		leader := cs[0]
		var crashed []string
		for range 3 {
			synctest.Wait()
			require.True(t, leader.e.IsLeader())
			time.Sleep(rp + rp/3) // a renewal, then between renewals
			synctest.Wait()
			first := named(cs, leader.e.Candidates()[1].Identity)
			lastRenewal := api.Lease(ns, lease).Spec.RenewTime.Time
			leader.client.Partition() // crashed, as far as anyone can tell
			crashed = append(crashed, leader.name)
			waitFor(t, ld+2*rp, "a new leader", first.e.IsLeader)
			synctest.Wait()
			on := first.eventsOf(relect.EventStartedLeading)
			require.NotEmpty(t, on)
			assert.Equal(t, lastRenewal.Add(ld), on[len(on)-1].Time,
				"%s takes over when %s's lease expires: no crashed leader's turn before it", first.name, leader.name)
			time.Sleep(rp) // the new leader lists the candidates
			synctest.Wait()
			for _, c := range first.e.Candidates() {
				if slices.Contains(crashed, c.Identity) {
					assert.Zero(t, c.Successor, "%s, crashed, is out of %s's line", c.Identity, first.name)
				}
			}
			leader = first
		}
		for _, c := range cs {
			c.client.Heal()
		}
		stopAll(cs...)
	})
}

// Yield ends the term, releases the lease to the first successor, which
// leads at once, and the yielder stays a candidate: it follows the new
// leader, and leads again when it is its turn. Yield by a follower is
// ErrNotLeader.
func TestYield(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil)
		a := cs[0]
		stopMonitor := monitor(t, 10*time.Millisecond, cs...)
		assert.ErrorIs(t, cs[1].e.Yield(context.Background()), relect.ErrNotLeader)

		next := named(cs, a.e.Candidates()[1].Identity)
		require.NoError(t, a.e.Yield(context.Background()))
		synctest.Wait()
		assert.True(t, next.e.IsLeader(), "the first successor leads at once")
		assert.ErrorIs(t, a.eventsOf(relect.EventStoppedLeading)[0].Err, relect.ErrYielded)
		assert.Equal(t, 1, a.count(relect.EventReleased))
		time.Sleep(2 * ld)
		assert.Equal(t, next.name, a.e.Leader(), "the yielder follows")
		next.stop()
		waitFor(t, 2*ld, "a leader again", func() bool { return len(leaders(cs...)) == 1 })
		stopMonitor()
		next.checkEvents()
		stopAll(slices.DeleteFunc(cs, func(c *candidate) bool { return c == next })...)
	})
}

// HandOver names the successor: it leads at once, nobody else leads in
// between — not even the first in line — and the handover is an event. A
// HandOver to someone who never takes the lease lasts its bound (twice the
// retry period), then normal succession resumes. HandOver to oneself, to
// nobody, to a standby, or by a follower fails.
func TestHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 5, func(i int, o *relect.Options) { o.Standby = i == 4 })
		a := cs[0]
		stopMonitor := monitor(t, 10*time.Millisecond, cs...)
		last := named(cs, a.e.Candidates()[3].Identity) // the last in line
		assert.ErrorIs(t, last.e.HandOver(context.Background(), a.name, nil), relect.ErrNotLeader)
		assert.Error(t, a.e.HandOver(context.Background(), a.name, nil))
		assert.Error(t, a.e.HandOver(context.Background(), "", nil))
		assert.Error(t, a.e.HandOver(context.Background(), "c04", nil), "c04 stands by")

		require.NoError(t, a.e.HandOver(context.Background(), last.name, nil))
		synctest.Wait()
		assert.True(t, last.e.IsLeader(), "the named successor leads at once")
		handed := a.eventsOf(relect.EventHandedOver)
		require.Len(t, handed, 1)
		assert.Equal(t, last.name, handed[0].Leader)
		assert.ErrorIs(t, a.eventsOf(relect.EventStoppedLeading)[0].Err, relect.ErrHandedOver)

		// To a candidate that is not registered: refused, and the term
		// goes on.
		time.Sleep(ld)
		err := last.e.HandOver(context.Background(), "gone", nil)
		require.ErrorIs(t, err, relect.ErrUnknownCandidate)
		require.True(t, last.e.IsLeader(), "a refused HandOver leaves the term alone")

		// Forced, to a candidate that is gone: nobody leads for the bound,
		// then the line of succession takes over.
		from := time.Now()
		require.NoError(t, last.e.HandOver(context.Background(), "gone", &relect.HandOverOptions{Unregistered: true}))
		time.Sleep(2*rp - time.Millisecond)
		assert.Empty(t, leaders(cs...), "nobody takes a handover named to another before its bound")
		for _, c := range cs {
			assert.Empty(t, c.e.Leader(), "%s: a candidate named by a handover is no leader until it takes the lease", c.name)
		}
		synctest.Wait()
		for _, ev := range last.eventsOf(relect.EventNewLeader) {
			assert.NotEqual(t, "gone", ev.Leader, "not even for the one that handed over")
		}
		waitFor(t, rp, "normal succession", func() bool { return len(leaders(cs...)) == 1 })
		t.Logf("leader back %v after a handover to a candidate that is gone", time.Since(from))
		stopMonitor()
		stopAll(cs...)
	})
}

// HandOver names only a candidate the leader knows may lead: a typo, a
// process that is gone, a standby or, with the registry off, anyone, is
// refused with ErrUnknownCandidate, and the term goes on. Early in a term,
// before the leader has listed the registry, HandOver waits for the list.
func TestHandOverRefusesUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, func(i int, o *relect.Options) { o.Standby = i == 2 })
		a, b := cs[0], cs[1]
		for _, to := range []string{"nobody", "c02"} {
			err := a.e.HandOver(context.Background(), to, nil)
			assert.ErrorIs(t, err, relect.ErrUnknownCandidate, "%s", to)
			assert.True(t, a.e.IsLeader())
		}
		assert.ErrorIs(t, a.e.HandOver(context.Background(), "c02", &relect.HandOverOptions{Unregistered: true}), relect.ErrUnknownCandidate,
			"a standby is refused even so")

		// Right after b takes over, its view is not listed yet: the
		// HandOver back to a waits for it, then hands over.
		require.NoError(t, a.e.HandOver(context.Background(), b.name, nil))
		synctest.Wait()
		require.True(t, b.e.IsLeader())
		start := time.Now()
		require.NoError(t, b.e.HandOver(context.Background(), a.name, nil))
		assert.Greater(t, time.Since(start), rp/4, "waited for the registry's list")
		assert.Less(t, time.Since(start), rp, "no longer")
		// a follows again after its backoff wait, and takes the record
		// named to it.
		waitFor(t, 2*rp, "a leads", a.e.IsLeader)
		stopAll(cs...)
	})

	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 2, func(_ int, o *relect.Options) { o.DisableRegistry, o.Priority = true, 0 })
		a, b := cs[0], cs[1]
		assert.ErrorIs(t, a.e.HandOver(context.Background(), b.name, nil), relect.ErrUnknownCandidate, "no registry: nobody known")
		require.NoError(t, a.e.HandOver(context.Background(), b.name, &relect.HandOverOptions{Unregistered: true}))
		synctest.Wait()
		assert.True(t, b.e.IsLeader())
		stopAll(cs...)
	})
}

// A HandOver to a candidate the leader's view does not know yet reads its
// registration once before refusing: one that registered after the
// leader's list (its watch event not in) is handed over to. A refusal says
// which case it is: not registered (yet), or gone. It was refused as "not
// a live registered candidate … pass AllowUnregistered" (the option of then), advice that skips
// both registry checks, for the 1–3 s a candidate waits to register.
func TestHandOverConfirmsAnUnknownCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := blindLeader(t, api, nil)

		b := newCandidate(t, api, "b", nil)
		b.start()
		err := a.e.HandOver(context.Background(), "b", nil)
		require.ErrorIs(t, err, relect.ErrUnknownCandidate, "b has just started: not registered yet")
		assert.ErrorContains(t, err, `"b" is not registered: it has no registration`)
		assert.ErrorContains(t, err, "one that has just started is not registered yet: try again")
		time.Sleep(2 * rp) // b registers; a's view does not see it
		registered := false
		for _, l := range api.Leases(ns) {
			registered = registered || (l.Name != lease && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "b")
		}
		require.True(t, registered, "b's registration")
		for _, c := range a.e.Candidates() {
			require.NotEqual(t, "b", c.Identity, "a's view lags behind")
		}
		require.NoError(t, a.e.HandOver(context.Background(), "b", nil), "confirmed by a read of b's registration")
		waitFor(t, rp, "b leads", b.e.IsLeader)
		stopAll(a, b)
	})

	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 2, func(_ int, o *relect.Options) { o.RegistrationRenewal = time.Minute })
		a, b := cs[0], cs[1]
		b.client.Pause()            // b is stopped, its registration left behind
		time.Sleep(4 * time.Minute) // it lapses after three renewal periods
		err := a.e.HandOver(context.Background(), b.name, nil)
		require.ErrorIs(t, err, relect.ErrUnknownCandidate)
		assert.ErrorContains(t, err, fmt.Sprintf("%q is gone: its registration was not renewed for", b.name))
		b.client.Resume()
		stopAll(cs...)
	})
}

// A HandOver is asked of the term leading at the call: if that term ends
// while HandOver reads the candidate's registration (or waits for the
// registry's list), it returns ErrNotLeader, and a later term of the same
// Elector is left alone. It once handed over whichever term led when the
// read came back (the simulation's seed 3276, on a 34 s wait for spare
// tokens).
func TestHandOverIsOfOneTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		long := func(o *relect.Options) { // a call timeout of 20 s
			o.LeaseDuration, o.RenewDeadline = time.Minute, 40*time.Second
		}
		a := blindLeader(t, api, long)
		b := newCandidate(t, api, "b", long)
		b.start()
		time.Sleep(2 * rp) // b registers; a's view does not see it
		b.client.Pause()   // and b takes no lease

		a.client.SetLatency(15 * time.Second) // the read of b's registration
		handedOver := make(chan error, 1)
		go func() { handedOver <- a.e.HandOver(context.Background(), "b", nil) }()
		synctest.Wait()
		a.client.SetLatency(0)
		first, _ := a.e.Term()
		require.NoError(t, a.e.Yield(context.Background()))
		waitFor(t, 14*time.Second, "a leads again before the read returns", a.e.IsLeader)
		second, _ := a.e.Term()
		require.NotEqual(t, first, second)

		require.ErrorIs(t, <-handedOver, relect.ErrNotLeader, "the term asked ended")
		synctest.Wait()
		assert.True(t, a.e.IsLeader(), "the later term goes on")
		assert.Equal(t, "a", api.Holder(ns, lease))
		now, _ := a.e.Term()
		assert.Equal(t, second, now)
		b.client.Resume()
		stopAll(a, b)
	})
}

// A standby never campaigns: it observes and reports the leader, appears in
// the leader's candidates as standing by, and when it is the only candidate
// left, nobody leads.
func TestStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, func(i int, o *relect.Options) { o.Standby = i > 0 })
		a := cs[0]
		for _, c := range a.e.Candidates() {
			assert.Equal(t, c.Identity != a.name, c.Standby, "%s", c.Identity)
			assert.Zero(t, c.Successor, "a standby is never in line")
		}
		assert.Equal(t, a.name, cs[1].e.Leader())
		assert.ErrorIs(t, cs[1].e.Yield(context.Background()), relect.ErrNotLeader)
		a.stop()
		time.Sleep(3 * ld)
		assert.Empty(t, leaders(cs...))
		assert.Zero(t, cs[1].client.Calls(relecttest.VerbUpdate)+cs[1].client.Calls(relecttest.VerbCreate)-
			registrationWrites(api, cs[1]), "a standby never writes the Lease")
		stopAll(cs[1:]...)
		for _, c := range cs[1:] {
			assert.Zero(t, c.count(relect.EventStartedLeading))
		}
	})
}

// registrationWrites counts the writes c made to its registration: its
// Create, and one Update per renewal (none within a test of minutes).
func registrationWrites(_ *relecttest.LeaseAPI, c *candidate) int {
	return min(1, c.client.Calls(relecttest.VerbCreate))
}

// WaitForTerm returns once this candidate leads, with the term; WaitForLeader
// once anyone does; both return ctx's cause if it ends first.
func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		b := newCandidate(t, api, "b", nil)
		ctx, cancel := context.WithTimeout(context.Background(), rp)
		_, err := b.e.WaitForLeader(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "nobody runs yet")
		cancel()

		type result struct {
			term int64
			err  error
		}
		bLeads := make(chan result, 1)
		go func() {
			n, err := b.e.WaitForTerm(context.Background())
			bLeads <- result{n, err}
		}()
		a.start()
		synctest.Wait()
		b.start()
		leader, err := b.e.WaitForLeader(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "a", leader)
		n, err := a.e.WaitForTerm(context.Background())
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		time.Sleep(rp)
		a.stop()
		r := <-bLeads
		require.NoError(t, r.err)
		assert.Equal(t, int64(2), r.term)
		assert.True(t, b.e.IsLeader())
		b.stop()
	})
}

// A follower whose acquiring write loses a race (409) does not read the
// Lease again while its watch is open: the watch shows the winner. One
// whose write is shed (429) or fails (5xx) backs off and tries again,
// keeping its watch: no read, no new watch.
func TestFollowerAfterAFailedAcquisition(t *testing.T) {
	t.Run("lost race", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", noRegistry) // no line of succession: b and c race
			b := newCandidate(t, api, "b", noRegistry)
			c := newCandidate(t, api, "c", noRegistry)
			a.start()
			synctest.Wait()
			b.start()
			c.start()
			time.Sleep(ld)
			calls := logCalls(api)
			a.stop() // releases: b and c try at once, one loses
			synctest.Wait()
			time.Sleep(ld)
			calls.stop()
			winner, loser := b, c
			if c.e.IsLeader() {
				winner, loser = c, b
			}
			assert.True(t, winner.e.IsLeader())
			assert.Equal(t, []string{relecttest.VerbUpdate}, calls.by()[loser.name], "the loser's conflicting write, and nothing else")
			b.stop()
			c.stop()
		})
	})
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"throttled", relecttest.Error(429)},
		{"server error", relecttest.Error(503)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				a := newCandidate(t, api, "a", noRegistry)
				b := newCandidate(t, api, "b", noRegistry)
				a.start()
				synctest.Wait()
				b.start()
				time.Sleep(ld)
				gets, watches := b.client.Calls(relecttest.VerbGet), b.client.Calls(relecttest.VerbWatch)
				b.client.FailNext(1, tc.err)
				a.stop() // releases: b's first try fails
				waitFor(t, ld, "b leads", b.e.IsLeader)
				assert.Equal(t, watches, b.client.Calls(relecttest.VerbWatch), "the watch was kept")
				// client-go's acquire loop resumes b's write without a read:
				// the gateway answers it with the Lease b wrote.
				assert.Equal(t, gets, b.client.Calls(relecttest.VerbGet), "no read")
				b.stop()
			})
		})
	}
}

// A Lease whose spec.preferredHolder names another candidate (KEP-4355) is a
// request to hand over: the leader hands the lease over to it.
func TestPreferredHolderIsHandedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil)
		want := named(cs, cs[0].e.Candidates()[2].Identity) // second in line
		require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
			strategy := coordinationv1.OldestEmulationVersion
			l.Spec.PreferredHolder, l.Spec.Strategy = &want.name, &strategy
		}))
		synctest.Wait()
		assert.True(t, want.e.IsLeader())
		assert.Equal(t, want.name, cs[0].eventsOf(relect.EventHandedOver)[0].Leader)
		stopAll(cs...)
	})
}

// A preferredHolder that the registry shows standing by, or does not know,
// is not handed over to, as HandOver refuses it: nobody would take the
// lease. The leader leads on, and its next renewal clears the field.
func TestPreferredHolderStandingByIsIgnored(t *testing.T) {
	for _, to := range []string{"c02", "nobody"} {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			cs := fleet(t, api, 3, func(i int, o *relect.Options) { o.Standby = i == 2 })
			require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
				strategy := coordinationv1.OldestEmulationVersion
				l.Spec.PreferredHolder, l.Spec.Strategy = &to, &strategy
			}))
			synctest.Wait()
			assert.True(t, cs[0].e.IsLeader(), "%s: the leader keeps leading", to)
			assert.Empty(t, cs[0].eventsOf(relect.EventHandedOver))
			time.Sleep(rd + rp)
			assert.True(t, cs[0].e.IsLeader(), "%s: the leader keeps leading, later too", to)
			assert.Nil(t, api.Lease(ns, lease).Spec.PreferredHolder, "cleared by a renewal")
			stopAll(cs...)
		})
	}
}

// A line of succession edited by hand to name many candidates delays a
// failover no more than the three a leader writes: a follower outside it
// tries at most five succession steps after the lease expired.
func TestLongForgedLineIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 2, func(_ int, o *relect.Options) { o.KeepLeaseOnCancel = true })
		leader, follower := cs[0], cs[1]
		time.Sleep(rp / 3) // between renewals
		leader.client.Partition()
		var last time.Time
		require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
			var next []string
			for i := range 1000 {
				next = append(next, fmt.Sprintf(`{"id":"ghost-%d"}`, i))
			}
			l.Annotations["relect.io/succession"] = fmt.Sprintf(`{"term":%d,"next":[%s]}`, *l.Spec.LeaseTransitions, strings.Join(next, ","))
			last = time.Now()
		}))
		waitFor(t, ld+10*rp, "the follower to lead", follower.e.IsLeader)
		on := follower.eventsOf(relect.EventStartedLeading)[0].Time
		assert.LessOrEqual(t, on.Sub(last), ld+5*rp/2, "at most LD + 5 steps after the last change it saw")
		leader.client.Heal()
		stopAll(cs...)
	})
}

// With the registry off a candidate writes no registration and publishes no
// line of succession: followers race for a released lease, as plain
// client-go's do.
func TestRegistryOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, func(_ int, o *relect.Options) { o.DisableRegistry, o.Priority = true, 0 })
		assert.Len(t, api.Leases(ns), 1, "the election's Lease alone")
		assert.NotContains(t, api.Lease(ns, lease).Annotations, "relect.io/succession")
		known := []string{}
		for _, c := range cs[0].e.Candidates() {
			known = append(known, c.Identity)
		}
		assert.Equal(t, []string{"c00"}, known, "a leader without a registry knows only itself")
		stopAll(cs...)
	})
}

// Registrations: one per running candidate, deleted when its Run returns;
// the leader deletes those left by candidates that died long ago.
func TestRegistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil)
		assert.Len(t, api.Leases(ns), 4, "the election's Lease and three registrations")
		cs[2].stop()
		synctest.Wait()
		assert.Len(t, api.Leases(ns), 3, "deregistered on exit")

		// A candidate that died without deregistering (no API, then gone).
		cs[1].client.Partition()
		cs[1].stop()
		cs[1].client.Heal()
		names := func() []string {
			var out []string
			for _, l := range api.Leases(ns) {
				out = append(out, l.Name)
			}
			return out
		}
		require.Len(t, names(), 3)
		registration := func(identity string) *coordinationv1.Lease {
			for _, l := range api.Leases(ns) {
				if l.Name != lease && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == identity {
					return l
				}
			}
			return nil
		}
		// A new process with the same identity takes the leftover over.
		left := registration(cs[1].name)
		require.NotNil(t, left)
		again := newCandidate(t, api, cs[1].name, nil)
		again.start()
		time.Sleep(2 * rp)
		now := registration(cs[1].name)
		require.NotNil(t, now)
		assert.True(t, now.Spec.RenewTime.After(left.Spec.RenewTime.Time), "renewed by the new process")
		again.client.Partition() // and dies without deregistering, too
		again.stop()
		again.client.Heal()
		require.Len(t, names(), 3)
		// Lapsed: three renewal periods; deleted once the leader has seen
		// it unchanged for twice that long, on its own clock (a sweep
		// every renewal period, and each listing: a new term).
		time.Sleep(7*defaults.RegistrationRenewal + time.Minute)
		synctest.Wait()
		assert.Len(t, names(), 2, "deleted by the leader's sweep, within its term: %v", names())
		require.NoError(t, cs[0].e.Yield(context.Background()))
		waitFor(t, 2*ld, "a leader again", cs[0].e.IsLeader)
		time.Sleep(2 * ld) // its view of the registry: listed once the bucket has tokens to spare
		assert.True(t, slices.Contains(names(), lease))
		assert.Len(t, names(), 2, "the dead one's registration was deleted: %v", names())
		stopAll(cs[0])
	})
}

// The leader's watch on the registry, when the server closes it, is
// resumed: a candidate that registers afterwards still joins the leader's
// view, without a new listing.
func TestRegistryWatchResumesAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 2, nil)
		lists := cs[0].client.Calls(relecttest.VerbList)
		api.CloseWatches()
		synctest.Wait()
		late := newCandidate(t, api, "late", nil)
		late.start()
		time.Sleep(2 * rp) // it registers within 1.5 RetryPeriods
		synctest.Wait()
		var known []string
		for _, c := range cs[0].e.Candidates() {
			known = append(known, c.Identity)
		}
		assert.Contains(t, known, "late")
		assert.Equal(t, lists, cs[0].client.Calls(relecttest.VerbList), "resumed, not listed again")
		stopAll(append(cs, late)...)
	})
}

// The registry works with the smallest bucket New accepts (RateBurst 4):
// registry calls then wait for a full bucket instead of never being sent.
func TestRegistryWithTheSmallestBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, func(_ int, o *relect.Options) { o.RateBurst = 4 })
		time.Sleep(ld)
		assert.Len(t, api.Leases(ns), 4, "the election's Lease and three registrations")
		assert.Len(t, cs[0].e.Candidates(), 3, "the leader lists them")
		stopAll(cs...)
	})
}

// A registration deleted by hand (or by a leader that judged it lapsed
// while its candidate was cut off) is created again at the candidate's
// next renewal, and the leader's view picks it up: the candidate is back
// in the lines of succession with its priority.
func TestDeletedRegistrationIsCreatedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil) // c02 has the highest priority
		leader, c := cs[0], named(cs, "c02")
		inLine := func() bool { return leader.e.Candidates()[1].Identity == c.name }
		require.True(t, inLine(), "c02 first in line: %v", leader.e.Candidates())

		var name string
		for _, l := range api.Leases(ns) {
			if l.Name != lease && *l.Spec.HolderIdentity == c.name {
				name = l.Name
			}
		}
		require.NoError(t, api.Delete(ns, name))
		synctest.Wait()
		assert.False(t, inLine(), "gone from the leader's view with its registration")

		time.Sleep(defaults.RegistrationRenewal * 11 / 10) // its next renewal, at most
		synctest.Wait()
		assert.NotNil(t, api.Lease(ns, name), "registered again")
		assert.True(t, inLine(), "back in line: %v", leader.e.Candidates())
		stopAll(cs...)
	})
}

// A Yield or HandOver whose write fails ends the term all the same, and the
// lease then expires as after a crash: the candidate that yielded does not
// resume its last renewal (it is a record it gave up), so the first in line
// — or the named successor, which does not know it was named — takes the
// lease over once it expires, with a new term.
func TestFailedStepDownIsNotResumed(t *testing.T) {
	for _, how := range []string{"yield", "handover"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				cs := fleet(t, api, 3, nil)
				a := cs[0]
				stopMonitor := monitor(t, 10*time.Millisecond, cs...)
				term, _ := a.e.Term()
				next := named(cs, a.e.Candidates()[1].Identity)

				a.client.FailNext(1, relecttest.Error(500))
				var err error
				if how == "yield" {
					err = a.e.Yield(context.Background())
				} else {
					err = a.e.HandOver(context.Background(), cs[2].name, nil)
				}
				require.Error(t, err)
				assert.False(t, a.e.IsLeader())
				failed := time.Now()

				waitFor(t, 2*ld, "a new leader", func() bool { return len(leaders(cs...)) == 1 })
				assert.Equal(t, []string{next.name}, leaders(cs...), "the first in line takes the expired lease")
				assert.Greater(t, time.Since(failed), rd, "not before the lease expired")
				assert.Zero(t, a.count(relect.EventReleased)+a.count(relect.EventHandedOver))
				assert.Equal(t, 1, a.count(relect.EventStartedLeading), "the yielder did not lead again")
				n, _ := next.e.Term()
				assert.Greater(t, n, term, "a new term")
				stopMonitor()
				stopAll(cs...)
				for _, c := range cs {
					c.checkEvents()
				}
			})
		})
	}
}

// A registration is judged lapsed on the leader's clock only: how long it
// has seen the registration unchanged. A candidate whose clock lags stamps
// its registration with a renew time long past; the leader does not
// compare it with its own clock, and keeps the candidate in line.
func TestLaggingClockKeepsItsRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil) // c02 has the highest priority
		c := named(cs, "c02")
		var name string
		for _, l := range api.Leases(ns) {
			if l.Name != lease && *l.Spec.HolderIdentity == c.name {
				name = l.Name
			}
		}
		// As if c02's clock were a day behind when it last renewed.
		require.NoError(t, api.Edit(ns, name, func(l *coordinationv1.Lease) {
			past := metav1.NewMicroTime(time.Now().Add(-24 * time.Hour))
			l.Spec.RenewTime, l.Spec.AcquireTime = &past, &past
		}))
		// A new leader lists the registry (and so would delete lapsed
		// registrations): c00 yields to the first in line, c02.
		require.NoError(t, cs[0].e.Yield(context.Background()))
		waitFor(t, ld, "c02 leads", c.e.IsLeader)
		require.NoError(t, c.e.Yield(context.Background()))
		waitFor(t, ld, "another leader", func() bool { l := leaders(cs...); return len(l) == 1 && l[0] != c.name })
		time.Sleep(2 * ld)
		synctest.Wait()
		assert.NotNil(t, api.Lease(ns, name), "c02's registration was not deleted")
		leader := named(cs, leaders(cs...)[0])
		assert.Equal(t, c.name, leader.e.Candidates()[1].Identity, "c02 first in line: %v", leader.e.Candidates())
		stopAll(cs...)
	})
}

// A follower knows the leader's priority from the line of succession the
// leader publishes, as Candidate's doc says — also a negative one.
func TestFollowerKnowsTheLeadersPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, func(i int, o *relect.Options) { o.Priority = int32(i - 1) }) // the leader, c00: −1
		for _, c := range cs[1:] {
			var got []int32
			for _, k := range c.e.Candidates() {
				got = append(got, k.Priority)
				if k.Leader {
					assert.Equal(t, int32(-1), k.Priority, "%s: the leader's priority", c.name)
				}
			}
			assert.Len(t, got, 3, "%s knows the leader, its line and itself", c.name)
		}
		stopAll(cs...)
	})
}

// A standby with the registry off still follows and never writes the
// Lease; leaders do not know it, so a HandOver to it is refused as unknown.
func TestStandbyWithoutTheRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		synctest.Wait()
		s := newCandidate(t, api, "s", func(o *relect.Options) { o.Standby, o.DisableRegistry = true, true })
		s.start()
		time.Sleep(2 * ld)
		synctest.Wait()
		assert.Equal(t, "a", s.e.Leader())
		assert.Zero(t, s.client.Calls(relecttest.VerbUpdate)+s.client.Calls(relecttest.VerbCreate), "a standby without the registry writes nothing")
		assert.ErrorIs(t, a.e.HandOver(context.Background(), "s", nil), relect.ErrUnknownCandidate)
		stopAll(a, s)
	})
}

// A chain of leaders each stopped before it lists the registry (100 ms
// into its term) keeps a line of succession: each passes on the line it
// took over with the leader it took over from behind it, so followers
// never race for the lease (no lost race, no conflicting write).
func TestLineSurvivesAChainOfShortTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 5, nil)
		stop := monitor(t, 10*time.Millisecond, cs...)
		conflicts := func() (n uint64) {
			for _, c := range cs {
				for k, v := range c.e.Stats().Calls {
					if k.Result == "conflict" && (k.Verb == "update" || k.Verb == "create") {
						n += v
					}
				}
			}
			return n
		}
		before := conflicts()
		for range 8 {
			l := leaders(cs...)
			require.Len(t, l, 1)
			require.NoError(t, named(cs, l[0]).e.Yield(context.Background()))
			waitFor(t, ld, "a new leader", func() bool { return len(leaders(cs...)) == 1 })
			assert.Contains(t, api.Lease(ns, lease).Annotations, "relect.io/succession", "a line is published")
			time.Sleep(100 * time.Millisecond)
		}
		assert.Equal(t, before, conflicts(), "no follower raced for the lease")
		stop()
		stopAll(cs...)
	})
}
