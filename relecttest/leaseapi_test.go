package relecttest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relect/relect/relecttest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

func leases(api *relecttest.LeaseAPI, client string) coordinationv1client.LeaseInterface {
	return api.Client(client).Clientset().CoordinationV1().Leases("ns")
}

func newLease(holder string, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds},
	}
}

// The optimistic concurrency the stock fake clientset lacks.
func TestStrictResourceVersions(t *testing.T) {
	ctx := context.Background()
	api := relecttest.NewLeaseAPI()
	a, b := leases(api, "a"), leases(api, "b")

	created, err := a.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, created.ResourceVersion)
	assert.Equal(t, "ns", created.Namespace)

	_, err = b.Create(ctx, newLease("b", 15), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "create of an existing Lease: %v", err)

	mine, err := b.Get(ctx, "l", metav1.GetOptions{})
	require.NoError(t, err)
	*mine.Spec.HolderIdentity = "b"
	updated, err := b.Update(ctx, mine, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	*created.Spec.HolderIdentity = "a"
	_, err = a.Update(ctx, created, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "update with a stale resourceVersion: %v", err)

	noRV := updated.DeepCopy()
	noRV.ResourceVersion = ""
	_, err = a.Update(ctx, noRV, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "update without a resourceVersion: %v", err)

	bad := updated.DeepCopy()
	zero := int32(0)
	bad.Spec.LeaseDurationSeconds = &zero
	_, err = a.Update(ctx, bad, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "validation: %v", err)

	_, err = a.Get(ctx, "missing", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = a.Patch(ctx, "l", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsMethodNotSupported(err), "verbs leader election never uses are refused: %v", err)

	assert.Equal(t, "b", api.Holder("ns", "l"))
	assert.Equal(t, 3, api.Client("a").Calls(relecttest.VerbUpdate))
	assert.Equal(t, 1, api.Client("b").Calls(relecttest.VerbGet))
}

// Hand edits bypass validation, bump the resourceVersion and are watched.
func TestHandEditsAndWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		api := relecttest.NewLeaseAPI()
		c := leases(api, "a")
		w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l"})
		require.NoError(t, err)
		defer w.Stop()

		created, err := c.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, api.SetHolder("ns", "l", "b"))
		require.NoError(t, api.Edit("ns", "l", func(l *coordinationv1.Lease) {
			neg := int32(-5)
			l.Spec.LeaseDurationSeconds = &neg
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Hour)}
		}))
		require.NoError(t, api.Delete("ns", "l"))

		var got []watch.EventType
		var holders []string
		for range 4 {
			ev := <-w.ResultChan()
			got = append(got, ev.Type)
			holders = append(holders, *ev.Object.(*coordinationv1.Lease).Spec.HolderIdentity)
		}
		assert.Equal(t, []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Deleted}, got)
		assert.Equal(t, []string{"a", "b", "b", "b"}, holders)
		_, err = c.Update(ctx, created, metav1.UpdateOptions{})
		assert.True(t, apierrors.IsNotFound(err))
	})
}

// Faults are per client and heal.
func TestFaultsPerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		api := relecttest.NewLeaseAPI()
		a, b := leases(api, "a"), leases(api, "b")
		_, err := a.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
		require.NoError(t, err)

		api.Client("a").FailNext(2, relecttest.Error(503))
		for range 2 {
			_, err = a.Get(ctx, "l", metav1.GetOptions{})
			assert.True(t, apierrors.IsServiceUnavailable(err))
		}
		_, err = a.Get(ctx, "l", metav1.GetOptions{})
		assert.NoError(t, err, "only the next 2")

		api.Client("a").Fail(relecttest.Error(403))
		_, err = a.Get(ctx, "l", metav1.GetOptions{})
		assert.True(t, apierrors.IsForbidden(err))
		_, err = b.Get(ctx, "l", metav1.GetOptions{})
		assert.NoError(t, err, "b is unaffected")
		api.Client("a").Heal()

		api.Client("a").SetLatency(3 * time.Second)
		start := time.Now()
		_, err = a.Get(ctx, "l", metav1.GetOptions{})
		assert.NoError(t, err)
		assert.Equal(t, 3*time.Second, time.Since(start))
		api.Client("a").Heal()

		api.Client("a").Partition()
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start = time.Now()
		_, err = a.Get(tctx, "l", metav1.GetOptions{})
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 10*time.Second, time.Since(start), "hangs until the context ends")
		api.Client("a").Heal()

		api.Client("a").Pause()
		done := make(chan error)
		tctx, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
		go func() {
			_, err := a.Get(tctx, "l", metav1.GetOptions{})
			done <- err
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a paused call returned")
		default:
		}
		api.Client("a").Resume()
		assert.ErrorIs(t, <-done, context.DeadlineExceeded, "it sees its context ended only when resumed")
		assert.Equal(t, []string{"a", "b"}, api.Clients())
	})
}

// A watch from a resourceVersion replays what came after it.
func TestWatchResumesFromResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		api := relecttest.NewLeaseAPI()
		c := leases(api, "a")
		created, err := c.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, api.SetHolder("ns", "l", "b"))
		require.NoError(t, api.SetHolder("ns", "l", "c"))
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		require.NoError(t, err)
		for _, want := range []string{"b", "c"} {
			ev := <-w.ResultChan()
			assert.Equal(t, want, *ev.Object.(*coordinationv1.Lease).Spec.HolderIdentity)
		}
		api.CloseWatches()
		_, open := <-w.ResultChan()
		assert.False(t, open, "CloseWatches closes the result channel")
		w.Stop()
	})
}

// A candidate that read the Lease and opens its watch from the Lease's
// resourceVersion keeps its place however many other Leases changed
// meanwhile (a thousand candidates registering beside it), as with the
// apiserver's watch cache, which keeps 75 s of changes. With a history of
// the last 256 changes it got 410 Gone, and the demo at -candidates 1000
// printed dozens of "too old resource version" errors.
func TestSlowWatcherKeepsItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		api := relecttest.NewLeaseAPI()
		c := leases(api, "a")
		_, err := c.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
		require.NoError(t, err)
		read, err := c.Get(ctx, "l", metav1.GetOptions{})
		require.NoError(t, err)
		for i := range 1000 {
			reg := newLease(fmt.Sprint(i), 15)
			reg.Name = fmt.Sprintf("registration-%d", i)
			_, err := leases(api, reg.Name).Create(ctx, reg, metav1.CreateOptions{})
			require.NoError(t, err)
			time.Sleep(time.Millisecond) // a second of registrations
		}
		w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l", ResourceVersion: read.ResourceVersion})
		require.NoError(t, err, "a watch from the version read a second ago")
		defer w.Stop()
		require.NoError(t, api.SetHolder("ns", "l", "b"))
		ev := <-w.ResultChan()
		assert.Equal(t, watch.Modified, ev.Type)
		assert.Equal(t, "b", *ev.Object.(*coordinationv1.Lease).Spec.HolderIdentity, "the next change of l, nothing missed")
	})
}

// A resourceVersion older than the history — more than 75 s and more than
// 100 changes ago — gets 410 Gone, as from the apiserver's watch cache;
// one within the last 100 changes does not, however old.
func TestWatchFromTooOldVersionIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		api := relecttest.NewLeaseAPI()
		c := leases(api, "a")
		created, err := c.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
		require.NoError(t, err)
		time.Sleep(time.Hour)
		require.NoError(t, api.SetHolder("ns", "l", "b"))
		w, err := c.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		require.NoError(t, err, "an hour old, but among the last 100 changes")
		w.Stop()

		for range 99 {
			require.NoError(t, api.SetHolder("ns", "l", "c"))
		}
		time.Sleep(76 * time.Second)
		require.NoError(t, api.SetHolder("ns", "l", "d")) // 101 changes after it, all but this one 76 s old
		_, err = c.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		assert.True(t, apierrors.IsResourceExpired(err), "too old: %v", err)
		assert.ErrorContains(t, err, "too old resource version")
	})
}

// An observer learns which Lease each call named: the object, or a watch's
// or list's metadata.name field selector ("" for one by label).
func TestObserveNamesTheLease(t *testing.T) {
	ctx := context.Background()
	api := relecttest.NewLeaseAPI()
	var got []string
	stop := api.Observe(func(c relecttest.Call) { got = append(got, c.Verb+" "+c.Name) })
	a := leases(api, "a")
	l, err := a.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = a.Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = a.Get(ctx, "other", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	w, err := a.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=l"})
	require.NoError(t, err)
	w.Stop()
	w, err = a.Watch(ctx, metav1.ListOptions{LabelSelector: "x=y"})
	require.NoError(t, err)
	w.Stop()
	_, err = a.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, a.Delete(ctx, "l", metav1.DeleteOptions{}))
	stop()
	assert.Equal(t, []string{"create l", "update l", "get other", "watch l", "watch ", "list ", "delete l"}, got)
}

// A Lease's annotations are held to the apiserver's 256 KiB in all, as a
// shard table naming many shards would meet on a real cluster.
func TestAnnotationsLimit(t *testing.T) {
	api := relecttest.NewLeaseAPI()
	a := leases(api, "a")
	ctx := context.Background()
	big := newLease("a", 15)
	big.Annotations = map[string]string{"example.com/table": strings.Repeat("x", 256<<10)}
	_, err := a.Create(ctx, big, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "create over 256 KiB: %v", err)
	assert.ErrorContains(t, err, "metadata.annotations")

	l, err := a.Create(ctx, newLease("a", 15), metav1.CreateOptions{})
	require.NoError(t, err)
	l.Annotations = map[string]string{"example.com/table": strings.Repeat("x", 200<<10)}
	l, err = a.Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err, "200 KiB fits")
	l.Annotations["example.com/more"] = strings.Repeat("x", 60<<10)
	_, err = a.Update(ctx, l, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "update to 260 KiB in all: %v", err)
}
