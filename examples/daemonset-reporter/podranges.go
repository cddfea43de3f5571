package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relect/relect"
	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// maxPodRanges is ShardOptions.Count's bound.
const maxPodRanges = 1000

// checkPodRanges refuses a -pod-ranges that relect would refuse, or that
// comes with -shards: an agent has one set of shards, numbered (the
// ranges) or named (the metricsets), not both.
func checkPodRanges(podRanges int, shards string) error {
	switch {
	case podRanges < 0 || podRanges > maxPodRanges:
		return fmt.Errorf("-pod-ranges=%d: want 0 (off) to %d", podRanges, maxPodRanges)
	case podRanges > 0 && shards != "":
		return fmt.Errorf("-pod-ranges=%d and -shards=%s: choose one (an agent has one set of shards)", podRanges, shards)
	}
	return nil
}

// podRangeShards is the range mode's shards: -pod-ranges equal ranges of
// the Pods' uid hash (ShardOptions.Ranges), which the leader spreads over
// the agents. The holder of a range reports its Pods (reportPodRange) and
// beats after each report; one that has not reported for three report
// intervals gives the range up, as the leader does for the nodes.
func podRangeShards(logger *slog.Logger, client kubernetes.Interface, s settings) relect.ShardOptions {
	return relect.ShardOptions{
		Count:  s.podRanges,
		Ranges: shardrange.UID,
		Run:    func(ctx context.Context) { reportPodRange(ctx, logger, client, s.reportEvery) },
		Work:   workOptions(s.reportEvery),
	}
}

// reportPodRange is the work of one pod range for one term: an informer
// that lists and watches the range's Pods only, and a report of them every
// reportEvery once it has synced, with a beat after each. It returns when
// ctx is done (the range moved, or the agent stops), after the informer
// has stopped. The informer retries a list or watch that fails on its
// own; until its first list succeeds there is no report and no beat.
func reportPodRange(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, every time.Duration) {
	r, _ := shardrange.FromContext(ctx)
	shard, _ := relect.ShardFromContext(ctx)
	fence, _ := relect.FenceFromContext(ctx)
	logger = logger.With("range", shard, "fence", string(fence))
	logger.Info("started reporting a pod range", "selector", r.Selector())
	defer func() { logger.Info("stopped reporting a pod range", "cause", context.Cause(ctx)) }()

	informer := podInformer(logger, client, r)
	var informed sync.WaitGroup
	informed.Go(func() { informer.Run(ctx.Done()) })
	defer informed.Wait()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		reportPods(logger, informer.GetStore())
		relect.Beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// podInformer is an informer over the Pods of r in every namespace:
// shardrange.NewListerWatcher asks the apiserver for r alone and drops the
// other Pods itself when the apiserver does not filter, saying so once.
func podInformer(logger *slog.Logger, client kubernetes.Interface, r shardrange.Range) cache.SharedIndexInformer {
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, o)
		},
	}, client)
	ranged := shardrange.NewListerWatcher(lw, r, func() {
		logger.Info("the apiserver does not filter by range (Kubernetes before 1.36, or its ShardedListAndWatch gate off): this agent drops the other ranges' Pods itself")
	})
	return cache.NewSharedIndexInformer(ranged, &corev1.Pod{}, 0, cache.Indexers{})
}

// reportPods logs the pod metricset of one range from the informer's
// store: a line per Pod, in namespace/name order, and one with the counts
// by phase. A real agent would ship each Pod's event tagged with the
// range's fence, so that a sink drops a deposed holder's late ones.
func reportPods(logger *slog.Logger, store cache.Store) {
	var pods []*corev1.Pod
	for _, o := range store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	counts := map[string]int{"pods": len(pods)}
	for _, p := range pods {
		phase := cmp.Or(strings.ToLower(string(p.Status.Phase)), "unset")
		counts[phase]++
		logger.Info("pod metrics", "namespace", p.Namespace, "pod", p.Name, "phase", phase)
	}
	attrs := []any{}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		attrs = append(attrs, k, counts[k])
	}
	logger.Info("pod range metrics", attrs...)
}
