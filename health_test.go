package relect_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probe calls check as a kubelet probe would.
func probe(check func(*http.Request) error) error {
	return check(httptest.NewRequest(http.MethodGet, "/healthz", nil))
}

// probeUntilFailing probes every second, as a liveness probe would, until
// check fails or limit passes, and returns when it failed and the error.
func probeUntilFailing(t *testing.T, check func(*http.Request) error, limit time.Duration) (time.Time, error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		synctest.Wait()
		if err := probe(check); err != nil {
			return time.Now(), err
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the check still passed after %v", limit)
	return time.Time{}, nil
}

// probeHealthy probes every second for d and fails the test on any error.
func probeHealthy(t *testing.T, d time.Duration, checks ...func(*http.Request) error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		synctest.Wait()
		for i, check := range checks {
			require.NoErrorf(t, probe(check), "check %d at %v", i, time.Now())
		}
	}
}

func TestHealthCheck(t *testing.T) {
	cutOff := 2 * ld // the default

	t.Run("before the first call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			check := a.e.HealthCheck(relect.HealthOptions{})
			require.NoError(t, probe(check))
			// A check made long before Run times nothing until a call
			// fails, and the first call succeeds.
			time.Sleep(10 * ld)
			require.NoError(t, probe(check))
			a.start()
			probeHealthy(t, ld, check)
			a.stop()
		})
	})

	t.Run("healthy leader and follower", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			b := newCandidate(t, api, "b", nil)
			a.start()
			synctest.Wait()
			b.start()
			// Long past CutOffAfter: a watching follower makes no call while
			// the leader renews, and is healthy all the same.
			probeHealthy(t, 3*cutOff, a.e.HealthCheck(relect.HealthOptions{}), b.e.HealthCheck(relect.HealthOptions{}))
			assert.True(t, a.e.IsLeader())
			assert.False(t, b.e.IsLeader())
			b.stop()
			a.stop()
		})
	})

	t.Run("cut off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			check := a.e.HealthCheck(relect.HealthOptions{})
			a.start()
			probeHealthy(t, ld, check)
			a.client.Partition() // calls hang until their timeout, then fail
			cut := time.Now()
			at, err := probeUntilFailing(t, check, 3*cutOff)
			require.ErrorIs(t, err, relect.ErrCutOff)
			t.Log(err)
			// Timed from the first probe that saw a failure: the next
			// renewal, at most RetryPeriod later, times out after
			// RenewDeadline/2, and the probe comes at most a second later.
			assert.Greater(t, at.Sub(cut), cutOff)
			assert.LessOrEqual(t, at.Sub(cut), cutOff+rp+rd/2+2*time.Second)
			assert.False(t, a.e.IsLeader())

			a.client.Heal()
			waitFor(t, ld+rd, "a leads again", a.e.IsLeader)
			require.NoError(t, probe(check))
			a.stop()
			require.NoError(t, probe(check), "Run is not active")
		})
	})

	t.Run("cut off from the start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			a.client.Fail(relecttest.Error(500))
			check := a.e.HealthCheck(relect.HealthOptions{CutOffAfter: 20 * time.Second})
			start := time.Now()
			a.start()
			at, err := probeUntilFailing(t, check, time.Minute)
			require.ErrorIs(t, err, relect.ErrCutOff)
			assert.ErrorContains(t, err, "last contact never")
			assert.Greater(t, at.Sub(start), 20*time.Second)
			assert.LessOrEqual(t, at.Sub(start), 22*time.Second)
			a.stop()
		})
	})

	t.Run("degraded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", func(o *relect.Options) { o.DegradedAfter = 2 })
			check := a.e.HealthCheck(relect.HealthOptions{})
			a.start()
			probeHealthy(t, ld, check)
			a.client.Fail(relecttest.Error(503))
			failed := time.Now() // the first failure is the next renewal, within RetryPeriod
			waitFor(t, ld, "degraded", func() bool { return a.e.Stats().Degraded })
			// Degraded is not cut off: the election goes on, and so may
			// the API server's trouble pass.
			require.NoError(t, probe(check))
			at, err := probeUntilFailing(t, check, 2*cutOff)
			require.ErrorIs(t, err, relect.ErrCutOff)
			assert.ErrorContains(t, err, "degraded true")
			assert.Greater(t, at.Sub(failed), cutOff)
			assert.LessOrEqual(t, at.Sub(failed), cutOff+rp+2*time.Second)

			a.client.Heal()
			waitFor(t, ld, "recovered", func() bool { return !a.e.Stats().Degraded })
			require.NoError(t, probe(check))
			a.stop()
		})
	})

	t.Run("work overrun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			release := make(chan struct{})
			a := newCandidate(t, api, "a", func(o *relect.Options) {
				// Work that ignores its context: it keeps acting as
				// leader after the term ended.
				o.OnStartedLeading = func(context.Context) { <-release }
			})
			check := a.e.HealthCheck(relect.HealthOptions{CutOffAfter: time.Hour})
			a.start()
			probeHealthy(t, ld, check)
			a.client.Partition()
			waitFor(t, rd+time.Second, "the term ends", func() bool { return !a.e.IsLeader() })
			ended := time.Now()
			require.True(t, a.isWorking())
			at, err := probeUntilFailing(t, check, 2*rd)
			require.ErrorIs(t, err, relect.ErrWorkOverrun)
			t.Log(err)
			// The default WorkStopTimeout is RenewDeadline.
			assert.Greater(t, at.Sub(ended), rd)
			assert.LessOrEqual(t, at.Sub(ended), rd+time.Second)

			close(release)
			synctest.Wait()
			require.NoError(t, probe(check))
			a.client.Heal()
			a.stop()
		})
	})

	t.Run("handler", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := newAPI()
			a := newCandidate(t, api, "a", nil)
			h := a.e.HealthHandler(relect.HealthOptions{CutOffAfter: 5 * time.Second})
			get := func() *httptest.ResponseRecorder {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
				return w
			}
			a.start()
			synctest.Wait()
			w := get()
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "ok\n", w.Body.String())

			a.client.Fail(relecttest.Error(500))
			for end := time.Now().Add(time.Minute); w.Code == http.StatusOK && time.Now().Before(end); {
				time.Sleep(time.Second)
				w = get()
			}
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
			assert.True(t, strings.HasPrefix(w.Body.String(), "relect: cut off from the Lease API: "), w.Body.String())
			assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"))
			a.client.Heal()
			a.stop()
		})
	})

	t.Run("negative durations fail every check, naming the field", func(t *testing.T) {
		a := newCandidate(t, newAPI(), "a", nil)
		err := a.e.HealthCheck(relect.HealthOptions{WorkStopTimeout: -time.Second})(nil)
		assert.ErrorIs(t, err, relect.ErrInvalidOptions)
		assert.ErrorContains(t, err, "HealthOptions.WorkStopTimeout is negative (-1s)")
		err = a.e.HealthCheck(relect.HealthOptions{CutOffAfter: -time.Second})(nil)
		assert.ErrorIs(t, err, relect.ErrInvalidOptions)
		assert.ErrorContains(t, err, "HealthOptions.CutOffAfter is negative (-1s)")
	})
}

// An outage of every Lease call that leaves the open watches up — etcd
// refuses writes while the apiserver's watch cache still serves — makes
// every candidate degraded and cut off. Once the API heals, a follower
// makes no call (its watch is open, and its registration is renewed every
// 15 minutes): what it hears on its watch is contact with the API, so its
// signals clear as soon as the watch shows the next leader's write. The
// candidate that led when the outage began has no watch left (its watch
// ended with its term) and reads the Lease after a backoff: it hears from
// the API at that read, within BackoffMax (LeaseDuration) of the heal.
func TestWatchContactEndsAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		var cs []*candidate
		var checks []func(*http.Request) error
		for _, name := range []string{"a", "b", "c"} {
			c := newCandidate(t, api, name, nil)
			c.start()
			synctest.Wait()
			cs, checks = append(cs, c), append(checks, c.e.HealthCheck(relect.HealthOptions{}))
		}
		time.Sleep(2 * ld) // settled: a leads, b and c follow by watch
		require.True(t, cs[0].e.IsLeader())

		for _, c := range cs {
			c.client.Fail(relecttest.Error(500))
		}
		// Probed every second, as a liveness probe would: when does each
		// check begin to fail (docs/operations.md quotes these)?
		began := time.Now()
		failing := make([]time.Duration, len(cs))
		for end := began.Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
			synctest.Wait()
			for i := range cs {
				if failing[i] == 0 && probe(checks[i]) != nil {
					failing[i] = time.Since(began)
				}
			}
		}
		for i, c := range cs {
			require.Truef(t, c.e.Stats().Degraded, "%s degraded during the outage", c.name)
			require.ErrorIsf(t, probe(checks[i]), relect.ErrCutOff, "%s cut off during the outage", c.name)
			t.Logf("%s: the health check fails from %v into the outage (CutOffAfter %v)", c.name, failing[i], 2*ld)
		}

		healed := time.Now()
		for _, c := range cs {
			c.client.Heal()
		}
		// The first successful write naming a leader after the heal.
		var first time.Time
		var leader *candidate
		waitFor(t, 2*ld, "a renewal after the heal", func() bool {
			for _, c := range cs {
				if r := c.e.Stats().LastRenewal; r.After(healed) && (first.IsZero() || r.Before(first)) {
					first, leader = r, c
				}
			}
			return !first.IsZero()
		})
		t.Logf("%s wrote first, %v after the heal", leader.name, first.Sub(healed))
		recovered := func(c *candidate, check func(*http.Request) error) bool {
			s := c.e.Stats()
			return !s.Degraded && s.FailingSince.IsZero() && s.ConsecutiveFailures == 0 && probe(check) == nil &&
				c.count(relect.EventRecovered) == 1
		}
		time.Sleep(time.Until(first.Add(rp)))
		synctest.Wait()
		for i, c := range cs[1:] {
			assert.Truef(t, recovered(c, checks[i+1]), "%s, a follower by watch, recovered one RetryPeriod after the first renewal: %+v",
				c.name, c.e.Stats())
		}
		waitFor(t, time.Until(healed.Add(ld+time.Millisecond)), "a, the leader when the outage began, recovers",
			func() bool { return recovered(cs[0], checks[0]) })
		stopAll(cs...)
	})
}

// A shard's work that does not return once its term ended fails the
// check as the election's does (ErrWorkOverrun, naming the shard): the
// shard's Lease passes to another candidate meanwhile, so the work may act
// on a shard it no longer holds, and a restart is the remedy. Once it
// returns the check passes again.
func TestHealthCheckShardWorkOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		release := make(chan struct{})
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Shards = relect.ShardOptions{Count: 1, Run: func(ctx context.Context) {
				<-ctx.Done()
				<-release // ignores its context until released
			}}
		})
		check := a.e.HealthCheck(relect.HealthOptions{})
		a.start()
		waitFor(t, 3*ld, "a holds shard 0", func() bool { return len(a.e.Shards()) == 1 })
		probeHealthy(t, ld, check)
		// Within 2 LD, the default CutOffAfter, only the overrun can fail
		// the check of a partitioned candidate.
		a.client.Partition()
		cut := time.Now()
		at, err := probeUntilFailing(t, check, 2*ld)
		require.ErrorIs(t, err, relect.ErrWorkOverrun)
		assert.ErrorContains(t, err, "shard 0")
		t.Log(err)
		// The shard's term ends within RD of its last renewal, at most RP
		// before the cut; WorkStopTimeout (RD) after that, the check fails.
		assert.LessOrEqual(t, at.Sub(cut), 2*rd+2*time.Second)
		close(release)
		a.client.Heal()
		synctest.Wait()
		require.NoError(t, probe(check))
		a.stop()
	})
}
