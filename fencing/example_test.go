package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/relect/relect"
	"github.com/relect/relect/fencing"
	"github.com/relect/relect/shardrange"
)

// Range shards that stamp each ConfigMap of their range, fenced: a
// shard's holder writes a ConfigMap only if no newer term wrote it, so that a deposed holder's late write — a paused process, a
// request stuck on its way — is refused instead of landing over the next
// holder's. The e2e test TestFencedRangeStamps runs this on a real
// apiserver, deposes a holder and replays its write.
//
// One annotation serves every shard of the election: a fence is the
// resourceVersion of the write that began its term, larger than every
// fence handed out before it, and a range term runs only after every term
// of an overlapping range before it ended (the guard of a change of
// split). So an object's fences grow also when it changes shards, which
// happens only when Count or Ranges does (its uid never changes).
func ExampleUpdateObject_rangeShards() {
	var cs kubernetes.Interface // the program's client
	const ns, selector = "default", "example.relect.io/stamped"
	run := func(ctx context.Context) {
		shard, _ := relect.ShardFromContext(ctx)
		r, _ := shardrange.FromContext(ctx)
		fence, ok := relect.FenceFromContext(ctx) // this shard's own: it grows with each term of its Lease
		if !ok {
			return // an apiserver whose resourceVersions are not integers: no fenced writes
		}
		cms := cs.CoreV1().ConfigMaps(ns)
		const key = "example.relect.io/fence" // one for every shard of the election
		for n := 1; ; n++ {
			opts := metav1.ListOptions{LabelSelector: selector}
			r.Tweak(&opts) // the apiserver sends this range only, with ShardedListAndWatch on
			list, err := cms.List(ctx, opts)
			if err != nil {
				slog.Warn("listing the range", "err", err) // and try again next round
				list = &corev1.ConfigMapList{}
			}
			for _, cm := range list.Items {
				if in, _ := r.Matches(&cm); !in {
					continue // the apiserver did not filter: another shard's
				}
				_, err := fencing.UpdateObject(ctx, cms, cm.Name, key, fence, func(cm *corev1.ConfigMap) error {
					metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "example.relect.io/stamp", fmt.Sprintf("%s/%s/%d", shard, fence, n))
					return nil
				})
				if errors.Is(err, fencing.ErrStale) {
					return // a newer term of this shard has written: this one has ended
				}
			}
			select {
			case <-ctx.Done(): // the term ended
				return
			case <-time.After(10 * time.Second):
			}
		}
	}
	opts := relect.Options{
		Client: cs, Namespace: ns, Name: "stamper",
		Shards: relect.ShardOptions{Count: 8, Ranges: shardrange.UID, Run: run},
	}
	_ = opts // relect.New(opts), then Run
}
