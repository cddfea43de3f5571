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
)

// A candidate registers a retry period or so after Run starts (not with
// the first campaign's calls), renews every Renewal, renews at once when
// asked (a shard member, the line's warden), and deletes its registration
// when Run ends.
func TestRegisterWritesRenewsAndDeregisters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("a")
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		reg, wait := Register(ctx, testConfig(client, "a", "i1"), calls, up)
		name := wire.RegistrationName(testLease, "a")

		time.Sleep(rp/2 - time.Millisecond) // the first write is at RetryPeriod ± 50 %
		synctest.Wait()
		assert.Nil(t, api.Lease(testNS, name), "not registered with the first campaign's calls")
		time.Sleep(rp + 2*time.Millisecond)
		synctest.Wait()
		l := api.Lease(testNS, name)
		require.NotNil(t, l, "registered within RetryPeriod × 1.5")
		assert.Equal(t, "a", *l.Spec.HolderIdentity)
		assert.Equal(t, 1, client.Calls(relecttest.VerbCreate))

		time.Sleep(renewal * 11 / 10)
		synctest.Wait()
		assert.Equal(t, 1, client.Calls(relecttest.VerbUpdate), "renewed within Renewal × 1.1")
		reg.RenewNow()
		synctest.Wait()
		assert.Equal(t, 2, client.Calls(relecttest.VerbUpdate), "renewed at once when asked")

		cancel()
		wait()
		assert.Nil(t, api.Lease(testNS, name), "deleted when Run ends")
		assert.Equal(t, 1, calls.Count(VerbDeregister))
		assert.Empty(t, up.forbidden)
		assert.Empty(t, up.duplicates)
	})
}

// A registration left by a previous process of the same identity is
// taken over (read and updated), and is no duplicate; one written by
// another process since this one wrote it is reported as a duplicate
// identity, naming both instances.
func TestRegisterTakesOverAndReportsADuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("a")
		name := wire.RegistrationName(testLease, "a")
		api.Put(testRegistration("a", "before")(nil, time.Now()))
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		reg, wait := Register(ctx, testConfig(client, "a", "i1"), calls, up)
		defer wait()
		defer cancel()

		time.Sleep(2 * rp)
		synctest.Wait()
		assert.Equal(t, "i1", api.Lease(testNS, name).Annotations[wire.AnnotationInstance], "taken over")
		assert.Equal(t, 1, client.Calls(relecttest.VerbGet), "read after its create found it there")
		assert.Empty(t, up.duplicates, "a previous process's is no duplicate")

		api.Put(testRegistration("a", "i2")(api.Lease(testNS, name), time.Now())) // another process writes it
		reg.RenewNow()
		synctest.Wait()
		up.with(func() {
			require.Len(t, up.duplicates, 1)
			assert.Contains(t, up.duplicates[0], "instance i2")
			assert.Contains(t, up.duplicates[0], "instance i1")
		})
		assert.Equal(t, "i1", api.Lease(testNS, name).Annotations[wire.AnnotationInstance], "written again")
	})
}

// A duplicate identity is reported even when the write after the read of
// what the other process wrote fails (here with 409: the other process
// renewed it again between the read and the write); the registration is
// written at the retry. Reporting it read the name of the object written,
// which such a failure leaves nil: the timer's goroutine panicked.
func TestDuplicateReportedWhenTheWriteAfterTheReadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("a")
		name := wire.RegistrationName(testLease, "a")
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		reg, wait := Register(ctx, testConfig(client, "a", "i1"), calls, up)
		defer wait()
		defer cancel()
		time.Sleep(2 * rp)
		synctest.Wait()
		require.NotNil(t, api.Lease(testNS, name))

		api.Put(testRegistration("a", "i2")(api.Lease(testNS, name), time.Now())) // another process writes it
		// The renewal's calls: its Update (409: changed), a Create (409:
		// there), the Get, and the Update of what it read, which fails.
		n := 0
		calls.FailWith(func(verb string) error {
			if n++; verb == VerbRegister && n == 4 {
				return relecttest.Error(409)
			}
			return nil
		})
		reg.RenewNow()
		synctest.Wait()
		up.with(func() {
			require.Len(t, up.duplicates, 1)
			assert.Contains(t, up.duplicates[0], name)
		})
		assert.Equal(t, "i2", api.Lease(testNS, name).Annotations[wire.AnnotationInstance], "not written: it failed")

		time.Sleep(4 * rp) // the retry, after BackoffMax
		synctest.Wait()
		assert.Equal(t, "i1", api.Lease(testNS, name).Annotations[wire.AnnotationInstance], "written at the retry")
	})
}

// A 403 to the registration's write turns the registry off: no more
// writes, nothing to delete. Where the registry is Needed (shards), a 403
// is retried after the backoff as any error.
func TestRegisterForbidden(t *testing.T) {
	for _, needed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			api := relecttest.NewLeaseAPI()
			client := api.Client("a")
			client.FailVerb(relecttest.VerbCreate, relecttest.Error(403))
			calls, up := &fakeCalls{}, newFakeReports()
			cfg := testConfig(client, "a", "i1")
			cfg.Needed = needed
			ctx, cancel := context.WithCancel(t.Context())
			_, wait := Register(ctx, cfg, calls, up)

			time.Sleep(2 * rp)
			synctest.Wait()
			assert.Equal(t, 1, calls.Count(VerbRegister), "needed %v", needed)
			time.Sleep(cfg.BackoffMax)
			synctest.Wait()
			if needed {
				assert.Empty(t, up.forbidden)
				assert.Equal(t, 2, calls.Count(VerbRegister), "retried after the backoff")
			} else {
				assert.Equal(t, []string{VerbRegister}, up.forbidden)
				assert.Equal(t, 1, calls.Count(VerbRegister), "no write after a 403")
			}
			cancel()
			wait()
			assert.Zero(t, calls.Count(VerbDeregister), "nothing written, nothing to delete")
		})
	}
}

// When the registry turns off during Run (the leader's list got 403), the
// registration, which nobody reads, is deleted at once.
func TestRegistrationDeletedWhenTheRegistryTurnsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("a")
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, wait := Register(ctx, testConfig(client, "a", "i1"), calls, up)
		name := wire.RegistrationName(testLease, "a")

		time.Sleep(2 * rp)
		synctest.Wait()
		require.NotNil(t, api.Lease(testNS, name))
		up.Forbidden(VerbListCandidates, relecttest.Error(403))
		synctest.Wait()
		assert.Nil(t, api.Lease(testNS, name), "deleted while Run goes on")
		time.Sleep(3 * renewal)
		synctest.Wait()
		assert.Nil(t, api.Lease(testNS, name), "not written again")
		cancel()
		wait()
		assert.Equal(t, 1, calls.Count(VerbDeregister))
	})
}

// A 403 to the deletion at the end is reported (CannotDelete).
func TestDeregisterForbidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("a")
		calls, up := &fakeCalls{}, newFakeReports()
		ctx, cancel := context.WithCancel(t.Context())
		_, wait := Register(ctx, testConfig(client, "a", "i1"), calls, up)
		time.Sleep(2 * rp)
		synctest.Wait()
		client.FailVerb(relecttest.VerbDelete, relecttest.Error(403))
		cancel()
		wait()
		assert.Equal(t, []string{VerbDeregister}, up.cannot)
		assert.NotNil(t, api.Lease(testNS, wire.RegistrationName(testLease, "a")), "it stays")
	})
}
