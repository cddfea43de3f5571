package relect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// noReports is a gatewayReports that records nothing.
type noReports struct{}

func (noReports) called(string, string, error, time.Duration)      {}
func (noReports) observed(*record, *coordinationv1.Lease) bool     { return false }
func (noReports) observedMissing(bool)                             {}
func (noReports) wrote(time.Time, *record, string)                 {}
func (noReports) sending(*record)                                  {}
func (noReports) mine(*record) bool                                { return false }
func (noReports) createAllowedAt() time.Time                       { return time.Time{} }
func (noReports) acquireAllowedAt(*coordinationv1.Lease) time.Time { return time.Time{} }
func (noReports) annotate(*coordinationv1.Lease, *record)          {}
func (noReports) heard()                                           {}

// The leader deletes lapsed registrations from the goroutine that reads
// the registry's watch: without the rate limiter's spare tokens it leaves
// them for the next sweep at once, instead of waiting for the bucket to
// refill. Under a low RateLimit that wait lasted tens of seconds, the
// watch went unread, and every registration of the view lapsed: the
// leader gave no shard to anyone (the shard simulation's seed 24173).
// This is the gateway's half, through the registry's Calls: TrySpare
// does not wait; the registry's is internal/registry's
// TestLapsedRegistrationsDoNotHoldTheWatchBack.
func TestTrySpareDoesNotWaitForTheBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("leader")
		cfg := &config{callTimeout: time.Second}
		cfg.leases = client.Clientset().CoordinationV1().Leases("default")
		gw := &gateway{cfg: cfg, limiter: rate.NewLimiter(0.4, 10), up: noReports{}}
		gw.limiter.AllowN(time.Now(), 8) // two tokens left: fewer than the spare ones
		calls := registryCalls(gw)
		del := func(ctx context.Context) error { return cfg.leases.Delete(ctx, "gone", metav1.DeleteOptions{}) }

		start := time.Now()
		tried, _ := calls.TrySpare(context.Background(), registry.VerbDeleteCandidate, true, del)
		assert.False(t, tried)
		assert.Zero(t, time.Since(start), "it did not wait for the bucket")
		assert.Zero(t, client.Calls(relecttest.VerbDelete), "no deletion without spare tokens")

		time.Sleep(10 * time.Second) // refilled: 4 tokens more
		tried, _ = calls.TrySpare(context.Background(), registry.VerbDeleteCandidate, true, del)
		assert.True(t, tried)
		assert.Equal(t, 1, client.Calls(relecttest.VerbDelete), "with spare tokens, it deletes")
	})
}
