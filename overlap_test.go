package relect_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// The known findings' minimal reproducers, with relect and relecttest only,
// kept as regression tests now that relect is fixed. (F1's, docs/reliability.md,
// is TestNoOverlapWhenLeaderCutOff.)

// F2: deleting a held Lease by hand, or emptying its holder, let a follower
// take over at once, while the holder learns of it only at its next
// renewal; if that renewal fails (here: a partition), the holder leads on for
// up to RenewDeadline. The last cases fixed: a newcomer, which never saw the
// Lease, created a deleted one at once.
func TestKnownFindingRevokingEdit(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*relecttest.LeaseAPI) error
	}{
		{"delete", func(api *relecttest.LeaseAPI) error { return api.Delete(ns, lease) }},
		{"empty holder", func(api *relecttest.LeaseAPI) error {
			return api.Edit(ns, lease, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("") })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := newAPI()
				a := newCandidate(t, api, "a", nil)
				b := newCandidate(t, api, "b", nil)
				a.start()
				synctest.Wait()
				require.True(t, a.e.IsLeader())
				b.start()
				time.Sleep(ld + rp/4) // between two renewals of a; b follows
				// a is cut off: its next renewal hangs, and its watch,
				// once closed, cannot be opened again.
				api.Client("a").Partition()
				api.CloseWatches()
				synctest.Wait()
				if err := tc.edit(api); err != nil {
					t.Fatal(err)
				}
				// A newcomer that never saw the Lease, started right
				// after the edit.
				c := newCandidate(t, api, "c", nil)
				c.start()
				ctx, cancel := context.WithTimeout(context.Background(), rd)
				defer cancel()
				for ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
					if l := leaders(a, b, c); len(l) > 1 {
						t.Errorf("two leaders %v", l)
						break
					}
				}
				api.Client("a").Heal()
				a.stop()
				b.stop()
				c.stop()
			})
		})
	}
}
