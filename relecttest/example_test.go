package relecttest_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
)

// Two candidates on one in-memory Lease API inside a synctest bubble: the
// first leads; its API calls fail, so it steps down RenewDeadline after its
// last successful renewal was sent, and the second takes over once the lease
// has expired. Simulated time makes the 15-second lease run instantly.
func Example() {
	t := &testing.T{} // in a real test, use the test's *testing.T
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		// The Lease as a release leaves it, so the first candidate takes
		// it at once: relect creates a missing Lease only LeaseDuration
		// after it found it missing.
		api.PutReleased("default", "example")
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		var electors []*relect.Elector
		done := make(chan struct{})
		for _, name := range []string{"a", "b"} {
			e, err := relect.New(relect.Options{
				Client:           api.Client(name).Clientset(),
				Namespace:        "default",
				Name:             "example",
				Identity:         name,
				OnStartedLeading: func(ctx context.Context) { <-ctx.Done() },
			})
			if err != nil {
				panic(err)
			}
			electors = append(electors, e)
			go func() { e.Run(ctx); done <- struct{}{} }()
			synctest.Wait()
		}
		fmt.Println("holder:", api.Holder("default", "example"))

		api.Client("a").Fail(relecttest.Error(500))
		for electors[0].IsLeader() {
			time.Sleep(time.Millisecond)
		}
		fmt.Println("a stepped down after", time.Since(start))
		for !electors[1].IsLeader() {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		// b polls every 2 to 4.4 s (RetryPeriod with client-go's jitter).
		fmt.Println("holder:", api.Holder("default", "example"),
			"- took over within 15s to 19.4s:", took >= 15*time.Second && took <= 19400*time.Millisecond)
		cancel()
		<-done
		<-done
	})
	// Output:
	// holder: a
	// a stepped down after 10s
	// holder: b - took over within 15s to 19.4s: true
}
