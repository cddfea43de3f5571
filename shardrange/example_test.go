package shardrange_test

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
)

// The four uid ranges of a 4-shard split, as ListOptions.ShardSelector
// takes them.
func ExampleSplit() {
	ranges, err := shardrange.Split(shardrange.UID, 4)
	if err != nil {
		panic(err)
	}
	for _, r := range ranges {
		fmt.Println(r.Selector())
	}
	// Output:
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')
	// shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')
	// shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')
	// shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
}

// Range shards: each of 32 shards is a range of the Pods' uid hash, and
// its holder's informer lists and watches that range only — filtered by
// the apiserver with the ShardedListAndWatch gate on, by the
// ListerWatcher itself otherwise.
func ExampleNewListerWatcher() {
	var cs kubernetes.Interface // the program's client
	opts := relect.Options{
		Client: cs, Namespace: "default", Name: "pod-indexer",
		Shards: relect.ShardOptions{Count: 32, Ranges: shardrange.UID,
			Run: func(ctx context.Context) {
				r, _ := shardrange.FromContext(ctx)
				lw := shardrange.NewListerWatcher(
					cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", fields.Everything()), r,
					func() { slog.Info("the apiserver does not filter by shard: filtering here", "range", r.Selector()) })
				informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
				informer.Run(ctx.Done()) // holds this range's Pods only, until the shard's term ends
			}},
	}
	_ = opts // relect.New(opts), then Run
}
