package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/defaults"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/relect/relect"
	"github.com/relect/relect/metrics"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

const (
	ns    = "default"
	lease = "relect-test"
	rd    = defaults.RenewDeadline
	ld    = defaults.LeaseDuration
)

// candidate is one Elector on a relecttest.LeaseAPI with its Collector.
// Nobody reads its Events, so a full buffer drops them.
type candidate struct {
	t      *testing.T
	client *relecttest.Client
	e      *relect.Elector
	c      *metrics.Collector
	cancel context.CancelFunc
	done   chan error
}

// newCandidate builds an Elector named name whose work blocks until its
// context is done, and a Collector for it with the identity label, which it
// registers on reg. mod may change the Elector's options.
func newCandidate(t *testing.T, api *relecttest.LeaseAPI, reg prometheus.Registerer, name string, mod func(*relect.Options)) *candidate {
	t.Helper()
	c := &candidate{t: t, client: api.Client(name)}
	opts := relect.Options{
		Client:           c.client.Clientset(),
		Namespace:        ns,
		Name:             lease,
		Identity:         name,
		OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
	}
	if mod != nil {
		mod(&opts)
	}
	var err error
	c.e, err = relect.New(opts)
	require.NoError(t, err)
	c.c, err = metrics.NewCollector(c.e, metrics.Options{Namespace: ns, Name: lease, IdentityLabel: true})
	require.NoError(t, err)
	require.NoError(t, reg.Register(c.c))
	return c
}

// start runs the Elector in the background until stop, or until the test
// ends.
func (c *candidate) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c.cancel, c.done = cancel, done
	go func() { done <- c.e.Run(ctx) }()
	c.t.Cleanup(func() { // a failed test leaves none running in the bubble
		cancel()
		<-done
		done <- context.Canceled
	})
}

// stop cancels Run and checks that it returned the context's error.
func (c *candidate) stop() {
	c.t.Helper()
	c.cancel()
	err := <-c.done
	c.done <- err // for the cleanup
	require.ErrorIs(c.t, err, context.Canceled)
}

// waitFor advances simulated time in steps until cond holds, failing after
// limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s did not happen", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// series is one gathered sample.
type series struct {
	labels map[string]string
	value  float64
}

// gather returns the samples of g by metric name.
func gather(t *testing.T, g prometheus.Gatherer) map[string][]series {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	out := map[string][]series{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}, value: m.GetGauge().GetValue() + m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// of returns the samples of name that are the identity's.
func of(all map[string][]series, name, identity string) []series {
	var out []series
	for _, s := range all[name] {
		if s.labels["identity"] == identity {
			out = append(out, s)
		}
	}
	return out
}

// value returns the one sample of name that is the identity's.
func value(t *testing.T, all map[string][]series, name, identity string) float64 {
	t.Helper()
	s := of(all, name, identity)
	require.Lenf(t, s, 1, "%s{identity=%q}", name, identity)
	return s[0].value
}

// checkStats asserts that every metric of c's Collector says what a Stats
// snapshot of its Elector, taken at the same instant, says. Call it after
// synctest.Wait, when nothing moves.
func (c *candidate) checkStats(g prometheus.Gatherer) relect.Stats {
	t := c.t
	t.Helper()
	s := c.e.Stats()
	all := gather(t, g)
	id := s.Identity
	boolean := map[bool]float64{false: 0, true: 1}
	remaining := 0.0
	if s.Leading {
		remaining = time.Until(s.ValidUntil).Seconds()
	}
	for name, want := range map[string]float64{
		"relect_info":                            1,
		"relect_is_leader":                       boolean[s.Leading],
		"relect_term":                            float64(s.Term),
		"relect_terms_started_total":             float64(s.TermsStarted),
		"relect_token_bucket_wait_seconds_total": s.BucketWait.Seconds(),
		"relect_backoffs_total":                  float64(s.Backoffs),
		"relect_backoff_seconds_total":           s.BackoffTime.Seconds(),
		"relect_dropped_events_total":            float64(s.DroppedEvents),
		"relect_term_remaining_seconds":          remaining,
		"relect_consecutive_failures":            float64(s.ConsecutiveFailures),
		"relect_degraded":                        boolean[s.Degraded],
		"relect_work_stuck":                      boolean[s.WorkStuck],
		"relect_work_stuck_handovers_total":      float64(s.WorkStuckHandovers),
		"relect_work_check_failures":             float64(s.WorkCheckFailures),
	} {
		assert.Equalf(t, want, value(t, all, name, id), "%s{identity=%q}", name, id)
	}
	for name, at := range map[string]time.Time{
		"relect_last_renewal_timestamp_seconds":   s.LastRenewal,
		"relect_last_contact_timestamp_seconds":   s.LastContact,
		"relect_work_last_beat_timestamp_seconds": s.LastBeat,
	} {
		if at.IsZero() {
			assert.Emptyf(t, of(all, name, id), "%s{identity=%q} before the first", name, id)
			continue
		}
		assert.InDeltaf(t, float64(at.UnixNano())/1e9, value(t, all, name, id), 1e-6, "%s{identity=%q}", name, id)
	}
	calls := map[relect.CallKey]uint64{}
	for _, sr := range of(all, "relect_api_calls_total", id) {
		calls[relect.CallKey{Verb: sr.labels["verb"], Result: sr.labels["result"]}] = uint64(sr.value)
	}
	assert.Equalf(t, s.Calls, calls, "relect_api_calls_total{identity=%q}", id)
	return s
}

// The complete exposition of a leader and a follower of one Lease, collected
// by one registry, at the instant the follower first observed the lease.
func TestCollectorLeaderAndFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(ns, lease)
		reg := prometheus.NewPedanticRegistry()
		a := newCandidate(t, api, reg, "a", nil)
		b := newCandidate(t, api, reg, "b", nil)
		a.start()
		synctest.Wait()
		b.start()
		synctest.Wait()
		// synctest's clock starts at 2000-01-01T00:00:00Z, 946684800.
		const labelsA = `identity="a",lease="relect-test",lease_namespace="default"`
		const labelsB = `identity="b",lease="relect-test",lease_namespace="default"`
		want := `
# HELP relect_backoff_seconds_total Seconds of backoff waits before a campaign, counted when each wait begins.
# TYPE relect_backoff_seconds_total counter
relect_backoff_seconds_total{` + labelsA + `} 0
relect_backoff_seconds_total{` + labelsB + `} 0
# HELP relect_backoffs_total Backoff waits before a campaign.
# TYPE relect_backoffs_total counter
relect_backoffs_total{` + labelsA + `} 0
relect_backoffs_total{` + labelsB + `} 0
# HELP relect_consecutive_failures Lease API calls that failed in a row; hearing from the API (an answer, a watch event) resets it.
# TYPE relect_consecutive_failures gauge
relect_consecutive_failures{` + labelsA + `} 0
relect_consecutive_failures{` + labelsB + `} 0
# HELP relect_degraded 1 from Options.DegradedAfter failed Lease API calls in a row until this candidate next hears from the API, else 0.
# TYPE relect_degraded gauge
relect_degraded{` + labelsA + `} 0
relect_degraded{` + labelsB + `} 0
# HELP relect_dropped_events_total Events dropped because the Events channel's buffer was full.
# TYPE relect_dropped_events_total counter
relect_dropped_events_total{` + labelsA + `} 0
relect_dropped_events_total{` + labelsB + `} 0
# HELP relect_info Always 1; its identity label is the holder identity the candidate writes into the Lease.
# TYPE relect_info gauge
relect_info{` + labelsA + `} 1
relect_info{` + labelsB + `} 1
# HELP relect_is_leader 1 while this candidate leads (Elector.IsLeader), else 0.
# TYPE relect_is_leader gauge
relect_is_leader{` + labelsA + `} 1
relect_is_leader{` + labelsB + `} 0
# HELP relect_last_renewal_timestamp_seconds Unix time at which the last successful write naming this candidate (acquisition or renewal) was sent; absent until the first.
# TYPE relect_last_renewal_timestamp_seconds gauge
relect_last_renewal_timestamp_seconds{` + labelsA + `} 9.466848e+08
# HELP relect_last_contact_timestamp_seconds Unix time at which this candidate last heard from the Lease API: an answer to a call (NotFound and conflicts included) or an event on one of its watches; absent until the first.
# TYPE relect_last_contact_timestamp_seconds gauge
relect_last_contact_timestamp_seconds{` + labelsA + `} 9.466848e+08
relect_last_contact_timestamp_seconds{` + labelsB + `} 9.466848e+08
# HELP relect_term Number of the current term, the Lease's leaseTransitions at acquisition (for people: storage checks the term's fence); 0 when not leading.
# TYPE relect_term gauge
relect_term{` + labelsA + `} 1
relect_term{` + labelsB + `} 0
# HELP relect_term_remaining_seconds Seconds until the current term's validity ends unless renewed (on the process's monotonic clock); 0 when not leading.
# TYPE relect_term_remaining_seconds gauge
relect_term_remaining_seconds{` + labelsA + `} 10
relect_term_remaining_seconds{` + labelsB + `} 0
# HELP relect_terms_started_total Terms this candidate has led (OnStartedLeading calls).
# TYPE relect_terms_started_total counter
relect_terms_started_total{` + labelsA + `} 1
relect_terms_started_total{` + labelsB + `} 0
# HELP relect_token_bucket_wait_seconds_total Seconds Lease API calls waited on the token bucket (Options.RateLimit, RateBurst).
# TYPE relect_token_bucket_wait_seconds_total counter
relect_token_bucket_wait_seconds_total{` + labelsA + `} 0
relect_token_bucket_wait_seconds_total{` + labelsB + `} 0
# HELP relect_work_check_failures Calls of Options.Work.Check that failed in a row (it runs while this candidate leads or is in the line of succession); 0 after one succeeds.
# TYPE relect_work_check_failures gauge
relect_work_check_failures{` + labelsA + `} 0
relect_work_check_failures{` + labelsB + `} 0
# HELP relect_work_stuck 1 while this candidate leads and its work is stuck (Options.Work): no beat within BeatWindow, or the check failing CheckFailures times in a row; else 0.
# TYPE relect_work_stuck gauge
relect_work_stuck{` + labelsA + `} 0
relect_work_stuck{` + labelsB + `} 0
# HELP relect_work_stuck_handovers_total Terms this candidate ended, handing the lease to the line of succession, because its work was stuck (Options.Work).
# TYPE relect_work_stuck_handovers_total counter
relect_work_stuck_handovers_total{` + labelsA + `} 0
relect_work_stuck_handovers_total{` + labelsB + `} 0
`
		// Which calls a campaign makes is the core's business; that they
		// are all counted is checked against Stats below.
		names := []string{
			"relect_backoff_seconds_total", "relect_backoffs_total", "relect_consecutive_failures",
			"relect_degraded", "relect_dropped_events_total", "relect_info", "relect_is_leader",
			"relect_last_renewal_timestamp_seconds", "relect_last_contact_timestamp_seconds",
			"relect_term", "relect_term_remaining_seconds", "relect_terms_started_total",
			"relect_token_bucket_wait_seconds_total",
			// Work liveness is off: 0, and no beat.
			"relect_work_check_failures", "relect_work_stuck", "relect_work_stuck_handovers_total",
			"relect_work_last_beat_timestamp_seconds",
		}
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), names...))
		a.checkStats(reg)
		b.checkStats(reg)
		all := gather(t, reg)
		assert.NotEmpty(t, of(all, "relect_api_calls_total", "a"))
		assert.NotEmpty(t, of(all, "relect_api_calls_total", "b"))
		for _, s := range append(of(all, "relect_api_calls_total", "a"), of(all, "relect_api_calls_total", "b")...) {
			assert.Contains(t, []string{"ok", "not_found"}, s.labels["result"], "no call failed")
		}

		// A leader renews; validity slides with each renewal.
		time.Sleep(ld + time.Second)
		synctest.Wait()
		all = gather(t, reg)
		assert.Equal(t, 1.0, value(t, all, "relect_is_leader", "a"))
		assert.Equal(t, 0.0, value(t, all, "relect_is_leader", "b"))
		assert.Greater(t, value(t, all, "relect_term_remaining_seconds", "a"), (rd-defaults.RetryPeriod).Seconds()-1e-9)
		a.checkStats(reg)
		b.checkStats(reg)
		b.stop()
		a.stop()
	})
}

// Faults: the leader's calls fail; it counts them by result, becomes
// degraded, loses its term and backs off; the follower takes over with the
// next term number; healing clears the degraded signal.
func TestCollectorFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(ns, lease)
		reg := prometheus.NewPedanticRegistry()
		degradedAfter := func(o *relect.Options) { o.DegradedAfter = 3 }
		a := newCandidate(t, api, reg, "a", degradedAfter)
		b := newCandidate(t, api, reg, "b", degradedAfter)
		a.start()
		synctest.Wait()
		b.start()
		synctest.Wait()

		a.client.Fail(relecttest.Error(500))
		waitFor(t, ld+rd, "b leads", b.e.IsLeader)
		synctest.Wait()
		all := gather(t, reg)
		assert.Equal(t, 0.0, value(t, all, "relect_is_leader", "a"))
		assert.Equal(t, 0.0, value(t, all, "relect_term_remaining_seconds", "a"))
		assert.Equal(t, 1.0, value(t, all, "relect_degraded", "a"))
		assert.GreaterOrEqual(t, value(t, all, "relect_consecutive_failures", "a"), 3.0)
		assert.GreaterOrEqual(t, value(t, all, "relect_backoffs_total", "a"), 1.0)
		assert.Greater(t, value(t, all, "relect_backoff_seconds_total", "a"), 0.0)
		assert.Equal(t, 1.0, value(t, all, "relect_terms_started_total", "a"))
		assert.Equal(t, 1.0, value(t, all, "relect_is_leader", "b"))
		assert.Equal(t, 2.0, value(t, all, "relect_term", "b"), "the next term number")
		assert.Equal(t, 1.0, value(t, all, "relect_terms_started_total", "b"))
		assert.Equal(t, 0.0, value(t, all, "relect_degraded", "b"))
		failed := 0.0
		for _, s := range of(all, "relect_api_calls_total", "a") {
			if s.labels["result"] == "server_error" {
				failed += s.value
			}
		}
		assert.GreaterOrEqual(t, failed, 3.0)
		sa := a.checkStats(reg)
		b.checkStats(reg)
		// The cut-off candidate's last success is when it was cut off.
		assert.True(t, sa.LastContact.Before(time.Now().Add(-rd)))

		a.client.Heal()
		waitFor(t, time.Minute, "a recovers", func() bool { return !a.e.Stats().Degraded })
		synctest.Wait()
		all = gather(t, reg)
		assert.Equal(t, 0.0, value(t, all, "relect_degraded", "a"))
		assert.Equal(t, 0.0, value(t, all, "relect_consecutive_failures", "a"))
		a.checkStats(reg)
		a.stop()
		b.stop()
	})
}

// Waits on the token bucket and dropped events are counted in seconds and
// events.
func TestCollectorBucketWaitAndDroppedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(ns, lease)
		reg := prometheus.NewPedanticRegistry()
		a := newCandidate(t, api, reg, "a", nil)
		b := newCandidate(t, api, reg, "b", func(o *relect.Options) {
			o.RateBurst = 4 // the least New accepts, at the default 1 call/s
			o.EventBuffer = 1
		})
		a.start()
		synctest.Wait()
		// Each campaign of the follower starts with a read: campaigns in
		// quick succession use up the bucket, and the last one waits.
		for range 3 {
			b.start()
			synctest.Wait()
			b.stop()
		}
		b.start()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		all := gather(t, reg)
		assert.Greater(t, value(t, all, "relect_token_bucket_wait_seconds_total", "b"), 0.0)
		assert.Equal(t, float64(b.e.Stats().DroppedEvents), value(t, all, "relect_dropped_events_total", "b"))
		assert.NotZero(t, b.e.Stats().DroppedEvents)
		b.checkStats(reg)
		b.stop()
		a.stop()
	})
}

// worker is a term's work that beats every second until hung, with a
// work check that fails while failing is set.
type worker struct {
	hung, failing atomic.Bool
}

func (w *worker) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !w.hung.Load() {
				relect.Beat(ctx)
			}
		}
	}
}

func (w *worker) check(context.Context) error {
	if w.failing.Load() {
		return errors.New("downstream unreachable")
	}
	return nil
}

// Work liveness: the leader's beats, its check's failures, the stuck
// handover they lead to, and a successor stuck while it must hold (the
// streak of stuck handovers), each as the metrics show it.
func TestCollectorStuckWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(ns, lease)
		reg := prometheus.NewPedanticRegistry()
		const window = 5 * time.Second
		wa, wb := &worker{}, &worker{}
		a := newCandidate(t, api, reg, "a", func(o *relect.Options) {
			o.OnStartedLeading, o.Work = wa.run, relect.WorkOptions{BeatWindow: window, Check: wa.check}
		})
		b := newCandidate(t, api, reg, "b", func(o *relect.Options) {
			o.OnStartedLeading, o.Work = wb.run, relect.WorkOptions{BeatWindow: window, Check: wb.check}
		})
		a.start()
		synctest.Wait()
		b.start()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		all := gather(t, reg)
		assert.InDelta(t, float64(time.Now().Add(-time.Millisecond).UnixNano())/1e9,
			value(t, all, "relect_work_last_beat_timestamp_seconds", "a"), 1e-6, "the leader's last beat")
		assert.Empty(t, of(all, "relect_work_last_beat_timestamp_seconds", "b"), "a follower has no term's work")
		assert.Equal(t, 0.0, value(t, all, "relect_work_stuck", "a"))
		a.checkStats(reg)
		b.checkStats(reg)

		// The leader's check fails CheckFailures times in a row: it hands
		// over to b, and is no longer stuck, nor working.
		wa.failing.Store(true)
		failures := float64(defaults.WorkCheckFailures)
		waitFor(t, defaults.WorkCheckInterval*(defaults.WorkCheckFailures+1), "b leads", b.e.IsLeader)
		synctest.Wait()
		all = gather(t, reg)
		assert.Equal(t, 1.0, value(t, all, "relect_work_stuck_handovers_total", "a"))
		assert.Equal(t, 0.0, value(t, all, "relect_work_stuck", "a"), "not leading: not stuck")
		assert.GreaterOrEqual(t, value(t, all, "relect_work_check_failures", "a"), failures)
		assert.Empty(t, of(all, "relect_work_last_beat_timestamp_seconds", "a"))
		assert.Equal(t, 0.0, value(t, all, "relect_work_stuck_handovers_total", "b"))
		assert.Equal(t, 0.0, value(t, all, "relect_work_check_failures", "b"))
		a.checkStats(reg)
		b.checkStats(reg)

		// b's work hangs during the hold that follows a stuck handover
		// (Cooldown, 1 minute): b is stuck, and leads on.
		wb.hung.Store(true)
		time.Sleep(window + 2*defaults.RetryPeriod)
		synctest.Wait()
		all = gather(t, reg)
		require.True(t, b.e.IsLeader(), "b holds")
		assert.Equal(t, 1.0, value(t, all, "relect_work_stuck", "b"))
		assert.Equal(t, 0.0, value(t, all, "relect_work_stuck_handovers_total", "b"))
		a.checkStats(reg)
		b.checkStats(reg)
		b.stop()
		a.stop()
	})
}

func TestNewCollector(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	newElector := func(name string) *relect.Elector {
		e, err := relect.New(relect.Options{
			Client:           api.Client(name).Clientset(),
			Namespace:        ns,
			Name:             lease,
			Identity:         name,
			OnStartedLeading: func(context.Context) {},
		})
		require.NoError(t, err)
		return e
	}
	a, b := newElector("a"), newElector("b")
	// A Lock whose Describe does not say where its Lease is.
	noLocation, err := relect.New(relect.Options{
		Lock:             &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: "x"}},
		OnStartedLeading: func(context.Context) {},
	})
	require.NoError(t, err)

	t.Run("defaults to the Elector's Lease", func(t *testing.T) {
		c, err := metrics.NewCollector(a, metrics.Options{})
		require.NoError(t, err)
		n, err := testutil.GatherAndCount(mustRegistry(t, c), "relect_is_leader")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP relect_is_leader 1 while this candidate leads (Elector.IsLeader), else 0.
# TYPE relect_is_leader gauge
relect_is_leader{lease="`+lease+`",lease_namespace="`+ns+`"} 0
`), "relect_is_leader"))
	})

	t.Run("invalid", func(t *testing.T) {
		for _, tc := range []struct {
			e    *relect.Elector
			opts metrics.Options
			want []string
		}{
			{nil, metrics.Options{Namespace: ns, Name: lease}, []string{"nil Elector"}},
			{noLocation, metrics.Options{Name: lease}, []string{"Options.Namespace is empty"}},
			{noLocation, metrics.Options{}, []string{"Options.Namespace is empty", "Options.Name is empty"}},
		} {
			c, err := metrics.NewCollector(tc.e, tc.opts)
			assert.Nil(t, c)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		}
	})

	t.Run("several electors in one registry", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		mustCollector := func(e *relect.Elector, opts metrics.Options) *metrics.Collector {
			c, err := metrics.NewCollector(e, opts)
			require.NoError(t, err)
			return c
		}
		require.NoError(t, reg.Register(mustCollector(a, metrics.Options{Namespace: ns, Name: lease})))
		// Another Lease: distinct label values.
		require.NoError(t, reg.Register(mustCollector(b, metrics.Options{Namespace: ns, Name: "other"})))
		// The same Lease again, told apart by nothing: refused.
		err := reg.Register(mustCollector(b, metrics.Options{Namespace: ns, Name: lease}))
		assert.ErrorContains(t, err, "already exists with the same fully-qualified name and const label values")
		// Collectors with and without the identity label cannot share a
		// registry: a metric name has one set of label names.
		err = reg.Register(mustCollector(b, metrics.Options{Namespace: ns, Name: lease, IdentityLabel: true}))
		assert.ErrorContains(t, err, "has different label names")
		// Without the identity label only relect_info names the identity.
		assert.Equal(t, 2, testutil.CollectAndCount(reg, "relect_info"))
		all := gather(t, reg)
		for _, s := range all["relect_is_leader"] {
			assert.NotContains(t, s.labels, "identity")
		}
		var ids []string
		for _, s := range all["relect_info"] {
			ids = append(ids, s.labels["lease"]+"/"+s.labels["identity"])
		}
		assert.ElementsMatch(t, []string{lease + "/a", "other/b"}, ids)

		// With the identity label, two candidates of one Lease are told
		// apart.
		reg = prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(mustCollector(a, metrics.Options{Namespace: ns, Name: lease, IdentityLabel: true})))
		require.NoError(t, reg.Register(mustCollector(b, metrics.Options{Namespace: ns, Name: lease, IdentityLabel: true})))
		assert.Equal(t, 2, testutil.CollectAndCount(reg, "relect_is_leader"))
	})

	t.Run("before Run", func(t *testing.T) {
		c, err := metrics.NewCollector(a, metrics.Options{Namespace: ns, Name: lease})
		require.NoError(t, err)
		const labels = `{lease="relect-test",lease_namespace="default"}`
		err = testutil.CollectAndCompare(c, strings.NewReader(`
# HELP relect_is_leader 1 while this candidate leads (Elector.IsLeader), else 0.
# TYPE relect_is_leader gauge
relect_is_leader`+labels+` 0
# HELP relect_terms_started_total Terms this candidate has led (OnStartedLeading calls).
# TYPE relect_terms_started_total counter
relect_terms_started_total`+labels+` 0
`), "relect_is_leader", "relect_terms_started_total", "relect_api_calls_total",
			"relect_last_renewal_timestamp_seconds", "relect_last_contact_timestamp_seconds",
			"relect_work_last_beat_timestamp_seconds")
		assert.NoError(t, err)
	})

	t.Run("lint", func(t *testing.T) {
		c, err := metrics.NewCollector(a, metrics.Options{Namespace: ns, Name: lease})
		require.NoError(t, err)
		problems, err := testutil.CollectAndLint(c)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})

	t.Run("describe covers collect", func(t *testing.T) {
		c, err := metrics.NewCollector(a, metrics.Options{Namespace: ns, Name: lease, IdentityLabel: true})
		require.NoError(t, err)
		described := map[string]bool{}
		ch := make(chan *prometheus.Desc, 32)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			described[d.String()] = true
		}
		assert.Len(t, described, 25)
		// The pedantic registry fails Gather for a metric whose Desc was
		// not described.
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(c))
		_, err = reg.Gather()
		assert.NoError(t, err)
	})
}

func mustRegistry(t *testing.T, cs ...prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		require.NoError(t, reg.Register(c))
	}
	return reg
}
