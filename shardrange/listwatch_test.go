package shardrange_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/relect/relect/shardrange"
)

// fakeServer is a ListerWatcher over a fixed set of ConfigMaps that
// filters by ShardSelector, or not, as an apiserver with the
// ShardedListAndWatch gate on or off; it records the options it was given.
type fakeServer struct {
	filters bool
	objects []*corev1.ConfigMap
	mu      sync.Mutex
	asked   []string // the ShardSelector of each call
	watches []*watch.FakeWatcher
}

func (s *fakeServer) List(o metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.asked = append(s.asked, o.ShardSelector)
	s.mu.Unlock()
	list := &corev1.ConfigMapList{}
	r, err := shardrange.Parse(o.ShardSelector)
	if err != nil {
		return nil, err
	}
	for _, cm := range s.objects {
		if in, _ := r.Matches(cm); in || !s.filters {
			list.Items = append(list.Items, *cm)
		}
	}
	if s.filters && o.ShardSelector != "" {
		list.ShardInfo = &metav1.ShardInfo{Selector: o.ShardSelector}
	}
	return list, nil
}

func (s *fakeServer) Watch(o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, o.ShardSelector)
	w := watch.NewFakeWithChanSize(len(s.objects)+2, false)
	s.watches = append(s.watches, w)
	return w, nil
}

// objects returns n ConfigMaps with distinct uids.
func objects(n int) []*corev1.ConfigMap {
	out := make([]*corev1.ConfigMap, n)
	for i := range out {
		out[i] = configMap(fmt.Sprintf("%08x-1111-4222-8333-%012x", i*2654435761, i), "default")
	}
	return out
}

func names(list runtime.Object) []string {
	var out []string
	for _, cm := range list.(*corev1.ConfigMapList).Items {
		out = append(out, cm.Name)
	}
	return out
}

// inRange returns the names of the objects r matches, by Matches.
func inRange(t *testing.T, r shardrange.Range, objs []*corev1.ConfigMap) []string {
	var out []string
	for _, cm := range objs {
		if in, err := r.Matches(cm); assert.NoError(t, err) && in {
			out = append(out, cm.Name)
		}
	}
	return out
}

// TestListerWatcherList: with the apiserver filtering (ShardInfo echoed)
// and without (no ShardInfo, every object sent), the list the wrapper
// returns is the range's objects; it asked for the range's selector each
// time, and said once, only without filtering, that the server did not
// filter.
func TestListerWatcherList(t *testing.T) {
	objs := objects(1000)
	r, _ := shardrange.Of(shardrange.UID, 2, 4)
	want := inRange(t, r, objs)
	for _, filters := range []bool{true, false} {
		srv := &fakeServer{filters: filters, objects: objs}
		told := 0
		lw := shardrange.NewListerWatcher(srv, r, func() { told++ })
		for range 2 {
			list, err := lw.List(metav1.ListOptions{ShardSelector: "replaced"})
			require.NoError(t, err)
			assert.Equal(t, want, names(list), "server filters: %v", filters)
		}
		list, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, names(list), len(want))
		assert.Equal(t, []string{r.Selector(), r.Selector(), r.Selector()}, srv.asked)
		if filters {
			assert.Zero(t, told, "the server filtered: nothing to say")
		} else {
			assert.Equal(t, 1, told, "said once that the server did not filter")
		}
		t.Logf("server filters %v: %d of %d objects in range 2 of 4", filters, len(want), len(objs))
	}
}

// TestListerWatcherWatch: events of objects outside the range are dropped
// (and said once), those inside and bookmarks pass, in order.
func TestListerWatcherWatch(t *testing.T) {
	objs := objects(200)
	r, _ := shardrange.Of(shardrange.UID, 0, 3)
	srv := &fakeServer{objects: objs}
	told := 0
	lw := shardrange.NewListerWatcher(srv, r, func() { told++ })
	w, err := lw.Watch(metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	assert.Equal(t, []string{r.Selector()}, srv.asked)
	fake := srv.watches[0]
	for i, cm := range objs {
		kind := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}[i%3]
		fake.Action(kind, cm)
	}
	fake.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}})
	want := append(inRange(t, r, objs), "") // the bookmark has no name
	var got []string
	for range want {
		got = append(got, (<-w.ResultChan()).Object.(*corev1.ConfigMap).Name)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 1, told)
	t.Logf("%d of %d events kept for range 0 of 3, and the bookmark", len(want)-1, len(objs))
}

// TestListerWatcherUnstructured: a dynamic client's list carries
// ShardInfo in its metadata map, and is read there.
func TestListerWatcherUnstructured(t *testing.T) {
	r, _ := shardrange.Of(shardrange.UID, 1, 2)
	objs := objects(100)
	list := func(info bool) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{Object: map[string]any{"metadata": map[string]any{}}}
		if info {
			l.Object["metadata"] = map[string]any{"shardInfo": map[string]any{"selector": r.Selector()}}
		}
		for _, cm := range objs {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
			require.NoError(t, err)
			l.Items = append(l.Items, unstructured.Unstructured{Object: u})
		}
		return l
	}
	for _, info := range []bool{true, false} {
		told := 0
		lw := shardrange.NewListerWatcher(&cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list(info), nil },
		}, r, func() { told++ })
		got, err := lw.List(metav1.ListOptions{})
		require.NoError(t, err)
		n := len(got.(*unstructured.UnstructuredList).Items)
		if info {
			assert.Equal(t, len(objs), n, "ShardInfo read: the list is taken as filtered")
			assert.Zero(t, told)
		} else {
			assert.Len(t, inRange(t, r, objs), n)
			assert.Equal(t, 1, told)
		}
	}
}

// TestListerWatcherZeroRange: the zero Range passes lists and watches
// unchanged and asks for no selector.
func TestListerWatcherZeroRange(t *testing.T) {
	srv := &fakeServer{objects: objects(10)}
	lw := shardrange.NewListerWatcher(srv, shardrange.Range{}, func() { t.Error("the zero Range said the server did not filter") })
	list, err := lw.List(metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, names(list), 10)
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	w.Stop()
	assert.Equal(t, []string{"", ""}, srv.asked)
	assert.False(t, lw.IsWatchListSemanticsUnSupported())
}
