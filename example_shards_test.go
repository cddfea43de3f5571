package relect_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/relecttest"
)

// shardCaches is what Warm builds and Run reads, by shard: here a flag set
// once the shard's data is listed; in production an informer's cache of
// the shard's range (shardrange.NewListerWatcher). Run may be called before
// Warm has built anything, so both find a shard's entry with of, which
// creates it if missing.
type shardCaches struct {
	mu     sync.Mutex
	shards map[string]*shardCache
}

type shardCache struct{ synced chan struct{} } // closed once listed

func (c *shardCaches) of(shard string) *shardCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[shard] == nil {
		c.shards[shard] = &shardCache{synced: make(chan struct{})}
	}
	return c.shards[shard]
}

func (c *shardCaches) drop(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.shards, shard)
}

// Shards: the leader-only work split over the fleet. Two candidates share
// four shards, two each; each shard's Run gets a context with the shard and
// its own fencing token. Each candidate warms the shards it holds and
// those it would take (Warm): when pod-b stops, it releases its shards
// after their Run returned, and pod-a, their taker, holds all four at once,
// each with its data listed already. (A
// first deployment waits LeaseDuration for its shards' Leases, as for its
// first leader — a missing Lease may have just been deleted — counted from
// the leader's first look, RetryPeriod/2 into its term: LD + RP/2 in all
// when the election's Lease exists, as here, and 2 × LD + RP/2 when it is
// missing too, as on a real first deployment: 16 s and 31 s with the
// defaults, TestShardsFirstDeploymentWait.)
func ExampleOptions_shards() {
	api := relecttest.NewLeaseAPI() // in production: Config: restConfig
	api.PutReleased("default", "reporter")
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	var cold atomic.Int32 // Runs that found their shard's data not listed yet
	candidate := func(identity string) *relect.Elector {
		caches := &shardCaches{shards: map[string]*shardCache{}}
		e, err := relect.New(relect.Options{
			Client:           api.Client(identity).Clientset(),
			Namespace:        "default",
			Name:             "reporter",
			Identity:         identity,
			LeaseDuration:    3 * time.Second,
			RenewDeadline:    2 * time.Second,
			RetryPeriod:      500 * time.Millisecond,
			OnStartedLeading: func(ctx context.Context) { <-ctx.Done() }, // the election's own work, if any
			Shards: relect.ShardOptions{
				Names: []string{"nodes", "pods", "services", "volumes"},
				Warm: func(ctx context.Context) { // from before this candidate holds the shard
					shard, _ := relect.ShardFromContext(ctx)
					close(caches.of(shard).synced) // list and watch the shard's data
					<-ctx.Done()                   // until it stops campaigning for it, after Run returned
					caches.drop(shard)
				},
				Run: func(ctx context.Context) {
					shard, _ := relect.ShardFromContext(ctx)
					fence, _ := relect.FenceFromContext(ctx) // this shard's: what its store checks
					c := caches.of(shard)
					select {
					case <-c.synced:
					default:
						cold.Add(1)
						<-c.synced // a cold start: wait for the list
					}
					_ = fence // report(ctx, shard, fence, c) until ctx is done
					<-ctx.Done()
				},
			},
		})
		if err != nil {
			panic(err)
		}
		return e
	}
	a, b := candidate("pod-a"), candidate("pod-b")
	aDone, bDone := make(chan struct{}), make(chan struct{})
	bCtx, stopB := context.WithCancel(ctx)
	go func() { _ = a.Run(ctx); close(aDone) }()
	go func() { _ = b.Run(bCtx); close(bDone) }()

	// waitFor polls until cond holds (a test would use testing/synctest).
	waitFor := func(cond func() bool) bool {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	}
	if waitFor(func() bool { return len(a.Shards()) == 2 && len(b.Shards()) == 2 }) {
		fmt.Println("balanced: pod-a holds 2 shards, pod-b holds 2")
	}
	stopB() // pod-b shuts down: its shards' Run return, then it releases them
	<-bDone
	if waitFor(func() bool { return len(a.Shards()) == 4 }) {
		fmt.Println("pod-b stopped; pod-a holds", a.Shards())
	}
	shutdown()
	<-aDone
	fmt.Println("after Run returned:", a.Shards())
	fmt.Println("Runs that started cold:", cold.Load())
	// Output:
	// balanced: pod-a holds 2 shards, pod-b holds 2
	// pod-b stopped; pod-a holds [nodes pods services volumes]
	// after Run returned: []
	// Runs that started cold: 0
}
