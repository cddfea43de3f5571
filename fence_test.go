package relect_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/operator"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fences returns the fences of c's terms, in order, from its events.
func fences(c *candidate) []relect.Fence {
	var out []relect.Fence
	for _, ev := range c.eventsOf(relect.EventStartedLeading) {
		out = append(out, ev.Fence)
	}
	return out
}

// Every term's fence is larger than every earlier term's: also the same
// candidate's next term, which shares its term number, and after a Yield.
// The work reads it from its context; Stats, Fence, the events and the
// Lease's annotation (from the term's first renewal) carry it too.
func TestFenceGrowsWhereTheTermNumberDoesNot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		got := make(chan relect.Fence, 16)
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.OnStartedLeading = func(ctx context.Context) {
				f, ok := relect.FenceFromContext(ctx)
				require.True(t, ok)
				got <- f
				<-ctx.Done()
			}
		})
		a.start()
		synctest.Wait()
		first := <-got
		assert.Equal(t, first, a.e.Stats().Fence)
		time.Sleep(rp + time.Millisecond)
		assert.Equal(t, first, operator.Fence(api.Lease(ns, lease)), "published with the renewals")
		n1, _ := a.e.Term()

		// The renewals fail past the renew deadline, nobody takes over, and
		// the same candidate takes its own record back: the same number.
		a.client.Fail(relecttest.Error(500))
		waitFor(t, 2*rd, "the term expired", func() bool { return !a.e.IsLeader() })
		a.client.Heal()
		waitFor(t, 2*ld, "a leads again", a.e.IsLeader)
		second := <-got
		n2, _ := a.e.Term()
		assert.Equal(t, n1, n2, "the term number is shared")
		assert.Equal(t, 1, second.Compare(first), "the fence is not: %s after %s", second, first)

		// A Yield, and the same candidate leads again (nobody else is).
		require.NoError(t, a.e.Yield(context.Background()))
		waitFor(t, 2*ld, "a leads again", a.e.IsLeader)
		third := <-got
		assert.Equal(t, 1, third.Compare(second), "%s after %s", third, second)
		a.stop()
		assert.Equal(t, []relect.Fence{first, second, third}, fences(a))
		assert.Empty(t, a.e.Stats().Fence, "none outside a term")
	})
}

// A Lease deleted by hand and created again by a plain client-go
// candidate starts its leaseTransitions over at 0; the next relect term's
// fence is larger all the same.
func TestFenceGrowsAcrossARecreatedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		before := fences(a)[0]
		a.stop()

		require.NoError(t, api.Delete(ns, lease))
		ctx, cancel := context.WithCancel(context.Background())
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: ns, Name: lease},
				Client: api.Client("cg").Clientset().CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "cg"}},
			LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp, ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(ctx context.Context) { <-ctx.Done() }, OnStoppedLeading: func() {}},
		})
		require.NoError(t, err)
		done := make(chan struct{})
		go func() { defer close(done); le.Run(ctx) }()
		waitFor(t, ld, "client-go leads", func() bool { return api.Holder(ns, lease) == "cg" })
		assert.Zero(t, *api.Lease(ns, lease).Spec.LeaseTransitions, "client-go started the count over")
		cancel()
		<-done

		b := newCandidate(t, api, "b", nil)
		b.start()
		waitFor(t, 2*ld, "b leads", b.e.IsLeader)
		n, _ := b.e.Term()
		after := fences(b)[0]
		assert.Equal(t, 1, after.Compare(before), "fence %s after %s, though the term number is %d", after, before, n)
		b.stop()
	})
}

// A deposed leader's late write is refused by a store that checks fences:
// a paused leader wakes after its successor wrote, and writes with the
// fence of its own, ended term.
func TestDeposedLeadersLateWriteIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		var store fencing.Guard
		late := make(chan error, 1)
		wake := make(chan struct{})
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.OnStartedLeading = func(ctx context.Context) {
				f, _ := relect.FenceFromContext(ctx)
				require.NoError(t, store.Admit(f))
				<-wake // paused (a GC pause, a stalled request) past its term
				late <- store.Admit(f)
				<-ctx.Done()
			}
		})
		b := newCandidate(t, api, "b", func(o *relect.Options) {
			o.OnStartedLeading = func(ctx context.Context) {
				f, _ := relect.FenceFromContext(ctx)
				require.NoError(t, store.Admit(f))
				<-ctx.Done()
			}
		})
		a.start()
		synctest.Wait()
		b.start()
		synctest.Wait()
		a.client.Partition() // a's renewals hang: its term ends, b takes over
		waitFor(t, 2*ld, "b leads", b.e.IsLeader)
		close(wake)
		err := <-late
		assert.ErrorIs(t, err, fencing.ErrStale)
		synctest.Wait() // b's events reach its collector (a goroutine of the harness)
		assert.False(t, errors.Is(store.Admit(fences(b)[0]), fencing.ErrStale), "b writes on")
		a.client.Heal()
		stopAll(a, b)
	})
}

// With a Lock relect does not see the Lease object: no fence.
func TestNoFenceWithALock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		lock := newRecordingLock(api, "a")
		ok := make(chan bool, 1)
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name, o.Identity, o.Lock = nil, "", "", "", lock
			o.OnStartedLeading = func(ctx context.Context) {
				_, has := relect.FenceFromContext(ctx)
				ok <- has
				<-ctx.Done()
			}
		})
		a.start()
		waitFor(t, 2*ld, "a leads", a.e.IsLeader)
		assert.False(t, <-ok)
		a.stop()
	})
}

// Compare orders valid fences as integers of any length, puts every
// fence that is not valid below every valid one, and is a total order
// (antisymmetric and transitive) over a mix of both.
func TestFenceCompareIsATotalOrder(t *testing.T) {
	fs := []relect.Fence{"", "garbage", "n/a", "010", "0", "-3", "1x", "2", "9", "10", "99", "100", "18446744073709551615", "18446744073709551616"}
	for _, f := range fs {
		for _, g := range fs {
			assert.Equal(t, -g.Compare(f), f.Compare(g), "antisymmetric: %q, %q", f, g)
			for _, h := range fs {
				if f.Compare(g) <= 0 && g.Compare(h) <= 0 {
					assert.LessOrEqual(t, f.Compare(h), 0, "transitive: %q ≤ %q ≤ %q", f, g, h)
				}
			}
		}
	}
	assert.Equal(t, -1, relect.Fence("9").Compare("10"), "integers, not text")
	assert.Equal(t, 1, relect.Fence("18446744073709551616").Compare("18446744073709551615"), "beyond 64 bits")
	for _, bad := range []relect.Fence{"", "n/a", "010", "1x"} {
		assert.Equal(t, -1, bad.Compare("2"), "%q is older than any valid fence: it never blocks a real term's write", bad)
	}
}

func TestParseFence(t *testing.T) {
	for _, ok := range []string{"1", "42", "18446744073709551616"} {
		f, err := relect.ParseFence(ok)
		require.NoError(t, err)
		assert.Equal(t, relect.Fence(ok), f)
		assert.True(t, f.Valid())
	}
	for _, bad := range []string{"", "0", "010", "-1", "1x", " 1", "n/a"} {
		f, err := relect.ParseFence(bad)
		assert.ErrorIs(t, err, relect.ErrInvalidFence, "%q", bad)
		assert.Equal(t, relect.Fence(""), f)
		assert.False(t, relect.Fence(bad).Valid())
		if bad != "" {
			assert.Contains(t, err.Error(), `"`+bad+`"`, "the message names the text")
		}
	}
	_, err := relect.ParseFence("")
	assert.Contains(t, err.Error(), "no fence")

	n, err := relect.Fence("42").Uint64()
	require.NoError(t, err)
	assert.Equal(t, uint64(42), n)
	_, err = relect.Fence("").Uint64()
	assert.ErrorIs(t, err, relect.ErrInvalidFence)
	assert.Contains(t, err.Error(), "no fence")
	_, err = relect.Fence("18446744073709551616").Uint64()
	assert.ErrorIs(t, err, relect.ErrInvalidFence)
	assert.Contains(t, err.Error(), "64 bits")

	assert.Equal(t, relect.Fence(""), operator.Fence(nil), "no Lease, no fence (and no panic)")
}

// A leader whose Lease's leaseTransitions is edited by hand goes on
// publishing its fence: the mark follows the record's number (client-go
// renews with the number it read), so relect status still shows it.
func TestFencePublishedAfterTransitionsEditedByHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.start()
		waitFor(t, ld, "a leads", a.e.IsLeader)
		f := fences(a)[0]
		waitFor(t, ld, "the fence is published", func() bool { return operator.Fence(api.Lease(ns, lease)) == f })
		require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) { n := *l.Spec.LeaseTransitions + 7; l.Spec.LeaseTransitions = &n }))
		time.Sleep(3 * ld)
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		assert.Equal(t, f, operator.Fence(api.Lease(ns, lease)), "the renewals after the edit publish the term's fence")
		a.stop()
	})
}
