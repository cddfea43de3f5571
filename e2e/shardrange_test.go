package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relect/relect/shardrange"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// shardRangeLabel marks the ConfigMaps of TestShardRangesOnTheApiserver.
const shardRangeLabel = "relect-e2e-shardrange"

// TestShardRangesOnTheApiserver runs range shards' selectors against two
// kube-apiservers: one with the ShardedListAndWatch gate on, one without
// (the suite's). With the gate on, the apiserver accepts every selector
// shardrange writes (S = 1, the first and last ranges of 3, 8 and 1,000,
// both fields) and echoes it in ShardInfo, and listing 300 ConfigMaps with
// each of 4 ranges' selectors partitions them, the client's matcher
// agreeing with the server on every object. With the gate off the
// apiserver ignores the selector (no ShardInfo, every object), and
// informers over shardrange.NewListerWatcher hold the partition the uid
// hashes say — after 40 more ConfigMaps arrive by watch, and whether the
// reflector streams its initial list as watch events or Lists first —
// saying once each that the server did not filter; with the gate on they
// never say it.
func TestShardRangesOnTheApiserver(t *testing.T) {
	plain := requireCluster(t)
	gated, err := startCluster(filepath.Join(workDir, "controlplane-sharded"), "ShardedListAndWatch=true")
	if err != nil {
		t.Fatalf("starting the control plane with ShardedListAndWatch: %v", err)
	}
	t.Cleanup(func() {
		if err := gated.stop(); err != nil {
			t.Errorf("stopping the gated control plane: %v", err)
		}
	})
	const n, more, count = 300, 40, 4
	ranges, err := shardrange.Split(shardrange.UID, count)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		cl      *cluster
		filters bool
	}{{"gate on", gated, true}, {"gate off", plain, false}} {
		cs := labelledClient(t, c.cl, shardRangeLabel)
		createConfigMaps(t, cs, 0, n)
		if c.filters {
			checkSelectorsAccepted(t, cs)
		}
		counts := listRanges(t, cs, ranges, n, c.filters)
		t.Logf("%s: a list with each range's selector: %v ConfigMaps (of %d)", c.name, counts, n)
		have := n
		for _, list := range []bool{false, true} {
			counts, told := informRanges(t, cs, ranges, have, more, list)
			have += more
			how := map[bool]string{false: "streamed as watch events (client-go's default WatchListClient)", true: "a List, then a Watch"}[list]
			t.Logf("%s, initial state %s: the informers over NewListerWatcher hold %v (of %d); told the server did not filter %d times", c.name, how, counts, have, told)
			want := count // one per ListerWatcher
			if c.filters {
				want = 0
			}
			if told != want {
				t.Errorf("%s, %s: told %d times that the server did not filter, want %d", c.name, how, told, want)
			}
		}
	}
}

// labelledClient is an admin clientset without a request timeout (watches
// last) that deletes the namespace's ConfigMaps labelled label when the
// test ends.
func labelledClient(t *testing.T, c *cluster, label string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.adminConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cs.CoreV1().ConfigMaps(namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: label})
		if err != nil {
			t.Errorf("deleting the ConfigMaps: %v", err)
		}
	})
	return cs
}

func createConfigMaps(t *testing.T, cs kubernetes.Interface, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shardrange-%03d", i), Labels: map[string]string{shardRangeLabel: "1"}}}
		if _, err := cs.CoreV1().ConfigMaps(namespace).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", cm.Name, err)
		}
	}
}

// checkSelectorsAccepted: the gated apiserver accepts each selector and
// echoes it, and Parse reads the echo back as the range.
func checkSelectorsAccepted(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	for _, f := range []shardrange.Field{shardrange.UID, shardrange.Namespace} {
		for _, c := range [][2]int{{0, 1}, {0, 3}, {2, 3}, {0, 8}, {7, 8}, {0, 1000}, {999, 1000}} {
			r, err := shardrange.Of(f, c[0], c[1])
			if err != nil {
				t.Fatal(err)
			}
			opts := metav1.ListOptions{LabelSelector: shardRangeLabel, Limit: 1}
			r.Tweak(&opts)
			l, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), opts)
			switch {
			case err != nil:
				t.Errorf("%s refused: %v", r.Selector(), err)
			case l.ShardInfo == nil || l.ShardInfo.Selector != r.Selector():
				t.Errorf("%s: ShardInfo %+v, want it echoed", r.Selector(), l.ShardInfo)
			default:
				if back, err := shardrange.Parse(l.ShardInfo.Selector); err != nil || back != r {
					t.Errorf("Parse(%q) = %+v, %v; want %+v", l.ShardInfo.Selector, back, err, r)
				}
			}
		}
	}
}

// listRanges lists the labelled ConfigMaps with each range's selector and
// checks what the apiserver sent: with filters, ShardInfo, objects the
// client's matcher puts in the range, each object in exactly one range;
// without, no ShardInfo and all n objects. It returns the counts.
func listRanges(t *testing.T, cs kubernetes.Interface, ranges []shardrange.Range, n int, filters bool) []int {
	t.Helper()
	owner := map[string]int{}
	var counts []int
	for i, r := range ranges {
		opts := metav1.ListOptions{LabelSelector: shardRangeLabel}
		r.Tweak(&opts)
		l, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), opts)
		if err != nil {
			t.Fatalf("listing range %d: %v", i, err)
		}
		counts = append(counts, len(l.Items))
		if !filters {
			if l.ShardInfo != nil || len(l.Items) != n {
				t.Errorf("gate off, range %d: ShardInfo %+v and %d items, want none and all %d", i, l.ShardInfo, len(l.Items), n)
			}
			continue
		}
		if l.ShardInfo == nil || l.ShardInfo.Selector != r.Selector() {
			t.Errorf("range %d: ShardInfo %+v, want %q", i, l.ShardInfo, r.Selector())
		}
		for _, cm := range l.Items {
			if in, err := r.Matches(&cm); err != nil || !in {
				t.Errorf("range %d: the apiserver sent %s (uid %s), which Matches puts elsewhere (%v)", i, cm.Name, cm.UID, err)
			}
			if o, dup := owner[cm.Name]; dup {
				t.Errorf("%s is in range %d and in range %d", cm.Name, o, i)
			}
			owner[cm.Name] = i
		}
	}
	if filters && len(owner) != n {
		t.Errorf("the ranges hold %d of the %d ConfigMaps", len(owner), n)
	}
	return counts
}

// informRanges runs one informer per range over NewListerWatcher (with
// list, one whose reflector Lists first instead of streaming the initial
// list as watch events), creates more ConfigMaps once they synced, and waits until they hold n + more in
// all; each must hold exactly the objects whose uid hash (FNV-1a, computed
// here) its range contains. It returns the counts and how many times the
// ListerWatchers said the server did not filter.
func informRanges(t *testing.T, cs kubernetes.Interface, ranges []shardrange.Range, n, more int, list bool) (counts []int, told int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var notFiltered, lists atomic.Int32
	stores := make([]cache.Store, len(ranges))
	for i, r := range ranges {
		plain := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace,
			func(o *metav1.ListOptions) { o.LabelSelector = shardRangeLabel })
		var inner cache.ListerWatcher = plain
		if list {
			inner = listFirst{plain, &lists}
		}
		lw := shardrange.NewListerWatcher(inner, r, func() { notFiltered.Add(1) })
		inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
		stores[i] = inf.GetStore()
		wg.Go(func() { inf.RunWithContext(ctx) })
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatalf("range %d's informer did not sync", i)
		}
	}
	if list && lists.Load() < int32(len(ranges)) {
		t.Errorf("the reflectors listed %d times, want at least once each (%d)", lists.Load(), len(ranges))
	}
	createConfigMaps(t, cs, n, n+more)
	total := func() int {
		sum := 0
		for _, s := range stores {
			sum += len(s.List())
		}
		return sum
	}
	deadline := time.Now().Add(30 * time.Second)
	for total() != n+more && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for i, r := range ranges {
		var got, want []string
		for _, o := range stores[i].List() {
			got = append(got, o.(*corev1.ConfigMap).Name)
		}
		all, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: shardRangeLabel})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range all.Items {
			if r.Contains(fnv64a(string(cm.UID))) {
				want = append(want, cm.Name)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("range %d's informer holds %d ConfigMaps, want the %d whose uid hash it contains", i, len(got), len(want))
		}
		counts = append(counts, len(got))
	}
	return counts, int(notFiltered.Load())
}

// listFirst is a ListerWatcher that tells client-go's reflector not to
// stream its initial list as watch events, so that it Lists, then Watches.
// It counts its Lists.
type listFirst struct {
	*cache.ListWatch
	lists *atomic.Int32
}

func (listFirst) IsWatchListSemanticsUnSupported() bool { return true }

func (l listFirst) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	l.lists.Add(1)
	return l.ListWatch.ListWithContext(ctx, o)
}

// fnv64a is the KEP's hash, from the standard library.
func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
