package relect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
)

// noReports is a gatewayReports and registryReports that records nothing,
// but for the lapsed registrations it reports.
type noReports struct{ lapsed []candidate }

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
func (noReports) registryForbidden(string, error)                  {}
func (noReports) registryOff() context.Context                     { return context.Background() }
func (noReports) registryCannotDelete(string, error)               {}
func (noReports) duplicateIdentity(string)                         {}
func (noReports) candidatesListed([]candidate)                     {}
func (noReports) candidateChanged(candidate)                       {}
func (noReports) candidateGone(string)                             {}
func (r noReports) candidatesLapsed() []candidate                  { return r.lapsed }
func (noReports) candidatesUnknown()                               {}

// The leader deletes lapsed registrations from the goroutine that reads
// the registry's watch: without the rate limiter's spare tokens it leaves
// them for the next sweep at once, instead of waiting for the bucket to
// refill. Under a low RateLimit that wait lasted tens of seconds, the
// watch went unread, and every registration of the view lapsed: the
// leader gave no shard to anyone (the shard simulation's seed 24173).
func TestLapsedRegistrationsDoNotHoldTheWatchBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		client := api.Client("leader")
		cfg := &config{callTimeout: time.Second}
		cfg.leases = client.Clientset().CoordinationV1().Leases("default")
		up := noReports{lapsed: []candidate{{name: "gone", rv: "1"}}}
		gw := &gateway{cfg: cfg, limiter: rate.NewLimiter(0.4, 10), up: up}
		gw.limiter.AllowN(time.Now(), 8) // two tokens left: fewer than the spare ones

		start := time.Now()
		deleteLapsed(context.Background(), gw, up)
		assert.Zero(t, time.Since(start), "it did not wait for the bucket")
		assert.Zero(t, client.Calls(relecttest.VerbDelete), "no deletion without spare tokens")

		time.Sleep(10 * time.Second) // refilled: 4 tokens more
		deleteLapsed(context.Background(), gw, up)
		assert.Equal(t, 1, client.Calls(relecttest.VerbDelete), "with spare tokens, it deletes")
	})
}
