package relect_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/bubble"
	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Followers watch the one Lease — or, outside the line of succession, the
// line Lease, which changes only with the leader or its line: in steady
// state they send no requests at all (client-go's followers GET every
// RetryPeriod to 2.2 × RetryPeriod), but for renewing their registration
// every 15 minutes. In a fleet of 12, only the leader, its three successors
// and its keeper watch the election's Lease.
func TestFollowersSendNoRequestsInSteadyState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		leader := newCandidate(t, api, "leader", nil)
		leader.start()
		synctest.Wait()
		var followers []*candidate
		for i := range 11 {
			name := fmt.Sprintf("f%02d", i+1)
			f := newCandidate(t, api, name, nil)
			f.start()
			followers = append(followers, f)
		}
		synctest.Wait()
		for _, f := range followers {
			assert.Equal(t, 1, f.client.Calls(relecttest.VerbGet), "%s: one read", f.name)
			assert.Equal(t, 1, f.client.Calls(relecttest.VerbWatch), "%s: one watch", f.name)
		}
		// Each registers a retry period in; the leader names four of them
		// at its next renewal and posts its line; the other seven follow it.
		// (A follower that found the line not posted yet tries again after
		// a retry period, then two.)
		time.Sleep(6 * rp)
		assert.Equal(t, 5, api.Watchers(ns, lease), "the leader, three successors and a keeper watch the election's Lease")
		assert.Equal(t, 7, api.Watchers(ns, wire.LineName(lease)), "the others follow the line Lease")
		before := map[string]int{}
		for _, f := range followers {
			before[f.name] = f.client.TotalCalls()
		}
		var renewals, posts atomic.Int32
		stop := api.Observe(func(c relecttest.Call) {
			switch {
			case c.Client != leader.name || c.Verb != relecttest.VerbUpdate:
			case c.Name == lease:
				renewals.Add(1)
			case c.Name == wire.LineName(lease):
				posts.Add(1)
			}
		})
		time.Sleep(10*time.Minute + rp/2)
		stop()
		warden := wire.SuccessionOf(api.Lease(ns, lease)).Warden
		require.NotEmpty(t, warden, "the line names a warden")
		for _, f := range followers {
			if f.name == warden {
				// It reads the election's Lease every two retry periods,
				// renews its registration at the first read a beat (LD)
				// after the last — every 16 s at LD 15 s and RP 2 s — and
				// sends nothing else.
				reads, beats := int(10*time.Minute/(2*rp)), int(10*time.Minute/(16*time.Second))
				assert.InDelta(t, reads+beats, f.client.TotalCalls()-before[f.name], 1, "the warden: %d reads and %d beats", reads, beats)
			} else {
				assert.Equal(t, before[f.name], f.client.TotalCalls(), "%s: no request in 10 minutes", f.name)
			}
			assert.Equal(t, "leader", f.e.Leader(), "the watch keeps Leader current")
		}
		assert.InDelta(t, int(10*time.Minute/rp), renewals.Load(), 1, "the leader keeps client-go's renewal cadence")
		assert.Equal(t, int32(2), posts.Load(), "the line Lease, unchanged, is written every 5 minutes")
		for _, c := range append(followers, leader) {
			c.stop()
			c.checkEvents()
		}
	})
}

// A released lease is acquired the moment the release is seen, not at the
// next poll.
func TestReleasedLeaseAcquiredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		b := newCandidate(t, api, "b", nil)
		a.start()
		synctest.Wait()
		b.start()
		time.Sleep(ld + 300*time.Millisecond) // between a's renewals
		a.stop()                              // releases
		synctest.Wait()
		assert.True(t, b.e.IsLeader(), "b leads in the same instant")
		term, _ := b.e.Term()
		assert.Equal(t, int64(2), term, "a's term was 1")
		b.stop()
		b.checkEvents()
	})
}

// A leader that goes silent (crash: no release) is taken over exactly one
// LeaseDuration after its last renewal was seen.
func TestSilentLeaderTakenOverAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) { o.KeepLeaseOnCancel = true })
		b := newCandidate(t, api, "b", nil)
		a.start()
		synctest.Wait()
		b.start()
		time.Sleep(ld + 300*time.Millisecond)
		lastRenewal := api.Lease(ns, lease).Spec.RenewTime.Time
		a.stop() // a crash, as far as the Lease can tell
		waitFor(t, 2*ld, "b leads", b.e.IsLeader)
		synctest.Wait() // let the event reader catch up
		require.NotEmpty(t, b.eventsOf(relect.EventStartedLeading))
		assert.Equal(t, lastRenewal.Add(ld), b.eventsOf(relect.EventStartedLeading)[0].Time)
		b.stop()
	})
}

// A watch the server closes is resumed from the last resourceVersion, with
// no read; a 410 Gone starts over with one.
func TestWatchResumedAfterServerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		b := newCandidate(t, api, "b", noRegistry) // it counts the Lease's reads and watches
		a.start()
		synctest.Wait()
		b.start()
		synctest.Wait()
		for range 3 {
			api.CloseWatches()
			time.Sleep(rp)
		}
		assert.Equal(t, 1, b.client.Calls(relecttest.VerbGet))
		assert.Equal(t, 4, b.client.Calls(relecttest.VerbWatch))
		a.stop()
		synctest.Wait()
		assert.True(t, b.e.IsLeader(), "the resumed watch saw the release")
		b.stop()
	})
}

// A candidate whose RBAC lacks "watch" on leases falls back to client-go's
// polling, with an error event saying so.
func TestWatchForbiddenFallsBackToPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		b := newCandidate(t, api, "b", nil)
		b.client.FailVerb(relecttest.VerbWatch, relecttest.Error(403))
		a.start()
		synctest.Wait()
		b.start()
		time.Sleep(time.Minute)
		gets := b.client.Calls(relecttest.VerbGet)
		assert.GreaterOrEqual(t, gets, int(time.Minute/(rp*22/10)), "b polls")
		assert.Equal(t, 1, b.client.Calls(relecttest.VerbWatch), "and does not try to watch again")
		a.stop()
		waitFor(t, 3*rp, "b takes over by polling", b.e.IsLeader)
		b.stop()
		var said bool
		for _, ev := range b.eventsOf(relect.EventError) {
			said = said || ev.Err.Error() == "relect: not allowed to watch the Lease; polling instead"
		}
		require.True(t, said)
		b.checkEvents()
	})
}

// Many followers race for a released lease: exactly one wins, the others
// go back to watching, and none exceeds its bucket.
func TestFollowersRaceForReleasedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var cs []*candidate
		for _, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			c := newCandidate(t, api, name, nil)
			c.start()
			synctest.Wait()
			cs = append(cs, c)
		}
		stop := monitor(t, time.Millisecond, cs...)
		for round := range 10 {
			l := leaders(cs...)
			require.Len(t, l, 1, "round %d", round)
			var current *candidate
			for _, c := range cs {
				if c.name == l[0] {
					current = c
				}
			}
			current.stop()
			synctest.Wait()
			require.Len(t, leaders(cs...), 1, "round %d: a follower took over at once", round)
			current.start()
			time.Sleep(ld)
		}
		stop()
		for _, c := range cs {
			c.stop()
			c.checkEvents()
		}
		_ = ctx
	})
}

// A Lease deleted, or its holder emptied, by hand while held is a
// revocation the holder learns of only at its next renewal: followers wait
// it out like a silent holder's instead of taking it at once (a release
// writes a lease duration of 1 s; these edits do not). Never do two lead at
// once.
func TestRevokedByHandIsWaitedOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(api *relecttest.LeaseAPI) error
	}{
		{"deleted", func(api *relecttest.LeaseAPI) error { return api.Delete(ns, lease) }},
		{"holder emptied", func(api *relecttest.LeaseAPI) error { return api.SetHolder(ns, lease, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				a := newCandidate(t, api, "a", nil)
				b := newCandidate(t, api, "b", nil)
				a.start()
				synctest.Wait()
				b.start()
				stop := monitor(t, time.Millisecond, a, b)
				time.Sleep(ld + 300*time.Millisecond)
				edited := time.Now()
				require.NoError(t, tc.edit(api))
				waitFor(t, rp, "a notices at its next renewal", func() bool { return !a.e.IsLeader() })
				waitFor(t, 3*ld, "a leader again", func() bool { return len(leaders(a, b)) == 1 })
				time.Sleep(2 * ld)
				stop()
				synctest.Wait()
				for _, ev := range b.eventsOf(relect.EventStartedLeading) {
					assert.False(t, ev.Time.Before(edited.Add(ld)), "b took the revoked lease before it could have expired")
				}
				a.stop()
				b.stop()
				a.checkEvents()
				b.checkEvents()
			})
		})
	}
}

// A leaseTransitions at the int32 limit (a valid stored value) saturates
// instead of wrapping to a negative value the apiserver would reject, which
// would wedge the election.
func TestTransitionsSaturateAtMaxInt32(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		putLease(api, "ghost", int32(ld/time.Second), math.MaxInt32)
		b := newCandidate(t, api, "b", nil)
		c := newCandidate(t, api, "c", nil)
		b.start()
		waitFor(t, 2*ld, "b takes the ghost's lease over", b.e.IsLeader)
		c.start()
		synctest.Wait()
		b.stop() // releases; c takes over
		waitFor(t, 2*rp, "c leads", c.e.IsLeader)
		term, _ := c.e.Term()
		assert.Equal(t, int64(math.MaxInt32), term)
		c.stop()
		assert.Zero(t, c.count(relect.EventError), "no write was rejected")
	})
}

// A huge backoff cap never yields a negative wait (cenkalti/backoff's jitter
// overflows there); the wait is capped at BackoffMax.
func TestHugeBackoffNeverNegative(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", func(o *relect.Options) {
				o.BackoffInitial, o.BackoffMax = 250*365*24*time.Hour, math.MaxInt64
				o.OnStartedLeading = func(context.Context) {} // a short term, then a wait
			})
			a.start()
			waitFor(t, time.Minute, "a backoff wait", func() bool { return a.count(relect.EventBackoff) > 0 })
			assert.Greater(t, a.eventsOf(relect.EventBackoff)[0].Delay, time.Duration(0))
			a.stop()
		})
	}
}

// A missing Lease is created LeaseDuration after it was first found
// missing, not at once: the first candidate cannot tell a Lease that never
// existed from one deleted a moment ago whose holder has not noticed yet.
// Watching followers wait on their expiry timer; polling ones (no watch
// permission) are refused the Create by the lock until then.
func TestMissingLeaseCreatedAfterLeaseDuration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*relecttest.Client)
		late  time.Duration // how late the creation may come
	}{
		{"watching", func(*relecttest.Client) {}, 0},
		{"polling", func(c *relecttest.Client) { c.FailVerb(relecttest.VerbWatch, relecttest.Error(403)) }, 2*rp + rp/5 + 10*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := relecttest.NewLeaseAPI()
				a := newCandidate(t, api, "a", noRegistry) // it counts the Lease's Creates
				tc.setup(a.client)
				start := time.Now()
				a.start()
				time.Sleep(ld - time.Nanosecond)
				synctest.Wait()
				assert.Nil(t, api.Lease(ns, lease), "not created before LeaseDuration")
				assert.False(t, a.e.IsLeader())
				assert.Zero(t, a.client.Calls(relecttest.VerbCreate), "no Create sent early")
				waitFor(t, tc.late+time.Nanosecond, "a leads", a.e.IsLeader)
				assert.GreaterOrEqual(t, time.Since(start), ld)
				term, _ := a.e.Term()
				assert.Equal(t, int64(0), term, "a Lease a never saw starts the count at 0")
				a.stop()
				a.checkEvents()
			})
		})
	}
}

// Term numbers keep growing across a deletion by hand: the candidate that
// creates the Lease again continues from the highest leaseTransitions it
// saw, so fencing tokens stay monotonic.
func TestTermsGrowAcrossDeletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		putLease(api, "ghost", int32(ld/time.Second), 41)
		a := newCandidate(t, api, "a", nil)
		a.start()
		waitFor(t, 2*ld, "a takes the ghost's lease over", a.e.IsLeader)
		term, _ := a.e.Term()
		require.Equal(t, int64(42), term)
		require.NoError(t, api.Delete(ns, lease))
		waitFor(t, rp, "a steps down", func() bool { return !a.e.IsLeader() })
		waitFor(t, ld+3*rp, "a leads again", a.e.IsLeader)
		term, _ = a.e.Term()
		assert.Equal(t, int64(43), term)
		a.stop()
		a.checkEvents()
	})
}

// The creation wait counts only time spent watching the Lease missing,
// without a gap: a Run stopped and started again, or a watch that failed for
// a while, starts it over — a Lease created and deleted again meanwhile
// would have gone unseen. (Found by the simulation, seed 13373: a restarted
// Run created the Lease at once on an absence seen long before.)
func TestMissingLeaseWaitStartsOverAfterAGap(t *testing.T) {
	t.Run("Run restarted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			a := newCandidate(t, api, "a", nil)
			a.start()
			time.Sleep(ld / 2)
			a.stop()
			time.Sleep(ld)
			a.start() // the same Elector
			time.Sleep(ld - time.Nanosecond)
			synctest.Wait()
			assert.Nil(t, api.Lease(ns, lease), "not created before LeaseDuration of this Run")
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			assert.True(t, a.e.IsLeader())
			a.stop()
		})
	})
	t.Run("watch failing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			a := newCandidate(t, api, "a", nil)
			a.client.FailVerb(relecttest.VerbWatch, relecttest.Error(500))
			a.start()
			time.Sleep(2 * ld)
			synctest.Wait()
			assert.Nil(t, api.Lease(ns, lease), "never watched missing: not created")
			a.client.Heal()
			healed := time.Now()
			// The next try comes within BackoffMax (LeaseDuration) of
			// the recovery; the wait counts from the watch it opens.
			waitFor(t, 2*ld+10*time.Millisecond, "a leads", a.e.IsLeader)
			assert.GreaterOrEqual(t, time.Since(healed), ld, "LeaseDuration from the first watch that opened")
			a.stop()
		})
	})
}

// A follower whose calls fail backs off — RetryPeriod, doubling, capped at
// BackoffMax (default LeaseDuration) — instead of polling the failing API
// every RetryPeriod as client-go does; once the API answers again it reads
// the Lease within BackoffMax, and takes it over LeaseDuration later.
func TestFollowerBacksOffWhileTheAPIFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLease(api, "ghost", int32(ld/time.Second), 0) // held by nobody alive
		a := newCandidate(t, api, "a", nil)
		a.client.Fail(relecttest.Error(500))
		a.start()
		const span = 10 * time.Minute
		time.Sleep(span)
		synctest.Wait()
		calls := a.client.TotalCalls()
		// Waits of RP, 2RP, 4RP, then LD with ±50 % jitter (clamped): at
		// least LD/2 apart once capped.
		assert.LessOrEqual(t, calls, 4+int(span/(ld/2)), "at most one call per LeaseDuration/2 once backed off")
		assert.GreaterOrEqual(t, calls, int(span/ld), "it keeps trying, at least once per LeaseDuration")
		t.Logf("%d calls in %v while every call failed (client-go: one per %v–%v)", calls, span, rp, 2*rp+rp/5)

		a.client.Heal()
		waitFor(t, ld, "a reads the Lease within BackoffMax of the recovery", func() bool { return a.e.Leader() == "ghost" })
		// Its first observation of the ghost's record starts the expiry.
		waitFor(t, ld+10*time.Millisecond, "a takes the expired lease over", a.e.IsLeader)
		a.stop()
	})
}

// A follower whose acquiring writes fail while reads and watches work backs
// off too: each try costs a read and a write.
func TestFollowerBacksOffWhileWritesFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI() // released: the follower tries to acquire at once
		a := newCandidate(t, api, "a", nil)
		a.client.FailVerb(relecttest.VerbUpdate, relecttest.Error(500))
		a.start()
		const span = 10 * time.Minute
		time.Sleep(span)
		synctest.Wait()
		tries := a.client.Calls(relecttest.VerbUpdate)
		assert.LessOrEqual(t, tries, 4+int(span/(ld/2)), "at most one try per LeaseDuration/2 once backed off")
		assert.GreaterOrEqual(t, tries, int(span/ld), "it keeps trying")
		t.Logf("%d acquiring writes, %d calls in all, in %v", tries, a.client.TotalCalls(), span)
		a.client.Heal()
		waitFor(t, ld+10*time.Millisecond, "a leads once writes work", a.e.IsLeader)
		a.stop()
	})
}

// Two candidates that start together on a free Lease race for it: one
// write wins, the other is refused (409). A lost race is how election
// works, not an API failure: no EventError, not degraded, and the loser
// follows the winner.
func TestLostRaceIsNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a, b := newCandidate(t, api, "a", nil), newCandidate(t, api, "b", nil)
		// Every call takes 10 ms: both send their acquiring writes before
		// either is applied.
		a.client.SetLatency(10 * time.Millisecond)
		b.client.SetLatency(10 * time.Millisecond)
		a.start()
		b.start()
		time.Sleep(rp)
		synctest.Wait()
		require.True(t, a.e.IsLeader() != b.e.IsLeader(), "one leads")
		conflicts := uint64(0)
		for _, c := range []*candidate{a, b} {
			for k, n := range c.e.Stats().Calls {
				if k.Result == "conflict" {
					conflicts += n
				}
			}
			assert.Empty(t, c.eventsOf(relect.EventError), "%s", c.name)
			assert.False(t, c.e.Stats().Degraded)
		}
		assert.Equal(t, uint64(1), conflicts, "the loser's write was refused")
		stopAll(a, b)
	})
}

// An idle follower costs no goroutine besides the caller's own Run
// goroutine and its watch (the fake's pump here; client-go's reader and
// net/http's stream on a real apiserver): its registration's renewals run
// on timers, and the log queue and the OnNewLeader notifier run a
// goroutine only while they have work.
func TestIdleFollowerGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		time.Sleep(ld)
		synctest.Wait()
		before := bubble.Goroutines() // the bubble's own, not the process's
		b := newCandidate(t, api, "b", nil)
		b.start() // the harness: Run's goroutine and an Events reader
		time.Sleep(ld)
		synctest.Wait()
		own := bubble.Goroutines() - before - 2 - 1 // the harness's two, the fake watch's pump
		t.Logf("an idle follower's own goroutines: %d", own)
		assert.Zero(t, own, "none of relect's own")
		// ... and it is registered all the same, and renews on time.
		reg := api.Lease(ns, wire.RegistrationName(lease, "b"))
		require.NotNil(t, reg, "b's registration")
		time.Sleep(defaults.RegistrationRenewal * 11 / 10)
		renewed := api.Lease(ns, wire.RegistrationName(lease, "b"))
		require.NotNil(t, renewed)
		assert.NotEqual(t, reg.ResourceVersion, renewed.ResourceVersion, "renewed within RegistrationRenewal + 10 %")
		synctest.Wait()
		assert.Zero(t, bubble.Goroutines()-before-2-1, "none left after the renewal")
		stopAll(a, b)
	})
}

// TestFollowAnOldLease: a Lease left unchanged for longer than the
// apiserver's watch cache keeps (75 s, with other Leases changing
// meanwhile) has a resourceVersion no watch can resume from: 410 Gone. A
// follower that read it lists it alone for a current version, watches
// from there, and takes the lease when it expires — LeaseDuration after
// its read, as any other — instead of reading and failing to watch again
// under a growing backoff, blind, and taking it late (a shard given to it
// was moved away again: the leader gives LD + 2 RP).
func TestFollowAnOldLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLease(api, "gone", int32(ld/time.Second), 3)
		for range 200 { // other writes, so that the Lease's version ages out
			api.PutReleased(ns, "noise")
			time.Sleep(500 * time.Millisecond)
		}
		c := newCandidate(t, api, "c00", noRegistry)
		start := time.Now()
		c.start()
		took := until(t, 3*ld, "c00 leads", c.e.IsLeader)
		t.Logf("took the old Lease %v after its start; %d gets, %d lists, %d watches", took,
			c.client.Calls(relecttest.VerbGet), c.client.Calls(relecttest.VerbList), c.client.Calls(relecttest.VerbWatch))
		assert.LessOrEqual(t, took, ld+time.Second, "taken when it expired, LeaseDuration after the read at %v", start)
		assert.Equal(t, 1, c.client.Calls(relecttest.VerbList), "one list, for a version to watch from")
		c.stop()
	})
}

// TestFollowAnOldLineLease: the line Lease is written every 5 minutes; in
// a busy cluster its own resourceVersion soon ages out of the apiserver's
// watch cache (75 s), and a watch from it fails with 410 Gone. A newcomer
// outside the line lists the line Lease alone for a current version and
// watches it from there, as the others do — not a loop of reads of both
// Leases and failed watches.
func TestFollowAnOldLineLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 12, nil)
		time.Sleep(6 * rp)
		require.Equal(t, 7, api.Watchers(ns, wire.LineName(lease)), "the others follow the line Lease")
		for range 400 { // other writes, so that the line Lease's version ages out
			api.PutReleased(ns, "noise")
			time.Sleep(250 * time.Millisecond)
		}
		n := newCandidate(t, api, "newcomer", func(o *relect.Options) { o.Priority = 0 })
		n.start()
		time.Sleep(4 * rp)
		synctest.Wait()
		t.Logf("newcomer: %d gets, %d lists, %d watches, %d calls in all", n.client.Calls(relecttest.VerbGet),
			n.client.Calls(relecttest.VerbList), n.client.Calls(relecttest.VerbWatch), n.client.TotalCalls())
		assert.Equal(t, 8, api.Watchers(ns, wire.LineName(lease)), "the newcomer follows the line Lease too")
		assert.LessOrEqual(t, n.client.TotalCalls(), 12, "a handful of calls to join")
		stopAll(append(cs, n)...)
	})
}

// TestFollowAnOldLeaseWithoutList: without RBAC for list (allowed with
// DisableRegistry), the follower of an old Lease reads it with Gets as
// before, and still takes it once it expired.
func TestFollowAnOldLeaseWithoutList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLease(api, "gone", int32(ld/time.Second), 3)
		for range 200 {
			api.PutReleased(ns, "noise")
			time.Sleep(500 * time.Millisecond)
		}
		c := newCandidate(t, api, "c00", noRegistry)
		c.client.FailVerb(relecttest.VerbList, relecttest.Error(403))
		c.start()
		took := until(t, 4*ld, "c00 leads", c.e.IsLeader)
		t.Logf("took the old Lease %v after its start, list refused; %d gets, %d watches", took,
			c.client.Calls(relecttest.VerbGet), c.client.Calls(relecttest.VerbWatch))
		assert.Equal(t, 1, c.client.Calls(relecttest.VerbList), "one list, refused, not tried again")
		c.stop()
	})
}
