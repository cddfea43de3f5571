package relect

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/relect/relect/relecttest"
	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// FuzzNew feeds arbitrary options to New: it must never panic, and whatever
// it accepts must satisfy client-go's own constructor checks, so Run can
// never fail on configuration.
func FuzzNew(f *testing.F) {
	f.Add("default", "lease", "id", int64(15e9), int64(10e9), int64(2e9), int64(0), int64(0), 0.0, 0, 0, uint8(0))
	f.Add("", "", "", int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), -1.0, -1, -1, uint8(1))
	f.Add("ns", "n", "", int64(1e9), int64(9e8), int64(7e8), int64(1), int64(1), 3.0, 3, 1, uint8(2))
	f.Add("ns", "n", "", int64(1e9+1), int64(1e9), int64(1), int64(0), int64(0), math.NaN(), 0, 0, uint8(3))
	f.Add("ns", "n", "", int64(math.MaxInt64), int64(math.MaxInt64-1), int64(1), int64(0), int64(0), math.Inf(1), 0, 0, uint8(0))
	f.Fuzz(func(t *testing.T, namespace, name, identity string, ld, rd, rp, boInit, boMax int64, limit float64, burst, buffer int, which uint8) {
		o := Options{
			Namespace: namespace, Name: name, Identity: identity,
			LeaseDuration: time.Duration(ld), RenewDeadline: time.Duration(rd), RetryPeriod: time.Duration(rp),
			BackoffInitial: time.Duration(boInit), BackoffMax: time.Duration(boMax),
			RateLimit: rate.Limit(limit), RateBurst: burst, EventBuffer: buffer,
		}
		switch which % 4 {
		case 0:
			o.Client = relecttest.NewLeaseAPI().Client("c").Clientset()
		case 1:
			o.Config = &rest.Config{Host: "https://127.0.0.1:1"}
		case 2:
			o.Lock = &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: identity}}
		}
		if which&4 == 0 {
			o.OnStartedLeading = func(context.Context) {}
		}
		e, err := New(o)
		if err != nil {
			if e != nil {
				t.Fatal("New returned both an Elector and an error")
			}
			if !errors.Is(err, ErrInvalidOptions) && !strings.Contains(err.Error(), "relect: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		if e.Identity() == "" {
			t.Fatal("accepted an empty identity")
		}
		c := e.cfg
		if _, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: e.gw, LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		}); err != nil {
			t.Fatalf("New accepted options client-go rejects: %v", err)
		}
		if c.LeaseDuration%time.Second != 0 || c.RenewDeadline <= c.RetryPeriod+time.Second || c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial || c.EventBuffer <= 0 {
			t.Fatalf("resolved options break an invariant: %+v", c.Options)
		}
		if c.RateLimit != rate.Inf && (c.RateBurst < minRateBurst || float64(c.RateLimit)*c.RetryPeriod.Seconds() < callsPerRetryPeriod*(1-1e-9)) {
			t.Fatalf("accepted a budget too small to renew: %v/%d", c.RateLimit, c.RateBurst)
		}
	})
}
