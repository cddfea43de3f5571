package registry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/wire"
	"github.com/relect/relect/relecttest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// putRegistration stores id's registration in api, as written now.
func putRegistration(api *relecttest.LeaseAPI, id string) *coordinationv1.Lease {
	api.Put(testRegistration(id, "i-"+id)(nil, time.Now()))
	return api.Lease(testNS, wire.RegistrationName(testLease, id))
}

// The leader's view: listed half a retry period into the term (a departed
// registration, with no holder, and a Lease that is no registration left
// out), then kept by the watch — added, deleted, departed — and dropped
// when the term ends.
func TestWatchKeepsTheView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("leader")
		putRegistration(api, "a")
		b := testRegistration("b", "i-b")(nil, time.Now())
		b.Spec.HolderIdentity = nil // departed
		api.Put(b)
		api.PutReleased(testNS, testLease) // the election's: no registration
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Watch(ctx, testConfig(client, "leader", "i1"), calls, up)
		}()

		time.Sleep(rp/2 - time.Millisecond)
		synctest.Wait()
		assert.Zero(t, calls.Count(VerbListCandidates), "not with the acquisition's calls")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []string{"a"}, up.identities(), "listed")

		putRegistration(api, "c")
		synctest.Wait()
		assert.Equal(t, []string{"a", "c"}, up.identities(), "added")
		require.NoError(t, api.Delete(testNS, wire.RegistrationName(testLease, "a")))
		synctest.Wait()
		assert.Equal(t, []string{"c"}, up.identities(), "deleted")
		require.NoError(t, api.Edit(testNS, wire.RegistrationName(testLease, "c"), func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = nil
		}))
		synctest.Wait()
		assert.Equal(t, []string{}, up.identities(), "departed")
		assert.Equal(t, 1, up.lists)

		cancel()
		<-done
		assert.Nil(t, up.identities(), "dropped when the term ends")
	})
}

// A 403 to the leader's list or watch turns the registry off, and Watch
// returns; where the registry is Needed (shards), it is retried after the
// backoff.
func TestWatchForbidden(t *testing.T) {
	for _, tc := range []struct {
		verb, fails string
		needed      bool
	}{
		{VerbListCandidates, relecttest.VerbList, false},
		{VerbWatchCandidates, relecttest.VerbWatch, false},
		{VerbListCandidates, relecttest.VerbList, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			client := api.Client("leader")
			client.FailVerb(tc.fails, relecttest.Error(403))
			calls, up := &fakeCalls{}, newFakeReports()
			cfg := testConfig(client, "leader", "i1")
			cfg.Needed = tc.needed
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				Watch(ctx, cfg, calls, up)
			}()
			time.Sleep(rp/2 + rp + time.Millisecond) // the first list, and a retry after RetryPeriod
			synctest.Wait()
			if tc.needed {
				assert.Empty(t, up.forbidden)
				assert.Equal(t, 2, calls.Count(tc.verb), "retried")
				cancel()
			} else {
				assert.Equal(t, []string{tc.verb}, up.forbidden)
				assert.Equal(t, 1, calls.Count(tc.verb), "not retried")
			}
			<-done
		})
	}
}

// The leader deletes lapsed registrations from the goroutine that reads
// the registry's watch: without the rate limiter's spare tokens it leaves
// them for the next sweep at once, instead of waiting for the bucket to
// refill. Under a low RateLimit that wait lasted tens of seconds, the
// watch went unread, and every registration of the view lapsed: the
// leader gave no shard to anyone (the shard simulation's seed 24173). The
// gateway's half — TrySpare does not wait — is relect's
// TestTrySpareDoesNotWaitForTheBucket. With spare tokens, it deletes up to
// three per sweep, each conditional on the version it saw lapse: one
// renewed meanwhile stays.
func TestLapsedRegistrationsDoNotHoldTheWatchBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("leader")
		calls, up := &fakeCalls{}, newFakeReports()
		cfg := testConfig(client, "leader", "i1")
		w := &watcher{cfg: &cfg, calls: calls, up: up}
		for _, id := range []string{"a", "b", "c", "d"} {
			l := putRegistration(api, id)
			up.lapsed = append(up.lapsed, Version{Name: l.Name, RV: l.ResourceVersion})
		}
		putRegistration(api, "a") // renewed since it lapsed

		start := time.Now()
		w.deleteLapsed(context.Background())
		assert.Zero(t, time.Since(start), "it did not wait for the bucket")
		assert.Zero(t, client.Calls(relecttest.VerbDelete), "no deletion without spare tokens")
		assert.Equal(t, 1, calls.declined, "asked once, then left for the next sweep")

		calls.spare = true
		w.deleteLapsed(context.Background())
		assert.Equal(t, 3, client.Calls(relecttest.VerbDelete), "with spare tokens, it deletes: at most 3")
		for id, stays := range map[string]bool{"a": true, "b": false, "c": false, "d": true} {
			assert.Equal(t, stays, api.Lease(testNS, wire.RegistrationName(testLease, id)) != nil, id)
		}
		assert.Empty(t, up.cannot)
	})
}

// A 403 to a deletion of a lapsed registration is reported, and the
// others are left.
func TestDeleteLapsedForbidden(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	client := api.Client("leader")
	client.FailVerb(relecttest.VerbDelete, relecttest.Error(403))
	calls, up := &fakeCalls{spare: true}, newFakeReports()
	cfg := testConfig(client, "leader", "i1")
	w := &watcher{cfg: &cfg, calls: calls, up: up}
	for _, id := range []string{"a", "b"} {
		l := putRegistration(api, id)
		up.lapsed = append(up.lapsed, Version{Name: l.Name, RV: l.ResourceVersion})
	}
	w.deleteLapsed(context.Background())
	assert.Equal(t, []string{VerbDeleteCandidate}, up.cannot)
	assert.Equal(t, 1, client.Calls(relecttest.VerbDelete), "the others are left")
}
