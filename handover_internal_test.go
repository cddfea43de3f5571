package relect

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/defaults"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A HandOver to a candidate the leader's view does not know reads its
// registration once, a registry call that waits for the bucket's spare
// tokens: one RetryPeriod at most, then HandOver refuses, saying so, and
// the term goes on. The wait had no limit: with the smallest bucket the
// leader's own calls kept it from filling for 40 s, and the read then
// found the named candidate — stopped at the call — started again and
// registered, and HandOver handed the lease over 40 s after it was asked
// (TestSimulationLine, seed 950 widened by 10: liveness/late-leader in
// 13 of 3,000 replays). Here the bucket is spent at the call, refills in
// about 7 s, and b registers 3–5 s after the call.
func TestHandOverReadWaitsARetryPeriodAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		ctx, cancel := context.WithCancel(context.Background())
		var runs sync.WaitGroup
		t.Cleanup(func() { cancel(); runs.Wait() })
		start := func(id string) *Elector {
			e, err := New(Options{
				Client:           api.Client(id).Clientset(),
				Namespace:        "default",
				Name:             "lease",
				Identity:         id,
				OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
				RateLimit:        1, // the least New accepts at RetryPeriod 2 s
				RateBurst:        minRateBurst,
			})
			require.NoError(t, err)
			runs.Go(func() { _ = e.Run(ctx) })
			return e
		}
		rp := defaults.RetryPeriod
		a := start("a")
		listed := func() bool {
			a.st.mu.Lock()
			defer a.st.mu.Unlock()
			_, loaded := a.st.succession.MayLead("b", time.Now())
			return loaded
		}
		for i := 0; i < 600 && !listed(); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		require.True(t, listed(), "a has listed the registry")
		require.True(t, a.IsLeader())

		a.gw.limiter.AllowN(time.Now(), int(a.gw.limiter.Tokens())) // spent by a's other calls
		asked := time.Now()
		handedOver := make(chan error, 1)
		go func() { handedOver <- a.HandOver(context.Background(), "b", nil) }()
		time.Sleep(rp)
		b := start("b") // after a's read should have been answered

		var err error
		select {
		case err = <-handedOver:
		case <-time.After(time.Minute):
			t.Fatal("HandOver did not return")
		}
		t.Logf("HandOver returned after %v: %v", time.Since(asked), err)
		require.ErrorIs(t, err, ErrUnknownCandidate, "b was not registered at the call")
		assert.ErrorContains(t, err, "the bucket spared no token within 2s")
		assert.ErrorContains(t, err, "try again")
		assert.LessOrEqual(t, time.Since(asked), rp, "a RetryPeriod's wait, not the bucket's refill")
		time.Sleep(rp)
		assert.True(t, a.IsLeader(), "the term goes on")
		assert.False(t, b.IsLeader())
	})
}
