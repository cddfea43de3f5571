package relect_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/internal/testlog"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The wrapped client-go elector's klog output reaches Options.Logger, next to
// relect's own records.
func TestClientGoLogsReachTheSlogLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testlog.Handler{Level: testlog.All}
		api := newAPI()
		a := newCandidate(t, api, "a", func(o *relect.Options) {
			o.Logger = slog.New(logs)
		})
		a.start()
		synctest.Wait()
		a.stop()
		msgs := logs.Messages()
		assert.Contains(t, msgs, "Successfully acquired lease", "client-go's klog line")
		assert.Contains(t, msgs, "relect: started-leading", "relect's own line")
	})
}

// What an operator with an Info-level logger sees: the wait for a missing
// Lease, once, with when it ends; failing calls as a warning once two have
// failed in a row, then each time the run doubles (not at every retry);
// degraded as a warning.
func TestLogLevelsForOperators(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testlog.Handler{Level: slog.LevelInfo} // Info and above, as an operator's
		logger := slog.New(logs)
		api := relecttest.NewLeaseAPI() // no Lease: the missing-Lease wait
		a := newCandidate(t, api, "a", func(o *relect.Options) { o.Logger = logger })
		a.start()
		time.Sleep(ld + rp)
		synctest.Wait()
		require.True(t, a.e.IsLeader())
		a.client.Fail(relecttest.Error(503))
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		a.client.Heal()
		a.stop()

		missing, warnedAt, degraded := 0, []int64{}, 0
		for _, r := range logs.Records() {
			switch {
			case strings.HasPrefix(r.Message, "relect: waiting for the missing Lease"):
				missing++
				assert.Equal(t, slog.LevelInfo, r.Level)
				assert.True(t, hasAttr(r, "notBefore"), "says when the wait ends")
			case r.Message == "relect: Lease API calls are failing":
				assert.Equal(t, slog.LevelWarn, r.Level)
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "failuresInARow" {
						warnedAt = append(warnedAt, a.Value.Int64())
					}
					return true
				})
			case r.Message == "relect: degraded":
				degraded++
				assert.Equal(t, slog.LevelWarn, r.Level)
			case r.Message == "relect: error":
				t.Errorf("an EventError reached an Info logger: %v", r)
			}
		}
		assert.Equal(t, 1, missing)
		require.NotEmpty(t, warnedAt)
		for i, n := range warnedAt {
			assert.Equal(t, int64(2)<<i, n, "warned at 2, 4, 8, ... failures in a row: %v", warnedAt)
		}
		assert.Equal(t, 1, degraded)
	})
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = found || a.Key == key
		return true
	})
	return found
}

// With no Logger, relect's own warnings reach slog.Default() — a stuck
// leader, calls failing in a row, degraded — and nothing else: not its
// Info records, not client-go's lines. Nothing at all was logged.
func TestNoLoggerWarnsToTheDefaultLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testlog.Handler{Level: slog.LevelDebug}
		prev := slog.Default()
		slog.SetDefault(slog.New(logs))
		defer slog.SetDefault(prev)
		w := &worker{}
		a := newCandidate(t, newAPI(), "a", func(o *relect.Options) {
			o.OnStartedLeading, o.Work.BeatWindow = w.run, 5*time.Second
			require.Nil(t, o.Logger)
		})
		a.start()
		time.Sleep(rp)
		w.hung.Store(true) // alone: it leads on, stuck, and warns
		time.Sleep(10 * time.Second)
		a.client.Fail(relecttest.Error(503))
		time.Sleep(time.Minute)
		synctest.Wait()
		a.client.Heal()
		a.stop()
		var msgs []string
		for _, r := range logs.Records() {
			assert.GreaterOrEqual(t, r.Level, slog.LevelWarn, "only warnings and errors: %s", r.Message)
			msgs = append(msgs, r.Message)
		}
		assert.Contains(t, msgs, "relect: the leader's work is stuck, and no other candidate is known to take over: leading on")
		assert.Contains(t, msgs, "relect: Lease API calls are failing")
		assert.Contains(t, msgs, "relect: degraded")
		assert.Contains(t, msgs, "relect: work-stuck")
	})
}
