package relect_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/race"
	"github.com/relect/relect/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// Every read-only method is safe for concurrent use while terms start and
// end: a candidate whose work returns at once leads 300 short terms (100
// under the race detector) in real time (so that goroutines truly
// interleave; CI runs it under the race detector), while several
// goroutines call Stats, HealthCheck, IsLeader, Term, Leader and Events in
// a loop. Each snapshot must be
// consistent: a Stats that says leading has the term's validity, and a
// leading term's number is one the events announced.
func TestReadersWhileTermsStartAndEnd(t *testing.T) {
	api := newAPI()
	a := newCandidate(t, api, "a", func(o *relect.Options) {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
		o.BackoffInitial, o.BackoffMax = time.Microsecond, 10*time.Microsecond
		o.RateLimit = rate.Inf
		o.EventBuffer = 4096
		o.OnStartedLeading = func(context.Context) {} // each term ends at once: ErrWorkReturned
	})
	check := a.e.HealthCheck(relect.HealthOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	a.start()

	var (
		wg       sync.WaitGroup
		calls    atomic.Int64
		maxTerms = uint64(300)
	)
	if race.Enabled {
		maxTerms = 100 // each term costs about ten times as much
	}
	reader := func(f func()) {
		wg.Go(func() {
			for ctx.Err() == nil {
				f()
				calls.Add(1)
			}
		})
	}
	for range 4 {
		reader(func() {
			s := a.e.Stats()
			if s.Leading {
				assert.False(t, s.ValidUntil.IsZero(), "Stats: leading without a validity")
			} else {
				assert.True(t, s.ValidUntil.IsZero(), "Stats: a validity while not leading")
			}
		})
	}
	reader(func() {
		if err := check(&http.Request{}); err != nil {
			assert.True(t, errors.Is(err, relect.ErrWorkOverrun) || errors.Is(err, relect.ErrCutOff), "health check: %v", err)
		}
	})
	reader(func() {
		if _, leading := a.e.Term(); leading {
			a.e.IsLeader()
		}
		a.e.Leader()
		a.e.Events()
		a.e.Candidates()
	})

	// A liveness bound, not a measurement: 300 terms took 25 s on a busy
	// machine without the race detector, and a bound of a minute could be
	// missed under it.
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for a.e.Stats().TermsStarted < maxTerms && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	wg.Wait()
	a.stop()

	started := a.eventsOf(relect.EventStartedLeading)
	require.GreaterOrEqual(t, len(started), int(maxTerms), "%d terms in 5 minutes", maxTerms)
	require.Len(t, a.eventsOf(relect.EventStoppedLeading), len(started))
	t.Logf("%d terms in %v, %d reader calls", len(started), took.Round(time.Millisecond), calls.Load())
	a.checkEvents()
}

// A Logger whose handler blocks for longer than the renew deadline delays
// nothing: relect's own records and client-go's reach it from a goroutine of
// their own, so renewals go on and the leader keeps its one term.
func TestSlowLoggerNeverDelaysTheElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every Handle blocks, as a logger writing to a stalled pipe would.
		logs := &testlog.Handler{Level: testlog.All, Wait: func() { time.Sleep(3 * rd) }}
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Logger = slog.New(logs)
		})
		b := newCandidate(t, api, "b", nil)
		a.start()
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		b.start()
		time.Sleep(5 * ld)
		synctest.Wait()
		assert.True(t, a.e.IsLeader(), "the leader kept its term")
		assert.False(t, b.e.IsLeader())
		s := a.e.Stats()
		assert.Equal(t, uint64(1), s.TermsStarted)
		assert.Less(t, time.Since(s.LastRenewal), 2*rp, "renewals went on")
		a.stop()
		b.stop()
		assert.NotEmpty(t, logs.Records(), "the handler was called")
		assert.Equal(t, 1, a.count(relect.EventStartedLeading))
		a.checkEvents()
	})
}
