package relect_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// A leader cut off from the API must stop leading before any follower —
// relect's, which watch, or plain client-go's, which poll and tell renewals
// apart only to the whole second — can take over. Short durations with a
// margin under a second and renewals several times a second, over many
// random phases of the cut against the wall-clock second.
func TestNoOverlapWhenLeaderCutOff(t *testing.T) {
	const (
		leaseDuration = 2 * time.Second
		renewDeadline = 1500 * time.Millisecond
		retryPeriod   = 300 * time.Millisecond
		trials        = 100
	)
	for _, follower := range []string{"relect", "client-go"} {
		t.Run(follower, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for trial := range trials {
				startOffset := time.Duration(rng.IntN(1000)) * time.Millisecond
				cutAfter := 3*time.Second + time.Duration(rng.IntN(2000))*time.Millisecond
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(startOffset)
					api := newAPI()
					a := newCandidate(t, api, "a", func(o *relect.Options) {
						o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
					})
					a.start()
					synctest.Wait()

					ctx, cancel := context.WithCancel(context.Background())
					bLeads := func() bool { return false }
					bDone := make(chan struct{})
					switch follower {
					case "relect":
						b := newCandidate(t, api, "b", func(o *relect.Options) {
							o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = leaseDuration, renewDeadline, retryPeriod
						})
						b.start()
						bLeads = b.e.IsLeader
						go func() { <-ctx.Done(); b.stop(); close(bDone) }()
					case "client-go":
						le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
							Lock: &resourcelock.LeaseLock{LeaseMeta: metaFor(), Client: api.Client("b").Clientset().CoordinationV1(),
								LockConfig: resourcelock.ResourceLockConfig{Identity: "b"}},
							LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
							Callbacks: leaderelection.LeaderCallbacks{
								OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {},
							},
						})
						if err != nil {
							t.Fatal(err)
						}
						bLeads = le.IsLeader
						go func() { le.Run(ctx); close(bDone) }()
					}

					time.Sleep(cutAfter)
					api.Client("a").Partition()
					for range 4000 {
						if a.e.IsLeader() && bLeads() {
							t.Fatalf("trial %d: both lead at %v", trial, time.Now())
						}
						time.Sleep(time.Millisecond)
					}
					api.Client("a").Heal()
					cancel()
					<-bDone
					a.stop()
				})
			}
		})
	}
}
