package relect_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func validOptions() relect.Options {
	return relect.Options{
		Client:           relecttest.NewLeaseAPI().Client("c").Clientset(),
		Namespace:        "default",
		Name:             "my-lease",
		OnStartedLeading: func(context.Context) {},
	}
}

func TestNewRejectsInvalidOptionsNamingTheField(t *testing.T) {
	lock := &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: "x"}}
	for _, tc := range []struct {
		name  string
		mod   func(*relect.Options)
		field string // the error names Options.<field>
	}{
		{"no lease location", func(o *relect.Options) { o.Client = nil }, "Config"},
		{"client and config", func(o *relect.Options) { o.Config = &rest.Config{Host: "https://127.0.0.1:1"} }, "Config"},
		{"lock with namespace", func(o *relect.Options) { o.Client = nil; o.Lock = lock }, "Lock"},
		{"lock without identity", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name = nil, "", ""
			o.Lock = &resourcelock.LeaseLock{}
		}, "Lock"},
		{"empty namespace", func(o *relect.Options) { o.Namespace = "" }, "Namespace"},
		{"bad namespace", func(o *relect.Options) { o.Namespace = "Not_Valid" }, "Namespace"},
		{"empty name", func(o *relect.Options) { o.Name = "" }, "Name"},
		{"bad name", func(o *relect.Options) { o.Name = "a/b" }, "Name"},
		{"long identity", func(o *relect.Options) { o.Identity = strings.Repeat("x", 254) }, "Identity"},
		{"identity not UTF-8", func(o *relect.Options) { o.Identity = "pod-\xff" }, "Identity"},
		{"no OnStartedLeading", func(o *relect.Options) { o.OnStartedLeading = nil }, "OnStartedLeading"},
		{"negative lease duration", func(o *relect.Options) { o.LeaseDuration = -time.Second }, "LeaseDuration"},
		{"sub-second lease duration", func(o *relect.Options) { o.LeaseDuration = 500 * time.Millisecond }, "LeaseDuration"},
		{"fractional lease duration", func(o *relect.Options) { o.LeaseDuration = 15500 * time.Millisecond }, "LeaseDuration"},
		{"lease duration overflows int32 seconds", func(o *relect.Options) { o.LeaseDuration = (math.MaxInt32 + 1) * time.Second }, "LeaseDuration"},
		{"negative renew deadline", func(o *relect.Options) { o.RenewDeadline = -1 }, "RenewDeadline"},
		{"renew deadline not below lease duration", func(o *relect.Options) { o.RenewDeadline = 15 * time.Second }, "RenewDeadline"},
		{"renew deadline within jitter of retry period", func(o *relect.Options) { o.RetryPeriod = 9 * time.Second }, "RenewDeadline"},
		{"renew deadline within a second of retry period", func(o *relect.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 500*time.Millisecond
		}, "RenewDeadline"},
		{"negative retry period", func(o *relect.Options) { o.RetryPeriod = -time.Second }, "RetryPeriod"},
		{"negative backoff initial", func(o *relect.Options) { o.BackoffInitial = -1 }, "BackoffInitial"},
		{"negative backoff max", func(o *relect.Options) { o.BackoffMax = -1 }, "BackoffMax"},
		{"backoff max below initial", func(o *relect.Options) { o.BackoffInitial, o.BackoffMax = time.Minute, time.Second }, "BackoffMax"},
		{"NaN rate", func(o *relect.Options) { o.RateLimit = rate.Limit(math.NaN()) }, "RateLimit"},
		{"negative rate", func(o *relect.Options) { o.RateLimit = -1 }, "RateLimit"},
		{"rate too small to renew", func(o *relect.Options) { o.RateLimit = 0.5 }, "RateLimit"},
		{"negative burst", func(o *relect.Options) { o.RateBurst = -1 }, "RateBurst"},
		{"burst too small to acquire and renew", func(o *relect.Options) { o.RateBurst = 3 }, "RateBurst"},
		{"typed nil client", func(o *relect.Options) { o.Client = (*kubernetes.Clientset)(nil) }, "Client"},
		{"typed nil lock", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name = nil, "", ""
			o.Lock = (*resourcelock.LeaseLock)(nil)
		}, "Lock"},
		{"lock and standby", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name = nil, "", ""
			o.Lock, o.Standby = lock, true
		}, "Standby"},
		{"identity relect shows client-go for an emptied holder", func(o *relect.Options) { o.Identity = "(holder emptied without a release)" }, "Identity"},
		{"identity relect shows client-go for a stranger", func(o *relect.Options) { o.Identity = "a (not written by this elector)" }, "Identity"},
		{"zero logger", func(o *relect.Options) { o.Logger = &slog.Logger{} }, "Logger"},
		{"negative event buffer", func(o *relect.Options) { o.EventBuffer = -1 }, "EventBuffer"},
		{"huge event buffer", func(o *relect.Options) { o.EventBuffer = math.MaxInt }, "EventBuffer"},
		{"priority without the registry", func(o *relect.Options) { o.Priority, o.DisableRegistry = 5, true }, "Priority"},
		{"priority with a lock", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name = nil, "", ""
			o.Lock, o.Priority = lock, -1
		}, "Priority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mod(&o)
			e, err := relect.New(o)
			require.Error(t, err)
			assert.Nil(t, e)
			assert.ErrorIs(t, err, relect.ErrInvalidOptions)
			assert.Contains(t, err.Error(), "relect: Options."+tc.field+" ")
			var fe *relect.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "Options."+tc.field, fe.Field)
			assert.ErrorIs(t, fe, relect.ErrInvalidOptions)
		})
	}
}

// A FieldError names the field and the fields its problem involves, so
// that a tool can say the same in its own terms without parsing text.
func TestFieldError(t *testing.T) {
	o := validOptions()
	o.RenewDeadline, o.EventBuffer = 20*time.Second, -1
	_, err := relect.New(o)
	fes := relect.FieldErrors(err)
	require.Len(t, fes, 2)

	rd := fes[0]
	assert.Equal(t, "Options.RenewDeadline", rd.Field)
	assert.Equal(t, []string{"Options.LeaseDuration"}, rd.Related)
	assert.Equal(t, "relect: Options.RenewDeadline 20s must be less than LeaseDuration 15s", rd.Error())
	assert.Equal(t, "20s must be less than --lease-duration 15s", rd.Problem(func(field string) string {
		return map[string]string{"Options.LeaseDuration": "--lease-duration"}[field]
	}))
	assert.Equal(t, "Options.EventBuffer", fes[1].Field)
	assert.Empty(t, fes[1].Related)
	assert.Equal(t, "is negative (-1)", fes[1].Problem(nil))

	assert.Nil(t, relect.FieldErrors(nil))
	assert.Nil(t, relect.FieldErrors(relect.ErrNotLeader))
	assert.Len(t, relect.FieldErrors(fmt.Errorf("wrapped: %w", err)), 2)

	// HealthOptions too: every negative field.
	e, err := relect.New(validOptions())
	require.NoError(t, err)
	err = e.HealthCheck(relect.HealthOptions{WorkStopTimeout: -1, CutOffAfter: -time.Second})(nil)
	assert.ErrorIs(t, err, relect.ErrInvalidOptions)
	var fields []string
	for _, fe := range relect.FieldErrors(err) {
		fields = append(fields, fe.Field)
	}
	assert.Equal(t, []string{"HealthOptions.WorkStopTimeout", "HealthOptions.CutOffAfter"}, fields)
}

func TestNewReportsEveryInvalidField(t *testing.T) {
	for _, tc := range []struct {
		o      relect.Options
		fields []string
	}{
		{relect.Options{RetryPeriod: -1, EventBuffer: -1}, []string{"Config", "OnStartedLeading", "RetryPeriod", "EventBuffer"}},
		{relect.Options{Namespace: "Default", Name: "a_b"}, []string{"Config", "Namespace", "Name"}},
		{relect.Options{BackoffInitial: -1, BackoffMax: -1}, []string{"BackoffInitial", "BackoffMax"}},
		{relect.Options{RateLimit: rate.Limit(math.NaN()), RateBurst: -1}, []string{"RateLimit", "RateBurst"}},
		{relect.Options{RenewDeadline: -time.Second, RateBurst: 2}, []string{"RenewDeadline", "RateBurst"}},
	} {
		_, err := relect.New(tc.o)
		require.Error(t, err)
		for _, field := range tc.fields {
			assert.Contains(t, err.Error(), "Options."+field+" ", "%+v", tc.o)
		}
	}
}

func TestNewAcceptsValidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*relect.Options)
	}{
		{"defaults", func(*relect.Options) {}},
		{"two-second lease", func(o *relect.Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 400*time.Millisecond
		}},
		{"exactly the minimum budget", func(o *relect.Options) { o.RateLimit, o.RateBurst = 1, 4 }},
		{"no bucket", func(o *relect.Options) { o.RateLimit, o.RateBurst = rate.Inf, 0 }},
		{"no bucket, as +Inf", func(o *relect.Options) { o.RateLimit = rate.Limit(math.Inf(1)) }},
		{"rest config", func(o *relect.Options) { o.Client, o.Config = nil, &rest.Config{Host: "https://127.0.0.1:1"} }},
		{"lock", func(o *relect.Options) {
			o.Client, o.Namespace, o.Name = nil, "", ""
			o.Lock = &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: "x"}}
		}},
		{"standby without the registry", func(o *relect.Options) { o.Standby, o.DisableRegistry = true, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mod(&o)
			e, err := relect.New(o)
			require.NoError(t, err)
			assert.NotEmpty(t, e.Identity())
			assert.False(t, e.IsLeader())
		})
	}
}

// The default identity is unique per Elector, even on one host.
func TestDefaultIdentityUniquePerProcess(t *testing.T) {
	a, err := relect.New(validOptions())
	require.NoError(t, err)
	b, err := relect.New(validOptions())
	require.NoError(t, err)
	assert.NotEqual(t, a.Identity(), b.Identity())
}

// The Lease client relect builds from a rest.Config speaks protobuf, as the
// control plane's own components do; a Client given by the caller stays as
// it is. (The e2e suite runs every scenario against a real apiserver with
// it.)
func TestLeaseClientSpeaksProtobuf(t *testing.T) {
	var mu sync.Mutex
	var got []string
	// Run ends once the server has seen a request (it ended after 200 ms,
	// and a machine too busy to send one by then failed the test), or
	// after 30 s without one.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Accept"))
		cancel()
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	o := validOptions()
	o.Client, o.Config = nil, &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	e, err := relect.New(o)
	require.NoError(t, err)
	_ = e.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, got)
	assert.True(t, strings.HasPrefix(got[0], "application/vnd.kubernetes.protobuf"), "Accept: %q", got[0])
}
