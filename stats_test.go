package relect_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// Stats follows an election: counts by verb and result, renewal times,
// validity, and the degraded signal after DegradedAfter failures in a row,
// cleared by the next success.
func TestStatsAndDegradedSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI() // no Lease: a creates it after LeaseDuration
		a := newCandidate(t, api, "a", func(o *relect.Options) { o.DegradedAfter = 3 })
		a.start()
		time.Sleep(ld)
		synctest.Wait()
		s := a.e.Stats()
		assert.True(t, s.Leading)
		assert.Equal(t, "a", s.Leader)
		assert.Equal(t, uint64(1), s.TermsStarted)
		assert.Equal(t, time.Now(), s.LastRenewal)
		assert.Equal(t, time.Now().Add(rd), s.ValidUntil)
		assert.Equal(t, uint64(1), s.Calls[relect.CallKey{Verb: "get", Result: "not_found"}])
		assert.Equal(t, uint64(1), s.Calls[relect.CallKey{Verb: "create", Result: "ok"}])

		api.Client("a").Fail(relecttest.Error(403))
		waitFor(t, time.Minute, "degraded", func() bool { return a.e.Stats().Degraded })
		synctest.Wait() // let the event reader catch up
		s = a.e.Stats()
		assert.GreaterOrEqual(t, s.ConsecutiveFailures, 3)
		assert.Equal(t, 1, a.count(relect.EventDegraded))
		var callErr *relect.CallError
		require.ErrorAs(t, a.eventsOf(relect.EventDegraded)[0].Err, &callErr)
		assert.True(t, apierrors.IsForbidden(callErr), "the API's error is reachable")
		assert.NotZero(t, s.Calls[relect.CallKey{Verb: "update", Result: "forbidden"}])

		api.Client("a").Heal()
		waitFor(t, time.Minute, "recovered", func() bool { return !a.e.Stats().Degraded })
		synctest.Wait()
		assert.Equal(t, 1, a.count(relect.EventRecovered))
		assert.Zero(t, a.e.Stats().ConsecutiveFailures)
		a.stop()
		a.checkEvents()
	})
}

// fakeRecorder records Kubernetes Events.
type fakeRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *fakeRecorder) Eventf(_ runtime.Object, eventType, reason, message string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, eventType+" "+reason+" "+fmt.Sprintf(message, args...))
}

// Kubernetes Events are recorded once per term, when they happen — not
// client-go's "stopped leading" on every exit.
func TestKubernetesEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := newAPI()
		rec := &fakeRecorder{}
		a := newCandidate(t, api, "a", func(o *relect.Options) { o.EventRecorder = rec })
		b := newCandidate(t, api, "b", func(o *relect.Options) { o.EventRecorder = rec })
		a.start()
		synctest.Wait()
		b.start()
		time.Sleep(ld)
		b.stop()
		a.stop()
		assert.Equal(t, []string{
			"Normal LeaderElection a became leader",
			"Normal LeaderElection a stopped leading",
			"Normal LeaderElection a released the lease",
		}, rec.msgs)
	})
}
