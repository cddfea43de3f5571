package relect_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/operator"

	"github.com/relect/relect/internal/defaults"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// An operator asks the leader to yield, or to hand over, by writing a
// Request into the Lease from any machine: the leader honours it on its
// watch at once, as Yield and HandOver do, and the write that follows
// removes it.
func TestRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 3, nil)
		stopMonitor := monitor(t, 10*time.Millisecond, cs...)
		op := api.Client("operator").Clientset()
		ctx := context.Background()
		a := cs[0]
		next := named(cs, a.e.Candidates()[1].Identity)

		r, err := operator.RequestYield(ctx, op, ns, lease, "alice")
		require.NoError(t, err)
		assert.Equal(t, a.name, r.Holder)
		synctest.Wait()
		assert.True(t, next.e.IsLeader(), "yielded to the first in line")
		assert.ErrorIs(t, a.eventsOf(relect.EventStoppedLeading)[0].Err, relect.ErrYielded)
		_, pending := operator.PendingRequest(api.Lease(ns, lease))
		assert.False(t, pending, "the release removed it")

		time.Sleep(ld)
		r, err = operator.RequestHandOver(ctx, op, ns, lease, a.name, "alice", nil)
		require.NoError(t, err)
		assert.Equal(t, next.name, r.Holder)
		synctest.Wait()
		waitFor(t, 2*rp, "a leads", a.e.IsLeader) // after its backoff wait
		assert.Equal(t, a.name, next.eventsOf(relect.EventHandedOver)[0].Leader)

		// A handover to a candidate the leader does not know is refused,
		// reported once, and removed by the leader's next renewal.
		time.Sleep(ld)
		_, err = operator.RequestHandOver(ctx, op, ns, lease, "nobody", "mallory", nil)
		require.NoError(t, err)
		synctest.Wait()
		pr, pending := operator.PendingRequest(api.Lease(ns, lease))
		require.True(t, pending)
		assert.Equal(t, "nobody", pr.To)
		time.Sleep(rp + 10*time.Millisecond)
		assert.True(t, a.e.IsLeader(), "the leader leads on")
		_, pending = operator.PendingRequest(api.Lease(ns, lease))
		assert.False(t, pending, "removed by the next renewal")
		refused := 0
		for _, ev := range a.eventsOf(relect.EventError) {
			if assert.ErrorIs(t, ev.Err, relect.ErrUnknownCandidate) {
				refused++
			}
		}
		assert.Equal(t, 1, refused, "reported once")

		// A stale request — addressed to an earlier holder — is ignored.
		require.NoError(t, api.Edit(ns, lease, func(l *coordinationv1.Lease) {
			l.Annotations["relect.io/request"] = `{"holder":"` + next.name + `","term":1,"at":"2000-01-01T00:00:00Z"}`
		}))
		synctest.Wait()
		assert.True(t, a.e.IsLeader(), "a stale request changes nothing")

		_, err = operator.RequestYield(ctx, op, ns, "no-such-lease", "alice")
		assert.ErrorIs(t, err, operator.ErrNoLeader)
		_, err = operator.RequestHandOver(ctx, op, ns, lease, a.name, "alice", nil)
		assert.Error(t, err, "to the leader itself")
		stopMonitor()
		stopAll(cs...)
	})
}

// Two processes that share one identity cannot tell each other's terms
// from their own. relect stays safe (the other's records are a
// stranger's), and says so: the one that does not lead sees the Lease it
// "holds" renewed by someone else, and each sees the other write their
// registration.
func TestDuplicateIdentityIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "same", nil)
		a.start()
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		b := newCandidate(t, api, "same", nil)
		b.start()
		time.Sleep(ld)
		synctest.Wait()
		assert.False(t, b.e.IsLeader(), "the other's record is a stranger's")
		duplicate := func(c *candidate, how string) int {
			n := 0
			for _, ev := range c.eventsOf(relect.EventError) {
				if errors.Is(ev.Err, relect.ErrDuplicateIdentity) && strings.Contains(ev.Err.Error(), how) {
					n++
				}
			}
			return n
		}
		assert.Equal(t, 1, duplicate(b, "renewed by a process that is not this one"), "b saw its identity's lease renewed by another, once")
		// Whichever registered second took the other's registration over:
		// the other sees it at its next renewal.
		time.Sleep(defaults.RegistrationRenewal * 12 / 10)
		synctest.Wait()
		assert.GreaterOrEqual(t, duplicate(a, "registration")+duplicate(b, "registration"), 1, "one saw the other write their registration")
		stopAll(a, b)
	})
}

// A candidate whose Role lacks list (or watch) on leases turns the
// registry off, says once which rule is missing and how to go without it,
// and deletes its registration, which nobody can read.
func TestRegistryForbiddenSaysWhatToDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		a := newCandidate(t, api, "a", nil)
		a.client.FailVerb(relecttest.VerbList, relecttest.Error(403))
		a.start()
		time.Sleep(ld)
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		var off []error
		for _, ev := range a.eventsOf(relect.EventError) {
			if errors.Is(ev.Err, relect.ErrRegistryOff) {
				off = append(off, ev.Err)
			}
		}
		require.Len(t, off, 1, "reported once")
		assert.ErrorContains(t, off[0], "may not list")
		assert.ErrorContains(t, off[0], "DisableRegistry")
		assert.Len(t, api.Leases(ns), 1, "its registration was deleted: only the election's Lease is left")
		stopAll(a)
	})
}

// A request to hand over is held to HandOver's rule where the leader
// cannot check the name: with its registry off, only an Unregistered one is
// honoured.
func TestRequestedHandOverWithTheRegistryOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		cs := fleet(t, api, 2, func(_ int, o *relect.Options) { o.DisableRegistry, o.Priority = true, 0 })
		a, b := cs[0], cs[1]
		op := api.Client("operator").Clientset()
		_, err := operator.RequestHandOver(context.Background(), op, ns, lease, "nobody", "mallory", nil)
		require.NoError(t, err)
		synctest.Wait()
		assert.True(t, a.e.IsLeader(), "a forged name is refused")
		_, err = operator.RequestHandOver(context.Background(), op, ns, lease, b.name, "alice", &relect.HandOverOptions{Unregistered: true})
		require.NoError(t, err)
		synctest.Wait()
		waitFor(t, 2*rp, "b leads", b.e.IsLeader)
		stopAll(cs...)
	})
}

// A request is withdrawn only while it is still the same request: one
// already gone, or another written since, is left alone.
func TestWithdrawRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		putLease(api, "x", 15, 3) // held by a leader that reads no request
		op := api.Client("operator").Clientset()
		ctx := context.Background()
		r, err := operator.RequestYield(ctx, op, ns, lease, "alice")
		require.NoError(t, err)
		assert.Equal(t, operator.Request{Holder: "x", Term: 3, By: "alice", At: r.At}, r)
		removed, err := operator.WithdrawRequest(ctx, op, ns, lease, r)
		require.NoError(t, err)
		assert.True(t, removed)
		_, pending := operator.PendingRequest(api.Lease(ns, lease))
		assert.False(t, pending)
		removed, err = operator.WithdrawRequest(ctx, op, ns, lease, r)
		require.NoError(t, err)
		assert.False(t, removed, "gone already")

		time.Sleep(time.Second)
		other, err := operator.RequestHandOver(ctx, op, ns, lease, "y", "bob", nil)
		require.NoError(t, err)
		removed, err = operator.WithdrawRequest(ctx, op, ns, lease, r)
		require.NoError(t, err)
		assert.False(t, removed, "another's request stays")
		got, pending := operator.PendingRequest(api.Lease(ns, lease))
		assert.True(t, pending)
		assert.Equal(t, other.To, got.To)
	})
}
