package clientgoloop_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/relect/relect/internal/clientgoloop"
	"github.com/relect/relect/relecttest"
	"go.uber.org/goleak"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// TestMain fails the package if any goroutine outlives the tests: Run
// joins every OnStartedLeading call client-go starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	namespace = "default"
	lease     = "loop"
)

// candidate is one Loop on api, with counts of its callbacks.
type candidate struct {
	loop                     *clientgoloop.Loop
	started, ended, returned atomic.Int32 // OnStartedLeading calls begun and returned; OnRunReturned calls
	stopped                  atomic.Int32 // OnStoppedLeading calls
	cancel                   context.CancelFunc
	done                     chan struct{} // closed when Run has returned
}

func newCandidate(t *testing.T, api *relecttest.LeaseAPI, id string, wrap func(resourcelock.Interface) resourcelock.Interface) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{})}
	c.client(t, api, id, wrap)
	return c
}

func (c *candidate) client(t *testing.T, api *relecttest.LeaseAPI, id string, wrap func(resourcelock.Interface) resourcelock.Interface) {
	t.Helper()
	h := api.Client(id)
	h.SetLatency(time.Millisecond)
	loop, err := clientgoloop.New(clientgoloop.Config{
		Client:        h.Clientset(),
		Namespace:     namespace,
		Name:          lease,
		Identity:      id,
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		WrapLock:      wrap,
		OnStartedLeading: func(ctx context.Context) {
			c.started.Add(1)
			<-ctx.Done()
			time.Sleep(time.Second) // the work takes a while to stop
			c.ended.Add(1)
		},
		OnStoppedLeading: func() { c.stopped.Add(1) },
		OnRunReturned:    func() { c.returned.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.loop = loop
}

// run starts Run in a goroutine; stop cancels it and waits for it.
func (c *candidate) run() {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.loop.Run(ctx)
	}()
}

func (c *candidate) stop() {
	c.cancel()
	<-c.done
}

func TestNewRefusesWhatClientGoRefuses(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	for _, tc := range []struct {
		name string
		cfg  clientgoloop.Config
	}{
		{"renew deadline not below the lease duration", clientgoloop.Config{LeaseDuration: time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}},
		{"zero retry period", clientgoloop.Config{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second}},
		{"no OnStartedLeading", clientgoloop.Config{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Client, cfg.Namespace, cfg.Name, cfg.Identity = api.Client("a").Clientset(), namespace, lease, "a"
			if tc.name != "no OnStartedLeading" {
				cfg.OnStartedLeading = func(context.Context) {}
			}
			if _, err := clientgoloop.New(cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

// A Run cancelled the instant its elector acquired the Lease returns only
// after the OnStartedLeading call client-go started for that term has
// returned, though client-go does not join it (the race joinLock closes).
func TestRunWaitsForTheTermItStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, lease)
		var c *candidate
		c = newCandidate(t, api, "a", func(l resourcelock.Interface) resourcelock.Interface {
			return &cancelOnAcquire{Interface: l, cancel: func() { c.cancel() }}
		})
		c.run()
		<-c.done
		if got := c.started.Load(); got != 1 {
			t.Fatalf("OnStartedLeading called %d times, want 1", got)
		}
		if got := c.ended.Load(); got != 1 {
			t.Fatalf("Run returned before OnStartedLeading did")
		}
		if h := api.Holder(namespace, lease); h != "" {
			t.Errorf("the Lease is held by %q after Run returned, want released", h)
		}
		if c.loop.IsLeader() {
			t.Error("IsLeader is true after Run returned")
		}
	})
}

// cancelOnAcquire cancels the candidate's Run once a write naming it
// succeeded.
type cancelOnAcquire struct {
	resourcelock.Interface
	once   sync.Once
	cancel func()
}

func (l *cancelOnAcquire) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.once.Do(l.cancel)
	}
	return err
}

// A term lost to another holder ends the elector's Run; the loop runs a new
// elector, which leads again once the other holder's lease expired.
func TestLoopCampaignsAgainAfterALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, lease)
		c := newCandidate(t, api, "a", nil)
		c.run()
		defer c.stop()
		time.Sleep(3 * time.Second)
		if !c.loop.IsLeader() {
			t.Fatal("a does not lead a released Lease")
		}
		if err := api.SetHolder(namespace, lease, "intruder"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(14 * time.Second) // RenewDeadline, a retry, and the work's second to stop
		if c.returned.Load() != 1 || c.stopped.Load() != 1 || c.ended.Load() != 1 {
			t.Fatalf("after the loss: %d Runs returned, %d OnStoppedLeading, %d terms ended; want 1 each",
				c.returned.Load(), c.stopped.Load(), c.ended.Load())
		}
		time.Sleep(20 * time.Second) // the intruder's lease expires
		if !c.loop.IsLeader() || c.started.Load() != 2 {
			t.Fatalf("a new elector did not lead again: IsLeader %v, %d terms", c.loop.IsLeader(), c.started.Load())
		}
	})
}

// Yield releases and campaigns again; it refuses a candidate that does not
// lead.
func TestYield(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, lease)
		a := newCandidate(t, api, "a", nil)
		a.run()
		time.Sleep(3 * time.Second)
		b := newCandidate(t, api, "b", nil)
		b.run()
		defer b.stop()
		defer a.stop()
		time.Sleep(3 * time.Second)
		ctx := context.Background()
		if err := b.loop.Yield(ctx); !errors.Is(err, clientgoloop.ErrNotLeading) {
			t.Fatalf("Yield of a follower: %v, want ErrNotLeading", err)
		}
		if !a.loop.IsLeader() {
			t.Fatal("a does not lead")
		}
		if err := a.loop.Yield(ctx); err != nil {
			t.Fatalf("Yield of the leader: %v", err)
		}
		if a.returned.Load() != 1 || a.stopped.Load() != 1 {
			t.Fatalf("after Yield: %d Runs returned, %d OnStoppedLeading; want 1 each", a.returned.Load(), a.stopped.Load())
		}
		time.Sleep(5 * time.Second) // a new elector of a, or b, took the released Lease
		if a.ended.Load() != 1 {
			t.Fatalf("the yielded term's work did not return")
		}
		if a.loop.IsLeader() == b.loop.IsLeader() {
			t.Fatalf("IsLeader: a %v, b %v; want exactly one leader", a.loop.IsLeader(), b.loop.IsLeader())
		}
	})
}
