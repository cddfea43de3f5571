package ctrlrt_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/ctrlrt"
	"github.com/relect/relect/relecttest"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// lockReplica is a controller-runtime manager that keeps its own election,
// with a ctrlrt Lock as its resource lock, and one leader-election
// runnable that records when it runs.
type lockReplica struct {
	id     string
	lock   *ctrlrt.Lock
	handle *relecttest.Client
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

func newLockReplica(t *testing.T, api *relecttest.LeaseAPI, id string, leading *atomic.Int64, overlap *atomic.Bool) *lockReplica {
	t.Helper()
	h := api.Client(id)
	lock, err := ctrlrt.NewLock(ctrlrt.LockOptions{Client: h.Clientset(), Namespace: namespace, Name: leaseName, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	ld, rd, rp := electorTimings.LeaseDuration, electorTimings.RenewDeadline, electorTimings.RetryPeriod
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Scheme:                              scheme,
		Logger:                              testLogger(t).WithValues("replica", id),
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		NewCache:                            func(*rest.Config, cache.Options) (cache.Cache, error) { return newTestCache(nil, scheme), nil },
		LeaderElection:                      true,
		LeaderElectionID:                    leaseName,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &ld,
		RenewDeadline:                       &rd,
		RetryPeriod:                         &rp,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(lock); err != nil { // the watch, on every replica
		t.Fatal(err)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if leading.Add(1) > 1 {
			overlap.Store(true)
		}
		<-ctx.Done()
		leading.Add(-1)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	r := &lockReplica{id: id, lock: lock, handle: h, mgr: mgr, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	return r
}

// stop stops the manager and waits for Start to return.
func (r *lockReplica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done: // a manager that led returns "leader election lost"
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Manager.Start did not return", r.id)
	}
}

// TestLockFollowersDoNotPoll: three controller-runtime managers elect with
// their own election on a ctrlrt Lock. Once their watches have synced, the
// followers send no Lease request while the leader renews: client-go's
// elector asks the lock every RetryPeriod or so, and the lock answers from
// its watch. When the leader stops (releasing the lease), a follower takes
// it.
func TestLockFollowersDoNotPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := relecttest.NewLeaseAPI()
		api.PutReleased(namespace, leaseName)
		var leading atomic.Int64
		var overlap atomic.Bool
		var rs []*lockReplica
		for _, id := range []string{"a", "b", "c"} {
			rs = append(rs, newLockReplica(t, api, id, &leading, &overlap))
		}
		defer func() {
			for _, r := range rs {
				if r.cancel != nil {
					r.stop(t)
				}
			}
		}()
		holder := func() *lockReplica {
			for _, r := range rs {
				if api.Holder(namespace, leaseName) == r.id {
					return r
				}
			}
			return nil
		}
		eventually(t, "a leader", func() bool { return holder() != nil && leading.Load() == 1 })
		leader := holder()
		var followers []*lockReplica
		for _, r := range rs {
			if r != leader {
				followers = append(followers, r)
			}
		}
		eventually(t, "the followers' watches to answer", func() bool {
			for _, f := range followers {
				if f.lock.Stats().LocalGets == 0 {
					return false
				}
			}
			return true
		})

		type count struct{ gets, local uint64 }
		before := map[string]count{}
		for _, f := range followers {
			before[f.id] = count{uint64(f.handle.Calls(relecttest.VerbGet)), f.lock.Stats().LocalGets}
		}
		leaderWrites := leader.lock.Stats().Writes
		time.Sleep(10 * electorTimings.RetryPeriod) // simulated: ten renewals exactly
		for _, f := range followers {
			gets, local := uint64(f.handle.Calls(relecttest.VerbGet)), f.lock.Stats().LocalGets
			t.Logf("%s: %d Lease Gets sent, %d answered from the watch, over 10 retry periods", f.id, gets-before[f.id].gets, local-before[f.id].local)
			if gets != before[f.id].gets {
				t.Errorf("follower %s sent %d Lease Gets while the leader renewed", f.id, gets-before[f.id].gets)
			}
			// client-go's follower asks every RetryPeriod to 2.2 RetryPeriods
			// (JitterUntil, factor 1.2): at least 4 times in 10.
			if asked := local - before[f.id].local; asked < 4 {
				t.Errorf("follower %s's elector asked its lock %d times in 10 retry periods, want at least 4", f.id, asked)
			}
		}
		// The leader renews every RetryPeriod (wait.Until), exactly in
		// simulated time.
		renewals := leader.lock.Stats().Writes - leaderWrites
		t.Logf("leader %s: %d renewals over 10 retry periods", leader.id, renewals)
		if renewals < 9 {
			t.Errorf("the leader %s renewed %d times in 10 retry periods, want at least 9", leader.id, renewals)
		}

		leader.stop(t)
		leader.cancel = nil
		eventually(t, "a new leader", func() bool {
			h := holder()
			return h != nil && h != leader && leading.Load() == 1
		})
		if overlap.Load() {
			// client-go releases before it cancels the leader's context
			// (LeaderElectionReleaseOnCancel): the Lock does not change that.
			t.Logf("two managers ran their leader-election runnables at once, as client-go allows")
		}
	})
}

// TestNewLockRefusesBadOptions: each bad field is named.
func TestNewLockRefusesBadOptions(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	for _, o := range []ctrlrt.LockOptions{
		{},
		{Client: api.Client("a").Clientset(), Config: &rest.Config{}, Namespace: namespace, Name: leaseName, Identity: "a"},
		{Client: api.Client("a").Clientset(), Name: leaseName, Identity: "a"},
		{Client: api.Client("a").Clientset(), Namespace: namespace, Name: leaseName, Identity: "a", CallTimeout: -time.Second},
		{Client: api.Client("a").Clientset(), Namespace: "N_ bad!", Name: leaseName, Identity: "a"},
		{Client: api.Client("a").Clientset(), Namespace: namespace, Name: "x/y", Identity: "a"},
		{Config: &rest.Config{Host: "https://127.0.0.1:1", QPS: 5}, Namespace: namespace, Name: leaseName, Identity: "a"}, // QPS without Burst: client-go refuses it
	} {
		if _, err := ctrlrt.NewLock(o); !errors.Is(err, ctrlrt.ErrInvalidOptions) {
			t.Errorf("NewLock(%+v): %v, want ErrInvalidOptions", o, err)
		}
	}
	// The same options, the same message: fields in a fixed order.
	_, first := ctrlrt.NewLock(ctrlrt.LockOptions{})
	for range 20 {
		if _, err := ctrlrt.NewLock(ctrlrt.LockOptions{}); err.Error() != first.Error() {
			t.Fatalf("NewLock's message changed: %q, then %q", first, err)
		}
	}
}
