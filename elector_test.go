package relect_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// The defaults: LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s.
const (
	ld = defaults.LeaseDuration
	rd = defaults.RenewDeadline
	rp = defaults.RetryPeriod
)

// The elastic-agent PR #4542 scenario, with two candidates on one Lease.
// The Lease holder is edited by hand to the other candidate, several times:
// the ousted leader steps down at its next renewal, keeps campaigning, and a
// leader is back within LeaseDuration + 2.2 RetryPeriod (relect does not
// resume a record it did not write, so the named candidate takes it only
// once it expires, and the ousted one may win it back). Then each leader in
// turn is cut off for longer than the renew deadline: it steps down, the
// other takes over, and after healing the first re-acquires the next time
// round, within the same Run. Never do both lead at once.
func TestHandEditedHolderEachReacquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		b := newCandidate(t, api, "b", nil)
		a.start()
		synctest.Wait()
		require.True(t, a.e.IsLeader(), "the first candidate acquires at once")
		b.start()
		stopMonitor := monitor(t, 10*time.Millisecond, a, b)
		current := func() (leader, other *candidate) {
			if a.e.IsLeader() {
				return a, b
			}
			return b, a
		}

		for round := range 6 {
			from, to := current()
			require.True(t, from.e.IsLeader(), "round %d", round)
			require.NoError(t, api.SetHolder(ns, lease, to.name))
			time.Sleep(rp)
			synctest.Wait()
			assert.False(t, from.e.IsLeader(), "round %d: the ousted leader stepped down at its next renewal", round)
			waitFor(t, ld+3*rp, "a leader again", func() bool { return len(leaders(a, b)) == 1 })
			time.Sleep(2 * ld) // a stable term, so backoff stays short
			now, _ := current()
			assert.Equal(t, now.name, from.e.Leader(), "round %d: the ousted leader campaigns (follows the Lease)", round)
		}

		for round := range 4 {
			from, to := current()
			from.client.Partition()
			waitFor(t, rd+rp, "the cut-off leader steps down", func() bool { return !from.e.IsLeader() })
			waitFor(t, ld+3*rp, "the other takes over", to.e.IsLeader)
			from.client.Heal()
			time.Sleep(2 * ld)
			require.True(t, to.e.IsLeader(), "round %d", round)
		}
		stopMonitor()
		a.stop()
		b.stop()
		a.checkEvents()
		b.checkEvents()
		assert.GreaterOrEqual(t, a.count(relect.EventStartedLeading), 3, "a re-acquired after losing")
		assert.GreaterOrEqual(t, b.count(relect.EventStartedLeading), 2, "b re-acquired after losing")
	})
}

// A Lease that names a candidate it did not write (a hand edit, or a
// previous process with the same identity) is taken over only once it
// expires, with a new term number, rather than resumed at once as client-go
// would: whoever wrote it may still act as leader until it notices.
func TestLeaseNamingUsNotWrittenByUsWaitsForExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		putLease(api, "b", int32(ld/time.Second), 7)
		b := newCandidate(t, api, "b", nil)
		started := time.Now()
		b.start()
		waitFor(t, 2*ld, "b leads", b.e.IsLeader)
		assert.GreaterOrEqual(t, time.Since(started), ld, "b took over before the record expired")
		assert.Equal(t, "b", b.e.Leader())
		term, _ := b.e.Term()
		assert.Equal(t, int64(8), term, "a takeover is a new term")
		b.stop()
		b.checkEvents()
	})
}

// Renewals fail for longer than the renew deadline: leadership is lost at
// t_send + RenewDeadline exactly, another candidate takes over after the
// lease expires, and once the API answers again the first campaigns and
// re-acquires when the other goes away.
func TestRenewalFailuresLoseThenCampaignResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		rec := newRecordingLock(api, "a")
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name, o.Identity = nil, "", "", ""
			o.Lock = rec
		})
		b := newCandidate(t, api, "b", nil)
		a.start()
		synctest.Wait()
		b.start()
		stopMonitor := monitor(t, 10*time.Millisecond, a, b)
		time.Sleep(ld + rp/4) // between renewals, which come at whole multiples of rp
		require.True(t, a.e.IsLeader())

		api.Client("a").Fail(relecttest.Error(500))
		last := rec.lastSend()
		time.Sleep(time.Until(last.Add(rd)) - time.Nanosecond)
		assert.True(t, a.e.IsLeader(), "still valid 1 ns before t_send + RenewDeadline")
		time.Sleep(time.Nanosecond)
		assert.False(t, a.e.IsLeader(), "not valid at t_send + RenewDeadline")
		synctest.Wait()
		assert.False(t, a.isWorking(), "the term's work returned")
		stopped := a.eventsOf(relect.EventStoppedLeading)
		require.Len(t, stopped, 1)
		assert.ErrorIs(t, stopped[0].Err, relect.ErrLeaseExpired)
		assert.Equal(t, last.Add(rd), stopped[0].Time)

		waitFor(t, 2*ld, "b takes over", b.e.IsLeader)
		api.Client("a").Heal()
		gets := api.Client("a").Calls(relecttest.VerbGet)
		time.Sleep(ld)
		assert.Greater(t, api.Client("a").Calls(relecttest.VerbGet), gets, "a campaigns again after healing")
		assert.Equal(t, "b", a.e.Leader())

		b.stop() // releases
		waitFor(t, 3*rp, "a re-acquires", a.e.IsLeader)
		stopMonitor()
		a.stop()
		a.checkEvents()
		b.checkEvents()
	})
}

// A single candidate whose renewals fail resumes its own lease once the API
// answers again: the record is still the one it wrote, so nobody else held
// it in between and the term number stays.
func TestRenewalFailuresSingleCandidateResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		synctest.Wait()
		term, _ := a.e.Term()
		api.Client("a").Fail(relecttest.Error(503))
		waitFor(t, rd+rp, "a loses", func() bool { return !a.e.IsLeader() })
		time.Sleep(ld)
		api.Client("a").Heal()
		waitFor(t, ld+3*rp, "a re-acquires", a.e.IsLeader)
		again, _ := a.e.Term()
		assert.Equal(t, term, again)
		a.stop()
		a.checkEvents()
	})
}

// A renewal that hangs (partition) or a process paused between sending it
// and reading the answer: IsLeader turns false and the term context is
// cancelled at t_send + RenewDeadline of the last successful renewal.
func TestIsLeaderFalseAtRenewDeadlineWhenRenewalHangs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*relecttest.Client)
		heal  func(*relecttest.Client)
	}{
		{"partition", (*relecttest.Client).Partition, (*relecttest.Client).Heal},
		{"pause", (*relecttest.Client).Pause, (*relecttest.Client).Resume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				rec := newRecordingLock(api, "a")
				termCtx := make(chan context.Context, 1)
				a := newCandidate(t, api, "a", func(o *relect.Options) {
					o.Client, o.Namespace, o.Name, o.Identity = nil, "", "", ""
					o.Lock = rec
					o.OnStartedLeading = func(ctx context.Context) {
						termCtx <- ctx
						<-ctx.Done()
					}
				})
				a.start()
				synctest.Wait()
				ctx := <-termCtx
				time.Sleep(3*rp + rp/2) // between renewals
				tc.fault(api.Client("a"))
				last := rec.lastSend()
				require.Equal(t, 3*rp, last.Sub(rec.sendTimes()[0]), "acquired, then renewed every RetryPeriod")

				time.Sleep(time.Until(last.Add(rd)) - time.Nanosecond)
				synctest.Wait()
				require.True(t, a.e.IsLeader())
				require.NoError(t, ctx.Err())
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				assert.False(t, a.e.IsLeader())
				assert.ErrorIs(t, context.Cause(ctx), relect.ErrLeaseExpired)
				n, ok := relect.TermFromContext(ctx)
				assert.True(t, ok)
				assert.Equal(t, int64(1), n, "the first holder of the released Lease")

				tc.heal(api.Client("a"))
				a.stop()
				a.checkEvents()
			})
		})
	}
}

// Backoff: consecutive short terms grow the wait before the next campaign
// (exponential, ±50 % jitter, capped); a stable term starts it over. Every
// wait is an event.
func TestBackoffGrowsThenResetsAfterStableTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		const initial, maxWait = time.Second, 20 * time.Second
		var stableTerm = make(chan struct{}, 1)
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.BackoffInitial, o.BackoffMax = initial, maxWait
			o.OnStartedLeading = func(ctx context.Context) {
				select {
				case <-stableTerm:
					time.Sleep(ld) // held LeaseDuration: stable
				default: // returns at once: a short term
				}
			}
		})
		a.start()
		waitFor(t, 10*time.Minute, "8 backoff waits", func() bool { return a.count(relect.EventBackoff) >= 8 })
		stableTerm <- struct{}{}
		waitFor(t, 10*time.Minute, "a stable term and the next wait", func() bool {
			return a.count(relect.EventBackoff) >= 10
		})
		a.stop()
		a.checkEvents()

		waits := a.eventsOf(relect.EventBackoff)
		interval := initial
		for i, w := range waits[:8] {
			lo, hi := time.Duration(float64(interval)*0.5), min(time.Duration(float64(interval)*1.5), maxWait)
			assert.GreaterOrEqualf(t, w.Delay, lo, "wait %d", i)
			assert.LessOrEqualf(t, w.Delay, hi, "wait %d", i)
			interval = min(2*interval, maxWait)
		}
		assert.Equal(t, maxWait, max(waits[5].Delay, waits[6].Delay, waits[7].Delay, maxWait), "capped")
		// Wait 8 followed the 9th term; the stable term is the one after
		// it (its wait is waits[9]) — it starts over at BackoffInitial.
		var stableIdx int
		for i, ev := range a.eventsOf(relect.EventStoppedLeading) {
			if ev.Time.Sub(a.eventsOf(relect.EventStartedLeading)[i].Time) >= ld {
				stableIdx = i
			}
		}
		require.NotZero(t, stableIdx)
		after := waits[stableIdx]
		assert.GreaterOrEqual(t, after.Delay, initial/2)
		assert.LessOrEqual(t, after.Delay, initial*3/2, "reset after a stable term")
		for _, ev := range a.eventsOf(relect.EventStoppedLeading) {
			assert.ErrorIs(t, ev.Err, relect.ErrWorkReturned)
		}
	})
}

// The token bucket holds a candidate whose own loop would hammer the API —
// terms that end at once with a backoff of a millisecond — to its budget.
func TestTokenBucketCapsEveryLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		const limit, burst = 1.0, 4
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.BackoffInitial, o.BackoffMax = time.Millisecond, time.Millisecond
			o.RateLimit, o.RateBurst = limit, burst
			o.OnStartedLeading = func(context.Context) {}
		})
		start := time.Now()
		a.start()
		time.Sleep(5 * time.Minute)
		a.stop()
		// Every call, the release and the deregistration at Run's end
		// included, takes a token: the bucket's bound holds over the time
		// until Run returned (a call at the end may have waited for its
		// token past the sleep). x/time/rate computes a wait in whole
		// nanoseconds, so a token may come a nanosecond before its exact
		// instant: the span is rounded up to the millisecond.
		span := time.Since(start)
		calls := api.Client("a").TotalCalls()
		budget := burst + int(limit*(span+time.Millisecond).Seconds())
		assert.LessOrEqual(t, calls, budget)
		assert.Greater(t, calls, budget/2, "the loop did run against the bucket")
		assert.Greater(t, a.count(relect.EventStartedLeading), 50)
		a.checkEvents()
	})
}

// A healthy leader's renewal is never delayed by the bucket, even at the
// smallest budget New accepts: it renews exactly every RetryPeriod.
func TestHealthyLeaderRenewalNotDelayedByBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		rec := newRecordingLock(api, "a")
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name, o.Identity = nil, "", "", ""
			o.Lock = rec
			o.RateLimit, o.RateBurst = 1, 4 // 2 calls per RetryPeriod of 2 s
		})
		a.start()
		time.Sleep(10 * time.Minute)
		a.stop()
		sends := rec.sendTimes()
		require.Greater(t, len(sends), 290)
		// sends[0] acquires, sends[1] is client-go's immediate first
		// renewal, the last is the release.
		for i := 2; i < len(sends)-1; i++ {
			require.Equal(t, rp, sends[i].Sub(sends[i-1]), "renewal %d", i)
		}
	})
}

// Run's context cancelled: the work is told to stop, the lease is released
// only after the work has returned, and Run returns after that.
func TestReleaseOnlyAfterWorkReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.OnStartedLeading = func(ctx context.Context) {
				<-ctx.Done()
				time.Sleep(5 * time.Second) // winding down
			}
		})
		a.start()
		time.Sleep(ld)
		cause := errors.New("shutting down")
		a.cancel(cause)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		assert.Equal(t, "a", api.Holder(ns, lease), "still held while the work winds down")
		assert.False(t, a.e.IsLeader(), "but no longer leader")
		err := <-a.done
		assert.ErrorIs(t, err, cause, "Run returns the context's cause")
		assert.Equal(t, "", api.Holder(ns, lease), "released")
		assert.Equal(t, []relect.EventKind{relect.EventCampaigning, relect.EventNewLeader,
			relect.EventStartedLeading, relect.EventStoppedLeading, relect.EventReleased}, a.kinds())
		a.checkEvents()
	})
}

// KeepLeaseOnCancel leaves the lease held.
func TestKeepLeaseOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) { o.KeepLeaseOnCancel = true })
		a.start()
		synctest.Wait()
		a.stop()
		assert.Equal(t, "a", api.Holder(ns, lease))
		assert.Zero(t, a.count(relect.EventReleased))
	})
}

// Release is conditional on the object we hold: a Lease that has already
// passed to another holder is never blanked; a conflict while we still hold
// it is retried; and a release that cannot complete gives up after the
// renew deadline.
func TestReleaseConditional(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     func(api *relecttest.LeaseAPI)
		wantHolder string
		maxRun     time.Duration
	}{
		{"passed to another holder", func(api *relecttest.LeaseAPI) {
			require.NoError(t, api.SetHolder(ns, lease, "b"))
		}, "b", rd},
		{"conflict retried", func(api *relecttest.LeaseAPI) {
			// The stored object moves on (still ours), so the release's
			// Update conflicts and is retried after a Get.
			require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) { l.Labels = map[string]string{"x": "y"} }))
		}, "", rd},
		{"API down: bounded by RenewDeadline", func(api *relecttest.LeaseAPI) {
			api.Client("a").Partition()
		}, "a", rd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				a := newCandidate(t, api, "a", nil)
				a.start()
				time.Sleep(rp / 2)
				require.True(t, a.e.IsLeader())
				tc.before(api)
				start := time.Now()
				a.stop()
				assert.Equal(t, tc.wantHolder, api.Holder(ns, lease))
				assert.LessOrEqual(t, time.Since(start), tc.maxRun)
			})
		})
	}
}

// A panic in OnStartedLeading is recovered and reported, ends the term
// (context cancelled, lease released), and campaigning goes on after a
// backoff wait.
func TestPanicInCallbackEndsTermAndCampaignGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		calls := 0
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.OnStartedLeading = func(ctx context.Context) {
				calls++
				if calls == 1 {
					panic("boom")
				}
				<-ctx.Done()
			}
			o.OnNewLeader = func(string) { panic("boom in OnNewLeader") }
		})
		a.start()
		waitFor(t, time.Minute, "a second term", func() bool { return a.count(relect.EventStartedLeading) == 2 })
		a.stop()

		panics := map[string]*relect.PanicError{}
		for _, ev := range a.eventsOf(relect.EventError) {
			var p *relect.PanicError
			if errors.As(ev.Err, &p) {
				panics[p.Callback] = p
			}
		}
		require.Contains(t, panics, "OnStartedLeading")
		require.Contains(t, panics, "OnNewLeader")
		assert.Equal(t, "boom", panics["OnStartedLeading"].Value)
		assert.Contains(t, string(panics["OnStartedLeading"].Stack), "elector_test.go")
		// OnNewLeader's panic is reported from its own goroutine, so its
		// place among the others varies; leave it out.
		var kinds []relect.EventKind
		for _, ev := range a.events {
			var p *relect.PanicError
			if !errors.As(ev.Err, &p) || p.Callback != "OnNewLeader" {
				kinds = append(kinds, ev.Kind)
			}
		}
		want := []relect.EventKind{relect.EventCampaigning, relect.EventNewLeader, relect.EventStartedLeading,
			relect.EventError, relect.EventStoppedLeading, relect.EventReleased, relect.EventBackoff,
			relect.EventCampaigning, relect.EventNewLeader, relect.EventStartedLeading}
		assert.Equal(t, want, kinds[:len(want)])
		assert.ErrorAs(t, a.eventsOf(relect.EventStoppedLeading)[0].Err, new(*relect.PanicError))
	})
}

// ErrAlreadyRunning for a second concurrent Run; the events channel is
// closed when Run returns; Run may be called again afterwards.
func TestRunOnceAtATimeAndEventsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		synctest.Wait()
		assert.ErrorIs(t, a.e.Run(context.Background()), relect.ErrAlreadyRunning)
		require.True(t, a.e.IsLeader(), "the running one is untouched")
		first := a.e.Events()
		a.stop()
		_, open := <-first
		assert.False(t, open, "closed when Run returned")

		a.start()
		waitFor(t, 2*rp, "a second Run acquires again", a.e.IsLeader)
		a.stop()
	})
}

// A reader that never reads does not block the election: the oldest events
// are dropped and counted, the newest kept.
func TestSlowReaderDropsOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		terms := 0
		ctx, cancel := context.WithCancel(context.Background())
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.EventBuffer = 2
			o.BackoffMax = rp
			o.OnStartedLeading = func(context.Context) { // a term per backoff
				if terms++; terms == 20 {
					cancel()
				}
			}
		})
		ch := a.e.Events()
		require.ErrorIs(t, a.e.Run(ctx), context.Canceled, "the election went on unread")
		assert.Greater(t, a.e.Stats().DroppedEvents, uint64(5*terms))
		var kept []relect.Event
		for ev := range ch {
			kept = append(kept, ev)
		}
		require.Len(t, kept, 2)
		assert.Equal(t, relect.EventStoppedLeading, kept[0].Kind, "the newest events were kept")
		assert.Equal(t, relect.EventReleased, kept[1].Kind)
	})
}

// A held Lease whose duration was edited to zero, a negative or a short
// value is not taken over sooner than our own LeaseDuration after it was
// observed: client-go would take it at its next poll, possibly before the
// holder's next renewal reveals the edit.
func TestShortEditedDurationDoesNotShortenTakeover(t *testing.T) {
	for _, seconds := range []int32{0, -5, 1} {
		t.Run(fmt.Sprint(seconds), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				putLease(api, "ghost", seconds, 0)
				b := newCandidate(t, api, "b", nil)
				started := time.Now()
				b.start()
				waitFor(t, 2*ld, "b leads", b.e.IsLeader)
				assert.GreaterOrEqual(t, time.Since(started), ld)
				b.stop()
				b.checkEvents()
			})
		})
	}
}

// A leader stopped just after a renewal the apiserver applied but whose
// answer was lost still releases: the release's Update conflicts, and the
// re-read shows the record naming us (not a stranger's).
func TestReleaseAfterLostRenewalAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		time.Sleep(rp / 2)
		a.client.LoseAnswers(1, relecttest.Error(504))
		time.Sleep(rp) // the next renewal is applied, its answer lost
		synctest.Wait()
		a.stop()
		assert.Equal(t, "", api.Holder(ns, lease), "released")
		assert.Equal(t, 1, a.count(relect.EventReleased))
	})
}

// A candidate stopped right after its acquiring write — before or just
// after its term starts — leaves the lease released, not held by nobody.
func TestStoppedWhileAcquiringReleases(t *testing.T) {
	for i := range 20 {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			var b *candidate
			b = newCandidate(t, api, "b", func(o *relect.Options) {
				o.OnNewLeader = func(id string) {
					if id == "b" {
						b.cancel(nil) // stop b the moment its write lands
					}
				}
			})
			a.start()
			synctest.Wait()
			b.start()
			synctest.Wait()
			time.Sleep(time.Duration(i) * rp / 20)
			a.stop() // releases; b acquires and is stopped at once
			require.ErrorIs(t, <-b.done, context.Canceled)
			assert.Equal(t, "", api.Holder(ns, lease), "run %d: released", i)
		})
	}
}
